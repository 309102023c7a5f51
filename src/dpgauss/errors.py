"""Exceptions of dpgauss that say one thing in the library's words and another on the CLI.

An error a user can fix names what to change.  The same mistake is fixed differently from
Python (an argument), from a spec (a TOML key) and from the command line (a flag), so these
errors carry both phrasings: ``str(exc)`` is the library's, ``exc.cli`` the command line's,
which :func:`dpgauss.cli.app.main` prints (``dpgauss: error: ...``, exit status 2).  Every
class is a ``ValueError``, so code that catches ``ValueError`` keeps working.

* :class:`SettingError` — a required setting is missing, or two settings conflict;
* :class:`OutputError` — an output cannot be written where it was asked for;
* :class:`OutputExistsError` — an output exists and overwriting was not asked for.

And Ctrl-C: :class:`ReleaseInterrupted` (a ``KeyboardInterrupt`` that says what became of
a release's charge) and :func:`interrupted` (was an exception Ctrl-C's doing).
"""

from __future__ import annotations

from pathlib import Path

__all__ = [
    "OutputError",
    "OutputExistsError",
    "ReleaseInterrupted",
    "SettingError",
    "cli_message",
    "interrupted",
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


def cli_message(exc: BaseException) -> str:
    """What the command line prints for ``exc``: its ``cli`` phrasing when it has one."""
    cli = getattr(exc, "cli", None)
    return cli if isinstance(cli, str) else str(exc)


class ReleaseInterrupted(KeyboardInterrupt):
    """Ctrl-C after a release charged the ledger: ``str(exc)`` says, in one line, what became
    of the charge (#``charge_id``: spent, and whether the release was delivered; the ledger
    entry records it), and the command line prints that line instead of "interrupted"."""

    def __init__(self, message: str, charge_id: int) -> None:
        super().__init__(message)
        self.charge_id = charge_id


def interrupted(exc: BaseException) -> bool:
    """Whether ``exc`` is Ctrl-C's doing: a ``KeyboardInterrupt``, or the ``SystemError``
    ("... returned a result with an exception set") that a compiled function (numba) raises
    when the interrupt lands while it runs, which carries the ``KeyboardInterrupt`` as its
    cause."""
    seen: set[int] = set()
    cur: BaseException | None = exc
    while cur is not None and id(cur) not in seen:
        if isinstance(cur, KeyboardInterrupt):
            return True
        if not isinstance(cur, SystemError):
            return False
        seen.add(id(cur))
        cur = cur.__cause__ or cur.__context__
    return False
