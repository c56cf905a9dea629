// RUN: mx-opt %s --convert-mx-to-gpu --split-input-file --verify-diagnostics | FileCheck %s --check-prefixes=CHECK,SM90
// RUN: mx-opt %s --convert-mx-to-gpu="chip=sm_100a" --split-input-file --verify-diagnostics | FileCheck %s --check-prefixes=CHECK,SM100

// MXFP6 rowwise with its swizzle, in the rowwise kernel: the data are bytes
// written three 32-bit words (16 elements) a lane and viewed as f6E3M2FN.
// sm_90a rounds with E5M2's cvt, which embeds E3M2 once the block's factor
// takes 2^-12, and each 4 codes are narrowed, saturated and packed into 24
// bits in one recipe (EmbeddedFP6Packing.h: its selects are inline lop3),
// the four groups joined into the 3 words by funnel shifts; sm_100a has
// E3M2's cvt and packs its codes.
// CHECK-LABEL: func @mxfp6_rowwise
// CHECK-DAG: %[[BYTES:.*]] = gpu.alloc () : memref<4608xi8>
// CHECK-DAG: %[[WORDS:.*]] = memref.view %[[BYTES]][%{{.*}}][] : memref<4608xi8> to memref<64x18xi32>
// CHECK-DAG: %[[TILES:.*]] = gpu.alloc () : memref<1x1x32x4x4xf8E8M0FNU>
// CHECK: gpu.launch
// SM90:    arith.mulf %{{.*}}, %{{.*}} : f32
// SM90-NOT: arith.minnumf
// SM90-COUNT-2: nvvm.convert.f32x2.to.f8x2 {{.*}} : i16(f8E5M2)
// SM90-COUNT-3: nvvm.inline_ptx "lop3.b32 $0, $1, $2, $3, 0xE4;"
// SM90:    llvm.intr.fshl(%{{.*}}, %{{.*}}, %c24_i32)
// SM90:    llvm.intr.fshl(%{{.*}}, %{{.*}}, %c16_i32)
// SM90:    llvm.intr.fshl(%{{.*}}, %{{.*}}, %c8_i32)
// SM100-NOT: arith.minnumf
// SM100-COUNT-8: nvvm.convert.f32x2.to.f6x2 {{.*}} : i16(f6E3M2FN)
// CHECK:   vector.store %{{.*}}, %[[WORDS]][%{{.*}}, %{{.*}}] {alignment = 4 : i64} : memref<64x18xi32>, vector<3xi32>
// CHECK:   memref.store %{{.*}}, %[[TILES]]
// CHECK: gpu.terminator
// CHECK: %[[DATA:.*]] = memref.view %[[BYTES]][%{{.*}}][] : memref<4608xi8> to memref<64x96xf6E3M2FN>
// CHECK: bufferization.to_tensor %[[DATA]]
func.func @mxfp6_rowwise(%x: tensor<64x96xbf16>) -> (tensor<64x96xf6E3M2FN>, tensor<1x1x32x4x4xf8E8M0FNU>) {
  %d, %s = mx.quantize %x block [1, 32] : tensor<64x96xbf16> -> tensor<64x96xf6E3M2FN>, tensor<64x3xf8E8M0FNU>
  %t = mx.swizzle %s : tensor<64x3xf8E8M0FNU> -> tensor<1x1x32x4x4xf8E8M0FNU>
  return %d, %t : tensor<64x96xf6E3M2FN>, tensor<1x1x32x4x4xf8E8M0FNU>
}

// -----

// MXFP6 columnwise, in the strip kernel: a lane's row of 4 codes is 24 bits
// (on sm_90a from the one recipe that narrows, saturates and packs E4M3's
// codes); with its right neighbour's (one shuffle down, joined by a funnel
// shift) a lane stores one word, 3 lanes of every 4, each row at its own
// indices (the staged kernel stores from one address instead).
// CHECK-LABEL: func @mxfp6_columnwise
// CHECK-DAG: %[[BYTES:.*]] = gpu.alloc () : memref<1536xi8>
// CHECK-DAG: %[[WORDS:.*]] = memref.view %[[BYTES]][%{{.*}}][] : memref<1536xi8> to memref<64x6xi32>
// CHECK: gpu.launch
// SM90:    nvvm.convert.f32x2.to.f8x2 {{.*}} : i16(f8E4M3FN)
// SM90-NOT: arith.minnumf
// SM90:    nvvm.inline_ptx "lop3.b32 $0, $1, $2, $3, 0xE4;"
// SM100:   nvvm.convert.f32x2.to.f6x2 {{.*}} : i16(f6E2M3FN)
// CHECK:   gpu.shuffle down %{{.*}}, %{{.*}}, %{{.*}} : i32
// CHECK:   llvm.intr.fshr
// CHECK:   scf.if
// CHECK:     vector.store %{{.*}}, %[[WORDS]][%{{.*}}, %{{.*}}] {alignment = 4 : i64} : memref<64x6xi32>, vector<1xi32>
// CHECK: memref.view %[[BYTES]][%{{.*}}][] : memref<1536xi8> to memref<64x32xf6E2M3FN>
func.func @mxfp6_columnwise(%x: tensor<64x32xf32>) -> (tensor<64x32xf6E2M3FN>, tensor<2x32xf8E8M0FNU>) {
  %d, %s = mx.quantize %x block [32, 1] rounding floor : tensor<64x32xf32> -> tensor<64x32xf6E2M3FN>, tensor<2x32xf8E8M0FNU>
  return %d, %s : tensor<64x32xf6E2M3FN>, tensor<2x32xf8E8M0FNU>
}

// -----

// MXFP6 rowwise and columnwise of one input, fused: the staged strip kernel.
// A CTA copies its tile, a 32-row block x 256 columns, into shared memory
// with 16-byte loads (row and column clamped in bounds); after the barrier
// warps 0-3 quantize the tile's columns and warps 4-7 its rows, each lane
// reading its 16 x 4 strip there and nothing from global memory. The grid:
// 2 slices x 4 row blocks (the rowwise tiles' 128 rows) x 2 tiles (272
// columns, the second partial).
// CHECK-LABEL: func @mxfp6_fused
// CHECK-DAG: %[[INPUT:.*]] = bufferization.to_buffer %{{.*}} read_only : tensor<80x272xbf16> to memref<80x272xbf16>
// CHECK: gpu.launch blocks({{.*}}) in (%{{.*}} = %c16, {{.*}}) threads({{.*}}) in (%{{.*}} = %c256, {{.*}}) workgroup(%[[TILE:.*]] : memref<32x256xbf16, #gpu.address_space<workgroup>>)
// CHECK:   %[[COL:.*]] = arith.minui %{{.*}}, %c264 : index
// CHECK:   %[[ROW:.*]] = arith.minui %{{.*}}, %c79 : index
// CHECK:   vector.load %[[INPUT]][%[[ROW]], %[[COL]]] {alignment = 16 : i64} : memref<80x272xbf16>, vector<8xbf16>
// CHECK-COUNT-3: vector.load %[[INPUT]][%{{.*}}, %[[COL]]] {alignment = 16 : i64} : memref<80x272xbf16>, vector<8xbf16>
// CHECK-COUNT-4: vector.store %{{.*}}, %[[TILE]][%{{.*}}, %{{.*}}] {alignment = 16 : i64} : memref<32x256xbf16, #gpu.address_space<workgroup>>, vector<8xbf16>
// Then its first 32 threads ask L2 for the rows of the tile that the CTA
// 2 x %nsmid later stages (while CTAs remain), each row clamped in bounds
// and only as wide as the input: 512 bytes, or 32 for the partial tile.
// CHECK-NEXT: %[[SMS:.*]] = nvvm.read.ptx.sreg.nsmid : i32
// CHECK: %[[LATER:.*]] = arith.addi %{{.*}}, %{{.*}} : index
// CHECK-DAG: %[[ROWS:.*]] = arith.cmpi ult, %{{.*}}, %c32 : index
// CHECK-DAG: %[[REMAIN:.*]] = arith.cmpi ult, %[[LATER]], %c16 : index
// CHECK: %[[PREFETCH:.*]] = arith.andi %[[REMAIN]], %[[ROWS]] : i1
// CHECK-NEXT: scf.if %[[PREFETCH]] {
// CHECK:   arith.minui %{{.*}}, %c79 : index
// CHECK:   arith.minui %{{.*}}, %c256 : index
// CHECK:   memref.extract_aligned_pointer_as_index %[[INPUT]]
// CHECK:   nvvm.cp.async.bulk.prefetch %{{.*}}, %{{.*}} : <1>
// CHECK: }
// CHECK-NEXT: gpu.barrier
// CHECK-NEXT: %[[WARP:.*]] = arith.divui %{{.*}}, %c32 : index
// CHECK: %[[COLUMNS:.*]] = arith.cmpi ult, %[[WARP]], %c4 : index
// CHECK-NEXT: scf.if %[[COLUMNS]] {
// CHECK-COUNT-16: vector.load %[[TILE]][%{{.*}}, %{{.*}}] {alignment = 8 : i64} : memref<32x256xbf16, #gpu.address_space<workgroup>>, vector<4xbf16>
// CHECK:   gpu.shuffle  xor %{{.*}}, %c16_i32, %c32_i32 : i32
// CHECK:   gpu.shuffle  down
// CHECK: } else {
// CHECK-COUNT-16: vector.load %[[TILE]][%{{.*}}, %{{.*}}] {alignment = 8 : i64} : memref<32x256xbf16, #gpu.address_space<workgroup>>, vector<4xbf16>
// CHECK:   gpu.shuffle  xor %{{.*}}, %c4_i32, %c32_i32 : i32
// CHECK:   gpu.shuffle  idx
// CHECK:   gpu.shuffle  down
// CHECK: }
// CHECK-NOT: vector.load %[[INPUT]]
// CHECK: gpu.terminator
func.func @mxfp6_fused(%x: tensor<2x40x272xbf16>) -> (tensor<2x40x272xf6E3M2FN>, tensor<2x1x3x32x4x4xf8E8M0FNU>, tensor<2x40x272xf6E3M2FN>, tensor<2x2x272xf8E8M0FNU>) {
  %d, %s = mx.quantize %x block [1, 1, 32] : tensor<2x40x272xbf16> -> tensor<2x40x272xf6E3M2FN>, tensor<2x40x9xf8E8M0FNU>
  %t = mx.swizzle %s unscaled_dim 1 : tensor<2x40x9xf8E8M0FNU> -> tensor<2x1x3x32x4x4xf8E8M0FNU>
  %c, %cs = mx.quantize %x block [1, 32, 1] : tensor<2x40x272xbf16> -> tensor<2x40x272xf6E3M2FN>, tensor<2x2x272xf8E8M0FNU>
  return %d, %t, %c, %cs : tensor<2x40x272xf6E3M2FN>, tensor<2x1x3x32x4x4xf8E8M0FNU>, tensor<2x40x272xf6E3M2FN>, tensor<2x2x272xf8E8M0FNU>
}

// -----

// MXINT8 fused keeps the strip in registers (it meets its bandwidth so):
// every lane loads its strip from global memory, no tile, no barrier.
// CHECK-LABEL: func @mxint8_fused
// CHECK: gpu.launch blocks({{.*}}) threads({{.*}}) {
// CHECK-NOT: gpu.barrier
// CHECK: vector.load %{{.*}} : memref<64x64xbf16>, vector<4xbf16>
// CHECK-NOT: gpu.barrier
// CHECK: gpu.terminator
func.func @mxint8_fused(%x: tensor<64x64xbf16>) -> (tensor<64x64xi8>, tensor<64x2xf8E8M0FNU>, tensor<64x64xi8>, tensor<2x64xf8E8M0FNU>) {
  %d, %s = mx.quantize %x block [1, 32] : tensor<64x64xbf16> -> tensor<64x64xi8>, tensor<64x2xf8E8M0FNU>
  %c, %cs = mx.quantize %x block [32, 1] : tensor<64x64xbf16> -> tensor<64x64xi8>, tensor<2x64xf8E8M0FNU>
  return %d, %s, %c, %cs : tensor<64x64xi8>, tensor<64x2xf8E8M0FNU>, tensor<64x64xi8>, tensor<2x64xf8E8M0FNU>
}

// -----

// MXINT8: the FP8 kernels with the CPU lowering's rounding in fewer steps.
// A bf16 input times a power of two is exact in f16, so each pair of scaled
// values goes to f16x2 (one cvt), is clamped to +-127/64 and rounded by one
// FMA y * 64 + 1.5 * 2^10 whose low bytes are the codes, gathered four at a
// time by one byte permute (an f32 input takes the same steps in f32, with
// 1.5 * 2^23: mxfp6-mxint8-ptxas.mlir).
// CHECK-LABEL: func @mxint8_rowwise
// CHECK-DAG: %[[DATA:.*]] = gpu.alloc () : memref<64x64xi8>
// CHECK-DAG: %[[UNIT:.*]] = arith.constant dense<6.400000e+01> : vector<16xf16>
// CHECK-DAG: %[[MAGIC:.*]] = arith.constant dense<1.536000e+03> : vector<16xf16>
// CHECK-DAG: %[[LIMIT:.*]] = arith.constant dense<1.984380e+00> : vector<16xf16>
// CHECK: gpu.launch
// CHECK-COUNT-8: nvvm.convert.f32x2.to.f16x2 {{.*}} : vector<2xf16>
// CHECK:   %[[CLAMPED:.*]] = arith.minnumf %{{.*}}, %[[LIMIT]] : vector<16xf16>
// CHECK:   %[[SUM:.*]] = llvm.intr.fma(%[[CLAMPED]], %[[UNIT]], %[[MAGIC]]) : (vector<16xf16>, vector<16xf16>, vector<16xf16>) -> vector<16xf16>
// CHECK:   vector.bitcast %[[SUM]] : vector<16xf16> to vector<8xi32>
// CHECK-COUNT-4: nvvm.inline_ptx "prmt.b32 $0, $1, $2, 0x6420;"
// CHECK-NOT: nvvm.convert.f32x2.to.f8x2
// CHECK:   vector.store %{{.*}}, %[[DATA]][%{{.*}}, %{{.*}}] {alignment = 16 : i64} : memref<64x64xi8>, vector<16xi8>
func.func @mxint8_rowwise(%x: tensor<64x64xbf16>) -> (tensor<64x64xi8>, tensor<64x2xf8E8M0FNU>) {
  %d, %s = mx.quantize %x block [1, 32] : tensor<64x64xbf16> -> tensor<64x64xi8>, tensor<64x2xf8E8M0FNU>
  return %d, %s : tensor<64x64xi8>, tensor<64x2xf8E8M0FNU>
}

// -----

// FP6 dequantize in chunks of 8 elements, one 16-byte store of bf16: the
// two words from the one holding the chunk's first bit (bit 6 * element,
// word at most 766 of the tensor's 768) loaded from the packed bytes and
// shifted to it; on sm_90a each 24 bits of 4 codes spread into the bytes
// of E5M2's codes (the 12-bit halves, then the codes, then the signs moved
// by adding 3 x their bit), converted two a time and scaled by 2^12 in f16
// (exact), on sm_100a converted as E3M2. The codes have no NaN, so a
// chunk's results are NaN exactly when its one factor is: one check a chunk.
// CHECK-LABEL: func @mxfp6_dequantize
// CHECK: %[[BASE:.*]] = memref.extract_aligned_pointer_as_index
// CHECK: gpu.launch
// CHECK:   %[[BIT:.*]] = arith.muli %{{.*}}, %c6 : index
// CHECK:   %[[WORD:.*]] = arith.minui %{{.*}}, %c766 : index
// CHECK:   %[[WORDS:.*]] = llvm.load %{{.*}} {alignment = 4 : i64} : !llvm.ptr<1> -> vector<2xi32>
// CHECK:   %[[PAIR:.*]] = vector.bitcast %[[WORDS]] : vector<2xi32> to vector<1xi64>
// CHECK:   %[[WINDOW:.*]] = vector.extract %[[PAIR]][0]
// CHECK:   %[[SKIPPED:.*]] = arith.muli %[[WORD]], %c32 : index
// CHECK:   %[[SHIFT:.*]] = arith.subi %[[BIT]], %[[SKIPPED]] : index
// CHECK:   %[[SHIFT64:.*]] = arith.index_cast %[[SHIFT]] : index to i64
// CHECK:   arith.shrui %[[WINDOW]], %[[SHIFT64]] : i64
// SM90-COUNT-2: arith.muli %{{.*}}, %c3_i32 : i32
// SM90-COUNT-4: nvvm.convert.f8x2.to.f16x2 {{.*}}(f8E5M2)
// SM90:    arith.mulf %{{.*}}, %{{.*}} : vector<8xf16>
// SM100-COUNT-4: nvvm.convert.f6x2.to.f16x2 {{.*}}(f6E3M2FN)
// CHECK:   %[[FACTOR:.*]] = arith.bitcast %{{.*}} : i32 to f32
// CHECK:   %[[NAN:.*]] = arith.cmpf uno, %[[FACTOR]], %[[FACTOR]] : f32
// CHECK-COUNT-4: arith.select %[[NAN]], %{{.*}}, %{{.*}} : vector<2xbf16>
// CHECK:   vector.store %{{.*}} : memref<64x64xbf16>, vector<8xbf16>
func.func @mxfp6_dequantize(%d: tensor<64x64xf6E3M2FN>, %s: tensor<64x2xf8E8M0FNU>) -> tensor<64x64xbf16> {
  %y = mx.dequantize %d, %s block [1, 32] : tensor<64x64xf6E3M2FN>, tensor<64x2xf8E8M0FNU> -> tensor<64x64xbf16>
  return %y : tensor<64x64xbf16>
}

// -----

// Rows that are not whole chunks: one thread per 3-byte group of 4
// elements, decoded by the CPU lowering's builders.
// CHECK-LABEL: func @mxfp6_dequantize_groups
// CHECK: gpu.launch
// CHECK-COUNT-3: llvm.load %{{.*}} {alignment = 1 : i64} : !llvm.ptr<1> -> i8
// CHECK-COUNT-4: arith.trunci %{{.*}} : i24 to i6
// CHECK-NOT: nvvm.convert
func.func @mxfp6_dequantize_groups(%d: tensor<70x36xf6E2M3FN>, %s: tensor<3x36xf8E8M0FNU>) -> tensor<70x36xf32> {
  %y = mx.dequantize %d, %s block [32, 1] : tensor<70x36xf6E2M3FN>, tensor<3x36xf8E8M0FNU> -> tensor<70x36xf32>
  return %y : tensor<70x36xf32>
}

// -----

// MXINT8 dequantize: c * 2^-6 from sitofp, then the block's scale.
// CHECK-LABEL: func @mxint8_dequantize
// CHECK: gpu.launch
// CHECK:   vector.load %{{.*}} : memref<64x64xi8>, vector<4xi8>
// CHECK:   arith.sitofp %{{.*}} : vector<4xi8> to vector<4xf32>
// CHECK:   vector.store %{{.*}} : memref<64x64xf32>, vector<4xf32>
func.func @mxint8_dequantize(%d: tensor<64x64xi8>, %s: tensor<2x64xf8E8M0FNU>) -> tensor<64x64xf32> {
  %y = mx.dequantize %d, %s block [32, 1] : tensor<64x64xi8>, tensor<2x64xf8E8M0FNU> -> tensor<64x64xf32>
  return %y : tensor<64x64xf32>
}

// -----

// FP6 columnwise rows are stored in whole words: K must be a multiple of 16.
func.func @mxfp6_columnwise_k(%x: tensor<64x40xf32>) -> tensor<2x40xf8E8M0FNU> {
  // expected-error @+1 {{'mx.quantize' op has no GPU lowering: the columnwise GPU kernel needs K to be a multiple of 16 for f6E3M2FN}}
  %d, %s = mx.quantize %x block [32, 1] : tensor<64x40xf32> -> tensor<64x40xf6E3M2FN>, tensor<2x40xf8E8M0FNU>
  return %s : tensor<2x40xf8E8M0FNU>
}
