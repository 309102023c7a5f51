"""Nanosecond Parquet timestamps on the Spark engine, and the JVM kept off stderr.

pandas writes ``datetime64[ns]`` columns as Parquet ``TIMESTAMP(NANOS)`` (pyarrow's default
with format version 2.6), which Spark refuses (``PARQUET_TYPE_ILLEGAL``) unless
``spark.sql.legacy.parquet.nanosAsLong`` reads them as LONG nanoseconds.  The engine reads
them so, and interprets a nanosecond column the spec reads as DuckDB interprets its
``TIMESTAMP_NS`` / ``TIMESTAMPTZ_NS``: every test here runs both engines on the same file and
asserts the same aggregate and row counters (issue #25, finding 6).

Each unit's records share one key, so that the aggregate does not depend on which records a
bound keeps (the engines hash records differently: ``test_engine_spark``'s module docstring).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("duckdb")
pa = pytest.importorskip("pyarrow")
pq = pytest.importorskip("pyarrow.parquet")

from dpgauss.release import ReleaseSpec, bounded_aggregate  # noqa: E402
from dpgauss.release.engines.base import EngineError  # noqa: E402
from dpgauss.release.engines.duckdb import DuckDBEngine  # noqa: E402
from dpgauss.release.engines.spark import SparkEngine  # noqa: E402

from ..test_pipeline import make_ledger, make_spec  # noqa: E402

pytestmark = [
    pytest.mark.spark,
    pytest.mark.filterwarnings("ignore:PySpark does not yet fully support pandas:FutureWarning"),
]

DUCK = DuckDBEngine(threads=2)
T0 = np.datetime64("2013-01-13T01:00:00", "ns")
NS = np.timedelta64(1, "ns")
HOUR = np.timedelta64(3600 * 10**9, "ns")


@pytest.fixture(scope="module")
def engine(spark) -> SparkEngine:
    return SparkEngine(spark)


def write_ns(path: Path, utc: bool = False, **columns: object) -> Path:
    """A Parquet file whose ``datetime64[ns]`` columns are ``TIMESTAMP(NANOS)`` (as pandas
    writes them); ``utc``: ``TIMESTAMP(NANOS, isAdjustedToUTC)``, a tz-aware pandas column."""
    arrays = {}
    for name, v in columns.items():
        arr = pa.array(v, from_pandas=True)  # NaT: a null, not the int64 minimum
        if utc and pa.types.is_timestamp(arr.type):
            arr = arr.cast(pa.timestamp("ns", tz="UTC"))
        arrays[name] = arr
    pq.write_table(pa.table(arrays), path, coerce_timestamps=None, version="2.6")
    meta = str(pq.read_metadata(path).schema)
    assert "timeUnit=nanoseconds" in meta or not any(
        pa.types.is_timestamp(a.type) for a in arrays.values()
    )
    return path


def both(spec: ReleaseSpec, engine: SparkEngine, salt: int = 11):
    return (
        bounded_aggregate(spec, salt=salt, engine=DUCK),
        bounded_aggregate(spec, salt=salt, engine=engine),
    )


def assert_same(duck, spark) -> None:
    assert spark.rows.as_dict() == duck.rows.as_dict()
    np.testing.assert_array_equal(spark.counts, duck.counts)
    if duck.sums is None:
        assert spark.sums is None
    else:
        np.testing.assert_array_equal(spark.sums, duck.sums)


def edge_times() -> np.ndarray:
    """Times a few nanoseconds (and half a microsecond, where DuckDB's cast to microseconds
    rounds) around 01:00 and 02:00, the edges of the window and of the hour bins."""
    offsets = [-1000, -501, -500, -499, -100, -2, -1, 0, 1, 2, 499, 500, 501, 999]
    return np.array([e + o * NS for e in (T0, T0 + HOUR) for o in offsets])


# -------------------------------------------------------- a column the spec does not read


@pytest.mark.parametrize("utc", [False, True])
def test_a_nanosecond_column_the_spec_does_not_read_releases_as_on_duckdb(
    tmp_path: Path, engine, utc: bool
) -> None:
    # 300 units of 1-4 records, each unit on one key; b = 2 bites.  `when` is read only by
    # the record priority (record_columns unset: every column is hashed).
    rng = np.random.default_rng(6)
    n = rng.integers(1, 5, 300)
    uid = np.repeat(np.arange(300), n)
    key = uid % 10
    when = T0 + rng.integers(-(10**15), 10**15, uid.size) * NS
    when[::17] = np.datetime64("NaT")
    src = write_ns(tmp_path / "s.parquet", utc, uid=uid, key=key, when=when)
    spec = make_spec(src, bounds={"max_records_per_unit": 2})
    duck, agg = both(spec, engine)
    assert_same(duck, agg)
    assert agg.rows.dropped_by_bounds["max_records_per_unit"] > 0
    assert agg.counts.tolist() == np.bincount(np.arange(300) % 10, np.minimum(n, 2)).tolist()
    cols = engine.describe(spec)
    assert list(cols) == ["uid", "key", "when"]


def test_a_units_choice_depends_on_its_own_records_only(tmp_path: Path, engine) -> None:
    """With a nanosecond column hashed into the priority (read as a LONG), unit A's 40
    records keep the same 5 among 199 other units' records as alone and shuffled; records 1
    ns apart are different records."""
    rng = np.random.default_rng(3)
    a_keys = np.arange(40) % 20
    a_t = T0 + np.arange(40) * NS  # 1 ns apart: only the nanoseconds tell them apart
    b_uid = np.repeat(np.arange(1, 200), 6)
    b_t = T0 + rng.integers(0, 10**12, b_uid.size) * NS
    full = write_ns(
        tmp_path / "full.parquet",
        uid=np.concatenate([b_uid[:500], np.zeros(40, dtype=np.int64), b_uid[500:]]),
        key=np.concatenate([np.full(500, 25), a_keys, np.full(b_uid.size - 500, 25)]),
        t=np.concatenate([b_t[:500], a_t, b_t[500:]]),
    )
    order = rng.permutation(40)
    alone = write_ns(
        tmp_path / "alone.parquet",
        uid=np.zeros(40, dtype=np.int64),
        key=a_keys[order],
        t=a_t[order],
    )
    kept = set()
    for salt in (5, 2**63 + 5, 77):
        spec = {"domain": {"stop": 30}}
        with_others = bounded_aggregate(make_spec(full, **spec), salt=salt, engine=engine)
        without = bounded_aggregate(make_spec(alone, **spec), salt=salt, engine=engine)
        assert np.array_equal(with_others.counts[:20], without.counts[:20])
        assert with_others.counts[:20].sum() == 5
        kept.add(tuple(without.counts[:20]))
    assert len(kept) > 1  # the salt changes the choice


# ------------------------------------------------------------ a filter and a time domain

WINDOW = {"column": "t", "start": "2013-01-13 01:00", "stop": "2013-01-13 02:00"}
HOURS = {
    "kind": "range",
    "column": "t",
    "start": "2013-01-13 00:00",
    "stop": "2013-01-13 03:00",
    "step": "1h",
}


def one_record_a_unit(tmp_path: Path, utc: bool) -> tuple[Path, np.ndarray]:
    # NaT (a null), and DuckDB's ±infinity: the int64s ±(2**63 - 1) (pandas' Timestamp.max)
    extremes = np.array([2**63 - 1, -(2**63) + 1], dtype=np.int64).view("datetime64[ns]")
    t = np.concatenate([edge_times(), extremes, [np.datetime64("NaT")]])
    n = np.arange(t.size)
    src = write_ns(tmp_path / "e.parquet", utc, uid=n, k=n, t=t)  # a record: its own key
    return src, t


@pytest.mark.parametrize("window", ["start and stop", "start", "stop"])
@pytest.mark.parametrize("utc", [False, True])
def test_a_nanosecond_filter_column_agrees_with_duckdb(
    tmp_path: Path, engine, utc: bool, window: str
) -> None:
    """``[filter]`` on a ``TIMESTAMP(NANOS)`` column, values a few ns around its edges: the
    same records inside on both engines.  Without a time zone DuckDB compares nanoseconds
    (01:00 − 1 ns is outside); a UTC-adjusted column it casts to TIMESTAMP, rounding to the
    microsecond, and the Spark engine does the same.  ±infinity is inside a window open on
    its side."""
    src, t = one_record_a_unit(tmp_path, utc)
    ends = {k: v for k, v in WINDOW.items() if k == "column" or k in window.split()}
    spec = make_spec(
        src,
        domain={"kind": "values", "column": "k", "values": list(range(t.size))},
        filter=ends,
        bounds={"max_records_per_unit": 1},
    )
    duck, agg = both(spec, engine)
    assert_same(duck, agg)
    if not utc:
        ok = ~np.isnat(t)
        if "start" in ends:
            ok &= t.view(np.int64) >= T0.view(np.int64)
        if "stop" in ends:
            ok &= t.view(np.int64) < (T0 + HOUR).view(np.int64)
        assert agg.counts.tolist() == ok.astype(float).tolist()
        assert agg.rows.outside_filter == t.size - int(ok.sum())


@pytest.mark.parametrize("utc", [False, True])
def test_a_nanosecond_time_domain_agrees_with_duckdb(tmp_path: Path, engine, utc: bool) -> None:
    """A range of hours over a ``TIMESTAMP(NANOS)`` column: DuckDB floors it to the
    microsecond (01:00 − 1 ns is in the 00:00 bin), or rounds it for a UTC-adjusted column;
    the Spark engine gives the same keys."""
    src, t = one_record_a_unit(tmp_path, utc)
    spec = make_spec(src, domain=HOURS, bounds={"max_records_per_unit": 1})
    duck, agg = both(spec, engine)
    assert_same(duck, agg)
    if not utc:
        ok = ~np.isnat(t)
        ok[-3:] = False  # ±infinity and NaT
        hour = (t[ok] - (T0 - HOUR)) // HOUR
        assert agg.counts.tolist() == np.bincount(hour, minlength=3).tolist()
        assert agg.rows.invalid_domain == 3  # ±infinity (DuckDB: no epoch) and NaT


@pytest.mark.parametrize("role", ["value", "values domain", "number filter", "unit"])
def test_a_nanosecond_column_in_other_roles_agrees_with_duckdb(
    tmp_path: Path, engine, role: str
) -> None:
    """A nanosecond column is a timestamp, not a number: as a value, as a numeric values
    domain or as a numeric filter it is invalid on both engines (DuckDB: no cast of
    TIMESTAMP_NS to DOUBLE), as a unit id it groups records as DuckDB does."""
    t = edge_times()
    uid = np.arange(t.size) % 5
    src = write_ns(tmp_path / "r.parquet", uid=uid, k=np.zeros(t.size, int), t=t)
    tables: dict = {
        "value": {
            "domain": {"kind": "values", "column": "k", "values": [0]},
            "statistic": {"kind": "sum", "column": "t", "lower": 0, "upper": 10},
        },
        "values domain": {"domain": {"kind": "values", "column": "t", "values": [0, 1]}},
        "number filter": {
            "domain": {"kind": "values", "column": "k", "values": [0]},
            "filter": {"column": "t", "start": 0, "stop": 10**19},
        },
        "unit": {
            "unit": {"column": "t"},
            "domain": {"kind": "values", "column": "k", "values": [0]},
            "bounds": {"max_records_per_unit": 1},
        },
    }[role]
    duck, agg = both(make_spec(src, **tables), engine)
    assert_same(duck, agg)
    if role == "unit":
        assert agg.counts.tolist() == [float(t.size)] and agg.rows.units == t.size


def mixed_types(folder: Path) -> ReleaseSpec:
    """A spec filtering on ``t``, over two files: ``t`` nanoseconds in one, integers in the
    other."""
    write_ns(folder / "a.parquet", uid=[1, 2], k=[0, 0], t=[T0, T0 + NS])
    pq.write_table(
        pa.table({"uid": [3], "k": [0], "t": pa.array([5], pa.int64())}), folder / "b.parquet"
    )
    return make_spec(
        folder / "*.parquet",
        domain={"kind": "values", "column": "k", "values": [0]},
        filter=WINDOW,
    )


def test_a_column_nanoseconds_in_one_file_and_integers_in_another_is_refused(
    tmp_path: Path, engine
) -> None:
    """Spark would merge both to LONG (and DuckDB cannot read them together): refused before
    anything is read, in one line naming the column."""
    with pytest.raises(EngineError, match=r"column 't'.*nanosecond.*integer") as info:
        engine.describe(mixed_types(tmp_path))
    assert "\n" not in str(info.value)


@pytest.mark.parametrize("utc", [False, True])
def test_without_sparks_footer_internals_the_schema_job_gives_the_same_release(
    tmp_path: Path, engine, monkeypatch, utc: bool
) -> None:
    """The driver-side schema merge calls Spark internals (``SparkEngine._parquet``); a Spark
    without them takes Spark's own ``mergeSchema`` job and opens each footer through
    parquet-hadoop for the nanosecond look-up: the same types, aggregate and counters, and
    the same refusal of a column of two types."""
    from py4j.protocol import Py4JError

    src, t = one_record_a_unit(tmp_path, utc)
    spec = make_spec(
        src,
        domain={"kind": "values", "column": "k", "values": list(range(t.size))},
        filter=WINDOW,
        bounds={"max_records_per_unit": 1},
    )
    types, agg = engine.describe(spec), bounded_aggregate(spec, engine=engine, salt=1)

    def missing(self, paths):  # type: ignore[no-untyped-def]
        raise Py4JError("Method readParquetFootersInParallel does not exist")

    monkeypatch.setattr(SparkEngine, "_parquet", missing)
    assert engine.describe(spec) == types
    again = bounded_aggregate(spec, engine=engine, salt=1)
    np.testing.assert_array_equal(again.counts, agg.counts)
    assert again.rows == agg.rows
    other = tmp_path / "two"
    other.mkdir()
    with pytest.raises(EngineError, match=r"column 't'.*nanosecond.*integer"):
        engine.describe(mixed_types(other))


# ----------------------------------------------------------------------- the CLI, stderr

_PY_WARNING = re.compile(r"^\S.*:\d+: \w*Warning: ")


def _not_python_warnings(stderr: str) -> list[str]:
    """stderr's lines without Python's warnings (``file:line: XWarning: …`` and the quoted
    source line under it): an environment's warning (pandas 3 under pyspark 4) is not the
    JVM's output."""
    out, skip = [], False
    for line in stderr.splitlines():
        if _PY_WARNING.match(line):
            skip = True
            continue
        if skip and line.startswith("  "):
            continue
        skip = False
        out.append(line)
    return out


def test_a_spark_release_prints_nothing_from_the_jvm(tmp_path: Path) -> None:
    """``dpgauss release --engine spark`` in a fresh process (one Spark start): a release of
    a Parquet file with a nanosecond column prints nothing on stderr (no JVM warning, no
    log4j line), and a source Spark cannot read fails in one line, ``dpgauss: error: …``."""
    from ..test_pipeline import small_spec_toml

    rng = np.random.default_rng(4)
    uid = np.repeat(np.arange(200), 2)
    src = write_ns(
        tmp_path / "s.parquet",
        uid=uid,
        key=rng.integers(0, 10, uid.size),
        when=T0 + rng.integers(0, 10**12, uid.size) * NS,
    )
    ledger = make_ledger(tmp_path)
    good = small_spec_toml(tmp_path / "good.toml", src, "none")
    broken = tmp_path / "broken.parquet"
    broken.write_bytes(b"PAR1 this is not a parquet file PAR1")
    bad = small_spec_toml(tmp_path / "bad.toml", broken, "none")
    script = tmp_path / "run.py"
    script.write_text(
        "import sys\n"
        "from dpgauss.cli import main\n"
        "out, ledger, good, bad = sys.argv[1:]\n"
        "common = ['--engine', 'spark', '--ledger', ledger, '--json']\n"
        "first = main(['release', good, '--out', out, *common])\n"
        "print('first', first)\n"
        "second = main(['release', bad, '--out', out + '.2.csv', *common])\n"
        "print('second', second)\n"
    )
    env = dict(os.environ)
    env.pop("PYSPARK_SUBMIT_ARGS", None)
    proc = subprocess.run(
        [sys.executable, str(script), str(tmp_path / "r.csv"), str(ledger), str(good), str(bad)],
        capture_output=True,
        text=True,
        env=env,
        cwd=tmp_path,
        timeout=300,
    )
    lines = proc.stdout.splitlines()
    assert proc.returncode == 0, proc.stderr
    assert "first 0" in lines and "second 2" in lines, proc.stdout + proc.stderr
    json.loads(lines[0])  # the first release's summary
    assert "does not yet fully support pandas" not in proc.stderr  # filtered (issue #28)
    rest = _not_python_warnings(proc.stderr)
    assert len(rest) == 1 and rest[0].startswith("dpgauss: error: "), proc.stderr
    for word in ("WARN", "ERROR", "at org.apache", "Exception", "log4j", "SLF4J"):
        assert word not in "\n".join(rest), proc.stderr


def test_spark_failing_to_start_is_one_line_with_the_launchers_words(tmp_path: Path) -> None:
    """No Java (``JAVA_HOME`` pointing nowhere): one line, quoting what ``spark-class`` said
    on the JVM's stderr (drained, not printed)."""
    from ..test_pipeline import small_spec_toml

    src = write_ns(tmp_path / "s.parquet", uid=[1, 2], key=[0, 1], when=[T0, T0 + NS])
    spec = small_spec_toml(tmp_path / "spec.toml", src, "none")
    env = {k: v for k, v in os.environ.items() if k != "PYSPARK_SUBMIT_ARGS"}
    env["JAVA_HOME"] = str(tmp_path / "no-java")
    main = "import sys; from dpgauss.cli import main; sys.exit(main())"
    argv = ["release", str(spec), "--engine", "spark", "--out", str(tmp_path / "r.csv")]
    proc = subprocess.run(
        [sys.executable, "-c", main, *argv, "--ledger", str(make_ledger(tmp_path))],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    assert proc.returncode == 2
    rest = _not_python_warnings(proc.stderr)
    assert len(rest) == 1, proc.stderr
    assert rest[0].startswith("dpgauss: error: cannot start Spark (is Java 17+ installed")
    assert "no-java" in rest[0]  # the launcher's own words
