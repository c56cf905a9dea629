"""One mx program on several GPUs: partition examples/distributed/linear.mlir and run it, one process per GPU.

The program is annotated, not written per GPU: `mx-opt --mx-partition` derives each GPU's program, with
the all-gathers of X's compact data and scales that the GEMM needs. Run from the repository root:

  .venv/bin/python examples/distributed.py
      Here (MLIR, no GPU needed): prints GPU 0's program for 2 GPUs, then runs the same annotated
      program partitioned for a grid of one device on the CPU, against mx.reference.
  .venv/bin/python examples/distributed.py build /tmp/mx-distributed [sm_90a|sm_100a]
      Compiles the 2-GPU program into /tmp/mx-distributed/linear.so (MLIR and libmx_runtime.so).
  torchrun --standalone --nproc-per-node 2 examples/distributed.py run /tmp/mx-distributed
      On a machine with 2 GPUs (no MLIR): each process takes one GPU (LOCAL_RANK) and one rank of an
      NCCL communicator (mx.runtime.init_process_group shares its id through a file named after
      torchrun's rendezvous), calls the program on its shards of X and W and checks its slice of Y.
"""

import sys
from pathlib import Path

import ml_dtypes
import numpy as np

import mx
from mx import reference, runtime, tools

ROOT = Path(__file__).resolve().parents[1]
PROGRAM = ROOT / "examples" / "distributed" / "linear.mlir"
DEVICES = 2


def inputs():
    """X [512, 1024] and W [512, 1024] in bf16, the same in every process."""
    rng = np.random.default_rng(0)
    x = rng.standard_normal((512, 1024)).astype(ml_dtypes.bfloat16)
    w = (rng.standard_normal((512, 1024)) / 32).astype(ml_dtypes.bfloat16)
    return x, w


def expected(x, w):
    """Y = X W^T in MXFP8, as mx.reference computes it (float32)."""
    xd, xs = reference.quantize(x, (1, 32))
    wd, ws = reference.quantize(w, (1, 32))
    return reference.scaled_matmul(xd, xs, wd, ws, (1, 32), (1, 32))


def relative_error(got, want):
    return np.linalg.norm(got.astype(np.float32) - want) / np.linalg.norm(want)


def on_the_cpu():
    partitioned = tools.run_mx_opt(PROGRAM.read_text(), "--mx-partition")
    print(f"The program of each of the {DEVICES} GPUs (mx-opt --mx-partition):\n{partitioned}")
    one_device = PROGRAM.read_text().replace(f"shape = {DEVICES})", "shape = 1)")
    x, w = inputs()
    y = mx.compile(tools.run_mx_opt(one_device, "--mx-partition"))(x, w)
    error = relative_error(y, expected(x, w))
    print(f"On a grid of one device, on the CPU: Y {y.shape}, relative error {error:.1e} against mx.reference")
    return 0 if error < 1e-2 else 1


def build(directory, chip=None):
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    partitioned = tools.run_mx_opt(PROGRAM.read_text(), "--mx-partition")
    tools.compile_gpu_library(partitioned, directory / "linear.so", chip=chip)
    print(f"built {directory / 'linear.so'}: run it with torchrun --standalone --nproc-per-node {DEVICES} "
          f"examples/distributed.py run {directory}")
    return 0


def run(directory):
    runtime.init_process_group()  # RANK, WORLD_SIZE and LOCAL_RANK from torchrun; picks the GPU
    size, rank = runtime.process_group()
    lib = runtime.load_compiled(Path(directory) / "linear.so")
    x, w = inputs()
    rows = x.shape[0] // size
    shards = [np.ascontiguousarray(a[rank * rows:(rank + 1) * rows]) for a in (x, w)]
    buffers = [runtime.DeviceBuffer.from_numpy(a) for a in shards]
    (y,) = runtime.call_mlir_function(lib, "linear", buffers, result_ranks=[2])
    mine = y.to_numpy(ml_dtypes.bfloat16)
    y.free()
    columns = w.shape[0] // size
    error = relative_error(mine, expected(x, w)[:, rank * columns:(rank + 1) * columns])
    print(f"rank {rank} of {size}: Y[:, {rank * columns}:{(rank + 1) * columns}] {mine.shape}, "
          f"relative error {error:.1e} against mx.reference")
    runtime.destroy_process_group()
    return 0 if error < 1e-2 else 1


def main(argv):
    if argv[:1] == ["build"] and len(argv) >= 2:
        return build(argv[1], *argv[2:3])
    if argv[:1] == ["run"] and len(argv) == 2:
        return run(argv[1])
    if not argv:
        return on_the_cpu()
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
