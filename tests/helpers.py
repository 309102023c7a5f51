"""Helpers shared by test files (not tests): import them as ``from ..helpers import ...``.

A helper lives here once two test files need it; one test file's own helpers stay in it.
"""

from __future__ import annotations

import csv
import math
from pathlib import Path

from dpgauss.release.ledger import Ledger

__all__ = ["charges", "csv_number", "make_ledger", "read_csv", "square"]


def make_ledger(tmp_path: Path, epsilon: float = 50.0, dataset: str = "d") -> Path:
    """A fresh budget ledger in ``tmp_path`` with one dataset of ``(epsilon, 1e-5)``."""
    path = tmp_path / "budget.sqlite"
    with Ledger(path) as led:
        led.create_budget(dataset, epsilon, 1e-5)
    return path


def charges(path: Path, dataset: str = "d") -> int:
    """How many releases the ledger at ``path`` has charged to ``dataset``."""
    with Ledger(path, create=False) as led:
        return led.remaining(dataset).charges


def square(x0: float, y0: float, w: float = 1.0) -> list:
    """The closed ring (GeoJSON coordinates) of the square ``[x0, x0 + w] × [y0, y0 + w]``."""
    return [[x0, y0], [x0 + w, y0], [x0 + w, y0 + w], [x0, y0 + w], [x0, y0]]


def read_csv(path: Path) -> list[dict[str, str]]:
    """The rows of a CSV file with a header, as dicts of text."""
    with open(path, newline="", encoding="utf-8") as fh:
        return list(csv.DictReader(fh))


def csv_number(text: str) -> float:
    """A CSV cell as a float: NaN for the empty cell."""
    return math.nan if text == "" else float(text)
