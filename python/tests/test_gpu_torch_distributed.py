"""mx.torch on 2 GPUs (one process per GPU, NCCL): test_torch_distributed.py's tests with device
"cuda": FSDP2 and sequence-parallel loss curves of every recipe (FP8, MXFP4, NVFP4) against one GPU on the same
global batches, the gathered weights and a sharded quantize bit for bit against mx.reference, the
all-gathered bytes against bf16 FSDP2's, the transposed operands against the row operands (no byte
transpose for per-tensor and delayed FSDP2 weights), and FSDP2 keeping the weights unsharded. Each rank sees only its own GPU (CUDA_VISIBLE_DEVICES), as
cuda:0, where mx runs; NCCL_NVLS_ENABLE=0 is set in every rank.

Needs torch with 2 CUDA devices; skipped otherwise. A GPU machine has no mx-opt, so the kernels come
from mx.compile's cache: `python python/tests/test_gpu_torch_distributed.py build DIR [CHIP]` compiles every
program these tests use into the cache DIR on a machine with mx-opt; run the tests there with
MX_CACHE_DIR=DIR.
"""

import os
import sys

import pytest

import distributed_cases as cases

if __name__ == "__main__":
    if len(sys.argv) < 3 or sys.argv[1] != "build":
        sys.exit("usage: test_gpu_torch_distributed.py build CACHE_DIR [CHIP]")
    os.environ["MX_CACHE_DIR"] = sys.argv[2]
    cases.plans(sys.argv[3] if len(sys.argv) > 3 else "sm_90a")
    sys.exit(0)

torch = pytest.importorskip("torch")
if not torch.cuda.is_available() or torch.cuda.device_count() < 2:
    pytest.skip("needs 2 CUDA GPUs", allow_module_level=True)

from test_torch_distributed import (runs, test_fsdp2_gathers_fp8, test_fsdp2_matches_one_process,  # noqa: E402,F401
                                    test_fsdp2_kept_unsharded_gathers_each_part_once,
                                    test_fsdp2_resume_from_state_dict_is_bit_identical,
                                    test_fsdp2_transposed_operands,
                                    test_plans_builds_every_program, test_sequence_parallel_matches_one_process,
                                    test_sequence_parallel_fused_wgrad_accumulation,
                                    test_sharded_quantize_and_gather_equal_whole_quantize)


@pytest.fixture(scope="module")
def device():
    return "cuda"
