"""``[domain] other = true`` (issue #30, item 5): one more key, ``__other__``, counting the
records whose key is outside a public domain, bounded like every other key."""

from __future__ import annotations

import csv
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from dpgauss.release.domains.key_domain import resolve_domain
from dpgauss.release.pipeline import bounded_aggregate, run_release
from dpgauss.release.plan import sensitivity_of
from dpgauss.release.spec import ReleaseSpec


def write(path: Path, rows: list[tuple[Any, ...]]) -> Path:
    with open(path, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["uid", "x"])
        w.writerows(rows)
    return path


def spec_of(path: Path, domain: dict, bounds: dict | None = None, **over: Any) -> ReleaseSpec:
    d: dict[str, Any] = {
        "source": {"path": str(path)},
        "unit": {"column": "uid"},
        "domain": {**domain, "other": True},
        "bounds": bounds or {"max_records_per_unit": 3},
        "privacy": {"epsilon": 1.0, "delta": 1e-6, "dataset": "d", "secure": False},
        "denoise": {"method": "none"},
        "output": {"path": str(path.with_name("out.csv"))},
        **over,
    }
    return ReleaseSpec.from_dict(d)


VALUES = {"kind": "values", "column": "x", "values": ["a", "b"]}
RANGE = {"kind": "range", "column": "x", "start": 0, "stop": 10, "step": 5}


def test_counts_and_classes(tmp_path: Path) -> None:
    rows = [(1, "a"), (2, "b"), (2, "zz"), (3, "c"), (4, None), ("", "q")]
    sp = spec_of(write(tmp_path / "s.csv", rows), VALUES)
    dom = resolve_domain(sp)
    assert dom.size == 3 and dom.labels.tolist() == ["a", "b", "__other__"] and dom.other
    agg = bounded_aggregate(sp, salt=1)
    assert agg.counts.tolist() == [1.0, 1.0, 2.0]
    assert agg.rows.outside_domain == 0 and agg.rows.invalid_domain == 1
    assert agg.rows.null_unit == 1
    rng = spec_of(write(tmp_path / "r.csv", [(1, 3), (2, 7), (3, 12), (4, -1), (5, "x")]), RANGE)
    agg = bounded_aggregate(rng, salt=1)
    assert agg.counts.tolist() == [1.0, 1.0, 2.0] and agg.rows.invalid_domain == 1
    assert resolve_domain(rng).grid is None  # no lattice: the other key is no bin


def test_the_other_key_adds_to_the_sensitivity(tmp_path: Path) -> None:
    one = {"kind": "values", "column": "x", "values": ["a"]}
    bounds = {"max_keys_per_unit": 5, "max_records_per_key": 1}
    sp = spec_of(write(tmp_path / "s.csv", [(1, "a")]), one, bounds)
    assert sensitivity_of(sp).l2 == pytest.approx(np.sqrt(2))  # two keys: "a" and other
    d = sp.to_dict()
    d["domain"]["other"] = False
    assert sensitivity_of(ReleaseSpec.from_dict(d)).l2 == 1.0


@pytest.mark.parametrize("seed", range(5))
@pytest.mark.parametrize("domain", [VALUES, RANGE])
def test_neighbours(tmp_path: Path, seed: int, domain: dict) -> None:
    """Add one unit with records inside and outside the domain: the counts move by a vector
    of L2 norm at most Δ (the spec's, over the domain and the other key), only on keys the
    unit holds; every other key is unchanged."""
    rng = np.random.default_rng(seed)
    inside = ["a", "b"] if domain is VALUES else [1, 6]
    outside = ["c", "d", "zz"] if domain is VALUES else [-3, 11, 25]
    pool = inside + outside
    rows = [(u, pool[int(rng.integers(0, 5))]) for u in range(30) for _ in range(3)]
    extra = [(99, pool[int(rng.integers(0, 5))]) for _ in range(int(rng.integers(1, 8)))]
    bounds = {"max_records_per_unit": 3, "max_records_per_key": 2}
    a = spec_of(write(tmp_path / "a.csv", rows), domain, bounds)
    b = spec_of(write(tmp_path / "b.csv", rows + extra), domain, bounds)
    base = bounded_aggregate(a, salt=seed).counts
    plus = bounded_aggregate(b, salt=seed).counts
    diff = plus - base
    assert np.all(diff >= 0)
    assert float(np.sqrt(np.sum(diff**2))) <= sensitivity_of(a).l2 + 1e-12
    held = set()
    for _, x in extra:
        held.add(pool.index(x) if x in inside else 2)
    assert (
        set(np.flatnonzero(diff).tolist())
        <= {inside.index(x) if x in inside else 2 for _, x in extra}
        == held
    )


def test_release_writes_the_other_row_last(tmp_path: Path, zero_noise: Any) -> None:
    rows = [(1, 3), (2, 7), (3, 12), (3, 13), (4, -1)]
    sp = spec_of(
        write(tmp_path / "s.csv", rows), RANGE, output={"path": str(tmp_path / "o.parquet")}
    )
    with zero_noise():
        res = run_release(sp)
    assert res.columns["key"].tolist() == [0, 5, "__other__"]
    assert res.columns["released"].tolist() == [1.0, 1.0, 3.0]
    import pyarrow.parquet as pq

    table = pq.read_table(tmp_path / "o.parquet")
    assert table.column("key").to_pylist() == ["0", "5", "__other__"]


def test_refusals(tmp_path: Path) -> None:
    d = {
        "kind": "graph",
        "graph": "manhattan",
        "lat": "la",
        "lon": "lo",
        "mapping": "kde",
        "bandwidth": 50.0,
    }
    with pytest.raises(ValueError, match="not with mapping = 'kde'"):
        spec_of(tmp_path / "s.csv", d)
    with pytest.raises(ValueError, match="wavelet' needs a grid"):
        spec_of(tmp_path / "s.csv", RANGE, denoise={"method": "wavelet"})
    d = spec_of(tmp_path / "s.csv", VALUES).to_dict()
    d["domain"]["other"] = "yes"
    with pytest.raises(TypeError, match=r"\[domain\] other must be true or false"):
        ReleaseSpec.from_dict(d)


@pytest.mark.spark
def test_spark_agrees(tmp_path: Path, spark: Any) -> None:
    from dpgauss.release.engines.spark import SparkEngine

    rows = [(1, "a"), (2, "b"), (2, "zz"), (3, "c"), (4, None), ("", "q")]
    sp = spec_of(write(tmp_path / "s.csv", rows), VALUES)
    duck = bounded_aggregate(sp, salt=1)
    spk = bounded_aggregate(sp, salt=1, engine=SparkEngine(spark))
    assert duck.counts.tolist() == spk.counts.tolist() == [1.0, 1.0, 2.0]
    assert duck.rows.as_dict() == spk.rows.as_dict()


@pytest.mark.parametrize(
    "domain",
    [
        {"kind": "values", "column": "x", "values": ["a", "__other__"]},
        {
            "kind": "product",
            "parts": [
                {"kind": "values", "column": "x", "values": ["__other__", "b"]},
                {"kind": "range", "column": "n", "start": 0, "stop": 10, "step": 5},
            ],
        },
    ],
)
def test_a_public_key_named_like_the_other_key_is_refused(tmp_path: Path, domain: dict) -> None:
    """Review finding 2: a public key "__other__" beside the other bucket wrote two rows
    keyed "__other__" (the key column no longer names one key); refused before the charge."""
    sp = spec_of(write(tmp_path / "s.csv", [(1, "a")]), domain)
    with pytest.raises(ValueError, match="__other__"):
        resolve_domain(sp)
