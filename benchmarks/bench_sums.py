"""Coverage of the intervals of sums of denoised keys (``Denoised.sum_interval``).

Run from the repository root::

    python benchmarks/bench_sums.py                                   # 100 draws a setting
    python benchmarks/bench_sums.py --draws 12 --size 600 --skip-taxi --methods auto
    python benchmarks/bench_sums.py --draws 6 --only taxi

A reader who sums keys (a neighbourhood's junctions, a district's cells) asks for the error
of the sum.  For every setting of ``bench_coverage.py`` (the same structures, signals and
sparse count maps at ε = 0.1 … 2, and the taxi heat map on the Manhattan graph) and every
denoiser that applies, ``--draws`` releases ``y = θ + N(0, σ²I)`` are denoised and every
group of keys gets the 95 % interval of its sum
(:meth:`dpgauss.denoise.Denoised.sum_interval`, module doc of
:mod:`dpgauss.denoise.result`, "Sums of keys").  The groups are connected: breadth-first
balls of 4, 16, 64 and 256 keys around random centres of the structure's graph (on the
taxi map, balls around the junctions too), 24 of each size, and the whole map.  The table
reports

* coverage by class of group: ``all`` groups, groups of each size, ``hot`` groups (holding
  a key of the top decile of θ) and the ``whole`` map;
* ``width/raw``: the mean width of a sum's interval over the raw one's
  ``2 · 1.96 · √(Σ σ²)`` (never above 1);
* ``gain``: the raw sums' mean squared error over the denoised sums'.

Results go to ``--out`` (default ``docs/results/bench_sums.json``).
"""

from __future__ import annotations

import json
import math
import time
from collections import deque
from pathlib import Path
from typing import Any

import numpy as np
from scipy import sparse

from bench_coverage import Fn, denoisers, setting_arguments, settings

LEVEL = 0.95
SIZES = (4, 16, 64, 256)
PER_SIZE = 24


def balls(edges: np.ndarray, d: int, size: int, count: int, rng: np.random.Generator) -> list:
    """``count`` connected groups of ``size`` keys: breadth-first balls around random centres
    (a ball stops at its component's size)."""
    adj = sparse.coo_matrix((np.ones(len(edges)), (edges[:, 0], edges[:, 1])), shape=(d, d))
    adj = (adj + adj.T).tocsr()
    out = []
    for centre in rng.choice(d, min(count, d), replace=False):
        seen = {int(centre)}
        queue = deque([int(centre)])
        while queue and len(seen) < size:
            node = queue.popleft()
            for nb in adj.indices[adj.indptr[node] : adj.indptr[node + 1]]:
                if len(seen) >= size:
                    break
                if int(nb) not in seen:
                    seen.add(int(nb))
                    queue.append(int(nb))
        out.append(np.fromiter(seen, dtype=np.int64))
    return out


def group_matrix(
    edges: np.ndarray, d: int, theta: np.ndarray, rng: np.random.Generator
) -> tuple[sparse.csr_matrix, dict[str, np.ndarray]]:
    """The 0/1 matrix of the groups (one row a group) and their classes (boolean masks)."""
    groups: list[np.ndarray] = []
    size_of: list[str] = []
    for size in SIZES:
        if size >= d:
            continue
        for g in balls(edges, d, size, PER_SIZE, rng):
            groups.append(g)
            size_of.append(str(size))
    groups.append(np.arange(d))
    size_of.append("whole")
    rows = np.repeat(np.arange(len(groups)), [g.size for g in groups])
    mat = sparse.csr_matrix(
        (np.ones(rows.size), (rows, np.concatenate(groups))), shape=(len(groups), d)
    )
    k = max(1, math.ceil(d / 10))
    cut = np.sort(theta)[::-1][k - 1]
    top = (theta >= cut) & (theta > 0.0)
    hot = np.asarray(mat @ top.astype(np.float64)).ravel() > 0
    labels = np.array(size_of)
    classes = {"all": np.ones(len(groups), bool), "hot": hot & (labels != "whole")}
    for size in [*map(str, SIZES), "whole"]:
        classes[size] = labels == size
    return mat, {name: m for name, m in classes.items() if m.any()}


def measure(
    theta: np.ndarray,
    sigma: float,
    fn: Fn,
    mat: sparse.csr_matrix,
    classes: dict[str, np.ndarray],
    draws: int,
    seed: int,
) -> dict[str, Any]:
    rng = np.random.default_rng(seed)
    z = 1.959963984540054
    truth = np.asarray(mat @ theta).ravel()
    raw_half = z * sigma * np.sqrt(np.asarray(mat.sum(axis=1)).ravel())
    per_class: dict[str, list[float]] = {k: [] for k in classes}
    ratio, loss, raw_loss, t_bars = [], [], [], 0.0
    for _ in range(draws):
        y = theta + sigma * rng.standard_normal(theta.size)
        res = fn(y, sigma)
        t = time.perf_counter()
        lo, hi = res.sum_interval(mat, LEVEL, rng=rng)
        t_bars += time.perf_counter() - t
        inside = (lo <= truth) & (truth <= hi)
        for k, mask in classes.items():
            per_class[k].append(float(inside[mask].mean()))
        ratio.append(float(np.mean((hi - lo) / (2 * raw_half))))
        loss.append(float(np.mean((np.asarray(mat @ np.ravel(res.estimate)).ravel() - truth) ** 2)))
        raw_loss.append(float(np.mean((np.asarray(mat @ y).ravel() - truth) ** 2)))
    return {
        "classes": {k: float(np.mean(v)) for k, v in per_class.items()},
        "width_ratio": float(np.mean(ratio)),
        "gain": float(np.mean(raw_loss) / max(np.mean(loss), 1e-300)),
        "bars_s": t_bars / draws,
    }


COLUMNS = ("all", *map(str, SIZES), "hot", "whole")


def main() -> None:
    ap = setting_arguments(__doc__.split("\n")[0])
    ap.add_argument("--out", default="docs/results/bench_sums.json")
    args = ap.parse_args()
    epsilons = [float(e) for e in args.eps.split(",")]
    structures = settings(args, epsilons, np.random.default_rng(11))
    wanted = None if args.methods is None else set(args.methods.split(","))
    print("| setting | denoiser | " + " | ".join(COLUMNS) + " | width/raw | gain |")
    print("|---|---|" + "---|" * len(COLUMNS) + "---|---|")
    rows = []
    for i, (name, kind, theta, sigma, edges, shape) in enumerate(structures):
        mat, classes = group_matrix(edges, theta.size, theta, np.random.default_rng(100 + i))
        for mname, fn in denoisers(kind, edges, theta.size, shape, args.nonnegative).items():
            if wanted is not None and mname not in wanted:
                continue
            res = measure(theta, sigma, fn, mat, classes, args.draws, seed=2000 + i)
            res.update({"setting": name, "denoiser": mname, "draws": args.draws})
            rows.append(res)
            cells = [
                "-" if c not in res["classes"] else f"{res['classes'][c]:.3f}" for c in COLUMNS
            ]
            print(
                f"| {name} | {mname} | " + " | ".join(cells) + f" | {res['width_ratio']:.2f} | "
                f"{res['gain']:.1f} |",
                flush=True,
            )
    if rows:
        for cls in COLUMNS:
            have = [r for r in rows if cls in r["classes"]]
            if have:
                low = min(have, key=lambda r: r["classes"][cls])
                value = low["classes"][cls]
                print(f"lowest {cls}: {low['setting']} / {low['denoiser']}: {value:.3f}")
        out = Path(args.out)
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
