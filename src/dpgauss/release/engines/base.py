"""The engine boundary: what an engine (DuckDB or Spark) must compute, and nothing more.

An engine turns a table of records into the *bounded, unnoised* aggregate of one release:
for every key of the public domain, the number (or kde mass) of kept records and, for sums
and means, the sum of their clamped values — plus exact row counters for the report.  Noise,
denoising, the ledger and writing outputs stay in :mod:`dpgauss.release.pipeline`, the same for
every engine.  The aggregate never leaves the process unnoised.

Semantics every engine implements (the sensitivity proof in
:mod:`dpgauss.release.sensitivity` relies on them):

1. **Classification**, in this order; each row lands in exactly one class:
   ``outside_filter`` (a ``[filter]`` is given and the row's filter column, read as a
   timestamp or a number, is missing, unparseable or outside ``[start, stop)``),
   ``null_unit`` (the unit id is NULL, an empty string, or a float NaN or ±inf; −0.0 is
   the unit 0.0, and a categorical id is its value's text), ``invalid_domain`` (the domain
   column is missing or unparseable, or the coordinates are not finite, outside
   [−90, 90] × [−180, 180] or outside the bounding box), ``invalid_value`` (sum/mean: the value
   is missing, unparseable or not finite), ``outside_domain`` (a valid value that maps to no
   key), else *in domain*.  Before all of them, a CSV record text that is not a record of the
   CSV format (:mod:`dpgauss.release.engines.csv_format`: invalid UTF-8, an unterminated quote, the
   wrong number of fields, …) is one ``malformed_lines``; one equal to the header is no row at
   all.  A record's bytes only ever decide that record's row: under ``[source] csv =
   "lines"`` a record is a line, under ``"rfc4180"`` a run of lines whose quotes balance (the
   writer is trusted to quote correctly, csv_format).
2. **Priorities.**  Each in-domain record gets the priority ``H(salt, record)``, a keyed hash
   of the columns that tell a unit's records apart (all the source's columns by default —
   with ``[source] types``, the declared ones; for CSV, the record's text — each by its
   value: a categorical by its text, never by a code that other records decide), and each
   (unit, key) pair the priority ``H(salt, 'keys', unit, key)``; the salt is a fresh 64-bit
   secret per release (``secrets``).  A priority depends only on the record's own content
   and the salt — never on the record's position or on other units' records — so which
   records a unit keeps is a function of that unit's records alone.
3. **Bounding**, in this order, each step among the records still kept:
   ``max_records_per_key`` c: per (unit, key), the c records of smallest priority;
   ``max_keys_per_unit`` k: per unit, the k keys of smallest key priority;
   ``max_records_per_unit`` b: per unit, the b records of smallest priority.
   So a unit keeps at most b records, at most k keys and at most c records per key, whatever
   it sent (a unit with 10⁶ records keeps b).  Ties (identical records) do not matter: tied
   records are interchangeable.
4. **Aggregation** per key of the kept records: the count (``kde``: the sum of the record's
   weights at that key), and for sum/mean the sum of ``clamp(v, lower, upper) − offset``
   (times the weight for ``kde``), with ``offset = (lower + upper)/2`` for a mean, 0 for a sum.
   Every key of the domain is present, zeros included.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np

if TYPE_CHECKING:  # annotations only: the domain and the spec import this module's typing
    from ..domains.key_domain import KeyDomain
    from ..spec import ReleaseSpec

from ...errors import EngineError

__all__ = [
    "AGGREGATION_FAILED",
    "DUCKDB",
    "INT_LIMIT",
    "SPARK",
    "Aggregate",
    "AggregationPlan",
    "Column",
    "Dialect",
    "Engine",
    "EngineError",
    "RowCounts",
    "SparkDialect",
    "collect",
    "source_columns",
]

# Row classes ("Classification" above), as the engines code them: a row of class c > 0 is
# grouped under -c; MALFORMED (CSV) lines are tested first.
IN_DOMAIN, NULL_UNIT, INVALID_DOMAIN, INVALID_VALUE, OUTSIDE, OUTSIDE_FILTER, MALFORMED = range(7)
DROPPED = -100  # the group of in-domain rows removed by the bounds

#: Integers with |x| < INT_LIMIT are read exactly (DECIMAL(38, 0) in both engines).
INT_LIMIT = 10**38


#: The one message of a failed aggregation: fixed, so that it says nothing about the data.
AGGREGATION_FAILED = (
    "the engine could not read or aggregate the source (an unreadable file, or a value its "
    "reader rejects); nothing was charged; `dpgauss check SPEC` shows the detail, which is "
    "confidential"
)


@dataclass(frozen=True, eq=False)
class AggregationPlan:
    """Everything an engine needs: the spec, the resolved domain and the release's salt.

    ``value_offset`` is subtracted from every clamped value (the centre of the clamping
    interval for a mean, 0 otherwise).
    """

    spec: ReleaseSpec
    domain: KeyDomain
    salt: int
    value_offset: float = 0.0

    def __post_init__(self) -> None:
        if isinstance(self.salt, bool) or not isinstance(self.salt, int):
            raise TypeError("salt must be an int")
        if not 0 <= self.salt < 2**64:
            raise ValueError("salt must be in [0, 2**64)")


@dataclass
class RowCounts:
    """Exact row counters of one aggregation (for the data owner's report, *not* private).

    ``dropped_by_bounds`` maps each bound to the number of in-domain records it removed.
    """

    read: int = 0
    malformed_lines: int = 0
    outside_filter: int = 0
    null_unit: int = 0
    invalid_domain: int = 0
    invalid_value: int = 0
    outside_domain: int = 0
    in_domain: int = 0
    kept: int = 0
    units: int = 0
    dropped_by_bounds: dict[str, int] = field(default_factory=dict)
    #: a discovered domain (:mod:`dpgauss.release.domains.discovered`): the keys with kept
    #: records, before the selection (confidential, like every counter here)
    candidate_keys: int | None = None

    def as_dict(self) -> dict[str, Any]:
        """A JSON-ready dict."""
        return asdict(self)


@dataclass(frozen=True, eq=False)
class Aggregate:
    """The bounded, unnoised aggregate: per key ``counts`` and (sum/mean) ``sums``;
    ``labels``: the keys found, for a discovered domain (sorted; else None: the domain's)."""

    counts: np.ndarray
    sums: np.ndarray | None
    rows: RowCounts
    labels: np.ndarray | None = None


class Engine(Protocol):
    """What the release pipeline needs from an engine."""

    name: str

    def describe(self, spec: ReleaseSpec) -> dict[str, str]:
        """The source's columns and their types, reading metadata only (no records)."""
        ...

    def aggregate(self, plan: AggregationPlan) -> Aggregate:
        """The bounded aggregate of the source (module docstring for the semantics)."""
        ...


def source_columns(spec: ReleaseSpec) -> tuple[str, ...]:
    """The source columns a release reads, without repeats: the unit, the domain's columns,
    the statistic's and the filter's column, and ``[bounds] record_columns``."""
    cols = [spec.unit.column, *spec.domain.columns]
    if spec.statistic.column is not None:
        cols.append(spec.statistic.column)
    if spec.filter is not None:
        cols.append(spec.filter.column)
    cols += spec.bounds.record_columns or ()
    return tuple(dict.fromkeys(str(c) for c in cols))


# ----------------------------------------------------------------------------- dialects

# What DuckDB's TRY_CAST(text AS DOUBLE) accepts (checked against DuckDB 2.0): Spark parses
# text as a number only when it has this grammar (Spark alone would also take ``5d``).
_DIGITS = "[0-9]+(_[0-9]+)*"
NUMBER_TEXT = (
    r"^\s*[+-]?("
    rf"(({_DIGITS})([.]({_DIGITS})?)?|[.]{_DIGITS})([eE][+-]?{_DIGITS})?"
    r"|(?i:inf|infinity|nan)"
    r")\s*$"
)


class Dialect:
    """SQL spelling of the few operations the engine-neutral expressions need: the exact key
    arithmetic (:mod:`dpgauss.release.domains.keys`) and the reading of a record's values
    (:mod:`dpgauss.release.engines.sql`).  This class spells DuckDB's SQL; a value that a
    query binds is a named parameter (``$name``, its value in ``params``)."""

    name = "duckdb"
    big = "HUGEINT"  # the exact integer type of the key arithmetic (|x| < 10^38)
    text = "VARCHAR"  # the string type
    int32 = "INTEGER"

    def big_lit(self, v: int) -> str:
        if -(2**62) < v < 2**62:
            return f"CAST({v} AS {self.big})"
        return f"CAST('{v}' AS {self.big})"

    def int_lit(self, v: int) -> str:
        return f"CAST({v} AS BIGINT)"

    def dbl(self, x: float) -> str:
        return f"CAST('{x!r}' AS DOUBLE)"

    def idiv(self, a: str, b: str) -> str:
        return f"(({a}) // ({b}))"

    def to_big(self, a: str) -> str:
        return f"CAST({a} AS {self.big})"

    # -- reading values

    def ident(self, name: str) -> str:
        """``name`` as an identifier (double quotes, embedded quotes doubled)."""
        return '"' + str(name).replace('"', '""') + '"'

    def literal(self, text: str) -> str:
        """``text`` as a string literal (no backslash escapes in DuckDB's literals)."""
        return "'" + text.replace("'", "''") + "'"

    def bind(self, params: dict[str, Any], name: str, value: Any) -> str:
        """A value of the query (a number or a regex): the parameter ``$name``."""
        params[name] = value
        return f"${name}"

    def finite(self, x: str) -> str:
        """``x`` (a double) is neither NaN nor ±inf (NULL for NULL)."""
        return f"isfinite({x})"

    def not_finite(self, x: str) -> str:
        return f"NOT isfinite({x})"

    def full_match(self, x: str, regex: str) -> str:
        """The text ``x`` matches the whole ``regex`` (an expression, e.g. from :meth:`bind`)."""
        return f"regexp_full_match({x}, {regex})"

    def text_int(self, x: str) -> str:
        """The text ``x`` (an integer literal, keymap.INT_LITERAL) as an exact integer."""
        return f"TRY_CAST({x} AS DECIMAL(38, 0))"

    def text_double(self, x: str) -> str:
        """The text ``x`` as a double, NULL if it is not a number."""
        return f"TRY_CAST({x} AS DOUBLE)"

    def unscaled(self, x: str) -> str:
        """A DECIMAL ``x`` as its unscaled integer (the digits without the point)."""
        return f"CAST(replace(CAST({x} AS {self.text}), '.', '') AS {self.big})"


class SparkDialect(Dialect):
    """Spark SQL's spelling; a value a query binds is a literal (Spark takes no parameters)."""

    name = "spark"
    big = "DECIMAL(38, 0)"
    text = "STRING"
    int32 = "INT"

    def idiv(self, a: str, b: str) -> str:
        # Spark's `div` truncates toward zero and returns BIGINT (every use here has a
        # non-negative dividend and a quotient below the number of keys).
        return f"(({a}) div ({b}))"

    def ident(self, name: str) -> str:
        """``name`` as a Spark SQL identifier (backticks, embedded backticks doubled)."""
        return "`" + str(name).replace("`", "``") + "`"

    def literal(self, text: str) -> str:
        """``text`` as a Spark SQL string literal."""
        return "'" + text.replace("\\", "\\\\").replace("'", "\\'") + "'"

    def bind(self, params: dict[str, Any], name: str, value: Any) -> str:
        if isinstance(value, str):
            return self.literal(value)
        return f"CAST({self.literal(repr(float(value)))} AS DOUBLE)"

    def finite(self, x: str) -> str:
        return f"NOT (isnan({x}) OR abs({x}) = double('inf'))"

    def not_finite(self, x: str) -> str:
        return f"(isnan({x}) OR abs({x}) = double('inf'))"

    def full_match(self, x: str, regex: str) -> str:
        return f"({x} RLIKE {regex})"

    def text_int(self, x: str) -> str:
        return f"try_cast(replace({x}, '_', '') AS DECIMAL(38, 0))"

    def text_double(self, x: str) -> str:
        """As DuckDB's ``TRY_CAST(x AS DOUBLE)``: only text of :data:`NUMBER_TEXT`."""
        return (
            f"CASE WHEN {x} RLIKE {self.literal(NUMBER_TEXT)} "
            f"THEN try_cast(replace({x}, '_', '') AS DOUBLE) END"
        )

    def unscaled(self, x: str) -> str:
        return f"try_cast(replace(CAST({x} AS {self.text}), '.', '') AS {self.big})"


DUCKDB = Dialect()
SPARK = SparkDialect()


# ------------------------------------------------------------------------ column typing


@dataclass(frozen=True)
class Column:
    """How a domain column is read (:mod:`dpgauss.release.domains.keys`), engine-independent.

    ``kind``: ``"int"`` (exact integers, ``lo``/``hi`` their bounds), ``"float"``,
    ``"decimal"`` (``scale`` > 0), ``"string"`` (text: integer and double channels),
    ``"wide"`` (DuckDB HUGEINT/UHUGEINT: integers, beyond ±10^38 as exact doubles), or
    ``"other"`` (not a number).  ``text``: how string keys see it — ``"raw"``, ``"cast"``
    (the engine's text of the value) or None (invalid with string keys).
    """

    kind: str
    lo: int = -(INT_LIMIT - 1)
    hi: int = INT_LIMIT - 1
    scale: int = 0
    precision: int = 38
    text: str | None = None

    @property
    def fits64(self) -> bool:
        """Integers that a signed 64-bit BIGINT holds (the engines read them as BIGINT)."""
        return self.kind == "int" and -(2**63) <= self.lo and self.hi < 2**63


# ----------------------------------------------------------------------- collecting


def collect(
    plan: AggregationPlan,
    groups: list[tuple[Any, ...]],
    spread: list[tuple[Any, ...]] | None = None,
) -> Aggregate:
    """The :class:`Aggregate` from an engine's collected rows.

    ``groups``: one ``(g, n, units, n_c, n_k, s)`` per group ``g`` of rows — the key index
    ≥ 0 of kept rows, :data:`DROPPED` for in-domain rows the bounds removed, minus the row
    class otherwise — with its rows ``n``, the units whose first row it holds, the rows left
    after the per-key bound (``n_c``) and the keys bound (``n_k``), and the sum ``s`` of
    the kept values.  ``spread`` (kde): ``(key, mass, s)`` per node, which then gives the
    counts and sums instead of ``n`` and ``s``.
    """
    d = plan.domain.size
    stat = plan.spec.statistic.kind
    counts = np.zeros(d, dtype=np.float64)
    sums = np.zeros(d, dtype=np.float64) if stat != "count" else None
    rows = RowCounts()
    per_class = dict.fromkeys(
        (MALFORMED, NULL_UNIT, INVALID_DOMAIN, INVALID_VALUE, OUTSIDE, OUTSIDE_FILTER, IN_DOMAIN), 0
    )
    n_c = n_k = 0
    for g, n, units, nc, nk, s in groups:
        g, n = int(g), int(n)
        rows.units += int(units or 0)
        n_c += int(nc or 0)
        n_k += int(nk or 0)
        if g >= 0 or g == DROPPED:
            per_class[IN_DOMAIN] += n
        else:
            per_class[-g] += n
        if g < 0:
            continue
        if g >= d:  # unreachable: keys are computed exactly in 0 … d − 1 (keymap)
            raise EngineError(f"internal error: key index {g} outside the domain of {d} keys")
        rows.kept += n  # kde: the records whose nearest node is g
        if spread is None:
            counts[g] = float(n)
            if sums is not None and s is not None:
                sums[g] = float(s)
    if spread is not None:
        for key, mass, s in spread:
            if not 0 <= int(key) < d:  # unreachable: the mapper returns node indices
                raise EngineError(f"internal error: node {key} outside the graph of {d} nodes")
            counts[int(key)] = float(mass)
            if sums is not None and s is not None:
                sums[int(key)] = float(s)
    rows.malformed_lines = per_class[MALFORMED]
    rows.outside_filter = per_class[OUTSIDE_FILTER]
    rows.null_unit = per_class[NULL_UNIT]
    rows.invalid_domain = per_class[INVALID_DOMAIN]
    rows.invalid_value = per_class[INVALID_VALUE]
    rows.outside_domain = per_class[OUTSIDE]
    rows.in_domain = per_class[IN_DOMAIN]
    rows.read = sum(per_class.values())
    b = plan.spec.bounds
    dropped: dict[str, int] = {}
    if b.max_records_per_key is not None:
        dropped["max_records_per_key"] = rows.in_domain - n_c
    else:
        n_c = rows.in_domain
    if b.max_keys_per_unit is not None:
        dropped["max_keys_per_unit"] = n_c - n_k
    else:
        n_k = n_c
    if b.max_records_per_unit is not None:
        dropped["max_records_per_unit"] = n_k - rows.kept
    rows.dropped_by_bounds = dropped
    if not all(math.isfinite(x) for x in (counts.sum(), 0.0 if sums is None else sums.sum())):
        raise EngineError("the aggregate is not finite (internal error)")
    return Aggregate(counts=counts, sums=sums, rows=rows)
