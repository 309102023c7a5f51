"""Named groups of keys and the table of their sums, with intervals.

A reader who adds up keys — a neighbourhood's junctions, a district's cells — asks for the
error of the sum.  A *groups file* names the sums: a CSV (or Parquet) table with a column
``group`` (the sum's name), the key column (the keys it adds up) and, optionally, a column
``weight`` (default 1: a plain sum; any finite weights give a weighted sum).  A key may be
in several groups; a group's rows need not be adjacent.  It is public structure, like a
graph: it must not be made from the data.

:func:`read_groups` checks the file against the table's keys (every key named must be a
key of the table, no (group, key) pair twice) and gives the weight matrix ``W`` (one row a
group, in the order the groups first appear in the file).  :func:`group_table` gives the
published rows: each group's sum of the released values with its exact interval
(``Σ w·y ± z·√(Σ w²σ²)``) and its sum of the denoised values with the interval of
:meth:`dpgauss.denoise.ErrorBars.sum_interval` (module doc of
:mod:`dpgauss.denoise.result`, "Sums of keys"), drawn with the per-key intervals' draws.
"""

from __future__ import annotations

import csv
import math
import os
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from scipy import sparse, special

from .._optional import require
from ..denoise.result import ErrorBars, raw_sum_sd
from .outputs import cell_text

__all__ = ["GROUP_COLUMNS", "Groups", "group_table", "median_widths", "read_groups"]

#: The columns of a groups table, in order.
GROUP_COLUMNS = (
    "group",
    "keys",
    "released",
    "released_lower",
    "released_upper",
    "denoised",
    "denoised_lower",
    "denoised_upper",
)


@dataclass(frozen=True)
class Groups:
    """The groups of a groups file: their ``names`` (in file order), the weight matrix
    (``k × n`` CSR, one row a group over the table's ``n`` keys) and the file's path."""

    names: tuple[str, ...]
    matrix: sparse.csr_matrix
    path: str

    @property
    def sizes(self) -> np.ndarray:
        """The number of keys of every group."""
        return np.diff(self.matrix.indptr)


def _rows(path: str) -> tuple[list[str], list[tuple[int, list[Any]]]]:
    """The header and the ``(line, fields)`` of every row: a CSV row's line is where it
    starts in the file (a quoted field may span lines), a Parquet row's is its index + 2 (as
    if the header were line 1)."""
    if path.lower().endswith((".parquet", ".pq")):
        pq = require("pyarrow.parquet", "data", "reading a Parquet groups file", error=ValueError)
        try:
            names = list(pq.ParquetFile(path).schema_arrow.names)
            _no_repeats(path, names)
            table = pq.read_table(path)
        except ValueError as exc:
            if str(exc).startswith(path):
                raise
            raise ValueError(f"{path}: not a readable Parquet file ({_one_line(exc)})") from None
        except Exception as exc:  # pyarrow raises many types for a bad file
            raise ValueError(f"{path}: not a readable Parquet file ({_one_line(exc)})") from None
        cols = [table.column(c).to_pylist() for c in table.column_names]
        rows = [list(r) for r in zip(*cols, strict=True)]
        return list(table.column_names), [(i + 2, r) for i, r in enumerate(rows)]
    try:
        # utf-8-sig: a byte-order mark (Excel's "CSV UTF-8") is not part of the header, as
        # for every other public file (pyarrow's CSV reader drops it too)
        with open(path, newline="", encoding="utf-8-sig") as fh:
            reader = csv.reader(fh)
            out: list[tuple[int, list[Any]]] = []
            start = 1
            for row in reader:
                out.append((start, row))
                start = reader.line_num + 1
    except (OSError, UnicodeDecodeError, csv.Error) as exc:
        raise ValueError(
            f"{path}: the groups file cannot be read as UTF-8 CSV ({_one_line(exc)})"
        ) from None
    if not out:
        raise ValueError(f"{path}: the groups file is empty (no header)")
    _no_repeats(path, out[0][1])
    return out[0][1], out[1:]


def _no_repeats(path: str, header: Sequence[str]) -> None:
    twice = sorted({c for c in header if list(header).count(c) > 1})
    if twice:
        raise ValueError(
            f"{path}: line 1: the groups file's header repeats the column "
            f"{', '.join(map(repr, twice))}"
        )


def _one_line(exc: BaseException) -> str:
    return " ".join(str(exc).split())


def read_groups(
    path: str | os.PathLike[str],
    keys: Sequence[str] | Sequence[tuple[str, ...]],
    key: str | Sequence[str] = "key",
) -> Groups:
    """Read a groups file (module docstring) against the table's ``keys``: one text per row
    (the key column ``key``), or a tuple of texts per row for a table keyed by several
    columns (``key`` their names, e.g. a product's axes), in row order.  ``ValueError``
    naming the file, the line and the column for a bad file: a missing column, a key that
    is not a key of the table, a (group, key) pair given twice, a weight that is not a
    finite number, no group at all."""
    src = os.fspath(path)
    names_k = [key] if isinstance(key, str) else list(key)
    header, rows = _rows(src)
    missing = [c for c in ("group", *names_k) if c not in header]
    if missing:
        need = " and ".join(repr(c) for c in ("group", *names_k))
        raise ValueError(
            f"{src}: the groups file needs the columns {need} (the table's key columns) and "
            f"may have 'weight'; it has no {', '.join(map(repr, missing))}"
        )
    g_col = header.index("group")
    k_cols = [header.index(c) for c in names_k]
    w_col = header.index("weight") if "weight" in header else None
    index = {(k,) if isinstance(k, str) else tuple(k): i for i, k in enumerate(keys)}
    shown = names_k[0] if len(names_k) == 1 else "(" + ", ".join(names_k) + ")"
    names: dict[str, int] = {}
    seen: set[tuple[int, int]] = set()
    r_idx: list[int] = []
    c_idx: list[int] = []
    vals: list[float] = []
    for line, row in rows:
        if len(row) != len(header):
            raise ValueError(
                f"{src}: line {line} has {len(row)} fields; the header has {len(header)}"
            )
        name = cell_text(row[g_col])
        k = tuple(cell_text(row[c]) for c in k_cols)
        text = repr(k[0]) if len(k) == 1 else repr(k)
        if name == "":
            raise ValueError(f"{src}: line {line} has an empty group name")
        if k not in index:
            raise ValueError(
                f"{src}: line {line}: key {text} (column {shown}) is not a key of the table"
            )
        weight = 1.0
        if w_col is not None:
            raw = row[w_col]
            try:  # a number, or its text as CSV writes one (no "1_000", no booleans)
                bad = isinstance(raw, bool) or (isinstance(raw, str) and "_" in raw)
                weight = math.nan if bad else float(raw)
            except (TypeError, ValueError):
                weight = math.nan
            if not math.isfinite(weight):
                raise ValueError(
                    f"{src}: line {line}: weight {row[w_col]!r} is not a finite number"
                )
        g = names.setdefault(name, len(names))
        if (g, index[k]) in seen:
            raise ValueError(f"{src}: line {line}: key {text} is in group {name!r} twice")
        seen.add((g, index[k]))
        r_idx.append(g)
        c_idx.append(index[k])
        vals.append(weight)
    if not names:
        raise ValueError(f"{src}: the groups file names no group (no rows)")
    mat = sparse.csr_matrix((vals, (r_idx, c_idx)), shape=(len(names), len(keys)))
    mat.sort_indices()
    return Groups(tuple(names), mat, src)


def group_table(
    groups: Groups,
    released: np.ndarray,
    sigma: np.ndarray,
    bars: ErrorBars,
    level: float,
) -> dict[str, list[Any]]:
    """The published rows of ``groups`` (columns :data:`GROUP_COLUMNS`): each group's sum of
    the ``released`` values with its exact raw interval, and its sum of the denoised values
    with the interval of ``bars`` (drawn with ``weights=groups.matrix``)."""
    if bars.sums is None:
        raise ValueError("group_table needs error bars drawn with weights=groups.matrix")
    w = groups.matrix
    z = float(-special.ndtri((1.0 - level) / 2.0))
    raw = np.asarray(w @ np.ravel(released), dtype=np.float64).ravel()
    half = z * raw_sum_sd(w, np.ravel(sigma))
    r_lo, r_hi = raw - half, raw + half
    lo, hi = (np.atleast_1d(v) for v in bars.sum_interval(level))
    return {
        "group": list(groups.names),
        "keys": groups.sizes.tolist(),
        "released": raw.tolist(),
        "released_lower": r_lo.tolist(),
        "released_upper": r_hi.tolist(),
        "denoised": np.atleast_1d(bars.sums.estimate).tolist(),
        "denoised_lower": lo.tolist(),
        "denoised_upper": hi.tolist(),
    }


def median_widths(rows: dict[str, list[Any]]) -> dict[str, float]:
    """The median interval width of a :func:`group_table`'s sums: ``median_width`` (the
    denoised sums') and ``raw_width`` (the released sums')."""
    widths = np.subtract(rows["denoised_upper"], rows["denoised_lower"])
    raw = np.subtract(rows["released_upper"], rows["released_lower"])
    return {"median_width": float(np.median(widths)), "raw_width": float(np.median(raw))}
