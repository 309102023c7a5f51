"""Install hints for optional dependencies: the wheel form always, the clone form only
where dpgauss runs from a clone."""

from __future__ import annotations

import ast
import builtins
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

import dpgauss
from dpgauss import _optional
from dpgauss._optional import install_hint, require


def test_the_hint_names_the_package_for_a_wheel_install(monkeypatch):
    monkeypatch.setattr(_optional, "_checkout", lambda: None)
    assert install_hint("regions") == "pip install 'dpgauss[regions]'"


def test_the_hint_adds_the_clone_form_when_run_from_a_clone(monkeypatch, tmp_path):
    monkeypatch.setattr(_optional, "_checkout", lambda: tmp_path)
    hint = install_hint("regions")
    assert hint.startswith("pip install 'dpgauss[regions]'")
    assert f"pip install -e '.[regions]' in {tmp_path}" in hint
    assert "\n" not in hint


def test_require_names_purpose_module_and_extra(monkeypatch):
    monkeypatch.setattr(_optional, "_checkout", lambda: None)
    with pytest.raises(
        ValueError, match=r"^GeoJSON needs no_such_xyz: pip install 'dpgauss\[regions\]'$"
    ):
        require("no_such_xyz.sub", "regions", "GeoJSON", error=ValueError)


def test_the_clone_is_detected_from_the_package_location():
    root = Path(dpgauss.__file__).resolve().parents[2]
    expected = root if (root / "pyproject.toml").is_file() else None
    assert _optional._checkout() == expected


def test_no_module_hints_an_install_from_the_current_directory():
    src = Path(dpgauss.__file__).resolve().parent
    bad = []
    for path in src.rglob("*.py"):
        if path.name == "_optional.py":
            continue
        for n, line in enumerate(path.read_text().splitlines(), 1):
            if re.search(r"pip install '\.\[|pip install numba", line):
                bad.append(f"{path.relative_to(src)}:{n}: {line.strip()}")
    assert bad == []


# The house rule: every optional import goes through ``_optional``.

#: Packages dpgauss may use that are not NumPy or SciPy (its extras and their parts).
OPTIONAL = {
    "clarabel",
    "cvxpy",
    "duckdb",
    "matplotlib",
    "mpmath",
    "networkx",
    "numba",
    "pandas",
    "polars",
    "py4j",
    "pyarrow",
    "pyproj",
    "pyspark",
    "pywt",
    "shapely",
}
SRC = Path(dpgauss.__file__).resolve().parent


def _modules() -> list[tuple[str, ast.Module]]:
    return [
        (str(p.relative_to(SRC)), ast.parse(p.read_text(encoding="utf-8")))
        for p in sorted(SRC.rglob("*.py"))
        if p.name != "_optional.py"
    ]


def _imported(node: ast.AST) -> set[str]:
    """The top-level packages an ``import`` statement names."""
    if isinstance(node, ast.Import):
        return {a.name.split(".")[0] for a in node.names}
    if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
        return {node.module.split(".")[0]}
    return set()


def _type_checking(node: ast.AST) -> bool:
    return isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test)


def _top_level(body: list[ast.stmt]):
    """The statements run at import: the module's, through if/try/with, not in functions,
    classes' methods or ``if TYPE_CHECKING:`` blocks."""
    for node in body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda):
            continue
        if _type_checking(node):
            yield from _top_level(getattr(node, "orelse", []))
            continue
        yield node
        for field in ("body", "orelse", "finalbody", "handlers"):
            yield from _top_level(getattr(node, field, []))


def test_no_module_imports_an_optional_package_at_import_time():
    bad = [
        f"{name}:{node.lineno}: {ast.unparse(node)}"
        for name, tree in _modules()
        for node in _top_level(tree.body)
        if _imported(node) & OPTIONAL
    ]
    assert bad == []


def _catches_import_error(handler: ast.ExceptHandler) -> bool:
    if handler.type is None:
        return True
    names = {n.id for n in ast.walk(handler.type) if isinstance(n, ast.Name)}
    return bool(names & {"ImportError", "ModuleNotFoundError", "Exception", "BaseException"})


def test_no_module_probes_an_optional_package_by_itself():
    """No ``try: import X / except ImportError`` outside ``_optional``: :func:`require`,
    :func:`optional`, :func:`missing` or :func:`numba` say it, with the one hint."""
    bad = []
    for name, tree in _modules():
        for node in ast.walk(tree):
            if isinstance(node, ast.Try) and any(map(_catches_import_error, node.handlers)):
                found = set().union(*(_imported(n) for s in node.body for n in ast.walk(s)))
                if found & OPTIONAL:
                    bad.append(f"{name}:{node.lineno}: {sorted(found & OPTIONAL)}")
            if isinstance(node, ast.Call) and ast.unparse(node.func).endswith("find_spec"):
                bad.append(f"{name}:{node.lineno}: {ast.unparse(node)}")
    assert bad == []


def test_numba_is_imported_by_the_one_probe_only():
    importers = [
        f"{name}:{node.lineno}"
        for name, tree in _modules()
        for node in ast.walk(tree)
        if "numba" in _imported(node)
    ]
    assert importers == []
    users = [name for name, tree in _modules() if "_numba = numba()" in ast.unparse(tree)]
    assert len(users) >= 4  # the engines' kernel and the trend filter's three
    import importlib

    for name in users:
        module = importlib.import_module("dpgauss." + name[:-3].replace("/", "."))
        assert module._numba is _optional.numba(), name


def test_optional_returns_none_for_a_missing_package():
    assert _optional.optional("no_such_xyz") is None
    assert _optional.optional("no_such_xyz.sub") is None
    assert _optional.optional("json.decoder") is sys.modules["json.decoder"]


def test_missing_names_the_absent_packages_without_importing_them():
    assert _optional.missing("numpy", "no_such_xyz", "no_such_xyz.sub", "json") == [
        "no_such_xyz",
        "no_such_xyz.sub",
    ]


def test_a_package_hidden_by_the_import_hook_is_missing(monkeypatch):
    """``require`` and ``optional`` import through ``builtins.__import__``: a test that hides
    a package there hides it from every module of dpgauss."""
    real = builtins.__import__

    def hide_json(name, *args, **kwargs):
        if name.split(".")[0] == "json":
            raise ImportError(f"No module named {name!r}")
        return real(name, *args, **kwargs)

    monkeypatch.setattr(_optional, "_checkout", lambda: None)
    monkeypatch.setattr(builtins, "__import__", hide_json)
    assert _optional.optional("json") is None
    with pytest.raises(ImportError, match=r"^plots needs json: pip install 'dpgauss\[plot\]'$"):
        require("json", "plot", "plots")


def test_import_dpgauss_imports_no_optional_package():
    code = (
        "import sys, dpgauss, dpgauss._optional\n"
        f"print(sorted(m for m in {sorted(OPTIONAL)!r} if m in sys.modules))"
    )
    env = {**os.environ, "PYTHONPATH": str(SRC.parent)}
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, env=env
    )
    assert out.stdout.strip() == "[]"
