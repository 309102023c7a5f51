"""The engines of a release: one semantics, several executions of it.

* :mod:`~dpgauss.release.engines.base` — the contract every engine implements (what is
  computed, the row classes, :class:`EngineError`), the :class:`Dialect` and column typing;
* :mod:`~dpgauss.release.engines.sql` — the dialect-neutral expressions that read a record
  (unit, domain, value), written once;
* :mod:`~dpgauss.release.engines.duckdb` (embedded, the default) and
  :mod:`~dpgauss.release.engines.spark` — connection, scan, bounding plan and UDFs;
* :mod:`~dpgauss.release.engines.csv_format` (how CSV is read, in both) and
  :mod:`~dpgauss.release.engines.unit_topb` (DuckDB's compiled per-unit selection).

:func:`get_engine` builds an engine by name (the engines import their databases lazily).
"""

from .base import (
    AGGREGATION_FAILED,
    ENGINES,
    Aggregate,
    AggregationPlan,
    Engine,
    EngineError,
    RowCounts,
    get_engine,
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
