// RUN: mx-opt %s --pass-pipeline="builtin.module(gpu.module(mx-align-workgroup-buffers{alignment=24}))" --verify-diagnostics

// expected-error @below {{mx-align-workgroup-buffers: alignment must be a positive power of two, got 24}}
gpu.module @kernels {
  gpu.func @tile() workgroup(%t : memref<32xbf16, #gpu.address_space<workgroup>>) kernel {
    gpu.return
  }
}
