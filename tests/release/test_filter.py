"""The ``[filter]`` window: spec validation and the DuckDB engine's classification."""

from __future__ import annotations

from datetime import datetime
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("duckdb")
pa = pytest.importorskip("pyarrow")
pq = pytest.importorskip("pyarrow.parquet")

from dpgauss.release import bounded_aggregate  # noqa: E402
from dpgauss.release.engines.duckdb import DuckDBEngine  # noqa: E402
from dpgauss.release.spec import FilterSpec, ReleaseSpec  # noqa: E402

ENGINE = DuckDBEngine(threads=2)


def spec_for(src: Path, window: dict | None, **domain: object) -> ReleaseSpec:
    data = {
        "source": {"path": str(src)},
        "unit": {"column": "uid"},
        "domain": {"kind": "range", "column": "key", "start": 0, "stop": 4, **domain},
        "bounds": {"max_records_per_unit": 3},
        "privacy": {"epsilon": 1.0, "delta": 1e-6, "dataset": "d"},
        "denoise": {"method": "none"},
    }
    if window is not None:
        data["filter"] = window
    return ReleaseSpec.from_dict(data)


def test_spec_accepts_timestamps_strings_and_numbers() -> None:
    f = FilterSpec(column="t", start="2013-01-05 18:00", stop=datetime(2013, 1, 5, 19))
    assert f.kind == "timestamp"
    assert f.start == "2013-01-05 18:00:00" and f.bound("stop") == datetime(2013, 1, 5, 19)
    g = FilterSpec(column="x", stop=3)
    assert g.kind == "number" and g.bound("start") is None and g.bound("stop") == 3.0


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"column": "t"}, "needs start, stop or both"),
        ({"column": "t", "start": "yesterday"}, r"\[filter\] start must be a timestamp"),
        ({"column": "t", "start": 1, "stop": "2013-01-01"}, "must both be timestamps or"),
        ({"column": "t", "start": 2, "stop": 1}, "stop must be after start"),
        ({"column": "t", "start": "2013-01-01T00:00+01:00"}, "without a UTC offset"),
        ({"start": 1}, r"\[filter\] column is required"),
        ({"column": "t", "start": float("nan")}, "finite"),
    ],
)
def test_spec_rejects_bad_windows(kwargs: dict, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        FilterSpec(**kwargs)


def test_to_dict_round_trips_with_a_filter(tmp_path: Path) -> None:
    spec = spec_for(tmp_path / "x.parquet", {"column": "t", "start": "2013-01-05"})
    again = ReleaseSpec.from_dict(spec.to_dict())
    assert again.filter == spec.filter
    assert "filter" not in spec_for(tmp_path / "x.parquet", None).to_dict()


NIGHT_WINDOW = {"column": "t", "start": "2013-01-05 18:00", "stop": "2013-01-06 02:30"}


def window_records(
    tmp_path: Path, uid_type: str
) -> tuple[Path, np.ndarray, np.ndarray, np.ndarray]:
    """4,000 records over two days (40 with a bad or missing time), keys −1…4 (two outside
    the domain 0…3); returns the Parquet file, uid, key and whether each row is in NIGHT_WINDOW."""
    rng = np.random.default_rng(3)
    n = 4000
    uid = rng.integers(0, 300, n)
    key = rng.integers(-1, 5, n)  # -1 and 4 are outside the domain
    base = np.datetime64("2013-01-05T00:00:00")
    t = base + rng.integers(0, 48 * 3600, n).astype("timedelta64[s]")
    t_text = np.array([str(x).replace("T", " ") for x in t], dtype=object)
    t_text[:25] = "not a time"
    t_text[25:40] = None
    src = tmp_path / "r.parquet"
    uids = uid if uid_type == "int" else np.array([f"u{u}" for u in uid], dtype=object)
    pq.write_table(pa.table({"uid": uids, "key": key, "t": pa.array(list(t_text))}), src)
    lo, hi = np.datetime64("2013-01-05T18:00"), np.datetime64("2013-01-06T02:30")
    inside = (t >= lo) & (t < hi)
    inside[:40] = False
    return src, uid, key, inside


def check_window_rows(agg: object, uid: np.ndarray, key: np.ndarray, inside: np.ndarray) -> None:
    """The row accounting of a release of window_records with 3 records per unit."""
    r = agg.rows  # type: ignore[attr-defined]
    assert r.read == uid.size
    assert r.outside_filter == int((~inside).sum())
    assert r.outside_domain == int((inside & ((key < 0) | (key > 3))).sum())
    # The bounds act on the window's records only: a unit keeps min(n_u, 3) of them.
    ok = inside & (key >= 0) & (key <= 3)
    per_unit = np.bincount(uid[ok], minlength=300)
    assert r.kept == int(np.minimum(per_unit, 3).sum())
    assert agg.counts.sum() == r.kept  # type: ignore[attr-defined]


@pytest.mark.parametrize("uid_type", ["int", "str"])
def test_rows_outside_the_window_are_counted_and_excluded(tmp_path: Path, uid_type: str) -> None:
    src, uid, key, inside = window_records(tmp_path, uid_type)
    agg = bounded_aggregate(spec_for(src, NIGHT_WINDOW), salt=5, engine=ENGINE)
    check_window_rows(agg, uid, key, inside)
    # Without a bound biting (b large), the counts are exactly the window's histogram.
    ok = inside & (key >= 0) & (key <= 3)
    big = spec_for(src, NIGHT_WINDOW)
    big = ReleaseSpec.from_dict({**big.to_dict(), "bounds": {"max_records_per_unit": 10_000}})
    exact = bounded_aggregate(big, salt=1, engine=ENGINE)
    np.testing.assert_array_equal(exact.counts, np.bincount(key[ok], minlength=4))


def test_numeric_window_and_small_domains_on_the_fast_path(tmp_path: Path) -> None:
    # Integer units and a 2-key domain take the one-key fast path; row classes must still
    # be told apart from keys (their codes need more bits than the key).
    uid = np.arange(12) % 4
    key = np.array([0, 1, 1, 0, 7, 0, 1, 1, 0, 1, 0, 1])
    hour = np.array([1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12.5])
    src = tmp_path / "h.parquet"
    pq.write_table(pa.table({"uid": uid, "key": key, "hour": hour}), src)
    spec = spec_for(src, {"column": "hour", "start": 2, "stop": 12}, stop=2)
    spec = ReleaseSpec.from_dict({**spec.to_dict(), "bounds": {"max_records_per_unit": 100}})
    agg = bounded_aggregate(spec, salt=9, engine=DuckDBEngine(fast_path=True))
    inside = (hour >= 2) & (hour < 12)
    assert agg.rows.outside_filter == int((~inside).sum())
    assert agg.rows.outside_domain == 1
    np.testing.assert_array_equal(agg.counts, np.bincount(key[inside & (key < 2)], minlength=2))


def test_a_nanosecond_window_edge_is_not_rounded(tmp_path: Path) -> None:
    """A TIMESTAMP_NS column is compared in nanoseconds: 00:59:59.999999999 is outside a
    window from 01:00 (a cast to microseconds would round it in), 01:59:59.999999999 inside."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.parquet as pq

    from dpgauss.release import ReleaseSpec, bounded_aggregate

    t = np.array(
        [
            "2013-01-13T00:59:59.999999999",
            "2013-01-13T01:00:00",
            "2013-01-13T01:59:59.999999999",
            "2013-01-13T02:00:00",
        ],
        dtype="datetime64[ns]",
    )
    src = tmp_path / "s.parquet"
    pq.write_table(pa.table({"uid": np.arange(4), "k": np.zeros(4, int), "t": pa.array(t)}), src)
    spec = ReleaseSpec.from_dict(
        {
            "source": {"path": str(src)},
            "unit": {"column": "uid"},
            "domain": {"kind": "values", "column": "k", "values": [0]},
            "filter": {"column": "t", "start": "2013-01-13 01:00", "stop": "2013-01-13 02:00"},
            "bounds": {"max_records_per_unit": 1},
            "privacy": {"epsilon": 1.0, "delta": 1e-6, "dataset": "d"},
        }
    )
    agg = bounded_aggregate(spec, salt=1)
    assert agg.counts.tolist() == [2.0] and agg.rows.outside_filter == 2
