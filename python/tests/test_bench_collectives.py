"""bench/collectives.py where there is no GPU: its rows, and what --timeline accepts (an item that names
no program of the build exits with what is expected, before torch or NCCL start)."""

import subprocess
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[2] / "bench"
sys.path.insert(0, str(BENCH))
import collectives  # noqa: E402


def test_list_gives_every_row_and_its_bytes():
    out = subprocess.run([sys.executable, str(BENCH / "collectives.py"), "list"], check=True,
                         capture_output=True, text=True).stdout
    rows = [line for line in out.splitlines() if line.startswith("| ") and "MiB |" in line]
    assert len(rows) == len(collectives.RECIPES) * len(collectives.PAYLOADS_MIB), out
    assert "| mxfp8 | 64 MiB | 4096 | 33.0 MiB | 0.516 |" in out, out


def test_timeline_items():
    timelines = collectives.parse_timelines("mxfp8:64,per_tensor:512:2", [1, 2])
    assert [(r.name, p, c) for r, p, c in timelines] == [("mxfp8", 64, None), ("per_tensor", 512, 2)]
    assert collectives.parse_timelines("", [1]) == []


@pytest.mark.parametrize("item", ["mxfp9:64", "mxfp8:63", "mxfp8:64:4", "mxfp8", "mxfp8:x", "mxfp8:64:2:1"])
def test_timeline_item_that_names_no_program(item):
    with pytest.raises(SystemExit) as failure:
        collectives.parse_timelines(item, [1, 2])
    assert f"--timeline: {item!r} must be RECIPE:MIB[:CHUNKS]" in str(failure.value)
