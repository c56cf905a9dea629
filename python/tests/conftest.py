"""Puts python/ on sys.path so that `import mx` works from a plain checkout."""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
