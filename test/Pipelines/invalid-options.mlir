// Chips, binary formats, GEMM lowerings and byte counts outside what each
// option takes are rejected by the option parser, with a message and a
// non-zero exit, before any pass runs (an unknown chip used to abort inside
// LLVM's instruction selection, and an unknown format to exit 0).
// RUN: not mx-opt %s --mx-lower-to-nvvm="chip=sm_80" 2>&1 | FileCheck %s --check-prefix=SM80
// RUN: not mx-opt %s --mx-lower-to-nvvm="chip=banana" 2>&1 | FileCheck %s --check-prefix=BANANA
// RUN: not mx-opt %s --mx-lower-to-nvvm="format=cubin" 2>&1 | FileCheck %s --check-prefix=CUBIN
// RUN: not mx-opt %s --mx-lower-to-nvvm="gemm=foo" 2>&1 | FileCheck %s --check-prefix=GEMM
// RUN: not mx-opt %s --mx-lower-to-nvvm="placed-gather-bytes=lots" 2>&1 | FileCheck %s --check-prefix=BYTES
// RUN: not mx-opt %s --convert-mx-to-gpu="chip=sm_80" 2>&1 | FileCheck %s --check-prefix=SM80
// RUN: not mx-opt %s --convert-mx-to-cublas="chip=banana" 2>&1 | FileCheck %s --check-prefix=BANANA
// The CPU pipeline has no options; one given is named, not swallowed.
// RUN: not mx-opt %s --mx-lower-to-cpu=opt=3 2>&1 | FileCheck %s --check-prefix=CPUOPT
// RUN: not mx-opt %s --mx-lower-to-nvvm=opt=3 2>&1 | FileCheck %s --check-prefix=NVVMOPT

// SM80: for the --chip option: Cannot find option named 'sm_80'!
// SM80-NOT: func.func
// BANANA: for the --chip option: Cannot find option named 'banana'!
// BANANA-NOT: func.func
// CUBIN: for the --format option: Cannot find option named 'cubin'!
// CUBIN-NOT: func.func
// GEMM: for the --gemm option: Cannot find option named 'foo'!
// GEMM-NOT: func.func
// BYTES: for the --placed-gather-bytes option: 'lots' value invalid
// BYTES-NOT: func.func
// CPUOPT: no such option opt
// CPUOPT-NOT: func.func
// NVVMOPT: no such option opt
// NVVMOPT-NOT: func.func

func.func @quantize(%x: tensor<64x64xbf16>) -> (tensor<64x64xf8E4M3FN>, tensor<64x2xf8E8M0FNU>) {
  %d, %s = mx.quantize %x block [1, 32] : tensor<64x64xbf16> -> tensor<64x64xf8E4M3FN>, tensor<64x2xf8E8M0FNU>
  return %d, %s : tensor<64x64xf8E4M3FN>, tensor<64x2xf8E8M0FNU>
}
