"""The release pipeline end to end, and the DuckDB engine's bounding semantics.

Bounding is tested on data whose keys reveal each unit's contribution (every unit has keys of
its own), so the per-key aggregate shows exactly what each unit kept.  The ``zero_noise``
fixture (``tests/release/conftest.py``: the ``estimate.add_noise`` seam replaced) makes whole
releases comparable with exact aggregates.
"""

from __future__ import annotations

import argparse
import copy
import json
import math
import os
from pathlib import Path

import numpy as np
import pytest

import dpgauss

duckdb = pytest.importorskip("duckdb")
pa = pytest.importorskip("pyarrow")
pq = pytest.importorskip("pyarrow.parquet")

from dpgauss.cli.release import add_release_parser  # noqa: E402
from dpgauss.release.domains.key_domain import resolve_domain  # noqa: E402
from dpgauss.release.engines.duckdb import DuckDBEngine  # noqa: E402
from dpgauss.release.ledger import BudgetExceeded, Ledger  # noqa: E402
from dpgauss.release.pipeline import bounded_aggregate, run_release  # noqa: E402
from dpgauss.release.spec import ReleaseSpec, load_spec  # noqa: E402

from ..helpers import charges, make_ledger  # noqa: E402
from .test_spec import EXAMPLE  # noqa: E402

ENGINE = DuckDBEngine(threads=2)


def write_parquet(path: Path, **columns: object) -> Path:
    pq.write_table(pa.table({k: pa.array(v) for k, v in columns.items()}), path)
    return path


def make_spec(src: Path | str, **tables: dict) -> ReleaseSpec:
    data = {
        "source": {"path": str(src)},
        "unit": {"column": "uid"},
        "domain": {"kind": "range", "column": "key", "start": 0, "stop": 10},
        "statistic": {"kind": "count"},
        "bounds": {"max_records_per_unit": 5},
        "privacy": {"epsilon": 1.0, "delta": 1e-6, "dataset": "d"},
        "denoise": {"method": "none"},
    }
    for name, value in tables.items():
        replace = name in ("bounds", "privacy") or (name == "domain" and "kind" in value)
        data[name] = value if replace else {**data.get(name, {}), **value}
    return ReleaseSpec.from_dict(data)


# ------------------------------------------------------------------------- bounding


def check_each_unit_keeps_min_of_its_records_and_b(tmp_path: Path, engine: object) -> None:
    rng = np.random.default_rng(1)
    units = np.arange(300)
    n = units % 13  # 0 … 12 records
    uid = np.repeat(units, n)
    key = 10 * uid + rng.integers(0, 10, uid.size)  # unit u only uses keys 10u … 10u+9
    src = write_parquet(tmp_path / "r.parquet", uid=uid, key=key, t=rng.random(uid.size))
    agg = bounded_aggregate(make_spec(src, domain={"stop": 3000}), salt=7, engine=engine)
    per_unit = agg.counts.reshape(300, 10).sum(axis=1)
    assert np.array_equal(per_unit, np.minimum(n, 5))
    assert np.all(agg.counts <= np.bincount(key, minlength=3000))  # only records that exist
    r = agg.rows
    assert (r.read, r.in_domain, r.kept) == (uid.size, uid.size, int(np.minimum(n, 5).sum()))
    assert r.units == int((n > 0).sum())
    assert r.dropped_by_bounds == {"max_records_per_unit": uid.size - r.kept}


def test_each_unit_keeps_min_of_its_records_and_b(tmp_path: Path) -> None:
    check_each_unit_keeps_min_of_its_records_and_b(tmp_path, ENGINE)


@pytest.mark.slow
def test_a_unit_with_a_million_records_keeps_its_bound(tmp_path: Path) -> None:
    rng = np.random.default_rng(2)
    heavy = 10**6
    uid = np.concatenate([np.zeros(heavy, dtype=np.int64), np.repeat(np.arange(1, 101), 3)])
    key = np.concatenate([rng.integers(0, 100, heavy), np.repeat(np.arange(100, 200), 3)])
    src = write_parquet(tmp_path / "heavy.parquet", uid=uid, key=key, t=np.arange(uid.size))
    spec = make_spec(src, domain={"stop": 200})
    agg = bounded_aggregate(spec, engine=ENGINE)
    assert agg.counts[:100].sum() == 5  # the heavy unit: exactly b
    assert np.all(agg.counts[100:] == 3)  # the others: all their records
    assert agg.rows.kept == 5 + 300 and agg.rows.units == 101
    # with only per-key bounds: at most c per key and k keys
    spec = make_spec(
        src, domain={"stop": 200}, bounds={"max_records_per_key": 2, "max_keys_per_unit": 3}
    )
    agg = bounded_aggregate(spec, engine=ENGINE)
    assert agg.counts[:100].sum() == 6 and np.count_nonzero(agg.counts[:100]) == 3
    assert np.all(agg.counts[100:] == 2)


def check_per_key_and_key_count_bounds(tmp_path: Path, engine: object) -> None:
    # 50 units, each with 5 keys of its own and 4 records per key.
    uid = np.repeat(np.arange(50), 20)
    key = 10 * uid + np.tile(np.repeat(np.arange(5), 4), 50)
    src = write_parquet(tmp_path / "k.parquet", uid=uid, key=key, t=np.arange(uid.size))
    cases = [  # bounds, then the largest count per key, keys per unit, records per unit
        ({"max_records_per_key": 3}, 3, 5, 15),
        ({"max_records_per_key": 2, "max_keys_per_unit": 3}, 2, 3, 6),
        ({"max_records_per_key": 3, "max_keys_per_unit": 4, "max_records_per_unit": 7}, 3, 4, 7),
        ({"max_records_per_unit": 7, "max_keys_per_unit": 2}, 4, 2, 7),
    ]
    for bounds, c, k, total in cases:
        agg = bounded_aggregate(make_spec(src, domain={"stop": 500}, bounds=bounds), engine=engine)
        grid = agg.counts.reshape(50, 10)
        assert grid.max() <= c, bounds
        assert np.count_nonzero(grid, axis=1).max() <= k, bounds
        assert np.all(grid.sum(axis=1) == total), bounds
    bounds = {"max_records_per_key": 2, "max_keys_per_unit": 3, "max_records_per_unit": 5}
    agg = bounded_aggregate(make_spec(src, domain={"stop": 500}, bounds=bounds), engine=engine)
    assert agg.rows.dropped_by_bounds == {
        "max_records_per_key": 50 * 5 * 2,
        "max_keys_per_unit": 50 * 2 * 2,
        "max_records_per_unit": 50 * 1,
    }
    assert agg.rows.kept == 250


def test_per_key_and_key_count_bounds(tmp_path: Path) -> None:
    check_per_key_and_key_count_bounds(tmp_path, ENGINE)


def check_selection_is_uniform_over_subsets(tmp_path: Path, engine: object) -> None:
    # 3000 units with 4 records each, on keys of their own; b = 2: which pair is kept?
    units = 3000
    uid = np.repeat(np.arange(units), 4)
    key = 4 * uid + np.tile(np.arange(4), units)
    src = write_parquet(tmp_path / "u.parquet", uid=uid, key=key)
    spec = make_spec(src, domain={"stop": 4 * units}, bounds={"max_records_per_unit": 2})
    agg = bounded_aggregate(spec, salt=2024, engine=engine)
    kept = agg.counts.reshape(units, 4) > 0
    assert np.all(kept.sum(axis=1) == 2)
    code = kept @ np.array([1, 2, 4, 8])
    freq = np.array([np.sum(code == c) for c in (3, 5, 9, 6, 10, 12)])
    expected = units / 6
    chi2 = float(((freq - expected) ** 2 / expected).sum())
    assert chi2 < 25.0, freq  # 5 degrees of freedom: P(chi2 > 25) ≈ 1e-4


def test_selection_is_uniform_over_subsets(tmp_path: Path) -> None:
    check_selection_is_uniform_over_subsets(tmp_path, ENGINE)


@pytest.mark.slow
def test_the_salt_mixes_a_fixed_units_order(tmp_path: Path) -> None:
    # One unit, 4 records, 150 salts.  A salt that only enters DuckDB's linear hash combine
    # would keep the same 2 of the 6 pairs for every salt.
    src = write_parquet(tmp_path / "one.parquet", uid=[7, 7, 7, 7], key=[0, 1, 2, 3])
    spec = make_spec(src, domain={"stop": 4}, bounds={"max_records_per_unit": 2})
    seen: dict[tuple[int, ...], int] = {}
    for salt in range(1, 2**63, 2**63 // 150)[:150]:
        agg = bounded_aggregate(spec, salt=salt * 2654435761 % 2**64, engine=ENGINE)
        pair = tuple(int(i) for i in np.flatnonzero(agg.counts))
        seen[pair] = seen.get(pair, 0) + 1
    assert len(seen) == 6 and min(seen.values()) >= 8, seen


def check_a_units_choice_depends_on_its_own_records_only(
    tmp_path: Path, engine: object, salts: tuple[int, ...]
) -> None:
    """Unit A's 40 records among 199 other units' keep the same 5 as A alone (records
    shuffled): the choice is a function of the unit's own records and the salt."""
    rng = np.random.default_rng(3)
    a_keys = rng.integers(0, 10, 40)  # unit A: 40 records on keys 0…9
    b_uid = np.repeat(np.arange(1, 200), 6)
    b_keys = rng.integers(10, 20, b_uid.size)
    full = write_parquet(
        tmp_path / "full.parquet",
        uid=np.concatenate([b_uid[:500], np.zeros(40, dtype=np.int64), b_uid[500:]]),
        key=np.concatenate([b_keys[:500], a_keys, b_keys[500:]]),
        t=np.concatenate([np.arange(500), np.arange(40) * 7.0, np.arange(500, b_uid.size)]),
    )
    order = rng.permutation(40)
    alone = write_parquet(
        tmp_path / "alone.parquet",
        uid=np.zeros(40, dtype=np.int64),
        key=a_keys[order],
        t=(np.arange(40) * 7.0)[order],
    )
    for salt in salts:
        with_others = bounded_aggregate(
            make_spec(full, domain={"stop": 20}), salt=salt, engine=engine
        )
        without = bounded_aggregate(make_spec(alone, domain={"stop": 20}), salt=salt, engine=engine)
        assert np.array_equal(with_others.counts[:10], without.counts[:10])
        assert with_others.counts[:10].sum() == 5


@pytest.mark.slow
def test_a_units_choice_depends_on_its_own_records_only(tmp_path: Path) -> None:
    check_a_units_choice_depends_on_its_own_records_only(tmp_path, ENGINE, (1, 99, 2**63 + 5))


@pytest.mark.slow
@pytest.mark.parametrize(
    ("uid_type", "offset"),
    [
        (pa.int64(), 0),
        (pa.int64(), -(2**62)),
        (pa.uint64(), 2**63),
        (pa.int32(), -5),
        (pa.int16(), 0),
        (pa.int64(), 2**45),
    ],
)
def test_fast_path_agrees_with_the_general_query(tmp_path: Path, uid_type, offset) -> None:
    rng = np.random.default_rng(5)
    n = 20_000
    uid = rng.integers(0, 2_000, n)
    if offset == 2**45:  # a span of 2^45: too wide, the general query runs
        uid = uid * 2**34
    key = rng.integers(-2, 60, n)  # some outside [0, 50)
    values = [int(u) + offset for u in uid]
    mask = rng.random(n) < 0.01  # NULL unit ids
    if uid_type == pa.int16():
        values = [v % 30_000 for v in values]
    src = tmp_path / "f.parquet"
    pq.write_table(
        pa.table(
            {"uid": pa.array(values, type=uid_type, mask=mask), "key": key, "t": rng.random(n)}
        ),
        src,
    )
    spec = make_spec(src, domain={"stop": 50}, bounds={"max_records_per_unit": 3})
    fast = bounded_aggregate(spec, salt=31, engine=DuckDBEngine(fast_path=True))
    general = bounded_aggregate(spec, salt=31, engine=DuckDBEngine(fast_path=False))
    assert np.array_equal(fast.counts, general.counts)
    assert fast.rows == general.rows
    assert fast.rows.null_unit == int(mask.sum()) and fast.rows.outside_domain > 0


# ----------------------------------------------------------------- malformed rows

MALFORMED = """uid,zone,fare,lat,lon
a,0,10,40.75,-73.99
a,0,20,40.75,-73.99
a,1,30,40.76,-73.98
a,2,abc,40.76,-73.98
b,1,inf,91,-73.98
b,x,5,40.7,-73.9
,1,5,40.7,-73.9
"",1,5,40.7,-73.9
c,7,5,40.7,-73.9
c,2,1000,0,0
d,1,2,3
c,,4,40.7,-73.9
"""


@pytest.fixture
def malformed(tmp_path: Path) -> Path:
    path = tmp_path / "m.csv"
    path.write_text(MALFORMED)
    return path


def test_malformed_rows_are_dropped_and_counted(malformed: Path) -> None:
    spec = make_spec(
        malformed,
        domain={"kind": "values", "column": "zone", "values": [0, 1, 2]},
        statistic={"kind": "sum", "column": "fare", "lower": 0, "upper": 100},
    )
    agg = bounded_aggregate(spec, engine=ENGINE)
    r = agg.rows
    assert r.malformed_lines == 1  # "d,1,2,3": too few fields
    assert r.null_unit == 2  # empty and quoted-empty unit ids
    assert r.invalid_domain == 2  # "x" and the empty zone
    assert r.invalid_value == 2  # "abc" and "inf"
    assert r.outside_domain == 1  # zone 7
    assert r.in_domain == 4
    assert r.read == 12
    assert r.read == (
        r.malformed_lines
        + r.null_unit
        + r.invalid_domain
        + r.invalid_value
        + r.outside_domain
        + r.in_domain
    )
    assert agg.counts.tolist() == [2.0, 1.0, 1.0]
    assert agg.sums.tolist() == [30.0, 30.0, 100.0]  # 1000 clamped to 100


@pytest.mark.slow
def test_graph_coordinates_out_of_range(malformed: Path) -> None:
    spec = make_spec(
        malformed,
        domain={"kind": "graph", "graph": "manhattan", "lat": "lat", "lon": "lon", "cutoff": 300.0},
    )
    r = bounded_aggregate(spec, engine=ENGINE).rows
    assert r.invalid_domain == 1  # lat 91 ((0, 0) is a valid point, far from Manhattan)
    assert r.outside_domain >= 1
    spec = make_spec(
        malformed,
        domain={
            "kind": "graph",
            "graph": "manhattan",
            "lat": "lat",
            "lon": "lon",
            "bbox": [40.4, 41.0, -74.3, -73.6],
        },
    )
    assert bounded_aggregate(spec, engine=ENGINE).rows.invalid_domain == 2


@pytest.mark.slow
@pytest.mark.parametrize(
    ("table", "key"),
    [
        ("unit", {"on_null": "check_fails"}),
        ("domain", {"on_invalid": "check_fails"}),
        ("statistic", {"on_invalid": "check_fails"}),
        ("source", {"on_malformed": "check_fails"}),
    ],
)
def test_fail_policies_never_stop_a_release_only_the_check(
    tmp_path: Path, malformed: Path, table, key
) -> None:
    """Finding 6 of the hardening issue: a 'check_fails' policy refused the release, uncharged, with
    an exact count in the message (three shrinking windows located one record for free).
    A release is a total function of the data: it drops, charges and writes; the policy is
    the data owner's `dpgauss check`, which never charges or writes."""
    from dpgauss.release.check import check_source

    ledger = make_ledger(tmp_path)
    tables = {
        "domain": {"kind": "values", "column": "zone", "values": [0, 1, 2]},
        "statistic": {"kind": "sum", "column": "fare", "lower": 0, "upper": 100},
    }
    tables[table] = {**tables.get(table, {}), **key}
    spec = make_spec(malformed, **tables)
    out = tmp_path / "out.csv"
    res = run_release(spec, out=out, ledger=ledger, engine=ENGINE)
    assert out.exists() and charges(ledger) == 1
    name = next(iter(key))
    assert "rows" not in res.summary and "'check_fails'" not in res.summary
    result = check_source(spec, engine=ENGINE)
    assert not result.ok and len(result.violations) == 1
    assert f"[{table}] {name} = 'check_fails'" in result.violations[0]
    assert "CONFIDENTIAL" in result.text()
    assert charges(ledger) == 1  # the check charged nothing


# ------------------------------------------------------------------ whole releases


#: The columns of a count release of a range domain, in order.
COLUMNS = [
    "key",
    "released",
    "denoised",
    "sigma",
    "released_lower",
    "released_upper",
    "denoised_lower",
    "denoised_upper",
]


def small_release_data(tmp_path: Path) -> tuple[Path, np.ndarray]:
    """Every unit has at most 3 records: bounding (b = 5) keeps everything."""
    rng = np.random.default_rng(4)
    uid = np.repeat(np.arange(400), rng.integers(1, 4, 400))
    key = rng.integers(0, 10, uid.size)
    fare = rng.normal(20, 15, uid.size)
    src = write_parquet(tmp_path / "s.parquet", uid=uid, key=key, fare=fare)
    return src, np.bincount(key, minlength=10).astype(float)


@pytest.mark.slow
def test_release_writes_the_exact_aggregate_with_the_hook(tmp_path: Path, zero_noise) -> None:
    src, truth = small_release_data(tmp_path)
    ledger = make_ledger(tmp_path)
    spec = make_spec(src, privacy={"epsilon": 1.0, "delta": 1e-6, "dataset": "d"})
    out = tmp_path / "release.csv"
    with zero_noise():
        res = run_release(spec, out=out, ledger=ledger, engine=ENGINE)
    assert list(res.columns) == COLUMNS
    assert np.array_equal(res.columns["released"], truth)
    assert np.array_equal(res.columns["key"], np.arange(10))
    sigma = res.columns["sigma"][0]
    assert np.all(res.columns["sigma"] == sigma)
    width = res.columns["released_upper"] - res.columns["released"]
    assert np.allclose(width, width[0]) and width[0] == pytest.approx(1.96 * sigma, rel=0.02)
    assert np.allclose(res.columns["released"] - res.columns["released_lower"], width[0])
    lines = out.read_text().splitlines()
    assert lines[0] == ",".join(COLUMNS) and len(lines) == 11
    assert float(lines[1].split(",")[1]) == truth[0]
    report = json.loads(Path(res.report_path).read_text())
    assert res.report_path == str(out) + ".report.json"
    assert report["noise_off"] is True and "NOT private" in res.summary
    assert report["sensitivity"]["l2"] == 5.0
    assert report["privacy"]["sigma"] == pytest.approx(sigma)
    assert report["privacy"]["classical_sigma"] is None  # epsilon = 1: Theorem 1 invalid
    assert "rows" not in report and "timing" not in report  # confidential: diagnostics only
    assert res.diagnostics["rows"]["kept"] == truth.sum()
    assert res.diagnostics["ledger"]["status"]["charges"] == 1
    assert report["charge"]["mu"] == pytest.approx(report["privacy"]["mu"])
    # the entry's number is ledger state: confidential (issue #25, finding 7)
    assert "charge_id" not in report["charge"] and "#1" not in res.summary
    assert "charge #1" not in Path(res.report_path).read_text()
    assert res.diagnostics["ledger"]["entry"]["id"] == 1 and "charge #1" in res.diagnostics_text
    assert report["spec"]["bounds"]["max_records_per_unit"] == 5
    assert report["denoise"]["estimated_error"] == pytest.approx(10 * sigma**2)
    assert sorted(os.listdir(tmp_path)) == sorted(
        ["budget.sqlite", "budget.sqlite.diagnostics", "release.csv", "release.csv.report.json"]
        + ["s.parquet"]
        + (["release.csv.png"] if report["output"]["plot"] else [])
        + [p for p in os.listdir(tmp_path) if p.startswith("budget.sqlite-")]
    )  # no temporary files left
    assert os.listdir(tmp_path / "budget.sqlite.diagnostics") == ["CONFIDENTIAL-d-charge-1.json"]
    if pytest.importorskip("matplotlib"):  # a range domain: released and denoised series
        assert report["output"]["plot"] == "release.csv.png"
        assert (tmp_path / "release.csv.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


@pytest.mark.slow
def test_a_real_release_is_noisy_and_charged(tmp_path: Path) -> None:
    src, truth = small_release_data(tmp_path)
    ledger = make_ledger(tmp_path)
    spec = make_spec(
        src,
        privacy={"epsilon": 0.5, "delta": 1e-6, "dataset": "d"},
        denoise={"method": "james_stein"},
    )
    res = run_release(spec, out=tmp_path / "r.csv", ledger=ledger, engine=ENGINE)
    report = res.report
    assert report["privacy"]["secure"] is True
    assert "secure lattice" in report["privacy"]["mechanism"]
    assert report["privacy"]["classical_sigma"] > report["privacy"]["analytic_sigma"]
    released = res.columns["released"]
    assert not np.array_equal(released, truth)
    assert np.all(res.columns["released_lower"] < res.columns["released_upper"])
    with Ledger(ledger, create=False) as led:
        (entry,) = led.charges("d")
    assert entry.mu == pytest.approx(report["privacy"]["mu"])
    # the secure law's charge fits its own (0.5, 1e-6), and barely below the continuous μ
    assert 5.0 / report["privacy"]["analytic_sigma"] * (1 - 1e-6) <= entry.mu
    assert entry.mu <= dpgauss.gdp_mu(0.5, 1e-6)


def test_budget_is_checked_before_any_data_is_read(tmp_path: Path) -> None:
    ledger = make_ledger(tmp_path, epsilon=0.05)
    spec = make_spec(tmp_path / "does-not-exist.parquet")
    with pytest.raises(BudgetExceeded, match="budget exceeded for dataset 'd'"):
        run_release(spec, out=tmp_path / "o.csv", ledger=ledger, engine=ENGINE)
    assert not (tmp_path / "o.csv").exists() and charges(ledger) == 0
    with pytest.raises(ValueError, match="no budget for dataset 'other'"):
        run_release(
            make_spec(
                tmp_path / "x.parquet", privacy={"epsilon": 1.0, "delta": 1e-6, "dataset": "other"}
            ),
            out=tmp_path / "o.csv",
            ledger=ledger,
            engine=ENGINE,
        )
    with pytest.raises(ValueError, match="no ledger at"):
        run_release(spec, out=tmp_path / "o.csv", ledger=tmp_path / "none.sqlite", engine=ENGINE)


@pytest.mark.slow
def test_existing_output_is_refused_before_charging(tmp_path: Path) -> None:
    src, _ = small_release_data(tmp_path)
    ledger = make_ledger(tmp_path)
    out = tmp_path / "o.csv"
    run_release(make_spec(src), out=out, ledger=ledger, engine=ENGINE)
    with pytest.raises(ValueError, match="already exists"):
        run_release(make_spec(src), out=out, ledger=ledger, engine=ENGINE)
    assert charges(ledger) == 1
    run_release(make_spec(src, output={"overwrite": True}), out=out, ledger=ledger, engine=ENGINE)
    assert charges(ledger) == 2


def test_source_errors_are_one_line_and_free(tmp_path: Path) -> None:
    ledger = make_ledger(tmp_path)
    with pytest.raises(ValueError, match="cannot read the source") as info:
        run_release(
            make_spec(tmp_path / "missing-*.parquet"),
            out=tmp_path / "o.csv",
            ledger=ledger,
            engine=ENGINE,
        )
    assert "\n" not in str(info.value)
    src, _ = small_release_data(tmp_path)
    with pytest.raises(ValueError, match=r"\[unit\] column 'user' is not a column"):
        run_release(
            make_spec(src, unit={"column": "user"}),
            out=tmp_path / "o.csv",
            ledger=ledger,
            engine=ENGINE,
        )
    assert charges(ledger) == 0


@pytest.mark.slow
def test_parquet_output_and_glob_source(tmp_path: Path, zero_noise) -> None:
    src, truth = small_release_data(tmp_path)
    table = pq.read_table(src)
    (tmp_path / "parts").mkdir()
    pq.write_table(table.slice(0, 300), tmp_path / "parts" / "a.parquet")
    pq.write_table(table.slice(300), tmp_path / "parts" / "b.parquet")
    ledger = make_ledger(tmp_path)
    out = tmp_path / "release.parquet"
    with zero_noise():
        res = run_release(
            make_spec(tmp_path / "parts" / "*.parquet"), out=out, ledger=ledger, engine=ENGINE
        )
    back = pq.read_table(out)
    assert back.column_names == COLUMNS
    assert np.array_equal(back.column("released").to_numpy(), truth)
    assert res.report["output"]["format"] == "parquet"


@pytest.mark.slow
def test_sum_and_mean(tmp_path: Path, zero_noise) -> None:
    src, _ = small_release_data(tmp_path)
    t = pq.read_table(src)
    key, fare = t.column("key").to_numpy(), t.column("fare").to_numpy()
    clamped = np.clip(fare, 0.0, 50.0)
    sums = np.bincount(key, weights=clamped, minlength=10)
    counts = np.bincount(key, minlength=10)
    ledger = make_ledger(tmp_path)
    with zero_noise():
        res = run_release(
            make_spec(src, statistic={"kind": "sum", "column": "fare", "lower": 0, "upper": 50}),
            out=tmp_path / "sum.csv",
            ledger=ledger,
            engine=ENGINE,
        )
        assert np.allclose(res.columns["released"], sums, rtol=1e-12)
        assert res.report["sensitivity"]["l2"] == 250.0  # 50 x 5
        res = run_release(
            make_spec(src, statistic={"kind": "mean", "column": "fare", "lower": 0, "upper": 50}),
            out=tmp_path / "mean.csv",
            ledger=ledger,
            engine=ENGINE,
        )
    c = res.columns
    assert np.allclose(c["released"], sums / counts, rtol=1e-12)
    assert np.allclose(c["count_released"], counts) and np.allclose(c["sum_released"], sums)
    assert np.all(c["released_lower"] <= c["released"])
    assert np.all(c["released"] <= c["released_upper"])
    assert np.all(c["released_lower"] >= 0) and np.all(c["released_upper"] <= 50)
    assert np.all(c["sigma"] > 0)
    s = res.report["sensitivity"]
    assert s["parts"] == {"sum": 125.0, "count": 5.0}
    assert s["l2"] == pytest.approx(math.sqrt(2))


@pytest.mark.slow
def test_seeded_experiments_are_reproducible(tmp_path: Path) -> None:
    src, _ = small_release_data(tmp_path)
    priv = {"epsilon": 1.0, "delta": 1e-6, "dataset": "d", "secure": False, "seed": 11}
    a = run_release(make_spec(src, privacy=priv), out=tmp_path / "a.csv", engine=ENGINE)
    b = run_release(make_spec(src, privacy=priv), out=tmp_path / "b.csv", engine=ENGINE)
    assert np.array_equal(a.columns["released"], b.columns["released"])
    assert a.summary.startswith("WARNING: NOT PRIVATE") and "secure = false" in a.summary
    assert a.report["warning"].startswith("NOT PRIVATE") and a.report["charge"]["charged"] is False
    assert "11" not in json.dumps(a.report["spec"]["privacy"])  # the seed is not published
    assert a.diagnostics["seed"] == 11
    assert a.report["privacy"]["sigma"] == pytest.approx(a.report["privacy"]["analytic_sigma"])


@pytest.mark.slow
def test_sigma_instead_of_epsilon(tmp_path: Path) -> None:
    src, _ = small_release_data(tmp_path)
    priv = {"sigma": 40.0, "delta": 1e-6, "dataset": "d", "secure": False}
    res = run_release(make_spec(src, privacy=priv), out=tmp_path / "a.csv", engine=ENGINE)
    assert res.report["privacy"]["sigma"] == pytest.approx(40.0, rel=1e-6)
    assert res.report["privacy"]["mu"] == pytest.approx(5.0 / 40.0, rel=1e-6)


def test_value_and_range_domains(tmp_path: Path) -> None:
    path = tmp_path / "v.csv"
    path.write_text("uid,zone,x\n1,north,0.2\n2,south,0.7\n3,north,1.49\n4,east,1.5\n5,,-0.1\n")
    spec = make_spec(
        path, domain={"kind": "values", "column": "zone", "values": ["north", "south"]}
    )
    agg = bounded_aggregate(spec, engine=ENGINE)
    assert agg.counts.tolist() == [2.0, 1.0]
    assert (agg.rows.outside_domain, agg.rows.invalid_domain) == (1, 1)
    spec = make_spec(path, domain={"column": "x", "start": 0, "stop": 1.5, "step": 0.5})
    agg = bounded_aggregate(spec, engine=ENGINE)
    assert agg.counts.tolist() == [1.0, 1.0, 1.0]  # 1.5 and -0.1 are outside [0, 1.5)
    assert resolve_domain(spec).labels.tolist() == [0.0, 0.5, 1.0]


def test_table_source_in_a_duckdb_file(tmp_path: Path) -> None:
    db = tmp_path / "w.duckdb"
    con = duckdb.connect(str(db))
    con.execute(
        "CREATE TABLE trips AS SELECT range % 50 AS uid, range % 10 AS key FROM range(1000)"
    )
    con.close()
    spec = make_spec(
        "unused",
        source={
            "path": None,
            "table": "trips",
            "database": str(db),
            "types": {"uid": "int64", "key": "int64"},
        },
    )
    assert spec.source.table == "trips"
    agg = bounded_aggregate(spec, engine=ENGINE)
    assert agg.counts.sum() == 50 * 5 and agg.rows.read == 1000


def test_a_callers_connection_is_left_clean(tmp_path: Path) -> None:
    con = duckdb.connect()
    con.execute(
        "CREATE TABLE visits AS SELECT range % 7 AS uid, (range % 3)::VARCHAR AS shop "
        "FROM range(100)"
    )
    before = con.execute("SELECT count(*) FROM duckdb_tables()").fetchall()
    spec = make_spec(
        "unused",
        source={"path": None, "table": "visits", "types": {"uid": "int64", "shop": "string"}},
        domain={"kind": "values", "column": "shop", "values": ["0", "1", "2"]},
        bounds={"max_records_per_unit": 2},
    )
    agg = bounded_aggregate(spec, engine=DuckDBEngine(connection=con))
    assert agg.counts.sum() == 14 and agg.rows.units == 7
    assert con.execute("SELECT count(*) FROM duckdb_tables()").fetchall() == before
    names = [r[0] for r in con.execute("SELECT table_name FROM duckdb_tables()").fetchall()]
    assert names == ["visits"]
    con.close()


def test_record_columns(tmp_path: Path) -> None:
    src, _ = small_release_data(tmp_path)
    spec = make_spec(src, bounds={"max_records_per_unit": 1, "record_columns": ["uid", "fare"]})
    agg = bounded_aggregate(spec, engine=ENGINE)
    assert agg.rows.kept == 400
    ledger = make_ledger(tmp_path)
    bad = make_spec(src, bounds={"max_records_per_unit": 1, "record_columns": ["nope"]})
    with pytest.raises(ValueError, match=r"\[bounds\] record_columns 'nope' is not a column"):
        run_release(bad, out=tmp_path / "o.csv", ledger=ledger, engine=ENGINE)


# --------------------------------------------------------------------- the example


@pytest.mark.slow
def test_the_taxi_example(tmp_path: Path, zero_noise) -> None:
    spec = load_spec(EXAMPLE)
    data = spec.to_dict()
    data["denoise"] = {"method": "graph_wavelet"}  # "auto" also tries trend filtering: slow
    spec = ReleaseSpec.from_dict(data)
    ledger = make_ledger(tmp_path, epsilon=10.0, dataset="taxi")
    with zero_noise():
        res = run_release(spec, out=tmp_path / "taxi.csv", ledger=ledger)
    c, r = res.columns, res.report
    assert len(c["key"]) == 4091 and list(c)[-2:] == ["lat", "lon"]
    assert r["sensitivity"]["l2"] == 5.0
    rows = res.diagnostics["rows"]
    assert rows["read"] == 10_000
    assert rows["invalid_domain"] == 232  # the invalid pickups of dpgauss.datasets.trips
    assert rows["kept"] <= 5 * rows["units"]
    assert c["released"].sum() == pytest.approx(rows["kept"])  # kde weights sum to 1
    assert np.all(c["released"] >= 0)
    assert r["denoise"]["method"] == "graph_wavelet"


# -------------------------------------------------------------------------- the CLI


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # type: ignore[override]
        raise ValueError(message)


def cli(argv: list[str]) -> tuple[int, str]:
    """What ``dpgauss.cli.main`` does with ``release``."""
    parser = _Parser(prog="dpgauss")
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)
    add_release_parser(sub)
    try:
        args = parser.parse_args(argv)
        return 0, args.run(args)
    except (ValueError, TypeError) as exc:
        return 2, f"dpgauss: error: {exc}"


def small_spec_toml(
    path: Path,
    src: Path,
    method: str,
    output: str | None = None,
    *,
    unit: str = "",
    privacy: str = "",
) -> Path:
    """A TOML spec over ``small_release_data`` (range domain 0-9, 5 records per unit);
    ``unit`` and ``privacy`` are extra TOML lines for those tables."""
    out = f'[output]\npath = "{output}"\n' if output else ""
    path.write_text(
        f"""
[source]
path = {json.dumps(str(src))}
[unit]
column = "uid"
{unit}
[domain]
kind = "range"
column = "key"
start = 0
stop = 10
[bounds]
max_records_per_unit = 5
[privacy]
epsilon = 1.0
delta = 1e-6
dataset = "d"
{privacy}
[denoise]
method = "{method}"
"""
        + out
    )
    return path


@pytest.mark.slow
def test_cli(tmp_path: Path) -> None:
    src, _ = small_release_data(tmp_path)
    ledger = make_ledger(tmp_path)
    spec = small_spec_toml(tmp_path / "spec.toml", src, "james_stein", "never-used.csv")
    out = tmp_path / "cli.csv"
    code, text = cli(["release", str(spec), "--out", str(out), "--ledger", str(ledger), "--json"])
    assert code == 0, text
    obj = json.loads(text)
    assert obj["output"] == out.name and obj["sensitivity"] == 5.0 and out.exists()
    code, text = cli(
        ["release", str(spec), "--out", str(tmp_path / "s.csv"), "--ledger", str(ledger)]
    )
    assert code == 0 and text.startswith("release    :") and "charge     :" in text
    assert "\ndomain     : 10 keys; structure: chain of 10 ordered bins of key from 0 by" in text
    assert "rows" not in text and "CONFIDENTIAL" not in text
    argv = ["release", str(spec), "--out", str(tmp_path / "t.csv"), "--ledger", str(ledger)]
    code, text = cli([*argv, "--diagnostics"])
    assert code == 0 and "CONFIDENTIAL" in text and "rows       :" in text
    code, text = cli(["release", str(spec), "--engine", "nope", "--ledger", str(ledger)])
    assert code == 2 and "invalid choice" in text and "\n" not in text
    code, text = cli(["release", str(tmp_path / "nope.toml")])
    assert code == 2 and "no release spec at" in text
    bad = tmp_path / "bad.toml"
    bad.write_text(
        spec.read_text().replace("max_records_per_unit = 5", "max_records_per_unit = -5")
    )
    code, text = cli(["release", str(bad), "--ledger", str(ledger)])
    assert code == 2 and "[bounds] max_records_per_unit must be an integer >= 1" in text
    env_out = tmp_path / "env.csv"
    os.environ["DPGAUSS_LEDGER"] = str(ledger)
    try:
        code, text = cli(["release", str(spec), "--out", str(env_out)])
    finally:
        del os.environ["DPGAUSS_LEDGER"]
    assert code == 0 and env_out.exists()
    assert charges(ledger) == 4


def test_spec_copy_is_not_shared() -> None:
    spec = load_spec(EXAMPLE)
    d = spec.to_dict()
    d2 = copy.deepcopy(d)
    d2["bounds"]["max_records_per_unit"] = 1
    assert ReleaseSpec.from_dict(d).bounds.max_records_per_unit == 5


@pytest.mark.slow
def test_progress_lines_name_each_step(tmp_path: Path) -> None:
    import io

    src = write_parquet(tmp_path / "p.parquet", uid=np.arange(20) % 7, key=np.arange(20) % 10)
    stream = io.StringIO()
    run_release(
        make_spec(src),
        engine=ENGINE,
        out=tmp_path / "r.csv",
        ledger=make_ledger(tmp_path),
        progress=stream,
    )
    lines = stream.getvalue().splitlines()
    assert len(lines) == 4 and all(line.startswith("dpgauss: ") for line in lines)
    assert "aggregating" in lines[1] and "denoising" in lines[2] and "writing" in lines[3]
    assert not any(ch.isdigit() for line in lines for ch in line)  # no timings, no counts


@pytest.mark.slow
def test_one_null_id_row_changes_no_units_sample(tmp_path: Path) -> None:
    """Finding 4 of the hardening issue: string ids from Parquet were hashed only when the
    hash was injective on the whole source (NULL included), so one NULL-id row flipped the
    switch and redrew every unit's max_keys_per_unit sample (|f(D + row) - f(D)| = 13..61
    with sensitivity 1).  A row without a unit must change nothing."""
    rng = np.random.default_rng(11)
    units = np.repeat(np.arange(200), 6)
    names = np.array([f"driver-{u:05d}" for u in units], dtype=object)
    key = rng.integers(0, 10, units.size)
    d = write_parquet(tmp_path / "d.parquet", uid=names, key=key, t=rng.random(units.size))
    t = pq.read_table(d).column("t").to_numpy()
    d2 = write_parquet(  # d plus one row without a unit id
        tmp_path / "d2.parquet",
        uid=pa.array([*names, None], pa.string()),
        key=np.append(key, 3),
        t=np.append(t, 0.5),
    )
    bounds = {"max_records_per_key": 1, "max_keys_per_unit": 2}
    for salt in (1, 2, 3, 2**63 + 5):
        a = bounded_aggregate(make_spec(d, bounds=bounds), salt=salt, engine=ENGINE)
        b = bounded_aggregate(make_spec(d2, bounds=bounds), salt=salt, engine=ENGINE)
        np.testing.assert_array_equal(a.counts, b.counts)
        assert b.rows.null_unit == 1


@pytest.mark.slow
def test_fast_path_keeps_exactly_the_general_paths_records(tmp_path: Path) -> None:
    """The one-key fast path (integer ids, count, b only) sorts by the general path's own
    priority: the same records for every salt, whatever the span of the ids (it used to
    truncate priorities by the span of the whole source's ids)."""
    rng = np.random.default_rng(5)
    uid = np.concatenate([np.repeat(np.arange(50), 40), [2**62]])  # one extreme id
    key = rng.integers(0, 10, uid.size)
    src = write_parquet(tmp_path / "f.parquet", uid=uid, key=key, t=rng.random(uid.size))
    spec = make_spec(src, bounds={"max_records_per_unit": 3})
    fast = DuckDBEngine(threads=2, fast_path=True)
    general = DuckDBEngine(threads=2, fast_path=False)
    for salt in range(5):
        a = bounded_aggregate(spec, salt=salt, engine=fast)
        b = bounded_aggregate(spec, salt=salt, engine=general)
        np.testing.assert_array_equal(a.counts, b.counts)


def assert_cli_refuses_uncharged(
    tmp_path: Path, src: Path, domain: dict, message: str, bound: int = 1
) -> None:
    """`dpgauss release` of a spec with this ``[domain]`` exits 2 with one line holding
    ``message``, before any charge and without writing anything."""
    ledger = make_ledger(tmp_path)
    out = tmp_path / "out.csv"
    lines = "\n".join(f"{k} = {json.dumps(v)}" for k, v in domain.items())
    spec = tmp_path / "refused.toml"
    spec.write_text(
        f'[source]\npath = "{src}"\n[unit]\ncolumn = "uid"\n[domain]\n{lines}\n'
        f"[bounds]\nmax_records_per_unit = {bound}\n"
        f'[privacy]\nepsilon = 1.0\ndelta = 1e-6\ndataset = "d"\nledger = "{ledger}"\n'
        f'[output]\npath = "{out}"\n'
    )
    code, text = cli(["release", str(spec)])
    assert code == 2 and message in text, text
    assert len(text.splitlines()) == 1
    assert not out.exists() and charges(ledger) == 0


@pytest.mark.slow
def test_the_denoised_values_come_with_intervals(tmp_path: Path) -> None:
    """[denoised_lower, denoised_upper] holds the denoised value; a seeded experiment
    reproduces them; the report and its text say how wide they are."""
    src, _ = small_release_data(tmp_path)
    privacy = {"epsilon": 1.0, "delta": 1e-6, "dataset": "d", "secure": False, "seed": 5}
    runs = []
    for i in range(2):
        spec = make_spec(src, privacy=privacy, denoise={"method": "auto"})
        runs.append(run_release(spec, out=tmp_path / f"r{i}.csv", engine=ENGINE))
    c = runs[0].columns
    assert np.all(c["denoised_lower"] <= c["denoised"]) and np.all(
        c["denoised"] <= c["denoised_upper"]
    )
    np.testing.assert_array_equal(c["denoised_lower"], runs[1].columns["denoised_lower"])
    iv = runs[0].report["denoise"]["intervals"]
    assert iv["level"] == 0.95 and iv["median_width"] > 0
    assert iv["raw_width"] == pytest.approx(2 * 1.959963984540054 * c["sigma"][0])
    assert "intervals  : denoised 95% intervals" in runs[0].summary
    den = runs[0].report["denoise"]
    assert den["estimated_error_upper95"] > 0 and den["rmse_per_key_upper95"] > 0


@pytest.mark.slow
def test_a_mean_release_has_denoised_intervals_within_the_bounds(tmp_path: Path) -> None:
    src, _ = small_release_data(tmp_path)
    spec = make_spec(
        src,
        statistic={"kind": "mean", "column": "fare", "lower": 0, "upper": 50},
        privacy={"epsilon": 1.0, "delta": 1e-6, "dataset": "d", "secure": False, "seed": 2},
        denoise={"method": "james_stein"},
    )
    res = run_release(spec, out=tmp_path / "m.csv", engine=ENGINE)
    c = res.columns
    den = res.report["denoise"]
    # the mean's own error (delta method), against the RMS of its 'sigma' column
    raw = float(np.sqrt(np.nanmean(c["sigma"] ** 2)))
    assert den["raw_rmse_per_key"] == pytest.approx(raw)
    assert 0 < den["rmse_per_key"] <= den["rmse_per_key_upper95"]
    assert den["intervals"]["median_width"] <= den["intervals"]["raw_width"]
    assert "intervals  : denoised 95% intervals (sum and count)" in res.summary
    ok = np.isfinite(c["denoised"])
    assert np.all(c["denoised_lower"][ok] <= c["denoised"][ok])
    assert np.all(c["denoised"][ok] <= c["denoised_upper"][ok])
    assert np.all(c["denoised_lower"] >= 0) and np.all(c["denoised_upper"] <= 50)


def test_library_errors_name_arguments_and_the_cli_names_flags(tmp_path: Path, capsys) -> None:
    """Issue #28, item 7: a library error names the argument (``out=``), the command line the
    flag (``--out PATH``); an existing output is refused naming how to replace it, in each
    one's words; ``release --overwrite`` replaces it."""
    from dpgauss.cli import main

    src, _ = small_release_data(tmp_path)
    ledger = make_ledger(tmp_path)
    spec_path = small_spec_toml(tmp_path / "spec.toml", src, "none")
    spec = load_spec(spec_path)
    with pytest.raises(ValueError, match=r"\(set it in the spec, or give out=\)$"):
        run_release(spec, ledger=str(ledger))
    assert main(["release", str(spec_path), "--ledger", str(ledger)]) == 2
    err = capsys.readouterr().err
    assert err == (
        "dpgauss: error: [output] path is required (set it in the spec, or pass --out PATH)\n"
    )
    out = tmp_path / "r.csv"
    argv = ["release", str(spec_path), "--ledger", str(ledger), "--out", str(out)]
    assert main(argv) == 0 and out.exists()
    capsys.readouterr()
    with pytest.raises(ValueError, match=r"to replace it: \[output\] overwrite = true\)$"):
        run_release(spec, ledger=str(ledger), out=str(out))
    assert main(argv) == 2
    assert capsys.readouterr().err.endswith("already exists (to replace it: --overwrite)\n")
    before = out.read_bytes()
    assert main([*argv, "--overwrite"]) == 0 and out.read_bytes() != before
