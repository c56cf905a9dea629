"""mx.ptx: the PTX text embedded in a module lowered with `--mx-lower-to-nvvm=format=isa`.

Standard library only, so that lit can call it with any Python:
    mx-opt in.mlir --mx-lower-to-nvvm="chip=sm_100a format=isa" | python -m mx.ptx > kernels.ptx
    ... | python -m mx.ptx --split PREFIX     # one module per file: PREFIX.0.ptx, PREFIX.1.ptx, ...
"""

import re
import sys

_ASSEMBLY_RE = re.compile(r'assembly = "((?:[^"\\]|\\.)*)"')


def extract_ptx(lowered: str) -> list[str]:
    """The PTX text of every `gpu.binary` object (MLIR escapes bytes as \\XX)."""
    def unescape(text: str) -> str:
        return re.sub(r"\\([0-9A-Fa-f]{2})", lambda m: chr(int(m.group(1), 16)), text)
    return [unescape(m.group(1)) for m in _ASSEMBLY_RE.finditer(lowered)]


if __name__ == "__main__":
    modules = extract_ptx(sys.stdin.read())
    if len(sys.argv) == 3 and sys.argv[1] == "--split":
        for index, module in enumerate(modules):
            with open(f"{sys.argv[2]}.{index}.ptx", "w") as out:
                out.write(module)
    else:
        sys.stdout.write("\n".join(modules))
