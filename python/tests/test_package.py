"""The mx package as a user installs it: `pip install .` at the repository root into a fresh venv (not editable), then
import it from there and compile and run a CPU kernel, finding mx-opt through $MX_BUILD_DIR. Also checks
that these tests themselves import the installed package (utils/setup.sh's editable install)."""

import os
import subprocess
import sys
import sysconfig
import venv
from pathlib import Path

import pytest

import mx
from mx import toolchain

ROOT = Path(__file__).resolve().parents[2]
PROGRAM = """
import sys, numpy as np, mx
from mx import reference
assert "site-packages" in mx.__file__, mx.__file__
x = np.linspace(-3, 3, 64 * 64, dtype=np.float32).reshape(64, 64)
data, scales = mx.quantize(x)
ref_data, ref_scales = reference.quantize(x, (1, 32))
assert (data.view(np.uint8) == ref_data.view(np.uint8)).all() and (scales.view(np.uint8) == ref_scales.view(np.uint8)).all()
from importlib import metadata
from pathlib import Path
installed, = metadata.distributions(name="mx-mlir", path=[str(Path(mx.__file__).parents[1])])
assert installed.metadata["License-Expression"] == "Apache-2.0 WITH LLVM-exception"
files = installed.files
assert any(f.name == "LICENSE" for f in files)
stray = [str(f) for f in files if not str(f).startswith(("mx/", "mx_mlir-", "../../../bin/"))]
assert not stray, f"the wheel holds files outside the package: {stray[:5]}"
print("ok", mx.__version__)
"""


def test_tests_import_the_installed_package():
    assert Path(mx.__file__).resolve().is_relative_to(ROOT / "python"), mx.__file__
    assert "python" not in [Path(p).name for p in sys.path if p], "a test put python/ on sys.path"


@pytest.mark.skipif(toolchain.locate_tool("mx-opt") is None, reason="needs a built mx-opt")
def test_pip_install_into_a_fresh_venv(tmp_path):
    env_dir = tmp_path / "venv"
    venv.create(env_dir, with_pip=True, system_site_packages=False)
    python = env_dir / "bin" / "python"
    install = subprocess.run([python, "-m", "pip", "install", "--quiet", "--no-deps", str(ROOT)],
                             capture_output=True, text=True)
    if install.returncode and "No matching distribution found for setuptools" in install.stderr:
        pytest.skip("pip's isolated build needs setuptools from a package index, which is unreachable")
    assert install.returncode == 0, install.stderr
    # numpy and ml_dtypes (the package's dependencies) from this interpreter's site-packages, after the
    # fresh venv's own: pip's resolver would fetch them from the network, which tests do not use.
    env = {**os.environ, "PYTHONPATH": sysconfig.get_paths()["purelib"],
           "MX_BUILD_DIR": str(toolchain.find_tool("mx-opt").parent.parent),
           "MX_CACHE_DIR": str(tmp_path / "cache")}
    run = subprocess.run([python, "-c", PROGRAM], capture_output=True, text=True, env=env, cwd=tmp_path)
    assert run.returncode == 0, run.stderr
    assert run.stdout.startswith("ok ")
