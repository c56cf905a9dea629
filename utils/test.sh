#!/usr/bin/env bash
# Runs every mx test: the C++ unit tests (GoogleTest, mx-unittests), the lit
# suite (IR tests and executed CPU tests through mlir-runner), both through the
# check-mx target, and the Python tests (reference model, CPU pipeline against
# the reference on fresh random inputs; GPU tests skip without a GPU).
set -euo pipefail
cd "$(dirname "$0")/.."
cmake --build build --target check-mx
.venv/bin/python -m pytest -q python/tests
