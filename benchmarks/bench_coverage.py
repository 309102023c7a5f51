"""Coverage of the denoised intervals on known truths, per denoiser, signal and class of keys.

Run from the repository root::

    python benchmarks/bench_coverage.py                    # every setting, 100 draws each
    python benchmarks/bench_coverage.py --draws 12 --size 600 --signals map --skip-taxi
    python benchmarks/bench_coverage.py --draws 6 --only taxi --methods auto
    python benchmarks/bench_coverage.py --size 10000 --only planar

For every setting (a true vector θ, a structure and a σ) and every denoiser that applies,
``--draws`` releases ``y = θ + N(0, σ²I)`` are denoised and given 95 % intervals
(:meth:`dpgauss.denoise.Denoised.interval`: the bias-aware intervals of
:mod:`dpgauss.denoise.result`), and the table reports

* coverage by class: the average over draws of the fraction of keys of the class whose θ
  lies in its interval — ``all`` keys, the ``top decile`` (the ⌈d/10⌉ keys of largest θ,
  ties at the boundary included, never a zero: the hot spots), keys ``next to a jump``
  (θ differs from some neighbour's by more than σ) and keys of ``zero`` truth; and the
  worst single draw over all keys;
* ``width/raw``: the mean interval width over the raw interval's ``2 · 1.96 σ`` (never
  above 1: the intervals are never wider than the raw ones);
* ``gain``: ``dσ²`` over the mean squared error of the denoised vector;
* ``cost``: the time of the error bars over the denoiser's own time.

Settings: piecewise-constant, smooth and sparse signals (σ = 1) on a chain, a 2-D grid and
a random planar graph (a Delaunay triangulation of uniform points) of ``--size`` keys;
sparse count maps on the same structures (``map``: 74 % zeros, small counts, 2 % isolated
hot spots of 10–40; one record per unit, so σ is the analytic Gaussian's at Δ₂ = 1,
δ = 1e-6: 36.3, 8.1, 4.2 and 2.2 at ε = 0.1, 0.5, 1, 2); and the taxi heat map's true
bounded vector on the Manhattan graph (``bounded_aggregate`` of the demo's spec), both at
every ``--eps`` (default 0.1, 0.5, 1, 2).  Results are printed as a Markdown table and
written to ``--out`` (default ``docs/results/bench_coverage.json``).
"""

from __future__ import annotations

import argparse
import json
import math
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from dpgauss.denoise import (
    Denoised,
    Structure,
    as_graph,
    auto,
    graph_wavelet_denoise,
    hard_threshold,
    james_stein,
    soft_threshold,
    trend_filter,
    wavelet_denoise,
)

Fn = Callable[[np.ndarray, float], Denoised]
LEVEL = 0.95


def chain_edges(d: int) -> np.ndarray:
    return np.stack([np.arange(d - 1), np.arange(1, d)], axis=1)


def grid_edges(rows: int, cols: int) -> np.ndarray:
    idx = np.arange(rows * cols).reshape(rows, cols)
    return np.concatenate(
        [
            np.stack([idx[:, :-1].ravel(), idx[:, 1:].ravel()], 1),
            np.stack([idx[:-1, :].ravel(), idx[1:, :].ravel()], 1),
        ]
    )


def planar(d: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    from scipy.spatial import Delaunay

    pts = rng.random((d, 2))
    tri = Delaunay(pts).simplices
    e = np.concatenate([tri[:, [0, 1]], tri[:, [1, 2]], tri[:, [0, 2]]])
    e = np.unique(np.sort(e, axis=1), axis=0)
    return pts, e


def signals(coords: np.ndarray, rng: np.random.Generator) -> dict[str, np.ndarray]:
    """Piecewise constant (nearest of 12 centres), smooth and sparse, σ = 1 units."""
    d = coords.shape[0]
    centres = rng.random((12, coords.shape[1]))
    label = np.argmin(((coords[:, None, :] - centres[None]) ** 2).sum(-1), axis=1)
    levels = rng.normal(0.0, 3.0, 12)
    smooth = 3.0 * np.sin(2 * math.pi * coords[:, 0]) * np.cos(3 * math.pi * coords[:, -1])
    sparse = np.zeros(d)
    hot = rng.choice(d, max(1, d // 20), replace=False)
    sparse[hot] = rng.normal(0.0, 6.0, hot.size)
    return {"piecewise": levels[label], "smooth": smooth, "sparse": sparse}


def key_classes(theta: np.ndarray, edges: np.ndarray, sigma: float) -> dict[str, np.ndarray]:
    """The classes of keys the table reports (each a boolean mask over the keys).

    ``all``; ``top`` the top decile (the ``⌈d/10⌉`` keys of largest true value, ties at the
    boundary included, zeros never); ``jump`` the keys next to a jump (θ differs from some
    neighbour's by more than σ); ``zero`` (θ = 0).  A class with no key is left out.
    """
    diff = np.abs(theta[edges[:, 0]] - theta[edges[:, 1]])
    jump = np.zeros(theta.size)
    np.maximum.at(jump, edges[:, 0], diff)
    np.maximum.at(jump, edges[:, 1], diff)
    k = max(1, math.ceil(theta.size / 10))
    cut = np.sort(theta)[::-1][k - 1]
    top = (theta >= cut) & (theta > 0.0) if cut <= 0.0 else theta >= cut
    out = {"all": np.ones(theta.size, bool), "top": top, "jump": jump > sigma, "zero": theta == 0}
    return {name: mask for name, mask in out.items() if mask.any()}


CLASSES = ("all", "top", "jump", "zero")


def sparse_map(d: int, rng: np.random.Generator, zeros: float = 0.74) -> np.ndarray:
    """Counts like a map of rare events, one record per unit: ``zeros`` of the keys are 0,
    most of the others small counts (geometric, mean 2, at most 9), and a few isolated
    hot spots (2 % of the keys, 10–40) at random places."""
    theta = np.zeros(d)
    hot = rng.choice(d, max(1, d // 50), replace=False)
    theta[hot] = rng.integers(10, 41, hot.size)
    rest = np.setdiff1d(np.arange(d), hot)
    small = rng.choice(rest, max(0, round((1.0 - zeros) * d) - hot.size), replace=False)
    theta[small] = np.minimum(rng.geometric(0.5, small.size), 9)
    return theta


def count_sigma(eps: float) -> float:
    """σ of a count with one record per unit (Δ₂ = 1) at (ε, δ = 1e-6), analytic."""
    from dpgauss.privacy import analytic_gaussian_sigma

    return float(analytic_gaussian_sigma(eps, 1e-6, 1.0))


def denoisers(
    kind: str, edges: np.ndarray, d: int, shape: tuple[int, ...], nonnegative: bool = False
) -> dict[str, Fn]:
    """The denoisers of a setting; ``nonnegative`` passes θ ≥ 0 (public for counts) to each."""
    g = as_graph(edges, d)
    nn = nonnegative
    out: dict[str, Fn] = {
        "james_stein": lambda y, s: james_stein(y, s, target="mean", nonnegative=nn),
        "soft_threshold": lambda y, s: soft_threshold(y, s, threshold="sure", nonnegative=nn),
        "hard_threshold": lambda y, s: hard_threshold(y, s, nonnegative=nn),
        "graph_wavelet": lambda y, s: graph_wavelet_denoise(y, s, g, nonnegative=nn),
        "trend_filter_0": lambda y, s: trend_filter(y, s, g, order=0, lam="sure", nonnegative=nn),
    }
    if kind in ("chain", "grid"):
        out["wavelet"] = lambda y, s: wavelet_denoise(y, s, shape, nonnegative=nn)
    if d <= 20_000 and kind != "grid":
        out["trend_filter_1"] = lambda y, s: trend_filter(
            y, s, g, order=1, lam="sure", nonnegative=nn
        )
    grid = shape if kind in ("chain", "grid") else None
    known = Structure(graph=g, grid=grid)
    out["auto"] = lambda y, s: auto(y, s, known, nonnegative=nn)
    return out


def measure(
    theta: np.ndarray, sigma: float, fn: Fn, classes: dict[str, np.ndarray], draws: int, seed: int
) -> dict[str, Any]:
    rng = np.random.default_rng(seed)
    z = 1.959963984540054
    cover, width, ratio, loss, t_fit, t_bars = [], [], [], [], 0.0, 0.0
    per_class: dict[str, list[float]] = {k: [] for k in classes}
    for _ in range(draws):
        y = theta + sigma * rng.standard_normal(theta.size)
        t = time.perf_counter()
        res = fn(y, sigma)
        t_fit += time.perf_counter() - t
        t = time.perf_counter()
        lo, hi = res.interval(LEVEL, rng=rng)
        t_bars += time.perf_counter() - t
        lo, hi = np.ravel(lo), np.ravel(hi)
        inside = (lo <= theta) & (theta <= hi)
        cover.append(inside.mean())
        for k, mask in classes.items():
            per_class[k].append(inside[mask].mean())
        width.append(np.median(hi - lo) / (2 * z * sigma))
        ratio.append(np.mean(hi - lo) / (2 * z * sigma))
        loss.append(np.mean((np.ravel(res.estimate) - theta) ** 2))
    others = [k for k in per_class if k != "all"]
    worst = min(others, key=lambda k: np.mean(per_class[k])) if others else "-"
    return {
        "coverage": float(np.mean(cover)),
        "worst_draw": float(np.min(cover)),
        "classes": {k: float(np.mean(v)) for k, v in per_class.items()},
        "worst_class": worst,
        "worst_class_coverage": float(np.mean(per_class[worst])) if others else math.nan,
        "width": float(np.mean(width)),
        "width_ratio": float(np.mean(ratio)),
        "gain": float(sigma**2 / np.mean(loss)),
        "cost": t_bars / max(t_fit, 1e-12),
        "fit_s": t_fit / draws,
    }


def taxi_settings(epsilons: list[float]) -> list[tuple[str, np.ndarray, float]]:
    from dpgauss.demo import demo_spec
    from dpgauss.privacy import analytic_gaussian_sigma
    from dpgauss.release.pipeline import bounded_aggregate
    from dpgauss.release.plan import sensitivity_of

    spec = demo_spec(Path("/tmp/bench-coverage"))
    truth = np.asarray(bounded_aggregate(spec, salt=1).counts, dtype=np.float64)
    l2 = sensitivity_of(spec).l2
    out = []
    for eps in epsilons:
        out.append((f"taxi ε={eps:g}", truth, float(analytic_gaussian_sigma(eps, 1e-6, l2))))
    return out


Setting = tuple[str, str, np.ndarray, float, np.ndarray, tuple[int, ...]]


def settings(
    args: argparse.Namespace, epsilons: list[float], rng: np.random.Generator
) -> list[Setting]:
    """The settings of ``args`` (``size``, ``only``, ``signals``, ``skip_taxi``): (name, kind,
    θ, σ, edges, shape) for every structure, signal and ε (module docstring)."""
    d = args.size
    structures: list[Setting] = []
    cols = round(math.sqrt(d))
    while d % cols:
        cols -= 1
    wanted_signals = None if args.signals is None else args.signals.split(",")
    for kind in ("chain", "grid", "planar"):
        if args.only not in (None, kind):
            continue
        shape: tuple[int, ...]
        if kind == "chain":
            coords = (np.arange(d) / d)[:, None]
            edges, shape = chain_edges(d), (d,)
        elif kind == "grid":
            r, c = d // cols, cols
            yy, xx = np.mgrid[0:r, 0:c]
            coords = np.stack([yy.ravel() / r, xx.ravel() / c], 1)
            edges, shape = grid_edges(r, c), (r, c)
        else:
            coords, edges = planar(d, rng)
            shape = (d,)
        for sname, theta in signals(coords, rng).items():
            if wanted_signals is not None and sname not in wanted_signals:
                continue
            structures.append((f"{kind} {sname} d={d:,}", kind, theta, 1.0, edges, shape))
        if wanted_signals is None or "map" in wanted_signals:
            theta = sparse_map(d, rng)
            for eps in epsilons:
                sigma = count_sigma(eps)
                name = f"{kind} map ε={eps:g} σ={sigma:.1f}"
                structures.append((name, kind, theta, sigma, edges, shape))
    if not args.skip_taxi and args.only in (None, "taxi"):
        from dpgauss.datasets import load_manhattan_graph

        medges = np.asarray(load_manhattan_graph().edges)
        for name, theta, sigma in taxi_settings(epsilons):
            structures.append((name, "taxi", theta, sigma, medges, (theta.size,)))
    return structures


def _cell(res: dict[str, Any], name: str) -> str:
    value = res["classes"].get(name)
    return "-" if value is None else f"{value:.3f}"


def setting_arguments(description: str) -> argparse.ArgumentParser:
    """The command line of the settings (:func:`settings`), shared with ``bench_sums.py``."""
    ap = argparse.ArgumentParser(description=description)
    ap.add_argument("--draws", type=int, default=100, help="noise draws per setting")
    ap.add_argument("--size", type=int, default=1000, help="keys of the synthetic settings")
    ap.add_argument("--only", choices=("chain", "grid", "planar", "taxi"), default=None)
    ap.add_argument("--skip-taxi", action="store_true")
    ap.add_argument("--methods", default=None, help="comma-separated denoisers (default all)")
    ap.add_argument(
        "--signals",
        default=None,
        help="comma-separated: piecewise,smooth,sparse,map (default all)",
    )
    ap.add_argument(
        "--eps", default="0.1,0.5,1,2", help="comma-separated ε of the map and taxi settings"
    )
    ap.add_argument(
        "--nonnegative",
        action="store_true",
        help="denoise with θ ≥ 0 known (counts): clipped fits, lower bounds clipped at 0",
    )
    return ap


def main() -> None:
    ap = setting_arguments(__doc__.split("\n")[0])
    ap.add_argument("--out", default="docs/results/bench_coverage.json")
    args = ap.parse_args()
    epsilons = [float(e) for e in args.eps.split(",")]
    rows = []
    structures = settings(args, epsilons, np.random.default_rng(7))
    wanted = None if args.methods is None else set(args.methods.split(","))
    print(
        "| setting | denoiser | all | top decile | next to jump | zero | worst draw "
        "| width/raw | gain | cost |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|")
    for i, (name, kind, theta, sigma, edges, shape) in enumerate(structures):
        classes = key_classes(theta, edges, sigma)
        for mname, fn in denoisers(kind, edges, theta.size, shape, args.nonnegative).items():
            if wanted is not None and mname not in wanted:
                continue
            res = measure(theta, sigma, fn, classes, args.draws, seed=1000 + i)
            res.update({"setting": name, "denoiser": mname, "draws": args.draws})
            rows.append(res)
            print(
                f"| {name} | {mname} | {res['coverage']:.3f} | {_cell(res, 'top')} | "
                f"{_cell(res, 'jump')} | {_cell(res, 'zero')} | {res['worst_draw']:.3f} | "
                f"{res['width_ratio']:.2f} | {res['gain']:.1f} | {res['cost']:.1f}× |",
                flush=True,
            )
    if rows:
        worst = min(rows, key=lambda r: r["coverage"])
        print(f"\nworst setting: {worst['setting']} / {worst['denoiser']}: {worst['coverage']:.3f}")
        for cls in ("top", "jump"):
            have = [r for r in rows if cls in r["classes"]]
            if have:
                low = min(have, key=lambda r: r["classes"][cls])
                print(
                    f"lowest {cls}: {low['setting']} / {low['denoiser']}: {low['classes'][cls]:.3f}"
                )
        out = Path(args.out)
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
