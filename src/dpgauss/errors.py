"""Exceptions of dpgauss that say one thing in the library's words and another on the CLI.

An error a user can fix names what to change.  The same mistake is fixed differently from
Python (an argument), from a spec (a TOML key) and from the command line (a flag), so these
errors carry both phrasings: ``str(exc)`` is the library's, ``exc.cli`` the command line's,
which :func:`dpgauss.cli.app.main` prints (``dpgauss: error: ...``, exit status 2).  Every
class is a ``ValueError``, so code that catches ``ValueError`` keeps working, except
:class:`PlotUnavailableError`, an ``ImportError`` (a missing package, not a wrong value).

* :class:`SettingError` — a required setting is missing, or two settings conflict;
* :class:`OutputError` — an output cannot be written where it was asked for;
* :class:`OutputExistsError` — an output exists and overwriting was not asked for;
* :class:`PlotUnavailableError` — a plot was asked for and matplotlib (the ``plot`` extra)
  is not installed (``MatplotlibMissingError`` is its other name, the experiments' one).
"""

from __future__ import annotations

from pathlib import Path

__all__ = [
    "MatplotlibMissingError",
    "OutputError",
    "OutputExistsError",
    "PlotUnavailableError",
    "SettingError",
    "cli_message",
]


class SettingError(ValueError):
    """A missing or conflicting setting; ``cli`` is the message in the command line's words
    (``--out PATH`` for ``out=``)."""

    def __init__(self, message: str, cli: str | None = None) -> None:
        super().__init__(message)
        self.cli = message if cli is None else cli


class OutputError(ValueError):
    """An output cannot be written at its path (nothing was written or charged)."""

    @property
    def cli(self) -> str:
        return str(self)


class OutputExistsError(OutputError):
    """The output ``path`` exists and ``overwrite`` was not set; ``how`` says how to set it
    where the output was asked for (``[output] overwrite = true`` in a spec)."""

    def __init__(self, path: Path, how: str = "overwrite=True") -> None:
        super().__init__(f"{path} already exists (to replace it: {how})")
        self.path = path

    @property
    def cli(self) -> str:
        return f"{self.path} already exists (to replace it: --overwrite)"


class PlotUnavailableError(ImportError):
    """matplotlib (the ``plot`` extra) is not installed: a plot or a figure's PNG cannot be
    drawn; the message carries the install hint."""


#: The experiments' name of :class:`PlotUnavailableError` (``dpgauss reproduce --plots``).
MatplotlibMissingError = PlotUnavailableError


def cli_message(exc: BaseException) -> str:
    """What the command line prints for ``exc``: its ``cli`` phrasing when it has one."""
    cli = getattr(exc, "cli", None)
    return cli if isinstance(cli, str) else str(exc)
