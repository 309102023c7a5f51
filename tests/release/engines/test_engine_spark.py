"""The Spark engine: the DuckDB engine's semantics checks, and both engines on the same files.

Spark runs in local mode (``local[2]``, 4 shuffle partitions, no UI), started once for this
module.  The module is skipped when pyspark or Java is missing.

The engines hash records differently, so they keep different samples when a bound bites.  The
cross-engine tests therefore use data whose bounded aggregate does not depend on the sample:
a unit either stays under every bound, or all its records share one key and one value (then
any ``min(n, bound)`` of them give the same aggregate).  With the ``zero_noise`` fixture
(the ``estimate.add_noise`` seam replaced) whole releases are compared too.  The key-count
bound always chooses between different keys; it is compared per unit, as the sorted counts of
each unit.
"""

from __future__ import annotations

import gzip
import json
import math
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

pytest.importorskip("duckdb")
pa = pytest.importorskip("pyarrow")
pq = pytest.importorskip("pyarrow.parquet")

try:  # without pyspark every test here is reported skipped, with the reason (conftest.py)
    from pyspark.sql import functions as sf
except ImportError:
    sf = None

from dpgauss.release import (  # noqa: E402
    ReleaseSpec,
    bounded_aggregate,
    load_spec,
)
from dpgauss.release.engines import csv_format, get_engine  # noqa: E402
from dpgauss.release.engines.base import EngineError  # noqa: E402
from dpgauss.release.engines.duckdb import DuckDBEngine  # noqa: E402
from dpgauss.release.engines.spark import SparkEngine, priority_column  # noqa: E402
from dpgauss.release.pipeline import run_release  # noqa: E402

from ..test_filter import (  # noqa: E402
    NIGHT_WINDOW,
    check_window_rows,
    spec_for,
    window_records,
)
from ..test_pipeline import (  # noqa: E402
    MALFORMED,
    charges,
    check_a_units_choice_depends_on_its_own_records_only,
    check_each_unit_keeps_min_of_its_records_and_b,
    check_per_key_and_key_count_bounds,
    check_selection_is_uniform_over_subsets,
    cli,
    make_ledger,
    make_spec,
    small_release_data,
    small_spec_toml,
    write_parquet,
)
from ..test_spec import EXAMPLE  # noqa: E402
from . import test_csv_format as csv_checks  # noqa: E402

pytestmark = [
    pytest.mark.spark,
    pytest.mark.filterwarnings("ignore:PySpark does not yet fully support pandas:FutureWarning"),
]

DUCK = DuckDBEngine(threads=2)


@pytest.fixture(scope="module")
def engine(spark) -> SparkEngine:
    return SparkEngine(spark)


def both(spec: ReleaseSpec, engine: SparkEngine, salt: int = 11):
    """The bounded aggregate of ``spec`` from DuckDB and from Spark."""
    return (
        bounded_aggregate(spec, salt=salt, engine=DUCK),
        bounded_aggregate(spec, salt=salt, engine=engine),
    )


def assert_same(duck, spark, *, exact: bool = True) -> None:
    assert spark.rows == duck.rows
    if exact:
        np.testing.assert_array_equal(spark.counts, duck.counts)
    else:
        np.testing.assert_allclose(spark.counts, duck.counts, rtol=1e-12, atol=1e-12)
    if duck.sums is None:
        assert spark.sums is None
    elif exact:
        np.testing.assert_array_equal(spark.sums, duck.sums)
    else:
        np.testing.assert_allclose(spark.sums, duck.sums, rtol=1e-12, atol=1e-9)


# ------------------------------------------------------------------------- bounding


def test_each_unit_keeps_min_of_its_records_and_b(tmp_path: Path, engine) -> None:
    check_each_unit_keeps_min_of_its_records_and_b(tmp_path, engine)


def test_a_unit_with_a_million_records_keeps_its_bound(spark) -> None:
    heavy = spark.range(10**6).select(
        sf.lit(0).cast("long").alias("uid"), (sf.col("id") % 100).alias("key"), "id"
    )
    light = spark.range(300).select(
        (sf.col("id") / 3 + 1).cast("long").alias("uid"),
        (sf.col("id") / 3 + 100).cast("long").alias("key"),
        (sf.col("id") + 10**6).alias("id"),
    )
    eng = SparkEngine(dataframe=heavy.unionByName(light))
    # All three bounds in one job: c = 2 per key, k = 3 keys, b = 5 records.
    bounds = {"max_records_per_key": 2, "max_keys_per_unit": 3, "max_records_per_unit": 5}
    spec = make_spec(
        "-",
        source={"path": None, "table": "heavy", "types": {"uid": "int64", "key": "int64"}},
        domain={"stop": 200},
        bounds=bounds,
    )
    agg = bounded_aggregate(spec, engine=eng)
    top = agg.counts[:100]
    assert top.sum() == 5 and top.max() == 2 and np.count_nonzero(top) == 3  # the heavy unit
    assert np.all(agg.counts[100:] == 2)  # the others: c = 2 of their 3 records
    r = agg.rows
    assert (r.read, r.kept, r.units) == (10**6 + 300, 5 + 200, 101)
    assert r.dropped_by_bounds == {
        "max_records_per_key": 10**6 - 200 + 100,
        "max_keys_per_unit": 200 - 6,
        "max_records_per_unit": 1,
    }


def test_per_key_and_key_count_bounds(tmp_path: Path, engine) -> None:
    check_per_key_and_key_count_bounds(tmp_path, engine)


def test_selection_is_uniform_over_subsets(tmp_path: Path, engine) -> None:
    check_selection_is_uniform_over_subsets(tmp_path, engine)


def test_the_salt_mixes_a_fixed_units_order(tmp_path: Path, spark, engine) -> None:
    # One unit, 4 records, 150 salts: every pair of records must be kept for some salts.  The
    # priorities of all salts come from one job (the engine's own priority expression), and
    # one release checks that the engine keeps the pair they predict.
    salts = [(s * 2654435761) % 2**64 for s in range(1, 2**63, 2**63 // 150)[:150]]
    signed = [s - 2**64 if s >= 2**63 else s for s in salts]
    rows = [(s, 7, k) for s in signed for k in range(4)]
    df = spark.createDataFrame(rows, "salt long, uid long, key long")
    got = df.select("salt", "key", priority_column(["uid", "key"], sf.col("salt")).alias("p"))
    prio: dict[int, list[tuple[int, int]]] = {}
    for r in got.collect():
        prio.setdefault(r["salt"], []).append((r["p"], r["key"]))
    seen: dict[tuple[int, ...], int] = {}
    for s in signed:
        pair = tuple(sorted(k for _, k in sorted(prio[s])[:2]))
        seen[pair] = seen.get(pair, 0) + 1
    assert len(seen) == 6 and min(seen.values()) >= 8, seen
    src = write_parquet(tmp_path / "one.parquet", uid=[7, 7, 7, 7], key=[0, 1, 2, 3])
    spec = make_spec(src, domain={"stop": 4}, bounds={"max_records_per_unit": 2})
    agg = bounded_aggregate(spec, salt=salts[5], engine=engine)
    predicted = sorted(k for _, k in sorted(prio[signed[5]])[:2])
    assert np.flatnonzero(agg.counts).tolist() == predicted


def test_a_units_choice_depends_on_its_own_records_only(tmp_path: Path, engine) -> None:
    check_a_units_choice_depends_on_its_own_records_only(tmp_path, engine, (2**63 + 5,))


# ----------------------------------------------------------------- malformed rows


@pytest.fixture
def malformed(tmp_path: Path) -> Path:
    path = tmp_path / "m.csv"
    # Besides the DuckDB test's lines: a line with too many fields, and a blank line (a line
    # of one empty field: malformed too, csv_format).
    path.write_text(MALFORMED + "e,1,5,40.7,-73.9,extra\n\n")
    return path


def test_malformed_rows_are_dropped_and_counted(malformed: Path, engine) -> None:
    spec = make_spec(
        malformed,
        domain={"kind": "values", "column": "zone", "values": [0, 1, 2]},
        statistic={"kind": "sum", "column": "fare", "lower": 0, "upper": 100},
    )
    duck, agg = both(spec, engine)
    r = agg.rows
    assert r.malformed_lines == 3  # "d,1,2,3": too few fields; "e,…,extra": too many; ""
    assert r.null_unit == 2  # empty and quoted-empty unit ids
    assert r.invalid_domain == 2  # "x" and the empty zone
    assert r.invalid_value == 2  # "abc" and "inf"
    assert r.outside_domain == 1  # zone 7
    assert r.in_domain == 4
    assert (
        r.read
        == 14
        == sum(
            getattr(r, k)
            for k in (
                "malformed_lines",
                "null_unit",
                "invalid_domain",
                "invalid_value",
                "outside_domain",
                "in_domain",
            )
        )
    )
    assert agg.counts.tolist() == [2.0, 1.0, 1.0]
    assert agg.sums.tolist() == [30.0, 30.0, 100.0]  # 1000 clamped to 100
    assert_same(duck, agg)


def test_graph_coordinates_out_of_range(malformed: Path, engine) -> None:
    graph = {"kind": "graph", "graph": "manhattan", "lat": "lat", "lon": "lon"}
    spec = make_spec(malformed, domain={**graph, "bbox": [40.4, 41.0, -74.3, -73.6]})
    duck, agg = both(spec, engine)
    assert agg.rows.invalid_domain == 2  # lat 91, and (0, 0) outside the bounding box
    assert agg.rows.outside_domain >= 1
    assert_same(duck, agg)


def test_on_malformed_fail_is_checked_not_enforced(tmp_path: Path, malformed: Path, engine) -> None:
    from dpgauss.release.check import check_source

    ledger = make_ledger(tmp_path)
    spec = make_spec(
        malformed,
        source={"on_malformed": "check_fails"},
        domain={"kind": "values", "column": "zone", "values": [0, 1]},
    )
    out = tmp_path / "out.csv"
    run_release(spec, out=out, ledger=ledger, engine=engine)
    assert out.exists() and charges(ledger) == 1
    result = check_source(spec, engine=engine)
    assert result.violations == ("3 malformed lines ([source] on_malformed = 'check_fails')",)


# ------------------------------------------------------------------ filter windows


def test_rows_outside_the_window_are_counted_and_excluded(tmp_path: Path, engine) -> None:
    src, uid, key, inside = window_records(tmp_path, "str")
    agg = bounded_aggregate(spec_for(src, NIGHT_WINDOW), salt=5, engine=engine)
    check_window_rows(agg, uid, key, inside)


def test_numeric_window(tmp_path: Path, engine) -> None:
    uid = np.arange(12) % 4
    key = np.array([0, 1, 1, 0, 7, 0, 1, 1, 0, 1, 0, 1])
    hour = np.array([1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12.5])
    src = write_parquet(tmp_path / "h.parquet", uid=uid, key=key, hour=hour)
    spec = make_spec(
        src,
        filter={"column": "hour", "start": 2, "stop": 12},
        domain={"stop": 2},
        bounds={"max_records_per_unit": 100},
    )
    agg = bounded_aggregate(spec, salt=9, engine=engine)
    inside = (hour >= 2) & (hour < 12)
    assert agg.rows.outside_filter == int((~inside).sum())
    assert agg.rows.outside_domain == 1
    np.testing.assert_array_equal(agg.counts, np.bincount(key[inside & (key < 2)], minlength=2))


# ----------------------------------------------------------- domains and sources


def test_string_values_and_header_less_csv(tmp_path: Path, engine) -> None:
    # Without a header, [source] columns names the columns.
    path = tmp_path / "v.csv"
    path.write_text("1,north,0.2\n2,south,0.7\n3,north,1.49\n4,east,1.5\n5,,-0.1\n")
    spec = make_spec(
        path,
        source={"header": False, "columns": ["id", "zone", "x"]},
        unit={"column": "id"},
        domain={"kind": "values", "column": "zone", "values": ["north", "south"]},
    )
    assert list(engine.describe(spec)) == ["id", "zone", "x"]
    duck, agg = both(spec, engine)
    assert agg.counts.tolist() == [2.0, 1.0]
    assert (agg.rows.outside_domain, agg.rows.invalid_domain) == (1, 1)
    assert_same(duck, agg)


def test_sources_tables_dataframes_and_globs(tmp_path: Path, spark, engine) -> None:
    src, truth = small_release_data(tmp_path)
    table = pq.read_table(src)
    (tmp_path / "parts").mkdir()
    pq.write_table(table.slice(0, 300), tmp_path / "parts" / "a.parquet")
    pq.write_table(table.slice(300), tmp_path / "parts" / "b.parquet")
    agg = bounded_aggregate(make_spec(tmp_path / "parts" / "*.parquet"), engine=engine)
    np.testing.assert_array_equal(agg.counts, truth)
    df = spark.read.parquet(str(src))
    df.createOrReplaceTempView("dp_visits")
    types = {"uid": "int64", "key": "int64"}
    spec = make_spec("-", source={"path": None, "table": "dp_visits", "types": types})
    assert engine.describe(spec)["uid"] == "bigint"
    np.testing.assert_array_equal(bounded_aggregate(spec, engine=engine).counts, truth)
    own = get_engine("spark", dataframe=df.filter("key < 5"))
    np.testing.assert_array_equal(bounded_aggregate(spec, engine=own).counts[5:], 0)
    with pytest.raises(ValueError, match="must be a table"):
        bounded_aggregate(make_spec(src), engine=own)
    with pytest.raises(ValueError, match="DuckDB file"):
        bounded_aggregate(
            make_spec("-", source={**spec.to_dict()["source"], "database": "x"}), engine=engine
        )
    with pytest.raises(ValueError, match="cannot read the source") as info:
        engine.describe(make_spec(tmp_path / "missing-*.parquet"))
    assert "\n" not in str(info.value)


def test_csv_malformed_lines_with_record_columns(malformed: Path, engine) -> None:
    # With record_columns the priority reads few columns; malformed lines must still be
    # detected on the whole line.
    spec = make_spec(
        malformed,
        domain={"kind": "values", "column": "zone", "values": [0, 1, 2]},
        bounds={"max_records_per_unit": 5, "record_columns": ["uid"]},
    )
    duck, agg = both(spec, engine)
    assert agg.rows.malformed_lines == 3
    assert_same(duck, agg)


# ------------------------------------------------------------------ cross-engine


def determined_data(tmp_path: Path) -> tuple[Path, Path]:
    """The same records as CSV (text) and Parquet (typed): every bounded aggregate of them
    is the same whatever records the bounds keep (module docstring)."""
    rng = np.random.default_rng(42)
    nodes_lat, nodes_lon = 40.7580, -73.9855  # Times Square; jitter stays within Manhattan
    rows: list[tuple] = []

    def when(i: int) -> str:
        minute = int(rng.integers(-60, 300))  # the window below is [18:00, 22:00)
        return str(np.datetime64("2013-01-05T18:00") + np.timedelta64(minute, "m")).replace(
            "T", " "
        )

    def where() -> tuple[float, float]:
        return (
            round(nodes_lat + float(rng.normal(0, 0.004)), 6),
            round(nodes_lon + float(rng.normal(0, 0.004)), 6),
        )

    # Small units: 1-2 records on distinct keys, any values: under every bound below.
    for u in range(300):
        for key in rng.choice(10, size=int(rng.integers(1, 3)), replace=False):
            rows.append((f"s{u}", str(key), str(int(rng.integers(-20, 140))), when(u), *where()))
    # Heavy units: 3-40 records on one key with one value and one place: any bound keeps
    # min(n, bound) interchangeable records.
    for u in range(60):
        key, fare, (lat, lon) = str(rng.integers(0, 10)), str(int(rng.integers(0, 120))), where()
        for _ in range(int(rng.integers(3, 41))):
            rows.append((f"h{u}", key, fare, when(u), lat, lon))
    # Rows of every class, each its own unit (a single record is kept by every bound).
    odd = [
        ("", "1", "5", "2013-01-05 19:00", 40.75, -73.99),  # no unit
        ("x1", "x", "5", "2013-01-05 19:00", 40.75, -73.99),  # invalid key
        ("x2", "15", "5", "2013-01-05 19:00", 40.75, -73.99),  # outside the range
        ("x3", "3", "abc", "2013-01-05 19:00", 40.75, -73.99),  # invalid value
        ("x4", "3", "inf", "2013-01-05 19:00", 91.0, -73.99),  # invalid value, latitude
        ("x5", "4", "5d", "2013-01-05 19:00", 40.75, -73.99),  # Spark alone would parse 5d
        ("x6", "4", "0x10", "2013-01-05 19:00", 40.75, -73.99),
        ("x7", "4", "1_0", "2013-01-05 19:00", 40.75, -73.99),  # DuckDB reads 10
        ("x8", "5", " 7 ", "2013-01-05 19:00", 40.75, -73.99),
        ("x9", "5", "1e1", "2013-01-05 19:00", 40.0, -70.0),  # far from every junction
        ("y0", " 6 ", "nan", "2013-01-05 19:00", 40.75, -73.99),
        ("y1", "2.0", "-inf", "2013-01-05 19:00", 40.75, -73.99),
    ]
    stamps = [
        "2013-01-05 18",
        "2013",
        "2013-1-5 18:30",
        "2013-01-05T19:00:00",
        " 2013-01-05 18:30 ",
        "2013-01-05 18:30:00.5",
        "2013-01-05 18:30:00+01",
        "20130105",
        "bad",
        "",
        "2013-01-05 22:00",
        "2013-01-05 17:59:59.999",
    ]
    odd += [(f"t{i}", "7", "3", s, 40.75, -73.99) for i, s in enumerate(stamps)]
    rows += odd
    order = rng.permutation(len(rows))
    rows = [rows[i] for i in order]
    csv = tmp_path / "d.csv"
    lines = ["uid,key,fare,t,lat,lon"]
    for r in rows:
        lines.append(",".join(f'"{x}"' if x == "" else str(x) for x in r))
    lines.insert(len(lines) // 2, "z1,1,2")  # malformed: too few fields
    lines.insert(len(lines) // 3, "z2,1,2,2013-01-05 19:00,40.75,-73.99,9")  # too many
    csv.write_text("\n".join(lines) + "\n")

    # Parquet: typed columns, unparseable values as nulls.
    def num(x: str) -> float | None:
        try:
            return (
                float(x) if x.strip() and "_" not in x and "x" not in x and "d" not in x else None
            )
        except ValueError:
            return None

    def stamp(x: str) -> np.datetime64 | None:
        try:
            ok = len(x.strip()) >= 16 and "+" not in x
            return np.datetime64(x.strip().replace(" ", "T"), "us") if ok else None
        except ValueError:
            return None

    par = tmp_path / "d.parquet"
    pq.write_table(
        pa.table(
            {
                "uid": pa.array([r[0] or None for r in rows], pa.string()),
                "key": pa.array(
                    [int(n) if (n := num(r[1])) is not None else None for r in rows], pa.int64()
                ),
                "fare": pa.array([num(r[2]) for r in rows], pa.float64()),
                "t": pa.array([stamp(r[3]) for r in rows], pa.timestamp("us")),
                "lat": pa.array([r[4] for r in rows], pa.float64()),
                "lon": pa.array([r[5] for r in rows], pa.float64()),
            }
        ),
        par,
    )
    return csv, par


WINDOW = {"column": "t", "start": "2013-01-05 18:00", "stop": "2013-01-05 22:00"}
GRAPH = {"kind": "graph", "graph": "manhattan", "lat": "lat", "lon": "lon", "cutoff": 200.0}
DETERMINED = {
    "count, range, window, b": {
        "filter": WINDOW,
        "bounds": {"max_records_per_unit": 3},
    },
    "sum, values, c, k, b": {
        "domain": {"kind": "values", "column": "key", "values": [0, 1, 2, 3, 4, 5, 6, 8]},
        "statistic": {"kind": "sum", "column": "fare", "lower": 0, "upper": 100},
        "bounds": {"max_records_per_key": 2, "max_keys_per_unit": 2, "max_records_per_unit": 4},
    },
    "mean, range, window, c, b": {
        "filter": WINDOW,
        "domain": {"kind": "range", "column": "key", "start": -0.5, "stop": 9.5, "step": 1.0},
        "statistic": {"kind": "mean", "column": "fare", "lower": -10, "upper": 110},
        "bounds": {"max_records_per_key": 1, "max_records_per_unit": 2},
    },
    "count, graph nearest, c": {
        "domain": GRAPH,
        "bounds": {"max_records_per_key": 4},
    },
    "sum, graph kde, b": {
        "domain": {**GRAPH, "mapping": "kde", "bandwidth": 60.0},
        "statistic": {"kind": "sum", "column": "fare", "lower": 0, "upper": 100},
        "bounds": {"max_records_per_unit": 2},
    },
}


@pytest.mark.parametrize(
    ("name", "fmt"),
    [
        ("count, range, window, b", "csv"),
        ("count, range, window, b", "parquet"),  # typed timestamps
        ("sum, values, c, k, b", "parquet"),
        ("mean, range, window, c, b", "csv"),
        ("count, graph nearest, c", "csv"),
        ("sum, graph kde, b", "parquet"),
    ],
)
def test_both_engines_give_the_same_bounded_aggregate(tmp_path: Path, engine, name, fmt) -> None:
    csv, par = determined_data(tmp_path)
    spec = make_spec(csv if fmt == "csv" else par, **DETERMINED[name])
    duck, agg = both(spec, engine, salt=123)
    r = agg.rows
    assert r.kept > 100 and r.in_domain > r.kept  # a bound bites
    assert max(r.dropped_by_bounds.values()) > 0
    assert_same(duck, agg, exact="kde" not in name)
    if "kde" in name:
        assert agg.counts.sum() == pytest.approx(r.kept, rel=1e-12)  # weights sum to 1
    if fmt == "csv":
        assert r.malformed_lines == 2
    classes = ("outside_filter", "null_unit", "invalid_domain", "invalid_value", "outside_domain")
    assert sum(getattr(r, c) > 0 for c in classes) >= 3


def test_both_engines_bound_keys_per_unit_alike(tmp_path: Path, engine) -> None:
    # The key-count bound chooses between keys, so the engines' choices differ; each unit's
    # sorted counts, its sum and every row counter do not.  Unit u has m(u) keys of its own
    # (block 10u … 10u+9) with r(u) records of one value on each.
    rng = np.random.default_rng(8)
    uid, key, fare = [], [], []
    for u in range(80):
        m, r, v = int(rng.integers(1, 7)), int(rng.integers(1, 5)), float(rng.integers(0, 50))
        for j in range(m):
            uid += [u] * r
            key += [10 * u + j] * r
            fare += [v] * r
    src = write_parquet(tmp_path / "k.parquet", uid=uid, key=key, fare=fare, t=np.arange(len(uid)))
    spec = make_spec(
        src,
        domain={"stop": 800},
        statistic={"kind": "sum", "column": "fare", "lower": 0, "upper": 40},
        bounds={"max_records_per_key": 2, "max_keys_per_unit": 3, "max_records_per_unit": 5},
    )
    duck, agg = both(spec, engine)
    assert agg.rows == duck.rows
    assert all(v > 0 for v in agg.rows.dropped_by_bounds.values())
    for a, b in ((agg.counts, duck.counts), (agg.sums, duck.sums)):
        ga, gb = a.reshape(80, 10), b.reshape(80, 10)
        np.testing.assert_array_equal(np.sort(ga, axis=1), np.sort(gb, axis=1))


def test_both_engines_write_the_same_release(tmp_path: Path, engine, zero_noise) -> None:
    csv, _ = determined_data(tmp_path)
    ledger = make_ledger(tmp_path)
    for name in ("count, range, window, b", "mean, range, window, c, b"):
        spec = make_spec(csv, **DETERMINED[name], denoise={"method": "james_stein"})
        outs = {}
        with zero_noise():
            for label, eng in (("duckdb", DUCK), ("spark", engine)):
                out = tmp_path / f"{label}-{name[:4]}.csv"
                outs[label] = run_release(spec, out=out, ledger=ledger, engine=eng)
        d, s = outs["duckdb"], outs["spark"]
        assert list(s.columns) == list(d.columns)
        for col in d.columns:
            np.testing.assert_array_equal(s.columns[col], d.columns[col], err_msg=col)
        assert s.diagnostics["rows"] == d.diagnostics["rows"]
        assert s.diagnostics["engine"] == "spark"
        body = [Path(x.output_path).read_text() for x in (d, s)]
        assert body[0] == body[1]


def test_the_taxi_example_on_spark(tmp_path: Path, engine) -> None:
    # The bundled trips: b = 5 only, so the row counters do not depend on the sample.
    spec = load_spec(EXAMPLE)
    duck, agg = both(spec, engine)
    assert agg.rows == duck.rows
    assert agg.rows.read == 10_000 and agg.rows.invalid_domain == 232
    assert agg.counts.sum() == pytest.approx(agg.rows.kept, rel=1e-12)
    assert np.all(agg.counts >= 0)


# -------------------------------------------------------------------------- the CLI


def test_cli_engine_spark(tmp_path: Path, engine) -> None:
    src, _ = small_release_data(tmp_path)
    ledger = make_ledger(tmp_path)
    spec = small_spec_toml(tmp_path / "spec.toml", src, "none")
    out = tmp_path / "cli.csv"
    argv = ["release", str(spec), "--engine", "spark", "--out", str(out), "--ledger", str(ledger)]
    code, text = cli([*argv, "--json"])
    assert code == 0, text
    obj = json.loads(text)
    assert obj["output"] == out.name and out.exists()
    report = json.loads((tmp_path / obj["report"]).read_text())
    assert "rows" not in obj and "engine" not in report
    assert charges(ledger) == 1


# ------------------------------------------------------- CSV: the line-local format


def same_as_duckdb(results: list) -> None:
    """Each (spec, salt, Spark aggregate) of a csv_format check equals DuckDB's."""
    for spec, salt, agg in results:
        assert_same(bounded_aggregate(spec, salt=salt, engine=DUCK), agg)


def test_csv_unterminated_quote_far_in_the_file(tmp_path: Path, engine) -> None:
    same_as_duckdb(csv_checks.check_unterminated_quote_far_in_the_file(tmp_path, engine))


def test_csv_unterminated_quote_early_in_the_file(tmp_path: Path, engine) -> None:
    same_as_duckdb(csv_checks.check_unterminated_quote_early_in_the_file(tmp_path, engine))


def test_csv_bare_cr_and_crlf(tmp_path: Path, engine) -> None:
    same_as_duckdb(csv_checks.check_bare_cr_and_crlf(tmp_path, engine))


def test_csv_one_crlf_line_in_an_lf_file(tmp_path: Path, engine) -> None:
    same_as_duckdb(csv_checks.check_one_crlf_line_in_an_lf_file(tmp_path, engine))


def test_csv_header_false_extra_field_first(tmp_path: Path, engine) -> None:
    same_as_duckdb(csv_checks.check_header_false_extra_field_first(tmp_path, engine))


def test_csv_multi_line_record_is_several_lines(tmp_path: Path, engine) -> None:
    same_as_duckdb(csv_checks.check_multi_line_record_is_several_lines(tmp_path, engine))


@pytest.mark.parametrize("mode", csv_format.MODES)
@pytest.mark.parametrize("delimiter", [",", "\t", "é"])
def test_csv_line_classes(tmp_path: Path, engine, delimiter: str, mode: str) -> None:
    same_as_duckdb(csv_checks.check_line_classes(tmp_path, engine, delimiter, mode))


def test_csv_a_multi_line_note_is_one_record(tmp_path: Path, engine) -> None:
    same_as_duckdb(csv_checks.check_a_multi_line_note_is_one_record(tmp_path, engine))


def test_csv_files_written_by_standard_tools(tmp_path: Path, engine) -> None:
    same_as_duckdb(csv_checks.check_files_written_by_standard_tools(tmp_path, engine))


def test_csv_an_unterminated_quote_is_the_rest_of_the_file(tmp_path: Path, engine) -> None:
    same_as_duckdb(csv_checks.check_an_unterminated_quote_is_the_rest_of_the_file(tmp_path, engine))


def test_csv_a_header_of_several_lines(tmp_path: Path, engine) -> None:
    same_as_duckdb(csv_checks.check_a_header_of_several_lines(tmp_path, engine))


def test_csv_balanced_texts_add_their_own_contributions(tmp_path: Path, engine) -> None:
    extra, where = csv_checks.random_extra_records(13, 30)
    same_as_duckdb(
        csv_checks.check_one_line_adds_its_own_contribution(
            tmp_path, engine, extra, where, True, "rfc4180"
        )
    )


def test_csv_records_across_file_splits(tmp_path: Path, spark, engine) -> None:
    # Splits of 97 bytes: most records of several lines cross a split boundary, some span
    # several splits; Spark's text reader reads each split on its own, the stitching orders
    # the lines by (split start, id) and finds DuckDB's records.  Two files, one gzip (one
    # split), so that partitions hold lines of several files.
    rng = np.random.default_rng(5)
    lines = [b"uid,key,note"]
    for i in range(400):
        k = int(rng.integers(0, 4))
        note = b"\r\n".join(b'x""%d' % j for j in range(k)) if k else b"plain"
        lines.append(b'u%d,%d,"%s"' % (i, i % 10, note) if k else b"u%d,%d,%s" % (i, i % 10, note))
    body = b"\n".join(lines) + b"\n"
    (tmp_path / "a.csv").write_bytes(body)
    with gzip.open(tmp_path / "b.csv.gz", "wb") as f:
        f.write(body.replace(b"\nu", b"\nv"))
    spec = csv_checks.spec_of(tmp_path / "*.csv*")
    conf = {"spark.sql.files.maxPartitionBytes": "97", "spark.sql.files.openCostInBytes": "0"}
    old = {key: spark.conf.get(key) for key in conf}
    try:
        for key, value in conf.items():
            spark.conf.set(key, value)
        assert spark.read.text(str(tmp_path / "a.csv")).rdd.getNumPartitions() > 50
        duck, agg = both(spec, engine)
    finally:
        for key, value in old.items():
            spark.conf.set(key, value)
    assert agg.rows.read == 800 and agg.rows.malformed_lines == 0 and agg.rows.units == 800
    assert agg.counts.tolist() == [80.0] * 10
    assert_same(duck, agg)


def test_csv_files_and_headers(tmp_path: Path, engine) -> None:
    same_as_duckdb(csv_checks.check_files_and_headers(tmp_path, engine))


def test_csv_source_errors(tmp_path: Path, engine) -> None:
    csv_checks.check_source_errors(tmp_path, engine)


@pytest.mark.parametrize("final", [True, False])
def test_csv_lines_add_their_own_contributions(tmp_path: Path, engine, final: bool) -> None:
    extra, where = csv_checks.random_extra_lines(11 + final, 30)
    same_as_duckdb(
        csv_checks.check_one_line_adds_its_own_contribution(tmp_path, engine, extra, where, final)
    )


def test_csv_long_quoted_fields_do_not_overflow_the_stack(tmp_path: Path, engine) -> None:
    # java.util.regex recurses per repetition of a group: the plain grammar overflowed the
    # JVM's stack on a quoted field of 20,000 characters (and killed the driver).
    lines = [
        b"uid,key,v",
        b'a,1,"' + b"x" * 200_000 + b'"',
        b'b,2,"' + b'""' * 100_000 + b'"',
        b'c,3,"' + b'y""' * 50_000,  # unterminated
    ]
    path = tmp_path / "long.csv"
    path.write_bytes(b"\n".join(lines) + b"\n")
    duck, agg = both(csv_checks.spec_of(path), engine)
    assert agg.counts[:4].tolist() == [0.0, 1.0, 1.0, 0.0] and agg.rows.malformed_lines == 1
    assert_same(duck, agg)


def test_csv_on_a_hadoop_file_system(tmp_path: Path, engine, monkeypatch) -> None:
    # Paths Spark reads from another file system are listed and their header is read through
    # Hadoop; on local files (file://) the result is the local reading's.
    parts = tmp_path / "h"
    parts.mkdir()
    (parts / "a.csv").write_bytes(b"\xef\xbb\xbfuid,key\r\nu1,1\r\nu2,2\r\n")
    with gzip.open(parts / "b.csv.gz", "wb") as f:
        f.write(b"uid,key\nu3,3\nuid,key\n")
    (parts / "c.csv").write_bytes(b"\xef\xbb\xbf")  # no lines
    (parts / "d.csv").write_bytes(b"\xef\xbb\xbf\n")  # one empty line
    uris = engine._hadoop_files([f"file://{parts}/*.csv*"])
    assert [u.rsplit("/", 1)[1] for u in uris] == ["a.csv", "b.csv.gz", "c.csv", "d.csv"]
    (parts / "e.csv").write_bytes(b'\xef\xbb\xbfuid,"k\r\ney"\r\nu,1\r\n')  # a header of 2 lines
    (parts / "f.csv").write_bytes(b'uid,"k\ney\n')  # unterminated: the whole file
    uris = engine._hadoop_files([f"file://{parts}/*.csv*"])
    for uri in uris:
        local = uri.removeprefix("file:")
        assert engine._hadoop_first_line(uri) == csv_format.first_line(local), uri
        for mode in csv_format.MODES:
            first = engine._hadoop_first_record(uri, mode)
            assert first == csv_format.first_record(local, mode), (uri, mode)
    with pytest.raises(csv_format.CsvError, match="no file matches"):
        engine._hadoop_files([f"file://{parts}/none-*.csv"])
    spec = csv_checks.spec_of(parts / "[ab].csv*")
    local = bounded_aggregate(spec, salt=3, engine=engine)
    monkeypatch.setattr(engine, "_local", lambda pattern: False)
    remote = bounded_aggregate(spec, salt=3, engine=engine)
    assert_same(local, remote)
    assert remote.counts[:4].tolist() == [0.0, 1.0, 1.0, 1.0] and remote.rows.read == 3


# ------------------------------------------------------------- exact key mapping


def test_spark_numeric_keys_match_exactly_by_type(tmp_path: Path, engine) -> None:
    """The DuckDB engine's per-type checks (``domains/test_keys``), on Spark: every Parquet type
    (Spark reads ``uint64`` as ``DECIMAL(20, 0)``) against exact matching."""
    from ..domains.test_keys import NUMERIC_KEY_CASES, check

    for kind, values, keys in NUMERIC_KEY_CASES:
        if kind in ("uint64", "float32", "decimal(20,2)", "string"):
            check(engine, kind, values, {"kind": "values", "values": keys}, tmp_path)


def test_spark_the_findings_are_fixed(tmp_path: Path, engine) -> None:
    """The regressions of ``domains/test_keys`` on Spark: keys equal as doubles, an integer range
    beyond 2**53 (key 4 of a 4-key domain: an IndexError), float edges and exact bins."""
    from ..domains.test_keys import mapped_keys

    domain = {"kind": "values", "values": [2**60, 2**60 + 1, 0.5]}
    assert mapped_keys(engine, "int64", [2**60, 2**60 + 1], domain, tmp_path) == [0, 1]
    domain = {"kind": "values", "values": [2**53 + 1, 2.0**53]}
    got = mapped_keys(engine, "string", ["9007199254740992", "9007199254740993"], domain, tmp_path)
    assert got == [1, 0]
    domain = {"kind": "range", "start": 2**53 + 3, "stop": 2**53 + 7, "step": 1}
    values = [2**53 + 2, 2**53 + 3, 2**53 + 6, 2**53 + 7]
    assert mapped_keys(engine, "int64", values, domain, tmp_path) == [None, 0, 3, None]
    shift = {"kind": "range", "start": 0.3, "stop": 6.2, "step": 0.1}
    values = [4.3, 0.3, 6.1, math.nextafter(6.2, 0.0), 6.2]
    assert mapped_keys(engine, "float64", values, shift, tmp_path) == [39, 0, 57, 58, None]


_SPARK_SETTINGS = settings(
    max_examples=3,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)


@_SPARK_SETTINGS
@given(data=st.data())
def test_spark_range_keys_are_exact(tmp_path: Path, engine, data) -> None:
    from dpgauss.release.domains.keys import RangeBins

    from ..domains.test_keys import KINDS, check, range_domains, records

    domain = data.draw(range_domains())
    bins = RangeBins.of(domain["start"], domain["stop"], domain["step"])
    kind = data.draw(st.sampled_from(KINDS))
    edges = [bins.edge(i) for i in (0, 1, bins.size // 2, bins.size - 1, bins.size)]
    values = data.draw(records([*edges, bins.stop], kind))
    try:
        check(engine, kind, values, domain, tmp_path)
    except EngineError as exc:
        assert "cannot bin a DECIMAL column" in str(exc)


@_SPARK_SETTINGS
@given(data=st.data())
def test_spark_value_keys_are_exact(tmp_path: Path, engine, data) -> None:
    from fractions import Fraction

    from ..domains.test_keys import KINDS, check, records, value_domains

    domain = data.draw(value_domains())
    kind = data.draw(st.sampled_from(KINDS))
    values = data.draw(records([Fraction(v) for v in domain["values"]], kind))
    check(engine, kind, values, domain, tmp_path)


@pytest.mark.parametrize("mapping", ["nearest", "kde"])
def test_a_user_graph_gives_the_same_aggregate_on_both_engines(
    spark, tmp_path: Path, mapping: str
) -> None:
    """A GraphML street grid at 60° N (test_graph_files): keys the user's node ids, the same
    counts or kde masses to 1e-12 on DuckDB and Spark (no bound bites: ≤ 3 records a unit)."""
    pytest.importorskip("networkx")
    from ..domains.test_graph_files import graph_spec, records, write_graphml

    src, truth = records(tmp_path, units=200, seed=5)
    extra = {"mapping": "kde", "bandwidth": 30.0} if mapping == "kde" else {}
    spec = graph_spec(src, write_graphml(tmp_path / "city.graphml"), **extra)
    duck = bounded_aggregate(spec, salt=11, engine=DUCK)
    sp = bounded_aggregate(spec, salt=11, engine=SparkEngine(spark))
    assert np.allclose(sp.counts, duck.counts, rtol=0, atol=1e-12)
    if mapping == "nearest":
        assert np.array_equal(duck.counts, truth)
    assert sp.rows.as_dict() == duck.rows.as_dict()


@pytest.mark.parametrize("kind", ["grid", "hours text", "hours timestamp", "hours x junctions"])
def test_grids_products_and_time_ranges_agree_with_duckdb(spark, tmp_path: Path, kind: str) -> None:
    """The composite keys (test_key_domain) are the same on both engines, bit for bit, and so
    are the row counters (no bound bites: units of at most 3 records, b = 4)."""
    from ..domains.test_key_domain import GRID, HOURS, base, records

    r = records(tmp_path)
    graph = {"kind": "graph", "graph": "manhattan", "lat": "lat", "lon": "lon"}
    domain = {
        "grid": GRID,
        "hours text": {**HOURS, "column": "ts"},
        "hours timestamp": HOURS,
        "hours x junctions": {"kind": "product", "parts": [HOURS, graph]},
    }[kind]
    spec = base(r["src"], domain)
    duck = bounded_aggregate(spec, salt=5, engine=DUCK)
    sp = bounded_aggregate(spec, salt=5, engine=SparkEngine(spark))
    assert np.array_equal(sp.counts, duck.counts)
    assert sp.rows.as_dict() == duck.rows.as_dict()


@pytest.mark.parametrize("by", ["point", "column"])
def test_regions_agree_with_duckdb(spark, tmp_path: Path, by: str) -> None:
    """Point in polygon (borders to the first region) and region-id columns: the same
    aggregate and counters on both engines (test_regions' 3 × 3 squares, one with a hole)."""
    pytest.importorskip("shapely")
    from ..domains.test_regions import grid_regions, records, spec_for

    regions = grid_regions(tmp_path / "g.geojson")
    src, _, _ = records(tmp_path)
    spec = spec_for(src, regions, **({"column": "region_id"} if by == "column" else {}))
    duck = bounded_aggregate(spec, salt=7, engine=DUCK)
    sp = bounded_aggregate(spec, salt=7, engine=SparkEngine(spark))
    assert np.array_equal(sp.counts, duck.counts)
    assert sp.rows.as_dict() == duck.rows.as_dict()


def test_a_key_file_agrees_with_duckdb(spark, tmp_path: Path) -> None:
    """values_from: the keys read from a file match the same records on both engines."""
    rng = np.random.default_rng(3)
    z = rng.integers(0, 50, 500)
    src = tmp_path / "s.parquet"
    pq.write_table(pa.table({"uid": np.arange(500), "zone": z.astype(str)}), src)
    (tmp_path / "k.csv").write_text("zone\n" + "".join(f"{i}\n" for i in range(0, 50, 3)))
    spec = ReleaseSpec.from_dict(
        {
            "source": {"path": str(src)},
            "unit": {"column": "uid"},
            "domain": {"kind": "values", "column": "zone", "values_from": str(tmp_path / "k.csv")},
            "bounds": {"max_records_per_unit": 1},
            "privacy": {"epsilon": 1.0, "delta": 1e-6, "dataset": "d"},
        }
    )
    duck = bounded_aggregate(spec, salt=2, engine=DUCK)
    sp = bounded_aggregate(spec, salt=2, engine=SparkEngine(spark))
    assert np.array_equal(duck.counts, sp.counts)
    assert duck.counts.tolist() == [float((z == k).sum()) for k in range(0, 50, 3)]


def test_pysparks_pandas_3_notice_is_filtered_and_only_it() -> None:
    """PySpark 4 warns "does not yet fully support pandas >= 3.0.0" at each pandas UDF (a
    ``FutureWarning`` on stderr during a graph release, issue #28): the engine filters that
    text from ``pyspark`` only; the same text from elsewhere, and PySpark's other warnings,
    are still shown."""
    import warnings

    import pandas as pd
    from pyspark.sql.types import LongType

    from dpgauss.release.engines import spark as spark_module

    if int(pd.__version__.split(".")[0]) < 3:
        pytest.skip(
            f"pandas {pd.__version__}: PySpark gives its pandas-3 notice only with pandas 3"
        )

    def identity(s):
        return s

    # real types, not this module's postponed strings: pyspark reads them
    identity.__annotations__ = {"s": pd.Series, "return": pd.Series}

    def shown(quiet: bool) -> list[tuple[str, str]]:
        with warnings.catch_warnings(record=True) as caught:
            warnings.resetwarnings()
            warnings.simplefilter("always")
            if quiet:
                spark_module._quiet_pandas_notice()
            sf.pandas_udf(identity, LongType())  # no session needed with a DataType
            for origin in ("elsewhere", "pyspark.sql.other"):
                text = (
                    "PySpark does not yet fully support pandas >= 3.0.0"
                    if origin == "elsewhere"
                    else "other"
                )
                warnings.warn_explicit(text, FutureWarning, "x.py", 1, module=origin)
        return [(w.filename.rsplit("/", 1)[-1], str(w.message)[:20]) for w in caught]

    notice = "PySpark does not yet"
    assert sum(m == notice for _, m in shown(quiet=False)) >= 2  # pyspark does warn here
    assert shown(quiet=True) == [("x.py", notice), ("x.py", "other")]


def test_describe_and_the_aggregate_after_it_read_the_source_once(
    engine: SparkEngine, tmp_path: Path, monkeypatch
) -> None:
    """Issue #31 item 4: the aggregate right after ``describe`` of the same spec reuses its
    typed DataFrame (schema, footers, nanosecond look-ups read once); nothing is kept beyond
    that pair, so the next release of the same path reads the files anew."""
    src, truth = small_release_data(tmp_path)
    spec = make_spec(src)
    reads = []
    real = SparkEngine._read

    def counting(self, s):  # type: ignore[no-untyped-def]
        reads.append(1)
        return real(self, s)

    monkeypatch.setattr(SparkEngine, "_read", counting)
    engine.describe(spec)
    first = bounded_aggregate(spec, engine=engine, salt=1)
    assert len(reads) == 1
    np.testing.assert_array_equal(first.counts, truth)
    # the file changes: the next aggregate reads it (no DataFrame kept from before)
    write_parquet(src, uid=np.arange(3), key=np.array([1, 1, 2]), fare=np.zeros(3))
    again = bounded_aggregate(spec, engine=engine, salt=1)
    assert len(reads) == 2
    np.testing.assert_array_equal(again.counts, [0, 2, 1, 0, 0, 0, 0, 0, 0, 0])


def test_a_release_takes_one_spark_query_over_the_source(
    engine: SparkEngine, spark, tmp_path: Path, monkeypatch
) -> None:
    """Issue #31 item 4, one pass: ``describe`` (the check before the charge) starts no
    Spark job — the schema is merged on the driver from the footers, as Spark's
    ``mergeSchema`` would merge it — and the aggregate is one query (one ``collect``) whose
    plan scans the source once."""
    a = write_parquet(tmp_path / "a.parquet", uid=np.arange(6), key=np.arange(6) % 3)
    b = write_parquet(
        tmp_path / "b.parquet",
        extra=np.array(["x", "y"]),
        key=np.array([1, 2], dtype=np.int64),
        uid=np.array([10, 11]),
    )
    spec = make_spec(tmp_path / "*.parquet")
    tracker = spark.sparkContext.statusTracker()
    before = set(tracker.getJobIdsForGroup(None))
    types = engine.describe(spec)
    assert set(tracker.getJobIdsForGroup(None)) == before  # no Spark job
    merged = spark.read.option("mergeSchema", "true").parquet(str(a), str(b))
    assert types == {f.name: f.dataType.simpleString() for f in merged.schema.fields}

    frames = type(spark.range(1))  # the session's DataFrame class (pyspark.sql.classic)
    collected: list = []
    real = frames.collect

    def recording(self):  # type: ignore[no-untyped-def]
        collected.append(self)
        return real(self)

    monkeypatch.setattr(frames, "collect", recording)
    agg = bounded_aggregate(spec, engine=engine, salt=3)
    assert len(collected) == 1
    plan = str(collected[0]._jdf.queryExecution().optimizedPlan().toString())
    assert plan.count("Relation [") == 1, plan
    np.testing.assert_array_equal(agg.counts, [2, 3, 3, 0, 0, 0, 0, 0, 0, 0])


def test_describe_of_files_in_partition_directories_is_sparks_schema(
    engine: SparkEngine, spark, tmp_path: Path
) -> None:
    """The schema merged on the driver is what Spark's own ``mergeSchema`` reading of the
    same glob gives (files in ``key=value`` directories: a glob's files carry no partition
    column, on both paths), and the release reads every file."""
    for part, uids in (("1", [0, 1]), ("2", [2, 3, 4])):
        (tmp_path / f"p={part}").mkdir()
        write_parquet(
            tmp_path / f"p={part}" / "f.parquet",
            uid=np.array(uids),
            key=np.ones(len(uids), dtype=np.int64),
        )
    glob = str(tmp_path / "p=*" / "*.parquet")
    spec = make_spec(glob)
    theirs = spark.read.option("mergeSchema", "true").parquet(glob)
    assert engine.describe(spec) == {
        f.name: f.dataType.simpleString() for f in theirs.schema.fields
    }
    np.testing.assert_array_equal(bounded_aggregate(spec, engine=engine, salt=5).counts[1], 5)
