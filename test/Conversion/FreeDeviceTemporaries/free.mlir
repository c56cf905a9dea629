// mx-free-device-temporaries frees each gpu.alloc'd buffer that the function
// does not hand on, right after the last op of its block that uses it or a
// value derived from it; a returned, escaping or already freed buffer is left.
// RUN: mx-opt %s --split-input-file --pass-pipeline="builtin.module(func.func(mx-free-device-temporaries))" | FileCheck %s

// An intermediate read by a kernel launch through its device address: freed
// after the launch, not after the last op that mentions it directly; the
// result is the caller's.
// CHECK-LABEL: func.func @intermediate(
// CHECK: %[[TMP:.*]] = gpu.alloc () : memref<4x32xf8E8M0FNU>
// CHECK: %[[OUT:.*]] = gpu.alloc () : memref<128xf32>
// CHECK: memref.extract_aligned_pointer_as_index %[[TMP]]
// CHECK: gpu.launch_func @k::@k
// CHECK-NEXT: gpu.dealloc %[[TMP]] : memref<4x32xf8E8M0FNU>
// CHECK-NEXT: return %[[OUT]]
// CHECK-NOT: gpu.dealloc %[[OUT]]
module attributes {gpu.container_module} {
func.func @intermediate(%x: memref<128xf32>) -> memref<128xf32> {
  %c1 = arith.constant 1 : index
  %tmp = gpu.alloc () : memref<4x32xf8E8M0FNU>
  gpu.launch blocks(%bx, %by, %bz) in (%gx = %c1, %gy = %c1, %gz = %c1)
             threads(%tx, %ty, %tz) in (%sx = %c1, %sy = %c1, %sz = %c1) {
    %c0 = arith.constant 0 : index
    %v = arith.constant 1.0 : f8E8M0FNU
    memref.store %v, %tmp[%c0, %c0] : memref<4x32xf8E8M0FNU>
    gpu.terminator
  }
  %out = gpu.alloc () : memref<128xf32>
  %address = memref.extract_aligned_pointer_as_index %tmp : memref<4x32xf8E8M0FNU> -> index
  %i = arith.index_cast %address : index to i64
  %p = llvm.inttoptr %i : i64 to !llvm.ptr
  gpu.launch_func @k::@k blocks in (%c1, %c1, %c1) threads in (%c1, %c1, %c1) args(%p : !llvm.ptr, %out : memref<128xf32>)
  return %out : memref<128xf32>
}

gpu.module @k {
  gpu.func @k(%p: !llvm.ptr, %out: memref<128xf32>) kernel {
    gpu.return
  }
}
}

// -----

// A tensor map of the buffer refers to it: the free follows the launch that
// takes the map (loaded from what mxrtEncodeTensorMap returns), not the
// encoding call. Two temporaries after one op are freed in allocation order.
// CHECK-LABEL: func.func @tensor_map(
// CHECK: %[[A:.*]] = gpu.alloc () : memref<256xi8>
// CHECK: %[[B:.*]] = gpu.alloc () : memref<256xi8>
// CHECK: llvm.call @mxrtEncodeTensorMap
// CHECK: %[[MAP:.*]] = llvm.load
// CHECK-NOT: gpu.dealloc
// CHECK: gpu.launch_func @k::@k {{.*}}args(%[[MAP]] : !llvm.array<16 x i64>
// CHECK-NEXT: gpu.dealloc %[[A]]
// CHECK-NEXT: gpu.dealloc %[[B]]
// CHECK-NEXT: return
module attributes {gpu.container_module} {
llvm.func @mxrtEncodeTensorMap(!llvm.ptr, !llvm.ptr, i32, i32, !llvm.ptr, !llvm.ptr, i32) -> !llvm.ptr
func.func @tensor_map(%dims: !llvm.ptr, %box: !llvm.ptr) {
  %c1 = arith.constant 1 : index
  %c0_i32 = arith.constant 0 : i32
  %c1_i64 = arith.constant 1 : i64
  %a = gpu.alloc () : memref<256xi8>
  %b = gpu.alloc () : memref<256xi8>
  %memory = llvm.alloca %c1_i64 x !llvm.array<16 x i64> {alignment = 64 : i64} : (i64) -> !llvm.ptr
  %address = memref.extract_aligned_pointer_as_index %a : memref<256xi8> -> index
  %i = arith.index_cast %address : index to i64
  %p = llvm.inttoptr %i : i64 to !llvm.ptr
  %encoded = llvm.call @mxrtEncodeTensorMap(%memory, %p, %c0_i32, %c0_i32, %dims, %box, %c0_i32) : (!llvm.ptr, !llvm.ptr, i32, i32, !llvm.ptr, !llvm.ptr, i32) -> !llvm.ptr
  %map = llvm.load %encoded {alignment = 64 : i64} : !llvm.ptr -> !llvm.array<16 x i64>
  gpu.launch_func @k::@k blocks in (%c1, %c1, %c1) threads in (%c1, %c1, %c1) args(%map : !llvm.array<16 x i64>, %b : memref<256xi8>)
  return
}

gpu.module @k {
  gpu.func @k(%map: !llvm.array<16 x i64>, %b: memref<256xi8>) kernel {
    gpu.return
  }
}
}

// -----

// Uses inside host regions (guarded device work, a loop of runtime calls on
// slices): the free follows the op that holds the region, on every path.
// CHECK-LABEL: func.func @regions(
// CHECK: %[[GUARDED:.*]] = gpu.alloc () : memref<64xf32>
// CHECK: %[[LOOPED:.*]] = gpu.alloc () : memref<4x64xf32>
// CHECK: scf.if
// CHECK-NEXT: gpu.memset %[[GUARDED]]
// CHECK-NEXT: }
// CHECK-NEXT: gpu.dealloc %[[GUARDED]]
// CHECK-NEXT: scf.for
// CHECK: llvm.getelementptr
// CHECK: llvm.call @mxrtScaledMatmul
// CHECK-NEXT: }
// CHECK-NEXT: gpu.dealloc %[[LOOPED]]
// CHECK-NEXT: return
llvm.func @mxrtScaledMatmul(i64, i64, i64, !llvm.ptr, i32, i32, !llvm.ptr, i32, !llvm.ptr, i32, i32, !llvm.ptr, i32, !llvm.ptr, !llvm.ptr, i32, !llvm.ptr) -> i32
func.func @regions(%ok: i1, %x: !llvm.ptr) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c4 = arith.constant 4 : index
  %f = arith.constant 0.0 : f32
  %i0 = arith.constant 0 : i32
  %i64 = arith.constant 64 : i64
  %guarded = gpu.alloc () : memref<64xf32>
  %looped = gpu.alloc () : memref<4x64xf32>
  %address = memref.extract_aligned_pointer_as_index %looped : memref<4x64xf32> -> index
  %i = arith.index_cast %address : index to i64
  %base = llvm.inttoptr %i : i64 to !llvm.ptr
  scf.if %ok {
    gpu.memset %guarded, %f : memref<64xf32>, f32
  }
  scf.for %s = %c0 to %c4 step %c1 {
    %n = arith.index_cast %s : index to i64
    %slice = llvm.getelementptr %base[%n] : (!llvm.ptr, i64) -> !llvm.ptr, f32
    %status = llvm.call @mxrtScaledMatmul(%i64, %i64, %i64, %x, %i0, %i0, %x, %i0, %x, %i0, %i0, %x, %i0, %x, %slice, %i0, %x) : (i64, i64, i64, !llvm.ptr, i32, i32, !llvm.ptr, i32, !llvm.ptr, i32, i32, !llvm.ptr, i32, !llvm.ptr, !llvm.ptr, i32, !llvm.ptr) -> i32
  }
  return
}

// -----

// A buffer allocated inside a region is freed inside it.
// CHECK-LABEL: func.func @allocated_in_region(
// CHECK: scf.if
// CHECK-NEXT: %[[T:.*]] = gpu.alloc
// CHECK-NEXT: gpu.memset %[[T]]
// CHECK-NEXT: gpu.dealloc %[[T]]
// CHECK-NEXT: }
func.func @allocated_in_region(%ok: i1) {
  %f = arith.constant 0.0 : f32
  scf.if %ok {
    %t = gpu.alloc () : memref<64xf32>
    gpu.memset %t, %f : memref<64xf32>, f32
  }
  return
}

// -----

// Views and casts of a temporary are its uses too; the view the function
// returns keeps its buffer (the caller owns it), and so do the buffers that
// escape: stored, passed to a call, yielded from a region, given to a
// runtime function the pass does not know. None of those is freed.
// CHECK-LABEL: func.func @views(
// CHECK: %[[T:.*]] = gpu.alloc () : memref<64xf32>
// CHECK: %[[R:.*]] = gpu.alloc () : memref<64xf32>
// CHECK: %[[V:.*]] = memref.expand_shape %[[T]]
// CHECK: %[[C:.*]] = memref.cast %[[V]]
// CHECK: gpu.memcpy %[[C]]
// CHECK-NEXT: gpu.dealloc %[[T]] : memref<64xf32>
// CHECK-NEXT: %[[RV:.*]] = memref.expand_shape %[[R]]
// CHECK-NEXT: return %[[RV]]
func.func @views(%x: memref<8x8xf32>) -> memref<8x8xf32> {
  %t = gpu.alloc () : memref<64xf32>
  %r = gpu.alloc () : memref<64xf32>
  %v = memref.expand_shape %t [[0, 1]] output_shape [8, 8] : memref<64xf32> into memref<8x8xf32>
  %c = memref.cast %v : memref<8x8xf32> to memref<?x8xf32>
  gpu.memcpy %c, %x : memref<?x8xf32>, memref<8x8xf32>
  %rv = memref.expand_shape %r [[0, 1]] output_shape [8, 8] : memref<64xf32> into memref<8x8xf32>
  return %rv : memref<8x8xf32>
}

// CHECK-LABEL: func.func @escapes(
// CHECK-NOT: gpu.dealloc
// CHECK: return
func.func private @keep(memref<64xf32>)
llvm.func @mxrtExportDLPack(!llvm.ptr) -> !llvm.ptr
func.func @escapes(%ok: i1, %slot: !llvm.ptr) -> memref<64xf32> {
  %called = gpu.alloc () : memref<64xf32>
  func.call @keep(%called) : (memref<64xf32>) -> ()
  %stored = gpu.alloc () : memref<64xf32>
  %address = memref.extract_aligned_pointer_as_index %stored : memref<64xf32> -> index
  %i = arith.index_cast %address : index to i64
  llvm.store %i, %slot : i64, !llvm.ptr
  %owned = gpu.alloc () : memref<64xf32>
  %a2 = memref.extract_aligned_pointer_as_index %owned : memref<64xf32> -> index
  %i2 = arith.index_cast %a2 : index to i64
  %p2 = llvm.inttoptr %i2 : i64 to !llvm.ptr
  %handle = llvm.call @mxrtExportDLPack(%p2) : (!llvm.ptr) -> !llvm.ptr
  %yielded = gpu.alloc () : memref<64xf32>
  %other = gpu.alloc () : memref<64xf32>
  %chosen = scf.if %ok -> memref<64xf32> {
    scf.yield %yielded : memref<64xf32>
  } else {
    scf.yield %other : memref<64xf32>
  }
  return %chosen : memref<64xf32>
}

// -----

// A buffer a lowering frees already (through any alias) is not freed again;
// an unused one is freed at once; an asynchronous allocation is left to the
// tokens that order it.
// CHECK-LABEL: func.func @already_freed(
// CHECK: %[[T:.*]] = gpu.alloc () : memref<64xf32>
// CHECK: %[[V:.*]] = memref.expand_shape %[[T]]
// CHECK: gpu.dealloc %[[V]]
// CHECK-NOT: gpu.dealloc
// CHECK: %[[U:.*]] = gpu.alloc () : memref<16xf32>
// CHECK-NEXT: gpu.dealloc %[[U]]
// CHECK: gpu.alloc async
// CHECK-NOT: gpu.dealloc
// CHECK: return
func.func @already_freed(%x: memref<8x8xf32>) {
  %t = gpu.alloc () : memref<64xf32>
  %v = memref.expand_shape %t [[0, 1]] output_shape [8, 8] : memref<64xf32> into memref<8x8xf32>
  gpu.memcpy %v, %x : memref<8x8xf32>, memref<8x8xf32>
  gpu.dealloc %v : memref<8x8xf32>
  %u = gpu.alloc () : memref<16xf32>
  %token = gpu.wait async
  %a, %t2 = gpu.alloc async [%token] () : memref<16xf32>
  gpu.wait [%t2]
  return
}

// -----

// A placed all-gather uses its buffers on the communicator's side stream
// until the next mxrtCollectivesJoin: they are freed after the join, not
// after the call; without a join after it a buffer is never freed here. A
// memref descriptor built around a buffer's address (mx::viewRows) refers
// to it.
// CHECK-LABEL: func.func @placed(
// CHECK: %[[SEND:.*]] = gpu.alloc () : memref<64xi8>
// CHECK: %[[RECV:.*]] = gpu.alloc () : memref<128xi8>
// CHECK: %[[VIEWED:.*]] = gpu.alloc () : memref<128xi8>
// CHECK: gpu.launch_func @k::@k
// CHECK-NEXT: gpu.dealloc %[[VIEWED]]
// CHECK-NOT: gpu.dealloc
// CHECK: llvm.call @mxrtAllGatherPlaced
// CHECK-NEXT: arith.constant
// CHECK-NEXT: llvm.call @mxrtCollectivesJoin
// CHECK-NEXT: gpu.dealloc %[[SEND]]
// CHECK-NEXT: gpu.dealloc %[[RECV]]
// CHECK-NEXT: return
// CHECK-LABEL: func.func @placed_without_join(
// CHECK-NOT: gpu.dealloc
module attributes {gpu.container_module} {
llvm.func @mxrtAllGatherPlaced(!llvm.ptr, !llvm.ptr, i64, i64, i64, i32, !llvm.ptr) -> i32
llvm.func @mxrtCollectivesJoin(!llvm.ptr) -> i32
func.func @placed() {
  %send = gpu.alloc () : memref<64xi8>
  %recv = gpu.alloc () : memref<128xi8>
  %viewed = gpu.alloc () : memref<128xi8>
  %a = memref.extract_aligned_pointer_as_index %send : memref<64xi8> -> index
  %ai = arith.index_cast %a : index to i64
  %ap = llvm.inttoptr %ai : i64 to !llvm.ptr
  %b = memref.extract_aligned_pointer_as_index %recv : memref<128xi8> -> index
  %bi = arith.index_cast %b : index to i64
  %bp = llvm.inttoptr %bi : i64 to !llvm.ptr
  %v = memref.extract_aligned_pointer_as_index %viewed : memref<128xi8> -> index
  %vi = arith.index_cast %v : index to i64
  %vp = llvm.inttoptr %vi : i64 to !llvm.ptr
  %undef = llvm.mlir.poison : !llvm.struct<(ptr, ptr, i64, array<1 x i64>, array<1 x i64>)>
  %d = llvm.insertvalue %vp, %undef[1] : !llvm.struct<(ptr, ptr, i64, array<1 x i64>, array<1 x i64>)>
  %view = builtin.unrealized_conversion_cast %d : !llvm.struct<(ptr, ptr, i64, array<1 x i64>, array<1 x i64>)> to memref<64xi8>
  %c1 = arith.constant 1 : index
  gpu.launch_func @k::@k blocks in (%c1, %c1, %c1) threads in (%c1, %c1, %c1) args(%view : memref<64xi8>)
  %n = arith.constant 64 : i64
  %two = arith.constant 2 : i32
  %null = llvm.mlir.zero : !llvm.ptr
  %s = llvm.call @mxrtAllGatherPlaced(%ap, %bp, %n, %n, %n, %two, %null) : (!llvm.ptr, !llvm.ptr, i64, i64, i64, i32, !llvm.ptr) -> i32
  %unrelated = arith.constant 0 : i32
  %j = llvm.call @mxrtCollectivesJoin(%null) : (!llvm.ptr) -> i32
  return
}
func.func @placed_without_join() {
  %send = gpu.alloc () : memref<64xi8>
  %a = memref.extract_aligned_pointer_as_index %send : memref<64xi8> -> index
  %ai = arith.index_cast %a : index to i64
  %ap = llvm.inttoptr %ai : i64 to !llvm.ptr
  %n = arith.constant 64 : i64
  %two = arith.constant 2 : i32
  %null = llvm.mlir.zero : !llvm.ptr
  %s = llvm.call @mxrtAllGatherPlaced(%ap, %ap, %n, %n, %n, %two, %null) : (!llvm.ptr, !llvm.ptr, i64, i64, i64, i32, !llvm.ptr) -> i32
  return
}
gpu.module @k {
  gpu.func @k(%m: memref<64xi8>) kernel {
    gpu.return
  }
}
}
