// RUN: mx-opt %s --pass-pipeline="builtin.module(gpu.module(mx-kernel-occupancy))" --split-input-file | FileCheck %s

// A kernel whose body asks for CTAs per SM gets the largest request as
// nvvm.minctasm (PTX .minnctapersm), and the requests are dropped; a kernel
// that asks for none is left as it is.
// CHECK-LABEL: gpu.module @asks
// CHECK: gpu.func @k() kernel attributes {nvvm.minctasm = 4 : i32}
// CHECK-NOT: mx.min_ctas_per_sm
// CHECK: gpu.func @plain() kernel {
// CHECK-NOT: nvvm.minctasm
gpu.module @asks {
  gpu.func @k() kernel {
    gpu.barrier {mx.min_ctas_per_sm = 2 : i64}
    gpu.barrier {mx.min_ctas_per_sm = 4 : i64}
    gpu.return
  }
  gpu.func @plain() kernel {
    gpu.barrier
    gpu.return
  }
}
