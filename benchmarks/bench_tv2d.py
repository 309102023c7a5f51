"""Order-0 trend filtering on 2-D lattices: dpgauss's lattice solver against prox_tv.

Run from the repository root (numba from the ``fast`` extra)::

    python benchmarks/bench_tv2d.py            # 300 x 300 and 1000 x 1000 (several minutes)
    python benchmarks/bench_tv2d.py --quick    # 300 x 300 only, 3 repeats

prox_tv (Barbero & Sra's C++ library, a peer to compare with, never a dependency) needs
LAPACKE to build: ``apt-get install liblapacke-dev`` then ``pip install prox_tv``.  Without
it the prox_tv rows are skipped, with the reason.

What is measured
----------------
Images: 10 × 10 blocks of levels in {0, 1, 2, 3} plus N(0, 1) noise (fixed seed), 300 × 300
and 1000 × 1000.  For each:

1. The 20-λ SURE path ``trend_filter(y, 1.0, (H, W), order=0, lam="sure")`` (goal at
   1000 × 1000: under 60 s), its largest certified relative gap and the λ SURE chooses.
2. At that λ (so a λ SURE picks for this image), one solve of the anisotropic TV problem
   ``½‖y − β‖² + λ Σ_edges |β_i − β_j|`` by ``trend_filter(y, None, graph, lam=λ)`` (the
   lattice graph built once beforehand; relative gap ≤ 1e-6 certified by the solver)
   and by ``prox_tv.tv1_2d(y, λ, n_threads=1, method=m, max_iters=k)``.  prox_tv has no
   gap-based stop (its default runs to about 1e-12), so for each method ``m`` the fewest
   iterations ``k`` reaching a relative gap ≤ 1e-6 are searched first (untimed: doubling,
   then bisection), and the fastest method so tuned at 300 × 300 is the one used at
   1000 × 1000.  prox_tv's gap is measured here, with the same objective, against the dual
   bound ``D`` of a reference solve by dpgauss's lattice solver at tol 1e-11 (its dual
   point is feasible, so ``(P(β) − D) / P(β)`` bounds the true relative gap from above).
3. Both contenders are timed interleaved (alternating which goes first), single-threaded,
   after compilation; reported: medians of wall and CPU seconds and the RATIOS prox_tv
   time / dpgauss time (goal ≥ 2).  Times depend on the machine and its load; compare the
   ratios.
"""

from __future__ import annotations

import os

# One thread for every contender, BLAS included (set before NumPy loads OpenBLAS: on a loaded
# machine its threads waiting for busy cores made each ‖y − β‖² of the SURE path ~10 ms).
for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

import argparse  # noqa: E402
import platform  # noqa: E402
import time  # noqa: E402
from collections.abc import Callable  # noqa: E402

import numpy as np  # noqa: E402

from dpgauss.denoise import as_graph, trend_filter  # noqa: E402
from dpgauss.denoise.structure import lattice_edges  # noqa: E402
from dpgauss.denoise.trend_filter import _LatticeDifference, _tv2d  # noqa: E402

try:
    import prox_tv
except ImportError as exc:  # pragma: no cover - depends on the machine
    prox_tv = None
    PROX_TV_MISSING = (
        f"prox_tv not importable ({exc}); apt-get install liblapacke-dev, pip install prox_tv"
    )
else:
    PROX_TV_MISSING = ""

TOL = 1e-6
# "pd" (proximal Dykstra) is left out: on 300 x 300 no max_iters <= 4096 reached 1e-6.
METHODS = ("kolmogorov", "dr", "yang")


def image(n: int, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    block = -(-n // 10)
    levels = rng.integers(0, 4, (10, 10)).astype(float)
    truth = np.repeat(np.repeat(levels, block, 0), block, 1)[:n, :n]
    return truth + rng.standard_normal((n, n))


class Objective:
    """``P(β)`` and the relative gap of any β against a reference dual bound."""

    def __init__(self, y: np.ndarray, lam: float) -> None:
        self.y = y.ravel()
        self.lam = lam
        self.op = _LatticeDifference(y.shape, 0)
        ref = _tv2d.LatticeTV(self.y, y.shape, 1e-11, 20_000).solve(lam)
        self.dual = ref.objective - ref.gap
        self.ref_gap = ref.gap / ref.objective

    def primal(self, beta: np.ndarray) -> float:
        b = beta.ravel()
        r = self.y - b
        return 0.5 * float(r @ r) + self.lam * float(np.abs(self.op.apply(b)).sum())

    def gap(self, beta: np.ndarray) -> float:
        p = self.primal(beta)
        return (p - self.dual) / p


def fewest_iterations(
    obj: Objective, y: np.ndarray, lam: float, method: str, start: int = 8
) -> int | None:
    """The fewest ``max_iters`` with which prox_tv's ``method`` reaches a gap ≤ TOL (the
    search starts at ``start``: below it, doubling down; above, doubling up)."""

    def ok(k: int) -> bool:
        return obj.gap(prox_tv.tv1_2d(y, lam, n_threads=1, max_iters=k, method=method)) <= TOL

    lo, hi = 0, start
    while hi > 8 and ok(hi // 2):
        hi //= 2
    while not ok(hi):
        lo, hi = hi, 2 * hi
        if hi > 4096:
            return None
    while hi - lo > max(1, hi // 20):  # to within 5 %
        mid = (lo + hi) // 2
        if ok(mid):
            hi = mid
        else:
            lo = mid
    return hi


def interleaved(
    contenders: dict[str, Callable[[], object]], repeats: int
) -> tuple[dict[str, list], dict[str, list]]:
    """Wall and CPU seconds of each contender, alternating which goes first."""
    times: dict[str, list] = {k: [] for k in contenders}
    cpu: dict[str, list] = {k: [] for k in contenders}
    names = list(contenders)
    for r in range(repeats):
        for name in names if r % 2 == 0 else names[::-1]:
            t0, c0 = time.perf_counter(), time.process_time()
            contenders[name]()
            times[name].append(time.perf_counter() - t0)
            cpu[name].append(time.process_time() - c0)
    return times, cpu


def sure_path(y: np.ndarray) -> tuple[float, float]:
    t0, c0 = time.perf_counter(), time.process_time()
    fit = trend_filter(y, 1.0, y.shape, order=0, lam="sure")
    seconds, cpu = time.perf_counter() - t0, time.process_time() - c0
    path = fit.params["path"]
    print(
        f"  SURE path {y.shape[0]} x {y.shape[1]}: {seconds:.2f} s ({cpu:.2f} s CPU), "
        f"{len(path['lam'])} λ, "
        f"chosen λ = {fit.params['lam']:.4g} (df {fit.params['df']}), "
        f"max certified gap {np.max(path['gap']):.2e}, "
        f"{int(np.sum(path['iterations']))} iterations, algorithm: {fit.params['algorithm']}"
    )
    return float(fit.params["lam"]), seconds


def compare(
    n: int, repeats: int, methods: tuple[str, ...], start: int = 8
) -> tuple[str, int] | None:
    y = image(n)
    print(f"\n{n} x {n}")
    lam, _ = sure_path(y)
    obj = Objective(y, lam)
    print(f"  reference dual bound: certified relative gap {obj.ref_gap:.1e}")
    graph = as_graph(lattice_edges(y.shape), y.size)

    def ours() -> np.ndarray:
        return trend_filter(y, None, graph, order=0, lam=lam).estimate

    fit = trend_filter(y, None, graph, order=0, lam=lam)
    print(
        f"  dpgauss: certified gap {fit.params['gap']:.2e}, gap vs reference "
        f"{obj.gap(fit.estimate):.2e}, {fit.params['iterations']} iterations"
    )
    if prox_tv is None:
        print(f"  prox_tv: skipped: {PROX_TV_MISSING}")
        return None
    tuned = {}
    for m in methods:
        k = fewest_iterations(obj, y, lam, m, start)
        if k is None:
            print(f"  prox_tv {m}: no max_iters <= 4096 reaches gap {TOL:g}; dropped")
            continue
        beta = prox_tv.tv1_2d(y, lam, n_threads=1, max_iters=k, method=m)
        tuned[m] = k
        print(
            f"  prox_tv {m}: fewest max_iters reaching gap {TOL:g}: {k} (gap {obj.gap(beta):.2e})"
        )
    if not tuned:
        return None
    contenders: dict[str, Callable[[], object]] = {"dpgauss": ours}
    for m, k in tuned.items():
        contenders[f"prox_tv {m} ({k} it)"] = lambda m=m, k=k: prox_tv.tv1_2d(
            y, lam, n_threads=1, max_iters=k, method=m
        )
    times, cpu = interleaved(contenders, repeats)
    base = float(np.median(times["dpgauss"]))
    base_cpu = float(np.median(cpu["dpgauss"]))
    print(
        f"  {'contender':28s} {'median s':>9s} {'ratio':>7s} {'median CPU s':>13s} {'ratio':>7s}"
        f"   (repeats: {repeats}; ratios to dpgauss)"
    )
    best_m, best_t, best_c = None, np.inf, np.inf
    for name, ts in times.items():
        med, med_cpu = float(np.median(ts)), float(np.median(cpu[name]))
        ratio, ratio_cpu = med / base, med_cpu / base_cpu
        print(f"  {name:28s} {med:9.3f} {ratio:7.2f} {med_cpu:13.3f} {ratio_cpu:7.2f}")
        if name != "dpgauss" and med < best_t:
            best_m, best_t, best_c = name.split()[1], med, med_cpu
    print(
        f"  fastest prox_tv / dpgauss: {best_t / base:.2f} wall, {best_c / base_cpu:.2f} CPU "
        "(goal >= 2)"
    )
    return (best_m, tuned[best_m]) if best_m else None


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="300 x 300 only, 3 repeats")
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    print(
        f"Python {platform.python_version()}, {platform.machine()}, {os.cpu_count()} CPUs, "
        f"OPENBLAS_NUM_THREADS={os.environ.get('OPENBLAS_NUM_THREADS')}"
    )
    trend_filter(image(30), None, (30, 30), order=0, lam=1.0)  # compile / load the kernels
    repeats = 3 if args.quick else args.repeats
    best = compare(300, repeats, METHODS)
    if not args.quick:
        # the 1000 x 1000 search for max_iters starts from the 300 x 300 count
        method, start = best if best else ("kolmogorov", 8)
        compare(1000, max(3, repeats // 2), (method,), start)


if __name__ == "__main__":
    main()
