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
   CSV format (:mod:`dpgauss.release.csv_format`: invalid UTF-8, an unterminated quote, the
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

from dataclasses import asdict, dataclass, field
from typing import Any, Protocol

import numpy as np

from .domains.key_domain import KeyDomain
from .spec import ReleaseSpec

__all__ = [
    "Aggregate",
    "AggregationPlan",
    "Engine",
    "KeyDomain",
    "RowCounts",
    "get_engine",
    "source_columns",
]


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

    def as_dict(self) -> dict[str, Any]:
        """A JSON-ready dict."""
        return asdict(self)


@dataclass(frozen=True, eq=False)
class Aggregate:
    """The bounded, unnoised aggregate: per key ``counts`` and (sum/mean) ``sums``."""

    counts: np.ndarray
    sums: np.ndarray | None
    rows: RowCounts


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


ENGINES = ("duckdb", "spark")


def get_engine(name: str, **options: Any) -> Engine:
    """The engine called ``name``: ``"duckdb"`` (embedded, the default) or ``"spark"``.

    ``options`` are the engine's keyword arguments (:class:`~.engine_duckdb.DuckDBEngine`,
    :class:`~.engine_spark.SparkEngine`).  The Spark engine needs the ``spark`` extra; without
    pyspark this raises a one-line ``ValueError`` saying so.
    """
    if name == "duckdb":
        from .engine_duckdb import DuckDBEngine

        return DuckDBEngine(**options)
    if name == "spark":
        from .engine_spark import SparkEngine

        return SparkEngine(**options)
    raise ValueError(f"engine must be one of {', '.join(ENGINES)}; got {name!r}")
