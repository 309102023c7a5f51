"""The cost of reading CSV as RFC 4180 records against reading it as lines (issue #25, finding 5).

Run from the repository root (needs the ``data`` extra)::

    python benchmarks/bench_csv.py                     # 2M rows, in the same run both modes
    python benchmarks/bench_csv.py --rows 20000000     # the size of the requirement
    python benchmarks/bench_csv.py --breaks 100        # also: 1 record in 100 has a line break

``[source] csv = "rfc4180"`` finds its record ends from quote parity, chunk by chunk
(``csv_format._lf_and_ends``: the LFs and quotes of a chunk in order, a running count of
the quotes read at each LF, the parity carried to the next chunk); ``"lines"`` takes every LF.  The
requirement: reading RFC 4180 costs at most 1.5x the line reader.

The file is generated once by DuckDB's ``COPY`` (an RFC-4180 writer) and cached
(``--data``, default ``/tmp/dpgauss_bench``): ``uid`` (a string id, ``--units`` of them),
``key`` (``--keys`` values), ``fare`` (a decimal number) and ``note`` — free text, quoted
by the writer when it holds a comma or a quote (one record in 10 holds ``, "quoted"
note``, one in 50 a doubled quote only), and with ``--breaks K`` one record in ``K`` holds
a line break.  With ``--breaks 0`` (the default) no field holds a line break, so both
modes read the same records and the comparison is of the record finding alone; with line
breaks, ``lines`` reads each such record as two lines (both malformed), so its work
differs too.

After an untimed warm-up (imports, DuckDB's first connection), two contestants per mode,
interleaved in each of ``--repeats`` rounds, the round of least CPU time kept:

* **reader**: ``csv_format.line_batches`` of the file, every batch consumed (the numpy part:
  record ends, UTF-8, kinds, the Arrow buffers);
* **release**: ``DuckDBEngine.aggregate`` of a count per key with ``max_records_per_unit =
  1`` over the file (the reader, the SQL parsing of the fields, the bounding), as
  ``dpgauss release`` runs it.

Two clocks: wall time and the CPU time of the process (user + system, every thread); on a
shared machine the CPU time is the steadier comparison.  The ratios ``rfc4180 / lines`` of
one run are what to compare; absolute numbers depend on the machine.
"""

from __future__ import annotations

import argparse
import os
import resource
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "src"))

from dpgauss.release import ReleaseSpec, csv_format  # noqa: E402
from dpgauss.release.domains.key_domain import resolve_domain  # noqa: E402
from dpgauss.release.engine import AggregationPlan  # noqa: E402
from dpgauss.release.engine_duckdb import DuckDBEngine  # noqa: E402
from dpgauss.release.plan import value_offset  # noqa: E402


def cpu_seconds() -> float:
    """User + system CPU time of this process (all threads)."""
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def generate(path: Path, rows: int, units: int, keys: int, breaks: int) -> None:
    """The benchmark file, written by DuckDB's COPY (module docstring)."""
    import duckdb

    note = "CASE WHEN i % 10 = 3 THEN 'a, \"quoted\" note ' || i"
    note += ' WHEN i % 50 = 7 THEN \'say ""hi""\''
    if breaks:
        note += f" WHEN i % {breaks} = 1 THEN 'first line' || chr(10) || 'second line'"
    note += " ELSE 'note ' || i END"
    sql = f"""
        COPY (
          SELECT 'u' || (hash(i) % {units}) AS uid, i % {keys} AS key,
                 round((hash(i * 7) % 5000) / 100.0, 2) AS fare, {note} AS note
          FROM range({rows}) t(i)
        ) TO '{path}' (HEADER)"""
    con = duckdb.connect()
    con.execute("SET threads = 2")
    con.execute(sql)
    con.close()


def spec_of(path: Path, mode: str, keys: int) -> ReleaseSpec:
    return ReleaseSpec.from_dict(
        {
            "source": {"path": str(path), "csv": mode},
            "unit": {"column": "uid"},
            "domain": {"kind": "range", "column": "key", "start": 0, "stop": keys},
            "statistic": {"kind": "count"},
            "bounds": {"max_records_per_unit": 1},
            "privacy": {"epsilon": 1.0, "delta": 1e-6, "dataset": "bench"},
            "denoise": {"method": "none"},
        }
    )


def read_all(path: Path, mode: str) -> int:
    """The records read by the reader (every batch consumed)."""
    return sum(b.num_rows for b in csv_format.line_batches([str(path)], ",", 4, mode=mode))


def release(path: Path, mode: str, keys: int, threads: int) -> Any:
    spec = spec_of(path, mode, keys)
    plan = AggregationPlan(spec, resolve_domain(spec), 12345, value_offset(spec))
    return DuckDBEngine(threads=threads).aggregate(plan)


def timed(fn: Any) -> tuple[float, float, Any]:
    c0, t0 = cpu_seconds(), time.perf_counter()
    out = fn()
    return time.perf_counter() - t0, cpu_seconds() - c0, out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rows", type=int, default=2_000_000, help="default 2M; 20M: --rows 20000000")
    ap.add_argument("--units", type=int, default=None, help="default rows / 10")
    ap.add_argument("--keys", type=int, default=1000)
    ap.add_argument("--breaks", type=int, default=0, help="1 record in K has a line break")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--threads", type=int, default=2, help="DuckDB's threads (default 2)")
    ap.add_argument("--no-release", action="store_true", help="time the reader only")
    ap.add_argument("--data", type=Path, default=Path("/tmp/dpgauss_bench"), help="cache dir")
    args = ap.parse_args()
    units = args.units or max(args.rows // 10, 1)
    args.data.mkdir(parents=True, exist_ok=True)
    path = args.data / f"csv_{args.rows}_{units}_{args.keys}_{args.breaks}.csv"
    if not path.exists():
        print(f"generating {path} ...", flush=True)
        generate(path, args.rows, units, args.keys, args.breaks)
    size = os.path.getsize(path)
    print(f"{path.name}: {args.rows:,} rows, {size / 1e6:,.0f} MB; {args.repeats} rounds, best")
    contestants = [("reader", lambda m: read_all(path, m))]
    if not args.no_release:
        contestants.append(("release", lambda m: release(path, m, args.keys, args.threads)))
    best: dict[tuple[str, str], tuple[float, float]] = {}
    results: dict[tuple[str, str], Any] = {}
    release(path, "lines", args.keys, args.threads) if not args.no_release else None  # warm-up
    read_all(path, "rfc4180")
    for _ in range(args.repeats):
        for name, fn in contestants:
            for mode in ("lines", "rfc4180"):
                wall, cpu, out = timed(lambda fn=fn, mode=mode: fn(mode))
                old = best.get((name, mode))
                if old is None or cpu < old[1]:
                    best[name, mode] = (wall, cpu)
                results[name, mode] = out
    for name, _ in contestants:
        lines, rfc = best[name, "lines"], best[name, "rfc4180"]
        if name == "reader":
            got = f"records: lines {results[name, 'lines']:,}, rfc4180 {results[name, 'rfc4180']:,}"
        else:
            a, b = results[name, "lines"], results[name, "rfc4180"]
            got = f"units: lines {a.rows.units:,}, rfc4180 {b.rows.units:,}"
        print(
            f"{name:8s} lines   {lines[0]:7.2f} s wall {lines[1]:7.2f} s CPU\n"
            f"{'':8s} rfc4180 {rfc[0]:7.2f} s wall {rfc[1]:7.2f} s CPU\n"
            f"{'':8s} ratio rfc4180 / lines: {rfc[0] / lines[0]:.2f}x wall, "
            f"{rfc[1] / lines[1]:.2f}x CPU   ({got})"
        )


if __name__ == "__main__":
    main()
