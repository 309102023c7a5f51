"""The bounding engine alone in a process of its own, with the per-unit kernel's phases.

Run from the repository root, after ``bench_pipeline.py`` has generated its table::

    python benchmarks/bench_unit_kernel.py                   # integer ids, 20 M rows
    python benchmarks/bench_unit_kernel.py --string-units    # 32-hex-digit string ids
    python benchmarks/bench_unit_kernel.py --rows 2000000 --units 200000

``bench_pipeline.py`` interleaves the engine with pandas and Polars in one process, whose
allocations change how fast the kernel's partitioning touches fresh memory; this script
times ``DuckDBEngine.aggregate`` (``engine_runner`` of ``bench_pipeline.py``) alone, after one
warm-up run (which compiles the kernel in a new environment), and splits the CPU time of the
kernel of ``dpgauss.release.engines.unit_topb`` into its phases: hashing string ids, the
partitioning of each batch, the selection (an older tree's histogram, scatter and tally:
the script times whichever the kernel has), and the rest, DuckDB's scan (reading,
classifying, keying, hashing, making the Arrow batches) and the engine.  The kernel now
partitions each batch as it comes, while DuckDB's threads may already be making the next:
their CPU then counts in the partitioning's.  Wall and CPU seconds (the process's, every
thread), per repeat.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_pipeline import engine_runner, generate
from dpgauss.release.engines import unit_topb

#: the kernel's phases (and, from an older tree, theirs: the script times either)
PHASES = tuple(
    p
    for p in ("_hash_ids", "_partition", "_select", "_histogram", "_scatter", "_tally")
    if hasattr(unit_topb, p)
)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=20_000_000)
    parser.add_argument("--units", type=int, default=2_000_000)
    parser.add_argument("--keys", type=int, default=4_000)
    parser.add_argument("--b", type=int, default=5)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--data", default="/tmp/dpgauss_bench")
    parser.add_argument("--string-units", action="store_true")
    args = parser.parse_args()
    kind = "str" if args.string_units else "int"
    path = Path(args.data) / f"rows{args.rows}_units{args.units}{kind}_keys{args.keys}.parquet"
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        generate(path, args.rows, args.units, args.keys, args.string_units)

    spent: dict[str, float] = {}

    def timed(name: str, fn: Any) -> Any:
        def run(*a: Any, **k: Any) -> Any:
            c = time.process_time()
            try:
                return fn(*a, **k)
            finally:
                spent[name] = spent.get(name, 0.0) + time.process_time() - c

        return run

    for name in (*PHASES, "select"):
        setattr(unit_topb, name, timed(name, getattr(unit_topb, name)))
    run = engine_runner(path, args.keys, args.b, args.threads)
    run()  # warm-up (compiles the kernel in a new environment)
    print(
        f"{args.rows:,} rows, {args.units:,} {kind} units, b = {args.b}, DuckDB threads "
        f"{args.threads}"
    )
    print("wall s  CPU s  | kernel CPU s: " + "  ".join(p.strip("_") for p in PHASES))
    for _ in range(args.repeats):
        spent.clear()
        w, c = time.perf_counter(), time.process_time()
        run()
        wall, cpu = time.perf_counter() - w, time.process_time() - c
        kernel = sum(spent.get(p, 0.0) for p in PHASES)
        phases = "  ".join(f"{spent.get(p, 0.0):.2f}" for p in PHASES)
        print(
            f"{wall:6.2f} {cpu:6.2f}  | {phases}  (kernel {kernel:.2f}, the rest "
            f"{cpu - kernel:.2f}: DuckDB and the engine)"
        )


if __name__ == "__main__":
    main()
