#!/usr/bin/env bash
# Issue 19's GPU checks and benchmark in one script (docs/torch.md, docs/gpu.md).
#
#   bench/issue19.sh build DIR   # here (mx-opt): the GPU test programs and every kernel of the runs, into DIR
#   bench/issue19.sh run DIR     # on the GPU machine (torch + CUDA, no MLIR), DIR copied there
#
# `run` builds libmx_runtime from lib/Runtime into DIR/rt, then runs the quantize and GEMM-epilogue kernel
# tests (bit for bit / float64 tolerances), the mx.torch step tests (no torch transpose or copy kernel in
# one step; forward, dgrad and wgrad against float64; the fused wgrad accumulation into main_grad), and
# bench/linear.py (step times at issue 19's shapes and one step's kernels per recipe). A pass: pytest's summary lines say "passed" with no "failed".
set -euo pipefail
cd "$(dirname "$0")/.."
[ $# -eq 2 ] || { sed -n 2,10p "$0"; exit 2; }
mode=$1 dir=$(realpath -m "$2")
case $mode in
build)
  py=.venv/bin/python
  $py python/tests/test_gpu_kernels.py "$dir/kernels"
  $py python/tests/test_gpu_torch.py build "$dir/cache"
  $py bench/linear.py build "$dir/cache"
  ;;
run)
  cmake -S lib/Runtime -B "$dir/rt" -G Ninja >/dev/null && ninja -C "$dir/rt" >/dev/null
  export MX_RUNTIME_LIB=$dir/rt/libmx_runtime.so MX_CACHE_DIR=$dir/cache PYTHONPATH=$PWD/python
  MX_GPU_ARTIFACTS=$dir/kernels python3 -m pytest -q -p no:cacheprovider python/tests/test_gpu_kernels.py \
    -k "transpose or delayed or per_tensor or epilogue or columnwise or fused"
  python3 -m pytest -q -s -p no:cacheprovider python/tests/test_gpu_torch.py \
    -k "step_launches or linear_against_float64 or training_tracks or compile_fullgraph or fused_wgrad"
  python3 bench/linear.py run
  ;;
*) sed -n 2,10p "$0"; exit 2 ;;
esac
