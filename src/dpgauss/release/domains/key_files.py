"""Public key lists from a file: ``[domain] values_from = "keys.csv"``.

For a ``values`` domain of 10⁵–10⁶ keys (zones, products, postcodes) a TOML list is unwieldy;
``values_from`` names a CSV or Parquet file with **one column** of keys, read by pyarrow (the
``data`` extra) before any record is read.  The keys are then exactly as if they were listed
in ``values`` (same order, same exact-match rules of :mod:`dpgauss.release.domains.keys`, same
checks: distinct as numbers, at most 50,000,000).

Types.  Parquet: an integer, floating-point or text column, as stored.  CSV (a header line,
then one key per line, every field read as text): integers when every key is the canonical
text of an integer (``"42"``, ``"-7"``; not ``"007"``), else numbers when every key is a
finite decimal number (``"1.5"``, ``"2e3"``), else the texts themselves.

Refused, in one line naming the file: no such file, not one column, an empty or missing key,
duplicates (``"1"`` and ``"1.0"`` are the same number), no keys.
"""

from __future__ import annotations

import math
import re
from pathlib import Path
from typing import Any

from ..._optional import require
from .graph_files import check_text

__all__ = ["read_values"]

_INT = re.compile(r"0|-?[1-9][0-9]*")
_NUMBER = re.compile(r"[-+]?([0-9]+\.?[0-9]*|\.[0-9]+)([eE][-+]?[0-9]+)?")


def _typed(texts: list[str]) -> list[Any]:
    if all(_INT.fullmatch(t) for t in texts):
        return [int(t) for t in texts]
    if all(_NUMBER.fullmatch(t) and math.isfinite(float(t)) for t in texts):
        return [float(t) for t in texts]
    return texts


def read_values(path: str | Path, where: str = "domain") -> tuple[Any, ...]:
    """The keys of a one-column CSV or Parquet file (module docstring), checked as ``values``."""
    require("pyarrow", "data", "[domain] values_from", error=ValueError)
    import pyarrow as pa

    from ..spec import DomainSpec

    p = str(path)
    if not Path(p).is_file():
        raise ValueError(f"{p}: no such key file ([{where}] values_from)")
    try:
        if Path(p).suffix.lower() in (".parquet", ".pq"):
            import pyarrow.parquet as pq

            table = pq.read_table(p)
        else:
            import pyarrow.csv as pcsv

            head = pcsv.read_csv(p, read_options=pcsv.ReadOptions(block_size=1 << 16))
            table = pcsv.read_csv(
                p,
                convert_options=pcsv.ConvertOptions(
                    column_types=dict.fromkeys(head.column_names, pa.string()),
                    strings_can_be_null=False,
                ),
            )
    except (pa.ArrowException, OSError) as exc:
        raise ValueError(f"{p}: cannot be read as a key file: {str(exc).splitlines()[0]}") from None
    if table.num_columns != 1:
        raise ValueError(
            f"{p}: a key file has one column; this one has {table.num_columns} "
            f"({', '.join(table.column_names[:10])})"
        )
    col = table.column(0)
    t = col.type
    if not (
        pa.types.is_integer(t)
        or pa.types.is_floating(t)
        or pa.types.is_string(t)
        or pa.types.is_large_string(t)
    ):
        raise ValueError(f"{p}: the key column has the type {t}; integers, numbers or text")
    values = col.to_pylist()
    for i, v in enumerate(values, start=1):
        if v is None or v == "":
            raise ValueError(f"{p}: key {i} is empty")
        if isinstance(v, str):
            check_text(p, f"key {i}", v)
    if pa.types.is_string(t) or pa.types.is_large_string(t):
        if Path(p).suffix.lower() not in (".parquet", ".pq"):
            values = _typed(values)
    try:
        checked = DomainSpec(kind="values", column="key", values=values, where=where)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"{p}: {exc}") from None
    return checked.values  # type: ignore[return-value]
