"""The Python examples of ``README.md`` and ``docs/*.md`` run as written.

Each ```` ```python ```` block is executed on its own, in a fresh temporary directory, with
its printing silenced.  A block that works on files or a Spark session the surrounding text
sets up (a spec file, a budget ledger, a job's command-line arguments), or that imports an
optional package not installed here, is reported skipped with that reason; every other block
must run without an error.
"""

from __future__ import annotations

import contextlib
import importlib.util
import io
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
#: text that marks a block as needing what its page sets up around it
_CONTEXT = {
    'load_spec("spec.toml")': "a spec file written by the page",
    'ledger="budget.sqlite"': "a budget created by the page's `dpgauss budget init`",
    "sys.argv": "a job's command-line arguments",
}


def _blocks() -> list[pytest.param]:
    out = []
    for page in [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]:
        blocks = re.findall(r"```python\n(.*?)```", page.read_text(encoding="utf-8"), re.S)
        for i, code in enumerate(blocks):
            out.append(pytest.param(code, id=f"{page.name}-{i}"))
    return out


@pytest.mark.filterwarnings("ignore::FutureWarning", "ignore::UserWarning")
@pytest.mark.parametrize("code", _blocks())
def test_documented_python_example_runs(code: str, tmp_path, monkeypatch) -> None:
    for marker, why in _CONTEXT.items():
        if marker in code:
            pytest.skip(f"needs {why}")
    for module in re.findall(r"^\s*(?:from|import)\s+([A-Za-z_]\w*)", code, re.M):
        if importlib.util.find_spec(module) is None:
            pytest.skip(f"needs {module} (an optional extra)")
    monkeypatch.chdir(tmp_path)
    with contextlib.redirect_stdout(io.StringIO()):
        exec(compile(code, "<documented example>", "exec"), {"__name__": "__example__"})
