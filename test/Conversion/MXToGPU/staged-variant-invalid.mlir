// RUN: mx-opt %s --convert-mx-to-gpu="staged-variant=3" --verify-diagnostics

// The candidates of the staged fused kernel are 0 to 2.
// expected-error @below {{staged-variant=3: expected 0 to 2}}
module {
}
