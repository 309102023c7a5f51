"""The engine contract (``dpgauss.release.engines.base``): one table of sources through every
engine, the same exact aggregate.

The same records are given as a CSV file, a Parquet file and a pandas DataFrame, and each
source is aggregated by every engine (DuckDB always; Spark under the ``spark`` marker) for a
count, a sum and a mean over a values domain and a range domain whose keys include keys no
record has.  The bounded aggregate (``bounded_aggregate``: the engine's output, before any
noise) must be identical — counts, sums and every row counter — across sources and engines,
and equal to the aggregate computed here in Python from the rules of the contract.

The engines hash records differently, so their samples differ when a bound bites: the data
make the aggregate independent of the sample (a unit stays under the bound, or all its
records are the same record), as in ``test_engine_spark.py``.  Values are integers, so
Spark's uncompensated sums are exact too.
"""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("duckdb")
pd = pytest.importorskip("pandas")
pa = pytest.importorskip("pyarrow")
pq = pytest.importorskip("pyarrow.parquet")

from dpgauss.release import ReleaseSpec, bounded_aggregate  # noqa: E402
from dpgauss.release.engines.base import Aggregate, RowCounts  # noqa: E402
from dpgauss.release.engines.duckdb import DuckDBEngine  # noqa: E402

pytestmark = pytest.mark.filterwarnings(
    "ignore:PySpark does not yet fully support pandas:FutureWarning"
)

B = 5  # max_records_per_unit
LOWER, UPPER = 0, 100
VALUES = [0, 1, 2, 3, 4, 5, 6, 7, 42, 99]  # 42 and 99: keys no record has
RANGE = (0, 12)  # keys 0 … 11; 8 … 11 have no record
TABLE = "records"
#: the frame's columns, declared (a table source needs ``[source] types``)
TYPES = {"uid": "string", "key": "int64", "fare": "float64"}


def records() -> pd.DataFrame:
    """Units under the bound, units over it whose records are one record, and a row of each
    invalid class (no unit: empty and missing; no value; a key outside both domains)."""
    uid: list[str | None] = []
    key: list[int] = []
    fare: list[float] = []
    for i in range(30):
        for j in range(1 + i % 4):  # 1 … 4 records: under the bound
            uid.append(f"u{i}")
            key.append((i + j) % 8)
            fare.append(float((7 * i + 3 * j) % 120))  # some above UPPER: clamped
    for h in range(3):  # 9 identical records each: the bound keeps B of them
        uid += [f"h{h}"] * 9
        key += [3 + h] * 9
        fare += [20.0 + h] * 9
    uid += ["", None, "x1", "x2", "x3"]
    key += [1, 2, 500, 4, 6]
    fare += [5.0, 5.0, 5.0, float("nan"), float("nan")]
    return pd.DataFrame({"uid": uid, "key": key, "fare": fare})


def expected(frame: pd.DataFrame, domain: list[int], statistic: str) -> Aggregate:
    """The aggregate by the contract's rules, computed here (module docstring)."""
    index = {k: i for i, k in enumerate(domain)}
    counts = np.zeros(len(domain))
    sums = np.zeros(len(domain)) if statistic != "count" else None
    offset = (LOWER + UPPER) / 2 if statistic == "mean" else 0.0
    rows = RowCounts()
    kept_per_unit: dict[str, int] = {}
    for u, k, v in frame.itertuples(index=False):
        rows.read += 1
        if u is None or pd.isna(u) or u == "":
            rows.null_unit += 1
        elif statistic != "count" and not np.isfinite(v):
            rows.invalid_value += 1
        elif k not in index:
            rows.outside_domain += 1
        else:
            rows.in_domain += 1
            n = kept_per_unit.get(u, 0)
            if n < B:  # a unit's records are all kept, or are one record
                kept_per_unit[u] = n + 1
                rows.kept += 1
                counts[index[k]] += 1
                if sums is not None:
                    sums[index[k]] += min(max(v, LOWER), UPPER) - offset
    rows.units = len(kept_per_unit)
    rows.dropped_by_bounds = {"max_records_per_unit": rows.in_domain - rows.kept}
    return Aggregate(counts=counts, sums=sums, rows=rows)


def spec_for(source: dict, domain: str, statistic: str) -> ReleaseSpec:
    dom: dict = (
        {"kind": "values", "column": "key", "values": VALUES}
        if domain == "values"
        else {"kind": "range", "column": "key", "start": RANGE[0], "stop": RANGE[1]}
    )
    stat: dict = {"kind": statistic}
    if statistic != "count":
        stat.update(column="fare", lower=LOWER, upper=UPPER)
    return ReleaseSpec.from_dict(
        {
            "source": source,
            "unit": {"column": "uid"},
            "domain": dom,
            "statistic": stat,
            "bounds": {"max_records_per_unit": B},
            "privacy": {"epsilon": 1.0, "delta": 1e-6, "dataset": "d"},
            "denoise": {"method": "none"},
        }
    )


@pytest.fixture(scope="module")
def sources(tmp_path_factory) -> dict[str, object]:
    """The records as each source: a CSV path, a Parquet path, the DataFrame itself."""
    root = tmp_path_factory.mktemp("contract")
    frame = records()
    csv = root / "records.csv"
    frame.to_csv(csv, index=False, na_rep="")
    parquet = root / "records.parquet"
    pq.write_table(pa.Table.from_pandas(frame, preserve_index=False), parquet)
    return {"csv": csv, "parquet": parquet, "pandas": frame}


def aggregate(engine: str, kind: str, source: object, domain: str, statistic: str, request):
    """The bounded (unnoised) aggregate of the records given as ``kind`` on ``engine``."""
    if kind == "pandas":
        spec = spec_for({"table": TABLE, "types": TYPES}, domain, statistic)
        if engine == "duckdb":
            import duckdb

            con = duckdb.connect()
            try:
                con.register(TABLE, source)
                return bounded_aggregate(spec, salt=17, engine=DuckDBEngine(con, threads=2))
            finally:
                con.close()
        from dpgauss.release.engines.spark import SparkEngine

        df = request.getfixturevalue("spark").createDataFrame(source)
        return bounded_aggregate(spec, salt=17, engine=SparkEngine(dataframe=df))
    spec = spec_for({"path": str(source)}, domain, statistic)
    if engine == "duckdb":
        return bounded_aggregate(spec, salt=17, engine=DuckDBEngine(threads=2))
    from dpgauss.release.engines.spark import SparkEngine

    return bounded_aggregate(spec, salt=17, engine=SparkEngine(request.getfixturevalue("spark")))


def assert_identical(got: Aggregate, want: Aggregate, where: str) -> None:
    assert got.rows == want.rows, where
    np.testing.assert_array_equal(got.counts, want.counts, err_msg=where)
    if want.sums is None:
        assert got.sums is None, where
    else:
        np.testing.assert_array_equal(got.sums, want.sums, err_msg=where)


ENGINES = ["duckdb", pytest.param("spark", marks=pytest.mark.spark)]


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("statistic", ["count", "sum", "mean"])
@pytest.mark.parametrize("domain", ["values", "range"])
def test_every_source_gives_the_contracts_aggregate(
    sources, engine: str, domain: str, statistic: str, request
) -> None:
    keys = VALUES if domain == "values" else list(range(*RANGE))
    want = expected(sources["pandas"], keys, statistic)  # type: ignore[arg-type]
    # the data exercise what the contract says: a bound bites, every invalid class, empty keys
    assert want.rows.dropped_by_bounds["max_records_per_unit"] > 0
    assert want.rows.null_unit == 2 and want.rows.outside_domain >= 1
    assert (want.counts == 0).sum() >= 2
    for kind, source in sources.items():
        got = aggregate(engine, kind, source, domain, statistic, request)
        assert_identical(got, want, f"{engine}, {kind}, {domain}, {statistic}")


@pytest.mark.parametrize("engine", ENGINES)
def test_maps_in_a_crs_give_one_aggregate_on_every_engine(tmp_path, engine: str, request) -> None:
    """Issue #26, item 6: records in UTM metres (``[source] crs``) on a lon/lat node table
    (transformed into UTM at plan time) — and a few records no map can place (NaN, inf,
    coordinates far beyond the map) — give the same aggregate and row counters on
    every engine as the mapper computes in Python; no record's coordinates are transformed."""
    pytest.importorskip("pyproj")
    from dpgauss.release.domains.key_domain import resolve_domain

    rng = np.random.default_rng(11)
    n = 400
    x = [*rng.uniform(583_000, 586_000, n).tolist(), float("nan"), float("inf"), 1e308, 0.0]
    y = [*rng.uniform(4_506_000, 4_509_000, n).tolist(), 4.5e6, 4.5e6, 1e308, -1e308]
    frame = pd.DataFrame({"uid": [f"u{i // 2}" for i in range(n + 4)], "x": x, "y": y})
    src = tmp_path / "utm.parquet"
    pq.write_table(pa.Table.from_pandas(frame, preserve_index=False), src)
    lon = -74.0 + rng.uniform(0, 0.04, 30)
    lat = 40.70 + rng.uniform(0, 0.03, 30)
    nodes = tmp_path / "nodes.csv"
    pd.DataFrame({"id": range(30), "lat": lat, "lon": lon}).to_csv(nodes, index=False)
    spec = ReleaseSpec.from_dict(
        {
            "source": {"path": str(src), "crs": "EPSG:32618"},
            "unit": {"column": "uid"},
            "domain": {
                "kind": "graph",
                "nodes": str(nodes),
                "crs": "EPSG:4326",
                "lat": "y",
                "lon": "x",
                "cutoff": 250.0,
            },
            "bounds": {"max_records_per_unit": 2},
            "privacy": {"epsilon": 1.0, "delta": 1e-6, "dataset": "d"},
            "denoise": {"method": "none"},
        }
    )
    mapper = resolve_domain(spec).mapper
    key = mapper.nearest(np.asarray(y), np.asarray(x))
    if engine == "duckdb":
        got = bounded_aggregate(spec, salt=17, engine=DuckDBEngine(threads=2))
    else:
        from dpgauss.release.engines.spark import SparkEngine

        got = bounded_aggregate(spec, salt=17, engine=SparkEngine(request.getfixturevalue("spark")))
    np.testing.assert_array_equal(got.counts, np.bincount(key[key >= 0], minlength=30))
    assert got.rows.invalid_domain == 2  # NaN and inf (finite coordinates are metres)
    assert got.rows.outside_domain == (key < 0).sum() - 2 and got.rows.in_domain > 0
