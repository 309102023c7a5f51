"""Make ``src/`` importable when dpgauss is not installed (e.g. a fresh checkout)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

if importlib.util.find_spec("dpgauss") is None:
    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "src"))
