"""The release spec: a small declarative description of one release, as TOML or dataclasses.

A spec says where the records are, who the privacy unit is, which public keys are released,
what is computed per key, how each unit's contribution is bounded, the privacy guarantee,
the denoiser and the output::

    [source]
    path = "trips.csv"            # CSV or Parquet, glob allowed; or table = "trips" + types
    [unit]
    column = "hack_license"       # the privacy unit: one driver
    [domain]
    kind = "values"               # or "range" (start, stop, step) or "graph"
    column = "zone"
    values = [0, 1, 2]
    [statistic]
    kind = "count"                # or "sum" / "mean" with column, lower, upper
    [bounds]
    max_records_per_unit = 5      # and/or max_keys_per_unit, max_records_per_key
    [privacy]
    epsilon = 1.0
    delta = 1e-6
    secure = true
    ledger = "budget.sqlite"
    dataset = "trips"
    [denoise]
    method = "auto"
    [output]
    path = "release.csv"

:func:`load_spec` reads a TOML file (``tomllib``), :meth:`ReleaseSpec.from_dict` a dict of the
same shape; the dataclasses can also be built directly.  Every check raises ``ValueError`` (or
``TypeError`` for a wrong type) with a message that names the TOML key, e.g.
``[bounds] max_records_per_unit must be an integer >= 1; got 0``.  Unknown keys and tables are
errors (a misspelt bound must not be silently ignored).

Relative paths (source, ledger, output) are used as given, i.e. relative to the current
working directory, like the ``dpgauss budget`` commands.

**Policies.**  ``on_malformed``, ``on_null`` and ``on_invalid`` are the data owner's checks:
``"check_fails"`` makes ``dpgauss check`` (:mod:`dpgauss.release.check`) exit with status 1 when
rows of that class exist.  A *release* always drops such rows and counts them in its
confidential diagnostics, whatever the policy: a release is a total function of the data,
and a refusal that depends on the records would disclose them for free.

Every table and key
-------------------
``[source]``
    ``path`` (a path or glob, or a list of them), ``table`` (a table or view name) or
    ``bundled = "trips"`` (the TaxiVis trips shipped with dpgauss) — exactly one.
    ``format`` = ``"auto"`` (by extension: ``.parquet``/``.pq`` is Parquet, anything else CSV),
    ``"csv"`` or ``"parquet"``.  ``database``: a DuckDB database file holding ``table``
    (opened read-only).  ``types``: the declared schema, a table ``column = "type"``
    (``int64``, ``float64``, ``string``, ``bool``, ``date``, ``timestamp``, … —
    :mod:`dpgauss.release.schema`): every column the release reads, each taken in its
    declared type, never in a type inferred from the records; required for a ``table`` (a
    table, a view, a DataFrame), allowed for every source.  CSV only (the format is
    :mod:`dpgauss.release.engines.csv_format`): ``csv`` = ``"rfc4180"`` (the default: the
    file's writer quotes as RFC 4180 says, so a quoted field may hold line breaks and a
    record ends at an LF outside quotes — the data owner asserts it) or ``"lines"`` (one
    record per line, for writers that never put a line break in a field: a line with a stray
    quote is then exactly one malformed line); ``delimiter``
    (default ``","``; one character, not ``"``, CR, LF or U+FFFD), ``header`` (default true:
    the first line of the first file names the columns, and every file starts with that same
    line), ``columns`` (the list of column names: required with ``header = false``; with a
    header it must equal it), ``on_malformed`` = ``"drop"`` (lines that are not records —
    invalid UTF-8, an unterminated quote, too many or too few fields, … — are skipped and
    counted; the default) or ``"check_fails"`` (``dpgauss check`` fails; see *Policies*).
    ``crs``: the CRS of the records' coordinates (``"EPSG:2263"``; pyproj, the ``geo`` extra),
    for a graph or regions domain placed by ``lat``/``lon`` (a projected CRS: ``lon`` the
    easting column, ``lat`` the northing; no ``bbox``); default WGS84 degrees
    (:mod:`dpgauss.release.domains.crs`).
``[unit]``
    ``column``; ``on_null`` = ``"drop"`` (rows without a unit id are dropped and counted; the
    default) or ``"check_fails"`` (``dpgauss check`` fails; see *Policies*).
``[domain]``
    The public set of output keys; every key is released, zeros included, and records that map
    to no key are dropped and counted.  ``kind``:

    * ``"values"``: ``column`` and ``values`` (a non-empty list of integers, numbers or
      strings, distinct as numbers: ``1`` and ``1.0`` are the same key).  A record's key is the
      one equal to its value of ``column`` in exact arithmetic (string keys: its text); the
      rules for every column type are in :mod:`dpgauss.release.domains.keys`.  Or ``values_from =
      "keys.csv"``: a CSV or Parquet file of one column of keys, for large domains
      (:mod:`dpgauss.release.domains.key_files`).
    * ``"range"``: ``column``, ``start``, ``stop``, ``step`` (default 1), ``|start|`` and
      ``|stop|`` at most 1e36: the bins ``[start + i·step, start + (i+1)·step)`` for
      ``i = 0 … ⌈(stop − start)/step⌉ − 1`` (at most 50,000,000), in exact rational arithmetic on
      the values as written; the key of a bin is its lower edge (an integer when ``start`` and
      ``step`` are integers, else the edge rounded once to the nearest double — a step too
      fine for those doubles to be distinct is refused).  Values outside ``[start, stop)`` are
      outside the domain.
    * ``"graph"``: the nodes of a public graph, ``graph = "manhattan"`` (the 4,091
      junctions of :func:`dpgauss.datasets.load_manhattan_graph`), ``"manhattan-pruned"``
      (3,907, dead ends pruned), ``graph = "city.graphml"`` (a GraphML file as OSMnx writes
      it; node attributes ``y``/``x``, or ``node_columns = { lat = "…", lon = "…" }``), or
      ``nodes = "nodes.csv"`` (columns ``id``, ``lat``, ``lon``; CSV or Parquet) with
      ``edges = "edges.csv"`` (columns ``u``, ``v``), other names with ``node_columns = { id
      = "…", lat = "…", lon = "…" }`` and ``edge_columns = { u = "…", v = "…" }`` — the keys are
      then the file's node ids (:mod:`dpgauss.release.domains.graph_files`); ``lat``, ``lon``
      (the records' columns, degrees); ``mapping`` =
      ``"nearest"`` (the nearest junction within ``cutoff`` metres, default 150) or ``"kde"``
      (the record's unit mass spread over its ``neighbors`` nearest junctions within
      ``cutoff`` — default 3 × ``bandwidth`` — with Gaussian kernel weights of ``bandwidth``
      metres, in [1e-150, 1e150], summing to 1); ``bbox = [lat_min, lat_max, lon_min,
      lon_max]``: coordinates outside it are malformed (always: outside [−90, 90] × [−180,
      180], for records in degrees).  ``crs``: the CRS of a graph file's or node table's
      coordinates (default: a GraphML graph's ``crs`` attribute, else WGS84 degrees with a
      ``CrsWarning``; :mod:`dpgauss.release.domains.crs`).

    * ``"regions"``: the features of a GeoJSON FeatureCollection, ``regions = "file.geojson"``
      (ids from ``id_property``, default ``"id"``) or ``"nyc-neighbourhoods"`` (bundled);
      records placed by point in polygon on ``lat``, ``lon`` (a point on a shared border goes
      to the first region of the file) or by a ``column`` holding the region id; structure
      ``adjacency = "queen"`` (default), ``"rook"``, ``"none"``, or ``edges = "file.csv"``
      (columns ``u``, ``v``; ``edge_columns`` to rename) (:mod:`dpgauss.release.domains.regions`);
      ``crs`` (default: the file's legacy ``crs`` member, else WGS84 as RFC 7946 says);
      ``name_property``: the feature property written as each region's ``name`` column.
    * ``"grid"``: ``x`` and ``y``, each a table ``{ column, start, stop, step }`` of a range;
      the keys are the cells in row-major order (``y`` outer), the structure the lattice.
    * ``"product"``: ``[[domain.parts]]``, two or more values, range, graph (``nearest``
      mapping) or regions tables, each with an optional ``name`` (its output column); the
      keys are every combination, the first part outermost; the structure the Cartesian
      product graph (:mod:`dpgauss.release.domains.key_domain`).

    A ``range`` over a timestamp column: ``start``/``stop`` TOML datetimes or ISO strings
    (no time zone), ``step`` a duration (``"15min"``, ``"1h"``, ``"1d"``; units ``us``,
    ``ms``, ``s``, ``min``, ``h``, ``d``, ``w``); the keys are written as
    ``"2013-01-13 00:00:00"``.

    ``on_invalid`` = ``"drop"`` (default) or ``"check_fails"``: rows whose domain column (or
    coordinates) is missing, unparseable or out of range (for every part at once).
``[unit]``
    ``column`` (the privacy unit id), ``on_null`` (a policy for rows without one) and
    ``scope`` = ``"all"`` (default: the guarantee protects a unit over every release of the
    dataset, the periods of a series included) or ``"period"`` (it protects a unit within
    one period of the ``[series]``: the periods are disjoint, so a dataset's budget is spent
    per period — parallel composition, docs/ledger.md; the ledger's budget must say so too).
``[series]`` (optional)
    ``column`` (a timestamp column), ``period`` (a duration: ``"1h"``, ``"1d"``, ``"1w"``) and
    ``origin`` (default ``1970-01-01 00:00``) and ``history`` (default 0: the number of
    earlier, published periods the period is denoised with, :mod:`dpgauss.release.history`,
    whose revised denoised values are written beside the table): the release is one period
    ``[start, start + period)``, named on the command line (``--period``) or by
    ``run_release(..., period=...)``; only its records are read, each unit bounded within it
    (:mod:`dpgauss.release.series`).  A ``[filter]`` beside it must be on the same column
    (the windows intersect).
``[filter]`` (optional)
    A public window on one column: ``column``, ``start`` and/or ``stop``; only records with
    ``start <= value < stop`` take part (e.g. one hour of pickups).  Timestamps are TOML
    datetimes or ISO strings (``"2013-01-05 18:00"``), else numbers.  Rows outside the window
    — or whose value is missing or unparseable — are counted as ``outside_filter`` and take
    no further part (they are tested before every other class).  The window is public and
    fixed before the data is seen, so it does not change the sensitivity.
``[statistic]``
    ``kind`` = ``"count"``, ``"sum"`` or ``"mean"``; for sum and mean ``column`` and the public
    clamping bounds ``lower < upper`` (every value is clamped to them), ``on_invalid`` =
    ``"drop"`` (default) or ``"check_fails"`` for missing, unparseable or non-finite values.
``[bounds]``
    ``max_records_per_unit`` (b), ``max_keys_per_unit`` (k, L0), ``max_records_per_key``
    (c, L∞): integers in [1, 2**53]; b, or c, must be given (k alone bounds nothing).  The L2
    sensitivity derived from them is in :mod:`dpgauss.release.sensitivity`.
    ``record_columns``: the columns that tell a unit's records apart, hashed into each record's
    sampling priority (default: every column of the source).
``[privacy]``
    ``epsilon`` (in [0, 1e20]) and ``delta`` (in (0, 1)), or ``sigma`` (the noise standard
    deviation; ``delta`` is then still needed to state the guarantee; more noise than (0,
    ``delta``) needs is kept, with the smaller delta it gives); the release's sensitivities
    and noise (in the released values' units) must lie in [1e-100, 1e100]; ``secure``
    (default true: the secure lattice sampler fed by the OS CSPRNG; false = floating-point
    noise from a seeded generator, for experiments only, with optional ``seed``); ``ledger``
    (the budget ledger file; or the ``DPGAUSS_LEDGER`` environment variable or ``--ledger``);
    ``dataset`` (its dataset id); ``label`` (optional text recorded with the charge).
``[denoise]``
    ``method`` = ``"none"``, ``"auto"`` (default; SURE selection, with the graph or the 1-D
    grid of the domain), or one of ``"james_stein"``, ``"soft_threshold"``,
    ``"hard_threshold"``, ``"wavelet"`` (range domains), ``"graph_wavelet"``,
    ``"trend_filter"`` (graph or range domains); ``params`` = a table of keyword arguments
    passed to it (e.g. ``params = { order = 1 }``); ``nonnegative`` (default: true for a
    count, and for a sum or mean whose ``[statistic] lower`` is ``>= 0``; false otherwise):
    the denoised values and their lower bounds are then never negative (the positive part
    of the estimate, which SURE and ``auto`` take into account; ``false`` turns it off;
    ``true`` is refused for a statistic that can be negative, and for ``method = "none"``,
    the raw release, which is never clipped).
``[output]``
    ``path``; ``format`` = ``"auto"`` (``.parquet``/``.pq`` → Parquet, else CSV), ``"csv"`` or
    ``"parquet"``; ``level`` (the interval level, default 0.95); ``overwrite`` (default false:
    an existing output is never replaced); ``plot`` (default true: for a graph or range
    domain, a PNG of the released and denoised values at ``<path>.png``, when matplotlib is
    installed).  A JSON report is written to ``<path>.report.json``.
``[[levels]]`` (optional; zoom levels, finest to coarsest, after ``[domain]``, the finest)
    Each table: ``name`` (required, distinct, a word of letters, digits, ``_``, ``-``, a
    letter first, not a column of the finest table: it names ``<path>.<name>.csv`` and the
    finest table's column of each key's parent) and exactly one of ``regions`` (a bundled
    name, ``"nyc-neighbourhoods"``, or a GeoJSON file, with ``id_property``,
    ``name_property``, ``crs`` as in ``[domain]``: each fine key goes to the region holding
    its coordinates — a graph node's, a grid cell's centre, a fine region's centroid; a key
    in no region goes to the parent ``"__unplaced__"``, never dropped), ``map`` (a CSV file
    with the columns ``fine_key,parent``: every key of the domain exactly once, as written
    in the table's ``key`` column) or ``kind = "total"`` (one parent, ``"total"``).  Each
    level's parents must nest in the next one's.  For a count or a sum, with ``[privacy]
    epsilon``; ``[privacy] level_weights`` (one positive number per level, the finest first;
    normalised; default equal) splits the μ-GDP budget between the levels, and the release
    is charged once for all of them (:mod:`dpgauss.release.levels_plan`).
"""

from __future__ import annotations

import math
import numbers
import re
import tomllib
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field, fields, replace
from datetime import date, datetime, time
from pathlib import Path
from typing import Any, Literal, overload

from ..denoise.registry import DENOISERS as _REGISTRY
from .domains.crs import parse_crs
from .domains.discovered import check_spec as check_discovered
from .domains.graph_files import BUNDLED_GRAPHS
from .domains.keys import MAX_KEYS, RangeBins, WrittenFloat, brief
from .engines.csv_format import MODES as CSV_MODES
from .engines.csv_format import delimiter_problem
from .schema import declared_types

__all__ = [
    "BoundsSpec",
    "DenoiseSpec",
    "DomainSpec",
    "FilterSpec",
    "LevelSpec",
    "OutputSpec",
    "PrivacySpec",
    "ReleaseSpec",
    "SeriesSpec",
    "SourceSpec",
    "StatisticSpec",
    "UnitSpec",
    "load_spec",
]

POLICIES = ("drop", "check_fails")
GRAPHS = BUNDLED_GRAPHS
DENOISERS = tuple(_REGISTRY)
BUNDLED = ("trips",)
_MAX_KEYS = MAX_KEYS
#: The bounds b, k, c (and kde neighbors) are integers in [1, _MAX_COUNT]: the engines' window
#: offsets and the sensitivity arithmetic stay exact (2**53 keeps every bound exactly a double).
_MAX_COUNT = 2**53
#: [privacy] epsilon is at most this: beyond it the calibration and the secure sampler have no
#: finite answer (sigma/sensitivity < 1e-10 already; a larger epsilon protects nothing).
MAX_EPSILON = 1e20
#: kde bandwidth (metres) in [_MIN_BANDWIDTH, _MAX_BANDWIDTH]: 2·bandwidth² stays a positive
#: finite double, so the kernel weights are well defined.
_MIN_BANDWIDTH, _MAX_BANDWIDTH = 1e-150, 1e150


# ------------------------------------------------------------------------------ checks


def _fail(where: str, key: str, rule: str, value: object) -> ValueError:
    return ValueError(f"[{where}] {key} must be {rule}; got {brief(value)}")


def _type_fail(where: str, key: str, rule: str, value: object) -> TypeError:
    return TypeError(f"[{where}] {key} must be {rule}; got {type(value).__name__} {brief(value)}")


def _text(where: str, key: str, value: object, *, optional: bool = False) -> str | None:
    if value is None and optional:
        return None
    if not isinstance(value, str):
        raise _type_fail(where, key, "a string", value)
    if not value.strip():
        raise _fail(where, key, "a non-empty string", value)
    return value


def _required(where: str, key: str, value: object, what: str) -> None:
    if value is None or value == "":
        raise ValueError(f"[{where}] {key} is required ({what})")


def _choice(where: str, key: str, value: object, allowed: tuple[str, ...]) -> str:
    if not isinstance(value, str):
        raise _type_fail(where, key, f"one of {', '.join(map(repr, allowed))}", value)
    if value not in allowed:
        raise _fail(where, key, f"one of {', '.join(map(repr, allowed))}", value)
    return value


def _policy(where: str, key: str, value: object) -> str:
    """A policy: ``"drop"`` or ``"check_fails"`` (module docstring, *Policies*)."""
    if value == "fail":  # its name before 0.2, which promised a refusal no release makes
        raise ValueError(
            f"[{where}] {key} = 'fail' is now named 'check_fails': a release always drops "
            "and counts such rows; only `dpgauss check` fails on them"
        )
    return _choice(where, key, value, POLICIES)


@overload
def _real(where: str, key: str, value: object, *, optional: Literal[False] = ...) -> float: ...
@overload
def _real(where: str, key: str, value: object, *, optional: bool) -> float | None: ...
def _real(where: str, key: str, value: object, *, optional: bool = False) -> float | None:
    if value is None and optional:
        return None
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise _type_fail(where, key, "a number", value)
    try:
        x = float(value)
    except OverflowError:  # an integer beyond the largest double
        raise _fail(where, key, "a finite number (at most 1.8e308 in magnitude)", value) from None
    if not math.isfinite(x):
        raise _fail(where, key, "a finite number", value)
    return x


def _positive(where: str, key: str, value: object, *, optional: bool = False) -> float | None:
    x = _real(where, key, value, optional=optional)
    if x is not None and not x > 0:
        raise _fail(where, key, "a number > 0", value)
    return x


def _count(where: str, key: str, value: object, *, optional: bool = False) -> int | None:
    if value is None and optional:
        return None
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        if isinstance(value, float) and value.is_integer():
            value = int(value)
        else:
            raise _type_fail(where, key, "an integer >= 1", value)
    if value < 1:
        raise _fail(where, key, "an integer >= 1", value)
    if value > _MAX_COUNT:  # type: ignore[operator]  # typeshed's numbers.Integral has no __gt__
        raise _fail(where, key, "an integer in [1, 2**53]", value)
    return int(value)


def _flag(where: str, key: str, value: object) -> bool:
    if not isinstance(value, bool):
        raise _type_fail(where, key, "true or false", value)
    return value


def _columns(where: str, key: str, value: object) -> tuple[str, ...] | None:
    if value is None:
        return None
    if isinstance(value, str) or not isinstance(value, list | tuple):
        raise _type_fail(where, key, "a list of column names", value)
    out = tuple(_text(where, key, v) for v in value)
    if not out:
        raise _fail(where, key, "a non-empty list of column names", value)
    if len(set(out)) != len(out):
        raise _fail(where, key, "a list of distinct column names", value)
    return out  # type: ignore[return-value]


def _check_keys(where: str, data: Mapping[str, Any], cls: type) -> None:
    allowed = [f.name for f in fields(cls) if f.name != "where"]
    for key in data:
        if key not in allowed:
            raise ValueError(f"[{where}] unknown key {key!r} (allowed: {', '.join(allowed)})")


def _build(where: str, cls: type, data: object) -> Any:
    if not isinstance(data, Mapping):
        raise TypeError(f"[{where}] must be a table; got {type(data).__name__}")
    _check_keys(where, data, cls)
    return cls(**dict(data))


# -------------------------------------------------------------------------- sections


#: The refusal of a table source without ``[source] types``: a table's (or a view's, or a
#: registered DataFrame's) column types were decided by whoever built it, often from every
#: record (one missing id turns a pandas categorical of ints from BIGINT into DOUBLE), and a
#: type inferred from the data is a switch decided on the whole source (docs/security.md).
TABLE_NEEDS_TYPES = (
    '[source] table needs types, e.g. types = { uid = "int64", key = "string" }: every '
    "column the release reads, declared, because a table's column types (a view's, a "
    "DataFrame's dtypes) are a function of its records, and a type inferred from the data "
    "is a switch decided on the whole source (one missing value widens int64 to float64; "
    "docs/security.md)"
)


@dataclass(frozen=True)
class SourceSpec:
    """``[source]``: where the records are (exactly one of ``path``, ``table``, ``bundled``).

    ``types`` (column → declared type, :mod:`dpgauss.release.schema`) is the schema every
    column the release reads is taken in: required for a ``table`` source (a table, a view
    or a registered DataFrame: :data:`TABLE_NEEDS_TYPES`), allowed for every source.  CSV
    sources (:mod:`dpgauss.release.engines.csv_format`) take ``delimiter``, ``header``,
    ``columns`` and ``on_malformed``.  ``columns`` lists the column names in order: required
    with ``header = false`` (the files then hold records only), optional with a header (it
    must then equal the header, which the engines check before anything is charged).
    ``crs``: the CRS of the records' coordinates (:mod:`dpgauss.release.domains.crs`; default
    WGS84 degrees).
    """

    path: str | tuple[str, ...] | None = None
    table: str | None = None
    bundled: str | None = None
    format: str = "auto"
    database: str | None = None
    delimiter: str = ","
    csv: str = "rfc4180"
    header: bool = True
    columns: tuple[str, ...] | None = None
    on_malformed: str = "drop"
    types: dict[str, str] | None = None
    crs: str | None = None

    def __post_init__(self) -> None:
        w = "source"
        if self.crs is not None:
            parse_crs(self.crs, "[source] crs")  # refused here, before any record is read
        object.__setattr__(self, "types", declared_types(self.types))
        given = [k for k in ("path", "table", "bundled") if getattr(self, k) is not None]
        if len(given) != 1:
            raise ValueError(
                "[source] needs exactly one of path, table or bundled"
                + (f"; got {', '.join(given)}" if given else "")
            )
        if isinstance(self.path, list | tuple):
            paths = tuple(_text(w, "path", p) for p in self.path)
            if not paths:
                raise _fail(w, "path", "a path, a glob or a non-empty list of them", self.path)
            object.__setattr__(self, "path", paths)
        elif self.path is not None:
            _text(w, "path", self.path)
        _text(w, "table", self.table, optional=True)
        if self.table is not None and self.types is None:
            raise ValueError(TABLE_NEEDS_TYPES)
        if self.bundled is not None:
            _choice(w, "bundled", self.bundled, BUNDLED)
        _choice(w, "format", self.format, ("auto", "csv", "parquet"))
        _text(w, "database", self.database, optional=True)
        if self.database is not None and self.table is None:
            raise ValueError("[source] database is only used with table")
        problem = delimiter_problem(self.delimiter)
        if problem is not None:
            raise _fail(w, "delimiter", problem, self.delimiter)
        _choice(w, "csv", self.csv, CSV_MODES)
        _flag(w, "header", self.header)
        object.__setattr__(self, "columns", _columns(w, "columns", self.columns))
        _policy(w, "on_malformed", self.on_malformed)
        try:
            csv = self.file_format == "csv"
        except ValueError:  # mixed Parquet and other paths: reported by file_format
            csv = False
        if self.columns is not None and not csv:
            raise ValueError("[source] columns applies to CSV sources only")
        if csv and not self.header and self.columns is None:
            raise ValueError(
                "[source] header = false needs columns = [...] (the column names, in order)"
            )

    @property
    def paths(self) -> tuple[str, ...]:
        """The paths (or globs) of a file source; empty for a table."""
        if self.bundled == "trips":
            from importlib import resources

            ref = resources.files("dpgauss.datasets").joinpath(
                "data", "taxivis_sample_trip_data_1.csv"
            )
            return (str(ref),)
        if self.path is None:
            return ()
        return self.path if isinstance(self.path, tuple) else (self.path,)

    @property
    def file_format(self) -> str | None:
        """``"csv"`` or ``"parquet"`` for file sources, None for a table."""
        if self.table is not None:
            return None
        if self.format != "auto":
            return self.format
        suffixes = {Path(p).suffix.lower() for p in self.paths}
        if suffixes and suffixes <= {".parquet", ".pq"}:
            return "parquet"
        if suffixes & {".parquet", ".pq"}:
            raise ValueError(
                "[source] path mixes Parquet and other files; set format = 'csv' or 'parquet'"
            )
        return "csv"


@dataclass(frozen=True)
class UnitSpec:
    """``[unit]``: the privacy unit id column and what to do with rows that have none."""

    column: str = ""
    on_null: str = "drop"
    scope: str = "all"

    def __post_init__(self) -> None:
        _required("unit", "column", self.column, "the column of the privacy unit id")
        _text("unit", "column", self.column)
        _policy("unit", "on_null", self.on_null)
        _choice("unit", "scope", self.scope, SCOPES)


@dataclass(frozen=True)
class DomainSpec:
    """``[domain]``: the public output keys and how a record maps to them."""

    kind: str = ""
    column: str | None = None
    values: tuple[Any, ...] | None = None
    values_from: str | None = None
    start: Any = None
    stop: Any = None
    step: Any = 1
    graph: str | None = None
    nodes: str | None = None
    edges: str | None = None
    node_columns: dict[str, str] | None = None
    edge_columns: dict[str, str] | None = None
    lat: str | None = None
    lon: str | None = None
    mapping: str = "nearest"
    bandwidth: float | None = None
    cutoff: float | None = None
    neighbors: int = 8
    bbox: tuple[float, float, float, float] | None = None
    regions: str | None = None
    id_property: str = "id"
    name_property: str | None = None
    crs: str | None = None
    adjacency: str | None = None
    x: Any = None
    y: Any = None
    parts: tuple[Any, ...] | None = None
    name: str | None = None
    on_invalid: str = "drop"
    other: bool = False
    where: str = field(default="domain", repr=False, compare=False)

    def __post_init__(self) -> None:
        w = self.where
        kinds = ("values", "range", "graph", "regions", "grid", "product", "discovered")
        _required(w, "kind", self.kind, ", ".join(map(repr, kinds)))
        _choice(w, "kind", self.kind, kinds)
        _policy(w, "on_invalid", self.on_invalid)
        own = {
            "values": {"column", "values", "values_from", "name"},
            "range": {"column", "start", "stop", "step", "name"},
            "graph": {
                "graph",
                "nodes",
                "edges",
                "node_columns",
                "edge_columns",
                "lat",
                "lon",
                "mapping",
                "bandwidth",
                "cutoff",
                "neighbors",
                "bbox",
                "crs",
                "name",
            },
            "regions": {
                "regions",
                "id_property",
                "name_property",
                "crs",
                "adjacency",
                "edges",
                "edge_columns",
                "lat",
                "lon",
                "column",
                "name",
            },
            "grid": {"x", "y"},
            "product": {"parts"},
            "discovered": {"column"},
        }
        defaults = {f.name: f.default for f in fields(self)}
        for other, keys in own.items():
            if other == self.kind:
                continue
            for key in sorted(keys - own[self.kind]):
                if getattr(self, key) != defaults[key]:
                    raise ValueError(f"[{self.where}] {key} does not apply to kind = {self.kind!r}")
        if self.name is not None:
            _text(w, "name", self.name)
            if w == "domain":
                raise ValueError(
                    "[domain] name applies to the parts of a product (the output's column)"
                )
        _flag(w, "other", self.other)
        if self.other and (w != "domain" or self.kind == "discovered"):
            raise ValueError(
                f"[{w}] other applies to a public domain's [domain] table (its keys known in "
                "advance), not to "
                + ("a discovered domain (every key found is a key)" if w == "domain" else "a part")
            )
        if self.other and self.kind == "graph" and self.mapping == "kde":
            raise ValueError(
                "[domain] other = true needs one key per record: not with mapping = 'kde' "
                "(a record outside the map has no node to spread over)"
            )
        if self.crs is not None:
            self._check_crs()
        if self.kind == "discovered":
            _text(w, "column", self.column)  # the rest: domains/discovered.check_spec
        elif self.kind == "grid":
            self._check_grid()
        elif self.kind == "product":
            self._check_product()
        elif self.kind == "regions":
            self._check_regions()
        elif self.kind == "values":
            _text(w, "column", self.column)
            if (self.values is None) == (self.values_from is None):
                raise ValueError(
                    f"[{w}] kind = 'values' needs exactly one of values (a list) and "
                    "values_from (a CSV or Parquet file of one column)"
                )
            if self.values_from is not None:
                _text(w, "values_from", self.values_from)
            else:
                self._check_values()
        elif self.kind == "range":
            _text(w, "column", self.column)
            if self.start is None or self.stop is None:
                raise ValueError(f"[{self.where}] kind = 'range' needs start and stop (and step)")
            if self._time_ends():
                self._check_time_range()
            else:
                RangeBins.of(self.start, self.stop, self.step, where=w)
        else:
            self._check_graph_source()
            _text(w, "lat", self.lat)
            _text(w, "lon", self.lon)
            _choice(w, "mapping", self.mapping, ("nearest", "kde"))
            _positive(w, "cutoff", self.cutoff, optional=True)
            if self.mapping == "kde":
                if self.bandwidth is None:
                    raise ValueError(
                        f"[{self.where}] bandwidth (metres) is required with mapping = 'kde'"
                    )
                bw = _positive(w, "bandwidth", self.bandwidth)
                if not _MIN_BANDWIDTH <= bw <= _MAX_BANDWIDTH:  # type: ignore[operator]
                    raise _fail(w, "bandwidth", "a number of metres in [1e-150, 1e150]", bw)
                object.__setattr__(self, "neighbors", _count(w, "neighbors", self.neighbors))
            else:
                if self.bandwidth is not None:
                    raise ValueError(f"[{self.where}] bandwidth applies to mapping = 'kde' only")
                if self.neighbors != 8:
                    raise ValueError(f"[{self.where}] neighbors applies to mapping = 'kde' only")
            if self.bbox is not None:
                self._check_bbox()

    def _check_crs(self) -> None:
        """``crs``: the CRS of a graph's or regions' file (:mod:`..domains.crs`), not of a
        bundled map (whose CRS is known)."""
        w = self.where
        bundled = self.graph in GRAPHS or (
            self.kind == "regions" and self.regions == "nyc-neighbourhoods"
        )
        if bundled:
            raise ValueError(
                f"[{w}] crs applies to a map in a file; the bundled "
                f"{self.graph or self.regions!r} is in WGS84 degrees"
            )
        parse_crs(self.crs, f"[{w}] crs")

    def _part(self, value: object, where: str) -> DomainSpec:
        if isinstance(value, DomainSpec):
            return replace(value, where=where)
        if not isinstance(value, Mapping):
            raise TypeError(f"[{where}] must be a table; got {type(value).__name__}")
        _check_keys(where, value, DomainSpec)
        part = DomainSpec(**dict(value), where=where)
        if part.on_invalid != "drop":
            raise ValueError(f"[{where}] on_invalid is set on [domain], for every part at once")
        return part

    def _check_grid(self) -> None:
        """``x`` and ``y``: two ranges (``column``, ``start``, ``stop``, ``step``)."""
        for axis in ("x", "y"):
            value = getattr(self, axis)
            if value is None:
                raise ValueError(
                    "[domain] kind = 'grid' needs x and y, each a table of column, start, stop "
                    "and step"
                )
            where = f"domain.{axis}"
            if isinstance(value, Mapping) and "kind" not in value:
                value = {"kind": "range", **value}
            part = self._part(value, where)
            if part.kind != "range":
                raise ValueError(f"[{where}] a grid's axis is a range; got kind = {part.kind!r}")
            object.__setattr__(self, axis, part)
        _check_names([self.y, self.x], "domain.{}", ("y", "x"))
        size = self.x.bins.size * self.y.bins.size
        if size > _MAX_KEYS:
            raise ValueError(f"[domain] the grid has {size:,} cells; at most {_MAX_KEYS:,} allowed")

    def _check_product(self) -> None:
        """``parts``: two or more values, range or graph domains; keys are all combinations."""
        parts = self.parts
        if isinstance(parts, str | Mapping) or not isinstance(parts, list | tuple):
            raise _type_fail("domain", "parts", "a list of domain tables ([[domain.parts]])", parts)
        if len(parts) < 2:
            raise ValueError("[domain] kind = 'product' needs at least two [[domain.parts]]")
        out, size, names = [], 1, []
        for i, value in enumerate(parts, start=1):
            part = self._part(value, f"domain.parts #{i}")
            if part.kind not in ("values", "range", "graph", "regions"):
                raise ValueError(
                    f"[domain.parts #{i}] a product's part is a values, range, graph or regions "
                    "domain; got "
                    f"kind = {part.kind!r}"
                    + (" (use two range parts)" if part.kind == "grid" else "")
                )
            if part.kind == "graph" and part.mapping == "kde":
                raise ValueError(
                    f"[domain.parts #{i}] mapping = 'kde' is not supported inside a product (a "
                    "record spread over several nodes would be spread over composite keys); use "
                    "mapping = 'nearest'"
                )
            out.append(part)
            names.append(part.output_name)
            size *= part.size
        if size > _MAX_KEYS:
            raise ValueError(
                f"[domain] the product has {size:,} keys; at most {_MAX_KEYS:,} allowed"
            )
        _check_names(out, "domain.parts #{}")
        for i, part in enumerate(out, start=1):
            if part.kind == "regions" and part.name_property is not None:
                col = f"{part.output_name}_name"
                if col in names or col in RESERVED_COLUMNS:
                    raise ValueError(
                        f"[domain.parts #{i}] its names (name_property) would be written as the "
                        f"column {col!r}, another part's or the release's: rename a part"
                    )
        object.__setattr__(self, "parts", tuple(out))

    def _check_regions(self) -> None:
        """``regions`` (a GeoJSON file or a bundled name), ``id_property``, the records'
        ``lat``/``lon`` or their region-id ``column``, and ``adjacency`` or ``edges``."""
        w = self.where
        _required(w, "regions", self.regions, "a GeoJSON file, or 'nyc-neighbourhoods'")
        _text(w, "regions", self.regions)
        _text(w, "id_property", self.id_property)
        _text(w, "name_property", self.name_property, optional=True)
        by_point = self.lat is not None or self.lon is not None
        if by_point == (self.column is not None):
            raise ValueError(
                f"[{w}] kind = 'regions' needs either lat and lon (records placed by point in "
                "polygon) or column (records that already hold the region id), not both"
            )
        if by_point:
            _text(w, "lat", self.lat)
            _text(w, "lon", self.lon)
        else:
            _text(w, "column", self.column)
        _text(w, "edges", self.edges, optional=True)
        if self.adjacency is not None:
            _choice(w, "adjacency", self.adjacency, ("queen", "rook", "none"))
            if self.edges is not None:
                raise ValueError(f"[{w}] adjacency and edges are two ways to say one thing: one")
        if self.edge_columns is not None and self.edges is None:
            raise ValueError(f"[{w}] edge_columns goes with edges (an edge table)")
        if self.edge_columns is not None:
            if not isinstance(self.edge_columns, Mapping) or set(self.edge_columns) - {"u", "v"}:
                raise _type_fail(w, "edge_columns", "a table with u and/or v", self.edge_columns)
            object.__setattr__(self, "edge_columns", dict(self.edge_columns))

    @property
    def locates(self) -> bool:
        """Whether records map by their coordinates (a graph, or regions by lat/lon)."""
        return self.kind == "graph" or (self.kind == "regions" and self.column is None)

    @property
    def matches(self) -> bool:
        """Whether records map by an exact match of a column with the keys (values, or
        regions by their id column)."""
        return self.kind == "values" or (self.kind == "regions" and self.column is not None)

    def _time_ends(self) -> bool:
        return any(isinstance(v, str | date | datetime) for v in (self.start, self.stop))

    def _check_time_range(self) -> None:
        """A range over a timestamp column: ISO or TOML datetimes, a duration step."""
        w = self.where
        ends = {}
        for key in ("start", "stop"):
            value = getattr(self, key)
            try:
                ends[key] = _timestamp(value)
            except (TypeError, ValueError):
                raise _type_fail(
                    w,
                    key,
                    "a number, or for a timestamp range a timestamp (a TOML datetime or an ISO "
                    "string such as '2013-01-13 00:00')",
                    value,
                ) from None
            object.__setattr__(self, key, ends[key].isoformat(sep=" "))
        if isinstance(self.step, bool) or not isinstance(self.step, str):
            raise _type_fail(
                w,
                "step",
                "a duration such as '15min', '1h' or '1d' for a timestamp range",
                self.step,
            )
        us = duration_us(self.step)
        if us is None:
            raise _fail(
                w,
                "step",
                "a duration: a positive integer and a unit (us, ms, s, min, h, d, w)",
                self.step,
            )
        RangeBins.of(_epoch_us(ends["start"]), _epoch_us(ends["stop"]), us, where=w)

    @property
    def is_time(self) -> bool:
        """Whether this is a range over a timestamp column (keys: timestamps)."""
        return self.kind == "range" and isinstance(self.start, str)

    @property
    def axes(self) -> tuple[DomainSpec, ...]:
        """The factors of the key: ``(y, x)`` for a grid (row-major: y outer), the parts of a
        product in order (the first outermost), else ``(self,)``."""
        if self.kind == "grid":
            return (self.y, self.x)
        if self.kind == "product":
            return tuple(self.parts or ())
        return (self,)

    @property
    def output_name(self) -> str:
        """The output column of a part of a product or grid: ``name``, else its column, else
        ``"node"`` for a graph."""
        if self.name is not None:
            return self.name
        if self.kind == "graph":
            return "node"
        if self.kind == "regions":
            return "region"
        return str(self.column)

    @property
    def size(self) -> int:
        """The number of keys, where it is known from the spec alone (values, ranges, grids);
        a graph's comes from its file
        (:func:`~dpgauss.release.domains.key_domain.resolve_domain`)."""
        if self.kind == "values":
            return len(self.values or ()) or 1  # values_from: known once its file is read
        if self.kind == "range":
            return self.bins.size
        if self.kind == "grid":
            return self.x.size * self.y.size
        return 1  # a graph part: known once its file is read

    def _check_graph_source(self) -> None:
        """``graph`` (a bundled name or a GraphML path) or ``nodes`` (+ ``edges``)."""
        w = self.where
        if (self.graph is None) == (self.nodes is None):
            raise ValueError(
                f"[{self.where}] kind = 'graph' needs exactly one of graph (a bundled name: "
                f"{', '.join(map(repr, GRAPHS))}, or a GraphML file) and nodes (a node table, "
                "with edges)"
            )
        _text(w, "graph", self.graph, optional=True)
        _text(w, "nodes", self.nodes, optional=True)
        _text(w, "edges", self.edges, optional=True)
        if self.edges is not None and self.nodes is None:
            raise ValueError(f"[{self.where}] edges goes with nodes (a node table), not with graph")
        if self.graph in GRAPHS and self.node_columns is not None:
            raise ValueError(
                f"[{self.where}] node_columns does not apply to graph = {self.graph!r}"
            )
        if self.edge_columns is not None and self.edges is None:
            raise ValueError(f"[{self.where}] edge_columns goes with edges (an edge table)")
        allowed: dict[str, tuple[str, ...]] = {
            "node_columns": ("lat", "lon"),
            "edge_columns": ("u", "v"),
        }
        if self.nodes is not None:
            allowed["node_columns"] = ("id", "lat", "lon")
        for key, names in allowed.items():
            value = getattr(self, key)
            if value is None:
                continue
            if not isinstance(value, Mapping):
                raise _type_fail(w, key, f"a table of column names ({', '.join(names)})", value)
            for name, col in value.items():
                if name not in names:
                    raise ValueError(
                        f"[{self.where}] {key} has the unknown key {name!r} "
                        f"(allowed: {', '.join(names)})"
                    )
                _text(w, f"{key}.{name}", col)
            object.__setattr__(self, key, dict(value))

    def _check_values(self) -> None:
        vals = self.values
        if isinstance(vals, str) or not isinstance(vals, list | tuple):
            raise _type_fail(self.where, "values", "a list of integers, numbers or strings", vals)
        if not vals:
            raise _fail(self.where, "values", "a non-empty list", vals)
        kinds = set()
        for v in vals:
            if isinstance(v, bool) or not isinstance(v, numbers.Real | str):
                raise _type_fail(self.where, "values", "a list of integers, numbers or strings", v)
            if isinstance(v, float) and not math.isfinite(v):
                raise _fail(self.where, "values", "a list of finite numbers", v)
            kinds.add("str" if isinstance(v, str) else "num")
        if len(kinds) > 1:
            raise ValueError(f"[{self.where}] values must be all numbers or all strings, not a mix")
        if len(set(vals)) != len(vals):
            # Numbers are compared exactly (1 == 1.0, 0 == -0.0, 2**53 + 1 != 2.0**53), as the
            # engines match records to keys: two keys equal as numbers would both match.
            first: dict[Any, Any] = {}
            for v in vals:
                if v in first:
                    a, b = first[v], v
                    if repr(a) == repr(b):
                        raise ValueError(
                            f"[{self.where}] values must be distinct; {brief(b)} appears twice"
                        )
                    raise ValueError(
                        f"[{self.where}] values must be distinct numbers; {brief(a)} and "
                        f"{brief(b)} are the same number (a record matches the key equal to its "
                        "value in exact arithmetic)"
                    )
                first[v] = v
        if len(vals) > _MAX_KEYS:
            raise ValueError(
                f"[{self.where}] values has {len(vals)} keys; at most {_MAX_KEYS} allowed"
            )
        object.__setattr__(self, "values", tuple(vals))

    def _check_bbox(self) -> None:
        box = self.bbox
        if not isinstance(box, list | tuple) or len(box) != 4:
            raise _type_fail(self.where, "bbox", "[lat_min, lat_max, lon_min, lon_max]", box)
        vals = tuple(_real(self.where, "bbox", v) for v in box)
        lat0, lat1, lon0, lon1 = vals
        if not (-90 <= lat0 < lat1 <= 90 and -180 <= lon0 < lon1 <= 180):
            raise _fail(
                self.where,
                "bbox",
                "[lat_min, lat_max, lon_min, lon_max] with -90 <= lat_min < lat_max <= 90 and "
                "-180 <= lon_min < lon_max <= 180",
                list(box),
            )
        object.__setattr__(self, "bbox", vals)

    @property
    def columns(self) -> tuple[str, ...]:
        """The source columns the mapping reads (every axis's, without repeats)."""
        if self.kind in ("grid", "product"):
            cols = [c for part in self.axes for c in part.columns]
            return tuple(dict.fromkeys(cols))
        if self.locates:
            return (self.lat, self.lon)  # type: ignore[return-value]
        return (self.column,)  # type: ignore[return-value]

    @property
    def bins(self) -> RangeBins:
        """The exact bins of a ``range`` domain (:class:`~dpgauss.release.domains.keys.RangeBins`);
        for a timestamp range, over microseconds since 1970-01-01 00:00 (no time zone)."""
        if self.kind != "range":
            raise ValueError(f"[{self.where}] kind = {self.kind!r} has no bins")
        if self.is_time:
            return RangeBins.of(
                _epoch_us(_timestamp(self.start)),
                _epoch_us(_timestamp(self.stop)),
                duration_us(self.step),
                where=self.where,
            )
        return RangeBins.of(self.start, self.stop, self.step, where=self.where)

    @property
    def effective_cutoff(self) -> float:
        """The cutoff in metres (default 150 for nearest, 3 × bandwidth for kde)."""
        if self.cutoff is not None:
            return float(self.cutoff)
        if self.mapping == "kde":
            return 3.0 * float(self.bandwidth)  # type: ignore[arg-type]
        return 150.0


#: The columns a release writes itself: no part of a grid or product may be written as one.
RESERVED_COLUMNS = (
    "key",
    "released",
    "denoised",
    "sigma",
    "lower",
    "upper",
    "denoised_lower",
    "denoised_upper",
    "lat",
    "lon",
    "sum_released",
    "count_released",
)


def _check_names(parts: list[Any], where: str, labels: tuple[str, ...] | None = None) -> None:
    """Every part of a grid or product has its own output column, not one the release
    writes itself (``where`` formats each part's table name from its label or number)."""
    names = [p.output_name for p in parts]
    for i, name in enumerate(names):
        label = where.format(labels[i] if labels else i + 1)
        if name in RESERVED_COLUMNS:
            raise ValueError(
                f"[{label}] its output column would be {name!r}, a column the release writes "
                "itself: give the part a name"
            )
        if names.count(name) > 1:
            raise ValueError(
                f"[domain] two parts would both be written as the column {name!r}: give them "
                "distinct names (name = …)"
            )


_DURATION = re.compile(r"\s*([1-9][0-9]*)\s*(us|ms|s|min|h|d|w)\s*")
_UNIT_US = {"us": 1, "ms": 1_000, "s": 10**6, "min": 60 * 10**6, "h": 3_600 * 10**6}
_UNIT_US.update({"d": 86_400 * 10**6, "w": 7 * 86_400 * 10**6})
_EPOCH = datetime(1970, 1, 1)


def duration_us(text: object) -> int | None:
    """``"15min"`` → 900,000,000: a duration in whole microseconds, or None if not one."""
    if not isinstance(text, str):
        return None
    m = _DURATION.fullmatch(text)
    if m is None:
        return None
    return int(m.group(1)) * _UNIT_US[m.group(2)]


def _timestamp(value: object) -> datetime:
    """A naive timestamp from a TOML datetime or date, or an ISO string."""
    if isinstance(value, datetime):
        if value.tzinfo is not None:
            raise ValueError("a timestamp with a time zone")
        return value
    if isinstance(value, date):
        return datetime(value.year, value.month, value.day)
    if isinstance(value, str):
        t = datetime.fromisoformat(value.strip())
        if t.tzinfo is not None:
            raise ValueError("a timestamp with a time zone")
        return t
    raise TypeError(type(value).__name__)


def _epoch_us(t: datetime) -> int:
    """Microseconds since 1970-01-01 00:00, exactly."""
    d = t - _EPOCH
    return (d.days * 86_400 + d.seconds) * 10**6 + d.microseconds


def _window_end(key: str, value: object) -> tuple[str, float | str] | None:
    """("timestamp", ISO text) or ("number", float) for one end of a filter window."""
    if value is None:
        return None
    if isinstance(value, date) and not isinstance(value, datetime):
        value = datetime.combine(value, time())
    if isinstance(value, datetime):
        if value.tzinfo is not None:
            raise _fail("filter", key, "a local timestamp without a UTC offset", str(value))
        return "timestamp", value.isoformat(sep=" ")
    if isinstance(value, str):
        try:
            parsed = datetime.fromisoformat(value.strip())
        except ValueError:
            raise _fail(
                "filter", key, "a timestamp ('2013-01-05 18:00') or a number", value
            ) from None
        if parsed.tzinfo is not None:
            raise _fail("filter", key, "a local timestamp without a UTC offset", value)
        return "timestamp", parsed.isoformat(sep=" ")
    x = _real("filter", key, value)
    assert x is not None
    return "number", x


@dataclass(frozen=True)
class FilterSpec:
    """``[filter]``: a public window ``start <= column < stop`` on the records."""

    column: str = ""
    start: Any = None
    stop: Any = None

    def __post_init__(self) -> None:
        _required("filter", "column", self.column, "the column the window applies to")
        _text("filter", "column", self.column)
        ends = {k: _window_end(k, getattr(self, k)) for k in ("start", "stop")}
        given = {k: v for k, v in ends.items() if v is not None}
        if not given:
            raise ValueError("[filter] needs start, stop or both")
        kinds = {v[0] for v in given.values()}
        if len(kinds) > 1:
            raise ValueError("[filter] start and stop must both be timestamps or both numbers")
        for k, v in given.items():
            object.__setattr__(self, k, v[1])
        if len(given) == 2:
            lo, hi = (
                (datetime.fromisoformat(str(self.start)), datetime.fromisoformat(str(self.stop)))
                if kinds == {"timestamp"}
                else (self.start, self.stop)
            )
            if not hi > lo:
                raise ValueError(
                    f"[filter] stop must be after start; got start={self.start!r}, "
                    f"stop={self.stop!r}"
                )

    @property
    def kind(self) -> str:
        """``"timestamp"`` or ``"number"``: how the column is compared."""
        end = self.start if self.start is not None else self.stop
        return "number" if isinstance(end, float) else "timestamp"

    def bound(self, key: str) -> datetime | float | None:
        """``start`` or ``stop`` as a ``datetime`` (timestamps) or a float; None if open."""
        v = getattr(self, key)
        if v is None:
            return None
        return datetime.fromisoformat(v) if self.kind == "timestamp" else float(v)


@dataclass(frozen=True)
class SeriesSpec:
    """``[series]``: the release is one period of a series cut from a timestamp column.

    The periods are ``[origin + k·period, origin + (k+1)·period)`` for every integer k;
    ``origin`` defaults to 1970-01-01 00:00 (a Thursday: give a Monday for weeks that start
    on Mondays).  A release of period k reads only the records whose ``column`` falls in it
    (as a ``[filter]`` window does: the others are ``outside_filter``), so each unit is
    bounded within the period (:mod:`dpgauss.release.series`).  ``history = K``: the
    period is denoised with the up to K periods before it that are already published
    (:mod:`dpgauss.release.history`).
    """

    column: str = ""
    period: str = ""
    origin: Any = "1970-01-01 00:00:00"
    history: int = 0

    def __post_init__(self) -> None:
        _required("series", "column", self.column, "the timestamp column the periods cut")
        if isinstance(self.history, bool) or not isinstance(self.history, int):
            raise _type_fail("series", "history", "an integer in [0, 1000]", self.history)
        if not 0 <= self.history <= MAX_HISTORY:
            raise _fail("series", "history", f"an integer in [0, {MAX_HISTORY}]", self.history)
        _text("series", "column", self.column)
        _required("series", "period", self.period, "a duration: '1h', '1d', '1w'")
        if duration_us(self.period) is None:
            raise _fail(
                "series",
                "period",
                "a duration ('15min', '1h', '1d', '1w'; units us, ms, s, min, h, d, w)",
                self.period,
            )
        try:
            origin = _timestamp(self.origin)
        except (TypeError, ValueError):
            raise _fail(
                "series",
                "origin",
                "a timestamp without a time zone ('2013-01-07 00:00')",
                self.origin,
            ) from None
        object.__setattr__(self, "period", self.period.strip().replace(" ", ""))
        object.__setattr__(self, "origin", origin.isoformat(sep=" "))

    @property
    def period_us(self) -> int:
        """The period's length in microseconds."""
        us = duration_us(self.period)
        assert us is not None  # checked when the table was made
        return us

    @property
    def origin_us(self) -> int:
        """The origin in microseconds since 1970-01-01 00:00."""
        return _epoch_us(datetime.fromisoformat(self.origin))


@dataclass(frozen=True)
class StatisticSpec:
    """``[statistic]``: count, or the sum or mean of a clamped value column."""

    kind: str = "count"
    column: str | None = None
    lower: float | None = None
    upper: float | None = None
    on_invalid: str = "drop"

    def __post_init__(self) -> None:
        w = "statistic"
        _choice(w, "kind", self.kind, ("count", "sum", "mean"))
        _policy(w, "on_invalid", self.on_invalid)
        if self.kind == "count":
            for key in ("column", "lower", "upper"):
                if getattr(self, key) is not None:
                    raise ValueError(f"[statistic] {key} does not apply to kind = 'count'")
            return
        _text(w, "column", self.column)
        if self.lower is None or self.upper is None:
            raise ValueError(
                f"[statistic] kind = {self.kind!r} needs the public clamping bounds lower and upper"
            )
        lower = _real(w, "lower", self.lower)
        upper = _real(w, "upper", self.upper)
        if not upper > lower:
            raise ValueError(
                f"[statistic] upper must be greater than lower; got lower={lower!r}, "
                f"upper={upper!r}"
            )


@dataclass(frozen=True)
class BoundsSpec:
    """``[bounds]``: how much one unit may contribute (enforced, not assumed)."""

    max_records_per_unit: int | None = None
    max_keys_per_unit: int | None = None
    max_records_per_key: int | None = None
    record_columns: tuple[str, ...] | None = None

    def __post_init__(self) -> None:
        w = "bounds"
        for key in ("max_records_per_unit", "max_keys_per_unit", "max_records_per_key"):
            object.__setattr__(self, key, _count(w, key, getattr(self, key), optional=True))
        object.__setattr__(
            self, "record_columns", _columns(w, "record_columns", self.record_columns)
        )
        if self.max_records_per_unit is None and self.max_records_per_key is None:
            raise ValueError(
                "[bounds] needs max_records_per_unit, or max_records_per_key (with or without "
                "max_keys_per_unit): max_keys_per_unit alone does not bound a unit's records"
            )


@dataclass(frozen=True)
class PrivacySpec:
    """``[privacy]``: the guarantee, the noise source and the budget ledger."""

    epsilon: float | None = None
    delta: float | None = None
    sigma: float | None = None
    secure: bool = True
    ledger: str | None = None
    dataset: str = ""
    label: str | None = None
    seed: int | None = None
    #: ``[[levels]]`` only: the share of the μ-GDP budget of each level (finest first)
    level_weights: tuple[float, ...] | None = None

    def __post_init__(self) -> None:
        w = "privacy"
        if self.level_weights is not None:
            object.__setattr__(self, "level_weights", _level_weights(self.level_weights))
        if self.delta is None:
            raise ValueError("[privacy] delta is required (0 < delta < 1)")
        delta = _real(w, "delta", self.delta)
        if not 0 < delta < 1:
            raise _fail(w, "delta", "in (0, 1)", self.delta)
        if (self.epsilon is None) == (self.sigma is None):
            raise ValueError("[privacy] give exactly one of epsilon or sigma (with delta)")
        if self.epsilon is not None:
            eps = _real(w, "epsilon", self.epsilon)
            if eps < 0:
                raise _fail(w, "epsilon", "a number >= 0", self.epsilon)
            if eps > MAX_EPSILON:
                raise _fail(w, "epsilon", "a number in [0, 1e20]", self.epsilon)
        else:
            # The smallest usable sigma depends on the sensitivity: checked by the pipeline.
            _positive(w, "sigma", self.sigma)
        _flag(w, "secure", self.secure)
        _text(w, "ledger", self.ledger, optional=True)
        _required(w, "dataset", self.dataset, "the dataset id of its budget in the ledger")
        _text(w, "dataset", self.dataset)
        if self.label is not None and not isinstance(self.label, str):
            raise _type_fail(w, "label", "a string", self.label)
        if self.seed is not None:
            if self.secure:
                raise ValueError(
                    "[privacy] seed is for experiments with secure = false; a secure release "
                    "draws its noise from the operating system's CSPRNG and cannot be seeded"
                )
            if isinstance(self.seed, bool) or not isinstance(self.seed, numbers.Integral):
                raise _type_fail(w, "seed", "a non-negative integer", self.seed)
            if self.seed < 0:
                raise _fail(w, "seed", "a non-negative integer", self.seed)


@dataclass(frozen=True)
class DenoiseSpec:
    """``[denoise]``: post-processing of the released vector (free of privacy cost)."""

    method: str = "auto"
    params: Mapping[str, Any] = field(default_factory=dict)
    #: None: decided by the statistic (:meth:`ReleaseSpec.nonnegative`); True or False: asked
    nonnegative: bool | None = None

    def __post_init__(self) -> None:
        _choice("denoise", "method", self.method, DENOISERS)
        if self.nonnegative is not None:
            _flag("denoise", "nonnegative", self.nonnegative)
            if self.nonnegative and self.method == "none":
                raise ValueError(
                    "[denoise] nonnegative = true does not apply to method = 'none' (the raw "
                    "release is published as drawn); choose a denoiser, e.g. method = 'auto'"
                )
        if isinstance(self.params, Mapping) and "nonnegative" in self.params:
            raise ValueError(
                "[denoise] params may not set nonnegative: write [denoise] nonnegative = "
                "true/false (the release checks it against the statistic)"
            )
        if not isinstance(self.params, Mapping):
            raise _type_fail("denoise", "params", "a table of keyword arguments", self.params)
        if self.method == "none" and self.params:
            raise ValueError("[denoise] params does not apply to method = 'none'")
        for key in self.params:
            if not isinstance(key, str):
                raise _type_fail("denoise", "params", "a table with string keys", key)
        object.__setattr__(self, "params", dict(self.params))


@dataclass(frozen=True)
class OutputSpec:
    """``[output]``: where the release table goes (its JSON report goes beside it).

    ``groups``: a groups file (:mod:`dpgauss.release.groups`: columns ``group``, the table's
    key columns, optional ``weight``) naming sums of keys whose released and denoised sums
    and intervals go to ``<table>.groups.csv`` (``.parquet``); public structure, read and
    checked before the charge."""

    path: str | None = None
    format: str = "auto"
    level: float = 0.95
    overwrite: bool = False
    plot: bool = True
    groups: str | None = None

    def __post_init__(self) -> None:
        w = "output"
        _flag(w, "plot", self.plot)
        _text(w, "path", self.path, optional=True)
        _text(w, "groups", self.groups, optional=True)
        _choice(w, "format", self.format, ("auto", "csv", "parquet"))
        level = _real(w, "level", self.level)
        if not 0 < level < 1:
            raise _fail(w, "level", "in (0, 1)", self.level)
        _flag(w, "overwrite", self.overwrite)

    def file_format(self, path: str) -> str:
        """``"csv"`` or ``"parquet"`` for the output ``path``."""
        if self.format != "auto":
            return self.format
        return "parquet" if Path(path).suffix.lower() in (".parquet", ".pq") else "csv"


# ------------------------------------------------------------------------ zoom levels

#: ``[[levels]] name``: a word safe in a file name (``out.csv.<name>.csv``) and as a column.
LEVEL_NAME = re.compile(r"[A-Za-z][A-Za-z0-9_-]{0,63}")
#: The parent of a fine key that falls in no region of a ``regions`` level: a key of that
#: level like the others (released, noised, consistent), never a silent drop.
UNPLACED = "__unplaced__"
#: How a level's parents are given: exactly one of these keys.
LEVEL_SOURCES = ("regions", "map", "kind")


def _level_weights(value: object) -> tuple[float, ...]:
    """``[privacy] level_weights``: a non-empty list of positive finite numbers."""
    if isinstance(value, str) or not isinstance(value, list | tuple) or not value:
        raise _type_fail(
            "privacy", "level_weights", "a list of positive numbers (one per level)", value
        )
    out = tuple(_positive("privacy", "level_weights", v) for v in value)
    return out  # type: ignore[return-value]


@dataclass(frozen=True)
class LevelSpec:
    """``[[levels]]``: one coarser level of a zoom-level release (module docstring).

    ``name`` names the level (its table ``<path>.<name>.csv`` and its column in the finest
    table); exactly one of ``regions`` (a bundled regions name or a GeoJSON file: each fine
    key goes to the region containing its coordinates, :mod:`dpgauss.release.levels_plan`),
    ``map`` (a CSV file of the columns ``fine_key,parent``) or ``kind = "total"``.
    ``id_property``, ``name_property`` and ``crs`` apply to a ``regions`` file as in
    ``[domain]``.
    """

    name: str = ""
    regions: str | None = None
    map: str | None = None
    kind: str | None = None
    id_property: str = "id"
    name_property: str | None = None
    crs: str | None = None
    where: str = field(default="levels", repr=False, compare=False)

    def __post_init__(self) -> None:
        w = self.where
        _required(w, "name", self.name, "a word: letters, digits, '_' or '-', a letter first")
        _text(w, "name", self.name)
        if not LEVEL_NAME.fullmatch(self.name):
            raise _fail(
                w,
                "name",
                "a word of at most 64 letters, digits, '_' or '-', a letter first (it names "
                "a file and a column)",
                self.name,
            )
        given = [k for k in LEVEL_SOURCES if getattr(self, k) is not None]
        if len(given) != 1:
            raise ValueError(
                f"[{w}] give exactly one of regions = '<bundled name or GeoJSON file>', "
                f"map = '<fine_key,parent CSV file>' or kind = 'total'; got "
                f"{', '.join(given) or 'none'}"
            )
        if self.kind is not None:
            _choice(w, "kind", self.kind, ("total",))
        for key in ("regions", "map"):
            _text(w, key, getattr(self, key), optional=True)
        _text(w, "id_property", self.id_property)
        _text(w, "name_property", self.name_property, optional=True)
        _text(w, "crs", self.crs, optional=True)
        if self.regions is None:
            for key, default in (("id_property", "id"), ("name_property", None), ("crs", None)):
                if getattr(self, key) != default:
                    raise ValueError(f"[{w}] {key} applies to a regions level only")
        if self.crs is not None:
            parse_crs(self.crs, f"[{w}] crs")

    @property
    def source(self) -> str:
        """``"regions"``, ``"map"`` or ``"total"``."""
        return "total" if self.kind is not None else ("regions" if self.regions else "map")


def _levels(data: object) -> tuple[LevelSpec, ...]:
    """``[[levels]]``: a list of tables, each a :class:`LevelSpec`."""
    if not isinstance(data, list | tuple) or not data:
        raise TypeError(
            f"[[levels]] must be a list of tables ([[levels]] name = ...); got "
            f"{type(data).__name__}"
        )
    out = []
    for i, item in enumerate(data, start=1):
        if isinstance(item, LevelSpec):
            out.append(item)
            continue
        where = f"levels #{i}"
        if not isinstance(item, Mapping):
            raise TypeError(f"[{where}] must be a table; got {type(item).__name__}")
        _check_keys(where, item, LevelSpec)
        out.append(LevelSpec(**dict(item), where=where))
    return tuple(out)


def _check_levels(spec: ReleaseSpec) -> None:
    """The levels of ``spec`` against the rest of it (module docstring, ``[[levels]]``):
    distinct names, not a column of the finest table; a statistic, domain and privacy
    table they apply to; one weight per level."""
    levels, d, p = spec.levels, spec.domain, spec.privacy
    if not levels:
        if p.level_weights is not None:
            raise ValueError("[privacy] level_weights applies to a release with [[levels]]")
        return
    taken = {*RESERVED_COLUMNS, "name", "released_lower", "released_upper", "children"}
    taken |= {a.output_name for a in d.axes} if len(d.axes) > 1 else set()
    taken |= {f"{a.output_name}_name" for a in d.axes} if len(d.axes) > 1 else set()
    seen: set[str] = set()
    for lv in levels:
        if lv.name in seen:
            raise ValueError(f"[{lv.where}] name {lv.name!r} is already the name of a level")
        if lv.name in taken:
            raise ValueError(
                f"[{lv.where}] name {lv.name!r} is a column of the finest table; choose "
                "another name"
            )
        seen.add(lv.name)
        if lv.source == "regions" and d.kind not in ("graph", "regions", "grid"):
            raise ValueError(
                f"[{lv.where}] regions places the fine keys by their coordinates: it needs a "
                f"[domain] kind = 'graph', 'regions' or 'grid' (got {d.kind!r}); use map = "
                "'fine_to_coarse.csv' or kind = 'total'"
            )
        if lv.source == "map" and len(d.axes) > 1:
            raise ValueError(
                f"[{lv.where}] map needs a domain of one part (its keys are the fine_key "
                f"column); a {d.kind!r} domain takes regions or kind = 'total'"
            )
    if d.kind == "discovered" or d.other:
        raise ValueError(
            "[[levels]] need every fine key known before the release, each with one parent: "
            "a [domain] kind = 'discovered' or other = true has none to place"
        )
    if spec.series is not None and getattr(spec.series, "history", None):
        raise ValueError(
            "[[levels]] with [series] history are not supported yet: the history denoises "
            "one level; release the levels without history, or the history without levels"
        )
    if spec.statistic.kind == "mean":
        raise ValueError(
            "[[levels]] apply to a count or a sum; a mean (a ratio of two noisy parts) has no "
            "parent that is the sum of its children"
        )
    if p.epsilon is None:
        raise ValueError(
            "[[levels]] need [privacy] epsilon (and delta): the levels' noise is calibrated "
            "from it; sigma applies to a release of one level"
        )
    n = len(levels) + 1
    if p.level_weights is not None and len(p.level_weights) != n:
        raise ValueError(
            f"[privacy] level_weights must have {n} numbers, one per level, the finest "
            f"([domain]) first; got {len(p.level_weights)}"
        )


_SECTIONS: dict[str, type] = {
    "source": SourceSpec,
    "unit": UnitSpec,
    "domain": DomainSpec,
    "filter": FilterSpec,
    "series": SeriesSpec,
    "statistic": StatisticSpec,
    "bounds": BoundsSpec,
    "privacy": PrivacySpec,
    "denoise": DenoiseSpec,
    "output": OutputSpec,
}
_REQUIRED = ("source", "unit", "domain", "bounds", "privacy")
#: ``[series] history``: at most this many earlier periods are denoised with a period.
MAX_HISTORY = 1000
#: The tables that may be absent (None in a ReleaseSpec).
_OPTIONAL = ("filter", "series")
#: ``[unit] scope``: whom the guarantee protects in a series — a unit over every period
#: (``"all"``) or a unit within one period (``"period"``; docs/ledger.md).
SCOPES = ("all", "period")


@dataclass(frozen=True)
class ReleaseSpec:
    """A whole release: every table of the TOML file as a dataclass (see the module doc)."""

    source: SourceSpec
    unit: UnitSpec
    domain: DomainSpec
    bounds: BoundsSpec
    privacy: PrivacySpec
    statistic: StatisticSpec = field(default_factory=StatisticSpec)
    denoise: DenoiseSpec = field(default_factory=DenoiseSpec)
    output: OutputSpec = field(default_factory=OutputSpec)
    name: str | None = None
    filter: FilterSpec | None = None
    series: SeriesSpec | None = None
    #: ``[[levels]]``: the coarser levels, finest to coarsest (empty: one level)
    levels: tuple[LevelSpec, ...] = ()

    def __post_init__(self) -> None:
        object.__setattr__(self, "levels", _levels(self.levels) if self.levels else ())
        for key, cls in _SECTIONS.items():
            value = getattr(self, key)
            if key in _OPTIONAL and value is None:
                continue
            if not isinstance(value, cls):
                raise TypeError(f"[{key}] must be a {cls.__name__}; got {type(value).__name__}")
        if self.name is not None:
            _text("release", "name", self.name)
        check_discovered(self)  # before the declared columns: its message says more
        if self.source.types is not None:
            _check_declared(self)
        _check_source_crs(self)
        _check_series(self)
        d = self.domain
        method = self.denoise.method
        if method == "wavelet" and d.kind != "range":
            raise ValueError("[denoise] method = 'wavelet' needs a range domain (a 1-D grid)")
        if method == "wavelet" and d.other:
            raise ValueError(
                "[denoise] method = 'wavelet' needs a grid: [domain] other = true adds the key "
                "__other__, which is no bin of it (use auto or trend_filter)"
            )
        if method in ("graph_wavelet", "trend_filter") and d.kind == "values":
            raise ValueError(
                f"[denoise] method = {method!r} needs public structure: a graph or range domain"
            )
        if self.denoise.nonnegative and not self.never_negative:
            raise ValueError(
                f"[denoise] nonnegative = true needs a statistic that is never negative: a "
                f"count, or a sum or mean with [statistic] lower >= 0 (got kind = "
                f"{self.statistic.kind!r}, lower = {self.statistic.lower!r})"
            )
        _check_levels(self)

    @property
    def never_negative(self) -> bool:
        """The released statistic is never negative: a count, or a sum or mean of values
        clamped to ``[lower, upper]`` with ``lower >= 0`` (for a mean, its sum and count)."""
        st = self.statistic
        return st.kind == "count" or (st.lower is not None and float(st.lower) >= 0.0)

    @property
    def nonnegative(self) -> bool:
        """Whether the denoised values are clipped at 0: ``[denoise] nonnegative`` if given,
        else whether the statistic is never negative (never for ``method = "none"``)."""
        if self.denoise.method == "none":
            return False
        if self.denoise.nonnegative is not None:
            return self.denoise.nonnegative
        return self.never_negative

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> ReleaseSpec:
        """Build a spec from a dict shaped like the TOML file (tables → dicts)."""
        if not isinstance(data, Mapping):
            raise TypeError(f"a release spec must be a table; got {type(data).__name__}")
        allowed = [*_SECTIONS, "name", "levels"]
        for key in data:
            if key not in allowed:
                raise ValueError(f"unknown table [{key}] (allowed: {', '.join(allowed)})")
        for key in _REQUIRED:
            if key not in data:
                raise ValueError(f"the spec has no [{key}] table")
        parts = {k: _build(k, c, data[k]) for k, c in _SECTIONS.items() if k in data}
        levels = _levels(data["levels"]) if "levels" in data else ()
        return cls(**parts, name=data.get("name"), levels=levels)

    def to_dict(self) -> dict[str, Any]:
        """The spec as a JSON-ready dict shaped like the TOML file (defaults filled in)."""
        out: dict[str, Any] = {}
        if self.name is not None:
            out["name"] = self.name
        for key in _SECTIONS:
            if getattr(self, key) is None:
                continue
            out[key] = _plain(asdict(getattr(self, key)))
        if self.levels:
            out["levels"] = [
                {k: v for k, v in _plain(asdict(lv)).items() if v is not None} for lv in self.levels
            ]
        return out


def read_columns(spec: ReleaseSpec) -> list[tuple[str, str]]:
    """(the spec key, the column) of every source column a release reads."""
    wanted = [("[unit] column", spec.unit.column)]
    for d in spec.domain.axes:
        if d.locates:
            assert d.lat is not None and d.lon is not None  # checked when d was made
            wanted += [(f"[{d.where}] lat", d.lat), (f"[{d.where}] lon", d.lon)]
        else:
            assert d.column is not None  # checked when d was made
            wanted.append((f"[{d.where}] column", d.column))
    if spec.statistic.column is not None:
        wanted.append(("[statistic] column", spec.statistic.column))
    if spec.filter is not None:
        wanted.append(("[filter] column", spec.filter.column))
    series = spec.series
    if series is not None and (spec.filter is None or spec.filter.column != series.column):
        wanted.append(("[series] column", series.column))
    for col in spec.bounds.record_columns or ():
        wanted.append(("[bounds] record_columns", col))
    return wanted


def _check_source_crs(spec: ReleaseSpec) -> None:
    """``[source] crs`` goes with a domain placed by coordinates; a projected one has no
    ``bbox`` (which is in degrees)."""
    text = spec.source.crs
    if text is None:
        return
    located = [d for d in spec.domain.axes if d.locates]
    if not located:
        raise ValueError(
            "[source] crs applies to the records' coordinates: a graph, or regions placed by "
            "lat and lon"
        )
    if not parse_crs(text, "[source] crs").geographic:
        for d in located:
            if d.bbox is not None:
                raise ValueError(
                    f"[{d.where}] bbox is in degrees; the records are in the projected "
                    f"[source] crs = {text!r} (drop bbox: the map's cutoff bounds the matching)"
                )


def _check_series(spec: ReleaseSpec) -> None:
    """``[unit] scope = "period"`` needs a ``[series]``; a ``[filter]`` beside a series is
    on the series' own column (the two windows then intersect)."""
    series = spec.series
    if series is None:
        if spec.unit.scope != "all":
            raise ValueError(
                "[unit] scope = 'period' protects a unit within one period of a series: it "
                "needs a [series] table (column, period)"
            )
        return
    if series.history:
        if spec.statistic.kind == "mean":
            raise ValueError(
                "[series] history applies to counts and sums (a mean's ratio of two denoised "
                "parts is not denoised across periods)"
            )
        if spec.denoise.method in ("none", "wavelet"):
            raise ValueError(
                f"[series] history denoises with the earlier periods on the product of time "
                f"and the domain's structure: [denoise] method = {spec.denoise.method!r} cannot "
                "(use auto, a shrinkage, thresholding, graph_wavelet or trend_filter)"
            )
    f = spec.filter
    if f is not None:
        if f.column != series.column:
            raise ValueError(
                f"[filter] column {f.column!r} with [series] column {series.column!r}: a "
                "series release reads one window, on the series' own column (give the filter "
                "on that column, or drop it)"
            )
        if f.kind != "timestamp":
            raise ValueError(
                "[filter] on the [series] column must be a window of timestamps, like the periods"
            )


def _check_declared(spec: ReleaseSpec) -> None:
    """With ``[source] types``, every column the release reads must be declared."""
    types = spec.source.types or {}
    for key, col in read_columns(spec):
        if col not in types:
            raise ValueError(
                f"{key} {col!r} is not declared in [source] types: with types, every column "
                f"the release reads is declared (declared: {', '.join(types)})"
            )


def _plain(value: Any) -> Any:
    """A spec table as TOML-shaped data: tuples as lists, without the hidden ``where``."""
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items() if k != "where"}
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    return value


def load_spec(path: str | Path) -> ReleaseSpec:
    """Read and validate a TOML release spec.

    Raises ``ValueError`` for a missing or unreadable file, TOML syntax errors (with the line)
    and every invalid key; ``TypeError`` for values of the wrong type.
    """
    p = Path(path)
    try:
        raw = p.read_bytes()
    except FileNotFoundError:
        raise ValueError(f"no release spec at {str(p)!r}") from None
    except OSError as exc:
        raise ValueError(
            f"cannot read the release spec {str(p)!r}: {exc.strerror or exc}"
        ) from None
    try:
        data = tomllib.loads(raw.decode("utf-8"), parse_float=WrittenFloat)
    except UnicodeDecodeError:
        raise ValueError(f"{p}: the release spec is not UTF-8 text") from None
    except tomllib.TOMLDecodeError as exc:
        raise ValueError(f"{p}: invalid TOML: {exc}") from None
    return ReleaseSpec.from_dict(data)
