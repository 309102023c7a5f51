"""Exact 1-D total variation denoising: ``dpgauss.denoise.trend_filter._tv1d.tv1d`` against
prox_tv's C++.

Run from the repository root (numba from the ``fast`` extra)::

    python benchmarks/bench_tv1d.py            # 10^6 and 10^5 samples, 7 repeats
    python benchmarks/bench_tv1d.py --quick    # 10^5 only, 3 repeats
    python benchmarks/bench_tv1d.py --only 2   # the public call only (issue #31 item 2)

The peer is ``prox_tv.tv1_1d`` (Barbero & Sra; default method, the hybrid taut string), a
C++ extension that is *not* a dependency of dpgauss: install it with
``apt-get install liblapacke-dev`` then ``pip install prox_tv``.  Without it the prox_tv
rows are skipped with the reason printed, and only dpgauss's own times are shown.

What is measured (wall time; the box is shared, so every figure that matters is a ratio
against prox_tv measured in the same run, contenders interleaved, median over repeats):

1. ``tv1d(y, λ)`` (solution and dual certificate) against ``prox_tv.tv1_1d(y, λ)``
   (solution only) on a piecewise-constant signal (100 levels ~ N(0, 3²)) plus N(0, 1)
   noise, λ ∈ {0.3, 1, 3, 10}, 10⁶ and 10⁵ samples; the ratio dpgauss / prox_tv (goal:
   ≤ 1.5 on 10⁶) and the largest absolute difference of the two solutions.  Also the
   plain-Python fallback (core-only installs) once on 10⁵ samples.
2. The public call in CPU time (``time.process_time``, interleaved, median) against
   prox_tv solving the same λ (issue #31 item 2, target ≤ 1.5×): one λ,
   ``trend_filter(y, None, (n,), order=0, lam=λ)`` against ``tv1_1d(y, λ)``; the chain
   given as an edge array; the SURE path ``trend_filter(y, 1.0, (n,), order=0)`` against
   ``tv1_1d`` at each of its λ > 0; and products whose one axis is a chain (``values ×
   range``, ``range × values``; the graph built once, as a release does) against
   ``tvgen`` along that axis (one λ, and the SURE path).
3. Condat's worst case: smooth signals with a large λ make the direct scan rescan long
   look-aheads (a ramp of slope s: about 2√(λ/s) advances per sample), so past
   ``_tv1d.BUDGET`` advances per sample reached Johnson's linear-time dynamic programme
   takes over; and that programme alone (``_tv1d.SLACK = -1``) on the noisy signal, the
   price of the fallback where the scan is fast.
4. The first call (numba compiling, or loading from its cache) against a warm call, each in
   a fresh process with its own ``NUMBA_CACHE_DIR``: empty (compile) then filled (load).
"""

from __future__ import annotations

import argparse
import os
import platform
import random
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from typing import Any

import numpy as np

from dpgauss.denoise import as_graph, trend_filter
from dpgauss.denoise.trend_filter import _tv1d
from dpgauss.denoise.trend_filter._tv1d import tv1d
from dpgauss.release.domains.axes import product_edges

try:
    import prox_tv
except ImportError:
    prox_tv = None
    WHY_NO_PROX_TV = (
        "prox_tv not installed (apt-get install liblapacke-dev; pip install prox_tv): "
        "its rows are skipped"
    )


def signal(n: int, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    return np.repeat(rng.normal(0, 3, 100), -(-n // 100))[:n] + rng.standard_normal(n)


def interleaved(
    fns: dict[str, Callable[[], object]], repeats: int, number: int = 1
) -> dict[str, list[float]]:
    """Seconds per call of each callable (``number`` calls timed together, so that a sample
    spans several of the scheduler's time slices), one sample per repeat, the contenders in
    turn within every repeat (in a shuffled order, so that no contender keeps falling on
    the same beat of the other processes on the box)."""
    times: dict[str, list[float]] = {name: [] for name in fns}
    order = list(fns)
    rng = random.Random(0)
    for _ in range(repeats):
        rng.shuffle(order)
        for name in order:
            fn = fns[name]
            t0 = time.perf_counter()
            for _ in range(number):
                fn()
            times[name].append((time.perf_counter() - t0) / number)
    return times


def med(t: list[float]) -> float:
    return statistics.median(t)


def contenders(y: np.ndarray, lam: float) -> dict[str, Callable[[], object]]:
    fns: dict[str, Callable[[], object]] = {"tv1d": lambda: tv1d(y, lam)}
    if prox_tv is not None:
        fns["prox_tv"] = lambda: prox_tv.tv1_1d(y, lam)
    return fns


def against_prox_tv(sizes: list[int], lams: list[float], repeats: int) -> None:
    print("\n1. tv1d against prox_tv.tv1_1d (interleaved repeats: median, and min in brackets)")
    print(
        "| n | λ | repeats × calls | tv1d (ms) | prox_tv (ms) | ratio tv1d / prox_tv "
        "| max abs diff |"
    )
    print("|---:|---:|---:|---:|---:|---:|---:|")
    for n in sizes:
        y = signal(n)
        calls = max(1, 1_000_000 // n)  # ~2 ms calls at 10⁵: time 10 together
        for lam in lams:
            t = interleaved(contenders(y, lam), repeats, calls)
            mine = f"{1e3 * med(t['tv1d']):.1f} ({1e3 * min(t['tv1d']):.1f})"
            if prox_tv is None:
                print(f"| {n:,} | {lam:g} | {repeats} × {calls} | {mine} | – | – | – |")
                continue
            diff = float(np.max(np.abs(tv1d(y, lam)[0] - prox_tv.tv1_1d(y, lam))))
            print(
                f"| {n:,} | {lam:g} | {repeats} × {calls} | {mine} | {1e3 * med(t['prox_tv']):.1f} "
                f"({1e3 * min(t['prox_tv']):.1f}) | {med(t['tv1d']) / med(t['prox_tv']):.2f} "
                f"({min(t['tv1d']) / min(t['prox_tv']):.2f}) | {diff:.1e} |",
                flush=True,
            )
    n, lam = 100_000, 1.0
    y = signal(n)
    compiled = _tv1d._compiled
    _tv1d._compiled = _tv1d._PYTHON
    try:
        fns = {"python": lambda: tv1d(y, lam)}
        if prox_tv is not None:
            fns["prox_tv"] = lambda: prox_tv.tv1_1d(y, lam)
        t = interleaved(fns, 3)
    finally:
        _tv1d._compiled = compiled
    ratio = f"{med(t['python']) / med(t['prox_tv']):.0f}" if prox_tv is not None else "–"
    print(
        f"Plain-Python fallback (core-only installs), n = {n:,}, λ = {lam:g}: "
        f"{1e3 * med(t['python']):.0f} ms, {ratio}× prox_tv (medians of 3)"
    )


def cpu_interleaved(fns: dict[str, Callable[[], object]], repeats: int) -> dict[str, float]:
    """Median CPU seconds (``time.process_time``) per call of each callable, the contenders
    in turn (shuffled) within every repeat."""
    times: dict[str, list[float]] = {name: [] for name in fns}
    order = list(fns)
    rng = random.Random(1)
    for _ in range(repeats):
        rng.shuffle(order)
        for name in order:
            t0 = time.process_time()
            fns[name]()
            times[name].append(time.process_time() - t0)
    return {name: med(t) for name, t in times.items()}


def _product(shape: tuple[int, int], chain_axis: int) -> Any:
    """The graph of a product whose axis ``chain_axis`` is a chain (a ``range``) and whose
    other axis has no structure (``values``), as a release builds it."""
    edges: list[np.ndarray | None] = [None, None]
    length = shape[chain_axis]
    edges[chain_axis] = np.stack([np.arange(length - 1), np.arange(1, length)], axis=1)
    return as_graph(product_edges(list(shape), edges), shape[0] * shape[1])


def public_path(n: int, lams: list[float], repeats: int) -> None:
    """The public call against prox_tv solving the same λ, in CPU time (issue #31 item 2:
    target ≤ 1.5× for one λ, for the SURE path, and on the chains of products)."""
    y = signal(n)
    print(f"\n2. The public call against prox_tv, CPU time, n = {n:,} (median of {repeats})")
    if prox_tv is None:
        print(WHY_NO_PROX_TV)
        return
    print("| call | λ | dpgauss (ms) | prox_tv (ms) | dpgauss / prox_tv |")
    print("|---|---:|---:|---:|---:|")

    def row(name: str, lam: str, t: dict[str, float]) -> None:
        print(
            f"| {name} | {lam} | {1e3 * t['dpgauss']:.1f} | {1e3 * t['prox_tv']:.1f} "
            f"| {t['dpgauss'] / t['prox_tv']:.2f} |",
            flush=True,
        )

    for lam in lams:
        t = cpu_interleaved(
            {
                "dpgauss": lambda lam=lam: trend_filter(y, None, (n,), order=0, lam=lam),
                "prox_tv": lambda lam=lam: prox_tv.tv1_1d(y, lam),
            },
            repeats,
        )
        row("`trend_filter(y, None, (n,), order=0, lam=λ)`", f"{lam:g}", t)
    edges = np.stack([np.arange(n - 1), np.arange(1, n)], axis=1)
    t = cpu_interleaved(
        {
            "dpgauss": lambda: trend_filter(y, None, edges, order=0, lam=1.0),
            "prox_tv": lambda: prox_tv.tv1_1d(y, 1.0),
        },
        repeats,
    )
    row("same, the chain as an `(n − 1, 2)` edge array (`as_graph` sorts it)", "1", t)
    path = trend_filter(y, 1.0, (n,), order=0).params["path"]["lam"]
    path = [float(v) for v in path if v > 0]

    def peer_path() -> None:
        for v in path:
            prox_tv.tv1_1d(y, v)

    t = cpu_interleaved(
        {"dpgauss": lambda: trend_filter(y, 1.0, (n,), order=0), "prox_tv": peer_path},
        max(3, repeats // 2),
    )
    row("SURE path `trend_filter(y, 1.0, (n,), order=0)`", f"{len(path)} λ + λ = 0", t)
    for shape, axis, what in (
        ((10, n // 10), 1, "values × range (10 chains, consecutive)"),
        ((n // 10, 10), 0, "range × values (10 chains, strided)"),
    ):
        g = _product(shape, axis)
        grid = y.reshape(shape)
        dim = [axis + 1]  # prox_tv's dimensions are 1-based

        fibres = [np.ascontiguousarray(f) for f in (grid if axis == 1 else grid.T)]
        # prox_tv's faster way here: tvgen along the axis, or tv1_1d fibre by fibre
        ways = {
            "tvgen": lambda v, grid=grid, dim=dim: prox_tv.tvgen(grid, [v], dim, [1]),
            "tv1_1d per fibre": lambda v, fibres=fibres: [prox_tv.tv1_1d(f, v) for f in fibres],
        }
        t_ways = cpu_interleaved({k: lambda w=w: w(1.0) for k, w in ways.items()}, repeats)
        way = min(t_ways, key=t_ways.__getitem__)
        peer = ways[way]
        t = cpu_interleaved(
            {
                "dpgauss": lambda g=g: trend_filter(y, None, g, order=0, lam=1.0),
                "prox_tv": lambda peer=peer: peer(1.0),
            },
            repeats,
        )
        row(f"{what}; prox_tv by {way}", "1", t)
        lams_p = [float(v) for v in trend_filter(y, 1.0, g, order=0).params["path"]["lam"] if v > 0]

        def peer_sure(lams_p: list[float] = lams_p, peer: Any = peer) -> None:
            for v in lams_p:
                peer(v)

        t = cpu_interleaved(
            {"dpgauss": lambda g=g: trend_filter(y, 1.0, g, order=0), "prox_tv": peer_sure},
            max(3, repeats // 2),
        )
        row(f"{what}, SURE path", f"{len(lams_p)} λ + λ = 0", t)


def worst_case(n: int, repeats: int) -> None:
    print(f"\n3. Smooth signals, large λ (the scan gives up, the DP takes over), n = {n:,}")
    print("| signal | λ | tv1d (ms) | prox_tv (ms) | ratio tv1d / prox_tv |")
    print("|---|---:|---:|---:|---:|")
    k = np.arange(n, dtype=float)
    cases = {
        "ramp, slope 1e-3": (k * 1e-3, [1.0, 100.0]),
        "one sine period, amplitude 10": (10 * np.sin(2 * np.pi * k / n), [1.0, 100.0]),
        "noisy steps (section 1), DP forced": (signal(n), [1.0]),
    }
    slack = _tv1d.SLACK
    for name, (y, lams) in cases.items():
        _tv1d.SLACK = -1 if "forced" in name else slack
        try:
            for lam in lams:
                t = interleaved(contenders(y, lam), repeats)
                p = (
                    f"{1e3 * med(t['prox_tv']):.1f} | {med(t['tv1d']) / med(t['prox_tv']):.2f}"
                    if prox_tv
                    else "– | –"
                )
                print(f"| {name} | {lam:g} | {1e3 * med(t['tv1d']):.1f} | {p} |", flush=True)
        finally:
            _tv1d.SLACK = slack


FIRST_CALL = """
import time
import numpy as np
from dpgauss.denoise.trend_filter._tv1d import tv1d
from dpgauss.release.domains.axes import product_edges
y = np.random.default_rng(0).standard_normal(100_000)
t1 = time.perf_counter()
tv1d(y, 1.0)
t2 = time.perf_counter()
tv1d(y, 1.0, np.ones(y.size))
weighted = time.perf_counter() - t2
warm = []
for _ in range(9):
    t3 = time.perf_counter()
    tv1d(y, 1.0)
    warm.append(time.perf_counter() - t3)
print(t2 - t1, weighted, sorted(warm)[4])
"""


def first_call() -> None:
    print("\n4. First call (compile or load numba's cache) against a warm call, n = 100,000")
    if _tv1d._numba is None:
        print("numba not installed: the plain-Python loops run, nothing is compiled")
        return
    print("| NUMBA_CACHE_DIR | first call (s) | first weighted call (s) | warm: median of 9 (ms) |")
    print("|---|---:|---:|---:|")
    with tempfile.TemporaryDirectory() as cache:
        env = dict(os.environ, NUMBA_CACHE_DIR=cache)
        for label in ("empty (compiles)", "filled (loads)"):
            out = subprocess.run(
                [sys.executable, "-c", FIRST_CALL],
                env=env,
                capture_output=True,
                text=True,
                check=True,
            ).stdout.split()
            unit, weighted, warm = (float(v) for v in out)
            print(f"| {label} | {unit:.2f} | {weighted:.2f} | {1e3 * warm:.1f} |", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument(
        "--only", type=int, nargs="*", choices=[1, 2, 3, 4], help="run only these sections"
    )
    parser.add_argument("--n", type=int, help="the size of sections 2 and 3 (default 10^6)")
    args = parser.parse_args()
    run = set(args.only or [1, 2, 3, 4])
    peer = "prox_tv" if prox_tv is not None else WHY_NO_PROX_TV
    numba = "numba" if _tv1d._numba is not None else "no numba (plain Python)"
    print(f"# bench_tv1d  Python {platform.python_version()}  {numba}  peer: {peer}")
    tv1d(signal(100), 1.0)  # compile (or load numba's cache) before timing
    tv1d(signal(100), 1.0, np.ones(100))
    repeats = 3 if args.quick else 7
    sizes = [100_000] if args.quick else [1_000_000, 100_000]
    trend_filter(signal(1000), 1.0, (1000,), order=0)  # compile the public call's kernels
    big = args.n or sizes[0]
    if 1 in run:
        against_prox_tv(sizes, [0.3, 1.0, 3.0, 10.0], repeats)
    if 2 in run:
        public_path(big, [0.3, 1.0, 3.0, 10.0], repeats)
    if 3 in run:
        worst_case(big, repeats)
    if 4 in run:
        first_call()


if __name__ == "__main__":
    main()
