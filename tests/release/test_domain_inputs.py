"""Hostile inputs for the domain kinds (user graphs, regions, grids, products,
timestamp ranges).  Every test here fails on 0950986 and states its finding.

The cross-engine tests need pyspark and Java (skipped otherwise); the rest run on DuckDB.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

pa = pytest.importorskip("pyarrow")
pq = pytest.importorskip("pyarrow.parquet")
pytest.importorskip("duckdb")

from dpgauss.release.engines.duckdb import DuckDBEngine  # noqa: E402
from dpgauss.release.pipeline import bounded_aggregate, run_release  # noqa: E402
from dpgauss.release.spec import ReleaseSpec  # noqa: E402

from ..helpers import charges, make_ledger, square  # noqa: E402

DUCK = DuckDBEngine(threads=2)
HOURS = {
    "kind": "range",
    "column": "t",
    "start": "1970-01-01 00:00",
    "stop": "1970-01-01 03:00",
    "step": "1h",
}


def geojson(path: Path, ids: list, prop: str = "id") -> Path:
    feats = [
        {
            "type": "Feature",
            "properties": {prop: rid},
            "geometry": {"type": "Polygon", "coordinates": [square(3 * i, 0)]},
        }
        for i, rid in enumerate(ids)
    ]
    path.write_text(json.dumps({"type": "FeatureCollection", "features": feats}))
    return path


def make(src: Path, domain: dict, out: Path | None = None, **tables: dict) -> ReleaseSpec:
    data = {
        "source": {"path": str(src)},
        "unit": {"column": "uid"},
        "domain": domain,
        "bounds": {"max_records_per_unit": 2},
        "privacy": {"epsilon": 1.0, "delta": 1e-6, "dataset": "d"},
        "denoise": {"method": "none"},
        **tables,
    }
    if out is not None:
        data["output"] = {"path": str(out)}
    return ReleaseSpec.from_dict(data)


def delivered_or_refused_uncharged(spec: ReleaseSpec, tmp_path: Path) -> None:
    """Rule (c): a release either succeeds, or fails *before* the ledger is charged."""
    ledger = make_ledger(tmp_path)
    try:
        run_release(spec, ledger=ledger, engine=DUCK)
    except ValueError as exc:
        assert charges(ledger) == 0, f"failed after the charge: {exc}"


# --------------------------------------------------------------------- 1. DuckDB vs Spark


@pytest.mark.filterwarnings("ignore:PySpark does not yet fully support pandas:FutureWarning")
@pytest.mark.parametrize(
    "text",
    [
        "1970-01-01 00:30:00Z",
        "1970-01-01 00:30:00 UTC",
        "epoch",
        "1970-01-01 00:30:00 BC",
        "1969-12-31 24:00:00",
    ],
)
def test_text_timestamps_bin_alike_on_duckdb_and_spark(spark, tmp_path: Path, text: str) -> None:
    """Finding (rule e): a timestamp range over a text column reads it with DuckDB's
    ``TRY_CAST(… AS TIMESTAMP)`` but with a narrower regex + ``try_cast`` on Spark.  DuckDB
    accepts a trailing ``Z``, `` UTC``, `` BC`` (and ignores it), the word ``epoch`` and the
    hour ``24:00:00`` (the next midnight); Spark marks those records invalid.  One unit
    writing such a timestamp is counted in bin 0 by DuckDB and not at all by Spark."""
    from dpgauss.release.engines.spark import SparkEngine

    src = tmp_path / "t.csv"
    src.write_text(f"uid,t\n1,{text}\n")
    spec = make(src, HOURS)
    duck = bounded_aggregate(spec, salt=3, engine=DUCK)
    sp = bounded_aggregate(spec, salt=3, engine=SparkEngine(spark))
    assert np.array_equal(duck.counts, sp.counts)
    assert duck.rows.as_dict() == sp.rows.as_dict()


# --------------------------------------------------------------------- 2. timestamp edges


def test_nanosecond_timestamps_are_not_rounded_into_the_next_bin(tmp_path: Path) -> None:
    """Finding (item 2, bin edges): DuckDB's ``TRY_CAST(TIMESTAMP_NS AS TIMESTAMP)`` *rounds*
    to the microsecond, so 00:59:59.999999999 (pyarrow's default ``ns`` unit) lands in the
    01:00 bin, not in [00:00, 01:00) where it is.  (Spark reads such a file as LONG
    nanoseconds and floors them alike: ``test_spark_timestamps``.)"""
    t = np.array(["1970-01-01T00:59:59.999999999"], dtype="datetime64[ns]")
    src = tmp_path / "ns.parquet"
    pq.write_table(pa.table({"uid": [1], "t": pa.array(t)}), src)
    agg = bounded_aggregate(make(src, HOURS), salt=1, engine=DUCK)
    assert agg.counts.tolist() == [1.0, 0.0, 0.0]


# ------------------------------------------------------------------ 3. regions and ids


def test_region_ids_equal_as_text_are_not_two_keys(tmp_path: Path) -> None:
    """Finding (item 1/3, a record counted in two keys): ``read_geojson`` checks duplicate
    ids on the raw JSON values (``1 != "1"``) and *then* turns a mixed list into text, so the
    ids ``1`` and ``"1"`` (or ``2**64`` and ``"18446744073709551616"``) become two keys
    ``"1"``.  With ``column = …`` the engine's LEFT JOIN matches both: one record is read
    twice and counted in both keys."""
    regions = geojson(tmp_path / "r.geojson", [1, "1"])
    src = tmp_path / "s.parquet"
    pq.write_table(pa.table({"uid": [1], "rid": ["1"]}), src)
    spec = make(src, {"kind": "regions", "regions": str(regions), "column": "rid"})
    try:
        agg = bounded_aggregate(spec, salt=1, engine=DUCK)
    except ValueError:
        return  # refused while resolving the domain: fine
    assert agg.rows.read == 1
    assert agg.counts.sum() == 1.0


def test_graph_node_ids_minus_zero_and_zero_are_not_one_id(tmp_path: Path) -> None:
    """Finding (item 4, ids colliding after the int/text rule): ``_INT`` accepts ``"-0"`` as
    a canonical integer, so a node table with ids ``"-0"`` and ``"0"`` (distinct texts, so
    the duplicate check passes) gets the int64 keys ``[0, 0]``: two output rows with the same
    key."""
    from dpgauss.release.domains.graph_files import read_graph_tables

    nodes = tmp_path / "nodes.csv"
    nodes.write_text("id,lat,lon\n-0,1,1\n0,2,2\n")
    try:
        g = read_graph_tables(nodes)
    except ValueError:
        return
    assert len(set(g.ids.tolist())) == g.n


def _deep(path: Path) -> Path:
    path.write_text(
        '{"type": "FeatureCollection", "features": ' + "[" * 100_000 + "]" * 100_000 + "}"
    )
    return path


def _huge_coordinate(path: Path) -> Path:
    ring = f"[[1{'0' * 400}, 0], [1, 0], [1, 1], [0, 0]]"
    path.write_text(
        '{"type": "FeatureCollection", "features": [{"type": "Feature", "properties": '
        f'{{"id": 1}}, "geometry": {{"type": "Polygon", "coordinates": [{ring}]}}}}]}}'
    )
    return path


def _long_integer(path: Path) -> Path:
    path.write_text(
        '{"type": "FeatureCollection", "features": [{"type": "Feature", "properties": '
        f'{{"id": 1{"0" * 5000}}}, "geometry": {{"type": "Polygon", "coordinates": '
        "[[[0, 0], [1, 0], [1, 1], [0, 0]]]}}]}"
    )
    return path


@pytest.mark.parametrize(
    "write",
    [_deep, _huge_coordinate, _long_integer],
    ids=["deep nesting: RecursionError", "1e400 as an integer: OverflowError", "5000 digits"],
)
def test_bad_geojson_is_one_value_error_naming_the_file(tmp_path: Path, write) -> None:
    """Finding (item 3): ``read_geojson`` catches only ``JSONDecodeError``/``UnicodeDecodeError``
    from ``json.loads`` and calls ``float()`` on JSON integers unguarded.  Deeply nested
    arrays raise ``RecursionError`` and a 400-digit integer coordinate ``OverflowError`` (both
    tracebacks from ``dpgauss release``, which catches ValueError/TypeError only); a
    5,000-digit integer raises a ValueError that does not name the file."""
    from dpgauss.release.domains.regions import read_geojson

    path = write(tmp_path / "bad.geojson")
    with pytest.raises(ValueError) as info:
        read_geojson(path)
    assert str(path) in str(info.value)


def _graphml_long(tmp_path: Path) -> tuple[Path, str]:
    path = tmp_path / "g.graphml"
    path.write_text(
        '<?xml version="1.0" encoding="UTF-8"?>'
        '<graphml xmlns="http://graphml.graphdrawing.org/xmlns">'
        '<key id="y" for="node" attr.name="y" attr.type="long"/>'
        '<key id="x" for="node" attr.name="x" attr.type="long"/>'
        '<graph edgedefault="undirected"><node id="1">'
        f'<data key="y">{"9" * 400}</data><data key="x">1</data></node></graph></graphml>'
    )
    return path, "graphml"


def _csv_two_id_columns(tmp_path: Path) -> tuple[Path, str]:
    path = tmp_path / "dup.csv"
    path.write_text("id,id,lat,lon\n1,2,1,1\n")
    return path, "tables"


def _parquet_bad_utf8(tmp_path: Path) -> tuple[Path, str]:
    path = tmp_path / "bad.parquet"
    raw = pa.array([b"\xff\xfe", b"b"])
    ids = pa.Array.from_buffers(pa.string(), len(raw), raw.buffers())
    pq.write_table(pa.table({"id": ids, "lat": [1.0, 2.0], "lon": [1.0, 2.0]}), path)
    return path, "tables"


@pytest.mark.parametrize(
    "write",
    [_graphml_long, _csv_two_id_columns, _parquet_bad_utf8],
    ids=["GraphML long 400 digits: OverflowError", "CSV two id columns: KeyError", "bad UTF-8"],
)
def test_bad_graph_files_are_one_value_error_naming_the_file(tmp_path: Path, write) -> None:
    """Finding (item 4): three graph inputs escape the one-line refusal.  A GraphML node
    coordinate declared ``attr.type="long"`` with 400 digits raises ``OverflowError`` in
    ``_coordinate`` (it catches TypeError/ValueError only); a CSV node table with two ``id``
    columns raises ``KeyError`` from ``table.column`` in ``_column``; a Parquet id column
    holding invalid UTF-8 raises a bare ``UnicodeDecodeError`` (from ``to_pylist``) without
    the file's name."""
    pytest.importorskip("networkx")
    from dpgauss.release.domains.graph_files import read_graph_tables, read_graphml

    path, kind = write(tmp_path)
    read = read_graphml if kind == "graphml" else read_graph_tables
    with pytest.raises(ValueError) as info:
        read(path)
    assert str(path) in str(info.value)


# ------------------------------------------------------------- 6. after the charge


def test_a_region_id_that_cannot_be_written_fails_before_the_charge(tmp_path: Path) -> None:
    """Finding (rule c): a GeoJSON id with a lone surrogate (``"\\ud800"``, valid JSON) is
    accepted, then writing the table (CSV or Parquet) raises ``UnicodeEncodeError`` *after*
    the charge: the budget is spent and nothing is delivered."""
    regions = tmp_path / "r.geojson"
    regions.write_text(
        '{"type": "FeatureCollection", "features": [{"type": "Feature", "properties": '
        '{"id": "\\ud800"}, "geometry": {"type": "Polygon", "coordinates": '
        "[[[0, 0], [1, 0], [1, 1], [0, 1], [0, 0]]]}}]}"
    )
    src = tmp_path / "s.parquet"
    pq.write_table(pa.table({"uid": [1], "lat": [0.5], "lon": [0.5]}), src)
    domain = {"kind": "regions", "regions": str(regions), "lat": "lat", "lon": "lon"}
    delivered_or_refused_uncharged(make(src, domain, tmp_path / "r.csv"), tmp_path)


@pytest.mark.slow
def test_a_time_range_in_year_one_plots_or_fails_before_the_charge(tmp_path: Path) -> None:
    """Finding (rule c, item 6): a daily range over the first week of year 1 (valid: the spec
    allows any naive datetime) is planned with a plot; ``draw_series``' axis margins go
    before 0001-01-01 and matplotlib raises "dates must be between year 0001 and 9999" in
    ``_draw``, after the charge."""
    src = tmp_path / "s.parquet"
    t = np.array(["0001-01-02T00:00"], dtype="datetime64[us]")
    pq.write_table(pa.table({"uid": [1], "t": pa.array(t)}), src)
    domain = {
        "kind": "range",
        "column": "t",
        "start": "0001-01-01",
        "stop": "0001-01-08",
        "step": "1d",
    }
    delivered_or_refused_uncharged(make(src, domain, tmp_path / "r.csv"), tmp_path)


GRID_SAME_COLUMN = {
    "kind": "grid",
    "x": {"column": "a", "start": 0, "stop": 2, "step": 1},
    "y": {"column": "a", "start": 0, "stop": 3, "step": 1},
}
GRID_SIGMA = {
    "kind": "grid",
    "x": {"column": "sigma", "start": 0, "stop": 2, "step": 1},
    "y": {"column": "a", "start": 0, "stop": 3, "step": 1},
}
PRODUCT_COUNT = {
    "kind": "product",
    "parts": [
        {"kind": "values", "column": "a", "values": [0, 1], "name": "count_released"},
        {"kind": "values", "column": "sigma", "values": [0, 1], "name": "b"},
    ],
}


@pytest.mark.parametrize(
    ("domain", "extra"),
    [
        (GRID_SAME_COLUMN, {}),
        (GRID_SIGMA, {}),
        (PRODUCT_COUNT, {"statistic": {"kind": "mean", "column": "a", "lower": 0, "upper": 1}}),
    ],
    ids=["grid x and y on one column", "grid over a column named sigma", "part count_released"],
)
def test_key_columns_are_not_lost_or_overwritten(
    tmp_path: Path, domain: dict, extra: dict, zero_noise
) -> None:
    """Finding (item 6, output shape): ``_check_grid`` does not check its two key column names
    as ``_check_product`` does, and the product's reserved list lacks a mean's
    ``sum_released``/``count_released``.  A grid with x and y over one column writes one key
    column (the y keys vanish); a grid over a column named ``sigma`` has its key column
    overwritten by σ; a part named ``count_released`` has its keys replaced by noisy counts.
    The spec should refuse these (or the table keep every axis's labels)."""
    src = tmp_path / "s.parquet"
    pq.write_table(pa.table({"uid": [1, 2], "a": [0.5, 1.5], "sigma": [0.0, 1.0]}), src)
    try:
        spec = make(src, domain, tmp_path / "r.csv", **extra)
    except ValueError:
        return  # refused in the spec: fine
    with zero_noise():
        res = run_release(spec, ledger=make_ledger(tmp_path), engine=DUCK)
    from dpgauss.release.domains.key_domain import resolve_domain

    dom = resolve_domain(spec)
    keys = dom.key_columns()
    assert len(keys) == len(dom.axes)  # one key column per axis
    for name, labels in keys.items():  # each holds that axis's labels, not σ or counts
        assert np.array_equal(np.asarray(res.columns[name]), labels)
