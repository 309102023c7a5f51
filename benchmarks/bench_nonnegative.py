"""What ``nonnegative=True`` gains on sparse count maps, per denoiser (issue #26 item 2).

Run from the repository root::

    python benchmarks/bench_nonnegative.py                      # every setting, 20 draws
    python benchmarks/bench_nonnegative.py --draws 5 --size 400  # a quick look

Settings: sparse count maps — mostly zeros, a few isolated hot spots and small blobs
(a hot key's neighbours get part of its count), true counts 0–40 — on a chain, a 2-D grid
(``--size`` keys each) and the same grid given as a graph, at σ ∈ {4, 12, 36} (``--sigmas``).
For every denoiser that applies, ``--draws`` releases ``y = θ + N(0, σ²I)`` are denoised
with and without ``nonnegative=True`` on the same draws, and the table reports

* ``mse off`` / ``mse on``: the mean squared error per key, unclipped and clipped;
* ``gain``: ``mse off / mse on`` (> 1: clipping helps);
* ``sure − loss``: the clipped estimator's mean SURE minus its mean loss, per key, with
  its standard error (0 when SURE is unbiased; SURE-tuned λ makes it slightly optimistic);
* ``neg keys``: the average fraction of keys the unclipped estimate publishes negative.

With ``--coverage`` it also reports, off and on, the 95 % intervals' average coverage over
all keys and over the keys whose truth is 0 or not, and their median width (the lower bound
of a clipped result taken at ``max(lower, 0)``, as :mod:`dpgauss.denoise.result` does for
``params["nonnegative"]``); this runs the error bars' bootstrap (32 refits per fit).

Results are printed as a Markdown table and written to ``--json`` if given.
"""

from __future__ import annotations

import argparse
import json
import math
import time
from collections.abc import Callable

import numpy as np

from dpgauss.denoise import (
    Denoised,
    as_graph,
    auto,
    graph_wavelet_denoise,
    hard_threshold,
    james_stein,
    soft_threshold,
    trend_filter,
    wavelet_denoise,
)
from dpgauss.denoise.structure import lattice_graph

Fn = Callable[[np.ndarray, float, bool], Denoised]


def chain_edges(d: int) -> np.ndarray:
    return np.stack([np.arange(d - 1), np.arange(1, d)], axis=1)


def sparse_counts(edges: np.ndarray, d: int, rng: np.random.Generator) -> np.ndarray:
    """Mostly zeros: 3 % hot keys with counts 1–40, half of them with a blob (each
    neighbour gets half the count with probability 1/2)."""
    theta = np.zeros(d)
    hot = rng.choice(d, max(2, int(0.03 * d)), replace=False)
    theta[hot] = rng.integers(1, 41, hot.size)
    for h in hot[: hot.size // 2]:
        nb = np.concatenate([edges[edges[:, 0] == h, 1], edges[edges[:, 1] == h, 0]])
        keep = nb[rng.random(nb.size) < 0.5]
        theta[keep] = np.maximum(theta[keep], theta[h] // 2)
    return theta


def denoisers(kind: str, shape: tuple[int, ...], edges: np.ndarray) -> dict[str, Fn]:
    d = int(np.prod(shape))
    g = as_graph(edges, d)
    out: dict[str, Fn] = {
        "james_stein": lambda y, s, nn: james_stein(y, s, nonnegative=nn),
        "soft_threshold (sure)": lambda y, s, nn: soft_threshold(
            y, s, threshold="sure", nonnegative=nn
        ),
        "hard_threshold (universal)": lambda y, s, nn: hard_threshold(y, s, nonnegative=nn),
    }
    if kind in ("chain", "grid"):
        out["wavelet (haar)"] = lambda y, s, nn: wavelet_denoise(
            y.reshape(shape), s, nonnegative=nn
        )
    if kind in ("chain", "graph"):
        out["graph_wavelet"] = lambda y, s, nn: graph_wavelet_denoise(y, s, g, nonnegative=nn)
    structure: object = shape if kind == "grid" else g
    out["trend_filter order 0"] = lambda y, s, nn: trend_filter(
        y, s, structure, order=0, nonnegative=nn
    )
    if kind in ("chain", "graph"):
        out["trend_filter order 1"] = lambda y, s, nn: trend_filter(
            y, s, g, order=1, nonnegative=nn
        )
    auto_structure: object = shape if kind != "graph" else g
    out["auto"] = lambda y, s, nn: auto(y.reshape(shape), s, auto_structure, nonnegative=nn)
    return out


def _coverage(res: Denoised, theta: np.ndarray) -> tuple[float, float, float, float]:
    lo, hi = res.interval(0.95)
    lo, hi = np.ravel(lo), np.ravel(hi)
    if res.params.get("nonnegative"):
        lo = np.maximum(lo, 0.0)
    hit = (lo <= theta) & (theta <= hi)
    zero = theta == 0
    return (
        float(hit.mean()),
        float(hit[zero].mean()) if zero.any() else math.nan,
        float(hit[~zero].mean()) if (~zero).any() else math.nan,
        float(np.median(hi - lo)),
    )


def run(
    size: int,
    sigmas: list[float],
    draws: int,
    seed: int,
    only: set[str] | None,
    coverage: bool = False,
) -> list:
    side = round(math.sqrt(size))
    settings = [
        ("chain", (size,), chain_edges(size)),
        ("grid", (side, side), lattice_graph((side, side)).edges),
        ("graph", (side * side,), lattice_graph((side, side)).edges),
    ]
    rows = []
    for kind, shape, edges in settings:
        d = int(np.prod(shape))
        fns = denoisers(kind, shape, edges)
        for sigma in sigmas:
            rng = np.random.default_rng([seed, int(sigma * 1000), d])
            truths = [sparse_counts(edges, d, rng) for _ in range(draws)]
            ys = [t + sigma * rng.standard_normal(d) for t in truths]
            for name, fn in fns.items():
                if only is not None and name not in only:
                    continue
                mse: dict[bool, list[float]] = {False: [], True: []}
                cov: dict[bool, list[tuple[float, ...]]] = {False: [], True: []}
                sure, neg = [], []
                t0 = time.perf_counter()
                for theta, y in zip(truths, ys, strict=True):
                    for nn in (False, True):
                        res = fn(y, sigma, nn)
                        est = np.ravel(res.estimate)
                        mse[nn].append(float(np.mean((est - theta) ** 2)))
                        if coverage:
                            cov[nn].append(_coverage(res, theta))
                        if nn:
                            assert est.min() >= 0.0 and res.params["nonnegative"] is True
                            risk = res.risk if res.risk is not None else math.nan
                            sure.append((risk - float(np.sum((est - theta) ** 2))) / d)
                        else:
                            neg.append(float(np.mean(est < 0)))
                off, on = float(np.mean(mse[False])), float(np.mean(mse[True]))
                bias = float(np.mean(sure))
                bias_se = float(np.std(sure, ddof=1) / math.sqrt(len(sure))) if draws > 1 else 0.0
                rows.append(
                    {
                        "structure": kind,
                        "d": d,
                        "sigma": sigma,
                        "denoiser": name,
                        "mse_off": off,
                        "mse_on": on,
                        "gain": off / on if on > 0 else math.inf,
                        "sure_minus_loss_per_key": bias,
                        "sure_minus_loss_se": bias_se,
                        "negative_keys": float(np.mean(neg)),
                        "raw_mse": sigma * sigma,
                        **(
                            {
                                f"coverage_{k}_{'on' if nn else 'off'}": float(
                                    np.nanmean([c[j] for c in cov[nn]])
                                )
                                for nn in (False, True)
                                for j, k in enumerate(("all", "zero", "nonzero", "width"))
                            }
                            if coverage
                            else {}
                        ),
                        "seconds": time.perf_counter() - t0,
                    }
                )
                r = rows[-1]
                print(
                    f"| {kind} | {sigma:g} | {name} | {r['mse_off']:.3g} | {r['mse_on']:.3g} | "
                    f"{r['gain']:.2f} | {bias:+.2f} ± {bias_se:.2f} | {r['negative_keys']:.0%} | "
                    f"{r['seconds']:.1f} |"
                    + (
                        "".join(
                            f" {r[f'coverage_all_{m}']:.3f} / {r[f'coverage_zero_{m}']:.3f} / "
                            f"{r[f'coverage_nonzero_{m}']:.3f} / {r[f'coverage_width_{m}']:.1f} |"
                            for m in ("off", "on")
                        )
                        if coverage
                        else ""
                    ),
                    flush=True,
                )
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--size", type=int, default=1024, help="keys per setting (default 1024)")
    ap.add_argument("--sigmas", default="4,12,36", help="comma-separated σ (default 4,12,36)")
    ap.add_argument("--draws", type=int, default=20, help="draws per setting (default 20)")
    ap.add_argument("--seed", type=int, default=26)
    ap.add_argument("--only", default=None, help="comma-separated denoiser names")
    ap.add_argument("--json", default=None, help="write the rows to this JSON file")
    ap.add_argument(
        "--coverage", action="store_true", help="also the intervals' coverage and width"
    )
    args = ap.parse_args()
    sigmas = [float(v) for v in args.sigmas.split(",")]
    only = set(args.only.split(",")) if args.only else None
    extra = " cov all/zero/nonzero/width off | … on |" if args.coverage else ""
    print(
        "| structure | σ | denoiser | mse off | mse on | gain | sure − loss (on) | neg keys (off) "
        f"| s |{extra}\n|---|---|---|---|---|---|---|---|---|" + ("---|---|" if extra else "")
    )
    rows = run(args.size, sigmas, args.draws, args.seed, only, args.coverage)
    if args.json:
        with open(args.json, "w", encoding="utf-8") as fh:
            json.dump(rows, fh, indent=1)


if __name__ == "__main__":
    main()
