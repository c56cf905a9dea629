"""The README and examples/ as tests, so that neither can rot.

* Every ```sh and ```python block of README.md runs as written from the repository root: sh blocks
  with `bash -e -o pipefail`, python blocks as separate processes of this Python (the venv's). The
  set-up block's two commands (`./utils/setup.sh`, `./utils/test.sh`) are left out, by exact match
  of the command. An HTML comment on the line before a block names what it needs besides the CPU
  build: `<!-- gpu -->` (a GPU, mx.runtime.device_available()), `<!-- gpus2 -->` (2 GPUs, as torch
  counts them), `<!-- torch -->` (torch importable) and `<!-- mx_runtime -->` (libmx_runtime.so
  built), in any combination (`<!-- gpu torch -->`);
  the block is skipped where one is missing. `<!-- excerpt: FILE -->` before an ```mlir block says
  that its lines (in runs separated by `...` lines) are copied from FILE, and they must still be.
* Every examples/*.mlir is run with the command its header comment gives and must print memrefs;
  every examples/*.py must exit 0; every example is named in the README.

Commands that write files write under /tmp; compiled kernels go to a cache directory of this test
session ($MX_CACHE_DIR), not the user's.
"""

import importlib.util
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
EXAMPLES = ROOT / "examples"
SETUP_COMMANDS = ("./utils/setup.sh", "./utils/test.sh")
REQUIREMENTS = ("gpu", "gpus2", "torch", "mx_runtime")
TIMEOUT = 300


def readme_blocks():
    """(index, language, text, requirements, excerpt file) of each fenced block of README.md."""
    blocks, lines = [], README.read_text().splitlines()
    i = 0
    while i < len(lines):
        match = re.fullmatch(r"```(\w*)\s*", lines[i])
        if not match:
            i += 1
            continue
        end = next(j for j in range(i + 1, len(lines)) if lines[j].strip() == "```")
        before = lines[i - 1].strip() if i > 0 else ""
        comment = re.fullmatch(r"<!--\s*(.*?)\s*-->", before)
        requirements, excerpt = (), None
        if comment and comment.group(1).startswith("excerpt:"):
            excerpt = comment.group(1).removeprefix("excerpt:").strip()
        elif comment:
            requirements = tuple(comment.group(1).split())
        blocks.append((len(blocks), match.group(1), "\n".join(lines[i + 1:end]) + "\n", requirements,
                       excerpt))
        i = end + 1
    return blocks


def is_setup_command(line: str) -> bool:
    return line.split("#", 1)[0].strip() in SETUP_COMMANDS


def runnable(text: str, language: str) -> str:
    if language != "sh":
        return text
    return "".join(line + "\n" for line in text.splitlines() if not is_setup_command(line))


BLOCKS = readme_blocks()
RUNNABLE = [b for b in BLOCKS if b[1] in ("sh", "python") and runnable(b[2], b[1]).strip()]


def block_id(block) -> str:
    index, language, text = block[:3]
    first = next(line for line in runnable(text, language).splitlines() if line.strip())
    return f"{index}-{language}-" + re.sub(r"[^\w.]+", "_", first.strip())[:60].strip("_")


def missing_requirement(requirements) -> str | None:
    for need in requirements:
        assert need in REQUIREMENTS, f"unknown README block requirement {need!r}; use {REQUIREMENTS}"
        if need == "gpu":
            from mx import runtime
            if not runtime.device_available():
                return "needs a GPU"
        elif need == "torch" and importlib.util.find_spec("torch") is None:
            return "needs torch"
        elif need == "gpus2":
            if importlib.util.find_spec("torch") is None:
                return "needs torch to count the GPUs"
            import torch
            if torch.cuda.device_count() < 2:
                return "needs 2 GPUs"
        elif need == "mx_runtime":
            from mx import toolchain
            if toolchain.runtime_library_dir() is None:
                return "needs libmx_runtime.so (built where the CUDA toolkit is)"
    return None


@pytest.fixture(scope="session")
def env(tmp_path_factory):
    """The environment of every command: this session's kernel cache instead of the user's."""
    return {**os.environ, "MX_CACHE_DIR": str(tmp_path_factory.mktemp("mx-cache"))}


def run(command, env, what, stdin=None):
    result = subprocess.run(command, cwd=ROOT, env=env, input=stdin, capture_output=True, text=True,
                            timeout=TIMEOUT)
    assert result.returncode == 0, (f"{what} failed (exit {result.returncode})\n--- stderr ---\n"
                                    f"{result.stderr[-6000:]}\n--- stdout ---\n{result.stdout[-3000:]}")
    return result.stdout


@pytest.mark.parametrize("block", RUNNABLE, ids=block_id)
def test_readme_block(block, env):
    index, language, text, requirements, _ = block
    reason = missing_requirement(requirements)
    if reason:
        pytest.skip(f"README block {index} {reason}")
    if language == "sh":
        run(["bash", "-e", "-o", "pipefail", "-c", runnable(text, language)], env, f"README block {index}")
    else:
        run([sys.executable, "-"], env, f"README block {index}", stdin=text)


def test_readme_links_resolve():
    """Every relative link of the README names a file of the checkout or of the build (the generated
    op and pass reference, which the default build target makes)."""
    targets = re.findall(r"\]\(([^)#\s]+)\)", README.read_text())
    relative = [t for t in targets if "://" not in t]
    assert relative, "the README links the contract and the generated reference"
    missing = [t for t in relative if not (ROOT / t).exists()]
    assert not missing, f"README links to missing files: {missing}"


def test_readme_setup_is_two_commands():
    """The set-up block is the newcomer's two commands, which the runner above leaves out."""
    setup = [b for b in BLOCKS if b[1] == "sh" and any(is_setup_command(line) for line in b[2].splitlines())]
    assert len(setup) == 1, "one README block holds ./utils/setup.sh and ./utils/test.sh"
    commands = [line.split("#", 1)[0].strip() for line in setup[0][2].splitlines() if line.strip()]
    assert commands == list(SETUP_COMMANDS)


@pytest.mark.parametrize("block", [b for b in BLOCKS if b[4]], ids=block_id)
def test_readme_excerpt(block):
    """An mlir block marked as an excerpt is still a copy of its file's lines."""
    index, _, text, _, excerpt = block
    source = [line.strip() for line in (ROOT / excerpt).read_text().splitlines()]
    runs = re.split(r"^\s*\.\.\.\s*$", text, flags=re.M)
    for part in runs:
        wanted = [line.strip() for line in part.strip("\n").splitlines()]
        assert any(source[i:i + len(wanted)] == wanted for i in range(len(source))), \
            f"README block {index}: these lines are not in {excerpt} any more:\n{part}"


def header_command(path: Path) -> str:
    """The command in an example's header comment, after 'Run from the repository root:'."""
    comment = []
    for line in path.read_text().splitlines():
        if not line.startswith("//"):
            break
        comment.append(line[2:].strip())
    start = comment.index("Run from the repository root:") + 1
    lines = []
    for line in comment[start:]:
        if not line:
            break
        lines.append(line)
    return "\n".join(lines)


MLIR_EXAMPLES = sorted(EXAMPLES.glob("*.mlir"))
PY_EXAMPLES = sorted(EXAMPLES.glob("*.py"))


def test_examples_exist_and_are_in_the_readme():
    assert MLIR_EXAMPLES and PY_EXAMPLES
    readme = README.read_text()
    for path in [*MLIR_EXAMPLES, *PY_EXAMPLES, *sorted(EXAMPLES.glob("kernels/*.mlir"))]:
        assert str(path.relative_to(ROOT)) in readme, f"README.md does not mention {path.relative_to(ROOT)}"


@pytest.mark.parametrize("path", MLIR_EXAMPLES, ids=lambda p: p.name)
def test_mlir_example(path, env):
    """Runs the header's command (mx-opt --mx-lower-to-cpu | mlir-runner); @main prints memrefs."""
    command = header_command(path)
    assert f"build/bin/mx-opt examples/{path.name} --mx-lower-to-cpu" in command
    assert "func.func @main() -> ()" in path.read_text()
    printed = run(["bash", "-e", "-o", "pipefail", "-c", command], env, f"the command in {path.name}")
    assert "Unranked Memref" in printed and "data =" in printed, printed[-2000:]


@pytest.mark.parametrize("path", sorted(EXAMPLES.glob("kernels/*.mlir")), ids=lambda p: p.name)
def test_kernel_example_lowers(path, env):
    """A kernel (a function of tensors, no @main) goes through the CPU pipeline."""
    run([ROOT / "build" / "bin" / "mx-opt", path, "--mx-lower-to-cpu", "-o", os.devnull], env, path.name)


@pytest.mark.parametrize("path", PY_EXAMPLES, ids=lambda p: p.name)
def test_python_example(path, env):
    assert f".venv/bin/python examples/{path.name}" in path.read_text(), "the header says how to run it"
    run([sys.executable, path], env, path.name)
