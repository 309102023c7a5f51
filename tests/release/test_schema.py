"""The declared schema ``[source] types`` (issue #25, finding 1): a column is read in the type
the spec declares, value by value, never in a type a tool inferred from the records.

The three measured attacks of the finding are regressions here (frames built the way users
build them: one record decides a column's dtype), then the conversion table, checked value
by value on DuckDB against a Python reference and between the two engines."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import numpy as np
import pytest

pd = pytest.importorskip("pandas")
pa = pytest.importorskip("pyarrow")
pq = pytest.importorskip("pyarrow.parquet")
duckdb = pytest.importorskip("duckdb")

from dpgauss.release import pipeline, release_frame, schema  # noqa: E402
from dpgauss.release.domains.keys import INT_LITERAL  # noqa: E402
from dpgauss.release.engines.duckdb import DuckDBEngine  # noqa: E402
from dpgauss.release.frames import _scannable  # noqa: E402
from dpgauss.release.pipeline import bounded_aggregate  # noqa: E402
from dpgauss.release.spec import ReleaseSpec  # noqa: E402

from ..helpers import charges, make_ledger  # noqa: E402

BIG = 2**53


def _spec(keys: list[Any], types: dict[str, str] | None, b: int = 1, **source: Any) -> dict:
    src: dict[str, Any] = {"table": "records", **source}
    if types is not None:
        src["types"] = types
    return {
        "source": src,
        "unit": {"column": "uid"},
        "domain": {"kind": "values", "column": "key", "values": keys},
        "bounds": {"max_records_per_unit": b},
        "privacy": {"epsilon": 1.0, "delta": 1e-6, "dataset": "d"},
        "denoise": {"method": "none"},
        "output": {"plot": False},
    }


def _counts(frame: Any, spec: dict, salt: int = 7) -> np.ndarray:
    """The exact bounded counts of ``frame`` as ``release_frame`` scans it, with a fixed salt."""
    con = duckdb.connect()
    con.register("records", _scannable(frame, "pandas"))
    return bounded_aggregate(
        ReleaseSpec.from_dict(spec), salt=salt, engine=DuckDBEngine(con)
    ).counts


def _csv(tmp_path: Path, name: str, text: str) -> Path:
    p = tmp_path / name
    p.write_text(text)
    return p


# ------------------------------------------------------------- the measured attacks


def test_an_empty_key_that_widens_the_column_to_float_is_refused(tmp_path: Path) -> None:
    """Finding 1, first measure: one record with an empty key made ``pd.read_csv`` type
    ``key`` float64, which moved 200 other units from key 2⁵³+1 to 2⁵³ (282.8 Δ).  Declared
    int64, the float64 column is refused before the charge, and the frame built with the
    declared type releases each unit where it belongs."""
    rows = "".join(f"{u},{BIG + 1}\n" for u in range(200))
    base = _csv(tmp_path, "base.csv", "uid,key\n" + rows)
    eve = _csv(tmp_path, "eve.csv", "uid,key\n" + rows + "999,\n")
    inferred = pd.read_csv(eve)
    assert str(inferred.key.dtype) == "float64"  # the attack: one record flips the dtype
    spec = _spec([BIG, BIG + 1], {"uid": "int64", "key": "int64"})
    ledger = make_ledger(tmp_path)
    with pytest.raises(ValueError) as err:
        release_frame(inferred, spec, out=tmp_path / "o.csv", ledger=ledger)
    msg = str(err.value)
    assert "'key' as int64" in msg and "DOUBLE" in msg and "dtype=" in msg
    assert "\n" not in msg and str(BIG) not in msg  # one sentence, the schema only
    assert charges(ledger) == 0 and not (tmp_path / "o.csv").exists()
    dtype = {"uid": "Int64", "key": "Int64"}
    a = _counts(pd.read_csv(base, dtype=dtype), spec)
    b = _counts(pd.read_csv(eve, dtype=dtype), spec)
    assert a.tolist() == [0, 200] and b.tolist() == [0, 200]  # eve has no key: no row


@pytest.mark.slow
def test_an_empty_id_cannot_merge_other_units(tmp_path: Path) -> None:
    """Finding 1, second measure: one row with an empty id made ``uid`` float64 and merged
    ids 2⁵³+2j and 2⁵³+2j+1 (200 units became 101: 57.5 Δ)."""
    rows = "".join(f"{BIG + u},1\n" for u in range(200))
    base = _csv(tmp_path, "base.csv", "uid,key\n" + rows)
    eve = _csv(tmp_path, "eve.csv", "uid,key\n" + rows + ",1\n")
    spec = _spec([1], {"uid": "int64", "key": "int64"})
    assert str(pd.read_csv(eve).uid.dtype) == "float64"
    with pytest.raises(ValueError, match="'uid' as int64"):
        release_frame(pd.read_csv(eve), spec, out=tmp_path / "o.csv", ledger=make_ledger(tmp_path))
    for dtype in ({"uid": "Int64", "key": "Int64"}, {"uid": "string", "key": "string"}):
        assert _counts(pd.read_csv(base, dtype=dtype), spec).tolist() == [200]
        assert _counts(pd.read_csv(eve, dtype=dtype), spec).tolist() == [200]


@pytest.mark.slow
@pytest.mark.parametrize("salt", [1, 2, 3])
def test_one_text_id_does_not_redraw_every_units_records(tmp_path: Path, salt: int) -> None:
    """Finding 1, third measure: one text id among integer ids turned ``uid`` into text, so
    every unit's kept record was redrawn (11–26 Δ per salt).  Declared int64, the text
    column's values are read as the integers they spell, hashed as int64, exactly as the
    integer column of the neighbour without the text id."""
    rng = np.random.default_rng(salt)
    keys = rng.integers(0, 5, 600)
    rows = "".join(f"{u // 3},{k}\n" for u, k in enumerate(keys))
    base = _csv(tmp_path, "base.csv", "uid,key\n" + rows)
    eve = _csv(tmp_path, "eve.csv", "uid,key\nx,1\nx,2\n" + rows)
    assert pd.read_csv(base).uid.dtype.kind == "i" and pd.read_csv(eve).uid.dtype.kind != "i"
    spec = _spec(list(range(5)), {"uid": "int64", "key": "int64"})
    a, b = _counts(pd.read_csv(base), spec, salt), _counts(pd.read_csv(eve), spec, salt)
    assert np.array_equal(a, b)  # "x" is no integer: a row without a unit
    spec = _spec(list(range(5)), {"uid": "string", "key": "int64"})  # "x" a unit: Δ = 1
    with pytest.raises(ValueError, match="cannot hold string values exactly"):
        _counts(pd.read_csv(base), spec, salt)  # int64 ids are no texts: built as text
    text = {"uid": "string"}
    a = _counts(pd.read_csv(base, dtype=text), spec, salt)
    b = _counts(pd.read_csv(eve, dtype=text), spec, salt)
    assert np.abs(a - b).sum() == 1


@pytest.mark.slow
def test_an_undeclared_column_never_moves_a_record(tmp_path: Path) -> None:
    """A column the spec does not declare is not read: not in the record's hashed content
    (a categorical ``note`` whose codes one new value shifts, issue #25 finding 2)."""
    rng = np.random.default_rng(0)
    df = pd.DataFrame(
        {
            "uid": np.repeat(np.arange(200), 3),
            "key": rng.integers(0, 4, 600),
            "note": pd.Categorical(rng.choice(["b", "c", "d"], 600)),
        }
    )
    eve = pd.DataFrame({"uid": [10**6], "key": [0], "note": ["a"]})
    more = pd.concat([df, eve], ignore_index=True)
    more["note"] = more["note"].astype("category")  # "a" sorts first: every code shifts
    spec = _spec(list(range(4)), {"uid": "int64", "key": "int64"})
    diff = _counts(more, spec) - _counts(df, spec)
    assert diff.tolist() == [1, 0, 0, 0]
    spec = _spec(list(range(4)), {"uid": "int64", "key": "int64", "note": "string"})
    diff = _counts(more, spec) - _counts(df, spec)
    assert diff.tolist() == [1, 0, 0, 0]  # declared: hashed by its value's text


# ------------------------------------------------------------------ the spec's rules


def test_type_names_and_aliases() -> None:
    for name, want in [
        ("int64", "int64"),
        ("BIGINT", "int64"),
        ("Int32", "int32"),
        ("integer", "int32"),
        ("ubigint", "uint64"),
        ("double", "float64"),
        ("VARCHAR", "string"),
        ("utf8", "string"),
        ("large_string", "string"),
        ("Boolean", "bool"),
        ("date32", "date"),
        ("timestamp[us]", "timestamp"),
        ("TIMESTAMP[NS]", "timestamp_ns"),
    ]:
        assert schema.canonical("c", name) == want
    for bad in ["int", "float", "float32", "decimal(10,2)", "object", "", "list<int64>"]:
        with pytest.raises(ValueError, match=r"\[source\] types\.c must be one of int8"):
            schema.canonical("c", bad)
    with pytest.raises(TypeError, match=r"types\.c must be a type name"):
        schema.canonical("c", 64)


def test_the_spec_checks_types_before_any_record(tmp_path: Path) -> None:
    base = _spec([1], {"uid": "int64", "key": "int64"})
    assert ReleaseSpec.from_dict(base).source.types == {"uid": "int64", "key": "int64"}
    for types, msg in [
        ({"uid": "int64"}, r"\[domain\] column 'key' is not declared in \[source\] types"),
        ({}, "at least one column"),
        ("int64", "must be a table of column = type"),
        ({"uid": "int64", "key": "number"}, r"types\.key must be one of"),
    ]:
        with pytest.raises((ValueError, TypeError), match=msg):
            ReleaseSpec.from_dict({**base, "source": {"table": "records", "types": types}})
    stat = {"kind": "sum", "column": "v", "lower": 0, "upper": 1}
    with pytest.raises(ValueError, match=r"\[statistic\] column 'v' is not declared"):
        ReleaseSpec.from_dict({**base, "statistic": stat})
    # the declared types are part of the public spec (they are the schema, not data)
    assert ReleaseSpec.from_dict(base).to_dict()["source"]["types"] == {
        "uid": "int64",
        "key": "int64",
    }


def test_a_frame_without_types_is_refused_before_the_budget(tmp_path: Path) -> None:
    ledger = make_ledger(tmp_path)
    df = pd.DataFrame({"uid": [1, 2], "key": [1, 1]})
    with pytest.raises(ValueError, match=r"\[source\] table needs types"):
        release_frame(df, _spec([1], None), ledger=ledger)
    with pytest.raises(ValueError, match="'nope', which is not a column of the source"):
        types = {"uid": "int64", "key": "int64", "nope": "string"}
        release_frame(df, _spec([1], types), out=tmp_path / "o.csv", ledger=ledger)
    assert charges(ledger) == 0


def test_a_dict_spec_may_leave_the_table_out(tmp_path: Path, zero_noise) -> None:
    ledger = make_ledger(tmp_path)
    spec = _spec([1, 2], {"uid": "int64", "key": "int64"})
    spec["source"] = {"types": spec["source"]["types"]}
    with zero_noise():
        res = release_frame(
            pd.DataFrame({"uid": [1, 2, 3], "key": [1, 1, 2]}),
            spec,
            out=tmp_path / "o.csv",
            ledger=ledger,
        )
    assert res.columns["released"].tolist() == [2.0, 1.0]


@pytest.mark.slow
def test_parquet_and_csv_sources_take_types(tmp_path: Path) -> None:
    """Allowed for every source: a Parquet file's float id column declared int64 is refused;
    a CSV's text ids declared int64 are integers (``01`` and ``1`` one unit)."""
    t = pa.table({"uid": pa.array([1.0, 2.0]), "key": pa.array([1, 1], pa.int32())})
    pq.write_table(t, tmp_path / "s.parquet")
    spec = _spec([1], {"uid": "int64", "key": "int64"})
    spec["source"] = {"path": str(tmp_path / "s.parquet"), "types": spec["source"]["types"]}
    ledger = make_ledger(tmp_path)
    with pytest.raises(ValueError, match="'uid' as int64, but the source's column is DOUBLE"):
        pipeline.run_release(ReleaseSpec.from_dict(spec), out=tmp_path / "o.csv", ledger=ledger)
    assert charges(ledger) == 0
    pq.write_table(t.set_column(0, "uid", pa.array([1, 2], pa.int32())), tmp_path / "s.parquet")
    assert bounded_aggregate(ReleaseSpec.from_dict(spec), salt=1).counts.tolist() == [2]
    csv = _csv(tmp_path, "s.csv", "uid,key,note\n01,1,a\n1,1,b\n x ,1,c\n+2,1,d\n")
    spec["source"] = {"path": str(csv), "types": {"uid": "int64", "key": "int64"}}
    agg = bounded_aggregate(ReleaseSpec.from_dict(spec), salt=1)
    assert agg.counts.tolist() == [2] and agg.rows.null_unit == 1 and agg.rows.units == 2
    spec["source"]["types"] = {"uid": "string", "key": "int64"}
    assert bounded_aggregate(ReleaseSpec.from_dict(spec), salt=1).rows.units == 4


def test_every_pair_is_accepted_or_refused_by_type_alone() -> None:
    fams = ["int", "bool", "decimal0", "decimal", "float32", "float64", "string", "date"]
    fams += ["timestamp", "timestamp_ns", "null", "other"]
    for declared in schema.DECLARED:
        for fam in fams:
            how = schema.rule(fam, declared)
            assert how in (None, "same", "cast", "text", "null")
        assert schema.rule("float64", declared) in (None, "same")  # a float is never an int
        assert schema.rule("other", declared) is None
        assert schema.rule("null", declared) == "null"
        assert schema.rule("string", declared) in ("same", "text")  # text always converts
    assert schema.rule("timestamp_ns", "timestamp") is None  # nanoseconds: lossy
    assert schema.rule("float64", "string") is None  # 1 would read as "1.0"


# --------------------------------------------------------- conversions, value by value

_WS = " \t\n\x0b\f\r"
TEXTS = [
    "0", "12", " 12 ", "\t-7\n", "+3", "1_000", "1__0", "_1", "1_", "1.0", "1e3", "0x10",
    "-0", "00012", "9223372036854775807", "9223372036854775808", "-9223372036854775808",
    "255", "256", "-1", "1" + "0" * 40, "١٢", "", " ", "nan", "NaN", "inf", "-Infinity",
    "1.5", ".5", "5.", "1_0.2_5", "1e400", "true", "TRUE", "False", " true", "yes", "1",
    "2020-01-02", "2020-1-2", " 2020-01-02 ", "2020-02-30", "2020-01-02 03:04:05",
    "2020-01-02T03:04:05.123456", "2020-01-02 03:04:05.1234567", "2020-01-02 24:00",
    "2020-01-02 03:04+02:00", "2020-01-02Z", "epoch", "x", None,
]  # fmt: skip


def _ref_text(text: str | None, declared: str) -> Any:
    """The module docstring's text rules, in Python (integers, booleans; the rest below)."""
    if text is None:
        return None
    if declared in schema.INTEGERS:
        if not re.fullmatch(INT_LITERAL.strip("^$"), text):
            return None
        v = int(text.strip(_WS).replace("_", ""))
        bits = int(declared.removeprefix("u").removeprefix("int"))
        signed = not declared.startswith("u")
        lo, hi = (-(2 ** (bits - 1)), 2 ** (bits - 1) - 1) if signed else (0, 2**bits - 1)
        return v if lo <= v <= hi else None
    if declared == "bool":
        return {"true": True, "false": False}.get(text.lower())
    if declared == "string":
        return text
    raise AssertionError(declared)


def _convert(values: Any, physical: str, declared: str) -> list[Any]:
    con = duckdb.connect()
    con.execute(f"CREATE TABLE t (i INTEGER, c {physical})")
    con.executemany("INSERT INTO t VALUES (?, ?)", list(enumerate(values)))
    sql = schema.duckdb_conversion("c", physical, declared)
    return [r[0] for r in con.execute(f"SELECT {sql} FROM t ORDER BY i").fetchall()]


@pytest.mark.parametrize(
    "declared", ["int8", "int16", "int32", "int64", "uint8", "uint64", "bool", "string"]
)
def test_text_converts_by_the_documented_rules(declared: str) -> None:
    got = _convert(TEXTS, "VARCHAR", declared)
    want = [_ref_text(t, declared) for t in TEXTS]
    assert got == want


def test_text_to_floats_dates_and_timestamps() -> None:
    got = dict(zip(TEXTS, _convert(TEXTS, "VARCHAR", "float64"), strict=True))
    assert got["1e3"] == 1000.0 and got[" 12 "] == 12.0 and got["1_0.2_5"] == 10.25
    assert got[".5"] == 0.5 and got["5."] == 5.0 and got["-0"] == 0.0
    for bad in ["nan", "NaN", "inf", "-Infinity", "1e400", "0x10", "x", "", "١٢"]:
        assert got[bad] is None, bad
    dates = dict(zip(TEXTS, _convert(TEXTS, "VARCHAR", "date"), strict=True))
    assert str(dates["2020-1-2"]) == "2020-01-02" and dates["2020-02-30"] is None
    assert dates["2020-01-02 03:04:05"] is None and dates["epoch"] is None
    ts = dict(zip(TEXTS, _convert(TEXTS, "VARCHAR", "timestamp"), strict=True))
    assert str(ts["2020-01-02T03:04:05.123456"]) == "2020-01-02 03:04:05.123456"
    assert str(ts["2020-01-02"]) == "2020-01-02 00:00:00"
    assert str(ts[" 2020-01-02 "]) == "2020-01-02 00:00:00"  # DuckDB's cast alone: NULL
    for bad in ["2020-01-02 24:00", "2020-01-02Z", "epoch", "x"]:
        assert ts[bad] is None, bad


def test_typed_columns_convert_exactly_or_to_null() -> None:
    big = [0, 1, -1, 127, 128, 2**31, 2**63 - 1, -(2**63), None]
    assert _convert(big, "BIGINT", "int8") == [0, 1, -1, 127, None, None, None, None, None]
    assert _convert(big, "BIGINT", "uint64") == [0, 1, None, 127, 128, 2**31, 2**63 - 1, None, None]
    assert _convert([2**64 - 1], "UBIGINT", "int64") == [None]
    assert _convert([BIG + 1], "BIGINT", "float64") == [float(BIG + 1)]  # the nearest double
    assert _convert([True, False], "BOOLEAN", "int64") == [1, 0]
    assert _convert([10**20], "DECIMAL(30,0)", "int64") == [None]
    assert _convert([12], "DECIMAL(30,0)", "int64") == [12]
    assert _convert([1.5], "FLOAT", "float64") == [1.5]
    assert [str(v) for v in _convert(["2020-01-02"], "DATE", "timestamp")] == [
        "2020-01-02 00:00:00"
    ]
    assert _convert(["3000-01-01"], "TIMESTAMP", "timestamp_ns") == [None]  # past 2262


@pytest.mark.parametrize(
    "physical", ["BIGINT", "INTEGER", "BOOLEAN", "DECIMAL(10,2)", "DATE", "TIMESTAMP", "DOUBLE"]
)
def test_a_string_is_read_from_text_only(physical: str) -> None:
    """A column a tool typed from its texts has lost them ("1 ", "+1" and "01" are all 1 to
    ``pd.read_csv``): declared ``string``, it is refused, whatever its type, by type alone."""
    assert schema.rule(schema.duckdb_family(physical), "string") is None
    with pytest.raises(ValueError, match="cannot hold string values exactly"):
        schema.check({"x": "string"}, {"x": physical}, schema.duckdb_family)


def test_the_fuzzers_read_csv_finding_is_refused(tmp_path: Path) -> None:
    """The neighbouring fuzzer's long run (2026-12-04): ``pd.read_csv`` types ``x`` as text
    while one unit's record holds a non-number there, and as int64 once that unit is
    removed — reading the int64 column as text turned another unit's key ``"1 "`` into
    ``"1"``.  Now the int64 frame is refused before the charge, and the text frame (or the
    frame read with ``dtype=str``) releases the key as written."""

    def frame(with_unit_0: bool, **kw: Any) -> pd.DataFrame:
        rows = ["uid,x", "1,1 "] + (["0,x y"] if with_unit_0 else [])
        path = tmp_path / f"r{int(with_unit_0)}.csv"
        path.write_text("\n".join(rows) + "\n")
        return pd.read_csv(path, **kw)

    assert str(frame(False)["x"].dtype) == "int64" and str(frame(True)["x"].dtype) != "int64"
    spec = _spec(["1 ", "1", "x y"], {"uid": "int64", "x": "string"})
    spec["domain"]["column"] = "x"
    with pytest.raises(ValueError, match="cannot hold string values exactly"):
        _counts(frame(False), spec)
    text = {"x": "string"}
    without, with_0 = (
        _counts(frame(False, dtype=text), spec),
        _counts(frame(True, dtype=text), spec),
    )
    assert without.tolist() == [1, 0, 0] and with_0.tolist() == [1, 0, 1]


def test_a_categorical_is_read_by_its_values_text() -> None:
    con = duckdb.connect()
    df = pd.DataFrame({"c": pd.Categorical(["10", "x", None, "7"])})
    con.register("records", df)
    (physical,) = [r[1] for r in con.execute("DESCRIBE records").fetchall()]
    assert physical.startswith("ENUM(")
    sql = schema.duckdb_conversion("c", physical, "int64")
    got = [r[0] for r in con.execute(f"SELECT {sql} FROM records").fetchall()]
    assert got == [10, None, None, 7]
    sql = schema.duckdb_conversion("c", physical, "string")
    assert [r[0] for r in con.execute(f"SELECT {sql} FROM records").fetchall()] == [
        "10",
        "x",
        None,
        "7",
    ]


def test_an_all_null_arrow_column_is_null_in_every_type(tmp_path: Path) -> None:
    con = duckdb.connect()
    t = pa.table({"uid": pa.array([1, 2]), "key": pa.nulls(2)})
    con.register("records", t)
    rows = con.execute("SELECT column_name, column_type FROM (DESCRIBE records)").fetchall()
    physical = dict(rows)
    assert schema.duckdb_family(physical["key"]) == "null"
    spec = _spec([1], {"uid": "int64", "key": "int64"})
    agg = bounded_aggregate(ReleaseSpec.from_dict(spec), salt=1, engine=DuckDBEngine(con))
    assert agg.counts.tolist() == [0] and agg.rows.invalid_domain == 2


# ---------------------------------------------------------------- both engines agree


def test_spark_converts_as_duckdb_does(spark: Any, tmp_path: Path) -> None:
    """Every conversion both engines run (Spark has no unsigned or nanosecond types),
    value by value on the same Parquet file."""
    from dpgauss.release.engines.spark import _conversion

    ints = [0, 1, -1, 127, 128, 2**31, 2**63 - 1, -(2**63), None]
    table = pa.table(
        {
            "i": pa.array(range(len(TEXTS))),
            "s": pa.array(TEXTS, pa.string()),
            "n": pa.array(ints + [None] * (len(TEXTS) - len(ints)), pa.int64()),
            "b": pa.array([True, False, None] * (len(TEXTS) // 3) + [None] * (len(TEXTS) % 3)),
        }
    )
    path = tmp_path / "t.parquet"
    pq.write_table(table, path)
    sdf = spark.read.parquet(str(path))
    stypes = {f.name: f.dataType for f in sdf.schema.fields}
    con = duckdb.connect()
    dtypes = dict(
        con.execute(
            "SELECT column_name, column_type FROM (DESCRIBE SELECT * FROM read_parquet($p))",
            {"p": str(path)},
        ).fetchall()
    )
    pairs = [("s", t) for t in ["int8", "int16", "int32", "int64", "float64", "string"]]
    pairs += [("s", t) for t in ["bool", "date", "timestamp"]]
    pairs += [("n", t) for t in ["int8", "int32", "int64", "float64"]]
    pairs += [("b", t) for t in ["int64", "bool"]]
    for col, declared in pairs:
        d_sql = schema.duckdb_conversion(f'"{col}"', dtypes[col], declared)
        duck = con.execute(
            f"SELECT {d_sql} FROM read_parquet($p) ORDER BY i", {"p": str(path)}
        ).fetchall()
        s_sql = _conversion(f"`{col}`", stypes[col], declared)
        sp = [tuple(r) for r in sdf.orderBy("i").selectExpr(s_sql).collect()]
        assert [r[0] for r in duck] == [r[0] for r in sp], (col, declared)


def test_spark_releases_a_typed_source_as_duckdb(spark: Any, tmp_path: Path) -> None:
    from dpgauss.release.engines.spark import SparkEngine

    rng = np.random.default_rng(3)
    ids = [str(u) if u % 7 else f" {u}" for u in rng.integers(0, 300, 1500)]
    ids[:3] = ["x", "", "1_2"]
    t = pa.table({"uid": pa.array(ids), "key": pa.array(rng.integers(0, 6, 1500).astype(str))})
    pq.write_table(t, tmp_path / "t.parquet")
    spec = _spec(list(range(5)), {"uid": "int64", "key": "int32"}, b=100)  # no bound bites:
    # the engines' hashes differ, so their samples do when a bound bites
    spec["source"] = {"path": str(tmp_path / "t.parquet"), "types": spec["source"]["types"]}
    s = ReleaseSpec.from_dict(spec)
    duck = bounded_aggregate(s, salt=5)
    sp = bounded_aggregate(s, salt=5, engine=SparkEngine(spark))
    assert np.array_equal(duck.counts, sp.counts)
    assert duck.rows.as_dict() == sp.rows.as_dict()
    assert duck.rows.null_unit == 2
