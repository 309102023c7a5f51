"""The Spark engine: the bounded aggregation of a release on a Spark DataFrame.

For data that does not fit one machine.  The semantics are those of
:mod:`dpgauss.release.engines.base` — the same classification, content-keyed priorities,
bounding order and aggregation as the DuckDB engine (:mod:`dpgauss.release.engines.duckdb`);
how a record's unit, domain and value are read is written once, for both, in
:mod:`dpgauss.release.engines.sql` (in the Spark dialect here).  ``tests/release/engines/``
runs both engines on the same sources (``test_contract.py``, ``test_engine_spark.py``).
Only the per-key aggregate and the row counters come back to the driver (one ``collect``
of small rows: one per key, two for kde, and one per row class); no record ever does, and
the noise is added by the pipeline.

How the job is built (DataFrame API; SQL text only for the parsing expressions):

* **Sources.**  CSV (:mod:`dpgauss.release.engines.csv_format`, below), Parquet (paths or globs,
  schemas merged by name), a table of the session's catalog (``[source] table``;
  ``spark.table``), ``bundled = "trips"``, or a DataFrame handed to the engine
  (``SparkEngine(dataframe=df)``, then ``[source] table`` only names it).
* **CSV, from lines.**  Spark's CSV reader is not used (as DuckDB's reader was not, it
  disagreed with DuckDB on quoted line breaks and bare CRs).  ``spark.read.option("lineSep",
  "\n").text(files)`` splits at LF only, keeps CR and invalid bytes as they are and removes a
  byte order mark at the start of a file.  Under ``[source] csv = "lines"`` each line is a
  record; under ``"rfc4180"`` (the default) the lines are stitched into records by quote
  parity: a window over each file's lines, in file order (file split start, then
  ``monotonically_increasing_id``), counts the quotes, a line ends a record iff the running
  count is even, and the lines of one record are grouped and joined by LF — one task per
  file, after one shuffle of the lines by file (``csv_format``, *How the engines run it*, for
  its scale limits).  In SQL the CR is stripped, ``is_valid_utf8`` and U+FFFD test rule 2,
  the folded record is matched against the record regex and each needed field is one
  ``regexp_extract`` (the regexes of ``csv_format``, passed as literals, never as SQL
  text).  Local paths and globs are expanded
  like DuckDB's (Python's glob, sorted); the first line of every local file must be the
  header.  Paths on other file systems (``s3a://``, ``hdfs://``, or any path when
  ``fs.defaultFS`` is not local) are listed with Hadoop's ``globStatus`` (Hadoop's glob
  syntax), and only the first file's header is read.  A malformed line is the first row
  class; lines equal to the header are dropped; a record's priority hashes its line.
* **Nanosecond timestamps.**  Spark refuses a Parquet ``TIMESTAMP(NANOS)`` column (what
  pandas writes for ``datetime64[ns]``) with ``PARQUET_TYPE_ILLEGAL``, even when the spec does
  not read it.  The engine reads Parquet with ``spark.sql.legacy.parquet.nanosAsLong`` (set
  on the session for the call, then restored), which gives such a column as a LONG of
  nanoseconds since 1970.  The record priority hashes that LONG (a function of the record
  alone); a column the spec reads as more than an id (``[filter]``, domain, value) is looked
  up in the files' footers, and then read as DuckDB reads ``TIMESTAMP_NS`` /
  ``TIMESTAMPTZ_NS``: a ``[filter]`` compares nanoseconds, a time domain floors to the
  microsecond; a UTC-adjusted column is rounded to the microsecond (half away from zero, as
  DuckDB's cast to ``TIMESTAMP``) and shifted to the session's time zone; as a number it is
  invalid.  DuckDB's ±infinity (the LONGs ``±(2⁶³ − 1)``) are kept apart.  A column that is
  nanoseconds in some files and something else in others is refused in one line.  Without
  a JVM (Spark Connect) the setting is left alone.
* **The JVM off stderr.**  A session this engine starts itself launches the JVM with its
  stderr drained into memory (the last lines only, quoted if Spark fails to start): Java's
  warnings, log4j and executor stack traces never reach the terminal, and every Spark error
  surfaces as one :class:`EngineError` line.  A session given to the engine (or already
  running) keeps its own logging.  PySpark's notice that it "does not yet fully support
  pandas >= 3.0.0" (a ``FutureWarning`` at each pandas UDF, with pandas 3) is filtered, that
  one warning only: by its text, its category and its origin in ``pyspark``.
* **Parsing like DuckDB.**  Numbers are parsed from text only when they look like what
  DuckDB's ``TRY_CAST`` accepts (digits with ``_`` separators, a decimal point, an exponent,
  ``inf``/``infinity``/``nan``); Spark alone would also take ``5d`` or ``0x1p3``.  Timestamps
  likewise (``YYYY-MM-DD[ HH:MM[:SS[.fff]]]``, compared as ``TIMESTAMP_NTZ``).  ANSI mode is
  harmless: every parse is a ``try_cast``.
* **Priorities.**  ``p = xxhash64(salt, isnull(c₁), c₁, isnull(c₂), c₂, …)`` over the record
  columns: xxhash64 chains its arguments through the 64-bit seed, so the salt is mixed
  non-linearly into every column (the test checks the pair frequencies of a fixed unit over
  many salts); the ``isnull`` flags keep ``(NULL, 5)`` and ``(5, NULL)`` apart (xxhash64 skips
  NULLs).  The key priority of (unit, key) is ``xxhash64(salt, 'keys', unit, key)``.  Both
  depend on content and the salt only, never on a row's position.
* **One query over the source.**  :meth:`SparkEngine.describe` (the check before the
  charge) reads a Parquet source's schema from the footers on the driver, merged as Spark's
  ``mergeSchema`` merges them but without its Spark job (:meth:`SparkEngine._parquet`); the
  aggregation, also before the charge, is the one query that reads the records (a test
  counts the jobs and the scans).
* **One scan, one shuffle.**  Every row is classified in one projection (malformed, outside
  the filter, no unit, invalid domain, invalid value, outside the domain, in domain) and
  repartitioned once by ``pk`` — a hash of the unit for in-domain rows, of the whole row
  otherwise (so invalid rows do not pile up in one task).  Only the unit of an in-domain
  row (NULL otherwise), the priority, the key (minus the class for a row not in the
  domain) and ``pk`` cross the shuffle.  The bounds are window functions
  on that partitioning (no further exchange): ``row_number`` over (unit, key) by priority for
  c, ``dense_rank`` of the key priority over the unit for k, ``row_number`` over the unit by
  priority for b, each among the rows still kept.  One ``GROUP BY`` of the class-or-key code
  ``g`` yields the aggregate and every counter.
* **Graph domains.**  The nearest node comes from a vectorised pandas UDF calling
  :meth:`GraphMapper.nearest <dpgauss.release.domains.mapping.GraphMapper.nearest>` (the mapper is
  shipped to the executors with the UDF, so they need ``dpgauss`` installed); for ``kde``
  a second pandas UDF calls :meth:`GraphMapper.spread` on the kept rows after the bounds,
  and each kept row's (node, weight) pairs are exploded into the same ``GROUP BY``.

Sums are Spark's ``sum`` of doubles (not compensated, and in no fixed order): sums of
integer values are exactly DuckDB's (``kahan_sum``); other sums, and kde masses, may differ
in the last bits.
"""

from __future__ import annotations

import collections
import contextlib
import json
import math
import os
import re
import threading
import warnings
from collections.abc import Iterator
from datetime import datetime, timedelta
from typing import Any

import numpy as np

from ..._optional import install_hint, optional
from .. import schema
from ..domains import discovered
from ..domains.keys import INT_LITERAL, TIMESTAMP_TEXT
from ..domains.mapping import GraphMapper
from ..spec import DomainSpec, ReleaseSpec
from . import csv_format
from .base import (
    AGGREGATION_FAILED,
    DROPPED,
    IN_DOMAIN,
    INVALID_DOMAIN,
    INVALID_VALUE,
    MALFORMED,
    NULL_UNIT,
    NUMBER_TEXT,
    OUTSIDE,
    OUTSIDE_FILTER,
    SPARK,
    Aggregate,
    AggregationPlan,
    EngineError,
    collect,
    source_columns,
)
from .sql import RecordExpressions, suffix

__all__ = ["SparkEngine", "priority_column"]

#: Spark's setting that reads Parquet TIMESTAMP(NANOS) as LONG nanoseconds (Spark 3.2.4+).
NANOS_AS_LONG = "spark.sql.legacy.parquet.nanosAsLong"
# DuckDB's TIMESTAMP_NS infinity and -infinity, as LONG nanoseconds.
_INFINITIES_NS = f"(CAST('{2**63 - 1}' AS BIGINT), CAST('{-(2**63) + 1}' AS BIGINT))"
_EPOCH = datetime(1970, 1, 1)


#: PySpark 4's notice with pandas 3 (``pyspark.sql.pandas.utils.require_minimum_pandas_version``),
#: shown on stderr up to three times a release (issue #28, item 1).  Only this text, only this
#: category, only when raised on behalf of a ``pyspark`` module: every other warning is shown.
_PANDAS_NOTICE = r"PySpark does not yet fully support pandas >= 3"


def _quiet_pandas_notice() -> None:
    """Filter PySpark's pandas-3 notice (idempotent: ``filterwarnings`` replaces a duplicate)."""
    warnings.filterwarnings(
        "ignore", message=_PANDAS_NOTICE, category=FutureWarning, module=r"pyspark(\.|$)"
    )


_quiet_pandas_notice()


def _pyspark() -> Any:
    pyspark = optional("pyspark")
    if pyspark is None or optional("pyspark.sql") is None:  # the spark extra is missing
        raise EngineError(
            "the Spark engine is not available: it needs the 'spark' extra "
            f"({install_hint('spark')}) and Java 17+"
        )
    return pyspark


_ident = SPARK.ident  # ``name`` as a Spark SQL identifier (backticks)
_text = SPARK.literal  # ``value`` as a Spark SQL string literal


def _signed(salt: int) -> int:
    """The 64-bit salt as a signed ``BIGINT``."""
    return salt - 2**64 if salt >= 2**63 else salt


_JAVA_CLASS = re.compile(r"^(?:Caused by: )?(?:[A-Za-z_$][\w$]*\.)+[A-Z][\w$]*: ")


def _one_line(exc: BaseException) -> str:
    """The first meaningful lines of a Spark/Py4J error, on one line (without the Java class
    names that prefix a JVM exception's message: ``org.apache.spark.SparkException: ``)."""
    lines = []
    for raw in str(exc).splitlines():
        line = raw.strip()
        if not line or line.startswith(("at ", "An error occurred while calling", "JVM stack")):
            continue
        line = _JAVA_CLASS.sub("", line.lstrip(": "))
        if not line:
            continue
        lines.append(line)
        if len(lines) == 2:
            break
    text = " ".join(" ".join(lines).split()) or type(exc).__name__
    return text if len(text) <= 400 else text[:397] + "..."


def _internals_changed() -> tuple[type[BaseException], ...]:
    """What a call into Spark's JVM internals raises when this Spark lacks them: py4j's
    "method does not exist" and a missing attribute of a JVM object."""
    from py4j.protocol import Py4JError

    return (Py4JError, AttributeError, TypeError)


def _file_uri(path: str) -> str:
    """A local path as a ``file://`` URI for Spark, its glob characters escaped (Hadoop
    expands globs in every path it is given; these are already files)."""
    return "file://" + re.sub(r"([\\{}\[\]*?])", r"\\\1", os.path.abspath(path))


def _spark_errors() -> tuple[type[BaseException], ...]:
    errors: list[type[BaseException]] = []
    pyspark_errors = optional("pyspark.errors")
    if pyspark_errors is not None:
        errors.append(pyspark_errors.PySparkException)
    else:  # pragma: no cover - pyspark < 3.4
        from pyspark.sql.utils import AnalysisException

        errors.append(AnalysisException)
    py4j_protocol = optional("py4j.protocol")
    if py4j_protocol is not None:  # (not with Spark Connect without py4j)
        errors.append(py4j_protocol.Py4JError)
    return tuple(errors)


def _epoch_ns(when: datetime) -> int:
    """A naive datetime as nanoseconds since 1970 (exact: a datetime has microseconds)."""
    return (when - _EPOCH) // timedelta(microseconds=1) * 1000


def _micros_of_nanos(column: str, rounding: str) -> str:
    """The SQL of a LONG of nanoseconds as microseconds, exactly, in integer arithmetic:
    ``floor`` (as the DuckDB engine floors a ``TIMESTAMP_NS`` time domain) or ``round``
    (half away from zero: DuckDB's cast of ``TIMESTAMPTZ_NS`` to ``TIMESTAMP``); NULL at
    DuckDB's ±infinity.  ``div`` truncates and ``%`` takes the dividend's sign."""
    q, r = f"({column} div 1000)", f"({column} % 1000)"
    if rounding == "floor":
        step = f"CASE WHEN {r} < 0 THEN 1 ELSE 0 END"
    else:
        step = f"CASE WHEN {r} >= 500 THEN -1 WHEN {r} <= -500 THEN 1 ELSE 0 END"
    return f"CASE WHEN {column} NOT IN {_INFINITIES_NS} THEN {q} - {step} END"


def _drain(fd: int, tail: collections.deque[str]) -> None:
    """Read the JVM's stderr to its end, keeping the last lines in ``tail``."""
    with os.fdopen(fd, "rb") as stream:
        for raw in stream:
            tail.append(raw.decode("utf-8", "replace").rstrip())


def _launch_quiet_jvm(conf: Any, tail: collections.deque[str]) -> bool:
    """Start the JVM of a new session with its stderr drained into memory (module docstring,
    "The JVM off stderr"), its last lines in ``tail`` (also when it fails to start), unless a
    JVM is running already (its stderr is not ours to take): whether one was launched.

    pyspark's own ``launch_gateway`` starts it, with ``popen_kwargs`` (its documented hook
    for capturing the JVM's output); ``SparkContext._ensure_initialized`` then adopts that
    gateway, as ``SparkContext(gateway=...)`` would.  The settings in ``conf`` reach
    ``spark-submit`` as for ``builder.getOrCreate()``."""
    from pyspark import SparkContext
    from pyspark.java_gateway import launch_gateway

    if getattr(SparkContext, "_gateway", None) is not None or not hasattr(
        SparkContext, "_ensure_initialized"
    ):
        return False
    read, write = os.pipe()
    drain = threading.Thread(target=_drain, args=(read, tail), daemon=True, name="dpgauss-jvm")
    drain.start()
    try:
        gateway = launch_gateway(conf, popen_kwargs={"stderr": write})
    except BaseException:
        os.close(write)
        drain.join(timeout=5)  # the JVM has exited: its last words are in the pipe
        raise
    os.close(write)
    SparkContext._ensure_initialized(gateway=gateway, conf=conf)
    return True


def _jvm(spark: Any) -> Any:
    """The session's Py4J JVM view, or None (Spark Connect)."""
    try:
        return spark._jvm
    except Exception:
        return None


def priority_column(columns: list[str], salt: Any) -> Any:
    """The record priority ``xxhash64(salt, isnull(c₁), c₁, …)`` as a Spark ``Column``.

    ``salt`` is a ``Column`` (or a value for ``lit``) holding the salt as a signed BIGINT.
    Public for tests (the salt-mixing check evaluates many salts in one job).
    """
    from pyspark.sql import functions as sf

    args = [salt if not isinstance(salt, int) else sf.lit(_signed(salt))]
    for c in columns:
        col = sf.col(_ident(c))
        args += [col.isNull(), col]
    return sf.xxhash64(*args)


class SparkEngine:
    """Runs the bounded aggregation of a release on Spark.

    Parameters
    ----------
    spark
        The ``SparkSession`` to run in.  Default: the active session, else (or when
        ``master`` or ``config`` is given) ``SparkSession.builder.getOrCreate()`` with
        ``master``, ``app_name`` and ``config``; the master and settings not given here come
        from ``spark-submit``, ``PYSPARK_SUBMIT_ARGS`` or ``spark-defaults.conf``.
    dataframe
        A DataFrame to aggregate instead of reading ``[source]`` (whose ``table`` then only
        names it; a ``path`` or ``bundled`` source is an error, so that a spec is never
        silently ignored).  Its session is used.
    master, app_name, config
        For a session this engine creates: the master URL (e.g. ``"local[4]"``), the
        application name and extra settings (``{"spark.executor.memory": "8g"}``).
    """

    name = "spark"

    def __init__(
        self,
        spark: Any = None,
        *,
        dataframe: Any = None,
        master: str | None = None,
        app_name: str = "dpgauss release",
        config: dict[str, str] | None = None,
    ) -> None:
        _pyspark()
        from pyspark.sql import DataFrame, SparkSession

        if dataframe is not None and not isinstance(dataframe, DataFrame):
            raise TypeError(f"dataframe must be a Spark DataFrame; got {type(dataframe).__name__}")
        if spark is not None and not isinstance(spark, SparkSession):
            raise TypeError(f"spark must be a SparkSession; got {type(spark).__name__}")
        if config is not None and not isinstance(config, dict):
            raise TypeError(f"config must be a dict of Spark settings; got {config!r}")
        self._spark = spark if spark is not None else getattr(dataframe, "sparkSession", None)
        self._dataframe = dataframe
        #: (the spec's text, what :meth:`_prepared` gave for it): the last source prepared
        self._prepared_for: tuple[str, Any] | None = None
        self.master = master
        self.app_name = app_name
        self.config = dict(config or {})

    # --------------------------------------------------------------------- session

    @property
    def spark(self) -> Any:
        """The session (created on first use)."""
        if self._spark is None:
            from pyspark.sql import SparkSession

            if self.master is None and not self.config:
                self._spark = SparkSession.getActiveSession()
                if self._spark is not None:
                    return self._spark
            from pyspark import SparkConf

            # No console progress bar: its stage and task counts depend on the data's size.
            settings = {"spark.app.name": self.app_name, "spark.ui.showConsoleProgress": "false"}
            if self.master is not None:
                settings["spark.master"] = self.master
            settings.update(self.config)
            builder = SparkSession.builder
            for key, value in settings.items():
                builder = builder.config(key, value)
            tail: collections.deque[str] = collections.deque(maxlen=40)
            try:
                conf = SparkConf()
                for key, value in settings.items():
                    conf.set(key, value)
                _launch_quiet_jvm(conf, tail)
                self._spark = builder.getOrCreate()
            except (*_spark_errors(), RuntimeError, OSError) as exc:  # type: ignore[misc]  # mypy: a starred tuple of classes
                # the JVM's (or spark-class's) last words, e.g. "…/bin/java: No such file"
                said = "; ".join(line.strip() for line in list(tail)[-2:] if line.strip())
                why = _one_line(exc) + (f" ({said[:300]})" if said else "")
                raise EngineError(
                    f"cannot start Spark (is Java 17+ installed, JAVA_HOME set?): {why}"
                ) from None
        return self._spark

    # ---------------------------------------------------------------------- source

    def _read(self, spec: ReleaseSpec) -> tuple[Any, list[str], tuple[str, str] | None]:
        """(DataFrame, the source's columns, for CSV the (line, malformed) columns or None).

        A Parquet source read with the JVM leaves its files' footers in ``self._footers``
        (:meth:`_parquet`), for :meth:`_nanos`; otherwise that is None."""
        self._footers: list[Any] | None = None
        src = spec.source
        if self._dataframe is not None:
            if src.table is None:
                raise EngineError(
                    "this SparkEngine aggregates the DataFrame it was given: the spec's "
                    "[source] must be a table = '<name>' (the name only labels the release)"
                )
            return self._dataframe, list(self._dataframe.columns), None
        spark = self.spark
        fmt = src.file_format
        if fmt is None:
            if src.database is not None:
                raise EngineError(
                    "[source] database is a DuckDB file; the Spark engine reads tables from "
                    "the session's catalog (drop database, or use --engine duckdb)"
                )
            df = spark.table(str(src.table))
            return df, list(df.columns), None
        if fmt == "csv":
            return self._read_csv(spec)
        paths = list(src.paths)
        if src.bundled is not None:
            paths = ["file://" + p for p in paths]
        if _jvm(spark) is not None:
            try:
                df, self._footers = self._parquet(paths)
                return df, list(df.columns), None
            except _internals_changed():
                # Spark internals _parquet calls are not public API: a Spark 4 release
                # without them takes Spark's own schema job (the same schema, one more pass)
                self._footers = None
        # Spark Connect (no JVM here), or internals changed: Spark's own schema job
        df = spark.read.option("mergeSchema", "true").parquet(*paths)
        return df, list(df.columns), None

    def _parquet(self, paths: list[str]) -> tuple[Any, list[Any]]:
        """The Parquet files of ``paths`` as a DataFrame of their merged schema, and their
        footers (``org.apache.parquet.hadoop.Footer``, without row groups), read once.

        Spark's ``mergeSchema`` runs a Spark job over every file's footer before the job
        that reads the records.  Here the driver reads the footers instead (Spark's
        ``ParquetFileFormat.readParquetFootersInParallel``, a thread pool, as
        :meth:`_nanos` did), converts each with Spark's converter under the session's
        settings (``readSchemaFromFooter``: the Spark schema a Spark writer stored, else
        the Parquet schema) and merges them in file order with ``StructType.merge`` under
        ``spark.sql.caseSensitive``: what ``mergeSchemasInParallel`` computes, without a
        job.  The files are those Spark lists for ``paths`` (the file index of a DataFrame
        read with an empty schema: listing only, no footer), in its order; the DataFrame is
        then read with the merged schema (partition columns, if its listing finds any, are
        Spark's as before).  The only Spark job over the source is the aggregation's."""
        from pyspark.sql import types as spt

        spark = self.spark
        jvm, conf = _jvm(spark), spark._jsc.hadoopConfiguration()
        listing = spark.read.schema(spt.StructType([])).parquet(*paths)
        # the files of Spark's listing (its file index), in its order: the order the
        # schema job would merge them in
        statuses = listing._jdf.queryExecution().analyzed().relation().location().allFiles()
        scala = jvm.scala.jdk.javaapi.CollectionConverters
        files = [str(st.getPath().toString()) for st in scala.asJava(statuses)]
        if not files:
            raise EngineError(f"cannot read the source: no Parquet file in {paths[:3]}")
        parquet = jvm.org.apache.spark.sql.execution.datasources.parquet
        module = getattr(getattr(parquet, "ParquetFileFormat$"), "MODULE$")
        sql_conf = spark._jsparkSession.sessionState().conf()
        read = module.readParquetFootersInParallel(
            conf,
            statuses,
            bool(sql_conf.ignoreCorruptFiles()),
            bool(sql_conf.ignoreMissingFiles()),
        )
        by_path = {str(f.getFile().toString()): f for f in scala.asJava(read)}
        footers = [by_path[f] for f in files if f in by_path]
        if not footers:
            raise EngineError(f"cannot read the source: no readable Parquet file in {paths[:3]}")
        converter = parquet.ParquetToSparkSchemaConverter(sql_conf)
        case_sensitive = bool(sql_conf.caseSensitiveAnalysis())
        merged: Any = None
        for footer in footers:
            one = module.readSchemaFromFooter(footer, converter)
            merged = one if merged is None else merged.merge(one, case_sensitive)
        schema = spt.StructType.fromJson(json.loads(str(merged.json())))
        return spark.read.schema(schema).parquet(*paths), footers

    def _typed(
        self,
        spec: ReleaseSpec,
        df: Any,
        names: list[str],
        csv: tuple[str, str] | None,
        nanos: dict[str, bool],
    ) -> tuple[Any, list[str], tuple[str, str] | None]:
        """What :meth:`_read` gave, and with ``[source] types`` (:mod:`dpgauss.release.schema`)
        the declared columns only, each converted value by value to its declared type as the
        DuckDB engine converts it (a source column whose type cannot hold it is refused,
        before any record is read; a nanosecond column, ``nanos``, is ``timestamp_ns``)."""
        declared = spec.source.types
        if declared is None:
            return df, names, csv
        fields = {f.name: f.dataType for f in df.schema.fields}
        if csv is not None:  # the CSV relation holds the columns the release reads
            physical = dict.fromkeys(names, "string")
        else:
            physical = {
                n: "timestamp_ns" if n in nanos else fields[n].simpleString() for n in names
            }
        schema.check(declared, physical, lambda t: _family(t))
        keep = [c for c in declared if csv is None or c in source_columns(spec)]
        cols = [f"{_conversion(_ident(c), fields[c], declared[c])} AS {_ident(c)}" for c in keep]
        if csv is not None:
            cols += [_ident(c) for c in csv]
        return df.selectExpr(*cols), keep, csv

    # -------------------------------------------------------- Parquet nanoseconds

    @contextlib.contextmanager
    def _parquet_settings(self, spec: ReleaseSpec) -> Iterator[bool]:
        """For a Parquet source read by this engine: ``spark.sql.legacy.parquet.nanosAsLong``
        on for the call (reading the schema and running the job), the session's own value
        restored after; yields whether it is on.  Left alone without a JVM (Spark Connect:
        the footers cannot be read, so a nanosecond column stays refused by Spark)."""
        if (
            self._dataframe is not None
            or spec.source.file_format != "parquet"
            or _jvm(self.spark) is None
        ):
            yield False
            return
        conf = self.spark.conf
        before = conf.get(NANOS_AS_LONG, None)
        conf.set(NANOS_AS_LONG, "true")
        try:
            yield True
        finally:
            if before is None:
                conf.unset(NANOS_AS_LONG)
            else:
                conf.set(NANOS_AS_LONG, before)

    def _footer(self, uri: str) -> Any:
        """One Parquet file's footer (``ParquetMetadata``), read on the driver through
        parquet-hadoop's public reader (the route when :meth:`_parquet` could not be used)."""
        jvm, conf = _jvm(self.spark), self.spark._jsc.hadoopConfiguration()
        parquet = jvm.org.apache.parquet.hadoop
        reader = parquet.ParquetFileReader.open(
            parquet.util.HadoopInputFile.fromPath(jvm.org.apache.hadoop.fs.Path(uri), conf)
        )
        try:
            return reader.getFooter()
        finally:
            reader.close()

    def _nanos(self, spec: ReleaseSpec, df: Any) -> dict[str, bool]:
        """The columns read as LONG nanoseconds that the spec reads as more than an id (the
        ``[filter]``, domain and value columns) → whether UTC-adjusted.

        Spark's schema says LONG for both an integer and a ``TIMESTAMP(NANOS)``; the
        files' footers tell them apart (those :meth:`_parquet` read for the schema: no file
        is opened again).  The unit and ``record_columns`` need no look-up: equal
        LONGs are equal timestamps.  A column of several types across the files is refused
        (DuckDB cannot read such files together either)."""
        from pyspark.sql import types as spt

        typed = [*spec.domain.columns]
        if spec.filter is not None:
            typed.append(spec.filter.column)
        if spec.statistic.column is not None:
            typed.append(spec.statistic.column)
        longs = {f.name for f in df.schema.fields if isinstance(f.dataType, spt.LongType)}
        wanted = [c for c in dict.fromkeys(str(c) for c in typed) if c in longs]
        if not wanted:
            return {}
        if self._footers is not None:  # read once, by _parquet
            metadata = [footer.getParquetMetadata() for footer in self._footers]
        else:  # Spark's own schema job read them: open each file's footer on the driver
            metadata = [self._footer(uri) for uri in df.inputFiles()]

        def kinds(meta: Any) -> dict[str, str]:
            schema = meta.getFileMetaData().getSchema()
            out = {}
            for c in wanted:
                if not schema.containsField(c):
                    continue  # a column this file lacks: NULL (mergeSchema)
                field = schema.getType(c)
                ann = field.getLogicalTypeAnnotation() if field.isPrimitive() else None
                out[c] = {"TIMESTAMP(NANOS,false)": "ns", "TIMESTAMP(NANOS,true)": "utc"}.get(
                    "" if ann is None else str(ann.toString()), "long"
                )
            return out

        found = [kinds(meta) for meta in metadata]
        labels = {
            "ns": "a nanosecond timestamp (TIMESTAMP(NANOS))",
            "utc": "a UTC-adjusted nanosecond timestamp (TIMESTAMP(NANOS, UTC))",
            "long": "an integer",
        }
        nanos: dict[str, bool] = {}
        for c in wanted:
            seen = {k[c] for k in found if c in k}
            if not seen & {"ns", "utc"}:
                continue
            if len(seen) > 1:
                shown = " in some files, ".join(sorted(labels[k] for k in seen))
                raise EngineError(
                    f"column {c!r} is {shown} in others: the Spark engine reads a column the "
                    "spec uses only with one type in every file (rewrite the files alike)"
                )
            nanos[c] = "utc" in seen
        return nanos

    # ------------------------------------------------------------------------ CSV

    def _local(self, pattern: str) -> bool:
        """Whether Spark reads ``pattern`` from the local file system."""
        if pattern.lower().startswith("file:"):
            return True
        if csv_format.is_remote(pattern):
            return False
        try:  # a path without a scheme is on the default file system
            default = self.spark._jsc.hadoopConfiguration().get("fs.defaultFS")
        except Exception:  # no JVM (Spark Connect): only local files
            return True
        return default is None or str(default).lower().startswith("file:")

    def _csv_layout(self, spec: ReleaseSpec) -> tuple[list[str], tuple[str, ...], bytes | None]:
        """(file URIs, column names, header line or None) of a CSV source (csv_format)."""
        version = str(self.spark.version)
        if int(version.split(".")[0]) < 4:  # is_valid_utf8 is Spark 4's
            raise EngineError(
                f"CSV sources need Spark 4.0 or later on the Spark engine (this is {version}); "
                "use Parquet, or --engine duckdb"
            )
        src = spec.source
        patterns = list(src.paths)
        try:
            if src.bundled is not None or all(self._local(p) for p in patterns):
                files, names, header = csv_format.local_source(
                    patterns, src.delimiter, src.header, src.columns, mode=src.csv
                )
                return [_file_uri(f) for f in files], names, header
            uris = self._hadoop_files(patterns)
            if not src.header:
                return uris, csv_format.resolve_columns(None, src.columns, ""), None
            line = self._hadoop_first_record(uris[0], src.csv)
            found = csv_format.parse_header(line, src.delimiter, uris[0])
            assert line is not None
            return uris, csv_format.resolve_columns(found, src.columns, uris[0]), line
        except csv_format.CsvError as exc:
            raise EngineError(f"cannot read the source: {_one_line(exc)}") from None

    def _hadoop_files(self, patterns: list[str]) -> list[str]:
        """The files matching ``patterns`` (Hadoop globs), sorted, as URIs."""
        jvm, conf = self.spark._jvm, self.spark._jsc.hadoopConfiguration()
        found: set[str] = set()
        for pattern in patterns:
            path = jvm.org.apache.hadoop.fs.Path(pattern)
            statuses = path.getFileSystem(conf).globStatus(path) or []
            files = [str(st.getPath().toString()) for st in statuses if st.isFile()]
            if not files:
                raise csv_format.CsvError(f"no file matches {pattern!r}")
            found.update(files)
        return sorted(found)

    def _hadoop_first_record(
        self, uri: str, mode: str = "lines", limit: int = 1 << 24
    ) -> bytes | None:
        """The first record text (in ``mode``) of a file on a Hadoop file system (rule 1), or
        None if it has no lines: its lines up to the first whose LF ends a record."""
        what = "line" if csv_format.check_mode(mode) == "lines" else "record"
        jvm, conf = self.spark._jvm, self.spark._jsc.hadoopConfiguration()
        path = jvm.org.apache.hadoop.fs.Path(uri)
        stream = path.getFileSystem(conf).open(path)
        codec = jvm.org.apache.hadoop.io.compress.CompressionCodecFactory(conf).getCodec(path)
        if codec is not None:
            stream = codec.createInputStream(stream)
        reader = jvm.org.apache.hadoop.util.LineReader(stream, bytearray(b"\n"))
        parts: list[bytes] = []
        size = quotes = 0
        try:
            text = jvm.org.apache.hadoop.io.Text()
            while True:
                consumed = int(reader.readLine(text, limit + 4, limit + 4))
                raw = bytes(text.copyBytes())
                if not parts and raw.startswith(csv_format.BOM):  # as LineRecordReader
                    raw, consumed = raw[len(csv_format.BOM) :], consumed - len(csv_format.BOM)
                if consumed <= 0:
                    break
                parts.append(raw)
                size += len(raw) + 1
                if size > limit + 1:
                    raise csv_format.CsvError(
                        f"{uri}: the first {what} is longer than {limit} bytes"
                    )
                quotes += raw.count(b'"')
                if mode == "lines" or quotes % 2 == 0:
                    break
        finally:
            reader.close()
        if not parts:
            return None
        record = b"\n".join(parts)
        return record[:-1] if record.endswith(b"\r") else record

    def _hadoop_first_line(self, uri: str, limit: int = 1 << 24) -> bytes | None:
        """The first line of a file on a Hadoop file system (rule 1), or None if it has none."""
        return self._hadoop_first_record(uri, "lines", limit)

    def _read_csv(self, spec: ReleaseSpec) -> tuple[Any, list[str], tuple[str, str]]:
        """The records of a CSV source (csv_format): the needed columns as text, the line and
        its malformed flag."""
        from pyspark.sql import functions as sf

        src = spec.source
        uris, names, header = self._csv_layout(spec)
        wanted = source_columns(spec)
        for col in wanted:
            if col not in names:
                shown = ", ".join(names[:30]) + (", ..." if len(names) > 30 else "")
                raise EngineError(
                    f"column {col!r} is not a column of the source (columns: {shown})"
                )
        d, n, mode = src.delimiter, len(names), src.csv
        if mode == "rfc4180":
            lines = self._records(uris)
        else:
            lines = self.spark.read.option("lineSep", "\n").text(uris)
        v = sf.col("value")
        if header is not None:  # every record equal to the header is no record (rule 5)
            text = header.decode("utf-8")
            lines = lines.filter((v != sf.lit(text)) & (v != sf.lit(text + "\r")))
        line = sf.when(v.endswith("\r"), sf.expr("substr(value, 1, length(value) - 1)"))
        lines = lines.select(v, line.otherwise(v).alias("l"))
        folded = sf.expr(csv_format.fold_sql("l", mode))
        bad = (
            ~sf.expr("is_valid_utf8(value)")
            | v.contains(csv_format.REPLACEMENT)
            | ~folded.rlike(csv_format.folded_record_regex(d, n, mode=mode))
        )
        lines = lines.select("l", bad.alias("bad"), folded.alias("f"))
        groups = [
            sf.when(
                ~sf.col("bad"),
                sf.regexp_extract(
                    "f", csv_format.folded_record_regex(d, n, [names.index(c)], mode), 1
                ),
            ).alias(f"g{j}")
            for j, c in enumerate(wanted)
        ]
        lines = lines.select("l", "bad", *groups)
        line_col, bad_col = "__dp_line__", "__dp_malformed__"
        while line_col in names:
            line_col += "_"
        while bad_col in names:
            bad_col += "_"
        df = lines.select(
            *[
                sf.expr(csv_format.unquote_sql(f"g{j}", mode)).alias(c)
                for j, c in enumerate(wanted)
            ],
            sf.col("l").alias(line_col),
            sf.col("bad").alias(bad_col),
        )
        return df, list(names), (line_col, bad_col)

    def _records(self, uris: list[str]) -> Any:
        """The rfc4180 record texts of ``uris`` as a column ``value`` (rule 1, before the CR
        strip): the lines of the text reader stitched by quote parity.

        A line's place in its file is (``_metadata.file_block_start``, the start of its file
        split; ``monotonically_increasing_id()``, increasing in the order a split is read), so
        ``W`` = the lines of a file in that order.  With ``q`` a line's quotes, the line ends a
        record iff ``Σ_W q`` up to it is even, and its record index ``r`` is the number of
        record ends before it in ``W``.  The window partitions by file, and the grouping by
        (file, ``r``) reuses that partitioning (no second shuffle); each record's lines are
        joined by LF in their order (``array_sort`` of (split start, id, line))."""
        from pyspark.sql import Window
        from pyspark.sql import functions as sf

        lines = self.spark.read.option("lineSep", "\n").text(uris)
        lines = lines.select(
            sf.col("_metadata.file_path").alias("f"),
            sf.col("_metadata.file_block_start").alias("b"),
            sf.monotonically_increasing_id().alias("i"),
            sf.col("value").alias("v"),
        )
        quotes = sf.expr("octet_length(v) - octet_length(replace(v, '\"', ''))")
        w = Window.partitionBy("f").orderBy("b", "i")
        upto = w.rowsBetween(Window.unboundedPreceding, Window.currentRow)
        before = w.rowsBetween(Window.unboundedPreceding, -1)
        ends = (sf.sum(quotes % 2).over(upto) % 2 == 0).cast("long")
        lines = lines.withColumn("e", ends)
        lines = lines.withColumn("r", sf.coalesce(sf.sum("e").over(before), sf.lit(0)))
        parts = sf.array_sort(sf.collect_list(sf.struct("b", "i", "v")))
        text = sf.array_join(sf.transform(parts, lambda x: x["v"]), "\n")
        return lines.groupBy("f", "r").agg(text.alias("value")).select("value")

    def describe(self, spec: ReleaseSpec) -> dict[str, str]:
        """Column name → Spark type of the source (reads the schema or a CSV header only).

        For CSV: every column is ``string``; the names come from the header (of the first
        file; every local file's first line must be that header) or ``[source] columns``.
        A Parquet ``TIMESTAMP(NANOS)`` column is ``bigint`` (nanoseconds since 1970)."""
        if self._dataframe is None and spec.source.file_format == "csv":
            physical = dict.fromkeys(self._csv_layout(spec)[1], "string")
            if spec.source.types is None:
                return physical
            schema.check(spec.source.types, physical, _family)
            return {c: schema.DUCKDB_TYPES[t] for c, t in spec.source.types.items()}
        try:
            with self._parquet_settings(spec) as on:
                # refuses a column of several types, before a charge
                df, names, _, _ = self._prepared(spec, on, reuse=False)
                types = {f.name: f.dataType.simpleString() for f in df.schema.fields}
        except _spark_errors() as exc:
            raise EngineError(f"cannot read the source: {_one_line(exc)}") from None
        return {n: types[n] for n in names}

    def _prepared(
        self, spec: ReleaseSpec, parquet_nanos: bool, *, reuse: bool
    ) -> tuple[Any, list[str], tuple[str, str] | None, dict[str, bool]]:
        """The source read and typed (:meth:`_read`, :meth:`_nanos` when ``parquet_nanos``,
        :meth:`_typed`).  :meth:`describe` (the checks before the charge) prepares it and
        keeps it; the :meth:`aggregate` of the same spec right after (``reuse``) takes it
        instead of reading the schema, the Parquet footers and the nanosecond look-ups
        again, and drops it: nothing is kept beyond one describe → aggregate pair, so a
        later release of the same path reads the files anew."""
        key = json.dumps(spec.to_dict(), sort_keys=True, default=str)
        kept, self._prepared_for = self._prepared_for, None
        if reuse and kept is not None and kept[0] == key:
            return kept[1]
        df, names, csv = self._read(spec)
        nanos = self._nanos(spec, df) if parquet_nanos else {}
        df, names, csv = self._typed(spec, df, names, csv, nanos)
        if not reuse:
            self._prepared_for = (key, (df, names, csv, nanos))
        return df, names, csv, nanos

    # ------------------------------------------------------------------- aggregate

    def aggregate(self, plan: AggregationPlan) -> Aggregate:
        """The bounded aggregate of ``plan`` (semantics: :mod:`dpgauss.release.engines.base`)."""
        try:
            with self._parquet_settings(plan.spec) as on:
                df, names, csv, nanos = self._prepared(plan.spec, on, reuse=True)
                if plan.domain.kind == discovered.KIND:
                    job = _Job(plan, df, names, csv, nanos).build_discovered()
                    found = [tuple(r) for r in job.collect()]
                    return discovered.collect_discovered(plan, found)
                job = _Job(plan, df, names, csv, nanos).build()
                rows = [tuple(r) for r in job.collect()]
        except _spark_errors() as exc:
            raise EngineError(AGGREGATION_FAILED, f"spark: {_one_line(exc)}") from None
        spread = plan.domain.spread
        groups = [
            (g, n, units, nc, nk, None if spread else s) for g, n, units, nc, nk, s, _ in rows
        ]
        # kde: the mass and the weighted sum of each node, collected in the same rows
        masses = [(g, mass, s) for g, _, _, _, _, s, mass in rows if int(g) >= 0]
        return collect(plan, groups, masses if spread else None)


# ------------------------------------------------------------------ declared types

#: Each declared type (:mod:`dpgauss.release.schema`) as a Spark SQL type.
_SPARK_TYPES = {
    "int8": "TINYINT",
    "int16": "SMALLINT",
    "int32": "INT",
    "int64": "BIGINT",
    "float64": "DOUBLE",
    "string": "STRING",
    "bool": "BOOLEAN",
    "date": "DATE",
    "timestamp": "TIMESTAMP_NTZ",
}


def _family(t: Any) -> str:
    """The :func:`dpgauss.release.schema.duckdb_family` of a Spark type (a ``DataType`` or
    its ``simpleString``).  Spark's ``timestamp`` (with the session's time zone) is
    ``other``, as DuckDB's ``TIMESTAMP WITH TIME ZONE`` is."""
    name = t if isinstance(t, str) else t.simpleString()
    name = name.lower()
    if name in ("tinyint", "smallint", "int", "bigint"):
        return "int"
    m = re.fullmatch(r"decimal\((\d+),(\d+)\)", name)
    if m:
        return "decimal0" if int(m.group(2)) == 0 else "decimal"
    return {
        "boolean": "bool",
        "float": "float32",
        "double": "float64",
        "string": "string",
        "date": "date",
        "timestamp_ntz": "timestamp",
        "timestamp_ns": "timestamp_ns",  # a Parquet TIMESTAMP(NANOS) read as nanoseconds
        "void": "null",
    }.get(name, "other" if not name.startswith(("varchar", "char")) else "string")


def _conversion(c: str, t: Any, declared: str) -> str:
    """Spark SQL of one declared column read from a source column of Spark type ``t``: the
    same values, row by row, as :func:`dpgauss.release.schema.duckdb_conversion`."""
    how = schema.rule(_family(t), declared)
    if declared not in _SPARK_TYPES:
        raise EngineError(
            f"[source] types: the Spark engine does not read {declared!r} columns "
            "(unsigned and nanosecond types are DuckDB's): use --engine duckdb"
        )
    target = _SPARK_TYPES[declared]
    if how == "null":
        return f"CAST(NULL AS {target})"
    if how == "same":
        return c
    if how == "cast":
        return f"try_cast({c} AS {target})"
    assert how == "text"
    if declared in schema.INTEGERS:
        return (
            f"CASE WHEN {c} RLIKE {_text(INT_LITERAL)} "
            f"THEN try_cast(try_cast(replace({c}, '_', '') AS DECIMAL(38, 0)) AS {target}) END"
        )
    if declared == "float64":
        x = f"try_cast(replace({c}, '_', '') AS DOUBLE)"
        return (
            f"CASE WHEN {c} RLIKE {_text(NUMBER_TEXT)} AND NOT (isnan({x}) OR abs({x}) = "
            f"double('inf')) THEN {x} END"
        )
    if declared == "bool":
        return f"CASE lower({c}) WHEN 'true' THEN true WHEN 'false' THEN false END"
    grammar = schema.DATE_TEXT if declared == "date" else TIMESTAMP_TEXT
    return f"CASE WHEN {c} RLIKE {_text(grammar)} THEN try_cast({c} AS {target}) END"


# ---------------------------------------------------------------------------- the job


def sql_type(t: Any, nanos: bool = False) -> str:
    """A Spark type in the vocabulary of :mod:`dpgauss.release.engines.sql` (DuckDB's type
    names): how the engine-neutral expressions read the column.  A LONG of nanoseconds
    (``nanos``, a Parquet ``TIMESTAMP(NANOS)``) is DuckDB's ``TIMESTAMP_NS``; Spark's
    ``timestamp`` (with the session's time zone) is ``TIMESTAMP WITH TIME ZONE``."""
    from pyspark.sql import types as spt

    if nanos:
        return "TIMESTAMP_NS"
    if isinstance(t, spt.DecimalType):
        return f"DECIMAL({int(t.precision)},{int(t.scale)})"
    if isinstance(t, spt.StringType | spt.VarcharType | spt.CharType):
        return "VARCHAR"
    names = (
        (spt.ByteType, "TINYINT"),
        (spt.ShortType, "SMALLINT"),
        (spt.IntegerType, "INTEGER"),
        (spt.LongType, "BIGINT"),
        (spt.BooleanType, "BOOLEAN"),
        (spt.FloatType, "FLOAT"),
        (spt.DoubleType, "DOUBLE"),
        (spt.DateType, "DATE"),
        (spt.TimestampNTZType, "TIMESTAMP"),
        (spt.TimestampType, "TIMESTAMP WITH TIME ZONE"),
    )
    for cls, name in names:
        if isinstance(t, cls):
            return name
    return str(t.simpleString()).upper()


class _Job(RecordExpressions):
    """Builds the one Spark job of an aggregation (module docstring for the design)."""

    def __init__(
        self,
        plan: AggregationPlan,
        df: Any,
        names: list[str],
        csv: tuple[str, str] | None,
        nanos: dict[str, bool] | None = None,
    ):
        from pyspark.sql import types as spt

        self.nanos = dict(nanos or {})  # LONG nanosecond columns → UTC-adjusted (_nanos)
        self.df = df
        self.names = names
        self.csv = csv
        self.types = {f.name: f.dataType for f in df.schema.fields}
        self.spt = spt
        sql_types = {n: sql_type(t, n in self.nanos) for n, t in self.types.items()}
        super().__init__(SPARK, plan, sql_types)

    # ------------------------------------------------------------ parsing (SQL text)

    def _is(self, column: str, *kinds: str) -> bool:
        spt = self.spt
        classes = {
            "string": (spt.StringType, spt.VarcharType, spt.CharType),
            "integral": (spt.ByteType, spt.ShortType, spt.IntegerType, spt.LongType),
            "number": (spt.NumericType, spt.BooleanType),
            "ts_ntz": (spt.TimestampNTZType,),
            "ts": (spt.TimestampType, spt.DateType),
            "nanos": (),  # _nanos' columns, by name
        }
        if column in self.nanos:  # a LONG of nanoseconds is a timestamp, not a number
            return "nanos" in kinds
        t = self.types.get(column)
        return any(isinstance(t, classes[k]) for k in kinds)

    def _double(self, column: str) -> str:
        """``TRY_CAST(column AS DOUBLE)`` as DuckDB parses it."""
        c = _ident(column)
        if self._is(column, "string"):
            return SPARK.text_double(c)
        if self._is(column, "number"):
            return f"try_cast({c} AS DOUBLE)"
        return "CAST(NULL AS DOUBLE)"

    def _timestamp(self, column: str) -> str:
        c = _ident(column)
        if self._is(column, "nanos"):  # as DuckDB casts TIMESTAMP[TZ]_NS to TIMESTAMP
            us = _micros_of_nanos(c, "round")
            return f"CAST(timestamp_micros({us}) AS TIMESTAMP_NTZ)"
        if self._is(column, "string"):
            ok = f"{c} RLIKE {_text(TIMESTAMP_TEXT)}"
            return f"CASE WHEN {ok} THEN try_cast({c} AS TIMESTAMP_NTZ) END"
        if self._is(column, "ts_ntz"):
            return c
        if self._is(column, "ts"):
            return f"CAST({c} AS TIMESTAMP_NTZ)"
        return "CAST(NULL AS TIMESTAMP_NTZ)"

    def _out_filter(self) -> str:
        f = self.spec.filter
        if f is None:
            return "false"
        if f.kind == "timestamp" and f.column in self.nanos:
            return self._out_filter_nanos()
        if f.kind == "timestamp":
            x = self._timestamp(f.column)
            lit = "CAST({} AS TIMESTAMP_NTZ)"
            ends = {k: f.bound(k) for k in ("start", "stop")}
            text = {
                k: _text(v.isoformat(sep=" ")) for k, v in ends.items() if isinstance(v, datetime)
            }
        else:
            x = self._double(f.column)
            lit = "CAST({} AS DOUBLE)"
            text = {
                k: _text(repr(float(v)))
                for k in ("start", "stop")
                if isinstance(v := f.bound(k), float)
            }
        conds = []
        if "start" in text:
            conds.append(f"({x}) >= {lit.format(text['start'])}")
        if "stop" in text:
            conds.append(f"({x}) < {lit.format(text['stop'])}")
        return f"NOT coalesce({' AND '.join(conds)}, false)"

    def _out_filter_nanos(self) -> str:
        """The condition "outside the window" on a LONG nanosecond column, as DuckDB's.

        Without a time zone DuckDB compares ``TIMESTAMP_NS`` in nanoseconds (so 00:59:59.9999999
        is outside a window from 01:00): here the LONG against the bounds' nanoseconds, in
        DECIMAL (exact, also for bounds beyond the LONG's years 1677–2262, where DuckDB's
        cast of the bound fails).  UTC-adjusted, DuckDB casts to ``TIMESTAMP`` (rounded to
        the microsecond, in the session's zone), and so does :meth:`_timestamp`; its
        ±infinity, beyond every bound, is inside a window open on that side."""
        f = self.spec.filter
        assert f is not None
        c = _ident(f.column)
        ends = {k: v for k in ("start", "stop") if isinstance(v := f.bound(k), datetime)}
        if not self.nanos[f.column]:
            x = f"CAST({c} AS DECIMAL(20, 0))"
            ns = {k: f"CAST('{_epoch_ns(v)}' AS DECIMAL(38, 0))" for k, v in ends.items()}
            conds = [f"{x} >= {ns['start']}"] if "start" in ns else []
            conds += [f"{x} < {ns['stop']}"] if "stop" in ns else []
            return f"NOT coalesce({' AND '.join(conds)}, false)"
        x = self._timestamp(f.column)
        ts = {k: f"CAST({_text(v.isoformat(sep=' '))} AS TIMESTAMP_NTZ)" for k, v in ends.items()}
        conds = [f"({x}) >= {ts['start']}"] if "start" in ts else []
        conds += [f"({x}) < {ts['stop']}"] if "stop" in ts else []
        pos, neg = (f"CAST('{v}' AS BIGINT)" for v in (2**63 - 1, -(2**63) + 1))
        inside = (
            f"CASE WHEN {c} = {pos} THEN {'stop' not in ends} "
            f"WHEN {c} = {neg} THEN {'start' not in ends} "
            f"ELSE coalesce({' AND '.join(conds)}, false) END"
        )
        return f"NOT coalesce({inside}, false)"

    def _time_micros(self, column: str) -> str:
        c = _ident(column)
        if self.nanos.get(column) is False:
            # floored to the microsecond, as DuckDB's TIMESTAMP_NS (a cast would round up
            # into the next bin)
            return _micros_of_nanos(c, "floor")
        ts = self._timestamp(column)
        return f"timestampdiff(MICROSECOND, TIMESTAMP_NTZ'1970-01-01 00:00:00', {ts})"

    def _key(self, checked: Any) -> Any:
        """``checked`` with the column ``key``: the composite key ``Σ kᵢ·sᵢ`` of the axes
        (:mod:`dpgauss.release.domains.key_domain`), NULL when any axis maps the record to
        nothing."""
        from pyspark.sql import functions as sf

        axes = self.spec.domain.axes
        sizes = [a.size for a in self.plan.domain.axes]
        total = None
        for i, part in enumerate(axes):
            name = f"__dp_k{i}"
            if part.kind == "range":
                checked = checked.withColumn(name, sf.expr(self._range_key(i, part)))
            elif part.matches:
                checked = self._join_values(checked, i, part, name)
            else:
                checked = self._nearest(checked, i, name)
            stride = math.prod(sizes[i + 1 :])
            term = sf.col(name).cast("long") * sf.lit(stride).cast("long")
            total = term if total is None else total + term
        names = [f"__dp_k{i}" for i in range(len(axes))]
        return checked.withColumn("key", total).drop(*names)

    # -------------------------------------------------------------------- the plan

    def build(self) -> Any:
        """The DataFrame of ``(g, n, units, n_c, n_k, s, mass)`` rows to collect."""
        from pyspark.sql import Window
        from pyspark.sql import functions as sf

        spec, dom, plan = self.spec, self.plan.domain, self.plan
        unit = spec.unit.column
        u_value, bad_u = self._unit()
        d_parsed, bad_d = self._domain_parse()
        v_parsed, bad_v, value = self._value_parse()
        salt = sf.lit(_signed(int(plan.salt)))
        # A CSV record's content is its line (csv_format, rule 6).
        whole = priority_column([self.csv[0]] if self.csv else self.names, salt)
        record_cols = spec.bounds.record_columns
        if record_cols is None:
            p = whole
        else:
            wanted = [*record_cols, unit, *spec.domain.columns]
            if spec.statistic.column is not None:
                wanted.append(spec.statistic.column)
            p = priority_column(list(dict.fromkeys(wanted)), salt)
        malformed = sf.lit(False)
        if self.csv is not None:
            malformed = sf.col(_ident(self.csv[1]))

        # 1. Parse (one projection over the source).
        parsed = self.df.select(
            sf.expr(u_value).alias("u"),
            sf.expr(bad_u).alias("bad_u"),
            p.alias("p"),
            *([] if record_cols is None else [whole.alias("h")]),
            malformed.alias("bad_line"),
            sf.expr(self._out_filter()).alias("out_f"),
            *[sf.expr(sql).alias(name) for name, sql in {**d_parsed, **v_parsed}.items()],
        )
        checked = parsed.select(
            "*", sf.expr(bad_d).alias("bad_d"), sf.expr(bad_v).alias("bad_v")
        ).withColumn(
            "pre",  # not yet classified as something other than in/outside the domain
            ~(
                sf.col("bad_line")
                | sf.col("out_f")
                | sf.col("bad_u")
                | sf.col("bad_d")
                | sf.col("bad_v")
            ),
        )
        if value is not None:
            checked = checked.withColumn("v", sf.expr(value))
        # 2. The key (NULL: outside the domain, or not a candidate).
        keyed = self._key(checked)
        if dom.other:  # [domain] other = true: a valid key outside the domain is the last
            other = sf.coalesce(sf.col("key"), sf.lit(dom.size - 1).cast("long"))
            keyed = keyed.withColumn("key", sf.when(~sf.col("bad_d"), other))
        cls = (
            sf.when(sf.col("bad_line"), MALFORMED)
            .when(sf.col("out_f"), OUTSIDE_FILTER)
            .when(sf.col("bad_u"), NULL_UNIT)
            .when(sf.col("bad_d"), INVALID_DOMAIN)
            .when(sf.col("bad_v"), INVALID_VALUE)
            .when(sf.col("key").isNull(), OUTSIDE)
            .otherwise(IN_DOMAIN)
        )
        extra = (["v"] if value is not None else []) + (["la", "lo"] if dom.spread else [])
        # Only what the bounds and the GROUP BY need crosses the shuffle and the sort: the
        # unit of an in-domain row (``eu``, NULL otherwise: ``ok`` is ``eu IS NOT NULL``),
        # its priority, and ``key``: the key of an in-domain row, minus the class of any
        # other (its group ``g`` below).
        classed = keyed.select(
            cls.alias("cls"),
            "u",
            "p",
            sf.col("p" if record_cols is None else "h").alias("h"),
            sf.col("key").cast("long").alias("key"),
            *extra,
        )
        in_domain = sf.col("cls") == IN_DOMAIN
        rows = classed.select(
            sf.when(in_domain, sf.col("u")).alias("eu"),
            "p",
            sf.when(in_domain, sf.col("key")).otherwise(-sf.col("cls").cast("long")).alias("key"),
            sf.when(in_domain, sf.xxhash64(sf.col("u"))).otherwise(sf.col("h")).alias("pk"),
            *extra,
        ).repartition("pk")
        ok = sf.col("eu").isNotNull()

        # 3. The bounds, in the order c → k → b, each among the rows still kept.  A window
        # partition (pk, eu) holds in-domain rows only or none, so without c and k the rows
        # still kept before b are the whole partition or none, and b orders by p alone.
        b = spec.bounds.max_records_per_unit
        k = spec.bounds.max_keys_per_unit
        c = spec.bounds.max_records_per_key
        per_unit = Window.partitionBy("pk", "eu")
        kc = ok
        if c is not None:
            w = Window.partitionBy("pk", "eu", "key").orderBy("p")
            rows = rows.withColumn("kc", ok & (sf.row_number().over(w) <= c))
            kc = sf.col("kc")
        kk = kc
        if k is not None:
            kp = sf.xxhash64(salt, sf.lit("keys"), sf.col("eu"), sf.col("key"))
            rows = rows.withColumn("kp", kp)
            w = per_unit.orderBy(kc.desc(), "kp", "key")
            rows = rows.withColumn("kk", kc & (sf.dense_rank().over(w) <= k))
            kk = sf.col("kk")
        order = [kk.desc(), sf.col("p")] if c is not None or k is not None else [sf.col("p")]
        rows = rows.withColumn("rb", sf.row_number().over(per_unit.orderBy(*order)))
        kept = kk & (sf.col("rb") <= b) if b is not None else kk
        first_u = ok & (sf.col("rb") == 1)
        g = sf.when(~ok | kept, sf.col("key")).otherwise(sf.lit(DROPPED).cast("long"))

        # 4. One GROUP BY of g: the aggregate and every counter.
        if dom.spread:
            rows = rows.select(
                g.alias("g"),
                kept.alias("kept"),
                first_u.alias("first_u"),
                kc.alias("kc"),
                kk.alias("kk"),
                *extra,
            )
            rows = self._spread(rows, value is not None)
            g, first_u, kc, kk = (sf.col(n) for n in ("g", "first_u", "kc", "kk"))
        s = sf.sum("v") if value is not None else sf.lit(None).cast("double")
        mass = sf.sum("mass") if dom.spread else sf.lit(None).cast("double")
        return rows.groupBy(g.alias("g")).agg(
            sf.sum(sf.col("n")).alias("n") if dom.spread else sf.count(sf.lit(1)).alias("n"),
            sf.sum(first_u.cast("long")).alias("units"),
            sf.sum(kc.cast("long")).alias("n_c"),
            sf.sum(kk.cast("long")).alias("n_k"),
            s.alias("s"),
            mass.alias("mass"),
        )

    def build_discovered(self) -> Any:
        """The DataFrame of ``(g, kv, n, units, n_c, n_k)`` rows of a discovered domain
        (:mod:`dpgauss.release.domains.discovered`; the DuckDB engine's
        ``build_discovered``): the parse and the bounds of :meth:`build`, the key being the
        value itself and the key priority ``xxhash64(salt, 'keys', unit, value)``."""
        from pyspark.sql import Window
        from pyspark.sql import functions as sf

        spec, plan = self.spec, self.plan
        u_value, bad_u = self._unit()
        d_parsed, bad_d = self._domain_parse()
        salt = sf.lit(_signed(int(plan.salt)))
        whole = priority_column([self.csv[0]] if self.csv else self.names, salt)
        record_cols = spec.bounds.record_columns
        if record_cols is None:
            p = whole
        else:
            wanted = [*record_cols, spec.unit.column, *spec.domain.columns]
            p = priority_column(list(dict.fromkeys(wanted)), salt)
        malformed = sf.col(_ident(self.csv[1])) if self.csv is not None else sf.lit(False)
        (kv,) = d_parsed
        parsed = self.df.select(
            sf.expr(u_value).alias("u"),
            sf.expr(bad_u).alias("bad_u"),
            p.alias("p"),
            whole.alias("h"),
            malformed.alias("bad_line"),
            sf.expr(self._out_filter()).alias("out_f"),
            sf.expr(d_parsed[kv]).alias("kv0"),
        )
        cls = (
            sf.when(sf.col("bad_line"), MALFORMED)
            .when(sf.col("out_f"), OUTSIDE_FILTER)
            .when(sf.col("bad_u"), NULL_UNIT)
            .when(sf.expr(bad_d.replace(kv, "kv0")), INVALID_DOMAIN)
            .otherwise(IN_DOMAIN)
        )
        rows = parsed.select(cls.alias("cls"), "u", "p", "h", "kv0").select(
            "cls",
            "p",
            "h",
            sf.when(sf.col("cls") == IN_DOMAIN, sf.col("u")).alias("eu"),
            sf.when(sf.col("cls") == IN_DOMAIN, sf.col("kv0")).alias("kv"),
        )
        ok = sf.col("eu").isNotNull()
        rows = rows.withColumn(
            "pk", sf.when(ok, sf.xxhash64(sf.col("eu"))).otherwise(sf.col("h"))
        ).repartition("pk")
        b = spec.bounds.max_records_per_unit
        k = spec.bounds.max_keys_per_unit
        c = spec.bounds.max_records_per_key
        assert k is not None  # domains/discovered.check_spec
        per_unit = Window.partitionBy("pk", "eu")
        if c is not None:
            w = Window.partitionBy("pk", "eu", "kv").orderBy("p")
            rows = rows.withColumn("kc", ok & (sf.row_number().over(w) <= c))
        else:
            rows = rows.withColumn("kc", ok)
        kp = sf.xxhash64(salt, sf.lit("keys"), sf.col("eu"), sf.col("kv"))
        w = per_unit.orderBy(sf.col("kc").desc(), kp, "kv")
        rows = rows.withColumn("kk", sf.col("kc") & (sf.dense_rank().over(w) <= k))
        rows = rows.withColumn(
            "rb", sf.row_number().over(per_unit.orderBy(sf.col("kk").desc(), "p"))
        )
        kept = sf.col("kk") & (sf.col("rb") <= b) if b is not None else sf.col("kk")
        g = (
            sf.when(~ok, -sf.col("cls").cast("long"))
            .when(kept, sf.lit(0).cast("long"))
            .otherwise(sf.lit(DROPPED).cast("long"))
        )
        rows = rows.select(
            g.alias("g"),
            sf.when(ok & kept, sf.col("kv")).alias("kv"),
            (ok & (sf.col("rb") == 1)).alias("first_u"),
            "kc",
            "kk",
        )

        def as_int(name: str) -> Any:
            return sf.sum(sf.col(name).cast("long"))

        return rows.groupBy("g", "kv").agg(
            sf.count(sf.lit(1)).alias("n"),
            as_int("first_u").alias("units"),
            as_int("kc").alias("n_c"),
            as_int("kk").alias("n_k"),
        )

    # ------------------------------------------------------------------ domains

    def _join_values(self, checked: Any, i: int, d: DomainSpec, out_name: str) -> Any:
        """Each channel of the record joined with the keys of that kind (at most one
        matches: keys are distinct numbers or strings); ``out_name`` the index, NULL if none."""
        from decimal import Decimal

        from pyspark.sql import functions as sf
        from pyspark.sql import types as spt

        col = self._column(d)
        dx = self._dx[i]
        session = checked.sparkSession
        keys = []
        for ch, found in self._value_keys(i, d).items():
            ref = dx[ch]
            if ch == "str":
                val_type: Any = spt.StringType()
                data: list[tuple[str | float | int | Decimal, int]] = [
                    (str(v), i) for v, i in found
                ]
            elif ch == "dbl":
                val_type = spt.DoubleType()
                data = [(float(v), i) for v, i in found]
            elif ch == "int" and col.fits64:
                val_type = spt.LongType()
                data = [(int(v), i) for v, i in found]
            else:
                val_type = spt.DecimalType(38, 0)
                data = [(Decimal(int(v)), i) for v, i in found]
            schema = spt.StructType(
                [
                    spt.StructField(f"__dp_val{i}_{ch}", val_type, False),
                    spt.StructField(f"__dp_key{i}_{ch}", spt.LongType(), False),
                ]
            )
            dom = session.createDataFrame(data, schema)
            if len(data) <= 1_000_000:
                dom = sf.broadcast(dom)
            checked = checked.join(dom, checked[ref] == dom[f"__dp_val{i}_{ch}"], "left").drop(
                f"__dp_val{i}_{ch}"
            )
            keys.append(sf.col(f"__dp_key{i}_{ch}"))
        key = sf.coalesce(*keys) if len(keys) > 1 else (keys[0] if keys else sf.lit(None))
        out = checked.withColumn(out_name, key.cast("long"))
        return out.drop(*[f"__dp_key{i}_{ch}" for ch in dx])

    def _nearest(self, checked: Any, i: int = 0, out_name: str = "key") -> Any:
        """The nearest node of each candidate row (vectorised pandas UDF), NULL if none."""
        import pandas as pd
        from pyspark.sql import functions as sf

        mapper = self.plan.domain.axes[i].mapper
        x = suffix(i)
        assert mapper is not None

        def nearest(la: pd.Series, lo: pd.Series) -> pd.Series:
            out = mapper.nearest(
                la.to_numpy(dtype=np.float64, na_value=np.nan),
                lo.to_numpy(dtype=np.float64, na_value=np.nan),
            )
            return pd.Series(out, dtype="int64")

        # Real classes, not the strings of `from __future__ import annotations`: Spark reads
        # the hints to pick the UDF type (Series → Series).
        nearest.__annotations__ = {"la": pd.Series, "lo": pd.Series, "return": pd.Series}
        udf = sf.pandas_udf(nearest, "long")  # type: ignore[call-overload]
        pre = sf.col("pre")
        node = udf(sf.when(pre, sf.col(f"la{x}")), sf.when(pre, sf.col(f"lo{x}")))
        node_col = f"__dp_node{i}"
        return (
            checked.withColumn(node_col, node)
            .withColumn(out_name, sf.when(pre & (sf.col(node_col) >= 0), sf.col(node_col)))
            .drop(node_col)
        )

    def _spread(self, rows: Any, has_value: bool) -> Any:
        """kde: each kept row becomes its record entry plus one entry per node it is spread
        over (``n = 0``, ``mass`` = the node's weight, ``v`` = weight × value); the other
        rows stay single entries.  The weights come from a vectorised pandas UDF calling
        :meth:`GraphMapper.spread` on the kept rows, after the bounds (same job, same
        shuffle)."""
        import pandas as pd
        from pyspark.sql import functions as sf

        mapper = self.plan.domain.mapper
        assert isinstance(mapper, GraphMapper)  # kde: a graph's mapper

        def spread(la: pd.Series, lo: pd.Series) -> pd.DataFrame:
            offsets, nodes, weights = mapper.spread(
                la.to_numpy(dtype=np.float64, na_value=np.nan),
                lo.to_numpy(dtype=np.float64, na_value=np.nan),
            )
            cuts = offsets[1:-1]
            return pd.DataFrame(
                {"k": np.split(nodes.astype(np.int64), cuts), "w": np.split(weights, cuts)}
            )

        spread.__annotations__ = {"la": pd.Series, "lo": pd.Series, "return": pd.DataFrame}
        udf = sf.pandas_udf(spread, "k array<long>, w array<double>")  # type: ignore[call-overload]
        kept = sf.col("kept")
        rows = rows.withColumn("sp", udf(sf.when(kept, sf.col("la")), sf.when(kept, sf.col("lo"))))
        zero, no = sf.lit(0).cast("long"), sf.lit(False)
        v = sf.col("v") if has_value else sf.lit(0.0)
        record = sf.struct(
            sf.col("g").alias("g"),
            sf.lit(1).cast("long").alias("n"),
            sf.col("first_u").alias("first_u"),
            sf.col("kc").alias("kc"),
            sf.col("kk").alias("kk"),
            sf.lit(0.0).alias("v"),
            sf.lit(0.0).alias("mass"),
        )

        def node(k: Any, i: Any) -> Any:
            w = sf.element_at(sf.col("sp.w"), i + 1)
            return sf.struct(
                k.alias("g"),
                zero.alias("n"),
                no.alias("first_u"),
                no.alias("kc"),
                no.alias("kk"),
                (w * v).alias("v"),
                w.alias("mass"),
            )

        entries = sf.concat(sf.array(record), sf.transform(sf.col("sp.k"), node))
        return rows.select(sf.explode(entries).alias("e")).select("e.*")
