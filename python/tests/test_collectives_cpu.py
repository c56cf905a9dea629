"""The collectives' C API where there is no GPU: every failure is an error with its reason, at once.

libmx_runtime links libcuda.so.1, which a machine without a driver lacks; each check runs in a process
of its own that loads the runtime against the CUDA toolkit's stub libcuda (whose every call fails), so
that what is checked is what the runtime decides before it touches a GPU: the placed all-gather's
arguments, NCCL missing, no communicator, a group that failed to start, the join (mxrtCollectivesJoin)
without anything to join, and mxrt*'s statuses. The checks use fake device pointers, never
dereferenced: a collective that reached NCCL or CUDA here would fail differently (or crash).
Skipped where the runtime or the stub is not built/installed. The 2-GPU side is in
test_gpu_distributed.py.
"""

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from mx import toolchain

CUDA = Path(os.environ.get("CUDA_HOME", "/usr/local/cuda"))
STUB = CUDA / "lib64" / "stubs" / "libcuda.so"
NCCL = CUDA / "lib64" / "libnccl.so.2"
INVALID, NCCL_STATUS = 1, 5  # MXRT_ERROR_INVALID_ARGUMENT, MXRT_ERROR_NCCL

# Run in the child: `lib` is the runtime (ctypes), `error()` its first error since the last read (which
# clears it), SEND/RECV fake pointers.
PRELUDE = """
import ctypes, os, sys
lib = ctypes.CDLL(sys.argv[1])
lib.mxrtGetLastError.restype = ctypes.c_char_p
for name, args in {"mxrtAllGatherPlaced": [ctypes.c_void_p] * 2 + [ctypes.c_uint64] * 3 + [ctypes.c_int32, ctypes.c_void_p],
                   "mxrtAllGather": [ctypes.c_void_p] * 2 + [ctypes.c_uint64, ctypes.c_int32, ctypes.c_void_p],
                   "mxrtCollectivesJoin": [ctypes.c_void_p], "mxrtGroupStart": [], "mxrtGroupEnd": []}.items():
    getattr(lib, name).argtypes, getattr(lib, name).restype = args, ctypes.c_int32
lib.mxrtCollectiveAlloc.argtypes, lib.mxrtCollectiveAlloc.restype = [ctypes.c_uint64, ctypes.c_void_p], ctypes.c_void_p
lib.mxrtCollectiveFree.argtypes, lib.mxrtCollectiveFree.restype = [ctypes.c_void_p, ctypes.c_void_p], None
def error():
    return lib.mxrtGetLastError().decode()
SEND, RECV = 0x10000, 0x20000
"""


def _run(body, tmp_path, nccl=None):
    library = next((p for p in toolchain.runtime_library_candidates() if p.is_file()), None)
    if library is None or not STUB.is_file():
        pytest.skip("needs libmx_runtime.so and the CUDA toolkit's stub libcuda.so")
    (tmp_path / "libcuda.so.1").symlink_to(STUB)
    env = dict(os.environ, LD_LIBRARY_PATH=str(tmp_path), MX_NCCL_LIBRARY=str(nccl or tmp_path / "none.so.2"))
    env.pop("MX_NCCL_PLACED_GATHER", None)
    script = PRELUDE + textwrap.dedent(body)
    result = subprocess.run([sys.executable, "-c", script, str(library)], env=env, capture_output=True,
                            text=True, timeout=60)
    assert result.returncode == 0, result.stdout + result.stderr


def test_placed_gather_checks_its_arguments_first(tmp_path):
    _run(f"""
        # A chunk that does not fit in a rank's stride, whatever the offset.
        for chunk, stride, offset in ((9, 8, 0), (4, 8, 5), (1, 8, 9), (2**64 - 1, 8, 2)):
            assert lib.mxrtAllGatherPlaced(SEND, RECV, chunk, stride, offset, 2, None) == {INVALID}
            assert "a chunk of %d bytes at offset %d does not fit in a rank's %d bytes" % (chunk, offset, stride) \\
                in error(), error()
        os.environ["MX_NCCL_PLACED_GATHER"] = "ring"
        assert lib.mxrtAllGatherPlaced(SEND, RECV, 4, 8, 4, 2, None) == {INVALID}
        assert 'MX_NCCL_PLACED_GATHER is "ring", expected "broadcast" or "sendrecv"' in error(), error()
        del os.environ["MX_NCCL_PLACED_GATHER"]
        # Empty chunks need nothing, not even NCCL.
        assert lib.mxrtAllGatherPlaced(SEND, RECV, 0, 8, 8, 2, None) == 0
        assert lib.mxrtAllGatherPlaced(SEND, None, 4, 8, 0, 2, None) == {INVALID}
        assert "the receive buffer of the placed all-gather of 4 bytes" in error(), error()
        """, tmp_path)


@pytest.mark.parametrize("method", ["broadcast", "sendrecv"])
def test_without_nccl_every_call_says_so(tmp_path, method):
    _run(f"""
        os.environ["MX_NCCL_PLACED_GATHER"] = "{method}"
        assert lib.mxrtAllGatherPlaced(SEND, RECV, 4, 8, 4, 2, None) == {NCCL_STATUS}
        message = error()
        assert message.startswith("mxrtAllGatherPlaced: NCCL is not available: dlopen(") and "none.so.2" in message, \\
            message
        assert lib.mxrtCollectivesJoin(None) == {NCCL_STATUS}
        assert "mxrtCollectivesJoin: NCCL is not available" in error(), error()
        # In a group that could not start, the placed gather and the end return the start's failure.
        assert lib.mxrtGroupStart() == {NCCL_STATUS}
        assert "mxrtGroupStart: NCCL is not available" in error(), error()
        assert lib.mxrtAllGatherPlaced(SEND, RECV, 4, 8, 0, 2, None) == {NCCL_STATUS}
        assert lib.mxrtAllGatherPlaced(SEND, RECV, 4, 8, 4, 2, None) == {NCCL_STATUS}
        assert error() == "", "a collective of a failed group added a message: " + error()
        assert lib.mxrtCollectivesJoin(None) == {INVALID}
        assert "mxrtCollectivesJoin: a collective group is open on this thread" in error(), error()
        assert lib.mxrtGroupEnd() == {NCCL_STATUS}
        """, tmp_path)


def test_without_a_communicator_every_call_says_so(tmp_path):
    if not NCCL.is_file():
        pytest.skip(f"needs NCCL at {NCCL}")
    _run(f"""
        assert lib.mxrtAllGatherPlaced(SEND, RECV, 4, 8, 4, 2, None) == {NCCL_STATUS}
        assert "mxrtAllGatherPlaced: no communicator: call mxrtCommInit first" in error(), error()
        assert lib.mxrtAllGather(SEND, RECV, 4, 2, None) == {NCCL_STATUS}
        assert "mxrtAllGather: no communicator" in error(), error()
        assert lib.mxrtCollectivesJoin(None) == {NCCL_STATUS}
        assert "mxrtCollectivesJoin: no communicator: call mxrtCommInit first" in error(), error()
        # A gathered buffer of registered memory needs the communicator too: NULL, with the reason, and
        # nothing allocated (the free of NULL is a no-op).
        assert lib.mxrtCollectiveAlloc(4 << 20, None) is None
        assert "mxrtCollectiveAlloc: no communicator: call mxrtCommInit first" in error(), error()
        lib.mxrtCollectiveFree(None, None)
        assert error() == "", error()
        """, tmp_path, nccl=NCCL)


def test_python_binding_reports_the_runtimes_reason(tmp_path):
    _run("""
        os.environ["MX_RUNTIME_LIB"] = sys.argv[1]
        from mx import runtime
        for call in (lambda: runtime.all_gather_placed(SEND, RECV, 4, 8, 4), runtime.join_collectives,
                     lambda: runtime.all_gather(SEND, RECV, 4)):
            try:
                call()
                raise AssertionError("no error")
            except runtime.MXRuntimeError as e:
                assert e.status == runtime.Status.NCCL and "NCCL is not available" in str(e), (e.status, str(e))
        """, tmp_path)
