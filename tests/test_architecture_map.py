"""``docs/architecture.md`` stays the map of the house: every module of ``src/dpgauss`` is on
it, and every path it names exists."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PAGE = (ROOT / "docs" / "architecture.md").read_text(encoding="utf-8")
PKG = ROOT / "src" / "dpgauss"


def test_every_module_and_package_is_on_the_map() -> None:
    missing = []
    for path in sorted(PKG.rglob("*.py")):
        if path.name in ("__init__.py", "__main__.py"):
            if path.parent != PKG and f"{path.parent.name}/" not in PAGE:
                missing.append(str(path.parent.relative_to(PKG)) + "/")
            continue
        if not re.search(rf"(?<![\w.]){re.escape(path.name)}\b", PAGE):
            missing.append(str(path.relative_to(PKG)))
    assert missing == []


def test_every_path_the_map_names_exists() -> None:
    named = set(re.findall(r"`((?:[\w.]+/)*[\w]+\.py)", PAGE))
    named |= {m for m in re.findall(r"((?:tests|benchmarks)/[\w/]+\.py)", PAGE)}
    files = {p.name for d in ("src", "tests", "benchmarks") for p in (ROOT / d).rglob("*.py")}
    wrong = []
    for p in sorted(named):
        if "/" not in p:  # a file named in the context of its package: it must exist
            ok = p in files
        else:
            bases = [ROOT, PKG, PKG / "release", ROOT / "tests", ROOT / "tests" / "release"]
            ok = any((b / p).exists() for b in bases)
        if not ok:
            wrong.append(p)
    assert wrong == []
