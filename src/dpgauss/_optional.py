"""The one helper for optional dependencies: import a module or say which extra installs it.

The core of dpgauss needs numpy and scipy only; everything else is an extra of
``pyproject.toml``.  :func:`require` is how every module asks for one, so the hint is the same
everywhere::

    nx = require("networkx", "graphs", "reading GraphML")
    # ValueError: reading GraphML needs networkx: pip install 'dpgauss[graphs]'

Run from a clone of the repository (an editable install, or ``PYTHONPATH=src``), the hint
adds the clone's own form, ``pip install -e '.[graphs]' in <the clone>``.
"""

from __future__ import annotations

import functools
import importlib
from pathlib import Path
from types import ModuleType

__all__ = ["install_hint", "require"]


@functools.cache
def _checkout() -> Path | None:
    """The clone dpgauss runs from (``<root>/src/dpgauss`` with ``<root>/pyproject.toml``),
    or None for an installed wheel."""
    root = Path(__file__).resolve().parents[2]
    return root if (root / "pyproject.toml").is_file() else None


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
        return importlib.import_module(module)
    except ImportError:
        top = module.split(".")[0]
        raise error(f"{purpose} needs {top}: {install_hint(extra)}") from None
