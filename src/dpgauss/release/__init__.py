"""Releases: records → bounded aggregates, the privacy budget ledger, writing outputs.

:class:`~dpgauss.release.ledger.Ledger` is the security boundary: every release is charged
against a dataset's (ε, δ) budget, atomically, before its output is written.
"""

from .ledger import (
    BudgetExceeded,
    BudgetStatus,
    Ledger,
    LedgerEntry,
    LedgerError,
    LedgerFormatError,
    UnknownDatasetError,
)

__all__ = [
    "BudgetExceeded",
    "BudgetStatus",
    "Ledger",
    "LedgerEntry",
    "LedgerError",
    "LedgerFormatError",
    "UnknownDatasetError",
]
