// RUN: mx-opt %s --convert-mx-to-gpu="staged-variant=4" --verify-diagnostics

// The candidates of the staged fused kernel are 0 to 3.
// expected-error @below {{staged-variant=4: expected 0 to 3}}
module {
}
