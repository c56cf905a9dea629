"""A mutation fuzzer over the lit inputs, through every mx pass and pipeline.

Each case takes one `// -----` chunk of a file under test/, mutates it (a shape or block entry
replaced by an edge value, an element type or keyword swapped, a line dropped) and runs `mx-opt`
with one pass or pipeline. Diagnostics are fine; what fails the test is a crash (a signal, an
`LLVM ERROR`, a stack dump), a hang (over TIMEOUT seconds), or an exit status of 0 after an error.
The seeds are fixed, plus one fresh seed that is printed so that a failure can be replayed
(`MX_FUZZ_SEED=<seed>`); the whole run stays within BUDGET seconds.
"""

import os
import random
import re
import subprocess
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from mx import tools

TEST_DIR = Path(__file__).resolve().parents[2] / "test"
BUDGET, TIMEOUT = 100.0, 30.0
FIXED_SEEDS = [1, 2, 3]
PASSES = [
    ["--convert-mx-to-linalg"], ["--mx-lower-to-cpu"], ["--canonicalize"],
    ["--convert-mx-to-gpu=chip=sm_90a"], ["--convert-mx-to-gpu=chip=sm_100a"],
    ["--convert-mx-to-cublas=chip=sm_90a gemm=auto"], ["--convert-mx-to-cublas=chip=sm_100a"],
    ["--mx-lower-to-nvvm=chip=sm_90a format=isa"], ["--mx-lower-to-nvvm=chip=sm_100a format=isa"],
    ["--mx-lower-to-nvvm=chip=sm_90a format=isa gemm=cublas"],
    ["--mx-lower-to-nvvm=chip=sm_100a format=isa gemm=cublas"], ["--mx-lower-to-nvvm=chip=sm_90a format=isa gemm=kernel"],
    ["--convert-mx-to-cublas=chip=sm_100a gemm=auto"], ["--mx-lower-to-nvvm=chip=sm_90a format=isa gemm-config=consumers=3,waves=1,cluster=1x2"],
    ["--one-shot-bufferize=bufferize-function-boundaries", "--mx-guard-device-calls"],
    ["--mx-partition"], ["--sharding-propagation", "--shard-partition"],
    ["--mx-partition", "--mx-shard-single-device", "--mx-lower-to-cpu"],
    ["--mx-partition", "--mx-lower-to-nvvm=chip=sm_90a format=isa"],
]
EDGE_VALUES = [0, 1, 2, 3, 4, 5, 7, 8, 15, 16, 17, 31, 32, 33, 64, 100, 127, 128, 129, 255, 256, 257,
               512, 1024, 2**31 - 1, 2**31, 2**32, 2**47, 2**48, 2**62, 2**63 - 1]
SWAPS = [["f8E4M3FN", "f8E5M2", "f6E3M2FN", "f6E2M3FN", "f4E2M1FN", "i8", "f8E8M0FNU", "f32", "bf16", "f16"],
         ["all_gather", "all_reduce", "reduce_scatter"], ["split_axes = [[0]]", "split_axes = [[1]]"],
         ["k_contiguous", "k_outer"], ["tiles", "blockwise"], ["ceil", "floor", "exact"],
         ["max", "most_recent"]]
NUMBER = re.compile(r"(?<=[<x\[ ,(])\d+(?=[x\]>,) ])")
CRASH_MARKS = ("LLVM ERROR", "Stack dump", "PLEASE submit a bug report")


def corpus():
    """Every `// -----` chunk of the lit inputs that holds an mx op, comment lines dropped."""
    chunks = []
    for path in sorted(TEST_DIR.rglob("*.mlir")):
        for chunk in path.read_text().split("// -----"):
            body = "\n".join(line for line in chunk.splitlines() if not line.lstrip().startswith("//"))
            if "mx." in body:
                chunks.append(body)
    return chunks


def mutate(rng, source):
    for _ in range(rng.randint(1, 3)):
        kind = rng.random()
        if kind < 0.6:
            numbers = list(NUMBER.finditer(source))
            if numbers:
                match = rng.choice(numbers)
                source = source[:match.start()] + str(rng.choice(EDGE_VALUES)) + source[match.end():]
        elif kind < 0.9:
            words = rng.choice(SWAPS)
            present = [w for w in words if w in source]
            if present:
                old = rng.choice(present)
                source = source.replace(old, rng.choice(words), 1)
        else:
            lines = source.splitlines()
            if len(lines) > 2:
                del lines[rng.randrange(1, len(lines) - 1)]
                source = "\n".join(lines)
    return source


def run_case(mx_opt, source, options):
    """None if mx-opt handled the input, else what went wrong."""
    try:
        result = subprocess.run([str(mx_opt), "-", *options], input=source, capture_output=True,
                                text=True, timeout=TIMEOUT)
    except subprocess.TimeoutExpired:
        return f"timeout after {TIMEOUT} s"
    if result.returncode < 0:
        return f"killed by signal {-result.returncode}"
    if any(mark in result.stderr for mark in CRASH_MARKS):
        return "crash: " + result.stderr.strip().splitlines()[0]
    if result.returncode == 0 and "error:" in result.stderr:
        return "exit status 0 after: " + result.stderr.strip().splitlines()[0]
    return None


def test_fuzz_mx_opt():
    try:
        mx_opt = tools.find_tool("mx-opt")
    except tools.ToolError as error:
        pytest.skip(str(error))
    fresh = int(os.environ.get("MX_FUZZ_SEED", random.SystemRandom().randrange(1 << 30)))
    print(f"fuzz seeds: fixed {FIXED_SEEDS}, fresh {fresh} (replay with MX_FUZZ_SEED={fresh})")
    sources = corpus()
    cases = []
    for seed in [*FIXED_SEEDS, fresh]:
        rng = random.Random(seed)
        cases += [(seed, mutate(rng, rng.choice(sources)), rng.choice(PASSES)) for _ in range(400)]
    deadline = time.monotonic() + BUDGET
    failures, ran = [], 0

    def check(case):
        if time.monotonic() > deadline:
            return None
        seed, source, options = case
        problem = run_case(mx_opt, source, options)
        return (seed, options, problem, source) if problem else "ok"

    with ThreadPoolExecutor(max_workers=os.cpu_count() or 2) as pool:
        for outcome in pool.map(check, cases):
            if outcome is None:
                continue
            ran += 1
            if outcome != "ok":
                failures.append(outcome)
    print(f"ran {ran} of {len(cases)} cases within {BUDGET} s")
    assert ran > 0
    assert not failures, "\n\n".join(f"seed {seed}, mx-opt {' '.join(options)}: {problem}\n{source}"
                                     for seed, options, problem, source in failures[:3])
