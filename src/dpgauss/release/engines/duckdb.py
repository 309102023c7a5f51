"""The embedded engine: bounding and aggregation in one DuckDB query over CSV/Parquet/tables.

Everything data-dependent up to the unnoised aggregate runs inside DuckDB (the semantics are
in :mod:`dpgauss.release.engines.base`; how a record's unit, domain and value are read, the
same for every engine, in :mod:`dpgauss.release.engines.sql`).  The query is designed for
speed:

* **Priorities without position.**  ``p = hash(hash(salt, <record columns>))``: DuckDB's
  multi-argument ``hash`` combines its arguments *linearly* (``hash(s, x) xor hash(s, y)`` does
  not depend on ``s``), which would make the order of a unit's records nearly the same for
  every salt (with 4 records only 2 of the 6 pairs could ever be chosen); the outer ``hash``
  (a 64-bit finaliser) mixes the salt in properly (``tests/release/test_pipeline.py`` checks
  the pair frequencies).  Priorities are keyed by content, never by row number: a row number
  depends on the other units' records, and then so would the choice of a unit's records.
* **Top-b per unit by one sort, not a window per partition.**  A record is among its unit's
  b smallest priorities iff the record b places before it, in the order (unit, priority), is
  not of the same unit: ``lag(unit, b) OVER (ORDER BY unit, p) IS DISTINCT FROM unit``.  This
  is one global sort and a streaming ``lag``, much faster in DuckDB than
  ``row_number() OVER (PARTITION BY unit ORDER BY ...)`` or per-unit top-n aggregates
  (``arg_min(x, p, b)``, ``min(x, b)``), whose list states are slow for millions of groups
  (measurements in ``benchmarks/bench_pipeline.py``).  Rows of a unit are contiguous in that
  order by definition of ORDER BY, so exactly ``min(n_u, b)`` rows per unit pass.  Every
  order is written ``ASC``: a caller's connection may ``SET default_order = 'DESC'``,
  which made the sort keep each unit's b *largest* priorities.
* **One sort key when possible.**  For a count with only ``max_records_per_unit`` and an
  integer-typed unit column, the order (unit, priority) is packed into one ``UHUGEINT``:
  ``(unit − min) << 64 | pk``, with ``pk`` exactly the general path's key-in-priority, so
  both paths keep the same records; the general query (string ids, sums, per-key bounds)
  sorts by (unit, priority).  Unit ids are
  always sorted as they are: an earlier version replaced string ids by a salted hash when
  the hash was injective on the whole source, a switch decided on the whole source — one
  NULL-id row flipped it and redrew every unit's sample (a sensitivity violation).  Whether
  the fast path applies depends only on the spec and the column's *type*, never on values
  (its ``min``/``max`` only place units in the sort key, which does not change which
  records a unit keeps).
* **One pass.**  Invalid rows go through the same query with a NULL unit (sorted last, never
  kept), so the row counters come out of the same final ``GROUP BY`` as the aggregate.
* **No sort at all for the commonest release.**  A count whose only bound is
  ``max_records_per_unit``, over an integer unit column or a ``VARCHAR`` one read from
  files (CSV, Parquet; with no ``default_collation``), hands each row's unit, priority
  and key (or class) to the compiled kernel of :mod:`dpgauss.release.engines.unit_topb`
  (hash-partitioned per-unit top-b, numba), which keeps the same records as the sort in
  0.33–0.36× its CPU time with integer ids, 0.48× with string ids (5 M and 20 M rows,
  ``python benchmarks/bench_pipeline.py [--string-units]``, ``docs/benchmarks.md``).
  Used whenever numba is installed (``kernel=None``); it applies by the spec, the column's
  type and the connection's settings only.

Graph domains call the mapping of :mod:`dpgauss.release.domains.mapping` as vectorised Arrow UDFs
(``dp_nearest``, and ``dp_spread`` for kde, whose list of (node, weight) is unnested and
summed in SQL).

CSV follows :mod:`dpgauss.release.engines.csv_format` in the mode of ``[source] csv`` (``rfc4180``
records, found by quote parity, or ``lines``; DuckDB's own CSV reader, with its sniffer, is
not used).  The files' record texts are streamed as Arrow batches by
:func:`~dpgauss.release.engines.csv_format.line_reader` (numpy, chunk by chunk), registered on the
connection and scanned once, by the same query as everything else.  The reader checks UTF-8
(an invalid record arrives as NULL) and decides most records: those whose delimiters all
separate fields (unquoted fields, or quoted ones without inner quotes or delimiters) are
records iff they have ``n`` fields, and their values come from ``string_split``.  Only the
other records are tested in SQL (U+FFFD, the folded record against the record regex), their
fields extracted by ``regexp_extract`` (at most four groups per regex, so that RE2 uses its
one-pass matcher) and unquoted.  On the bundled trips repeated
to 2M rows this costs about 1.3-1.5× the CPU time of DuckDB's ``read_csv`` in the same
query, about 1.5× with a non-ASCII field, and 2.1-2.6× with every field quoted.  Every column
is text (an unparseable number is an invalid value, not a failed read); a malformed record is
a row of its own class, tested first and counted by the same final ``GROUP BY``; records
equal to the header are dropped.  A record's priority hashes its text, unless
``record_columns`` is set.
"""

from __future__ import annotations

import contextlib
import math
import secrets
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..._optional import install_hint, require
from .. import schema
from ..domains import discovered
from ..domains.keys import TIMESTAMP_TEXT
from ..domains.mapping import GraphMapper
from ..spec import DomainSpec, ReleaseSpec
from . import csv_format, unit_topb
from .base import (
    AGGREGATION_FAILED,
    DROPPED,
    DUCKDB,
    IN_DOMAIN,
    INVALID_DOMAIN,
    INVALID_VALUE,
    MALFORMED,
    NULL_UNIT,
    OUTSIDE,
    OUTSIDE_FILTER,
    Aggregate,
    AggregationPlan,
    EngineError,
    collect,
    source_columns,
)
from .sql import INT_BOUNDS, RecordExpressions, suffix

__all__ = ["DuckDBEngine", "quote_ident"]

_CLASS_BITS = 3  # the fast path keeps a row's class in the low bits of its sort key
#: Rows of an Arrow batch handed to the kernel: each is partitioned and let go before the
#: next (``unit_topb``), so the batches never all live at once.  In a one-off measurement
#: at 5 M rows, DuckDB spent about 10 % more CPU making batches of 2²⁰ rows than of
#: 2¹⁶–2¹⁸ (more fresh memory to fault in); 2¹⁹ keeps the batches few.
_KERNEL_BATCH_ROWS = 1 << 19
_GROUPS = 4  # CSV fields extracted per regexp_extract (RE2 one-pass up to 4 groups)

_INTEGER_TYPES = tuple(INT_BOUNDS)  # every integer type of DuckDB below HUGEINT


def quote_ident(name: str) -> str:
    """``name`` as a DuckDB identifier (double quotes, embedded quotes doubled)."""
    return DUCKDB.ident(name)


def _duckdb() -> Any:
    return require("duckdb", "data", "the DuckDB engine", error=EngineError)


def _no_stats(disabled: str) -> str:
    """``disabled_optimizers`` with ``statistics_propagation`` added (see ``_connect``)."""
    names = [n.strip() for n in disabled.split(",") if n.strip()]
    if "statistics_propagation" not in names:
        names.append("statistics_propagation")
    return ",".join(names)


def _one_line(exc: BaseException) -> str:
    """DuckDB's message in one line, without the SQL it quotes (``LINE 1: …`` and its caret):
    the user wrote no SQL, and the query's text is not theirs to read (it holds the
    sampling's secret parameters)."""
    text = str(exc)
    cut = text.find("\nLINE ")
    if cut >= 0:
        text = text[:cut]
    text = " ".join(text.split())
    return text if len(text) <= 400 else text[:397] + "..."


@contextlib.contextmanager
def _interruptible(con: Any) -> Iterator[None]:
    """Ctrl-C while DuckDB works is a ``KeyboardInterrupt``: never lost, never an engine error.

    DuckDB's Python client checks for signals while a query runs and turns SIGINT into an
    error of its own (``RuntimeError: Query interrupted``, which read as "the engine could not
    read the source"), or drops it when the query is ending: the run went on and charged the
    budget (measured with duckdb 2.0.1).  Here (main thread, Python's own SIGINT handler
    only) a SIGINT is recorded, stops the running query (``con.interrupt()``) and raises
    ``KeyboardInterrupt`` as the default handler does; whatever DuckDB makes of it, the block
    ends in ``KeyboardInterrupt``.  Another handler (a caller's own) is left alone.
    """
    import signal
    import threading

    if (
        threading.current_thread() is not threading.main_thread()
        or signal.getsignal(signal.SIGINT) is not signal.default_int_handler
    ):
        yield
        return
    hit: list[int] = []

    def handler(signum: int, frame: Any) -> None:
        hit.append(signum)
        with contextlib.suppress(Exception):
            con.interrupt()
        raise KeyboardInterrupt

    signal.signal(signal.SIGINT, handler)
    try:
        yield
    except KeyboardInterrupt:
        raise
    except BaseException:
        if hit:
            raise KeyboardInterrupt from None
        raise
    finally:
        signal.signal(signal.SIGINT, signal.default_int_handler)
    if hit:
        raise KeyboardInterrupt


def _literal(text: str) -> str:
    """``text`` as a DuckDB string literal (no backslash escapes in DuckDB's literals)."""
    return DUCKDB.literal(text)


@dataclass(frozen=True)
class _CsvScan:
    """A CSV source as the query sees it: ``names`` (every column, text), the identifiers of
    the line's text and of its malformed flag in the source relation."""

    names: tuple[str, ...]
    line: str
    bad: str

    @property
    def types(self) -> dict[str, str]:
        return dict.fromkeys(self.names, "VARCHAR")


def _csv_layout(spec: ReleaseSpec) -> tuple[list[str], tuple[str, ...], bytes | None]:
    """(files, column names, header line) of a CSV source (csv_format, rule 5)."""
    src = spec.source
    try:
        return csv_format.local_source(
            src.paths, src.delimiter, src.header, src.columns, mode=src.csv
        )
    except csv_format.CsvError as exc:
        raise EngineError(f"cannot read the source: {_one_line(exc)}") from None


def _csv_source(con: Any, spec: ReleaseSpec, tag: str) -> tuple[str, dict[str, Any], _CsvScan]:
    """The SQL relation of a CSV source: the columns the release reads, the line, the flag.

    Registers the line reader of the files as ``dp_lines_<tag>`` (scanned once)."""
    files, names, header = _csv_layout(spec)
    # The needed columns in file order: group j of the extraction regex is wanted[j].
    wanted = sorted(source_columns(spec), key=lambda c: names.index(c) if c in names else -1)
    for col in wanted:
        if col not in names:
            shown = ", ".join(names[:30]) + (", ..." if len(names) > 30 else "")
            raise EngineError(f"column {col!r} is not a column of the source (columns: {shown})")
    d, n, mode = spec.source.delimiter, len(names), spec.source.csv
    valid = csv_format.folded_record_regex(d, n, mode=mode)
    line, bad = "dp_line", "dp_malformed"
    while line in names:
        line += "_"
    while bad in names:
        bad += "_"
    con.register(f"dp_lines_{tag}", csv_format.line_reader(files, d, n, mode=mode))
    # The reader's kind `k` decides most records (csv_format._kinds): a RECORD's fields are
    # its segments, by string_split (so are a GENERAL record's without quotes).  Other GENERAL
    # records are matched: regexp_extract of the folded record, at most 4 groups per regex
    # (RE2's one-pass matcher).
    extracts, cols = [], []
    for c0 in range(0, len(wanted), _GROUPS):
        part = wanted[c0 : c0 + _GROUPS]
        regex = csv_format.folded_record_regex(d, n, [names.index(c) for c in part], mode)
        groups = ", ".join(f"'g{j}'" for j in range(len(part)))
        extracts.append(
            f"CASE WHEN dp_q THEN regexp_extract(dp_f, {_literal(regex)}, [{groups}]) "
            f"END AS dp_x{c0}"
        )
        for j, c in enumerate(part):
            quoted = csv_format.unquote_sql(f"dp_x{c0}.g{j}", mode)
            plain = csv_format.segment_value_sql(f"dp_s[{names.index(c) + 1}]")
            cols.append(f"CASE WHEN dp_q THEN {quoted} ELSE {plain} END AS {quote_ident(c)}")
    params: dict[str, Any] = {"dp_delim": d}
    where = ""
    if header is not None:
        params["dp_header"] = header.decode("utf-8")
        where = " WHERE l IS NULL OR l <> $dp_header"
    general = (
        f"(contains(dp_l, '{csv_format.REPLACEMENT}') OR NOT "
        f"regexp_full_match({csv_format.fold_sql('dp_l', mode)}, {_literal(valid)}))"
    )
    sql = f"""(
  SELECT {", ".join(cols)}, dp_l AS {quote_ident(line)}, dp_bad AS {quote_ident(bad)} FROM (
    SELECT dp_l, dp_bad, dp_q, {", ".join(extracts)},
           CASE WHEN NOT (dp_bad OR dp_q) THEN string_split(dp_l, $dp_delim) END AS dp_s
    FROM (
      SELECT dp_l, dp_bad, dp_q, CASE WHEN dp_q THEN {csv_format.fold_sql("dp_l", mode)} END AS dp_f
      FROM (
        SELECT dp_l, dp_bad, k = {csv_format.GENERAL} AND NOT dp_bad AND contains(dp_l, '"')
                 AS dp_q
        FROM (
          SELECT dp_l, k, CASE k WHEN {csv_format.RECORD} THEN false
                                 WHEN {csv_format.MALFORMED} THEN true
                                 ELSE {general} END AS dp_bad
          FROM (SELECT l AS dp_l, k FROM dp_lines_{tag}{where})))))
) AS dp_csv"""
    return sql, params, _CsvScan(names, quote_ident(line), quote_ident(bad))


class DuckDBEngine:
    """Runs the bounded aggregation of a release inside DuckDB.

    Parameters
    ----------
    connection
        An existing ``duckdb`` connection to run in (its tables and views can be sources;
        it is not closed).  Default: a fresh in-memory database per call.
    threads
        DuckDB's ``threads`` setting for a fresh connection (default: DuckDB's, all cores).
    memory_limit
        DuckDB's ``memory_limit`` for a fresh connection, e.g. ``"4GB"``.
    fast_path
        Sort by one packed ``UHUGEINT`` key for counts over integer unit ids when it applies;
        False (the default) runs the general query.  Both keep exactly the same records (the
        packed key holds the general path's own priority).  Since it became exact (it used
        to truncate priorities by the span of the ids, a switch on the whole source), the
        packed sort measured slower than the general query: 0.44 s against 0.35 s at 2 M
        rows (``python benchmarks/bench_pipeline.py --rows 2000000 --units 200000``), so it
        is off by default and kept for the benchmarks and the tests.
    progress
        Show DuckDB's own progress bar (on the terminal) for a scan or sort that runs longer
        than two seconds (``dpgauss release`` turns it on when stderr is a terminal).
    kernel
        Select each unit's records with the compiled kernel of
        :mod:`dpgauss.release.engines.unit_topb` instead of the sort, for a count whose only
        bound is
        ``max_records_per_unit`` over an integer unit column, or a ``VARCHAR`` one read
        from CSV or Parquet files (ids told apart by their bytes; not with a
        ``default_collation`` on the connection, nor for tables, whose columns may carry
        one): the same records (the kernel keeps the general path's ``b`` smallest sort
        keys), 0.33–0.48× its CPU time (``docs/benchmarks.md``).  None (the default):
        whenever it applies and numba is installed (the ``fast`` extra); False: never;
        True: whenever it applies (an error without numba).  Whether it applies depends on
        the spec, the unit column's *type* and the connection's settings only.
    """

    name = "duckdb"

    def __init__(
        self,
        connection: Any = None,
        *,
        threads: int | None = None,
        memory_limit: str | None = None,
        fast_path: bool = False,
        progress: bool = False,
        kernel: bool | None = None,
    ) -> None:
        self._connection = connection
        self.fast_path = bool(fast_path)
        self.progress = bool(progress)
        if kernel is not None and not isinstance(kernel, bool):
            raise TypeError(f"kernel must be True, False or None; got {kernel!r}")
        if kernel and not unit_topb.available():
            raise EngineError(
                "kernel=True needs numba (the compiled per-unit selection): " + install_hint("fast")
            )
        self.kernel = unit_topb.available() if kernel is None else kernel
        if threads is not None and (
            isinstance(threads, bool) or not isinstance(threads, int) or threads < 1
        ):
            raise ValueError(f"threads must be an integer >= 1; got {threads!r}")
        self.threads = threads
        self.memory_limit = memory_limit

    # ------------------------------------------------------------------ connection

    def _connect(self) -> tuple[Any, bool]:
        duckdb = _duckdb()
        if self._connection is not None:
            con = self._connection
            try:
                self._saved_optimizers = str(
                    con.execute("SELECT current_setting('disabled_optimizers')").fetchall()[0][0]
                )
                con.execute(
                    "SET disabled_optimizers = $o", {"o": _no_stats(self._saved_optimizers)}
                )
            except duckdb.Error as exc:
                raise EngineError(f"duckdb: {_one_line(exc)}") from None
            return con, False
        con = duckdb.connect()
        try:
            # Every query here is an aggregate: no result order to preserve.
            con.execute("SET preserve_insertion_order = false")
            # Statistics propagation folds comparisons from a Parquet row group's min/max,
            # which leave NaN out: `f < 10` (even `NOT isnan(f)`) became true for a NaN row
            # when another row of its row group was in range, so one unit's record was
            # classified by other units' values (tests/release/test_neighbours.py).  Off.
            con.execute("SET disabled_optimizers = 'statistics_propagation'")
            if self.threads is not None:
                con.execute(f"SET threads = {int(self.threads)}")
            if self.memory_limit is not None:
                con.execute("SET memory_limit = $m", {"m": str(self.memory_limit)})
            con.execute(f"SET enable_progress_bar = {str(self.progress).lower()}")
            if self.progress:
                con.execute("SET enable_progress_bar_print = true")
        except duckdb.Error as exc:
            con.close()
            raise EngineError(f"duckdb: {_one_line(exc)}") from None
        return con, True

    # ---------------------------------------------------------------------- source

    def _source(
        self, con: Any, spec: ReleaseSpec, tag: str
    ) -> tuple[str, dict[str, Any], _CsvScan | None]:
        src = spec.source
        fmt = src.file_format
        if fmt == "csv":
            return _csv_source(con, spec, tag)
        if fmt is None:
            parts = [quote_ident(p) for p in str(src.table).split(".")]
            if src.database is not None:
                alias = f"dp_src_{tag}"
                con.execute(f"ATTACH $db AS {alias} (READ_ONLY)", {"db": src.database})
                parts = [alias, *parts] if len(parts) < 3 else parts
            return ".".join(parts), {}, None
        params: dict[str, Any] = {"dp_paths": list(src.paths)}
        return "read_parquet($dp_paths, union_by_name = true)", params, None

    def _typed(
        self, con: Any, spec: ReleaseSpec, tag: str
    ) -> tuple[str, dict[str, Any], _CsvScan | None, dict[str, str]]:
        """(relation, parameters, CSV scan, column → DuckDB type) of the source as the query
        reads it.  With ``[source] types`` (:mod:`dpgauss.release.schema`) that is a view of
        the declared columns only, each converted value by value to its declared type (a
        source column whose type cannot hold it is refused here, before any record is
        read); without, the source as it is."""
        source, params, csv = self._source(con, spec, tag)
        if csv is not None:
            physical = csv.types
        else:
            rows = con.execute(f"DESCRIBE SELECT * FROM {source}", params).fetchall()
            physical = {str(r[0]): str(r[1]) for r in rows}
        declared = spec.source.types
        if declared is None:
            return source, params, csv, physical
        schema.check(declared, physical, schema.duckdb_family)
        # a CSV relation holds the columns the release reads (its content is the line)
        names = [c for c in declared if csv is None or c in source_columns(spec)]
        cols = [
            f"{schema.duckdb_conversion(quote_ident(c), physical[c], declared[c])} "
            f"AS {quote_ident(c)}"
            for c in names
        ]
        if csv is not None:
            cols += [csv.line, csv.bad]
        types = {c: schema.DUCKDB_TYPES[declared[c]] for c in names}
        return f"(SELECT {', '.join(cols)} FROM {source}) AS dp_typed", params, csv, types

    def describe(self, spec: ReleaseSpec) -> dict[str, str]:
        """Column name → DuckDB type of the source (binds the scan; reads no records).

        For CSV: every column is ``VARCHAR``; the names come from the header (of the first
        file; every file's first line must be that header) or ``[source] columns``.  With
        ``[source] types``: the declared columns in their declared types, once the source's
        own types are found to hold them (:mod:`dpgauss.release.schema`; else a
        ``ValueError`` naming the column)."""
        declared = spec.source.types
        if spec.source.file_format == "csv":
            physical = dict.fromkeys(_csv_layout(spec)[1], "VARCHAR")
            if declared is None:
                return physical
            schema.check(declared, physical, schema.duckdb_family)
            return {c: schema.DUCKDB_TYPES[t] for c, t in declared.items()}
        duckdb = _duckdb()
        con, owned = self._connect()
        tag = secrets.token_hex(4)
        with _interruptible(con):
            try:
                source, params, _, types = self._typed(con, spec, tag)
                if declared is None:
                    return types
                con.execute(f"DESCRIBE SELECT * FROM {source}", params).fetchall()  # it binds
            except duckdb.Error as exc:
                where = f" {', '.join(spec.source.paths)}" if spec.source.paths else ""
                raise EngineError(f"cannot read the source{where}: {_one_line(exc)}") from None
            finally:
                self._cleanup(con, owned, tag)
        return types

    def _cleanup(self, con: Any, owned: bool, tag: str, axes: int = 1) -> None:
        if owned:
            con.close()
            return
        duckdb = _duckdb()
        saved = getattr(self, "_saved_optimizers", None)
        if saved is not None:
            with contextlib.suppress(duckdb.Error):
                con.execute("SET disabled_optimizers = $o", {"o": saved})
        for stmt in (
            f"DROP TABLE IF EXISTS dp_bounded_{tag}",
            f"DETACH DATABASE IF EXISTS dp_src_{tag}",
        ):
            try:
                con.execute(stmt)
            except duckdb.Error:
                pass
        sfx = [suffix(i) for i in range(axes)]
        for view in [*(f"dp_domain_{tag}{x}" for x in sfx), f"dp_lines_{tag}"]:
            try:
                con.unregister(view)
            except Exception:  # not registered on this path
                pass
        for fn in [*(f"dp_nearest_{tag}{x}" for x in sfx), f"dp_spread_{tag}"]:
            try:
                con.remove_function(fn)
            except Exception:  # not registered on this path
                pass

    # ------------------------------------------------------------------- aggregate

    @staticmethod
    def _unit_range(
        con: Any,
        plan: AggregationPlan,
        source: str,
        params: dict[str, Any],
        types: dict[str, str],
    ) -> tuple[int, int] | None:
        """(min, max) of an integer unit column when the fast path applies, else None."""
        if not _count_over_integer_units(plan, types):
            return None
        unit = quote_ident(plan.spec.unit.column)
        ((lo, hi),) = con.execute(
            f"SELECT min({unit}), max({unit}) FROM {source}", params
        ).fetchall()
        if lo is None or hi is None:  # no unit at all: the general path (same semantics)
            return None
        return int(lo), int(hi)

    def _run(
        self,
        plan: AggregationPlan,
        con: Any,
        source: str,
        params: dict[str, Any],
        types: dict[str, str],
        tag: str,
        unit_range: tuple[int, int] | None,
        csv: _CsvScan | None = None,
    ) -> tuple[list[tuple[Any, ...]], list[tuple[Any, ...]] | None]:
        query = _Query(plan, source, types, tag, con, csv)
        sql, more = query.build(unit_range)
        params = {**params, **more}
        if not plan.domain.spread:
            return con.execute(query.final(sql), params).fetchall(), None
        table = f"dp_bounded_{tag}"
        con.execute(f"CREATE OR REPLACE TEMP TABLE {table} AS {sql}", params)
        groups = con.execute(query.final(f"SELECT * FROM {table}")).fetchall()
        spread = con.execute(
            _SPREAD.format(
                t=table,
                fn=f"dp_spread_{tag}",
                s="kahan_sum(e.w * v)" if query.has_value else "NULL::DOUBLE",
                v=", v" if query.has_value else "",
            )
        ).fetchall()
        return groups, spread

    def _run_kernel(
        self,
        plan: AggregationPlan,
        con: Any,
        source: str,
        params: dict[str, Any],
        types: dict[str, str],
        tag: str,
        csv: _CsvScan | None = None,
    ) -> tuple[list[tuple[Any, ...]], None]:
        """The rows' (unit, key-in-priority, class) from DuckDB, selected by the kernel of
        :mod:`dpgauss.release.engines.unit_topb`; the result as the general query's groups."""
        query = _Query(plan, source, types, tag, con, csv)
        sql, more = query.build(kernel=True)
        b = plan.spec.bounds.max_records_per_unit
        assert b is not None  # _kernel_serves
        d = plan.domain.size
        # String ids with 64-bit offsets: DuckDB's default Arrow `string` (32-bit offsets)
        # fails a batch whose ids take more than 2³¹ − 1 bytes, which the sort serves (a
        # release must not fail on what records hold).  The connection's own value is put
        # back once the stream is read (the setting is read as batches are made).
        ((large,),) = con.execute("SELECT current_setting('arrow_large_buffer_size')").fetchall()
        con.execute("SET arrow_large_buffer_size = true")
        try:
            reader = con.sql(sql, params={**params, **more}).to_arrow_reader(_KERNEL_BATCH_ROWS)
            counts, units, classes = unit_topb.select(
                reader, b, query.key_bits, d, int(plan.salt), self.threads or 0
            )
        except (OSError, _arrow_error()) as exc:  # DuckDB's error, raised through Arrow
            raise EngineError(AGGREGATION_FAILED, f"duckdb: {_one_line(exc)}") from None
        finally:
            con.execute("SET arrow_large_buffer_size = $v", {"v": bool(large)})
        kept = int(counts.sum())
        groups: list[tuple[Any, ...]] = [
            (int(g), int(counts[g]), 0, 0, 0, None) for g in np.flatnonzero(counts)
        ]
        groups.append((DROPPED, int(classes[IN_DOMAIN]) - kept, units, 0, 0, None))
        groups += [
            (-code, int(classes[code]), 0, 0, 0, None)
            for code in range(1, len(classes))
            if classes[code]
        ]
        return groups, None

    def aggregate(self, plan: AggregationPlan) -> Aggregate:
        """The bounded aggregate of ``plan`` (semantics: :mod:`dpgauss.release.engines.base`)."""
        duckdb = _duckdb()
        con, owned = self._connect()
        tag = secrets.token_hex(4)
        with _interruptible(con):
            try:
                # a CSV's line reader is scanned once, by the query below
                source, params, csv, types = self._typed(con, plan.spec, tag)
                if plan.domain.kind == discovered.KIND:
                    query = _Query(plan, source, types, tag, con, csv)
                    sql = query.build_discovered()
                    rows = con.execute(sql, {**params, **query.params}).fetchall()
                    return discovered.collect_discovered(plan, rows)
                if self.kernel and unit_topb.available() and _kernel_serves(plan, types, con):
                    groups, spread = self._run_kernel(plan, con, source, params, types, tag, csv)
                else:
                    unit_range = None
                    if self.fast_path:
                        unit_range = self._unit_range(con, plan, source, params, types)
                    groups, spread = self._run(
                        plan, con, source, params, types, tag, unit_range, csv
                    )
            except duckdb.Error as exc:
                raise EngineError(AGGREGATION_FAILED, f"duckdb: {_one_line(exc)}") from None
            except csv_format.CsvError as exc:  # a file failed while it was streamed
                raise EngineError(
                    AGGREGATION_FAILED, f"cannot read the source: {_one_line(exc)}"
                ) from None
            finally:
                self._cleanup(con, owned, tag, len(plan.domain.axes))
        return collect(plan, groups, spread)


def _arrow_error() -> type[Exception]:
    """pyarrow's base exception: how an error of DuckDB's streamed result reaches Python."""
    import pyarrow as pa

    return pa.ArrowException


def _count_per_unit(plan: AggregationPlan) -> bool:
    """Whether ``plan`` is a count whose only bound is ``max_records_per_unit``."""
    b = plan.spec.bounds
    if b.max_records_per_unit is None or b.max_keys_per_unit or b.max_records_per_key:
        return False
    return plan.spec.statistic.kind == "count" and not plan.domain.spread


def _count_over_integer_units(plan: AggregationPlan, types: dict[str, str]) -> bool:
    """Whether ``plan`` is a count whose only bound is ``max_records_per_unit``, over a unit
    column of an integer type: what the packed-key sort serves (the spec and the column's
    type decide, never its values)."""
    return _count_per_unit(plan) and types.get(plan.spec.unit.column, "").upper() in _INTEGER_TYPES


def _kernel_serves(plan: AggregationPlan, types: dict[str, str], con: Any) -> bool:
    """Whether the per-unit kernel (:mod:`dpgauss.release.engines.unit_topb`) serves
    ``plan``: a count whose only bound is ``max_records_per_unit``, over integer unit ids,
    or over ``VARCHAR`` ids read from files (CSV, Parquet) when the connection compares
    strings by their bytes (no ``default_collation``).  The kernel tells string ids apart by
    their bytes, as the sort does then; a table's column may carry a collation
    (``COLLATE NOCASE``: ``'A'`` and ``'a'`` one unit in the sort) that ``DESCRIBE`` does not
    show, so tables are sorted.
    The spec, the column's type and the connection's settings decide, never the values."""
    if _count_over_integer_units(plan, types):
        return True
    if not _count_per_unit(plan) or plan.spec.source.file_format is None:
        return False
    if types.get(plan.spec.unit.column, "").upper() != "VARCHAR":
        return False
    ((collation,),) = con.execute("SELECT current_setting('default_collation')").fetchall()
    return str(collation) == ""


# ------------------------------------------------------------------------ the query

_SPREAD = """
SELECT e.k AS key, kahan_sum(e.w) AS mass, {s} AS s
FROM (SELECT unnest({fn}(la, lo)) AS e{v} FROM {t} WHERE g >= 0) GROUP BY ALL
"""


class _Query(RecordExpressions):
    """Builds the bounding query of a plan (see the module docstring for the design)."""

    def __init__(
        self,
        plan: AggregationPlan,
        source: str,
        types: dict[str, str],
        tag: str,
        con: Any,
        csv: _CsvScan | None = None,
    ) -> None:
        super().__init__(DUCKDB, plan, types)
        self.csv = csv
        self.source = source
        self.types = types
        self.tag = tag
        self.con = con
        self.params["dp_salt"] = int(plan.salt)
        self.has_value = False
        self.flags: tuple[str, ...] = ()
        # the bits of a key index, packed below the priority in every count's sort key
        self.key_bits = max(1, (plan.domain.size - 1).bit_length())

    def build(
        self, unit_range: tuple[int, int] | None = None, *, kernel: bool = False
    ) -> tuple[str, dict[str, Any]]:
        """(SQL of the bounded rows, parameters).

        The query yields one row per source row: ``g`` (the key index ≥ 0 of a kept row,
        ``DROPPED`` for an in-domain row removed by the bounds, minus the row class for a row
        outside the domain), ``first_u`` (the first row of a unit), the flags ``kc``/``kk``
        (left after the per-key bounds) and, when needed, ``v`` and ``la, lo``.

        General path: sort by (unit, p) with the full 64-bit priority ``p``; rows that tie
        have equal hashed content, hence equal key, value and coordinates (the hash covers
        them), so which of them is kept does not matter.  Fast path
        (:meth:`_fast`), for a count with only ``max_records_per_unit`` and an integer unit
        column whose span ``unit_range`` leaves room: one 64-bit sort key instead of the
        pair, about 1.5× faster in DuckDB.
        """
        spec, dom = self.spec, self.plan.domain
        unit, bad_unit = self._unit()
        d_parsed, bad_d = self._domain_parse()
        v_parsed, bad_v, value = self._value_parse()
        out_f = self._filter()
        parsed = [f"{unit} AS u", f"{bad_unit} AS bad_u", f"{self._priority()} AS p"]
        parsed += [f"{sql} AS {name}" for name, sql in {**d_parsed, **v_parsed}.items()]
        parsed.append(f"{out_f} AS out_f")
        # A malformed CSV line (csv_format) is its own class, tested before every other.
        bl = ""
        if self.csv is not None:
            parsed.append(f"{self.csv.bad} AS bad_l")
            bl = ", bad_l"
        joins, key_expr = self._domain_key()
        has_v = spec.statistic.kind != "count"
        vcol = ", v" if has_v else ""
        axes = self.spec.domain.axes
        graphs = [i for i, a in enumerate(axes) if a.locates]
        geo = "".join(f", la{suffix(i)}, lo{suffix(i)}" for i in graphs)
        dxs = "".join(f", {ref}" for refs in self._dx for ref in refs.values())
        extra = vcol + (", la, lo" if dom.spread else "")
        if graphs:  # the mapping UDFs run on valid rows only
            key_expr = (
                f"CASE WHEN NOT (out_f OR bad_u OR bad_d OR bad_v{' OR bad_l' if bl else ''}) "
                f"THEN {key_expr} END"
            )
        if dom.other:  # [domain] other = true: a valid key outside the domain is the last
            key_expr = f"CASE WHEN NOT bad_d THEN coalesce({key_expr}, {dom.size - 1}) END"
        # A NULL key means: invalid (bad_*) or outside the domain.  `ok` = in the domain.
        ok = "key IS NOT NULL AND NOT bad_u" + ("" if bad_v == "false" else " AND NOT bad_v")
        if out_f != "false":
            ok += " AND NOT out_f"
        if bl:
            ok += " AND NOT bad_l"
        cls = (
            f"CASE WHEN {ok} THEN key {'WHEN bad_l THEN -' + str(MALFORMED) if bl else ''} "
            f"WHEN out_f THEN -{OUTSIDE_FILTER} "
            f"WHEN bad_u THEN -{NULL_UNIT} WHEN bad_d THEN "
            f"-{INVALID_DOMAIN} WHEN bad_v THEN -{INVALID_VALUE} ELSE -{OUTSIDE} END"
        )
        sql = f"""
WITH parsed AS (
  SELECT {", ".join(parsed)} FROM {self.source}
), checked AS (
  SELECT u, p, out_f, bad_u, {bad_d} AS bad_d, {bad_v} AS bad_v{vcol and f", {value} AS v"}{geo}
         {dxs}{bl}
  FROM parsed
), keyed AS (
  SELECT u, p, out_f, bad_u, bad_d, bad_v{vcol}{geo}{bl}, {key_expr} AS key
  FROM checked {joins}
)"""
        b = spec.bounds.max_records_per_unit
        k = spec.bounds.max_keys_per_unit
        c = spec.bounds.max_records_per_key
        self.has_value = has_v
        if kernel:
            return self._kernel(sql, ok, cls), self.params
        if unit_range is not None and b is not None and k is None and c is None and not extra:
            return self._fast(sql, unit_range, ok, b), self.params
        # ------------------------------------------------------------ general path
        # `eu` is the unit of an in-domain row, NULL otherwise (sorted last, never kept).
        if extra:
            # `key` is the key index of an in-domain row, minus its class otherwise; rows are
            # ordered by the full priority `p` (ties: equal content, interchangeable).
            sql += f""", s0 AS (
  SELECT CASE WHEN {ok} THEN u END AS eu, p, {cls} AS key{extra} FROM keyed
)"""
            cols, key, order = f"eu, p, key{extra}", "key", "p"
            g_key = g_class = "key"
        else:
            # A count: the key rides in the low bits of the priority, `pk`, so the sort
            # carries one column less; rows that tie in `pk` have the same key.
            bits = self.key_bits
            mask = (1 << bits) - 1
            sql += f""", s0 AS (
  SELECT CASE WHEN {ok} THEN u END AS eu,
         CASE WHEN {ok} THEN ((p >> {bits}) << {bits}) | key::UBIGINT ELSE (-({cls}))::UBIGINT
         END AS pk
  FROM keyed
)"""
            cols, key, order = "eu, pk", f"(pk & {mask})", "pk"
            g_key, g_class = f"{key}::BIGINT", "-(pk::BIGINT)"
        prev, kept = "s0", "eu IS NOT NULL"
        flags: list[str] = []
        has_first = False
        if c is not None:
            # Per (unit, key): the c smallest priorities.  Sorted by (unit, key, priority), a
            # row is among them iff the row c places back is of another (unit, key).
            sql += f""", sc AS (
  SELECT {cols},
         (eu IS NOT NULL AND lag(eu, 1) OVER w IS DISTINCT FROM eu) AS first_u,
         (eu IS NOT NULL AND NOT coalesce(
            lag(eu, {c}) OVER w = eu AND lag({key}, {c}) OVER w = {key}, false)) AS kc
  FROM {prev} WINDOW w AS (ORDER BY eu ASC NULLS LAST, {key} ASC, {order} ASC)
)"""
            prev, kept, has_first = "sc", "kc", True
            cols += ", first_u, kc"
            flags.append("kc")
        if k is not None:
            # Per unit: the k keys of smallest key priority among the keys still kept.
            self.params["dp_keys"] = "keys"
            sql += f""", sk AS (
  SELECT {cols}, ({kept} AND dense_rank() OVER (
           PARTITION BY CASE WHEN {kept} THEN eu END
           ORDER BY hash(hash($dp_salt::UBIGINT, $dp_keys, eu, {key})) ASC, {key} ASC
         ) <= {k}) AS kk
  FROM {prev}
)"""
            prev, kept = "sk", "kk"
            cols += ", kk"
            flags.append("kk")
        if b is not None or not has_first:
            # Per unit: the b smallest priorities, by one sort and a lag (module docstring).
            e = "eu"
            if kept != "eu IS NOT NULL":
                sql += f""", se AS (SELECT *, CASE WHEN {kept} THEN eu END AS eb FROM {prev})"""
                prev, e = "se", "eb"
            outs = []
            if not has_first:
                outs.append(
                    f"({e} IS NOT NULL AND lag({e}, 1) OVER w IS DISTINCT FROM {e}) AS first_u"
                )
            if b is not None:
                outs.append(
                    f"({e} IS NOT NULL AND lag({e}, {b}) OVER w IS DISTINCT FROM {e}) AS kept"
                )
                kept = "kept"
            sql += f""", sb AS (
  SELECT {cols}, {", ".join(outs)}
  FROM {prev} WINDOW w AS (ORDER BY {e} ASC NULLS LAST, {order} ASC)
)"""
            prev = "sb"
        g = f"CASE WHEN eu IS NULL THEN {g_class} WHEN {kept} THEN {g_key} ELSE {DROPPED} END"
        out = [f"{g} AS g", "first_u", *flags]
        sql += f"""
SELECT {", ".join(out)}{extra} FROM {prev}"""
        self.flags = tuple(flags)
        return sql, self.params

    def build_discovered(self) -> str:
        """The query of a discovered domain (:mod:`dpgauss.release.domains.discovered`): one
        row ``(g, kv, n, units, n_c, n_k)`` per group — ``g`` = 0 with the key ``kv`` for
        kept records, ``DROPPED`` for in-domain records the bounds removed, minus the row
        class otherwise.  The bounds as on the general path, in the order c → k → b, each
        among the records still kept: the c records of smallest priority per (unit, key),
        the k keys of smallest key priority ``hash(salt, 'keys', unit, value)`` per unit (the
        key's value, not an index: no other unit decides it), the b records of smallest
        priority per unit."""
        spec = self.spec
        unit, bad_unit = self._unit()
        d_parsed, bad_d = self._domain_parse()
        out_f = self._filter()
        parsed = [f"{unit} AS u", f"{bad_unit} AS bad_u", f"{self._priority()} AS p"]
        parsed += [f"{sql} AS {name}" for name, sql in d_parsed.items()]
        parsed.append(f"{out_f} AS out_f")
        bad_l = ""
        if self.csv is not None:
            parsed.append(f"{self.csv.bad} AS bad_l")
            bad_l = f"WHEN bad_l THEN {MALFORMED} "
        cls = (
            f"CASE {bad_l}WHEN out_f THEN {OUTSIDE_FILTER} WHEN bad_u THEN {NULL_UNIT} "
            f"WHEN {bad_d} THEN {INVALID_DOMAIN} ELSE {IN_DOMAIN} END"
        )
        kv = next(iter(self._dx[0].values()))
        b = spec.bounds.max_records_per_unit
        k = spec.bounds.max_keys_per_unit
        c = spec.bounds.max_records_per_key
        self.params["dp_keys"] = "keys"
        kc = "eu IS NOT NULL" + (
            f" AND row_number() OVER (PARTITION BY eu, kv ORDER BY p) <= {c}" if c else ""
        )
        kk = "kc" + (
            " AND dense_rank() OVER (PARTITION BY CASE WHEN kc THEN eu END ORDER BY "
            f"hash(hash($dp_salt::UBIGINT, $dp_keys, eu, kv)) ASC, kv ASC) <= {k}"
            if k
            else ""
        )
        kept = "kk" + (f" AND rb <= {b}" if b else "")
        self.flags = ("kc", "kk")
        return f"""
WITH parsed AS (
  SELECT {", ".join(parsed)} FROM {self.source}
), r0 AS (
  SELECT c0 AS cls, p, CASE WHEN c0 = {IN_DOMAIN} THEN u END AS eu,
         CASE WHEN c0 = {IN_DOMAIN} THEN {kv} END AS kv
  FROM (SELECT *, {cls} AS c0 FROM parsed)
), r1 AS (SELECT *, {kc} AS kc FROM r0
), r2 AS (SELECT *, {kk} AS kk FROM r1
), r3 AS (SELECT *, row_number() OVER (PARTITION BY eu ORDER BY kk DESC, p ASC) AS rb FROM r2
), r4 AS (
  SELECT CASE WHEN eu IS NULL THEN -cls WHEN {kept} THEN 0 ELSE {DROPPED} END AS g,
         CASE WHEN eu IS NOT NULL AND {kept} THEN kv END AS kv,
         eu IS NOT NULL AND rb = 1 AS first_u, kc, kk
  FROM r3
)
SELECT g, kv, count(*) AS n, count(*) FILTER (WHERE first_u) AS units,
       count(*) FILTER (WHERE kc) AS n_c, count(*) FILTER (WHERE kk) AS n_k
FROM r4 GROUP BY g, kv"""

    def _fast(self, sql: str, unit_range: tuple[int, int], ok: str, b: int) -> str:
        """The one-key sort for counts (see :meth:`build`).

        ``s = slot << 64 | pk`` (a ``UHUGEINT``) with ``slot = unit − min`` and ``pk`` the
        general path's key-in-priority ``(p >> kb) << kb | key``: the order of a unit's rows
        is *exactly* the general path's, so the kept records are the same, bit for bit, for
        every source — the column's ``min`` only shifts the slots, and no property of the
        source decides anything (an earlier version truncated the priority by the span of
        the ids, so one unit with an extreme id changed how every unit's ties were broken).
        Rows outside the domain sit in the extra slot ``span`` with their class code.
        """
        lo, hi = unit_range
        span = hi - lo + 1  # slots 0 … hi − lo for units; slot `span` for other rows
        kb = self.key_bits  # as on the general path
        t = self.types.get(self.spec.unit.column, "").upper()
        diff = f"(u - {lo})" if t == "UBIGINT" else f"(u::HUGEINT - ({lo}))"
        mask, cmask = (1 << kb) - 1, (1 << _CLASS_BITS) - 1
        pk = f"(((p >> {kb}) << {kb}) | key::UBIGINT)"
        other = f"({span}::UHUGEINT << 64)"
        malformed = f"WHEN bad_l THEN {other} | {MALFORMED}" if self.csv else ""
        sql += f""", s0 AS (
  SELECT CASE WHEN {ok} THEN ({diff}::UHUGEINT << 64) | {pk}::UHUGEINT
              {malformed}
              WHEN out_f THEN {other} | {OUTSIDE_FILTER}
              WHEN bad_u THEN {other} | {NULL_UNIT}
              WHEN bad_d THEN {other} | {INVALID_DOMAIN}
              WHEN bad_v THEN {other} | {INVALID_VALUE}
              ELSE {other} | {OUTSIDE} END AS s
  FROM keyed
), sb AS (
  SELECT s, (lag(s >> 64, {b}) OVER w IS DISTINCT FROM s >> 64) AS kept,
         (lag(s >> 64, 1) OVER w IS DISTINCT FROM s >> 64) AS first_u
  FROM s0 WINDOW w AS (ORDER BY s ASC)
)
SELECT CASE WHEN s >> 64 = {span} THEN -((s & {cmask})::BIGINT)
            WHEN kept THEN (s & {mask})::BIGINT ELSE {DROPPED} END AS g,
       s >> 64 <> {span} AND first_u AS first_u
FROM sb"""
        self.flags = ()
        return sql

    def _kernel(self, sql: str, ok: str, cls: str) -> str:
        """The rows for :mod:`dpgauss.release.engines.unit_topb`: the unit (integer ids as their
        64-bit pattern, signed types as ``BIGINT``, unsigned as ``UBIGINT``: one type per
        column, so injective; string ids as they are), the record's priority ``p`` and
        ``cls``: an in-domain row's key, else minus its class code (``INTEGER`` when every
        key fits one, else ``BIGINT``), none of them NULL.  The kernel makes the general
        path's key-in-priority ``pk = (p >> kb) << kb | key`` itself: in SQL, ``pk`` and a
        class column of their own took DuckDB 0.04 s more CPU at 20 M rows
        (``docs/benchmarks.md``)."""
        t = self.types.get(self.spec.unit.column, "").upper()
        if t == "VARCHAR":
            unit = "u ELSE ''"
        else:
            unit = f"u::{'UBIGINT' if t.startswith('U') else 'BIGINT'} ELSE 0"
        kind = "INTEGER" if self.plan.domain.size <= 2**31 - 1 else "BIGINT"
        return (
            sql
            + f"""
SELECT CASE WHEN {ok} THEN {unit} END AS u, p, ({cls})::{kind} AS k
FROM keyed"""
        )

    def final(self, rows_sql: str) -> str:
        """Per group ``g`` of the bounded rows: rows, units, rows left after c and k, sums."""
        n_c = "count(*) FILTER (WHERE kc)" if "kc" in self.flags else "0"
        n_k = "count(*) FILTER (WHERE kk)" if "kk" in self.flags else "0"
        s = "kahan_sum(v)" if self.has_value else "NULL::DOUBLE"
        return f"""
SELECT g, count(*) AS n, count(*) FILTER (WHERE first_u) AS units, {n_c} AS n_c,
       {n_k} AS n_k, {s} AS s
FROM ({rows_sql}) GROUP BY g"""

    # -------------------------------------------------------------- expressions

    def _hashed(self, names: list[str]) -> str:
        """The columns ``names`` as the record priority hashes them: each by its value (an
        ENUM by its text, not by its code: issue #25, finding 2)."""
        out = []
        for n in names:
            c = quote_ident(n)
            out.append(
                f"CAST({c} AS VARCHAR)" if self.types.get(n, "").upper().startswith("ENUM(") else c
            )
        return ", ".join(out)

    def _priority(self) -> str:
        """``hash(hash(salt, record columns))``: every column by default; with
        ``record_columns``, those plus the unit, domain and value columns, so that equal
        priorities mean records that are interchangeable in the aggregate."""
        cols = self.spec.bounds.record_columns
        if cols is None and self.csv is not None:
            args = self.csv.line  # a CSV record's content is its line (csv_format, rule 6)
        elif cols is None:  # every column of the source, in its order
            args = self._hashed(list(self.types))
        else:
            spec = self.spec
            wanted = [*cols, spec.unit.column, *spec.domain.columns]
            if spec.statistic.column is not None:
                wanted.append(spec.statistic.column)
            args = self._hashed(list(dict.fromkeys(wanted)))
        return f"hash(hash($dp_salt::UBIGINT, {args}))"

    def _filter(self) -> str:
        """The condition "outside the ``[filter]`` window" (missing or unparseable: outside)."""
        f = self.spec.filter
        if f is None:
            return "false"
        t = "TIMESTAMP" if f.kind == "timestamp" else "DOUBLE"
        x = (
            self._timestamp(f.column)
            if f.kind == "timestamp"
            else f"TRY_CAST({quote_ident(f.column)} AS {t})"
        )
        if f.kind == "timestamp" and self.types.get(f.column, "").upper() == "TIMESTAMP_NS":
            # compared in nanoseconds: a cast to microseconds would round 00:59:59.9999999
            # up into a window that starts at 01:00
            t, x = "TIMESTAMP_NS", quote_ident(f.column)
        conds = []
        for key, op, name in (("start", ">=", "dp_f0"), ("stop", "<", "dp_f1")):
            b = f.bound(key)
            if b is not None:
                self.params[name] = b
                conds.append(f"{x} {op} ${name}::{t}")
        return f"NOT coalesce({' AND '.join(conds)}, false)"

    def _timestamp(self, column: str) -> str:
        """The column as a TIMESTAMP, as both engines read it: text only when it has the
        grammar of :data:`keymap.TIMESTAMP_TEXT` (then ``TRY_CAST``), an instant
        (``TIMESTAMPTZ``) as its UTC wall time, other types cast."""
        c = quote_ident(column)
        t = self.types.get(column, "").upper()
        if t.startswith("ENUM("):
            c, t = f"CAST({c} AS VARCHAR)", "VARCHAR"
        if t == "VARCHAR":
            self.params["dp_ts_re"] = TIMESTAMP_TEXT
            # trimmed: DuckDB casts '2020-01-02 03:04 ' but not '2020-01-02 ' (Spark both)
            return (
                f"CASE WHEN regexp_full_match({c}, $dp_ts_re) "
                f"THEN TRY_CAST(trim({c}, {_literal(schema.WS_CHARS)}) AS TIMESTAMP) END"
            )
        if t in ("TIMESTAMP WITH TIME ZONE", "TIMESTAMPTZ"):
            # an instant: its wall time in UTC, whatever the session's TimeZone (a cast
            # would take the session's zone, and one record could fall in two periods:
            # the series review, finding 1)
            return f"timezone('UTC', {c})"
        return f"TRY_CAST({c} AS TIMESTAMP)"

    def _double(self, column: str) -> str:
        return f"TRY_CAST({quote_ident(column)} AS DOUBLE)"

    def _time_micros(self, column: str) -> str:
        if self.types.get(column, "").upper() == "TIMESTAMP_NS":
            # floor to the microsecond, exactly (a cast would round up into the next bin)
            ns = f"epoch_ns({quote_ident(column)})"
            return f"({ns} - ((({ns}) % 1000) + 1000) % 1000) // 1000"
        return f"epoch_us({self._timestamp(column)})"

    def _wide(self, c: str, t: str) -> dict[str, str]:
        """HUGEINT and UHUGEINT: an exact integer below 10^38 in magnitude, beyond it the
        double it equals exactly (if any)."""
        big = 10**38
        small = f"{c} < CAST('{big}' AS {t})" + (
            f" AND {c} > CAST('-{big}' AS {t})" if t == "HUGEINT" else ""
        )
        exact = f"TRY_CAST(TRY_CAST({c} AS DOUBLE) AS {t}) = {c}"
        return {
            "int": f"CASE WHEN {small} THEN CAST({c} AS HUGEINT) END",
            "dbl": f"CASE WHEN NOT ({small}) AND {exact} THEN CAST({c} AS DOUBLE) END",
        }

    def _domain_key(self) -> tuple[str, str]:
        """(joins, key expression) for the keyed CTE; a NULL key is outside the domain.

        Exact (:mod:`dpgauss.release.domains.keys`): a range's key is computed in integer or
        error-free double arithmetic, never outside ``0 … n − 1``; a values domain joins each
        channel of the record with the keys of that kind (each at most once).  Several axes:
        ``Σ kᵢ·sᵢ`` (:mod:`dpgauss.release.domains.key_domain`), NULL when any axis key is.
        """
        joins, keys = [], []
        axes = self.plan.domain.axes
        for i, part in enumerate(self.spec.domain.axes):
            j, k = self._axis_key(i, part)
            joins += j
            keys.append(k)
        if len(keys) == 1:
            return " ".join(joins), keys[0]
        sizes = [a.size for a in axes]
        terms = []
        for i, k in enumerate(keys):
            stride = math.prod(sizes[i + 1 :])
            terms.append(f"({k})::BIGINT" + (f" * {stride}" if stride != 1 else ""))
        return " ".join(joins), " + ".join(terms)

    def _axis_key(self, i: int, d: DomainSpec) -> tuple[list[str], str]:
        x = suffix(i)
        if d.locates:
            self._register_udfs(i)
            return [], f"nullif(dp_nearest_{self.tag}{x}(la{x}, lo{x}), -1)"
        refs = self._dx[i]
        if d.kind == "range":
            return [], self._range_key(i, d)
        duck = _duckdb()
        import pyarrow as pa

        col = self._column(d)
        rows: dict[str, list[Any]] = {"ch": [], "v": [], "f": [], "idx": []}
        for ch, found in self._value_keys(i, d).items():
            for v, k in found:
                rows["ch"].append(ch)
                rows["v"].append(None if ch == "dbl" else str(v))
                rows["f"].append(float(v) if ch == "dbl" else None)
                rows["idx"].append(k)
        table = pa.table(
            {
                "ch": pa.array(rows["ch"], pa.string()),
                "v": pa.array(rows["v"], pa.string()),
                "f": pa.array(rows["f"], pa.float64()),
                "idx": pa.array(rows["idx"], pa.int64()),
            }
        )
        name = f"dp_domain_{self.tag}{x}"
        try:
            self.con.register(name, table)
        except duck.Error as exc:  # pragma: no cover - defensive
            raise EngineError(f"duckdb: {_one_line(exc)}") from None
        joins, keys = [], []
        for ch, ref in refs.items():
            big = "BIGINT" if ch == "int" and col.fits64 else "HUGEINT"
            val = {"str": "v", "dbl": "f"}.get(ch, f"CAST(v AS {big})")
            alias = f"dom{x}_{ch}"
            joins.append(
                f"LEFT JOIN (SELECT {val} AS val, idx FROM {name} WHERE ch = '{ch}') {alias} "
                f"ON {alias}.val = {ref}"
            )
            keys.append(f"{alias}.idx")
        key = keys[0] if len(keys) == 1 else f"coalesce({', '.join(keys)})"
        return joins, key if keys else "NULL::BIGINT"

    def _register_udfs(self, i: int = 0) -> None:
        duck = _duckdb()
        import pyarrow as pa

        mapper = self.plan.domain.axes[i].mapper
        assert mapper is not None
        x = suffix(i)

        def as_numpy(a: Any) -> np.ndarray:
            arr = a.to_numpy(zero_copy_only=False) if hasattr(a, "to_numpy") else np.asarray(a)
            return np.asarray(arr, dtype=np.float64)

        def nearest(lat: Any, lon: Any) -> Any:
            return pa.array(mapper.nearest(as_numpy(lat), as_numpy(lon)), type=pa.int64())

        def spread(lat: Any, lon: Any) -> Any:
            assert isinstance(mapper, GraphMapper)  # called for kde only: a graph's mapper
            offsets, nodes, weights = mapper.spread(as_numpy(lat), as_numpy(lon))
            entries = pa.StructArray.from_arrays(
                [pa.array(nodes, pa.int64()), pa.array(weights, pa.float64())], names=["k", "w"]
            )
            return pa.ListArray.from_arrays(pa.array(offsets.astype(np.int32)), entries)

        double = duck.sqltype("DOUBLE")
        known = self.con.execute(
            "SELECT count(*) FROM duckdb_functions() WHERE function_name = $f",
            {"f": f"dp_nearest_{self.tag}{x}"},
        ).fetchall()[0][0]
        if known:  # registered by an earlier query of this aggregation
            return
        try:
            self.con.create_function(
                f"dp_nearest_{self.tag}{x}",
                nearest,
                [double, double],
                duck.sqltype("BIGINT"),
                type="arrow",
            )
            if mapper.mapping == "kde":
                self.con.create_function(
                    f"dp_spread_{self.tag}",
                    spread,
                    [double, double],
                    duck.sqltype("STRUCT(k BIGINT, w DOUBLE)[]"),
                    type="arrow",
                )
        except duck.Error as exc:  # pragma: no cover - defensive
            raise EngineError(f"duckdb: {_one_line(exc)}") from None
