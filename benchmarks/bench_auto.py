"""``denoise.auto`` with screening of the trend-filter candidates, against ``auto`` before it.

Run from the repository root::

    python benchmarks/bench_auto.py                     # every case, 1 round
    python benchmarks/bench_auto.py --cases chain-js chain-tf --repeats 3
    python benchmarks/bench_auto.py --release-rows 2000000
    python benchmarks/bench_auto.py --shares --cases manhattan --repeats 3   # CPU shares
    python benchmarks/bench_auto.py --order1 --cases manhattan --repeats 3   # face routes

"Before" is ``auto`` at commit 0e6d9e4 (no screening), checked out into ``--base`` (default
``/tmp/autobase``: ``git clone -q . /tmp/autobase && git -C /tmp/autobase checkout -q
0e6d9e4``); "after" is this tree's ``src``.  Each timing runs in its own subprocess (same
interpreter; data generated from fixed seeds inside it), before and after interleaved in
every round, so both see the same load on a shared machine; the ratio before/after is that
of the medians.  Each line also says whether both chose the same candidate (method and
order) and what ``after`` screened out.

Cases:

* ``chain-js``: a 4,000-bin ``range`` domain (a chain and its 1-D grid, as a release passes
  it) with flat counts (multinomial: 2,500 ± 50 per bin, σ = 20): James–Stein wins;
* ``chain-tf``: the same chain, 8 flat steps of 500 bins, σ = 1: trend filtering wins;
* ``manhattan``: taxi pickups per Manhattan junction (``dpgauss.datasets``, 4,091 nodes),
  σ = 5 (ε ≈ 1 at Δ = 1);
* ``grid300``: a smooth 300 × 300 image with a step, σ = 1, grid shape only.

``--release-rows N`` also times ``dpgauss release`` (``run_release``, DuckDB) of a bounded
count over a 4,000-bin ``range`` domain on N generated rows (``after`` only) and prints the
share of its wall time spent denoising (from the confidential diagnostics).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

WORKER = r"""
import json, sys, time, warnings
import numpy as np
warnings.simplefilter("ignore")
from dpgauss.denoise import auto, as_graph
from dpgauss.denoise.structure import Structure

def case(name):
    if name.startswith("chain"):
        d = 4000
        rng = np.random.default_rng(17)
        edges = np.stack([np.arange(d - 1), np.arange(1, d)], axis=1)
        st = Structure(graph=as_graph(edges, d), grid=(d,))
        if name == "chain-js":
            theta = rng.multinomial(10_000_000, np.full(d, 1.0 / d)).astype(float)
            return theta + 20.0 * rng.standard_normal(d), 20.0, st
        theta = np.repeat(rng.normal(0.0, 3.0, 8), d // 8)
        return theta + rng.standard_normal(d), 1.0, st
    if name == "manhattan":
        from dpgauss.datasets import load_manhattan_graph, load_trips, snap_to_nodes
        graph = load_manhattan_graph()
        trips = load_trips()
        ok = trips.pickup_valid
        node, _ = snap_to_nodes(graph, trips.pickup_lat[ok], trips.pickup_lon[ok], 200.0)
        counts = np.bincount(node[node >= 0], minlength=graph.n).astype(np.float64)
        rng = np.random.default_rng(18)
        return counts + 5.0 * rng.standard_normal(graph.n), 5.0, as_graph(graph.edges, graph.n)
    if name == "grid300":
        u = np.linspace(0.0, 1.0, 300)
        x, z = np.meshgrid(u, u, indexing="ij")
        theta = 5.0 * np.sin(2 * np.pi * x) * np.cos(np.pi * z) + 3.0 * (x > 0.5)
        rng = np.random.default_rng(19)
        return theta + rng.standard_normal(theta.shape), 1.0, (300, 300)
    raise SystemExit(f"unknown case {name}")

y, sigma, st = case(sys.argv[1])
t = time.perf_counter()
res = auto(y, sigma, st)
el = time.perf_counter() - t
screened = [f"{r.get('name', r['method'])}: {r['reason']}"
            for r in res.params.get("screened", [])]
screening = sum(v for k, v in res.params.get("timing", {}).items() if "(screening)" in k)
out = {"seconds": el, "method": res.method, "order": res.params.get("order"),
       "screened": screened, "screening_s": screening}
print(json.dumps(out))
"""

CASES = ("chain-js", "chain-tf", "manhattan", "grid300")

# CPU shares in one process (issue #31 item 3): auto, its trend-filter candidates' SURE
# paths, and one order-0 λ (at the λ order 0 chose), each the median of `repeats` runs.
SHARES = r"""
import json, sys, time, warnings
import numpy as np
warnings.simplefilter("ignore")
from dpgauss.denoise import auto, trend_filter
exec(sys.argv[2])  # CASE: defines case()
y, sigma, st = case(sys.argv[1])
repeats = int(sys.argv[3])
auto(y, sigma, st)  # warm: numba caches, imports

def cpu(fn):
    times = []
    for _ in range(repeats):
        t = time.process_time()
        out = fn()
        times.append(time.process_time() - t)
    return sorted(times)[len(times) // 2], out

t_auto, res = cpu(lambda: auto(y, sigma, st))
t0, r0 = cpu(lambda: trend_filter(y, sigma, st, order=0))
t1, r1 = cpu(lambda: trend_filter(y, sigma, st, order=1))
t_one, _ = cpu(lambda: trend_filter(y, sigma, st, order=0, lam=float(r0.params["lam"])))
print(json.dumps({"auto": t_auto, "order0": t0, "order1": t1, "one": t_one,
                  "chosen": f"{res.method}/{res.params.get('order')}", "risk": res.risk,
                  "sure0": r0.risk, "sure1": r1.risk}))
"""


# The order-1 SURE path's face routes (issue #31 item 3), in one process, alternated round
# by round: the capacitance route's switch-over (_order1._CAPACITANCE_MAX, _NEW; (-1, 0) is
# the route off), and the λ the descent screen would have to solve exactly, as one
# warm-started list (its least possible cost), against the whole path.
ORDER1 = r"""
import json, sys, time, warnings
import numpy as np
warnings.simplefilter("ignore")
from dpgauss.denoise import trend_filter
from dpgauss.denoise.trend_filter import _order1
exec(sys.argv[2])  # CASE: defines case()
y, sigma, st = case(sys.argv[1])
repeats = int(sys.argv[3])
path = trend_filter(y, sigma, st, order=1).params["path"]
lam = [float(v) for v in path["lam"]]
switch = [(-1, 0), (200, 10**9), (200, 16), (400, 16), (400, 32), (1000, 24), (1000, 64)]
subsets = {"descent 4, 8, 12, 16, 17..20": [4, 8, 12, 16, 17, 18, 19, 20],
           "16..20": [16, 17, 18, 19, 20], "4, 8, 12, 16": [4, 8, 12, 16]}
default = (_order1._CAPACITANCE_MAX, _order1._CAPACITANCE_NEW)
times = {f"switch {v}": [] for v in switch}
times.update({f"path {k}": [] for k in subsets})
for _ in range(repeats):
    for v in switch:
        _order1._CAPACITANCE_MAX, _order1._CAPACITANCE_NEW = v
        t = time.process_time()
        trend_filter(y, sigma, st, order=1)
        times[f"switch {v}"].append(time.process_time() - t)
    _order1._CAPACITANCE_MAX, _order1._CAPACITANCE_NEW = default
    for k, idx in subsets.items():
        t = time.process_time()
        trend_filter(y, sigma, st, order=1, lam=[lam[0]] + [lam[i] for i in idx])
        times[f"path {k}"].append(time.process_time() - t)
out = {k: sorted(v)[len(v) // 2] for k, v in times.items()}
# what the faces did, route off and at the default switch-over
seen = []
init = _order1.FaceSolver.__init__
def spy(self, *args, **kwargs):
    init(self, *args, **kwargs)
    seen.append(self)
_order1.FaceSolver.__init__ = spy
counts = {}
for v in [(-1, 0), default]:
    _order1._CAPACITANCE_MAX, _order1._CAPACITANCE_NEW = v
    seen.clear()
    trend_filter(y, sigma, st, order=1)
    f = seen[0]
    counts[str(v)] = (f"capacitance faces {f.capacitance_solves}, refused "
                      f"{f.capacitance_refused}, columns {f.capacitance.used}, "
                      f"factorisations of (L²)_RR {f.factorisations}")
out["default"] = list(default)
out["counts"] = counts
out["df"] = [int(v) for v in path["df"]]
print(json.dumps(out))
"""



def _worker(script: str, name: str, head: str, repeats: int, env: dict[str, str]) -> dict:
    """Runs ``script`` for the case ``name`` in a fresh interpreter; its last line's JSON."""
    done = subprocess.run(
        [sys.executable, "-c", script, name, head, str(repeats)],
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode:
        raise SystemExit(f"{name} failed:\n{done.stderr[-2000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])

def order1(cases: list[str], repeats: int, src: Path) -> None:
    """CPU medians of the order-1 SURE path under the face routes' settings and of the λ
    subsets a descent screen would solve (``ORDER1``)."""
    env = dict(os.environ, PYTHONPATH=str(src))
    head, _, _ = WORKER.partition("y, sigma, st = case(sys.argv[1])")
    for name in cases:
        if name == "grid300":
            continue
        r = _worker(ORDER1, name, head, repeats, env)
        print(f"{name}: (max, new) default {tuple(r.pop('default'))}, df {r.pop('df')}")
        for key, value in r.pop("counts").items():
            print(f"  faces at {key}: {value}")
        for key, value in r.items():
            print(f"  {key:40s} {value:.3f} s CPU")
        sys.stdout.flush()


def run(src: Path, name: str) -> dict:
    env = dict(os.environ, PYTHONPATH=str(src))
    done = subprocess.run(
        [sys.executable, "-c", WORKER, name], env=env, capture_output=True, text=True, check=False
    )
    if done.returncode:
        raise SystemExit(f"{src} {name} failed:\n{done.stderr[-2000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def release(rows: int) -> dict:
    """``run_release`` of a bounded count over a 4,000-bin range domain, ``after`` only."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.parquet as pq

    from dpgauss.release.pipeline import run_release
    from dpgauss.release.spec import ReleaseSpec

    tmp = Path(tempfile.mkdtemp(prefix="bench_auto_"))
    rng = np.random.default_rng(20)
    units = max(rows // 10, 1)
    pq.write_table(
        pa.table(
            {
                "unit": rng.integers(0, units, rows, dtype=np.int64),
                "zone": rng.integers(0, 4000, rows).astype(np.int32),
            }
        ),
        tmp / "data.parquet",
    )
    spec = ReleaseSpec.from_dict(
        {
            "name": "bench",
            "source": {"path": str(tmp / "data.parquet")},
            "unit": {"column": "unit"},
            "domain": {"kind": "range", "column": "zone", "start": 0, "stop": 4000},
            "statistic": {"kind": "count"},
            "bounds": {"max_records_per_unit": 5},
            "privacy": {"epsilon": 1.0, "delta": 1e-6, "secure": True, "dataset": "bench"},
            "denoise": {"method": "auto"},
            "output": {"path": str(tmp / "out.csv")},
        }
    )
    from dpgauss.release.ledger import Ledger

    ledger = tmp / "budget.sqlite"
    with Ledger(ledger) as led:
        led.create_budget("bench", 10.0, 1e-5)
    t = time.perf_counter()
    res = run_release(spec, out=tmp / "out.csv", ledger=ledger)
    wall = time.perf_counter() - t
    return {
        "wall": wall,
        "timing": res.diagnostics["timing"],
        "method": res.report["denoise"]["method"],
    }


def shares(cases: list[str], repeats: int, src: Path) -> None:
    """CPU time of ``auto`` and of its trend-filter candidates' SURE paths, as ratios to one
    order-0 λ and to ``auto``, in one process per case (``src``: this tree's by default)."""
    env = dict(os.environ, PYTHONPATH=str(src))
    head, _, _ = WORKER.partition("y, sigma, st = case(sys.argv[1])")
    print("| case | auto CPU (s) | order-0 path | order-1 path | one order-0 λ | chosen |")
    print("|---|---:|---:|---:|---:|---|")
    for name in cases:
        if name == "grid300":  # no graph: no order-1 candidate
            continue
        r = _worker(SHARES, name, head, repeats, env)
        one = r["one"]
        print(
            f"| {name} | {r['auto']:.2f} | {r['order0']:.2f} s ({r['order0'] / r['auto']:.0%} "
            f"of auto, {r['order0'] / one:.0f}× one λ) | {r['order1']:.2f} s "
            f"({r['order1'] / r['auto']:.0%}, {r['order1'] / one:.0f}×; SURE {r['sure1']:.0f} "
            f"vs order 0's {r['sure0']:.0f}) | {1e3 * one:.0f} ms | {r['chosen']} |",
            flush=True,
        )
        print(
            f"  {name}: chosen SURE {r['risk']!r}, order-1 SURE {r['sure1']!r}",
            flush=True,
        )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--cases", nargs="*", default=list(CASES), choices=CASES)
    ap.add_argument("--repeats", type=int, default=1)
    ap.add_argument("--base", default="/tmp/autobase", help="a checkout of commit 0e6d9e4")
    ap.add_argument("--release-rows", type=int, default=0)
    ap.add_argument(
        "--shares",
        action="store_true",
        help="only the CPU shares of the trend-filter candidates in auto (issue #31)",
    )
    ap.add_argument(
        "--order1",
        action="store_true",
        help="only the order-1 path's face routes and descent-screen subsets (issue #31)",
    )
    ap.add_argument("--src", default=str(ROOT / "src"), help="the src of --shares, --order1")
    args = ap.parse_args()
    if args.order1:
        order1(args.cases, max(args.repeats, 1), Path(args.src))
        return
    if args.shares:
        shares(args.cases, max(args.repeats, 1), Path(args.src))
        return
    before_src, after_src = Path(args.base) / "src", ROOT / "src"
    if not (before_src / "dpgauss").is_dir():
        raise SystemExit(f"--base {args.base} has no src/dpgauss: clone and check out 0e6d9e4")
    for name in args.cases:
        b, a = [], []
        for _ in range(args.repeats):
            b.append(run(before_src, name))
            a.append(run(after_src, name))
        tb = statistics.median(r["seconds"] for r in b)
        ta = statistics.median(r["seconds"] for r in a)
        same = all(
            (x["method"], x["order"]) == (y["method"], y["order"])
            for x, y in zip(b, a, strict=True)
        )
        print(
            f"{name:10s} before {tb:8.2f} s  after {ta:8.2f} s  ratio {tb / ta:6.2f}x  "
            f"chosen {b[0]['method']}/{b[0]['order']} -> {a[0]['method']}/{a[0]['order']}  "
            f"same={same}"
        )
        print(f"           after: screening took {a[0].get('screening_s', 0.0):.3f} s")
        for line in a[0]["screened"]:
            print(f"           screened: {line}")
        sys.stdout.flush()
    if args.release_rows:
        sys.path.insert(0, str(after_src))
        r = release(args.release_rows)
        t = r["timing"]
        print(
            f"release {args.release_rows:,} rows, 4,000-bin range: wall {r['wall']:.2f} s, "
            f"denoise {t.get('denoise_s', float('nan')):.2f} s "
            f"(share {t.get('denoise_share', float('nan')):.1%}); chosen {r['method']}; "
            f"timing {json.dumps({k: round(v, 3) for k, v in t.items()})}"
        )


if __name__ == "__main__":
    main()
