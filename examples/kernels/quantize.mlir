// A kernel rather than a program: @quantize takes and returns tensors (no @main, nothing printed).
// MXFP8 quantize of a bf16 [256, 512] tensor: E4M3 data and one E8M0 scale per 1x32 block, the
// scales swizzled into the 128x4 tiles the GEMM reads. examples/compile_kernel.py compiles it with
// mx.compile for the CPU; README.md compiles it ahead of time for a GPU (mx-lower-to-nvvm).
func.func @quantize(%x: tensor<256x512xbf16>)
    -> (tensor<256x512xf8E4M3FN>, tensor<2x4x32x4x4xf8E8M0FNU>) {
  %data, %scales = mx.quantize %x block [1, 32]
      : tensor<256x512xbf16> -> tensor<256x512xf8E4M3FN>, tensor<256x16xf8E8M0FNU>
  %tiles = mx.swizzle %scales : tensor<256x16xf8E8M0FNU> -> tensor<2x4x32x4x4xf8E8M0FNU>
  return %data, %tiles : tensor<256x512xf8E4M3FN>, tensor<2x4x32x4x4xf8E8M0FNU>
}
