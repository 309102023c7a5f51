"""The discovered domain (issue #30): its spec rules and the bounded aggregate over the keys
found in the data (dpgauss.release.domains.discovered, the engines' discovered query)."""

from __future__ import annotations

import csv
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from dpgauss.release.domains.discovered import sorted_keys
from dpgauss.release.pipeline import bounded_aggregate
from dpgauss.release.spec import ReleaseSpec


def spec_dict(path: Path, column: str = "shop", kind: str = "string", **over: Any) -> dict:
    d: dict[str, Any] = {
        "source": {"path": str(path), "types": {"uid": "int64", column: kind}},
        "unit": {"column": "uid"},
        "domain": {"kind": "discovered", "column": column},
        "bounds": {"max_keys_per_unit": 2, "max_records_per_key": 1},
        "privacy": {"epsilon": 1.0, "delta": 1e-6, "dataset": "d"},
    }
    for table, value in over.items():
        if value is None:
            d.pop(table, None)
        else:
            d[table] = value
    return d


def write(
    path: Path, rows: list[tuple[Any, ...]], header: tuple[str, ...] = ("uid", "shop")
) -> Path:
    with open(path, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(header)
        w.writerows(rows)
    return path


# ------------------------------------------------------------------------------- spec


@pytest.mark.parametrize(
    ("change", "words"),
    [
        ({"bounds": {"max_records_per_key": 1}}, "max_keys_per_unit is required"),
        ({"statistic": {"kind": "sum", "column": "v", "lower": 0, "upper": 1}}, "counts only"),
        ({"denoise": {"method": "james_stein"}}, "does not apply to a discovered domain"),
        ({"denoise": {"method": "trend_filter"}}, "does not apply to a discovered domain"),
        ({"privacy": {"sigma": 3.0, "delta": 1e-6, "dataset": "d"}}, "not sigma"),
    ],
)
def test_spec_refusals(tmp_path: Path, change: dict, words: str) -> None:
    with pytest.raises(ValueError, match=words):
        ReleaseSpec.from_dict(spec_dict(tmp_path / "x.csv", **change))


def test_spec_needs_a_declared_type(tmp_path: Path) -> None:
    d = spec_dict(tmp_path / "x.csv")
    d["source"]["types"] = None
    del d["source"]["types"]
    with pytest.raises(ValueError, match=r"declared in \[source\] types"):
        ReleaseSpec.from_dict(d)
    with pytest.raises(ValueError, match="declared 'float64'"):
        ReleaseSpec.from_dict(spec_dict(tmp_path / "x.csv", kind="float64"))
    for kind in ("string", "int64", "uint8", "timestamp"):
        ReleaseSpec.from_dict(spec_dict(tmp_path / "x.csv", kind=kind))


def test_spec_other_keys_and_other(tmp_path: Path) -> None:
    d = spec_dict(tmp_path / "x.csv")
    d["domain"]["values"] = ["a"]
    with pytest.raises(ValueError, match="values does not apply to kind = 'discovered'"):
        ReleaseSpec.from_dict(d)
    d = spec_dict(tmp_path / "x.csv")
    d["domain"]["other"] = True
    with pytest.raises(ValueError, match="not to a discovered domain"):
        ReleaseSpec.from_dict(d)
    ReleaseSpec.from_dict(spec_dict(tmp_path / "x.csv", denoise={"method": "none"}))


def test_sorted_keys_fixed_order() -> None:
    from datetime import datetime

    assert sorted_keys(["b", "a", "é", "Z"]) == ["Z", "a", "b", "é"]
    assert sorted_keys([10, -3, 2]) == [-3, 2, 10]
    assert sorted_keys([datetime(2020, 1, 2), datetime(2020, 1, 1, 0, 0, 0, 5)]) == [
        "2020-01-01 00:00:00.000005",
        "2020-01-02 00:00:00",
    ]


# -------------------------------------------------------------------------- aggregate


def _rows(seed: int, units: int = 40) -> list[tuple[Any, ...]]:
    rng = np.random.default_rng(seed)
    keys = ["a", "b", "c", "d", "e", "ü", "a b", ""]
    rows = []
    for u in range(units):
        for _ in range(int(rng.integers(1, 7))):
            rows.append((u, keys[int(rng.integers(0, len(keys)))]))
    return rows


def _agg(path: Path, engine: str = "duckdb", salt: int = 7, **over: Any) -> dict[Any, float]:
    sp = ReleaseSpec.from_dict(spec_dict(path, **over))
    agg = bounded_aggregate(sp, salt=salt, engine=engine)
    assert agg.labels is not None
    assert list(agg.labels) == sorted(agg.labels.tolist())  # sorted by value
    assert agg.rows.candidate_keys == len(agg.labels)
    assert np.all(agg.counts >= 1)  # a candidate has kept records
    return dict(zip(agg.labels.tolist(), agg.counts.tolist(), strict=True))


def test_exact_when_the_bounds_do_not_bind(tmp_path: Path) -> None:
    rows = [(1, "x"), (1, "y"), (2, "x"), (3, "z"), (3, "z"), (4, "y")]
    got = _agg(
        write(tmp_path / "a.csv", rows), bounds={"max_keys_per_unit": 2, "max_records_per_key": 2}
    )
    assert got == {"x": 2.0, "y": 2.0, "z": 2.0}


def test_bounds_and_classes(tmp_path: Path) -> None:
    # unit 1: three keys, bound to 2; unit 2: five records of one key, bound to 1; a row
    # without a unit and one without a key
    rows = [(1, "p"), (1, "q"), (1, "r"), *[(2, "s")] * 5, ("", "t"), (3, None)]
    path = write(tmp_path / "b.csv", rows)
    sp = ReleaseSpec.from_dict(spec_dict(path))
    agg = bounded_aggregate(sp, salt=3)
    got = dict(zip(agg.labels.tolist(), agg.counts.tolist(), strict=True))
    assert sum(got.values()) == 3.0 and got["s"] == 1.0
    assert len(set(got) & {"p", "q", "r"}) == 2 and "t" not in got
    assert agg.rows.null_unit == 1 and agg.rows.invalid_domain == 1
    assert agg.rows.dropped_by_bounds == {"max_records_per_key": 4, "max_keys_per_unit": 1}


@pytest.mark.parametrize("seed", range(4))
def test_a_unit_changes_its_own_keys_only(tmp_path: Path, seed: int) -> None:
    """Add one unit: only keys it holds change, each by at most Δ∞ = 1, at most Δ₀ = 2 of
    them; keys only it holds appear, no other key appears or vanishes."""
    rows = _rows(seed)
    base = _agg(write(tmp_path / "b.csv", rows))
    rng = np.random.default_rng(100 + seed)
    extra = [(999, k) for k in rng.choice(["a", "new1", "new2", "new3", "b"], size=6).tolist()]
    plus = _agg(write(tmp_path / "p.csv", rows + extra))
    changed = {k for k in set(base) | set(plus) if base.get(k, 0.0) != plus.get(k, 0.0)}
    assert changed <= {k for _, k in extra}
    assert len(changed) <= 2
    assert all(0.0 < plus.get(k, 0.0) - base.get(k, 0.0) <= 1.0 for k in changed)
    assert set(base) <= set(plus)


def test_integer_and_timestamp_keys(tmp_path: Path) -> None:
    rows = [(1, 12, "2020-01-02 03:04:05"), (2, -5, "2020-01-01"), (3, 12, "bad"), (4, 2**62, "")]
    path = write(tmp_path / "t.csv", rows, ("uid", "n", "ts"))
    ints = _agg(path, column="n", kind="int64")
    assert ints == {-5: 1.0, 12: 2.0, 2**62: 1.0}
    times = _agg(path, column="ts", kind="timestamp")
    assert times == {"2020-01-01 00:00:00": 1.0, "2020-01-02 03:04:05": 1.0}


@pytest.mark.spark
def test_spark_agrees_with_duckdb(tmp_path: Path, spark: Any) -> None:
    """Both engines: the same keys, counts and row classes where the bounds do not bind,
    and the same totals and per-unit property where they do (their hashes differ)."""
    from dpgauss.release.engines.spark import SparkEngine

    eng = SparkEngine(spark)
    rows = [(1, "x"), (1, "y"), (2, "x"), (3, "z"), (3, "z"), (4, "y"), ("", "q"), (5, None)]
    path = write(tmp_path / "a.csv", rows)
    loose = {"max_keys_per_unit": 2, "max_records_per_key": 2}
    sp = ReleaseSpec.from_dict(spec_dict(path, bounds=loose))
    duck, spk = (bounded_aggregate(sp, salt=5, engine=e) for e in ("duckdb", eng))
    assert duck.labels.tolist() == spk.labels.tolist() == ["x", "y", "z"]
    assert duck.counts.tolist() == spk.counts.tolist()
    assert duck.rows.as_dict() == spk.rows.as_dict()
    rows = _rows(0)
    path = write(tmp_path / "b.csv", rows)
    sp = ReleaseSpec.from_dict(spec_dict(path))
    duck, spk = (bounded_aggregate(sp, salt=5, engine=e) for e in ("duckdb", eng))
    assert duck.counts.sum() == spk.counts.sum()
    assert duck.rows.dropped_by_bounds == spk.rows.dropped_by_bounds
    path = write(tmp_path / "t.csv", [(1, "2020-01-02 03:04:05"), (2, "x")], ("uid", "ts"))
    sp = ReleaseSpec.from_dict(spec_dict(path, column="ts", kind="timestamp"))
    spk = bounded_aggregate(sp, salt=5, engine=eng)
    assert spk.labels.tolist() == ["2020-01-02 03:04:05"] and spk.rows.invalid_domain == 1


def test_series_history_refused(tmp_path: Path) -> None:
    d = spec_dict(tmp_path / "x.csv")
    d["source"]["types"]["t"] = "timestamp"
    d["series"] = {"column": "t", "period": "1h", "history": 2}
    with pytest.raises(ValueError, match="history does not apply to a discovered domain"):
        ReleaseSpec.from_dict(d)
    d["series"]["history"] = 0
    ReleaseSpec.from_dict(d)


# Review finding 1: a timestamp key that Python's datetime cannot hold (year 0 from a CSV
# text, any 64-bit microsecond count from Parquet, DuckDB's infinities) came back from
# DuckDB as text or as datetime.min/max, so one record made the sort of the keys raise
# TypeError, or collided with a real key ("internal error: a discovered key is ...
# repeated"): the release failed on one unit's record (a release is a total function of
# the data).
@pytest.mark.parametrize(
    "bad",
    [
        "0000-01-01 00:00:00",  # year 0: DuckDB's '0001-01-01 (BC)'
        "0000-06-01 12:00:00+01:00",  # DuckDB drops the offset: still year 0
    ],
)
def test_a_timestamp_key_beyond_the_calendar_is_invalid_alone(tmp_path: Path, bad: str) -> None:
    rows = [(1, "2020-01-02 03:04:05"), (2, "2020-01-02 03:04:05"), (3, bad)]
    path = write(tmp_path / "t.csv", rows, ("uid", "ts"))
    sp = ReleaseSpec.from_dict(spec_dict(path, column="ts", kind="timestamp"))
    agg = bounded_aggregate(sp, salt=5)
    assert agg.labels.tolist() == ["2020-01-02 03:04:05"] and agg.counts.tolist() == [2.0]
    assert agg.rows.invalid_domain == 1


@pytest.mark.parametrize("us", [2**63 - 1, -(2**63) + 1, 253402300800000000, -62135596800000001])
def test_a_parquet_timestamp_key_beyond_the_calendar_is_invalid_alone(
    tmp_path: Path, us: int
) -> None:
    """Parquet holds any 64-bit microsecond count; DuckDB reads 2⁶³ − 1 as infinity (fetched
    as 9999-12-31 23:59:59.999999, the same Python value as that real instant)."""
    pa = pytest.importorskip("pyarrow")
    pq = pytest.importorskip("pyarrow.parquet")
    last = 253402300799999999  # 9999-12-31 23:59:59.999999, a real key of unit 2
    t = pa.array([1_600_000_000_000_000, last, us], pa.int64()).cast(pa.timestamp("us"))
    path = tmp_path / "t.parquet"
    pq.write_table(pa.table({"uid": pa.array([1, 2, 3], pa.int64()), "ts": t}), path)
    sp = ReleaseSpec.from_dict(spec_dict(path, column="ts", kind="timestamp"))
    agg = bounded_aggregate(sp, salt=5)
    assert agg.labels.tolist() == ["2020-09-13 12:26:40", "9999-12-31 23:59:59.999999"]
    assert agg.counts.tolist() == [1.0, 1.0] and agg.rows.invalid_domain == 1


@pytest.mark.spark
def test_spark_a_timestamp_key_beyond_the_calendar_is_invalid_alone(
    tmp_path: Path, spark: Any
) -> None:
    """Finding 1 on Spark: a year-0 text key is one invalid record, the others are kept."""
    from dpgauss.release.engines.spark import SparkEngine

    rows = [(1, "2020-01-02 03:04:05"), (2, "2020-01-02 03:04:05"), (3, "0000-01-01 00:00:00")]
    path = write(tmp_path / "t.csv", rows, ("uid", "ts"))
    sp = ReleaseSpec.from_dict(spec_dict(path, column="ts", kind="timestamp"))
    agg = bounded_aggregate(sp, salt=5, engine=SparkEngine(spark))
    assert agg.labels.tolist() == ["2020-01-02 03:04:05"] and agg.counts.tolist() == [2.0]
    assert agg.rows.invalid_domain == 1
