"""The engines of a release: one semantics, several executions of it.

* :mod:`~dpgauss.release.engines.base` — the contract every engine implements (what is
  computed, the row classes, :class:`EngineError`), the :class:`Dialect` and column typing;
* :mod:`~dpgauss.release.engines.sql` — the dialect-neutral expressions that read a record
  (unit, domain, value), written once;
* :mod:`~dpgauss.release.engines.duckdb` (embedded, the default) and
  :mod:`~dpgauss.release.engines.spark` — connection, scan, bounding plan and UDFs;
* :mod:`~dpgauss.release.engines.csv_format` (how CSV is read, in both) and
  :mod:`~dpgauss.release.engines.unit_topb` (DuckDB's compiled per-unit selection).

:func:`get_engine` builds an engine by name (here, so that no engine module imports the
module that imports it; each imports its database lazily).
"""

from __future__ import annotations

from typing import Any

from .base import (
    AGGREGATION_FAILED,
    Aggregate,
    AggregationPlan,
    Engine,
    EngineError,
    RowCounts,
    source_columns,
)

__all__ = [
    "AGGREGATION_FAILED",
    "ENGINES",
    "Aggregate",
    "AggregationPlan",
    "Engine",
    "EngineError",
    "RowCounts",
    "get_engine",
    "source_columns",
]


ENGINES = ("duckdb", "spark")


def get_engine(name: str, **options: Any) -> Engine:
    """The engine called ``name``: ``"duckdb"`` (embedded, the default) or ``"spark"``.

    ``options`` are the engine's keyword arguments (:class:`~.duckdb.DuckDBEngine`,
    :class:`~.spark.SparkEngine`).  The Spark engine needs the ``spark`` extra; without
    pyspark this raises a one-line ``ValueError`` saying so.
    """
    if name == "duckdb":
        from .duckdb import DuckDBEngine

        return DuckDBEngine(**options)
    if name == "spark":
        from .spark import SparkEngine

        return SparkEngine(**options)
    raise ValueError(f"engine must be one of {', '.join(ENGINES)}; got {name!r}")
