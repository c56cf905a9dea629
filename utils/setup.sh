#!/usr/bin/env bash
# Installs every dependency of mx on a fresh Debian 12 machine and builds it:
# LLVM/MLIR 22 from Debian, CMake + Ninja + ccache, GoogleTest for the C++ unit
# tests, a Python venv (.venv) with the mx package (python/mx, installed editable:
# numpy, ml_dtypes), pytest and nvdisasm (NVIDIA's wheel) for the lit tests that
# read SASS.
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

export PATH=/usr/local/cuda/bin:$PATH
cmake -S . -B build -G Ninja \
  -DPython3_EXECUTABLE="$PWD/.venv/bin/python" \
  -DLLVM_EXTERNAL_LIT=/usr/lib/llvm-22/bin/lit
cmake --build build
