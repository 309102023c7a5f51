"""Units and record priorities by value (issue #25, findings 2 and 3).

A pandas categorical becomes a DuckDB ENUM, which DuckDB compares and hashes by its *code*;
pandas derives the codes from the sorted distinct values, so one unit's record with a new
category that sorts first renumbered every other record and redrew every unit's kept
records (27 Δ through an unnamed ``note`` column, 28 Δ through ``uid``).  Float unit ids:
DuckDB's sort put every NaN id together, as one unit.  Both are read by value now."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

pd = pytest.importorskip("pandas")
pa = pytest.importorskip("pyarrow")
pq = pytest.importorskip("pyarrow.parquet")
duckdb = pytest.importorskip("duckdb")

from dpgauss.release.engines.duckdb import DuckDBEngine  # noqa: E402
from dpgauss.release.pipeline import bounded_aggregate  # noqa: E402
from dpgauss.release.plan import sensitivity_of  # noqa: E402
from dpgauss.release.spec import ReleaseSpec  # noqa: E402

#: the columns of :func:`_base`, declared (a table source needs ``[source] types``)
TYPES = {"uid": "int64", "key": "int64", "note": "string"}
#: the columns of :func:`_float_sources`
FLOAT_TYPES = {"uid": "float64", "key": "int64"}


def _spec(
    keys: list[Any], b: int = 1, source: dict | None = None, types: dict | None = None
) -> ReleaseSpec:
    return ReleaseSpec.from_dict(
        {
            "source": source or {"table": "records", "types": types or TYPES},
            "unit": {"column": "uid"},
            "domain": {"kind": "values", "column": "key", "values": keys},
            "bounds": {"max_records_per_unit": b},
            "privacy": {"epsilon": 1.0, "delta": 1e-6, "dataset": "d"},
            "denoise": {"method": "none"},
        }
    )


def _agg(data: Any, spec: ReleaseSpec, salt: int) -> Any:
    con = duckdb.connect()
    con.register("records", data)
    return bounded_aggregate(spec, salt=salt, engine=DuckDBEngine(con))


def _base(n: int = 200, seed: int = 0) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    return pd.DataFrame(
        {
            "uid": np.repeat(np.arange(n), 3),
            "key": rng.integers(0, 4, 3 * n),
            "note": rng.choice(["m", "p", "z"], 3 * n),
        }
    )


@pytest.mark.parametrize("salt", [1, 2, 3])
def test_a_new_category_in_an_unnamed_column_moves_nobody_else(salt: int) -> None:
    df = _base()
    eve = pd.DataFrame({"uid": [10**6], "key": [0], "note": ["a"]})  # "a" sorts first
    more = pd.concat([df, eve], ignore_index=True)
    df["note"], more["note"] = df["note"].astype("category"), more["note"].astype("category")
    spec = _spec(list(range(4)))
    a, b = _agg(df, spec, salt).counts, _agg(more, spec, salt).counts
    assert np.linalg.norm(b - a) <= sensitivity_of(spec).l2  # was ~27
    assert (b - a).tolist() == [1, 0, 0, 0]


@pytest.mark.parametrize("salt", [1, 2])
def test_a_categorical_uid_is_a_unit_by_its_value(salt: int) -> None:
    df = _base()
    df["uid"] = df["uid"].map(lambda u: f"u{u:04d}")
    eve = pd.DataFrame({"uid": ["a"], "key": [0], "note": ["m"]})
    more = pd.concat([df, eve], ignore_index=True)
    df["uid"], more["uid"] = df["uid"].astype("category"), more["uid"].astype("category")
    spec = _spec(list(range(4)), types={**TYPES, "uid": "string"})
    a, b = _agg(df, spec, salt), _agg(more, spec, salt)
    assert (b.counts - a.counts).tolist() == [1, 0, 0, 0]  # was ~28
    as_text = _agg(df.astype({"uid": str, "note": str}), spec, salt)
    assert np.array_equal(as_text.counts, a.counts)  # the same as text ids
    empty = pd.concat([df, pd.DataFrame({"uid": [""], "key": [1], "note": ["m"]})])
    empty["uid"] = empty["uid"].astype("category")
    got = _agg(empty, spec, salt)
    assert np.array_equal(got.counts, a.counts) and got.rows.null_unit == 1


def _float_ids() -> tuple[list[float], list[int]]:
    ids = [float(u) for u in range(50) for _ in range(2)]
    keys = [u % 3 for u in range(100)]
    bad = [float("nan")] * 50 + [float("inf"), float("-inf")]
    return ids + bad, keys + [0] * 52


def _float_sources(tmp_path: Path) -> dict[str, Any]:
    ids, keys = _float_ids()
    table = pa.table({"uid": pa.array(ids, pa.float64()), "key": pa.array(keys)})
    pq.write_table(table, tmp_path / "f.parquet")
    return {"pandas": table.to_pandas(), "arrow": table, "parquet": tmp_path / "f.parquet"}


@pytest.mark.parametrize("kind", ["pandas", "arrow", "parquet"])
def test_nan_and_infinite_ids_have_no_unit(tmp_path: Path, kind: str) -> None:
    data = _float_sources(tmp_path)[kind]
    keys = list(range(3))
    if kind == "parquet":
        agg = bounded_aggregate(_spec(keys, source={"path": str(data)}), salt=4)
    else:
        agg = _agg(data, _spec(keys, types=FLOAT_TYPES), 4)
    assert agg.rows.null_unit == 52 and agg.rows.units == 50
    assert agg.counts.sum() == 50  # b = 1: one record per real unit; no NaN "unit" kept


def test_minus_zero_is_the_unit_zero() -> None:
    t = pa.table({"uid": pa.array([0.0, -0.0, 1.0]), "key": pa.array([0, 1, 0])})
    agg = _agg(t, _spec([0, 1], b=5, types=FLOAT_TYPES), 1)
    assert agg.rows.units == 2 and agg.counts.sum() == 3


def test_spark_reads_float_ids_as_duckdb(spark: Any, tmp_path: Path) -> None:
    from dpgauss.release.engines.spark import SparkEngine

    path = _float_sources(tmp_path)["parquet"]
    t = pq.read_table(path)
    more = pa.table({"uid": pa.array([0.0, -0.0]), "key": pa.array([1, 2])})
    pq.write_table(pa.concat_tables([t, more]), path)
    spec = _spec(list(range(3)), b=5, source={"path": str(path)})
    duck = bounded_aggregate(spec, salt=4)
    sp = bounded_aggregate(spec, salt=4, engine=SparkEngine(spark))
    assert duck.rows.as_dict() == sp.rows.as_dict()
    assert np.array_equal(duck.counts, sp.counts)
    assert sp.rows.null_unit == 52 and sp.rows.units == 50
