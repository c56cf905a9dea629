// RUN: mx-opt %s --pass-pipeline="builtin.module(gpu.module(mx-align-workgroup-buffers))" --split-input-file --verify-diagnostics | FileCheck %s
// RUN: mx-opt %s --pass-pipeline="builtin.module(gpu.module(mx-align-workgroup-buffers{alignment=64}))" --split-input-file --verify-diagnostics | FileCheck %s --check-prefix=A64

// Every workgroup buffer of every function gets 16-byte alignment (or the
// option's); a larger one already given stays, private buffers are left
// alone.
// CHECK-LABEL: gpu.module @kernels
// CHECK: gpu.func @tile() workgroup(%{{.*}} : memref<32x256xbf16, #gpu.address_space<workgroup>> {llvm.align = 16 : i64}, %{{.*}} : memref<8xf32, #gpu.address_space<workgroup>> {llvm.align = 16 : i64}) private(%{{.*}} : memref<4xf32, #gpu.address_space<private>>) kernel
// CHECK: gpu.func @aligned() workgroup(%{{.*}} : memref<64xi8, #gpu.address_space<workgroup>> {llvm.align = 128 : i64}) kernel
// CHECK: gpu.func @none() kernel
// A64: gpu.func @tile() workgroup(%{{.*}} : memref<32x256xbf16, #gpu.address_space<workgroup>> {llvm.align = 64 : i64}, %{{.*}} : memref<8xf32, #gpu.address_space<workgroup>> {llvm.align = 64 : i64})
// A64: gpu.func @aligned() workgroup(%{{.*}} : memref<64xi8, #gpu.address_space<workgroup>> {llvm.align = 128 : i64}) kernel
gpu.module @kernels {
  gpu.func @tile() workgroup(%t : memref<32x256xbf16, #gpu.address_space<workgroup>>, %m : memref<8xf32, #gpu.address_space<workgroup>>) private(%p : memref<4xf32, #gpu.address_space<private>>) kernel {
    gpu.return
  }
  gpu.func @aligned() workgroup(%t : memref<64xi8, #gpu.address_space<workgroup>> {llvm.align = 128 : i64}) kernel {
    gpu.return
  }
  gpu.func @none() kernel {
    gpu.return
  }
}
