"""How a record is read, written once for every engine: the unit, the domain and the value.

The rules are those of :mod:`dpgauss.release.engines.base` (classification) and
:mod:`dpgauss.release.domains.keys` (a value → its key, exactly).  :class:`RecordExpressions` writes
them as SQL expressions over one source row, in the spelling of a
:class:`~dpgauss.release.engines.base.Dialect`; an engine subclasses it with what only it
knows — how its column types read a double or a timestamp — and runs the expressions in
its own plan (DuckDB: one query; Spark: one job).  So the two engines cannot drift apart on
what a record *is*: which rows have no unit, which values are invalid, which channel a value
is read in, which key it maps to.

Column types come in one vocabulary, DuckDB's type names (``BIGINT``, ``DECIMAL(p,s)``,
``VARCHAR``, ``TIMESTAMP``, …): the Spark engine names its types so
(:func:`dpgauss.release.engines.spark.sql_type`).

A record's value is read in **channels** (keymap, "Reading a value"): ``int`` (an exact
integer), ``dbl`` (a double), ``dec`` (a decimal's unscaled integer) or ``str`` (text, for
string keys); a record has a value in at most one channel (NULL in the others).  Axis ``i``
of a domain keeps its channels in the columns ``dx{i}_{channel}`` (no suffix for the first
axis), coordinates in ``la{i}``, ``lo{i}``; the value of a sum or mean is ``vx``.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

from ..domains.keys import INT_LITERAL, range_key_sql, value_tables
from .base import AggregationPlan, Column, Dialect, EngineError

if TYPE_CHECKING:
    from ..spec import DomainSpec

__all__ = ["INT_BOUNDS", "RecordExpressions", "suffix"]

#: The integer types and their bounds.
INT_BOUNDS = {
    "TINYINT": (-(2**7), 2**7 - 1),
    "SMALLINT": (-(2**15), 2**15 - 1),
    "INTEGER": (-(2**31), 2**31 - 1),
    "BIGINT": (-(2**63), 2**63 - 1),
    "UTINYINT": (0, 2**8 - 1),
    "USMALLINT": (0, 2**16 - 1),
    "UINTEGER": (0, 2**32 - 1),
    "UBIGINT": (0, 2**64 - 1),
}


def suffix(i: int) -> str:
    """The column suffix of axis ``i`` of a domain (none for the first: ``dx``, ``la``, ``lo``)."""
    return "" if i == 0 else str(i)


class RecordExpressions:
    """The SQL expressions that read one record of ``plan``'s source, in ``dialect``.

    ``sql_types`` maps each source column to its type name (module docstring).  Values the
    expressions need (bounds, regexes) are bound by the dialect: parameters collected in
    ``params`` (DuckDB) or literals (Spark).  Subclasses give :meth:`_double` and
    :meth:`_time_micros` (and, for DuckDB's HUGEINT, :meth:`_wide`).
    """

    def __init__(self, dialect: Dialect, plan: AggregationPlan, sql_types: dict[str, str]) -> None:
        self.dialect = dialect
        self.plan = plan
        self.spec = plan.spec
        self.sql_types = sql_types
        self.params: dict[str, Any] = {}
        self._dx: list[dict[str, str]] = []

    # ---------------------------------------------------------- engine-specific

    def _double(self, column: str) -> str:
        """The source column as a double, NULL if it is none (text: DuckDB's parse)."""
        raise NotImplementedError

    def _time_micros(self, column: str) -> str:
        """The column as microseconds since 1970 (an exact integer), read as a timestamp
        the way the ``[filter]`` reads it; NULL if it is none."""
        raise NotImplementedError

    def _wide(self, c: str, t: str) -> dict[str, str]:
        """The channels of an integer column wider than 10^38 (DuckDB's HUGEINT)."""
        return {}

    # -------------------------------------------------------------------- helpers

    def _type(self, column: str) -> str:
        return self.sql_types.get(str(column), "").upper()

    def _keys(self, d: DomainSpec) -> tuple[Any, ...]:
        return self.plan.domain.keys_of(d)

    def _values_type(self, d: DomainSpec) -> str:
        """``"string"`` for string keys, else ``"number"``."""
        return "string" if any(isinstance(v, str) for v in self._keys(d)) else "number"

    # ----------------------------------------------------------------------- unit

    def _unit(self) -> tuple[str, str]:
        """(the unit id as rows are grouped by it, the no-unit condition), by its value:
        a categorical (DuckDB's ENUM) by its text — DuckDB compares and hashes an ENUM by its
        code, and pandas derives the codes from the sorted distinct values, so one record's
        new category would renumber every unit (issue #25, finding 2); text ids empty or
        NULL have no unit; a float id NaN or ±inf has none either (DuckDB's sort puts all
        NaN ids together, as one unit: finding 3), and −0.0 is the unit 0.0 (equal values)."""
        sql = self.dialect
        c = sql.ident(self.spec.unit.column)
        t = self._type(self.spec.unit.column)
        if t.startswith("ENUM("):
            c, t = f"CAST({c} AS {sql.text})", "VARCHAR"
        if t == "VARCHAR":
            return c, f"({c} IS NULL OR {c} = '')"
        if t in ("FLOAT", "DOUBLE", "REAL"):
            return (
                f"CASE WHEN {sql.finite(c)} THEN {c} + 0.0 END",
                f"({c} IS NULL OR {sql.not_finite(c)})",
            )
        return c, f"{c} IS NULL"

    # --------------------------------------------------------------------- domain

    def _column(self, d: DomainSpec) -> Column:
        """How a domain column's type is read (:class:`~dpgauss.release.engines.base.Column`);
        a timestamp range reads its column as microseconds since 1970 (an exact integer).
        A nanosecond timestamp has no text (the engines write it differently): no key of a
        values or numeric range domain."""
        if d.is_time:
            return Column("int", -(2**63), 2**63 - 1)
        t = self._type(str(d.column))
        if t in INT_BOUNDS:
            return Column("int", *INT_BOUNDS[t], text="cast")
        if t == "BOOLEAN":
            return Column("int", 0, 1, text="cast")
        if t in ("HUGEINT", "UHUGEINT"):
            return Column("wide", text="cast")
        m = re.fullmatch(r"DECIMAL\((\d+),\s*(\d+)\)", t)
        if m:
            p, sc = int(m.group(1)), int(m.group(2))
            if sc == 0:
                return Column("int", -(10**p - 1), 10**p - 1, text="cast")
            return Column("decimal", scale=sc, precision=p, text="cast")
        if t in ("FLOAT", "DOUBLE", "REAL"):
            return Column("float")
        if t == "VARCHAR":
            return Column("string", text="raw")
        if t.startswith("ENUM("):  # a categorical (pandas, or a DuckDB ENUM): its text
            return Column("string", text="cast")
        if t in ("DATE", "TIMESTAMP"):
            return Column("other", text="cast")
        return Column("other")

    def _channels(self, d: DomainSpec) -> dict[str, str]:
        """SQL of each way the record's value is read (module docstring): ``int`` (an exact
        integer, the dialect's big integer), ``dbl`` (a double), ``dec`` (a decimal's unscaled
        integer) or ``str`` (text, for string keys); a record has a value in at most one
        channel (NULL elsewhere).  A timestamp range: ``int``, the microseconds since 1970
        of the timestamp as the ``[filter]`` reads it."""
        sql = self.dialect
        col = self._column(d)
        c = sql.ident(str(d.column))
        if d.is_time:
            return {"int": self._time_micros(str(d.column))}
        if d.matches and self._values_type(d) == "string":
            if col.text == "raw":
                return {"str": c}
            return {"str": f"CAST({c} AS {sql.text})"} if col.text == "cast" else {}
        if col.kind == "int":
            x = f"CAST({c} AS {sql.int32})" if self._type(str(d.column)) == "BOOLEAN" else c
            return {"int": f"CAST({x} AS {'BIGINT' if col.fits64 else sql.big})"}
        if col.kind == "wide":
            return self._wide(c, self._type(str(d.column)))
        if col.kind == "float":
            return {"dbl": f"CASE WHEN {sql.finite(c)} THEN CAST({c} AS DOUBLE) END"}
        if col.kind == "decimal":
            return {"dec": sql.unscaled(c)}
        if col.kind == "string":
            if col.text == "cast":  # an ENUM: read as the text of its value
                c = f"CAST({c} AS {sql.text})"
            is_int = sql.full_match(c, sql.bind(self.params, "dp_int_re", INT_LITERAL))
            as_int = sql.text_int(c)
            as_dbl = f"({sql.text_double(c)})"
            return {
                "int": f"CASE WHEN {is_int} THEN {sql.to_big(as_int)} END",
                "dbl": f"CASE WHEN NOT coalesce({is_int} AND {as_int} IS NOT NULL, false) "
                f"AND {sql.finite(as_dbl)} THEN {as_dbl} END",
            }
        return {}

    def _domain_parse(self) -> tuple[dict[str, str], str]:
        """({name: SQL} of the parsed domain columns, the invalid-domain condition over them):
        every axis's, the record invalid when any axis is
        (:mod:`dpgauss.release.domains.key_domain`)."""
        self._dx = []
        parsed: dict[str, str] = {}
        bads: list[str] = []
        for i, part in enumerate(self.spec.domain.axes):
            cols, bad = self._axis_parse(i, part)
            parsed.update(cols)
            bads.append(bad)
        return parsed, bads[0] if len(bads) == 1 else "(" + " OR ".join(bads) + ")"

    def _axis_parse(self, i: int, d: DomainSpec) -> tuple[dict[str, str], str]:
        """({name: SQL} of axis ``i``'s parsed columns, its invalid condition); the axis's
        channel columns go to ``self._dx[i]`` (channel → column)."""
        sql, x = self.dialect, suffix(i)
        if d.locates:
            la, lo = f"la{x}", f"lo{x}"
            parsed = {la: self._double(str(d.lat)), lo: self._double(str(d.lon))}
            bad = f"({la} IS NULL OR {lo} IS NULL OR {sql.not_finite(la)} OR {sql.not_finite(lo)}"
            # Degrees are in range; planar coordinates (a projected [source] crs) are finite.
            if getattr(self.plan.domain.axes[i].mapper, "degrees", True):
                bad += f" OR NOT ({la} BETWEEN -90 AND 90 AND {lo} BETWEEN -180 AND 180)"
            if d.bbox is not None:
                la0, la1, lo0, lo1 = (
                    sql.bind(self.params, f"dp_{n}{x}", v)
                    for n, v in zip(("la0", "la1", "lo0", "lo1"), d.bbox, strict=True)
                )
                bad += f" OR NOT ({la} BETWEEN {la0} AND {la1} AND {lo} BETWEEN {lo0} AND {lo1})"
            self._dx.append({})
            return parsed, f"coalesce({bad}), true)"
        if d.kind == "discovered":
            # the key is the value itself, in its declared type (domains/discovered.py)
            self._dx.append({"key": f"dx{x}_key"})
            return {f"dx{x}_key": self._discovered_value(d)}, f"(dx{x}_key IS NULL)"
        # values and range: the column read by the rules of dpgauss.release.domains.keys.
        channels = self._channels(d)
        self._dx.append({ch: f"dx{x}_{ch}" for ch in channels})
        if not channels:
            return {}, "true"
        bad = " AND ".join(f"{ref} IS NULL" for ref in self._dx[-1].values())
        return {f"dx{x}_{ch}": expr for ch, expr in channels.items()}, f"({bad})"

    def _discovered_value(self, d: DomainSpec) -> str:
        """A discovered key: the column's value in its declared type (text as it is, an
        integer exactly, a timestamp to the microsecond; a categorical by its text)."""
        sql = self.dialect
        c = sql.ident(str(d.column))
        if self._type(str(d.column)).startswith("ENUM("):
            return f"CAST({c} AS {sql.text})"
        if (self.spec.source.types or {}).get(str(d.column)) == "timestamp":
            # A key is written, sorted and compared as a Python datetime: an instant outside
            # years 1 … 9999 (year 0 or 10000 once an offset moves it to UTC, a Parquet
            # count of microseconds, DuckDB's ±infinity) has none — DuckDB fetches it as
            # text or as datetime.min/max, one record then failed the release or merged
            # with a real key.  It is invalid, alone (review finding 1).
            lo, hi = "0001-01-01 00:00:00", "9999-12-31 23:59:59.999999"
            return (
                f"CASE WHEN {c} >= TIMESTAMP {sql.literal(lo)} AND "
                f"{c} <= TIMESTAMP {sql.literal(hi)} THEN {c} END"
            )
        return c

    def _range_key(self, i: int, d: DomainSpec) -> str:
        """The exact key of range axis ``i`` (:mod:`dpgauss.release.domains.keys`), BIGINT or
        NULL."""
        try:
            return range_key_sql(self.dialect, d.bins, self._dx[i], self._column(d))
        except ValueError as exc:
            raise EngineError(f"[{d.where}] column {d.column!r}: {exc}") from None

    def _value_keys(self, i: int, d: DomainSpec) -> dict[str, list[tuple[Any, int]]]:
        """The keys of values axis ``i`` per channel of the record, as ``(value, index)``: a
        record's channel ``ch`` matches the key it equals (keymap.value_tables); integer
        keys beyond the column's type are left out (no record can equal them)."""
        col = self._column(d)
        refs = self._dx[i]
        tables = value_tables(self._keys(d), col.scale if "dec" in refs else None)
        return {
            ch: [
                (v, k)
                for v, k in tables.get(ch, [])
                if not (ch == "int" and not col.lo <= v <= col.hi)
            ]
            for ch in refs
        }

    # ---------------------------------------------------------------------- value

    def _value_parse(self) -> tuple[dict[str, str], str, str | None]:
        """({name: SQL} of the parsed value, the invalid-value condition, the clamped value
        ``clamp(v, lower, upper) − offset``, None for a count)."""
        sql, st = self.dialect, self.spec.statistic
        if st.kind == "count":
            return {}, "false", None
        lo = sql.bind(self.params, "dp_lower", float(st.lower))  # type: ignore[arg-type]
        hi = sql.bind(self.params, "dp_upper", float(st.upper))  # type: ignore[arg-type]
        off = sql.bind(self.params, "dp_offset", float(self.plan.value_offset))
        return (
            {"vx": self._double(str(st.column))},
            f"(vx IS NULL OR {sql.not_finite('vx')})",
            f"greatest({lo}, least({hi}, vx)) - {off}",
        )
