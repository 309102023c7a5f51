"""Orders 1 and 2: the SURE path against cvxpy + Clarabel and against an older checkout.

Run from the repository root (cvxpy and clarabel installed)::

    python benchmarks/bench_tf_order1.py                      # chain orders 1, 2; Manhattan order 1
    python benchmarks/bench_tf_order1.py --base /tmp/tf1base  # also time an older checkout
    python benchmarks/bench_tf_order1.py --quick              # 1,000-node chain only
    python benchmarks/bench_tf_order1.py --cases chain4000-1,manhattan-1 --repeats 3

``--base`` is a clone checked out at the commit to compare with, e.g.::

    git clone -q . /tmp/tf1base && git -C /tmp/tf1base checkout -q 0e6d9e4

What is measured, per case (wall time, median over ``--repeats`` interleaved rounds):

(a) ``trend_filter(y, sigma, edges, order=k, lam="sure")`` (``solver="auto"``);
(b) cvxpy + Clarabel solving ``½‖y − β‖² + λ‖Δβ‖₁`` for the same λ values (those of (a)'s
    ``params["path"]["lam"]``), with the same ``Δ`` (the graph operator of
    :mod:`dpgauss.denoise.trend_filter`: ``L`` for order 1, ``DL`` for order 2), λ a cvxpy
    ``Parameter`` so that the problem is compiled once;
(c) with ``--base``: (a) run by the older checkout in a subprocess (``PYTHONPATH`` set to
    its ``src``), in the first ``--base-repeats`` rounds (default 1: it takes minutes), cut
    off at ``--base-timeout`` seconds (a ratio against a
    cut-off run is a lower bound, marked ``≥``).

Reported: the times and the ratios (b)/(a) and (c)/(a) (the machine is shared: absolute
times mean little), plus the largest certified relative duality gap of (a)'s path and the
largest relative objective excess of (a) over (b) on the path, and the number of λ at which
Clarabel raised ``SolverError`` (timed all the same, left out of the excess).

Cases (``--cases``): chains of 1,000 and 4,000 nodes with a piecewise-linear signal (5
random kinks) + N(0, σ²) noise at orders 1 and 2, and the Manhattan road graph (4,091
nodes) at order 1 with a piecewise-constant signal over node-index blocks + noise.  Other
graph families at order 1, each given as an edge list in a random node order (so that no
chain or lattice is detected), with a signal of 4 random "tents" ``a·max(0, 1 − h/r)`` in
the hop distance ``h`` from random centres + noise: ``rgg`` (4,000 random points in the
unit square, edges shorter than 0.024; a few components), ``grid`` (60 × 65 grid),
``kings`` (60 × 65 grid with diagonals), ``tree`` (4,000-node random recursive tree) and
``parts`` (a 30 × 33 grid, a 1,000-point geometric graph, a 1,000-node tree, a 500-node
path and 10 isolated nodes).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import subprocess
import sys
import time

import numpy as np
import scipy.sparse as sp
from scipy.sparse.csgraph import shortest_path
from scipy.spatial import cKDTree

from dpgauss.datasets import load_manhattan_graph
from dpgauss.denoise import as_graph, trend_filter
from dpgauss.denoise.trend_filter import _make_operator

SIGMA = 1.0


def chain_case(n: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    x = np.linspace(0.0, 1.0, n)
    signal = np.zeros(n)
    for knot in rng.uniform(0.0, 1.0, 5):
        signal += rng.normal(0.0, 20.0) * np.maximum(x - knot, 0.0)
    edges = np.stack([np.arange(n - 1), np.arange(1, n)], axis=1)
    return signal + SIGMA * rng.standard_normal(n), edges


def manhattan_case(seed: int) -> tuple[np.ndarray, np.ndarray]:
    g = load_manhattan_graph()
    rng = np.random.default_rng(seed)
    levels = np.repeat(rng.normal(0.0, 3.0, 8), -(-g.n // 8))[: g.n]
    return levels + SIGMA * rng.standard_normal(g.n), np.asarray(g.edges)


def _grid(h: int, w: int, diagonals: bool = False) -> np.ndarray:
    idx = np.arange(h * w).reshape(h, w)
    pairs = [(idx[:, :-1], idx[:, 1:]), (idx[:-1, :], idx[1:, :])]
    if diagonals:
        pairs += [(idx[:-1, :-1], idx[1:, 1:]), (idx[:-1, 1:], idx[1:, :-1])]
    return np.concatenate([np.stack([a.ravel(), b.ravel()], axis=1) for a, b in pairs])


def _geometric(n: int, radius: float, rng: np.random.Generator) -> np.ndarray:
    pts = rng.uniform(size=(n, 2))
    return np.array(sorted(cKDTree(pts).query_pairs(radius)), dtype=np.int64).reshape(-1, 2)


def _tree(n: int, rng: np.random.Generator) -> np.ndarray:
    parent = np.floor(rng.uniform(size=n - 1) * np.arange(1, n)).astype(np.int64)
    return np.stack([parent, np.arange(1, n)], axis=1)


def family_case(kind: str, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """A graph of the family ``kind`` in a random node order and a noisy tent signal."""
    rng = np.random.default_rng(seed)
    if kind == "rgg":
        n, edges = 4000, _geometric(4000, 0.024, rng)
    elif kind == "grid":
        n, edges = 3900, _grid(60, 65)
    elif kind == "kings":
        n, edges = 3900, _grid(60, 65, diagonals=True)
    elif kind == "tree":
        n, edges = 4000, _tree(4000, rng)
    elif kind == "parts":
        path = np.stack([np.arange(499), np.arange(1, 500)], axis=1)
        blocks = [_grid(30, 33), _geometric(1000, 0.05, rng), _tree(1000, rng), path]
        offsets = np.cumsum([0, 990, 1000, 1000])
        edges = np.concatenate([b + o for b, o in zip(blocks, offsets, strict=True)])
        n = 3500  # the last 10 nodes are isolated
    else:
        raise ValueError(kind)
    edges = rng.permutation(n)[edges]
    lap = as_graph(edges, n).laplacian
    adj = abs(lap - sp.diags(lap.diagonal()))
    centres = rng.choice(n, 4, replace=False)
    hops = shortest_path(adj, unweighted=True, indices=centres)
    hops[~np.isfinite(hops)] = np.inf
    reach = np.median(hops[np.isfinite(hops)])
    signal = (rng.normal(0.0, 3.0, 4)[:, None] * np.maximum(0.0, 1.0 - hops / reach)).sum(0)
    return signal + SIGMA * rng.standard_normal(n), edges


def ours(y: np.ndarray, edges: np.ndarray, order: int) -> tuple[float, dict]:
    t0 = time.perf_counter()
    fit = trend_filter(y, SIGMA, edges, order=order, lam="sure")
    return time.perf_counter() - t0, fit.params


def cvxpy_path(
    y: np.ndarray, edges: np.ndarray, order: int, lams: np.ndarray
) -> tuple[float, list]:
    import cvxpy as cp

    op = _make_operator(as_graph(edges, y.size), order)
    mat = op.matrix
    t0 = time.perf_counter()
    beta = cp.Variable(y.size)
    lam = cp.Parameter(nonneg=True)
    problem = cp.Problem(cp.Minimize(0.5 * cp.sum_squares(y - beta) + lam * cp.norm1(mat @ beta)))
    objectives = []
    for value in lams:
        lam.value = float(value)
        try:
            problem.solve(solver="CLARABEL")
        except cp.error.SolverError:  # Clarabel gives up (very large λ): no objective
            objectives.append(math.nan)
            continue
        b = np.asarray(beta.value)
        objectives.append(0.5 * float((y - b) @ (y - b)) + value * float(np.abs(mat @ b).sum()))
    return time.perf_counter() - t0, objectives


_CHILD = """
import json, sys, time, numpy as np
from dpgauss.denoise import trend_filter
data = np.load(sys.argv[1])
t0 = time.perf_counter()
order = int(data["order"])
fit = trend_filter(data["y"], float(data["sigma"]), data["edges"], order=order, lam="sure")
print(json.dumps({"seconds": time.perf_counter() - t0, "df": int(fit.params["df"])}))
"""


def base_run(
    base: str, y: np.ndarray, edges: np.ndarray, order: int, timeout: float
) -> float | None:
    """Seconds of the older checkout's SURE path, or None if cut off at ``timeout``."""
    path = f"/tmp/bench_tf_order1_{os.getpid()}.npz"
    np.savez(path, y=y, edges=edges, order=order, sigma=SIGMA)
    env = dict(os.environ, PYTHONPATH=os.path.join(base, "src"))
    try:
        out = subprocess.run(
            [sys.executable, "-W", "ignore", "-c", _CHILD, path],
            env=env,
            capture_output=True,
            text=True,
            timeout=timeout,
            check=True,
        )
    except subprocess.TimeoutExpired:
        return None
    finally:
        os.remove(path)
    return float(json.loads(out.stdout.strip().splitlines()[-1])["seconds"])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--base", default=None, help="an older checkout to time as well")
    parser.add_argument("--base-timeout", type=float, default=600.0)
    parser.add_argument("--base-repeats", type=int, default=1, help="runs of the base per case")
    parser.add_argument(
        "--cases",
        default="chain4000-1,manhattan-1,chain1000-2,chain4000-2",
        help="comma-separated: chain1000-1, chain4000-1, manhattan-1, chain1000-2, chain4000-2, "
        "rgg-1, grid-1, kings-1, tree-1, parts-1",
    )
    args = parser.parse_args()
    print(f"# {platform.platform()}, Python {platform.python_version()}")
    builders = {
        "chain1000-1": lambda: ("chain 1,000", *chain_case(1000, 0), 1),
        "chain4000-1": lambda: ("chain 4,000", *chain_case(4000, 0), 1),
        "manhattan-1": lambda: ("Manhattan 4,091", *manhattan_case(0), 1),
        "chain1000-2": lambda: ("chain 1,000", *chain_case(1000, 0), 2),
        "chain4000-2": lambda: ("chain 4,000", *chain_case(4000, 0), 2),
        "rgg-1": lambda: ("geometric 4,000", *family_case("rgg", 0), 1),
        "grid-1": lambda: ("scrambled grid 60×65", *family_case("grid", 0), 1),
        "kings-1": lambda: ("grid + diagonals 60×65", *family_case("kings", 0), 1),
        "tree-1": lambda: ("random tree 4,000", *family_case("tree", 0), 1),
        "parts-1": lambda: ("5 components 3,500", *family_case("parts", 0), 1),
    }
    names = ["chain1000-1"] if args.quick else args.cases.split(",")
    cases = [builders[name]() for name in names]
    print(
        "| graph | order | lambdas | ours (s) | cvxpy+Clarabel (s) | cvxpy / ours | "
        "base (s) | base / ours | max gap | max excess over cvxpy | Clarabel failures |"
    )
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for name, y, edges, order in cases:
        t_ours, t_cvx, t_base = [], [], []
        excess = gap = 0.0
        failed = 0
        n_lams = 0
        cut = False
        for _ in range(args.repeats):  # interleaved: one of each per round
            seconds, params = ours(y, edges, order)
            t_ours.append(seconds)
            path = params["path"]
            n_lams = path["lam"].size
            gap = max(gap, float(np.max(path["gap"])))
            seconds, objectives = cvxpy_path(y, edges, order, path["lam"])
            t_cvx.append(seconds)
            rel = (path["objective"] - np.array(objectives)) / np.array(objectives)
            excess = max(excess, float(np.nanmax(rel)))
            failed = max(failed, int(np.count_nonzero(np.isnan(rel))))
            if args.base is not None and not cut and len(t_base) < args.base_repeats:
                b = base_run(args.base, y, edges, order, args.base_timeout)
                if b is None:
                    cut = True  # one cut-off run is enough: do not repeat it
                else:
                    t_base.append(b)
        a, c = float(np.median(t_ours)), float(np.median(t_cvx))
        if args.base is None:
            base_s = base_r = "—"
        elif cut:
            base_s, base_r = f"> {args.base_timeout:.0f}", f"≥ {args.base_timeout / a:.0f}×"
        else:
            b = float(np.median(t_base))
            base_s, base_r = f"{b:.1f}", f"{b / a:.1f}×"
        print(
            f"| {name} | {order} | {n_lams} | {a:.2f} | {c:.1f} | {c / a:.1f}× | {base_s} | "
            f"{base_r} | {gap:.1e} | {excess:.1e} | {failed} |",
            flush=True,
        )


if __name__ == "__main__":
    main()
