"""Whole releases on DuckDB, on Spark in local mode and on a Spark standalone cluster, by size.

Run from the repository root (needs the ``data`` and ``spark`` extras and Java 17+)::

    python benchmarks/bench_spark_cluster.py                          # 2 M and 20 M rows
    python benchmarks/bench_spark_cluster.py --rows 2e6,20e6,100e6 --workers 2 --memory 4g
    python benchmarks/bench_spark_cluster.py --rows 2e6 --engines duckdb,cluster

The source: Parquet files of 2 M rows each (``uid`` int64, ``key`` 0–3,999, ``fare``
float64; about 10 records per unit), generated once into ``--data`` and reused, the first
``N / 2 M`` files making the ``N``-row source.  The release: a count per key with at most
``b = 5`` records per unit, seeded floating-point noise, ``auto`` denoising on the range —
``dpgauss release``'s whole path (plan, describe, aggregate, noise, denoise, write), each in
a fresh interpreter.

Measured per engine and size: wall time and **CPU time of every process the release used**:
the driver interpreter and its JVM (local mode) or, on the cluster, the driver plus the
executors' JVMs and Python workers started on the cluster's workers.  CPU is sampled from
``/proc`` every 0.2 s for every process of the run's sessions (the driver's session, and the
cluster's daemons' sessions, in which its executors start); the worker and master daemons'
own idle CPU before the run is subtracted.  Ratios are against DuckDB in the same run.
Results go to ``--out`` (default ``docs/results/bench_spark_cluster.json``).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import textwrap
import threading
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "release" / "engines"))
from spark_cluster import StandaloneCluster

CHUNK = 2_000_000
TICK = os.sysconf("SC_CLK_TCK")

DRIVER = textwrap.dedent(
    """
    import json, sys, time
    from dpgauss.release import ReleaseSpec, run_release
    spec = ReleaseSpec.from_dict(json.loads(sys.argv[1]))
    kind, master = sys.argv[2], sys.argv[3]
    if kind == "duckdb":
        from dpgauss.release.engines.duckdb import DuckDBEngine
        engine = DuckDBEngine()
    else:
        from dpgauss.release.engines.spark import SparkEngine
        config = {"spark.ui.enabled": "false", "spark.pyspark.python": sys.executable,
                  "spark.driver.memory": sys.argv[5]}
        if kind == "cluster":
            config.update({"spark.executor.memory": sys.argv[5], "spark.executor.cores": "1"})
        engine = SparkEngine(master=master, app_name="dpgauss bench", config=config)
    t = time.perf_counter()
    rel = run_release(spec, out=sys.argv[4], engine=engine)
    print(json.dumps({"release_s": time.perf_counter() - t}))
    """
)


def make_data(directory: Path, rows: int) -> list[Path]:
    """The first ``ceil(rows / CHUNK)`` files of the source (generated when missing)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    directory.mkdir(parents=True, exist_ok=True)
    files = []
    for i in range(-(-rows // CHUNK)):
        path = directory / f"part-{i:03}.parquet"
        if not path.exists():
            rng = np.random.default_rng(i)
            uid = rng.integers(0, CHUNK // 10, CHUNK) + i * (CHUNK // 10)
            key = rng.integers(0, 4000, CHUNK).astype(np.int32)
            fare = rng.gamma(2.0, 8.0, CHUNK)
            pq.write_table(pa.table({"uid": uid, "key": key, "fare": fare}), path)
        files.append(path)
    return files


def _stat(pid: int) -> tuple[int, float] | None:
    """(session id, CPU seconds) of a process, or None if it is gone."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = text[text.rindex(")") + 2 :].split()
    return int(fields[3]), (int(fields[11]) + int(fields[12])) / TICK


class CpuMeter:
    """The CPU seconds of every process of some sessions, sampled every 0.2 s."""

    def __init__(self, sessions: set[int]) -> None:
        self.sessions = sessions
        self.seen: dict[int, float] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def sample(self) -> None:
        for entry in os.listdir("/proc"):
            if entry.isdigit():
                got = _stat(int(entry))
                if got is not None and got[0] in self.sessions:
                    self.seen[int(entry)] = max(self.seen.get(int(entry), 0.0), got[1])

    def _run(self) -> None:
        while not self._stop.is_set():
            self.sample()
            time.sleep(0.2)

    def __enter__(self) -> CpuMeter:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()
        self.sample()

    def total(self) -> float:
        return sum(self.seen.values())


def run(
    kind: str, files: list[Path], out: Path, master: str, memory: str, sessions: set[int]
) -> dict:
    spec = {
        "source": {"path": [str(f) for f in files]},
        "unit": {"column": "uid"},
        "domain": {"kind": "range", "column": "key", "start": 0, "stop": 4000},
        "statistic": {"kind": "count"},
        "bounds": {"max_records_per_unit": 5},
        "privacy": {"epsilon": 1.0, "delta": 1e-6, "dataset": "bench", "secure": False, "seed": 1},
        "denoise": {"method": "auto"},
        "output": {"plot": False, "overwrite": True},
    }
    base = CpuMeter(sessions)
    base.sample()
    before = dict(base.seen)
    t = time.perf_counter()
    proc = subprocess.Popen(
        [sys.executable, "-c", DRIVER, json.dumps(spec), kind, master, str(out), memory],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    with CpuMeter(sessions | {proc.pid}) as meter:
        stdout, stderr = proc.communicate()
    wall = time.perf_counter() - t
    if proc.returncode != 0:
        raise RuntimeError(f"{kind}: the release failed: {stderr[-2000:]}")
    cpu = meter.total() - sum(v for p, v in before.items() if p in meter.seen)
    return {"engine": kind, "wall_s": wall, "cpu_s": cpu, **json.loads(stdout.splitlines()[-1])}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rows", default="2e6,20e6", help="comma-separated source sizes")
    ap.add_argument("--engines", default="duckdb,local,cluster")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--memory", default="2g", help="the driver's and each executor's memory")
    ap.add_argument("--data", default=str(Path(tempfile.gettempdir()) / "dpgauss-bench-spark"))
    ap.add_argument("--out", default="docs/results/bench_spark_cluster.json")
    args = ap.parse_args()
    sizes = [int(float(r)) for r in args.rows.split(",")]
    engines = args.engines.split(",")
    data = Path(args.data)
    results = []
    work = Path(tempfile.mkdtemp(prefix="dpgauss-cluster-"))
    cluster = None
    if "cluster" in engines:
        cluster = StandaloneCluster(work / "cluster", workers=args.workers, memory=args.memory)
        cluster.__enter__()
    try:
        sessions: set[int] = set()
        if cluster is not None:
            sessions = cluster.sessions()
        print("| rows | engine | wall s | CPU s | CPU / DuckDB's |")
        print("|---|---|---|---|---|")
        for n in sizes:
            files = make_data(data, n)
            base = None
            for kind in engines:
                master = {"duckdb": "", "local": "local[2]"}.get(
                    kind, cluster.url if cluster else ""
                )
                res = run(kind, files, work / f"{kind}-{n}.csv", master, args.memory, sessions)
                res["rows"] = len(files) * CHUNK
                base = res["cpu_s"] if kind == "duckdb" else base
                ratio = f"{res['cpu_s'] / base:.1f}×" if base else "-"
                cells = [f"{res['rows']:,}", kind, f"{res['wall_s']:.1f}", f"{res['cpu_s']:.1f}"]
                print("| " + " | ".join([*cells, ratio]) + " |", flush=True)
                results.append(res)
    finally:
        if cluster is not None:
            cluster.__exit__(None, None, None)
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()
