"""mx.toolchain: where the project's tools and libraries are, and an identity for the compile cache.

One home for "where is mx-opt / libmx_runtime": an environment variable naming the file ($MX_OPT,
$MLIR_TRANSLATE, $LLC, $MX_RUNTIME_LIB), else the build tree ($MX_BUILD_DIR, or build/ of the
checkout this package is installed from in editable mode), else LLVM 22's bin directory, else PATH.
A regular (non-editable) install has no checkout next to it, so it relies on the environment
variables. `toolchain_id` fingerprints the tools a compile used, so that the cache (mx.compiler)
never serves a library that an older mx-opt built.
"""

from __future__ import annotations

import functools
import hashlib
import os
import shutil
from pathlib import Path

LLVM_BIN = Path("/usr/lib/llvm-22/bin")
LLVM_LIB = Path("/usr/lib/llvm-22/lib")
_CHECKOUT = Path(__file__).resolve().parents[2]


def _env_name(name: str) -> str:
    return name.upper().replace("-", "_")


def build_dir() -> Path | None:
    """$MX_BUILD_DIR, else the checkout's build/ when this package runs from a checkout."""
    override = os.environ.get("MX_BUILD_DIR")
    if override:
        return Path(override)
    candidate = _CHECKOUT / "build"
    return candidate if (candidate / "CMakeCache.txt").is_file() else None


def _executable(path: Path) -> bool:
    return path.is_file() and os.access(path, os.X_OK)


def locate_tool(name: str) -> Path | None:
    """`mx-opt` or an LLVM tool (see the module docstring for the search order), or None."""
    override = os.environ.get(_env_name(name))
    candidates = [Path(override)] if override else []
    build = build_dir()
    if build:
        candidates.append(build / "bin" / name)
    candidates.append(LLVM_BIN / name)
    found = next((c for c in candidates if _executable(c)), None)
    if found is None and (on_path := shutil.which(name)):
        found = Path(on_path)
    return found


def find_tool(name: str) -> Path:
    """Like locate_tool, but a missing tool is a FileNotFoundError that says how to provide it."""
    found = locate_tool(name)
    if found is None:
        raise FileNotFoundError(f"cannot find {name}; build the project (utils/setup.sh), set "
                                f"${_env_name(name)} or $MX_BUILD_DIR, or put it on PATH")
    return found


def runtime_library_candidates() -> list[Path]:
    """Where libmx_runtime.so may be: $MX_RUNTIME_LIB alone when set, else the build tree."""
    override = os.environ.get("MX_RUNTIME_LIB")
    if override:
        return [Path(override)]
    build = build_dir()
    return [build / sub / "libmx_runtime.so" for sub in ("lib", "lib/Runtime")] if build else []


def runtime_library_dir() -> Path | None:
    """The directory of the first existing runtime library candidate (to link compiled code with)."""
    found = next((p for p in runtime_library_candidates() if p.is_file()), None)
    return found.parent if found else None


def _fingerprint(path: Path) -> str:
    stat = path.stat()
    return f"{path.resolve()}:{stat.st_size}:{stat.st_mtime_ns}"


@functools.cache
def toolchain_id(*tools: str) -> str:
    """A hash of the given tools' resolved paths, sizes and modification times: rebuilding any of
    them (a new mx-opt) changes it. Raises FileNotFoundError when one is missing."""
    digest = hashlib.sha256()
    for tool in tools:
        digest.update(_fingerprint(find_tool(tool)).encode())
    return digest.hexdigest()[:24]
