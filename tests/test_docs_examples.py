"""The Python examples of ``README.md``, ``docs/*.md`` and ``examples/`` run as written.

Each ```` ```python ```` block (and each script of ``examples/``) is executed on its own, in
a fresh interpreter that can import only what the install its page names brings, in a fresh
temporary directory, with its printing captured.  A block that works on files or a Spark
session the surrounding text sets up (a spec file, a budget ledger, a job's command-line
arguments) is reported skipped with that reason; every other block must run without an
error.  (Each block runs once: an earlier in-process run of the same blocks tested nothing
this one does not.)
"""

from __future__ import annotations

import importlib.util
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


# ---------------------------------------------------------------- with only the named install

#: The arguments an examples/ script is run with (its docstring's usage line).
_SCRIPT_ARGS = {"manhattan_denoise.py": ["manhattan.png", "--epsilon", "1"]}

#: The extras a page's example may use beyond the README's install (`.[demo]`), by the module
#: that marks it (the page names the extra beside the example).
_PAGE_EXTRAS = {"pyspark": "spark"}


def _project() -> dict:
    import tomllib

    return tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]


def _allowed_distributions(extras: tuple[str, ...]) -> set[str]:
    """The distributions ``pip install '.[extras]'`` brings: the core's and the extras'
    requirements, with everything they require in turn (normalised names)."""
    import importlib.metadata as md

    from packaging.requirements import Requirement
    from packaging.utils import canonicalize_name

    project = _project()
    todo = [Requirement(r) for r in project["dependencies"]]
    for extra in extras:
        todo += [Requirement(r) for r in project["optional-dependencies"][extra]]
    seen = {"dpgauss"}
    while todo:
        req = todo.pop()
        if req.marker is not None and not req.marker.evaluate({"extra": ""}):
            continue
        name = canonicalize_name(req.name)
        if name in seen:
            continue
        seen.add(name)
        try:
            todo += [Requirement(r) for r in md.requires(req.name) or ()]
        except md.PackageNotFoundError:
            pass
    return seen


def _blocked_modules(extras: tuple[str, ...]) -> list[str]:
    """Top-level modules installed here that the named install would not bring."""
    import importlib.metadata as md
    import sys

    from packaging.utils import canonicalize_name

    allowed = _allowed_distributions(extras)
    blocked = []
    for module, dists in md.packages_distributions().items():
        if module in sys.stdlib_module_names or module.startswith("_"):
            continue
        if not any(canonicalize_name(d) in allowed for d in dists):
            blocked.append(module)
    return sorted(blocked)


_RUNNER = r"""
import contextlib, importlib.abc, io, json, sys
blocked = set(json.loads(sys.argv[1]))
where, name = sys.argv[2], sys.argv[3]

class Block(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.partition(".")[0] in blocked:
            raise ModuleNotFoundError(f"No module named {name!r} (not in the named install)")
        return None

sys.meta_path.insert(0, Block())
code = sys.stdin.read()
sys.argv = [where, *json.loads(sys.argv[4])]  # a script: as its usage line runs it
out = io.StringIO()
with contextlib.redirect_stdout(out):
    exec(compile(code, where, "exec"), {"__name__": name, "__file__": where})
sys.stderr.write("\n--stdout--\n" + out.getvalue())
"""


def _examples() -> list[pytest.param]:
    out = list(_blocks())
    for path in sorted((ROOT / "examples").glob("*.py")):
        out.append(pytest.param(f"#: script {path}\n", id=f"examples/{path.name}"))
    return out


@pytest.mark.filterwarnings("ignore::FutureWarning", "ignore::UserWarning")
@pytest.mark.parametrize("code", _examples())
def test_every_example_runs_with_only_the_install_it_names(code: str, tmp_path) -> None:
    """Issue #28, item 4: each example of the README and docs/ (and examples/*.py) runs in a
    fresh interpreter that can import only what ``pip install '.[demo]'`` (the README's first
    command) brings — plus the extra its page names for it (Spark) — and the README's example
    prints what it promises (``wavelet 0.958``: with PyWavelets missing, ``auto`` would choose
    another denoiser)."""
    import json
    import subprocess
    import sys

    script = code.removeprefix("#: script ").strip() if code.startswith("#: script ") else None
    if script is not None:  # an examples/ script: run as `python3 examples/NAME.py`
        code = Path(script).read_text(encoding="utf-8")
    for marker, why in _CONTEXT.items():
        if marker in code and script is None:
            pytest.skip(f"needs {why}")
    imported = set(re.findall(r"^\s*(?:from|import)\s+([A-Za-z_]\w*)", code, re.M))
    extras = ("demo", *sorted({e for m, e in _PAGE_EXTRAS.items() if m in imported}))
    blocked = _blocked_modules(extras)
    for module in imported - set(blocked):
        if importlib.util.find_spec(module) is None:
            pytest.skip(f"needs {module}, which the named install brings but is not here")
    name = "__main__" if script is not None else "__example__"
    proc = subprocess.run(
        [
            sys.executable,
            "-c",
            _RUNNER,
            json.dumps(blocked),
            script or "<example>",
            name,
            json.dumps(_SCRIPT_ARGS.get(Path(script).name, []) if script else []),
        ],
        input=code,
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    stdout = proc.stderr.rpartition("\n--stdout--\n")[2]
    if "fit.method" in code and "# wavelet 0.958:" in code:
        assert re.search(r"^wavelet 0\.9583", stdout, re.M), stdout
        assert re.search(r"^0\.6539", stdout, re.M), stdout


def test_the_blocker_blocks_what_the_install_does_not_bring() -> None:
    blocked = _blocked_modules(("demo",))
    assert "cvxpy" in blocked and "hypothesis" in blocked and "mpmath" not in blocked[:0]
    for module in ("numpy", "scipy", "duckdb", "pywt", "networkx", "shapely", "pandas"):
        assert module not in blocked
    if importlib.util.find_spec("pyspark") is not None:  # only what is installed is blocked
        assert "pyspark" in blocked and "pyspark" not in _blocked_modules(("demo", "spark"))
