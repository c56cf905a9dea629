#!/usr/bin/env bash
# Every GPU test of the tree, built here and run on a GPU machine (which has torch and CUDA, no MLIR).
#
#   utils/gpu-tests.sh build one|two DIR [CHIP]   # here (mx-opt): the programs of the 1-GPU or 2-GPU tests
#   utils/gpu-tests.sh run one|two DIR            # on the GPU machine, DIR copied there
#
# `one` is every single-GPU test file (kernels, FP4, MXFP6/MXINT8, recipes, the GEMMs under gemm=kernel and
# gemm=auto, the GEMM formats and FP8 output, context/runtime/torch, column sums); `two` the 2-GPU ones (partitioned programs, mx.torch
# under FSDP2 and sequence parallelism) and both examples. `run` builds libmx_runtime into DIR/rt, runs each
# file under a time limit (a hang is reported, not waited for) and prints pytest's summary line per file.
# Benchmarks have their own build/run steps (bench/*.py); NCCL_NVLS_ENABLE=0 as the device notes ask.
set -uo pipefail
cd "$(dirname "$0")/.."
usage() { sed -n 2,12p "$0"; exit 2; }
[ $# -ge 3 ] || usage
mode=$1 set=$2 dir=$(realpath -m "$3") chip=${4:-sm_90a}
py=.venv/bin/python

build_one() {
  $py python/tests/test_gpu_kernels.py "$dir/kernels" "$chip" &&
  $py python/tests/test_gpu_fp4.py "$dir/fp4" "$chip" &&
  $py python/tests/test_gpu_mxfp6_mxint8.py "$dir/mxfp6" "$chip" &&
  $py python/tests/test_gpu_recipes.py "$dir/recipes" "$chip" &&
  $py python/tests/test_gpu_gemm.py "$dir/gemm_kernel" kernel "$chip" &&
  $py python/tests/test_gpu_gemm.py "$dir/gemm_auto" auto "$chip" &&
  $py python/tests/test_gpu_gemm_formats.py "$dir/formats" auto "$chip" &&
  $py python/tests/test_gpu_gemm_cast.py "$dir/gemm_cast" "$chip" &&
  $py python/tests/test_gpu_context.py build "$dir/cache" "$chip" &&
  $py python/tests/test_gpu_torch.py build "$dir/cache" "$chip" &&
  $py python/tests/test_gpu_column_sum.py build "$dir/cache" "$chip"
}

build_two() {
  $py python/tests/test_gpu_distributed.py "$dir/dist" "$chip" &&
  $py python/tests/test_gpu_torch_distributed.py build "$dir/cache" "$chip" &&
  $py examples/train_fsdp.py build "$dir/cache" "$chip" &&
  $py examples/distributed.py build "$dir/example" "$chip"
}

# One test file: its artifacts, a time limit, and pytest's last summary line (or why there is none).
t() {
  local artifacts=$1 limit=$2; shift 2
  echo "== $*"
  MX_GPU_ARTIFACTS=$dir/$artifacts timeout "$limit" python3 -m pytest -q -p no:cacheprovider "$@" 2>&1 |
    grep -E "passed|failed|FAILED|error" | tail -4
  local status=${PIPESTATUS[0]}
  [ "$status" -eq 124 ] && echo "TIMED OUT after $limit s"
  [ "$status" -eq 0 ] || failures=$((failures + 1))
}

run_one() {
  t kernels 300 python/tests/test_gpu_kernels.py
  t fp4 200 python/tests/test_gpu_fp4.py
  t mxfp6 200 python/tests/test_gpu_mxfp6_mxint8.py
  t recipes 200 python/tests/test_gpu_recipes.py
  t gemm_kernel 300 python/tests/test_gpu_gemm.py
  t gemm_auto 300 python/tests/test_gpu_gemm.py
  t formats 300 python/tests/test_gpu_gemm_formats.py
  t gemm_cast 200 python/tests/test_gpu_gemm_cast.py
  t cache 400 python/tests/test_gpu_context.py python/tests/test_gpu_runtime.py python/tests/test_gpu_torch.py \
    python/tests/test_gpu_column_sum.py
}

run_two() {
  t dist 300 python/tests/test_gpu_distributed.py
  t cache 400 python/tests/test_gpu_torch_distributed.py
  echo "== examples/distributed.py"
  timeout 120 torchrun --standalone --nproc-per-node 2 examples/distributed.py run "$dir/example" 2>&1 | tail -2
  [ "${PIPESTATUS[0]}" -eq 0 ] || failures=$((failures + 1))
  echo "== examples/train_fsdp.py"
  timeout 180 torchrun --standalone --nproc-per-node 2 examples/train_fsdp.py 2>&1 | grep "^step" | tail -2
  [ "${PIPESTATUS[0]}" -eq 0 ] || failures=$((failures + 1))
}

case $mode/$set in
build/one|build/two) mkdir -p "$dir" && "build_$set" ;;
run/one|run/two)
  cmake -S lib/Runtime -B "$dir/rt" -G Ninja >/dev/null && ninja -C "$dir/rt" >/dev/null || exit 1
  python3 -m pip install -q --no-index --find-links .whl pytest 2>/dev/null
  export MX_RUNTIME_LIB=$dir/rt/libmx_runtime.so MX_CACHE_DIR=$dir/cache PYTHONPATH=$PWD/python \
    PYTHONUNBUFFERED=1 NCCL_NVLS_ENABLE=0
  nvidia-smi --query-gpu=name --format=csv,noheader
  failures=0
  "run_$set"
  # The exit status says whether every test file passed (a failure, an error or a time-out is 1).
  [ "$failures" -eq 0 ] || { echo "$failures test file(s) did not pass"; exit 1; }
  ;;
*) usage ;;
esac
