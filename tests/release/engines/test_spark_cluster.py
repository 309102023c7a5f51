"""The Spark engine on a real standalone cluster (a master and two worker JVMs on 127.0.0.1,
started from pyspark's own ``sbin/spark-daemon.sh``: :mod:`.spark_cluster`).

A 2 M-row source is released on the cluster and on DuckDB: the bounded aggregates, the row
counters and the released tables (seeded noise) are identical, and the cluster's master saw
the application run on both workers.  The data is drawn so that the aggregate does not depend
on which records a bound keeps (every record of a unit has one key and one value), because
the two engines hash records differently (``test_engine_spark.py``).

The driver runs in a child interpreter: a test process that already holds a local-mode
session (the other Spark tests) cannot start a second context.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("duckdb")
pa = pytest.importorskip("pyarrow")
pq = pytest.importorskip("pyarrow.parquet")
pytest.importorskip("pyspark")

from dpgauss.release import ReleaseSpec, bounded_aggregate, run_release  # noqa: E402
from dpgauss.release.engines.duckdb import DuckDBEngine  # noqa: E402

from ...helpers import read_csv  # noqa: E402
from .spark_cluster import StandaloneCluster  # noqa: E402

pytestmark = [pytest.mark.spark, pytest.mark.slow]

ROWS = 2_000_000

#: The child interpreter: the Spark engine on the cluster at argv[2]; prints the aggregate
#: and what the driver saw of its executors as one JSON line.
DRIVER = textwrap.dedent(
    """
    import json, sys
    from dpgauss.release import ReleaseSpec, bounded_aggregate, run_release
    from dpgauss.release.engines.spark import SparkEngine

    spec = ReleaseSpec.from_dict(json.loads(sys.argv[1]))
    engine = SparkEngine(
        master=sys.argv[2],
        app_name="dpgauss cluster test",
        config={
            "spark.executor.cores": "1",
            "spark.executor.memory": "1g",
            "spark.cores.max": "2",
            "spark.sql.shuffle.partitions": "8",
            "spark.pyspark.python": sys.executable,
            "spark.ui.enabled": "false",
        },
    )
    agg = bounded_aggregate(spec, salt=1, engine=engine)
    run_release(spec, out=sys.argv[3], engine=engine)
    sc = engine.spark.sparkContext
    infos = sc._jsc.sc().statusTracker().getExecutorInfos()  # the JVM's: driver included
    hosts = [f"{e.host()}:{e.port()}" for e in infos]
    print(json.dumps({
        "master": sc.master,
        "counts": agg.counts.tolist(),
        "sums": agg.sums.tolist(),
        "rows": [agg.rows.read, agg.rows.kept, agg.rows.in_domain, agg.rows.units],
        "executors": hosts,
    }))
    engine.spark.stop()
    """
)


def _source(path: Path) -> Path:
    """2 M rows of 350,000 units with 1–11 records each; a unit's records share one key of
    0–99 and one value, so any ``min(n, 5)`` of them give the same aggregate."""
    rng = np.random.default_rng(2026)
    units = 350_000
    n = rng.integers(1, 12, units)
    uid = np.repeat(np.arange(units, dtype=np.int64), n)[:ROWS]
    key = np.repeat(rng.integers(0, 100, units), n)[:ROWS]
    fare = np.repeat(np.round(rng.uniform(0, 60, units), 2), n)[:ROWS]
    assert uid.size == ROWS
    # several files, as a cluster's source is: each worker reads its share
    for i, part in enumerate(np.array_split(np.arange(ROWS), 4)):
        pq.write_table(
            pa.table({"uid": uid[part], "key": key[part], "fare": fare[part]}),
            path / f"part-{i}.parquet",
        )
    return path / "*.parquet"


@pytest.mark.skipif(
    shutil.which("java") is None and not os.environ.get("JAVA_HOME"), reason="no Java"
)
def test_a_two_million_row_release_on_a_standalone_cluster_matches_duckdb(tmp_path: Path) -> None:
    (tmp_path / "src").mkdir()
    src = _source(tmp_path / "src")
    data = {
        "source": {"path": str(src)},
        "unit": {"column": "uid"},
        "domain": {"kind": "range", "column": "key", "start": 0, "stop": 100},
        "statistic": {"kind": "sum", "column": "fare", "lower": 0, "upper": 60},
        "bounds": {"max_records_per_unit": 5},
        "privacy": {"epsilon": 1.0, "delta": 1e-6, "dataset": "d", "secure": False, "seed": 7},
        "denoise": {"method": "auto"},
        "output": {"plot": False},
    }
    spec = ReleaseSpec.from_dict(data)
    duck = DuckDBEngine(threads=2)
    want = bounded_aggregate(spec, salt=1, engine=duck)
    run_release(spec, out=tmp_path / "duck.csv", engine=duck)

    with StandaloneCluster(tmp_path / "cluster", workers=2, cores=1, memory="1g") as cluster:
        env = dict(os.environ, PYSPARK_PYTHON=sys.executable)
        done = subprocess.run(
            [
                sys.executable,
                "-c",
                DRIVER,
                json.dumps(data),
                cluster.url,
                str(tmp_path / "spark.csv"),
            ],
            capture_output=True,
            text=True,
            env=env,
            timeout=900,
        )
        status = cluster.status()
    assert done.returncode == 0, done.stderr[-3000:]
    got = json.loads(done.stdout.strip().splitlines()[-1])

    # it ran on the cluster, on both workers (the driver is one more "executor" entry)
    assert got["master"] == cluster.url
    assert len(got["executors"]) == 3, got["executors"]
    apps = status["activeapps"] + status["completedapps"]
    assert [a["name"] for a in apps] == ["dpgauss cluster test"]
    assert status["aliveworkers"] == 2

    # the same bounded aggregate, row counters and released table as DuckDB's
    np.testing.assert_array_equal(got["counts"], want.counts)
    np.testing.assert_allclose(got["sums"], want.sums, rtol=1e-12)
    assert got["rows"] == [want.rows.read, want.rows.kept, want.rows.in_domain, want.rows.units]
    assert want.rows.read == ROWS and want.rows.kept < ROWS  # the bound bit
    duck_rows, spark_rows = read_csv(tmp_path / "duck.csv"), read_csv(tmp_path / "spark.csv")
    assert len(spark_rows) == 100
    for a, b in zip(duck_rows, spark_rows, strict=True):
        assert a["key"] == b["key"]
        assert float(a["released"]) == pytest.approx(float(b["released"]), rel=1e-9, abs=1e-6)
        assert float(a["denoised"]) == pytest.approx(float(b["denoised"]), rel=1e-6, abs=1e-6)
