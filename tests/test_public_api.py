"""One test over every public name of ``import dpgauss`` (as scikit-learn's common tests do).

Each name in ``dpgauss.__all__``

* resolves (the lazily loaded ones included) and is listed in the package docstring's
  catalogue;
* has a docstring whose first line says what it is;
* appears in the documentation (``README.md`` or ``docs/*.md``);
* if callable, validates its arguments: called with a wrong kind of value for every
  required parameter it raises ``TypeError`` or ``ValueError`` (a message for the user),
  never an ``AttributeError``, ``IndexError`` or anything else from deeper down.
"""

from __future__ import annotations

import inspect
from pathlib import Path

import pytest

import dpgauss

ROOT = Path(__file__).resolve().parents[1]
DOCS = "\n".join(
    p.read_text(encoding="utf-8")
    for p in [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
)
NAMES = [n for n in dpgauss.__all__ if n != "__version__"]


def test_all_is_unique_and_covers_the_lazy_names() -> None:
    assert len(dpgauss.__all__) == len(set(dpgauss.__all__))
    assert set(dpgauss._LAZY) <= set(dpgauss.__all__)
    assert set(dir(dpgauss)) >= set(dpgauss.__all__)


def test_import_dpgauss_stays_light() -> None:
    """The lazily loaded groups (and numba, DuckDB) are not imported by ``import dpgauss``."""
    import subprocess
    import sys

    code = (
        "import sys, dpgauss; "
        "print(sorted(m for m in ('dpgauss.denoise', 'dpgauss.release', 'numba', 'duckdb') "
        "if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


@pytest.mark.parametrize("name", NAMES)
def test_public_name_is_documented(name: str) -> None:
    obj = getattr(dpgauss, name)
    assert name in dpgauss.__doc__, f"{name} is missing from the package docstring's catalogue"
    assert name in DOCS, f"{name} appears nowhere in README.md or docs/*.md"
    if inspect.isroutine(obj) or inspect.isclass(obj):
        doc = inspect.getdoc(obj)
        assert doc and doc.strip().splitlines()[0].strip(), f"{name} has no docstring"


class _Wrong:
    """A value no parameter of dpgauss accepts."""

    def __repr__(self) -> str:
        return "<wrong>"


def _required(obj: object) -> list[inspect.Parameter]:
    try:
        sig = inspect.signature(obj)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return []
    return [
        p
        for p in sig.parameters.values()
        if p.default is inspect.Parameter.empty
        and p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)
    ]


CALLABLES = [
    n
    for n in NAMES
    if callable(getattr(dpgauss, n))
    and not (inspect.isclass(getattr(dpgauss, n)) and issubclass(getattr(dpgauss, n), Exception))
]


@pytest.mark.parametrize("name", CALLABLES)
def test_public_callable_validates_its_arguments(name: str, tmp_path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    obj = getattr(dpgauss, name)
    params = _required(obj)
    if not params:
        pytest.skip(f"{name} has no required parameter")
    args = [_Wrong() for p in params if p.kind != p.KEYWORD_ONLY]
    kwargs = {p.name: _Wrong() for p in params if p.kind == p.KEYWORD_ONLY}
    with pytest.raises((TypeError, ValueError)) as caught:
        obj(*args, **kwargs)
    assert str(caught.value), f"{name} raised {type(caught.value).__name__} without a message"
