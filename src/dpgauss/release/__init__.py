"""Releases: records → bounded aggregates, the privacy budget ledger, writing outputs.

:class:`~dpgauss.release.ledger.Ledger` is the security boundary: every release is charged
against a dataset's (ε, δ) budget, atomically, before its output is written.
:func:`run_release` runs a :class:`ReleaseSpec` (:func:`load_spec` reads one from TOML);
:func:`bounded_aggregate` is the same bounded aggregate without noise, for evaluation only;
:func:`release_frame` releases a pandas or Polars DataFrame or a pyarrow Table.
"""

from .frames import release_frame
from .ledger import (
    BudgetExceeded,
    BudgetStatus,
    Ledger,
    LedgerEntry,
    LedgerError,
    LedgerFormatError,
    UnknownDatasetError,
)
from .pipeline import ReleaseResult, bounded_aggregate, run_release
from .spec import ReleaseSpec, load_spec

__all__ = [
    "BudgetExceeded",
    "BudgetStatus",
    "Ledger",
    "LedgerEntry",
    "LedgerError",
    "LedgerFormatError",
    "ReleaseResult",
    "ReleaseSpec",
    "UnknownDatasetError",
    "bounded_aggregate",
    "load_spec",
    "release_frame",
    "run_release",
]
