"""bench/placed_gather: NCCL's all-gather against the placed all-gather in chunks, on 2 GPUs.

  torchrun --standalone --nproc-per-node 2 bench/placed_gather.py [--payloads MIB,...] [--chunks C,...]
      [--iters N]

Needs only the runtime (libmx_runtime, $MX_RUNTIME_LIB or the build tree) and torch for buffers and
timing; no compiled program, no MLIR. What a pipelined quantized gather (mx-pipeline-gathers) would
get from NCCL, measured before the compiler emits it: per bf16 payload P (a [M, 8192] bf16 tensor
split along M, as in bench/collectives), on mx's communicator (mx.runtime.init_process_group):

* bf16 all-gather: mxrtAllGather of the P bytes (the baseline, = torch's all_gather_into_tensor);
* u8 all-gather: mxrtAllGather of P / 2 bytes (what FP8 data puts on the wire), out of place (from
  a send buffer) and in place (each rank's part already at its rows, as compiled programs gather);
* placed x C, by broadcast and by send/recv: the same bytes as C chunks of rows, each rank's chunk c
  placed at its rows by mxrtAllGatherPlaced on the side stream (in place), then mxrtCollectivesJoin;
* cast, then gather: torch's bf16 -> fp8 cast of the local shard into its rows of the gathered
  buffer, then one placed gather (a quantize before an unpipelined gather);
* cast | gather x C: the cast of chunk c + 1 (on the call stream) overlapping the placed gather of
  chunk c (on the side stream): the pipeline, with torch's cast standing in for mx's quantize.

Each row gives the time per call and its ratio to the bf16 all-gather; the issue's goal for the
quantized gather is <= 0.6. Bus bandwidth = bytes gathered x (n - 1) / n / time (nccl-tests). Before
timing, every placed variant's bytes are checked against the all-gather's (random bytes per rank);
a mismatch prints FAILED and the script exits 1. Times as bench/collectives takes them: --iters calls
between two CUDA events on torch's current stream (call-stream mode), median of 5 loops, slower rank.
NCCL_NVLS_ENABLE=0 is set before the communicator exists.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))
from collectives import loop_times  # noqa: E402  (the timing loop of bench/collectives.py)
K = 8192
DEVICES = 2
ROUNDS = 5
METHODS = ("broadcast", "sendrecv")  # $MX_NCCL_PLACED_GATHER


class Bench:
    """One rank's buffers for payload `mib`: the bf16 shard, the gathered bytes, the u8 shard."""

    def __init__(self, mib, rank):
        import torch
        self.rank, self.rows = rank, mib * 2**20 // (2 * K)
        self.local = self.rows // DEVICES
        gen = torch.Generator(device="cuda").manual_seed(7 + rank)
        self.x = torch.randn(self.local, K, device="cuda", generator=gen).bfloat16()
        self.bf16_out = torch.empty(self.rows, K, dtype=torch.bfloat16, device="cuda")
        self.send = torch.randint(0, 256, (self.local, K), dtype=torch.uint8, device="cuda", generator=gen)
        self.out = torch.empty(self.rows, K, dtype=torch.uint8, device="cuda")
        self.stride = self.local * K  # bytes of one rank's rows

    def bf16_gather(self):
        from mx import runtime
        runtime.all_gather(self.x.data_ptr(), self.bf16_out.data_ptr(), self.x.numel() * 2)

    def u8_gather(self):
        from mx import runtime
        runtime.all_gather(self.send.data_ptr(), self.out.data_ptr(), self.stride)

    def u8_gather_in_place(self):
        from mx import runtime
        runtime.all_gather(self._own(0, self.local).data_ptr(), self.out.data_ptr(), self.stride)

    def _own(self, row, rows):
        """This rank's rows [row, row + rows) of its shard, in the gathered buffer."""
        start = self.rank * self.local + row
        return self.out[start:start + rows]

    def placed(self, chunks, cast=None):
        """The gather as `chunks` placed chunks, in place: this rank's rows of `out` are its part.
        `cast` "serial" or "pipelined": torch's fp8 cast of the shard writes them first (all of it,
        or chunk by chunk before each chunk's gather); None: they were put there before."""
        import torch
        from mx import runtime
        rows = self.local // chunks
        if cast == "serial":
            self._own(0, self.local).view(torch.float8_e4m3fn).copy_(self.x)
        for c in range(chunks):
            own = self._own(c * rows, rows)
            if cast == "pipelined":
                own.view(torch.float8_e4m3fn).copy_(self.x[c * rows:(c + 1) * rows])
            runtime.all_gather_placed(own.data_ptr(), self.out.data_ptr(), rows * K, self.stride, c * rows * K)
        runtime.join_collectives()


def timed_us(fn, iterations):
    """Time per call: `iterations` calls between two CUDA events on the current stream, median of
    ROUNDS loops, the slower rank's (an mx all-gather of the medians)."""
    import torch
    from mx import runtime
    times = loop_times(fn, iterations, ROUNDS, barrier)
    mine = torch.tensor([statistics.median(times)], dtype=torch.float64, device="cuda")
    both = torch.empty(DEVICES, dtype=torch.float64, device="cuda")
    runtime.all_gather(mine.data_ptr(), both.data_ptr(), 8)
    return both.max().item()


def barrier():
    import torch
    from mx import runtime
    token = torch.zeros(1, dtype=torch.uint8, device="cuda")
    tokens = torch.empty(DEVICES, dtype=torch.uint8, device="cuda")
    runtime.all_gather(token.data_ptr(), tokens.data_ptr(), 1)
    torch.cuda.synchronize()


def check(bench, chunks):
    """The placed gather of `send` in `chunks` chunks gives the all-gather's bytes."""
    import torch
    bench.out.zero_()
    bench.u8_gather()
    want = bench.out.clone()
    bench.out.fill_(0xA5)
    bench._own(0, bench.local).copy_(bench.send)
    bench.placed(chunks)
    torch.cuda.synchronize()
    return torch.equal(bench.out, want)


def check_cast(bench, chunks):
    """The pipelined cast + placed gather gives the bytes of the cast followed by the all-gather."""
    import torch
    from mx import runtime
    shard = bench.x.to(torch.float8_e4m3fn).view(torch.uint8)
    want = torch.empty_like(bench.out)
    runtime.all_gather(shard.data_ptr(), want.data_ptr(), bench.stride)
    bench.out.fill_(0x5A)
    bench.placed(chunks, cast="pipelined")
    torch.cuda.synchronize()
    return torch.equal(bench.out, want)


def measure(mib, chunk_counts, iterations, rank):
    bench = Bench(mib, rank)
    rows, failed = [], False
    t_bf16 = timed_us(bench.bf16_gather, iterations)
    nbytes = bench.stride * DEVICES

    def row(name, us):
        rows.append((name, us, us / t_bf16, nbytes * (DEVICES - 1) / DEVICES / (us * 1e-6) / 1e9))

    rows.append(("bf16 all-gather", t_bf16, 1.0, 2 * nbytes * (DEVICES - 1) / DEVICES / (t_bf16 * 1e-6) / 1e9))
    row("u8 all-gather", timed_us(bench.u8_gather, iterations))
    row("u8 all-gather, in place", timed_us(bench.u8_gather_in_place, iterations))
    for method in METHODS:
        os.environ["MX_NCCL_PLACED_GATHER"] = method
        for chunks in chunk_counts:
            ok = check(bench, chunks)
            failed |= not ok
            bench._own(0, bench.local).copy_(bench.send)
            row(f"placed x {chunks}, {method}" + ("" if ok else " FAILED"),
                timed_us(lambda: bench.placed(chunks), iterations))
    os.environ["MX_NCCL_PLACED_GATHER"] = METHODS[0]
    row("cast, then gather", timed_us(lambda: bench.placed(1, cast="serial"), iterations))
    for chunks in chunk_counts:
        if chunks == 1:
            continue
        ok = check_cast(bench, chunks)
        failed |= not ok
        row(f"cast | gather x {chunks}" + ("" if ok else " FAILED"),
            timed_us(lambda: bench.placed(chunks, cast="pipelined"), iterations))
    return rows, failed


def main(argv):
    parser = argparse.ArgumentParser(prog="bench/placed_gather.py", description=__doc__.split("\n\n")[0])
    parser.add_argument("--payloads", default="64,256,512", help="bf16 payloads in MiB, comma-separated")
    parser.add_argument("--chunks", default="1,2,4,8", help="chunk counts, comma-separated")
    parser.add_argument("--iters", type=int, default=20, help="calls per timed loop")
    args = parser.parse_args(argv)
    os.environ["NCCL_NVLS_ENABLE"] = "0"
    sys.path.insert(0, str(ROOT / "python"))
    import torch
    from mx import runtime
    rank, local = int(os.environ["RANK"]), int(os.environ.get("LOCAL_RANK", os.environ["RANK"]))
    torch.cuda.set_device(local)
    runtime.init_process_group(device=local)
    # The collectives on torch's current stream, enqueued without waiting (call-stream mode).
    stream = torch.cuda.current_stream().cuda_stream
    runtime.load_library().mxrtSetCallStream(stream or None, 1)
    chunk_counts = [int(c) for c in args.chunks.split(",")]
    failed = False
    for mib in (int(p) for p in args.payloads.split(",")):
        rows_m = mib * 2**20 // (2 * K) // DEVICES
        bad = [c for c in chunk_counts if rows_m % c]
        if bad:
            sys.exit(f"--chunks {bad} do not divide the {rows_m} rows of a {mib} MiB payload's shard")
        rows, bad_rows = measure(mib, chunk_counts, args.iters, rank)
        failed |= bad_rows
        if rank == 0:
            print(f"\n{DEVICES} x {torch.cuda.get_device_name()}, bf16 payload {mib} MiB ([{rows_m * DEVICES}, "
                  f"{K}]), gathered bytes {rows_m * DEVICES * K / 2**20:.0f} MiB\n")
            print("| variant | time | / bf16 all-gather | busbw |")
            print("|---|---|---|---|")
            for name, us, ratio, bw in rows:
                print(f"| {name} | {us:.0f} us | {ratio:.2f} | {bw:.0f} GB/s |", flush=True)
    runtime.load_library().mxrtSetCallStream(None, 0)
    torch.cuda.synchronize()
    runtime.destroy_process_group()
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
