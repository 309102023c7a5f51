"""The one helper for optional dependencies: import a module or say which extra installs it.

The core of dpgauss needs numpy and scipy only; everything else is an extra of
``pyproject.toml``.  :func:`require` is how every module asks for one, so the hint is the same
everywhere::

    nx = require("networkx", "graphs", "reading GraphML")
    # ValueError: reading GraphML needs networkx: pip install '.[graphs]'
"""

from __future__ import annotations

import importlib
from types import ModuleType

__all__ = ["install_hint", "require"]


def install_hint(extra: str) -> str:
    """How to install ``extra``: ``pip install '.[extra]'`` run in the dpgauss checkout (the
    package installs from its repository; an extra is named in brackets after the path)."""
    return f"pip install '.[{extra}]' (in the dpgauss checkout)"


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
