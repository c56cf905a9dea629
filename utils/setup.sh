#!/usr/bin/env bash
# Installs every dependency of mx on a fresh Debian 12 machine and builds it:
# LLVM/MLIR 22 from Debian, CMake + Ninja + ccache, GoogleTest for the C++ unit
# tests, a Python venv (.venv) with the mx package (python/mx, installed editable:
# numpy, ml_dtypes), pytest and nvdisasm (NVIDIA's wheel) for the lit tests that
# read SASS, and torch (CPU use) for mx.torch's tests where the CUDA toolkit is.
# The CUDA toolkit is optional and found under /usr/local/cuda when present
# (the GPU runtime and ptxas checks).
set -euo pipefail
cd "$(dirname "$0")/.."

sudo=""
if [ "$(id -u)" != 0 ]; then sudo=sudo; fi
$sudo apt-get update
$sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \
  ca-certificates cmake ninja-build g++ ccache git python3 python3-venv libgtest-dev \
  llvm-22-dev llvm-22-tools libmlir-22-dev mlir-22-tools

python3 -m venv .venv
.venv/bin/python -m pip install --quiet --upgrade pip
.venv/bin/python -m pip install --quiet -r python/requirements.txt --editable .
# torch, for mx.torch's tests on the CPU (python/tests/test_torch*.py): the PyPI wheel without its
# CUDA dependencies (they are several GB), plus the three libraries it links that the CUDA toolkit
# in /usr/local/cuda lacks; without the toolkit torch would not load, and those tests skip.
if [ -d /usr/local/cuda ]; then
  .venv/bin/python -m pip install --quiet --no-deps "torch==2.11.*" "nvidia-cusparselt-cu13==0.8.0" \
    "nvidia-nvshmem-cu13==3.4.5" "nvidia-cufile==1.15.1.6.*"
  .venv/bin/python -m pip install --quiet filelock "typing-extensions>=4.10" "sympy>=1.13.3" \
    "networkx>=2.5.1" jinja2 "fsspec>=0.8.5"
fi

export PATH=/usr/local/cuda/bin:$PATH
cmake -S . -B build -G Ninja \
  -DPython3_EXECUTABLE="$PWD/.venv/bin/python" \
  -DLLVM_EXTERNAL_LIT=/usr/lib/llvm-22/bin/lit
cmake --build build
