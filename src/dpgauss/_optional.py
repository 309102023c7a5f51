"""The one helper for optional dependencies: import a module or say which extra installs it.

The core of dpgauss needs numpy and scipy only; everything else is an extra of
``pyproject.toml``.  :func:`require` is how every module asks for one, so the hint is the same
everywhere::

    nx = require("networkx", "graphs", "reading GraphML")
    # ValueError: reading GraphML needs networkx: pip install 'dpgauss[graphs]'

Run from a clone of the repository (an editable install, or ``PYTHONPATH=src``), the hint
adds the clone's own form, ``pip install -e '.[graphs]' in <the clone>``.

The house rule (checked by ``tests/test_optional.py``): no other module of dpgauss imports an
optional package at its top level, and none probes one with ``try: import ... except
ImportError``; they call

* :func:`require` where the package is needed (an error naming the extra otherwise);
* :func:`optional` where the package is used if it is there (``None`` otherwise);
* :func:`missing` to say which packages are absent without importing them;
* :func:`numba`, the one probe of numba (the ``fast`` extra), for the compiled kernels.

``import dpgauss`` stays NumPy and SciPy only: these functions import on call, never here.
"""

from __future__ import annotations

import functools
import importlib.util
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

__all__ = ["install_hint", "missing", "numba", "optional", "require"]


@functools.cache
def _checkout() -> Path | None:
    """The clone dpgauss runs from (``<root>/src/dpgauss`` with ``<root>/pyproject.toml``),
    or None for an installed wheel."""
    root = Path(__file__).resolve().parents[2]
    return root if (root / "pyproject.toml").is_file() else None


def _import(module: str) -> ModuleType:
    """``import module`` through the ``import`` statement's hook (``builtins.__import__``, the
    one a test replaces to play a missing package), and return the module itself (for a
    dotted name, the submodule)."""
    __import__(module)
    return sys.modules[module]


def install_hint(extra: str) -> str:
    """How to install ``extra``: ``pip install 'dpgauss[extra]'``, and where dpgauss runs
    from a clone also ``pip install -e '.[extra]'`` there."""
    hint = f"pip install 'dpgauss[{extra}]'"
    root = _checkout()
    if root is not None:
        hint += f" (from the clone: pip install -e '.[{extra}]' in {root})"
    return hint


def require(
    module: str, extra: str, purpose: str, *, error: type[Exception] = ImportError
) -> ModuleType:
    """``import module``, or raise ``error`` naming ``purpose`` and the extra that installs it.

    ``error`` is ``ImportError`` for library calls and ``ValueError`` where a missing package
    is a problem of the user's request (a release spec asking for a GraphML graph), so that
    the command line reports it in one line with exit status 2.
    """
    try:
        return _import(module)
    except ImportError:
        top = module.split(".")[0]
        raise error(f"{purpose} needs {top}: {install_hint(extra)}") from None


def optional(module: str) -> ModuleType | None:
    """``import module`` if it is installed, else None (for a package used when present)."""
    try:
        return _import(module)
    except ImportError:
        return None


def missing(*modules: str) -> list[str]:
    """The ``modules`` that are not installed, in order, found without importing them."""
    absent = []
    for module in modules:
        try:
            found = importlib.util.find_spec(module) is not None
        except (ImportError, ValueError):  # a missing parent package, or no __spec__
            found = False
        if not found:
            absent.append(module)
    return absent


@functools.cache
def numba() -> Any:
    """numba (the ``fast`` extra) or None: the one probe of it, shared by every compiled
    kernel (the trend filter's and the engines'); imported on the first call.  Typed
    ``Any``: the kernels that use its attributes (``prange``, ``njit``) are compiled only where
    it is not None."""
    return optional("numba")
