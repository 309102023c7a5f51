"""Records from Python: release a pandas or Polars DataFrame or a pyarrow Table.

:func:`release_frame` is the one call::

    import pandas as pd
    from dpgauss.release import release_frame

    trips = pd.read_parquet("trips.parquet")
    spec = {
        "source": {"types": {"driver": "string", "zone": "int64"}},
        "unit": {"column": "driver"},
        ...
    }
    result = release_frame(trips, spec, out="pickups.csv", ledger="budget.sqlite")

The spec is a TOML path, a dict shaped like the TOML file, or a
:class:`~dpgauss.release.spec.ReleaseSpec`.  Its ``[source]`` is ``table = "<name>"`` (the
name the frame is scanned under; a dict spec may leave it out) and **must declare**
``types``, as every table source does (the spec refuses one without, with the sentence
:data:`~dpgauss.release.spec.TABLE_NEEDS_TYPES`): every column the release reads, each taken
in its declared type (:mod:`dpgauss.release.schema`).  The frame is registered in a private
in-memory DuckDB connection and scanned in place, without a copy, by the DuckDB engine; the
release is then exactly :func:`~dpgauss.release.pipeline.run_release` (plan, charge, write).

**A column's type is the spec's, never the records'.**  A frame's dtypes are a function of
its records: one missing value widens int64 to float64 (``DataFrame(records)``, ``concat``,
``to_pandas()``), ``pd.read_csv`` types a column from all its rows, a categorical's codes
come from the sorted distinct values, and DuckDB would type a pandas ``object`` column from
a sample of its rows.  Each would be a switch decided on the whole source, which the
privacy invariant forbids (``docs/security.md``).  So each declared column is converted
value by value to its declared type, and a frame column whose dtype cannot hold the
declared type exactly (float64 for int64) is refused before the budget is touched, with
the sentence of :func:`~dpgauss.release.schema.refusal`.  A pandas ``object`` column (and a
``string`` column stored as Python objects) is first mapped, value by value, to its text
(``str(v)``; missing values — ``None``, ``NaN``, ``NaT``, ``pd.NA`` — to NULL) and then read
by the declared type's text rule.  A value without a text (its ``__str__`` raises, an int
past ``sys.get_int_max_str_digits()``, a lone surrogate) is NULL for its own row: it never
stops the release nor appears in a message.  A categorical is read by its value's text.  A
Polars ``Object`` column is refused (before the budget is touched: it is the schema, not
the data).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from .._optional import require
from .spec import ReleaseSpec, load_spec

__all__ = ["release_frame"]

_NAME = "records"


def _kind(data: object) -> str:
    mod = type(data).__module__.split(".")[0]
    name = type(data).__name__
    if mod == "pandas" and name == "DataFrame":
        return "pandas"
    if mod == "polars" and name == "DataFrame":
        return "polars"
    if mod == "pyarrow" and name == "Table":
        return "arrow"
    raise TypeError(
        "data must be a pandas DataFrame, a Polars DataFrame or a pyarrow Table; got "
        f"{type(data).__module__}.{name}"
    )


def _scannable(data: Any, kind: str) -> Any:
    """The object DuckDB scans: object columns as text (module docstring)."""
    if kind == "pandas":
        import pandas as pd

        objects = [c for c in data.columns if _python_objects(data[c].dtype)]
        if not objects:
            return data
        out = data.copy(deep=False)
        for c in objects:
            out[c] = pd.array([_text(v) for v in data[c].tolist()], dtype="string")
        return out
    if kind == "polars":
        import polars as pl

        bad = [n for n, t in data.schema.items() if t == pl.Object]
        if bad:
            raise ValueError(
                f"the DataFrame's columns {', '.join(map(repr, bad))} have the Polars Object "
                "type, which has no defined reading: cast them to a typed column first"
            )
        # 128-bit integers have no Arrow type pyarrow imports ('_pli128'): refused by type,
        # before anything is read, rather than failing in the conversion
        wide = tuple(getattr(pl, name) for name in ("Int128", "UInt128") if hasattr(pl, name))
        bad = [n for n, t in data.schema.items() if t in wide]
        if bad:
            raise ValueError(
                f"the DataFrame's columns {', '.join(map(repr, bad))} are 128-bit Polars "
                "integers, which Arrow cannot carry: cast them to Int64 or String first"
            )
        return data.to_arrow()
    return data


def _python_objects(dtype: Any) -> bool:
    """Whether a pandas column holds Python objects: ``object``, or the ``string`` dtype
    stored as Python ``str`` objects (which may hold lone surrogates)."""
    if str(dtype) == "object":
        return True
    return type(dtype).__name__ == "StringDtype" and getattr(dtype, "storage", "") == "python"


def _text(v: object) -> str | None:
    """The text of one value, or None (NULL) where it has none; never raises.

    A missing value is NULL.  A value without a UTF-8 text is NULL too, for its own row
    alone: an object whose ``__str__`` raises, an int longer than Python's
    ``int_max_str_digits``, a string holding a lone surrogate.  Raising there would let one
    record stop the release and quote itself in the error (``docs/security.md``); its row is
    then read like any other row whose column is empty (no unit, an invalid key or value).
    """
    try:
        if _missing(v):
            return None
        text = str.__str__(str(v))  # an exact str, even from a str subclass's __str__
        str.encode(text, "utf-8")  # a lone surrogate has no UTF-8 text
        return text
    except Exception:  # any failure is this value's alone
        return None


def _missing(v: object) -> bool:
    if v is None:
        return True
    try:
        import pandas as pd

        return bool(pd.isna(v)) if not isinstance(v, list | tuple | dict) else False
    except (TypeError, ValueError):
        return False


def release_frame(
    data: Any,
    spec: ReleaseSpec | dict[str, Any] | str | os.PathLike[str],
    *,
    out: str | os.PathLike[str] | None = None,
    ledger: str | os.PathLike[str] | None = None,
    name: str = _NAME,
    threads: int | None = None,
    progress: Any = None,
    period: Any = None,
) -> Any:
    """Release ``data`` (a pandas or Polars DataFrame, a pyarrow Table) as ``spec`` says.

    Returns the :class:`~dpgauss.release.pipeline.ReleaseResult`; every argument but ``data``
    and ``name`` (the table name the frame is scanned under, ``[source] table``) is that of
    :func:`~dpgauss.release.pipeline.run_release`.
    """
    duckdb = require("duckdb", "data", "releasing a DataFrame")
    from .engines.duckdb import DuckDBEngine
    from .pipeline import run_release

    kind = _kind(data)
    spec_path = None
    if isinstance(spec, str | os.PathLike):
        spec_path = Path(spec)
        spec = load_spec(spec_path)
    if isinstance(spec, dict):
        d = dict(spec)
        src = dict(d.get("source") or {})
        if not any(k in src for k in ("path", "table", "bundled")):
            src["table"] = name
        d["source"] = src
        spec = ReleaseSpec.from_dict(d)
    if not isinstance(spec, ReleaseSpec):
        raise TypeError(f"spec must be a ReleaseSpec, a dict or a TOML path; got {type(spec)}")
    source = spec.source
    if source.table != name or source.database is not None:
        raise ValueError(
            f"[source] of a DataFrame release is table = {name!r} (or left out of a dict spec); "
            "got a spec that reads another source"
        )
    frame = _scannable(data, kind)
    con = duckdb.connect()
    try:
        con.execute("SET preserve_insertion_order = false")
        if threads is not None:
            con.execute(f"SET threads = {int(threads)}")
        con.register(name, frame)
        engine = DuckDBEngine(con)
        return run_release(
            spec,
            engine=engine,
            out=out,
            ledger=ledger,
            progress=progress,
            spec_path=spec_path,
            period=period,
        )
    finally:
        con.close()
