// What convert-shard-to-mxrt does not lower, reported on the op.
// RUN: mx-opt %s --convert-shard-to-mxrt --split-input-file -verify-diagnostics

shard.grid @grid(shape = 2)
func.func @inner_gather(%s: tensor<128x8xf8E8M0FNU>) -> tensor<128x16xf8E8M0FNU> {
  // expected-error @+1 {{'shard.all_gather' op gathers along dimension 1 of 'tensor<128x8xf8E8M0FNU>', after dimensions that are not 1: NCCL concatenates whole buffers, so the mx runtime gathers along the outermost dimension}}
  %g = shard.all_gather %s on @grid grid_axes = [0] gather_axis = 1 : tensor<128x8xf8E8M0FNU> -> tensor<128x16xf8E8M0FNU>
  return %g : tensor<128x16xf8E8M0FNU>
}

// -----

shard.grid @grid(shape = 2)
func.func @half_byte_parts(%q: tensor<3x1xf4E2M1FN>) -> tensor<6x1xf4E2M1FN> {
  // expected-error @+1 {{'shard.all_gather' op gathers parts of 'tensor<3x1xf4E2M1FN>', which do not end on a byte: NCCL concatenates whole bytes (packed FP4 parts need an even count)}}
  %h = shard.all_gather %q on @grid grid_axes = [0] gather_axis = 0 : tensor<3x1xf4E2M1FN> -> tensor<6x1xf4E2M1FN>
  return %h : tensor<6x1xf4E2M1FN>
}

// -----

shard.grid @grid(shape = 2)
func.func @inner_scatter(%p: tensor<64x32xf32>) -> tensor<64x16xf32> {
  // expected-error @+1 {{'shard.reduce_scatter' op scatters along dimension 1 of 'tensor<64x16xf32>', after dimensions that are not 1: NCCL scatters whole buffers, so the mx runtime scatters along the outermost dimension}}
  %s = shard.reduce_scatter %p on @grid grid_axes = [0] scatter_axis = 1 : tensor<64x32xf32> -> tensor<64x16xf32>
  return %s : tensor<64x16xf32>
}

// -----

shard.grid @grid(shape = 2x2)
func.func @sub_group(%x: tensor<64x32xf32>) -> tensor<64x32xf32> {
  // expected-error @+1 {{'shard.all_reduce' op runs over a group that is not the whole static grid @grid: the mx runtime has one communicator per process, over all devices}}
  %r = shard.all_reduce %x on @grid grid_axes = [1] : tensor<64x32xf32> -> tensor<64x32xf32>
  return %r : tensor<64x32xf32>
}

// -----

shard.grid @grid(shape = 2)
func.func @min(%x: tensor<64x32xf32>) -> tensor<64x32xf32> {
  // expected-error @+1 {{'shard.all_reduce' op reduces with min; the mx runtime reduces with sum and max}}
  %r = shard.all_reduce %x on @grid grid_axes = [0] reduction = min : tensor<64x32xf32> -> tensor<64x32xf32>
  return %r : tensor<64x32xf32>
}

// -----

shard.grid @grid(shape = 2)
func.func @widening(%x: tensor<64x32xbf16>) -> tensor<64x32xf32> {
  // expected-error @+1 {{'shard.all_reduce' op reduces 'tensor<64x32xbf16>' into 'tensor<64x32xf32>'; the mx runtime reduces f32, bf16 and f16 in their own type}}
  %r = shard.all_reduce %x on @grid grid_axes = [0] : tensor<64x32xbf16> -> tensor<64x32xf32>
  return %r : tensor<64x32xf32>
}

// -----

shard.grid @grid(shape = 2)
func.func @slice(%x: tensor<64x32xf32>) -> tensor<32x32xf32> {
  // expected-error @+1 {{'shard.all_slice' op is not lowered to the mx runtime, which runs all_gather, all_reduce (sum, max) and reduce_scatter (sum, max) of partitioned programs (mx-partition)}}
  %s = shard.all_slice %x on @grid grid_axes = [0] slice_axis = 0 : tensor<64x32xf32> -> tensor<32x32xf32>
  return %s : tensor<32x32xf32>
}

// -----

shard.grid @grid(shape = 2)
llvm.func @mxrtAllGather(i32) -> i32
func.func @clash(%d: tensor<128x512xf8E4M3FN>) -> tensor<256x512xf8E4M3FN> {
  // expected-error @+1 {{'shard.all_gather' op the module defines @mxrtAllGather as !llvm.func<i32 (i32)>, not the runtime's !llvm.func<i32 (ptr, ptr, i64, i32, ptr)>}}
  %g = shard.all_gather %d on @grid grid_axes = [0] gather_axis = 0 : tensor<128x512xf8E4M3FN> -> tensor<256x512xf8E4M3FN>
  return %g : tensor<256x512xf8E4M3FN>
}

// -----

shard.grid @one(shape = 1)
func.func @local_conversion(%x: tensor<64x32xf32>) -> tensor<64x32xf64> {
  // expected-error @+1 {{'shard.all_reduce' op converts its element type, which the mx runtime does not}}
  %r = shard.all_reduce %x on @one grid_axes = [0] : tensor<64x32xf32> -> tensor<64x32xf64>
  return %r : tensor<64x32xf64>
}

// -----

// Two independent gathers make a group, whose runtime functions must be free.
shard.grid @grid(shape = 2)
llvm.func @mxrtGroupStart(i32)
func.func @group_clash(%d: tensor<128x512xf8E4M3FN>, %s: tensor<128x16xf8E8M0FNU>) -> (tensor<256x512xf8E4M3FN>, tensor<256x16xf8E8M0FNU>) {
  // expected-error @+1 {{'shard.all_gather' op the module defines @mxrtGroupStart as !llvm.func<void (i32)>, not the runtime's !llvm.func<i32 ()>}}
  %g = shard.all_gather %d on @grid grid_axes = [0] gather_axis = 0 : tensor<128x512xf8E4M3FN> -> tensor<256x512xf8E4M3FN>
  %h = shard.all_gather %s on @grid grid_axes = [0] gather_axis = 0 : tensor<128x16xf8E8M0FNU> -> tensor<256x16xf8E8M0FNU>
  return %g, %h : tensor<256x512xf8E4M3FN>, tensor<256x16xf8E8M0FNU>
}

// -----

func.func @chunk_into_argument(%c: tensor<32x64xf8E4M3FN>, %d: tensor<128x64xf8E4M3FN>) -> tensor<128x64xf8E4M3FN> {
  // expected-error @+1 {{'mx.gather_chunk' op expected a destination that is a tensor.empty or an mx.gather_chunk}}
  %g = mx.gather_chunk %c into %d at row 0 of 2 devices : tensor<32x64xf8E4M3FN> into tensor<128x64xf8E4M3FN>
  %j = mx.gather_join %g : tensor<128x64xf8E4M3FN>
  return %j : tensor<128x64xf8E4M3FN>
}

// -----

func.func @chain_read_before_join(%c: tensor<32x64xf8E4M3FN>) -> (tensor<128x64xf8E4M3FN>, tensor<128x64xf8E4M3FN>) {
  %e = tensor.empty() : tensor<128x64xf8E4M3FN>
  %g0 = mx.gather_chunk %c into %e at row 0 of 2 devices : tensor<32x64xf8E4M3FN> into tensor<128x64xf8E4M3FN>
  // expected-error @+1 {{'mx.gather_chunk' op has a destination that is also read elsewhere: a gathered value is read after mx.gather_join}}
  %g1 = mx.gather_chunk %c into %g0 at row 32 of 2 devices : tensor<32x64xf8E4M3FN> into tensor<128x64xf8E4M3FN>
  %j = mx.gather_join %g1 : tensor<128x64xf8E4M3FN>
  return %j, %g0 : tensor<128x64xf8E4M3FN>, tensor<128x64xf8E4M3FN>
}

// -----

func.func @join_read_elsewhere(%c: tensor<64x64xf8E4M3FN>) -> (tensor<128x64xf8E4M3FN>, tensor<128x64xf8E4M3FN>) {
  %e = tensor.empty() : tensor<128x64xf8E4M3FN>
  %g = mx.gather_chunk %c into %e at row 0 of 2 devices : tensor<64x64xf8E4M3FN> into tensor<128x64xf8E4M3FN>
  // expected-error @+1 {{'mx.gather_join' op expected each operand to end a chain of mx.gather_chunk read by nothing else}}
  %j = mx.gather_join %g : tensor<128x64xf8E4M3FN>
  return %j, %g : tensor<128x64xf8E4M3FN>, tensor<128x64xf8E4M3FN>
}

// -----

func.func @fp4_half_bytes(%c: tensor<1x3xf4E2M1FN>) -> tensor<4x3xf4E2M1FN> {
  %e = tensor.empty() : tensor<4x3xf4E2M1FN>
  // expected-error @+1 {{'mx.gather_chunk' op places rows of 'tensor<4x3xf4E2M1FN>' that do not start on a byte}}
  %g = mx.gather_chunk %c into %e at row 1 of 2 devices : tensor<1x3xf4E2M1FN> into tensor<4x3xf4E2M1FN>
  %j = mx.gather_join %g : tensor<4x3xf4E2M1FN>
  return %j : tensor<4x3xf4E2M1FN>
}
