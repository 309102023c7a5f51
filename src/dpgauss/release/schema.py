r"""The declared schema, ``[source] types``: every column a release reads, in a type the spec
names before any record is read.

Why a declared schema
---------------------
A source's column types are often a function of *every* record.  ``pd.read_csv`` types a
column from all its rows; ``DataFrame(records)``, ``concat`` and ``Table.to_pandas()`` widen
int64 to float64 as soon as one value is missing; ``pl.read_csv`` types from the first 100
rows; a pandas categorical's codes come from the sorted distinct values.  Reading a column
in such a type is a switch decided on the whole source, which the privacy invariant forbids
(``docs/security.md``): measured, one record with an empty key turned ``key`` into float64
and moved 200 other units from key 2⁵³+1 to 2⁵³ (282.8 Δ); one text id among integer ids
turned ``uid`` into text and redrew every unit's kept records.  So the spec declares the
types::

    [source]
    table = "records"
    types = { uid = "int64", key = "int64", note = "string" }

``types`` is required for every ``table`` source (a DuckDB table or view, a DataFrame of
:func:`~dpgauss.release.frames.release_frame`: the spec refuses one without,
:data:`~dpgauss.release.spec.TABLE_NEEDS_TYPES`) and allowed for every source.  With it:

1. **Every column the release reads is declared** (the unit, the domain's, the statistic's
   and the filter's columns and ``[bounds] record_columns``; the spec refuses a missing
   one), and only declared columns are read: a record's content — what its sampling
   priority hashes — is its declared columns, in the order the spec lists them, each in
   its declared type (a CSV record's content stays its line).  A column the spec does not
   declare is never read, so it cannot move anything.
2. **Each declared column is converted value by value** from the source's type to the
   declared type, by the table below; a value that does not convert (text that is not a
   number, an integer out of the declared range) is NULL for its own row, which is then
   read like any row with that column empty.
3. **A source column whose type cannot hold the declared type's values exactly is
   refused** before anything is charged, with one fixed sentence naming the column, both
   types and how to build the source safely (:func:`refusal`): float64 for int64, anything
   but text for a string (``pd.read_csv`` reads the texts ``"1 "``, ``"+1"`` and ``"01"``
   of a column it types as int64 all as 1, so one unit's record that keeps the column text
   or lets it be read as integers moves every other unit's key: found by the neighbouring
   fuzzer's long run), nanoseconds for microseconds, a time-zoned timestamp.  Such a type
   can be the trace of a lossy widening by the tool that built the
   frame (two ids 2⁵³+2j and 2⁵³+2j+1 already merged), which no reading can undo.

The declared types (DuckDB and Arrow names are accepted as aliases, any case):

=============== =========================== ==============================================
declared        aliases                     a source column of type … is read
=============== =========================== ==============================================
``int8`` …      ``tinyint``, ``smallint``,  integer, boolean (1/0) or ``DECIMAL(p, 0)``:
``int64``,      ``integer``,              the same integer, NULL outside the declared
``uint8`` …     ``bigint``, ``utinyint`` …  range; text: an integer literal of
``uint64``      ``ubigint``                 :data:`~dpgauss.release.domains.keys.INT_LITERAL`
``float64``     ``double``, ``float8``      a float or integer: the nearest double;
                                            text: as both engines parse a number
                                            (``nan``, ``inf``: NULL)
``string``      ``varchar``, ``text``,      text as it is; a categorical by its value's
                ``utf8``, ``large_string``  text (a column of any other type is refused:
                                            see 3.)
``bool``        ``boolean``                 boolean; text ``true``/``false`` (any case)
``date``        ``date32``                  date; text ``YYYY-MM-DD``
``timestamp``   ``timestamp[us]``           timestamp (s, ms, µs) or date; text of
                                            :data:`~dpgauss.release.domains.keys.TIMESTAMP_TEXT`
``timestamp_ns`` ``timestamp[ns]``          timestamp of any unit or date (NULL outside
                                            1677–2262); text as for ``timestamp``
=============== =========================== ==============================================

An all-NULL column (Arrow's ``null`` type) is read as NULL in every declared type.  Every
other pair is refused.  The rules decide on the *types* alone, so a source's acceptance is
a property of its schema, never of a record; and a conversion is a function of one value,
so a record's reading depends on nothing but its own values.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from .domains.keys import INT_LITERAL, TIMESTAMP_TEXT, WS

__all__ = [
    "DATE_TEXT",
    "DECLARED",
    "DUCKDB_TYPES",
    "WS_CHARS",
    "canonical",
    "check",
    "declared_types",
    "duckdb_conversion",
    "duckdb_family",
    "refusal",
    "rule",
]

#: Each declared type and its DuckDB type.
DUCKDB_TYPES: dict[str, str] = {
    "int8": "TINYINT",
    "int16": "SMALLINT",
    "int32": "INTEGER",
    "int64": "BIGINT",
    "uint8": "UTINYINT",
    "uint16": "USMALLINT",
    "uint32": "UINTEGER",
    "uint64": "UBIGINT",
    "float64": "DOUBLE",
    "string": "VARCHAR",
    "bool": "BOOLEAN",
    "date": "DATE",
    "timestamp": "TIMESTAMP",
    "timestamp_ns": "TIMESTAMP_NS",
}
DECLARED = tuple(DUCKDB_TYPES)
INTEGERS = DECLARED[:8]

_ALIASES = {
    "tinyint": "int8",
    "smallint": "int16",
    "integer": "int32",
    "bigint": "int64",
    "utinyint": "uint8",
    "usmallint": "uint16",
    "uinteger": "uint32",
    "ubigint": "uint64",
    "double": "float64",
    "float8": "float64",
    "varchar": "string",
    "text": "string",
    "utf8": "string",
    "large_string": "string",
    "large_utf8": "string",
    "str": "string",
    "boolean": "bool",
    "date32": "date",
    "date32[day]": "date",
    "timestamp[us]": "timestamp",
    "timestamp[ns]": "timestamp_ns",
}

#: The characters of :data:`~dpgauss.release.domains.keys.WS`, for ``trim``.
WS_CHARS = " \t\n\x0b\f\r"
#: DATE text, as both engines read it (then cast).
DATE_TEXT = rf"^{WS}*[0-9]{{4}}-[0-9]{{1,2}}-[0-9]{{1,2}}{WS}*$"

# How each declared type takes a source column of each family: "same" (as it is), "cast"
# (an exact, value-by-value cast; NULL where the value has no equal in the declared type),
# "text" (the text rules of the module docstring), "null" (an all-NULL column).  A family
# missing from a declared type's entry is refused.
_INT_FROM = {"int": "cast", "bool": "cast", "decimal0": "cast", "string": "text"}
_RULES: dict[str, dict[str, str]] = {
    **{t: _INT_FROM for t in INTEGERS},
    "float64": {
        "float64": "same",
        "float32": "cast",
        "int": "cast",
        "string": "text",
    },
    # text only: an integer, decimal, boolean or date column may be a tool's reading of the
    # text ("1 ", "+1" and "01" all read as 1 by pd.read_csv), which no reading undoes
    "string": {"string": "same"},
    "bool": {"bool": "same", "string": "text"},
    "date": {"date": "same", "string": "text"},
    "timestamp": {"timestamp": "cast", "date": "cast", "string": "text"},
    "timestamp_ns": {
        "timestamp_ns": "same",
        "timestamp": "cast",
        "date": "cast",
        "string": "text",
    },
}


def canonical(column: str, name: object) -> str:
    """The declared type called ``name`` (a dpgauss, DuckDB or Arrow name, any case) for
    ``column``; a one-line error naming the key and the allowed names otherwise."""
    if not isinstance(name, str):
        raise TypeError(
            f"[source] types.{column} must be a type name (a string); got {type(name).__name__}"
        )
    key = re.sub(r"\s+", "", name.lower())
    if key in DUCKDB_TYPES:
        return key
    if key in _ALIASES:
        return _ALIASES[key]
    raise ValueError(
        f"[source] types.{column} must be one of {', '.join(DECLARED)} (or a DuckDB or Arrow "
        f"alias of one); got {name!r}"
    )


def declared_types(value: object) -> dict[str, str] | None:
    """``[source] types`` checked: column name → canonical declared type, in spec order."""
    if value is None:
        return None
    if not isinstance(value, Mapping):
        raise TypeError(
            "[source] types must be a table of column = type, e.g. "
            f'{{ uid = "int64", key = "string" }}; got {type(value).__name__}'
        )
    if not value:
        raise ValueError("[source] types must name at least one column")
    out: dict[str, str] = {}
    for col, name in value.items():
        if not isinstance(col, str) or not col.strip():
            raise ValueError(f"[source] types: column names must be non-empty; got {col!r}")
        out[col] = canonical(col, name)
    return out


def duckdb_family(t: str) -> str:
    """The family of a DuckDB type (``DESCRIBE``'s spelling): ``int``, ``bool``,
    ``decimal0`` (scale 0), ``decimal``, ``float32``, ``float64``, ``string`` (``VARCHAR`` and
    ``ENUM``, read by its value's text), ``date``, ``timestamp`` (s, ms, µs), ``timestamp_ns``,
    ``null`` (an all-NULL column) or ``other``."""
    u = t.upper().strip()
    if u in (
        "TINYINT",
        "SMALLINT",
        "INTEGER",
        "BIGINT",
        "HUGEINT",
        "UTINYINT",
        "USMALLINT",
        "UINTEGER",
        "UBIGINT",
        "UHUGEINT",
    ):
        return "int"
    m = re.fullmatch(r"DECIMAL\((\d+),\s*(\d+)\)", u)
    if m:
        return "decimal0" if int(m.group(2)) == 0 else "decimal"
    simple = {
        "BOOLEAN": "bool",
        "FLOAT": "float32",
        "DOUBLE": "float64",
        "VARCHAR": "string",
        "DATE": "date",
        "TIMESTAMP": "timestamp",
        "TIMESTAMP_S": "timestamp",
        "TIMESTAMP_MS": "timestamp",
        "TIMESTAMP_NS": "timestamp_ns",
        '"NULL"': "null",
        "NULL": "null",
    }
    if u in simple:
        return simple[u]
    if u.startswith("ENUM("):
        return "string"
    return "other"


def rule(family: str, declared: str) -> str | None:
    """How a column of ``family`` is read as ``declared`` (module docstring), or None when
    the pair is refused."""
    if family == "null":
        return "null"
    return _RULES[declared].get(family)


def refusal(column: str, declared: str, physical: str) -> str:
    """The one sentence that refuses a source column whose type cannot hold the declared
    type's values exactly (it names the schema only, never a value)."""
    if physical.upper().startswith("ENUM("):
        physical = "ENUM"  # its type string lists the values: data, never in a message
    pandas = {
        "string": "'string'",
        "bool": "'boolean'",
        "float64": "'Float64'",
        "date": "'datetime64[s]'",
        "timestamp": "'datetime64[us]'",
        "timestamp_ns": "'datetime64[ns]'",
    }.get(declared, f"'{declared.capitalize()}'")
    return (
        f"[source] types declares {column!r} as {declared}, but the source's column is "
        f"{physical}, which cannot hold {declared} values exactly (a type a tool inferred "
        "from the records, e.g. int64 widened to float64 by one missing value, has already "
        "changed them): build the source with the declared types — pandas "
        f"pd.read_csv(..., dtype={{{column!r}: {pandas}}}) or df.astype(...) from the raw "
        f"text, Polars pl.read_csv(..., schema_overrides={{{column!r}: ...}}), or Parquet "
        f"written with the column as {declared}"
    )


def check(declared: Mapping[str, str], physical: Mapping[str, str], family: Any) -> None:
    """Refuse (``ValueError``) a declared column the source lacks, or whose type ``family``
    (``physical[col] → family``) cannot be read as declared.  Schema only: no record."""
    shown = ", ".join(list(physical)[:30]) + (", ..." if len(physical) > 30 else "")
    for col, t in declared.items():
        if col not in physical:
            raise ValueError(
                f"[source] types names {col!r}, which is not a column of the source "
                f"(columns: {shown})"
            )
        if rule(family(physical[col]), t) is None:
            raise ValueError(refusal(col, t, str(physical[col])))


def _literal(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


def duckdb_conversion(column_sql: str, physical: str, declared: str) -> str:
    """DuckDB SQL of one declared column read from a source column of type ``physical``
    (``check`` has accepted the pair)."""
    fam = duckdb_family(physical)
    how = rule(fam, declared)
    target = DUCKDB_TYPES[declared]
    c = column_sql
    if how == "null":
        return f"NULL::{target}"
    if how == "same":
        return c if not physical.upper().startswith("ENUM(") else f"CAST({c} AS VARCHAR)"
    if how == "cast":
        return f"TRY_CAST({c} AS {target})"
    assert how == "text"
    if physical.upper().startswith("ENUM("):
        c = f"CAST({c} AS VARCHAR)"
    if declared in INTEGERS:
        return (
            f"CASE WHEN regexp_full_match({c}, {_literal(INT_LITERAL)}) "
            f"THEN TRY_CAST(TRY_CAST({c} AS DECIMAL(38, 0)) AS {target}) END"
        )
    if declared == "float64":
        return f"CASE WHEN isfinite(TRY_CAST({c} AS DOUBLE)) THEN TRY_CAST({c} AS DOUBLE) END"
    if declared == "bool":
        return f"CASE lower({c}) WHEN 'true' THEN true WHEN 'false' THEN false END"
    if declared == "date":
        return (
            f"CASE WHEN regexp_full_match({c}, {_literal(DATE_TEXT)}) "
            f"THEN TRY_CAST({c} AS DATE) END"
        )
    # trimmed: DuckDB reads '2020-01-02 ' as no timestamp, '2020-01-02 03:04 ' as one;
    # Spark reads both
    return (
        f"CASE WHEN regexp_full_match({c}, {_literal(TIMESTAMP_TEXT)}) "
        f"THEN TRY_CAST(trim({c}, {_literal(WS_CHARS)}) AS {target}) END"
    )
