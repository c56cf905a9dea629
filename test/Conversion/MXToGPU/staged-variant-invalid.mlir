// RUN: mx-opt %s --convert-mx-to-gpu="staged-variant=2" --verify-diagnostics

// The candidates of the staged fused kernel are 0 and 1.
// expected-error @below {{staged-variant=2: expected 0 to 1}}
module {
}
