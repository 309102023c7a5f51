"""Every exception and warning class of dpgauss, in one place (each is re-exported by the
module that raises it, where it was public before: ``dpgauss.release.ledger.BudgetExceeded``,
``dpgauss.release.engines.base.EngineError``, ...).

Every error is a ``ValueError`` (so the command line reports it in one line, exit status 2),
except :class:`UsageError` (a bad command line), :class:`PlotUnavailableError` (an
``ImportError``: a missing package, not a wrong value) and the warnings.

* the ledger: :class:`LedgerError`, :class:`LedgerFormatError`,
  :class:`UnknownDatasetError`, :class:`BudgetExceeded`;
* a release: :class:`SettingError`, :class:`OutputError`, :class:`OutputExistsError`,
  :class:`ReleaseDeliveryError` (after the charge), :class:`EngineError` (a source or query
  problem), :class:`CsvError`;
* the demo: :class:`OutputDirError`; the command line: :class:`UsageError`;
* Ctrl-C: :class:`ReleaseInterrupted` (a ``KeyboardInterrupt`` that says what became of a
  release's charge) and :func:`interrupted` (was an exception Ctrl-C's doing);
* denoising: :class:`TrendFilterConvergenceWarning`; maps: :class:`CrsWarning`;
* plots: :class:`PlotUnavailableError` — matplotlib (the ``plot`` extra) is not installed
  (``MatplotlibMissingError`` is its other name, the experiments' one).

**Two phrasings.**  An error a user can fix names what to change, and the same mistake is
fixed differently from Python (an argument), from a spec (a TOML key) and from the command
line (a flag).  :class:`SettingError` (a required setting missing, or two in conflict) and
:class:`OutputExistsError` (an output exists and overwriting was not asked for) carry both
phrasings: ``str(exc)`` is the library's, ``exc.cli`` the command line's, which
:func:`dpgauss.cli.app.main` prints (``dpgauss: error: ...``, exit status 2; see
:func:`cli_message`).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # annotations only: errors.py imports nothing of the package
    from .release.ledger import BudgetStatus

__all__ = [
    "BudgetExceeded",
    "CrsWarning",
    "CsvError",
    "EngineError",
    "LedgerError",
    "LedgerFormatError",
    "MatplotlibMissingError",
    "OutputDirError",
    "OutputError",
    "OutputExistsError",
    "PlotUnavailableError",
    "ReleaseDeliveryError",
    "ReleaseInterrupted",
    "SettingError",
    "TrendFilterConvergenceWarning",
    "UnknownDatasetError",
    "UsageError",
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


class OutputExistsError(OutputError):
    """The output ``path`` exists and ``overwrite`` was not set; ``how`` says how to set it
    where the output was asked for (``[output] overwrite = true`` in a spec)."""

    def __init__(self, path: Path, how: str = "overwrite=True") -> None:
        super().__init__(f"{path} already exists (to replace it: {how})")
        self.path = path

    @property
    def cli(self) -> str:
        return f"{self.path} already exists (to replace it: --overwrite)"


class LedgerError(ValueError):
    """Base class of the ledger's errors (a ``ValueError``, so the CLI reports it in one line)."""


class LedgerFormatError(LedgerError):
    """The file is not a dpgauss ledger (or is corrupted); it was not modified."""


class UnknownDatasetError(LedgerError):
    """No budget has been created for this dataset id."""


class BudgetExceeded(LedgerError):  # noqa: N818 - the name the issue asks for
    """A charge would take the composed guarantee beyond the dataset's (ε, δ) budget.

    Attributes: ``dataset``, ``requested_mu``, ``status`` (the :class:`BudgetStatus`
    before the refused charge, with the spent and remaining budget).
    """

    def __init__(self, dataset: str, requested_mu: float, status: BudgetStatus) -> None:
        self.dataset = dataset
        self.requested_mu = requested_mu
        self.status = status
        s = status
        super().__init__(
            f"budget exceeded for dataset {dataset!r}: requested mu={requested_mu:.10g}, "
            f"but {s.charges} charge(s) have spent mu={s.mu_spent:.10g} "
            f"(epsilon={s.epsilon_spent:.6g} at delta={s.delta:g}) of the budget "
            f"mu={s.mu_budget:.10g} (epsilon={s.epsilon:g}, delta={s.delta:g}); "
            f"remaining mu={s.mu_remaining:.10g}, i.e. the smallest sigma still allowed is "
            f"{_sigma_text(s.mu_remaining)} x sensitivity"
        )

    def __reduce__(self) -> tuple[type, tuple[str, float, BudgetStatus]]:
        return (type(self), (self.dataset, self.requested_mu, self.status))


def _sigma_text(mu_remaining: float) -> str:
    if mu_remaining <= 0.0:
        return "none (the budget is used up)"
    return f"{1.0 / mu_remaining:.10g}"


class EngineError(ValueError):
    """A data source or query problem, reported in one line (a ``ValueError``).

    ``detail`` is the engine's own message when it may quote the data (a value the reader
    rejected): it is confidential, so the message of an aggregation error never carries it;
    ``dpgauss check`` shows it to the data owner.
    """

    def __init__(self, message: str, detail: str | None = None) -> None:
        super().__init__(message)
        self.detail = detail


class CsvError(ValueError):
    """A CSV source that cannot be read as this format (no such file, a bad header, …)."""


class ReleaseDeliveryError(ValueError):
    """A release failed *after* its charge: the budget is spent, nothing was written.

    ``charge_id`` is the ledger entry, whose delivery state says ``failed`` and why.
    """

    def __init__(self, message: str, charge_id: int | None) -> None:
        super().__init__(message)
        self.charge_id = charge_id


class OutputDirError(ValueError):
    """The demo's output directory is not one it may use (the message says why)."""


class TrendFilterConvergenceWarning(UserWarning):
    """ADMM reached ``max_iter`` before the duality gap fell below ``tol``."""


class CrsWarning(UserWarning):
    """A public map's coordinates are read as WGS84 degrees without anything saying so (a
    node table, a GraphML file without a ``crs``): ``[domain] crs`` says which CRS they are
    in (:mod:`dpgauss.release.domains.crs`)."""


class UsageError(Exception):
    """A bad command line: reported in one line, exit status 2."""


class UncertifiedError(Exception):
    """Internal control flow, never raised to a caller: the direct order-0 route on a chain
    (:mod:`dpgauss.denoise.trend_filter._chain`) could not certify a λ (its duality gap
    exceeds ``tol``), and the general route takes over."""


class PlotUnavailableError(ImportError):
    """matplotlib (the ``plot`` extra) is not installed: a plot or a figure's PNG cannot be
    drawn; the message carries the install hint."""


#: The experiments' name of :class:`PlotUnavailableError` (``dpgauss reproduce --plots``).
MatplotlibMissingError = PlotUnavailableError


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
