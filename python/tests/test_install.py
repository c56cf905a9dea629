"""The installed CMake package (`cmake --install`): everything a user of mx as a library needs is in the
prefix, and the installed mx-opt runs from there. README.md ("mx as a library") builds and runs
examples/consumer against such a prefix (test_readme.py runs it); this test checks the prefix itself."""

import subprocess
from pathlib import Path

import pytest

from mx import toolchain

ROOT = Path(__file__).resolve().parents[2]
BUILD = toolchain.build_dir()
pytestmark = pytest.mark.skipif(BUILD is None or not (BUILD / "bin" / "mx-opt").is_file(),
                                reason="needs the CMake build tree")


@pytest.fixture(scope="module")
def prefix(tmp_path_factory):
    prefix = tmp_path_factory.mktemp("prefix")
    subprocess.run(["cmake", "--install", BUILD, "--prefix", prefix], check=True, capture_output=True)
    return prefix


@pytest.mark.parametrize("path", [
    "include/mx/Dialect/MX/IR/MXOps.td",
    "include/mx/Dialect/MX/IR/MXOps.h",
    "include/mx/Dialect/MX/IR/MXOps.h.inc",
    "include/mx/Dialect/MX/IR/MXAttrs.h.inc",
    "include/mx/Conversion/Passes.h.inc",
    "include/mx/Conversion/Passes.capi.h.inc",
    "include/mx/InitAllDialects.h",
    "include/mx/InitAllExtensions.h",
    "include/mx/InitAllPasses.h",
    "include/mx/Pipelines/Pipelines.h",
    "include/mx/Runtime/MXRuntime.h",
    "include/mx-c/Dialects.h",
    "include/mx-c/Passes.h",
    "lib/libMXDialect.a",
    "lib/libMXPipelines.a",
    "lib/libMXRegisterAllPasses.a",
    "lib/libMXCAPI.a",
    "lib/cmake/mx/MXConfig.cmake",
    "lib/cmake/mx/MXConfigVersion.cmake",
    "lib/cmake/mx/MXTargets.cmake",
    "share/doc/mx/LICENSE",
])
def test_installed(prefix, path):
    assert (prefix / path).is_file(), f"{path} is not installed"


def test_exported_targets(prefix):
    targets = (prefix / "lib/cmake/mx/MXTargets.cmake").read_text()
    for name in ("MXDialect", "MXToGPU", "MXPipelines", "MXRegisterAllDialects", "MXCAPI", "mx-opt"):
        assert f"add_library({name} " in targets or f"add_executable({name} " in targets, name


def test_runtime_installed_where_built(prefix):
    if toolchain.runtime_library_dir() is None:
        pytest.skip("libmx_runtime.so is built only where the CUDA toolkit is")
    assert (prefix / "lib/libmx_runtime.so").is_file()
    assert "add_library(mx_runtime SHARED IMPORTED)" in (prefix / "lib/cmake/mx/MXRuntimeTargets.cmake").read_text()


def test_installed_mx_opt_runs(prefix):
    """The installed driver finds libMLIR.so (not on the loader's path) through its run path."""
    result = subprocess.run([prefix / "bin/mx-opt", ROOT / "examples/kernels/quantize.mlir", "--mx-lower-to-cpu"],
                            capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    assert "llvm.func @_mlir_ciface_quantize" in result.stdout
