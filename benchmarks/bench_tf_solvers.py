"""Order-0 trend filtering: the exact min-cut solver against ADMM on real and unusual graphs.

Run from the repository root (numba from the ``fast`` extra; without it only ADMM runs)::

    python benchmarks/bench_tf_solvers.py           # taxi paths + graph families
    python benchmarks/bench_tf_solvers.py --quick   # smaller graphs, 6 taxi paths

What is measured (wall time of ``trend_filter(..., lam="sure")`` for each solver, the
largest certified relative duality gap on the path, the chosen df, and whether ADMM hit
``max_iter``):

1. Real data: the unpruned Manhattan road graph (4,091 junctions) with the bundled taxi
   pickups per junction, released with the analytic Gaussian mechanism (Δ = 5, δ = 1e-6)
   at ε ∈ {0.5, 1, 2}, 10 noise draws each: 30 SURE paths.
2. Graph families with a piecewise-constant signal (10 levels) plus N(0, 1) noise: long
   paths (1-D chains), a star, a complete graph, a random tree and a Barabási–Albert graph.
"""

from __future__ import annotations

import argparse
import platform
import time
import warnings
from collections.abc import Callable

import networkx as nx
import numpy as np

from dpgauss.datasets import load_manhattan_graph, load_trips, snap_to_nodes
from dpgauss.denoise import trend_filter
from dpgauss.denoise.trend_filter import _graph_tv
from dpgauss.privacy import analytic_gaussian_sigma


def solvers() -> list[str]:
    return (["exact"] if _graph_tv.available() else []) + ["admm"]


def run(y: np.ndarray, edges: np.ndarray, sigma: float, solver: str, n_lambdas: int) -> dict:
    t0 = time.perf_counter()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        fit = trend_filter(y, sigma, edges, order=0, lam="sure", solver=solver, n_lambdas=n_lambdas)
    return {
        "seconds": time.perf_counter() - t0,
        "gap": float(np.max(fit.params["path"]["gap"])),
        "df": int(fit.params["df"]),
        "stalled": sum("max_iter" in str(w.message) for w in caught),
        "fallback": "ADMM" in fit.params["algorithm"] and solver == "exact",
        "method": fit.params["algorithm"].split(" (")[0],
    }


def taxi_paths(draws: int) -> None:
    g = load_manhattan_graph()
    trips = load_trips()
    ok = trips.pickup_valid
    node, _ = snap_to_nodes(g, trips.pickup_lat[ok], trips.pickup_lon[ok], 150)
    truth = np.bincount(node[node >= 0], minlength=g.n).astype(float)
    print(
        f"\nTaxi pickups on the Manhattan graph ({g.n} nodes, {len(g.edges)} edges), "
        f"{3 * draws} SURE paths of 20 lam:"
    )
    print("| solver | total time (s) | paths stalled at max_iter | fallbacks | max gap |")
    print("|---|---:|---:|---:|---:|")
    for solver in solvers():
        total, stalled, fallbacks, gap = 0.0, 0, 0, 0.0
        for eps in (0.5, 1.0, 2.0):
            sigma = float(analytic_gaussian_sigma(eps, 1e-6, 5.0))
            for seed in range(draws):
                y = truth + sigma * np.random.default_rng(seed).standard_normal(truth.size)
                r = run(y, np.asarray(g.edges), sigma, solver, 20)
                total += r["seconds"]
                stalled += r["stalled"] > 0
                fallbacks += r["fallback"]
                gap = max(gap, r["gap"])
        print(f"| {solver} | {total:.1f} | {stalled} | {fallbacks} | {gap:.1e} |")


def families(quick: bool) -> None:
    scale = 10 if quick else 1
    cases: dict[str, Callable[[], tuple[np.ndarray, int]]] = {
        f"path {10_000 // scale:,}": lambda: chain(10_000 // scale),
        f"path {30_000 // scale:,}": lambda: chain(30_000 // scale),
        f"star {20_000 // scale:,}": lambda: star(20_000 // scale),
        "complete 300": lambda: (np.array(list(nx.complete_graph(300).edges())), 300),
        f"random tree {50_000 // scale:,}": lambda: (
            np.array(list(nx.random_labeled_tree(50_000 // scale, seed=1).edges())),
            50_000 // scale,
        ),
        f"Barabasi-Albert {20_000 // scale:,}": lambda: (
            np.array(list(nx.barabasi_albert_graph(20_000 // scale, 3, seed=2).edges())),
            20_000 // scale,
        ),
    }
    print("\nGraph families, piecewise-constant signal + N(0, 1), SURE path of 20 lam:")
    print("| graph | solver | method | time (s) | max gap | df | ADMM stalled at max_iter |")
    print("|---|---|---|---:|---:|---:|---:|")
    rng = np.random.default_rng(0)
    for name, make in cases.items():
        edges, n = make()
        y = np.repeat(rng.normal(0, 3, 10), -(-n // 10))[:n] + rng.standard_normal(n)
        for solver in solvers():
            r = run(y, edges, 1.0, solver, 20)
            print(
                f"| {name} | {solver} | {r['method']} | {r['seconds']:.2f} | {r['gap']:.1e} | "
                f"{r['df']} | "
                f"{r['stalled']} |",
                flush=True,
            )


def chain(n: int) -> tuple[np.ndarray, int]:
    return np.stack([np.arange(n - 1), np.arange(1, n)], axis=1), n


def star(n: int) -> tuple[np.ndarray, int]:
    return np.stack([np.zeros(n - 1, dtype=np.int64), np.arange(1, n)], axis=1), n


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args()
    print(f"# bench_tf_solvers  {platform.python_version()}  solvers: {', '.join(solvers())}")
    if _graph_tv.available():  # compile (or load from numba's cache) before timing
        trend_filter(np.arange(5.0), None, np.array([[0, 1], [1, 2]]), lam=1.0, solver="exact")
    taxi_paths(2 if args.quick else 10)
    families(args.quick)


if __name__ == "__main__":
    main()
