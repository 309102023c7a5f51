"""Speed and accuracy of graph trend filtering: dpgauss against cvxpy + Clarabel.

Run from the repository root (cvxpy and clarabel come from the ``test`` extra)::

    python benchmarks/bench_denoise.py            # full run (about four minutes)
    python benchmarks/bench_denoise.py --quick    # fewer repeats, 300 x 300 grid
    python benchmarks/bench_denoise.py --no-grid  # Manhattan only

What is measured
----------------
1. The Manhattan junction graph built from the TaxiVis road network
   (``/work/shared/data/taxivis_manhattan_with_weights.txt``, see
   :func:`load_manhattan_graph`), with a piecewise constant signal (levels on regions of
   the island) plus N(0, 1) noise, fixed seed.  Timed, each as a RATIO to cvxpy + Clarabel
   measured in the same run on the same problem:

   * one order-0 and one order-1 solve at a fixed λ (cvxpy: build and solve the problem);
   * the 20-λ SURE path of ``trend_filter(lam="sure")`` for orders 0 and 1 (cvxpy: one
     problem with a ``cvxpy.Parameter`` λ, solved at the same 20 λ).

   Accuracy: the largest relative objective difference ``(P_dpgauss − P_cvxpy) / P_cvxpy``
   over all solves (negative = dpgauss lower), with
   ``P(β) = ½‖y − β‖² + λ‖Δ⁽ᵏ⁺¹⁾β‖₁``.  The goal is ≤ 1e-6 and a path at least 5× faster.
2. Order 0 on a 1000 × 1000 lattice (10⁶ nodes) with a blocky signal plus noise, in a
   fresh subprocess so that its peak RSS (``resource.getrusage``) is the solve's own.
   Goal: under 60 s and 4 GB.  Accuracy is the certified relative duality gap.

Order 0 is timed with both solvers: ``solver="exact"`` (the min-cut decomposition; needs
numba, the ``fast`` extra, and is skipped without it) and ``solver="admm"``; orders 1 and 2
have ADMM only.  The numba kernel is compiled (or loaded from its cache) before timing.

Times are medians of repeats and depend on the machine and its load; compare the ratios.
BLAS runs single-threaded unless ``OPENBLAS_NUM_THREADS`` (or ``--blas-threads``) says
otherwise: Clarabel is single-threaded, and on a loaded machine OpenBLAS threads that wait
for busy cores slow down dense linear algebra many times (set ``--blas-threads 0`` to keep
the library default and see it; the order-1 solvers no longer factorise dense matrices).
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import resource
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any


def _blas_threads() -> str:
    """Set the BLAS thread count before numpy loads (``--blas-threads N``; 0 = default)."""
    value = "1"
    if "--blas-threads" in sys.argv:
        value = sys.argv[sys.argv.index("--blas-threads") + 1]
    if value != "0":
        for name in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
            os.environ.setdefault(name, value)
    return os.environ.get("OPENBLAS_NUM_THREADS", "library default")


BLAS_THREADS = _blas_threads()

import numpy as np  # noqa: E402
import scipy.sparse as sp  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from dpgauss.datasets import load_manhattan_graph  # noqa: E402
from dpgauss.denoise.graph import as_graph  # noqa: E402
from dpgauss.denoise.trend_filter import _graph_tv, _make_operator, trend_filter  # noqa: E402

SEED = 20180710
SIGMA = 1.0
FIXED_LAM = 2.0  # the fixed-λ solves (σ = 1); the SURE optimum is near it
PATH_KW = {"n_lambdas": 20, "lam_min_ratio": 1e-3}
GRID_TOL = float(os.environ.get("BENCH_GRID_TOL", "1e-6"))
GRID_MAX_ITER = 5000


def load_manhattan_junctions() -> tuple[np.ndarray, np.ndarray]:
    """The pruned Manhattan junction graph (3,907 / 7,103) from :mod:`dpgauss.datasets`."""
    road = load_manhattan_graph(junctions=True, prune_dead_ends=True)
    return np.stack([road.lat, road.lon], axis=1), np.asarray(road.edges, dtype=np.int64)


def manhattan_signal(coords: np.ndarray, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """Piecewise constant levels on bands along the island plus a park-like block, + noise."""
    lat, lon = coords[:, 0], coords[:, 1]
    along = (lat - lat.min()) / np.ptp(lat)
    theta = np.array([0.0, 3.0, 1.0, 4.0, 2.0])[np.minimum((along * 5).astype(int), 4)]
    park = (lat > 40.768) & (lat < 40.797) & (lon > -73.981) & (lon < -73.949)
    theta = np.where(park, -2.0, theta)
    return theta, theta + SIGMA * rng.standard_normal(theta.size)


def grid_signal(side: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """``side × side`` image: 4 × 4 blocks of random levels and a disc, plus N(0, σ²) noise."""
    levels = rng.integers(-3, 4, size=(4, 4)).astype(np.float64)
    i, j = np.indices((side, side))
    theta = levels[(4 * i) // side, (4 * j) // side]
    disc = (i - side / 2) ** 2 + (j - side / 3) ** 2 < (side / 6) ** 2
    theta = np.where(disc, 5.0, theta)
    return theta, theta + SIGMA * rng.standard_normal(theta.shape)


def lattice_edges(side: int) -> np.ndarray:
    idx = np.arange(side * side, dtype=np.int64).reshape(side, side)
    horizontal = np.stack([idx[:, :-1].ravel(), idx[:, 1:].ravel()], axis=1)
    vertical = np.stack([idx[:-1, :].ravel(), idx[1:, :].ravel()], axis=1)
    return np.concatenate([horizontal, vertical])


# --------------------------------------------------------------------------------------
# Measurement helpers
# --------------------------------------------------------------------------------------


def timed(fn: Callable[[], Any], repeats: int) -> tuple[float, Any]:
    """Median wall time of ``repeats`` calls and the last result."""
    times, out = [], None
    for _ in range(repeats):
        t0 = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times), out


def objective(y: np.ndarray, beta: np.ndarray, mat: sp.spmatrix, lam: float) -> float:
    return 0.5 * float(np.sum((y - beta) ** 2)) + lam * float(np.abs(mat @ beta).sum())


def cvxpy_problem(y: np.ndarray, mat: sp.spmatrix) -> tuple[Any, Any, Any]:
    import cvxpy as cp

    beta = cp.Variable(y.size)
    lam = cp.Parameter(nonneg=True)
    problem = cp.Problem(cp.Minimize(0.5 * cp.sum_squares(y - beta) + lam * cp.norm1(mat @ beta)))
    return problem, beta, lam


def cvxpy_solve(problem: Any) -> None:
    problem.solve(solver="CLARABEL")


# --------------------------------------------------------------------------------------
# Benchmarks
# --------------------------------------------------------------------------------------


def solvers_for(order: int) -> list[str]:
    """Order 0 by both solvers (min-cut needs numba, the ``fast`` extra); others by ADMM."""
    if order != 0:
        return ["admm"]
    return (["exact"] if _graph_tv.available() else []) + ["admm"]


def bench_manhattan(repeats: int) -> list[dict[str, Any]]:
    coords, edges = load_manhattan_junctions()
    rng = np.random.default_rng(SEED)
    _, y = manhattan_signal(coords, rng)
    g = as_graph(edges, y.size)
    print(f"Manhattan junction graph: {g.n} nodes, {g.m} edges, order 0 and 1, sigma = {SIGMA}")
    if _graph_tv.available():  # compile (or load from numba's cache) before timing
        trend_filter(
            y[:50], None, np.array([[i, i + 1] for i in range(49)]), lam=1.0, solver="exact"
        )
    rows = []
    for order in (0, 1):
        mat = _make_operator(g, order).matrix

        def cvx_single(mat: sp.spmatrix = mat) -> np.ndarray:
            problem, beta, lam = cvxpy_problem(y, mat)
            lam.value = FIXED_LAM
            cvxpy_solve(problem)
            return np.asarray(beta.value)

        t_cvx, beta_cvx = timed(cvx_single, repeats)
        p_cvx = objective(y, beta_cvx, mat, FIXED_LAM)
        cvx_paths: dict[bytes, tuple[float, list[np.ndarray]]] = {}
        for solver in solvers_for(order):

            def ours_single(order: int = order, solver: str = solver) -> Any:
                return trend_filter(y, None, g, order=order, lam=FIXED_LAM, solver=solver)

            t_ours, fit = timed(ours_single, repeats)
            p_ours = objective(y, fit.estimate, mat, FIXED_LAM)
            rows.append(
                {
                    "case": f"order {order}, {solver}, one solve (lam = {FIXED_LAM:g})",
                    "dpgauss_s": t_ours,
                    "cvxpy_s": t_cvx,
                    "rel_obj": (p_ours - p_cvx) / p_cvx,
                    "work": work(fit.params),
                    "gap": fit.params["gap"],
                }
            )

            def ours_path(order: int = order, solver: str = solver) -> Any:
                return trend_filter(y, SIGMA, g, order=order, lam="sure", solver=solver, **PATH_KW)

            t_path, res = timed(ours_path, repeats)
            path = res.params["path"]
            lams = path["lam"]

            def cvx_path(mat: sp.spmatrix = mat, lams: np.ndarray = lams) -> list[np.ndarray]:
                problem, beta, lam = cvxpy_problem(y, mat)
                out = []
                for value in lams:
                    lam.value = float(value)
                    cvxpy_solve(problem)
                    out.append(np.asarray(beta.value))
                return out

            key = np.asarray(lams).tobytes()  # the same λ grid is timed once
            if key not in cvx_paths:
                cvx_paths[key] = timed(cvx_path, repeats)
            t_cvx_path, betas = cvx_paths[key]
            rel = [
                (p - objective(y, b, mat, float(value))) / objective(y, b, mat, float(value))
                for p, b, value in zip(path["objective"], betas, lams, strict=True)
            ]
            worst = int(np.argmax(np.abs(rel)))
            rows.append(
                {
                    "case": f"order {order}, {solver}, SURE path ({len(lams)} lam, "
                    f"chosen {res.params['lam']:.3g})",
                    "dpgauss_s": t_path,
                    "cvxpy_s": t_cvx_path,
                    "rel_obj": rel[worst],
                    "work": work(res.params),
                    "gap": float(np.max(path["gap"])),
                }
            )
    return rows


def work(params: dict[str, Any]) -> str:
    """ADMM iterations, or min-cut rounds, of a fit."""
    if "rounds" in params:
        return f"{params['rounds']} cuts"
    return f"{params['iterations']} it."


def grid_child(side: int, generic: bool, solver: str) -> None:
    """Run in a fresh process: one order-0 solve on a side × side lattice; print JSON."""
    rng = np.random.default_rng(SEED)
    _, image = grid_signal(side, rng)
    edges = lattice_edges(side)
    y = image.ravel()
    if generic:  # hide the lattice: random node labels force the general sparse-LU solver
        perm = rng.permutation(y.size)
        inv = np.argsort(perm)
        edges, y = inv[edges], y[perm]
    if solver != "admm" and _graph_tv.available():  # numba: compile or load before timing
        trend_filter(
            y[:50], None, np.array([[i, i + 1] for i in range(49)]), lam=1.0, solver="exact"
        )
    t0 = time.perf_counter()
    g = as_graph(edges, y.size)  # edge-list normal form (np.unique), timed separately
    t_graph = time.perf_counter() - t0
    t0 = time.perf_counter()
    fit = trend_filter(
        y, None, g, order=0, lam=FIXED_LAM, tol=GRID_TOL, max_iter=GRID_MAX_ITER, solver=solver
    )
    elapsed = time.perf_counter() - t0
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024  # Linux: KiB
    print(
        json.dumps(
            {
                "seconds": elapsed,
                "graph_seconds": t_graph,
                "peak_rss_gb": peak / 1e9,
                "work": work(fit.params),
                "gap": fit.params["gap"],
                "converged": fit.params["converged"],
                "df": fit.params["df"],
                "solver": fit.params["algorithm"],
            }
        )
    )


def bench_grid(side: int, generic: bool, solver: str) -> dict[str, Any]:
    cmd = [sys.executable, __file__, "--grid-child", str(side), "--solver", solver]
    cmd += ["--generic"] if generic else []
    out = subprocess.run(cmd, capture_output=True, text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def versions() -> str:
    import importlib.metadata as md

    names = ("numpy", "scipy", "cvxpy", "clarabel")
    parts = []
    for name in names:
        try:
            parts.append(f"{name} {md.version(name)}")
        except md.PackageNotFoundError:
            parts.append(f"{name} -")
    return ", ".join(parts)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="1 repeat, 300 x 300 grid")
    parser.add_argument("--no-grid", action="store_true", help="skip the 10^6-node lattice")
    parser.add_argument("--generic", action="store_true", help="also time the grid unlabelled")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument(
        "--blas-threads", default="1", help="BLAS threads (0 = library default); see doc"
    )
    parser.add_argument("--grid-child", type=int, default=0, help=argparse.SUPPRESS)
    parser.add_argument("--solver", default="auto", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.grid_child:
        grid_child(args.grid_child, args.generic, args.solver)
        return
    repeats = 1 if args.quick else args.repeats
    print(
        f"# bench_denoise  {datetime.date.today()}  {platform.python_version()}  "
        f"{platform.machine()}  {os.cpu_count()} CPUs  BLAS threads: {BLAS_THREADS}  "
        f"({versions()})"
    )
    rows = bench_manhattan(repeats)
    print()
    print(
        "| case | dpgauss (s) | cvxpy+Clarabel (s) | speed-up | max rel. objective diff | "
        "ADMM iterations / min cuts | max duality gap |"
    )
    print("|---|---:|---:|---:|---:|---:|---:|")
    for r in rows:
        print(
            f"| {r['case']} | {r['dpgauss_s']:.3f} | {r['cvxpy_s']:.3f} | "
            f"{r['cvxpy_s'] / r['dpgauss_s']:.1f}x | {r['rel_obj']:+.1e} | {r['work']} | "
            f"{r['gap']:.1e} |"
        )
    if args.no_grid:
        return
    side = 300 if args.quick else 1000
    print()
    print(f"Order 0 on a {side} x {side} lattice ({side * side:,} nodes), lam = {FIXED_LAM:g}:")
    print(
        "| solver | time (s) | peak RSS (GB) | ADMM iterations / min cuts | rel. duality gap | df |"
    )
    print("|---|---:|---:|---:|---:|---:|")
    for solver in solvers_for(0):
        for generic in (False, True) if args.generic else (False,):
            r = bench_grid(side, generic, solver)
            print(
                f"| {r['solver']} | {r['seconds']:.1f} | {r['peak_rss_gb']:.2f} | {r['work']} | "
                f"{r['gap']:.1e} | {r['df']} |"
            )


if __name__ == "__main__":
    main()
