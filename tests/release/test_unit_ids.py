"""Units by value, a second set of neighbours (issue #25, findings 2 and 3): categorical ids
and unnamed columns, float ids with NaN, ±inf and −0.0 (float32 too), through the engine
and through ``release_frame``.

Finding 2: a pandas categorical is a DuckDB ``ENUM``, which DuckDB hashes and sorts by its
*code*; pandas derives the categories from the data (the sorted distinct values), so one
unit's record with a new category that sorts first shifted every other record's code, and
every unit's kept records were redrawn (a record priority must depend on the record alone:
:mod:`dpgauss.release.engines.base`, rule 2).  Now an ``ENUM`` is hashed, sorted and compared by
its text.

Finding 3: with a float unit column, NaN ids compare equal in a sort, so every NaN-id record
was one unit (and ±inf ids two more): 50 records with a NaN id moved the kept records of
the other NaN-id rows.  Non-finite ids are now rows without a unit (``null_unit``), on both
engines, and −0.0 and 0.0 (equal values) are one unit on both.

The neighbouring-data tests compare exact (unnoised) aggregates over keys that reveal each
record (record ``j`` of unit ``u`` has a key of its own), so any record redrawn shows up:
adding one unit must change the count aggregate by at most its own contribution (Δ = 1
with ``max_records_per_unit = 1``).
"""

from __future__ import annotations

import secrets
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest

pd = pytest.importorskip("pandas")
pa = pytest.importorskip("pyarrow")
pq = pytest.importorskip("pyarrow.parquet")
duckdb = pytest.importorskip("duckdb")

from dpgauss.release import pipeline, release_frame  # noqa: E402
from dpgauss.release.engines.base import Aggregate  # noqa: E402
from dpgauss.release.engines.duckdb import DuckDBEngine  # noqa: E402
from dpgauss.release.pipeline import bounded_aggregate  # noqa: E402
from dpgauss.release.spec import ReleaseSpec  # noqa: E402

from ..helpers import charges, make_ledger  # noqa: E402

UNITS, PER_UNIT = 200, 3
NAN, INF = float("nan"), float("inf")


def spec_of(source: dict[str, Any], stop: int, **bounds: Any) -> ReleaseSpec:
    """A count over the range domain ``key`` ∈ [0, stop), ``max_records_per_unit = 1``
    unless ``bounds`` say otherwise."""
    return ReleaseSpec.from_dict(
        {
            "source": source,
            "unit": {"column": "uid"},
            "domain": {"kind": "range", "column": "key", "start": 0, "stop": stop},
            "statistic": {"kind": "count"},
            "bounds": bounds or {"max_records_per_unit": 1},
            "privacy": {"epsilon": 1.0, "delta": 1e-6, "dataset": "d"},
            "denoise": {"method": "none"},
        }
    )


def on_table(data: Any, spec: ReleaseSpec, salt: int) -> Aggregate:
    """The exact aggregate of ``data`` (a pandas frame or a pyarrow Table) registered as the
    table ``records`` of a fresh connection: scanned as it is, in its own types."""
    con = duckdb.connect()
    try:
        con.register("records", data)
        return bounded_aggregate(spec, salt=salt, engine=DuckDBEngine(con, threads=2))
    finally:
        con.close()


#: the registered table, its columns declared (a table source needs ``[source] types``)
TABLE = {"table": "records", "types": {"uid": "int64", "key": "int64", "note": "string"}}
TEXT_TABLE = {"table": "records", "types": {"uid": "string", "key": "int64", "note": "string"}}
STOP = UNITS * PER_UNIT + 10  # eve's key: UNITS * PER_UNIT


def records(uid_as_text: bool = False) -> pd.DataFrame:
    """200 units × 3 records, record j of unit u at the key 3u + j, a free-text ``note``."""
    uid = np.repeat(np.arange(UNITS), PER_UNIT)
    return pd.DataFrame(
        {
            "uid": [f"u{u:04d}" for u in uid] if uid_as_text else uid,
            "key": np.arange(uid.size),
            "note": [f"n{i:04d}" for i in range(uid.size)],
        }
    )


def with_eve(df: pd.DataFrame, **eve: Any) -> pd.DataFrame:
    """``df`` plus one unit, eve, with one record at the key ``STOP - 10``."""
    row = {"uid": UNITS, "key": STOP - 10, "note": "n9999", **eve}
    return pd.concat([df, pd.DataFrame({k: [v] for k, v in row.items()})], ignore_index=True)


def categorical(df: pd.DataFrame, *columns: str) -> pd.DataFrame:
    """``df`` with ``columns`` as pandas categoricals: categories from the data, sorted."""
    return df.astype(dict.fromkeys(columns, "category"))


def assert_only_eve_changes(base: Aggregate, more: Aggregate) -> None:
    """The neighbour with eve differs from the base by eve's one kept record (Δ = 1)."""
    diff = more.counts - base.counts
    assert np.abs(diff).sum() == 1, f"{np.abs(diff).sum():.0f} count changes (Δ = 1)"
    assert diff[STOP - 10] == 1
    assert more.rows.units == base.rows.units + 1


# ---------------------------------------------------------------- finding 2: ENUM columns


@pytest.mark.slow
@pytest.mark.parametrize("record_columns", [None, ["note"]], ids=["all-columns", "named"])
def test_a_categorical_column_never_named_is_hashed_by_its_text(
    record_columns: list[str] | None,
) -> None:
    """Eve's note "a" sorts before every other note: as an ENUM code it shifted all the
    other records' codes (measured: 241 count changes here, for Δ = 1)."""
    bounds: dict[str, Any] = {"max_records_per_unit": 1}
    if record_columns is not None:
        bounds["record_columns"] = record_columns
    spec = spec_of(TABLE, STOP, **bounds)
    df = records()
    for salt in (3, 11):
        base = on_table(categorical(df, "note"), spec, salt)
        more = on_table(categorical(with_eve(df, note="a"), "note"), spec, salt)
        assert base.rows.kept == UNITS
        assert_only_eve_changes(base, more)
        # and the same records as with the note as plain text
        assert np.array_equal(base.counts, on_table(df, spec, salt).counts)


def test_a_categorical_unit_is_hashed_and_sorted_by_its_text() -> None:
    """Eve's id "a" sorts before every other id (measured: 271 count changes, for Δ = 1)."""
    spec = spec_of(TEXT_TABLE, STOP)
    df = records(uid_as_text=True)
    for salt in (3, 11):
        base = on_table(categorical(df, "uid", "note"), spec, salt)
        more = on_table(categorical(with_eve(df, uid="a"), "uid", "note"), spec, salt)
        assert_only_eve_changes(base, more)
        assert np.array_equal(base.counts, on_table(df, spec, salt).counts)


def test_the_key_priority_of_a_categorical_unit_is_its_texts() -> None:
    """``max_keys_per_unit`` ranks a unit's keys by ``H(salt, 'keys', unit, key)``: the unit
    by its text, not by its ENUM code."""
    spec = spec_of(
        {"table": "records", "types": {"uid": "string", "key": "int64"}},
        STOP,
        max_records_per_key=1,
        max_keys_per_unit=1,
    )
    df = records(uid_as_text=True).drop(columns="note")
    base = on_table(categorical(df, "uid"), spec, 5)
    more = on_table(categorical(with_eve(df, uid="a").drop(columns="note"), "uid"), spec, 5)
    assert base.rows.kept == UNITS
    assert_only_eve_changes(base, more)
    assert np.array_equal(base.counts, on_table(df, spec, 5).counts)


def test_an_empty_categorical_unit_is_no_unit() -> None:
    """As for a text id, the empty string is no unit (``null_unit``); so is a missing one."""
    df = pd.DataFrame({"uid": ["a", "", "b", None, "a"], "key": [0, 1, 2, 3, 4]})
    types = {"uid": "string", "key": "int64"}
    spec = spec_of({"table": "records", "types": types}, 10, max_records_per_unit=5)
    for data in (df, categorical(df, "uid")):
        agg = on_table(data, spec, 1)
        assert agg.counts[:5].tolist() == [1, 0, 1, 0, 1]
        assert (agg.rows.null_unit, agg.rows.units, agg.rows.kept) == (2, 2, 3)


def test_a_categorical_key_column_is_still_read_by_its_text() -> None:
    """Domain values match a categorical key by its text, whatever categories the data
    brings (eve's key "a" sorts first)."""
    df = pd.DataFrame({"uid": np.arange(6), "key": ["x", "y", "x", "z", "y", "x"]})
    spec = ReleaseSpec.from_dict(
        {
            "source": {"table": "records", "types": {"uid": "int64", "key": "string"}},
            "unit": {"column": "uid"},
            "domain": {"kind": "values", "column": "key", "values": ["x", "y", "z"]},
            "bounds": {"max_records_per_unit": 1},
            "privacy": {"epsilon": 1.0, "delta": 1e-6, "dataset": "d"},
            "denoise": {"method": "none"},
        }
    )
    base = on_table(categorical(df, "key"), spec, 1)
    eve = pd.concat([df, pd.DataFrame({"uid": [99], "key": ["a"]})], ignore_index=True)
    more = on_table(categorical(eve, "key"), spec, 1)
    assert base.counts.tolist() == more.counts.tolist() == [3, 2, 1]
    assert more.rows.outside_domain == 1


@pytest.fixture
def fixed_salt(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every release draws the salt 7 (a release's salt is a fresh secret): two releases of
    neighbouring data are then comparable."""
    monkeypatch.setattr(
        pipeline, "secrets", SimpleNamespace(randbits=lambda n: 7, token_hex=secrets.token_hex)
    )


@pytest.mark.slow
@pytest.mark.usefixtures("fixed_salt")
def test_a_frame_release_with_a_categorical_unit(tmp_path: Path, zero_noise) -> None:
    """Through ``release_frame`` (declared types: the unit read as text, value by value)."""
    spec = spec_of({"table": "records", "types": {"uid": "string", "key": "int64"}}, STOP)
    df = records(uid_as_text=True).drop(columns="note")
    ledger = make_ledger(tmp_path)
    outs = []
    for i, data in enumerate((df, with_eve(df, uid="a").drop(columns="note"))):
        with zero_noise():
            out = tmp_path / f"o{i}.csv"
            res = release_frame(categorical(data, "uid"), spec, out=out, ledger=ledger)
        outs.append(np.asarray(res.columns["released"]))
    assert np.abs(outs[1] - outs[0]).sum() == 1
    assert charges(ledger) == 2


# ------------------------------------------------------------ finding 3: float unit ids

#: float ids: three units (one of them −0.0 and 0.0), and non-finite ids
FLOAT_IDS = [1.0, 1.0, 2.5, -0.0, 0.0, -0.0, NAN, NAN, NAN, INF, INF, -INF, -INF]
FINITE_UNITS = 3


def float_records(extra_nans: int = 0) -> pd.DataFrame:
    ids = FLOAT_IDS + [NAN] * extra_nans
    return pd.DataFrame({"uid": np.array(ids, dtype=np.float64), "key": np.arange(len(ids))})


def check_non_finite_ids(aggregate: Any) -> None:
    """NaN, +inf and −inf ids are ``null_unit`` rows, never kept; −0.0 and 0.0 one unit; 50
    more NaN-id records change nothing but the ``null_unit`` counter."""
    stop = len(FLOAT_IDS) + 60  # the key of each record is its row number
    for salt in (1, 2, 3):
        base = aggregate(float_records(), stop, salt)
        more = aggregate(float_records(extra_nans=50), stop, salt)
        non_finite = sum(1 for x in FLOAT_IDS if not np.isfinite(x))
        assert base.rows.null_unit == non_finite
        assert more.rows.null_unit == non_finite + 50
        assert base.rows.units == FINITE_UNITS and base.rows.kept == FINITE_UNITS
        assert np.array_equal(base.counts, more.counts)
        kept = np.flatnonzero(base.counts)
        assert all(np.isfinite(FLOAT_IDS[k]) for k in kept)
        # one record of each unit: 1.0 (keys 0, 1), 2.5 (key 2), ±0.0 (keys 3 … 5)
        per_unit = [int(((kept >= lo) & (kept < hi)).sum()) for lo, hi in ((0, 2), (2, 3), (3, 6))]
        assert per_unit == [1, 1, 1]


def duckdb_float_aggregate(kind: str, tmp_path: Path) -> Any:
    def aggregate(df: pd.DataFrame, stop: int, salt: int) -> Aggregate:
        if kind == "parquet":
            path = tmp_path / f"f{len(df)}.parquet"
            pq.write_table(pa.Table.from_pandas(df, preserve_index=False), path)
            return bounded_aggregate(
                spec_of({"path": str(path)}, stop), salt=salt, engine=DuckDBEngine(threads=2)
            )
        data = df if kind == "pandas" else pa.Table.from_pandas(df, preserve_index=False)
        types = {"uid": "float64", "key": "int64"}
        return on_table(data, spec_of({"table": "records", "types": types}, stop), salt)

    return aggregate


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["pandas", "arrow", "parquet"])
def test_non_finite_float_ids_are_no_unit(kind: str, tmp_path: Path) -> None:
    check_non_finite_ids(duckdb_float_aggregate(kind, tmp_path))


@pytest.mark.slow
@pytest.mark.usefixtures("fixed_salt")
def test_non_finite_float_ids_through_a_frame_release(tmp_path: Path, zero_noise) -> None:
    """Declared float64 ids (``release_frame``): the same rule."""
    types = {"uid": "float64", "key": "int64"}
    ledger = make_ledger(tmp_path)
    outs = []
    for i, extra in enumerate((0, 50)):
        spec = spec_of({"table": "records", "types": types}, len(FLOAT_IDS) + 60)
        data = pa.Table.from_pandas(float_records(extra), preserve_index=False)
        with zero_noise():
            res = release_frame(data, spec, out=tmp_path / f"o{i}.csv", ledger=ledger)
        outs.append(np.asarray(res.columns["released"]))
    assert np.array_equal(outs[0], outs[1]) and outs[0].sum() == FINITE_UNITS


@pytest.mark.parametrize("kind", ["float32", "float64"])
def test_negative_zero_is_the_unit_zero(kind: str, tmp_path: Path) -> None:
    """−0.0 == 0.0: one unit (b = 1 keeps one of its three records)."""
    ids = pa.array([-0.0, 0.0, -0.0, 0.0], type=getattr(pa, kind)())
    path = tmp_path / "z.parquet"
    pq.write_table(pa.table({"uid": ids, "key": pa.array(range(4))}), path)
    for salt in range(5):
        agg = bounded_aggregate(spec_of({"path": str(path)}, 4), salt=salt)
        assert (agg.rows.units, agg.rows.kept, agg.rows.null_unit) == (1, 1, 0)


# -------------------------------------------------------------------------------- Spark


@pytest.fixture(scope="module")
def spark_engine(spark: Any) -> Any:
    from dpgauss.release.engines.spark import SparkEngine

    return SparkEngine(spark)


@pytest.mark.spark
@pytest.mark.filterwarnings("ignore:PySpark does not yet fully support pandas:FutureWarning")
def test_spark_non_finite_float_ids_are_no_unit(spark_engine: Any, tmp_path: Path) -> None:
    def aggregate(df: pd.DataFrame, stop: int, salt: int) -> Aggregate:
        path = tmp_path / f"f{len(df)}.parquet"
        pq.write_table(pa.Table.from_pandas(df, preserve_index=False), path)
        return bounded_aggregate(spec_of({"path": str(path)}, stop), salt=salt, engine=spark_engine)

    check_non_finite_ids(aggregate)


@pytest.mark.spark
@pytest.mark.filterwarnings("ignore:PySpark does not yet fully support pandas:FutureWarning")
@pytest.mark.parametrize("kind", ["float32", "float64"])
def test_spark_negative_zero_is_the_unit_zero(spark_engine: Any, kind: str, tmp_path: Path) -> None:
    ids = pa.array([-0.0, 0.0, -0.0, 0.0, NAN, 1.0], type=getattr(pa, kind)())
    path = tmp_path / "z.parquet"
    pq.write_table(pa.table({"uid": ids, "key": pa.array(range(6))}), path)
    for salt in range(3):
        agg = bounded_aggregate(spec_of({"path": str(path)}, 6), salt=salt, engine=spark_engine)
        duck = bounded_aggregate(spec_of({"path": str(path)}, 6), salt=salt)
        assert (agg.rows.units, agg.rows.kept, agg.rows.null_unit) == (2, 2, 1)
        assert (duck.rows.units, duck.rows.kept, duck.rows.null_unit) == (2, 2, 1)
