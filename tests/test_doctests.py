"""Every docstring example (``>>>``) of the package runs and prints what it shows.

Each module of ``dpgauss`` is imported (a module whose optional dependency is missing is
reported skipped, with the dependency's install hint) and its doctests run with
``ELLIPSIS`` and ``NORMALIZE_WHITESPACE``, in a temporary directory (examples may write
files).
"""

from __future__ import annotations

import doctest
import importlib
import pkgutil

import pytest

import dpgauss


def _modules() -> list[str]:
    found = pkgutil.walk_packages(dpgauss.__path__, prefix="dpgauss.")
    return ["dpgauss", *sorted(m.name for m in found)]


def _with_examples() -> list[str]:
    """The modules whose source has a ``>>>`` (so that the others are not collected)."""
    out = []
    for name in _modules():
        spec = importlib.util.find_spec(name)
        if spec is None or spec.origin is None:
            continue
        with open(spec.origin, encoding="utf-8") as f:
            if ">>>" in f.read():
                out.append(name)
    return out


@pytest.mark.parametrize("name", _with_examples())
def test_docstring_examples_run(name: str, tmp_path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    try:
        module = importlib.import_module(name)
    except ImportError as exc:  # an optional extra
        pytest.skip(f"{name} needs an optional dependency: {exc}")
    finder = doctest.DocTestFinder()
    runner = doctest.DocTestRunner(
        optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE, verbose=False
    )
    tests = [t for t in finder.find(module, name) if t.examples]
    assert tests, f"{name} has '>>>' in its source but no doctest was found"
    for test in tests:
        runner.run(test)
    result = runner.summarize(verbose=False)
    assert result.failed == 0, f"{result.failed} of {result.attempted} examples failed in {name}"
