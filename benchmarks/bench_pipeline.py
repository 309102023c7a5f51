"""Throughput of the release pipeline's bounding + aggregation: DuckDB engine vs pandas.

Run from the repository root (needs the ``data`` extra; pandas for the baseline)::

    python benchmarks/bench_pipeline.py                      # 20M rows, 2M units, 4,000 keys
    python benchmarks/bench_pipeline.py --rows 2000000 --units 200000 --repeats 2
    python benchmarks/bench_pipeline.py --alternatives       # also the SQL designs not chosen
    python benchmarks/bench_pipeline.py --string-units       # unit ids as hex strings

The task: ``count`` per key with per-unit bounding (every unit keeps at most ``b = 5``
records, chosen uniformly at random) on a generated Parquet table (``unit`` int64,
``zone`` int32, ``fare`` float64, ``ts`` timestamp; units and zones uniform at random, so a
unit has about 10 records and half of the records are dropped).  The file is generated once
and cached (``--data``).  Every contestant goes from the Parquet file to the per-key counts,
end to end, and is timed best-of-``--repeats``, contestants interleaved in each round:

* **dpgauss DuckDB engine**: ``DuckDBEngine.aggregate`` exactly as ``dpgauss release`` runs
  it (row classification and counters included; priorities hash every column of a record).
  Integer unit ids take the one-key fast path; the **general query** (string unit ids, sums
  and means, per-key bounds) is timed too (``fast_path=False``, same result).
* **pandas**: ``read_parquet(unit, zone)``, a random permutation, ``groupby(unit).head(b)``,
  ``value_counts`` — the fastest idiomatic pandas way to keep b uniform records per unit.
* references: a plain DuckDB ``GROUP BY zone`` (no bounding: the ceiling); with
  ``--alternatives`` the designs measured and not chosen (the obvious
  ``row_number() OVER (PARTITION BY unit ORDER BY hash)``, per-unit top-b aggregates
  ``min(x, b)`` and ``arg_min(x, p, b)``).
* **PipelineDP** (``LocalBackend``, ``max_contributions = b``, public partitions), if it
  imports, on the first ``--pipelinedp-rows`` rows (it is pure Python).  It is not a
  dependency: install it in a virtualenv to include it.

The engine's result is checked against pandas (same number of kept records per run:
``Σ min(n_u, b)``).  The target is >= 3x pandas.  ``--string-units`` makes the unit ids
32-hex-digit strings (like the taxi data's licences): everything is slower, DuckDB's sort of
strings most (the fast path needs integer ids).  Absolute numbers depend on the machine and
its load; compare the ratios of one run.  ``--threads`` sets DuckDB's threads (default 2).
"""

from __future__ import annotations

import argparse
import os
import platform
import secrets
import sys
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

TARGET = 3.0


def generate(path: Path, rows: int, units: int, keys: int, string_units: bool) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    rng = np.random.default_rng(20_240_101)
    names = None
    if string_units:  # 32 hex digits, like the hashed licences of the taxi data
        raw = rng.integers(0, 2**63, (units, 2), dtype=np.int64).view(np.uint64)
        names = np.array([f"{a:016X}{b:016X}" for a, b in raw])
    schema = pa.schema(
        [
            ("unit", pa.string() if string_units else pa.int64()),
            ("zone", pa.int32()),
            ("fare", pa.float64()),
            ("ts", pa.timestamp("s")),
        ]
    )
    tmp = path.with_suffix(".tmp")
    chunk = 1_000_000
    t0 = np.datetime64("2013-01-01T00:00:00")
    with pq.ParquetWriter(tmp, schema) as writer:
        for start in range(0, rows, chunk):
            m = min(chunk, rows - start)
            table = pa.table(
                {
                    "unit": names[rng.integers(0, units, m)]
                    if names is not None
                    else rng.integers(0, units, m),
                    "zone": rng.integers(0, keys, m).astype(np.int32),
                    "fare": np.round(rng.gamma(2.0, 6.0, m), 2),
                    "ts": t0 + rng.integers(0, 31 * 86_400, m).astype("timedelta64[s]"),
                },
                schema=schema,
            )
            writer.write_table(table, row_group_size=chunk)
    os.replace(tmp, path)


def engine_runner(
    path: Path, keys: int, b: int, threads: int, fast_path: bool = True
) -> Callable[[], float]:
    from dpgauss.release.engine_duckdb import DuckDBEngine
    from dpgauss.release.pipeline import bounded_aggregate
    from dpgauss.release.spec import ReleaseSpec

    spec = ReleaseSpec.from_dict(
        {
            "source": {"path": str(path)},
            "unit": {"column": "unit"},
            "domain": {"kind": "range", "column": "zone", "start": 0, "stop": keys},
            "statistic": {"kind": "count"},
            "bounds": {"max_records_per_unit": b},
            "privacy": {"epsilon": 1.0, "delta": 1e-6, "dataset": "bench"},
        }
    )
    engine = DuckDBEngine(threads=threads, fast_path=fast_path)

    def run() -> float:
        return float(bounded_aggregate(spec, engine=engine).counts.sum())

    return run


def pandas_runner(path: Path, b: int) -> Callable[[], float]:
    import pandas as pd

    rng = np.random.default_rng()

    def run() -> float:
        df = pd.read_parquet(path, columns=["unit", "zone"])
        df = df.take(rng.permutation(len(df)))
        counts = df.groupby("unit", sort=False).head(b)["zone"].value_counts()
        return float(counts.sum())

    return run


def duckdb_runner(sql: str, threads: int) -> Callable[[], float]:
    import duckdb

    def run() -> float:
        con = duckdb.connect()
        con.execute(f"SET threads = {threads}")
        rows = con.execute(sql, {"salt": secrets.randbits(64)} if "$salt" in sql else None)
        total = float(sum(r[1] for r in rows.fetchall()))
        con.close()
        return total

    return run


def alternatives(path: Path, b: int) -> dict[str, str]:
    src = f"read_parquet('{path}')"
    p = "hash(hash($salt::UBIGINT, unit, zone, fare, ts))"
    return {
        "DuckDB row_number() OVER (PARTITION BY unit)": (
            f"SELECT zone, count(*) FROM (SELECT zone, row_number() OVER "
            f"(PARTITION BY unit ORDER BY {p}) AS rn FROM {src}) WHERE rn <= {b} GROUP BY zone"
        ),
        "DuckDB per-unit top-b min(p|key, b)": (
            f"SELECT k & 4095, count(*) FROM (SELECT unnest(min((({p}) >> 12 << 12) "
            f"| zone::UBIGINT, {b})) AS k FROM {src} GROUP BY unit) GROUP BY 1"
        ),
        "DuckDB per-unit top-b arg_min(key, p, b)": (
            f"SELECT k, count(*) FROM (SELECT unnest(arg_min(zone, {p}, {b})) AS k "
            f"FROM {src} GROUP BY unit) GROUP BY k"
        ),
    }


def pipelinedp_runner(path: Path, rows: int, keys: int, b: int) -> Callable[[], float] | None:
    try:
        import pipeline_dp
    except ImportError:
        return None
    import pyarrow.parquet as pq

    table = pq.read_table(path, columns=["unit", "zone"]).slice(0, rows)
    data = list(
        zip(table.column("unit").to_pylist(), table.column("zone").to_pylist(), strict=True)
    )

    def run() -> float:
        backend = pipeline_dp.LocalBackend()
        accountant = pipeline_dp.NaiveBudgetAccountant(total_epsilon=1.0, total_delta=1e-6)
        engine = pipeline_dp.DPEngine(accountant, backend)
        params = pipeline_dp.AggregateParams(
            noise_kind=pipeline_dp.NoiseKind.GAUSSIAN,
            metrics=[pipeline_dp.Metrics.COUNT],
            max_contributions=b,
        )
        extractors = pipeline_dp.DataExtractors(
            privacy_id_extractor=lambda r: r[0],
            partition_extractor=lambda r: r[1],
            value_extractor=lambda r: 0,
        )
        result = engine.aggregate(data, params, extractors, public_partitions=list(range(keys)))
        accountant.compute_budgets()
        return float(sum(m.count for _, m in result))

    return run


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=20_000_000)
    parser.add_argument("--units", type=int, default=2_000_000)
    parser.add_argument("--keys", type=int, default=4_000)
    parser.add_argument("--b", type=int, default=5, help="max records per unit")
    parser.add_argument("--repeats", type=int, default=3, help="rounds (best of)")
    parser.add_argument("--threads", type=int, default=2, help="DuckDB threads")
    parser.add_argument("--data", default="/tmp/dpgauss_bench", help="cache directory")
    parser.add_argument("--alternatives", action="store_true", help="also the SQL not chosen")
    parser.add_argument("--pipelinedp-rows", type=int, default=1_000_000)
    parser.add_argument(
        "--string-units", action="store_true", help="unit ids as 32-hex-digit strings"
    )
    args = parser.parse_args()

    import duckdb
    import pandas as pd

    data = Path(args.data)
    data.mkdir(parents=True, exist_ok=True)
    kind = "str" if args.string_units else "int"
    path = data / f"rows{args.rows}_units{args.units}{kind}_keys{args.keys}.parquet"
    if not path.exists():
        print(f"generating {path} ...", flush=True)
        t = time.perf_counter()
        generate(path, args.rows, args.units, args.keys, args.string_units)
        print(f"  {time.perf_counter() - t:.1f} s", flush=True)
    n = args.rows
    print(
        f"python {platform.python_version()}, duckdb {duckdb.__version__}, pandas "
        f"{pd.__version__}, {platform.machine()}, {os.cpu_count()} cpus, DuckDB threads "
        f"{args.threads}, load average {os.getloadavg()[0]:.2f}"
    )
    print(
        f"{n:,} rows, {args.units:,} {kind} units, {args.keys:,} keys, b = {args.b}; best of "
        f"{args.repeats}, contestants interleaved\n"
    )

    runners: dict[str, Callable[[], float]] = {
        "dpgauss DuckDB engine": engine_runner(path, args.keys, args.b, args.threads),
        "dpgauss DuckDB engine, general query": engine_runner(
            path, args.keys, args.b, args.threads, fast_path=False
        ),
        "pandas shuffle + groupby.head": pandas_runner(path, args.b),
        "DuckDB GROUP BY zone, no bounding (ceiling)": duckdb_runner(
            f"SELECT zone, count(*) FROM read_parquet('{path}') GROUP BY zone", args.threads
        ),
    }
    if args.alternatives:
        for name, sql in alternatives(path, args.b).items():
            runners[name] = duckdb_runner(sql, args.threads)
    best = {name: float("inf") for name in runners}
    totals: dict[str, float] = {}
    for _ in range(args.repeats):
        for name, run in runners.items():
            t = time.perf_counter()
            totals[name] = run()
            best[name] = min(best[name], time.perf_counter() - t)
    engine_total = totals["dpgauss DuckDB engine"]
    if engine_total != totals["pandas shuffle + groupby.head"]:
        print(
            f"MISMATCH: engine kept {engine_total:,.0f}, pandas "
            f"{totals['pandas shuffle + groupby.head']:,.0f}",
            file=sys.stderr,
        )
        sys.exit(1)

    pdp = pipelinedp_runner(path, min(args.pipelinedp_rows, n), args.keys, args.b)
    rows_of = {name: n for name in runners}
    if pdp is not None:
        name = f"PipelineDP LocalBackend ({min(args.pipelinedp_rows, n):,} rows)"
        t = time.perf_counter()
        pdp()
        best[name] = time.perf_counter() - t
        rows_of[name] = min(args.pipelinedp_rows, n)

    base = n / best["pandas shuffle + groupby.head"]
    width = max(len(k) for k in best)
    print(f"{'method':<{width}} {'seconds':>8} {'M rows/s':>9} {'x pandas':>9}")
    print("-" * (width + 29))
    for name, t in best.items():
        rate = rows_of[name] / t
        print(f"{name:<{width}} {t:>8.2f} {rate / 1e6:>9.2f} {rate / base:>8.2f}x")
    if pdp is None:
        print(
            "PipelineDP: not installed, skipped (pip install pipeline-dp in a virtualenv "
            "to include it)"
        )
    ratio = (n / best["dpgauss DuckDB engine"]) / base
    print(f"\nkept {engine_total:,.0f} of {n:,} records (both engines)")
    print(f"target >= {TARGET:g}x pandas: {'yes' if ratio >= TARGET else 'NO'} ({ratio:.2f}x)")


if __name__ == "__main__":
    main()
