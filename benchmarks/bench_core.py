"""The core of the bias-aware intervals (step 4 of ``dpgauss.denoise.result``), variant by
variant, on the same error bars.

Run from the repository root::

    python benchmarks/bench_core.py --draws 24 --size 600 --signals map --skip-taxi --seed 5000
    python benchmarks/bench_core.py --draws 24 --size 600 --signals map --skip-taxi --seed 5000 \\
        --methods auto --nonnegative
    python benchmarks/bench_core.py --draws 40 --only taxi --methods auto --seed 7000

The settings and denoisers are ``bench_coverage.py``'s (same options; ``--seed`` offsets
the draws' seeds so that the variants are chosen on draws the coverage table does not
use).  Every draw's error bars are computed once (:func:`dpgauss.denoise.error_bars`:
steps 1–3, the expensive part) and step 4 — the hull of the fit interval with a core
around ``y``, the raw fallback, the clip at 0 — is recomputed for every variant:

* ``fit alone``: the bootstrap's ``ŷ ± t·s`` without step 4 (the intervals before issue
  #26);
* ``symmetric c``: the core ``y ± c·z·σ`` on both sides (``c = CORE`` is the rule before
  the toward side);
* ``toward t``: ``y ± CORE·z·σ``, but ``t·z·σ`` on the side of ``y`` where ``ŷ`` lies
  (both sides where ``ŷ = y``; the upper side where θ ≥ 0 is public and ``ŷ = 0``): the
  rule of ``result.py`` with ``TOWARD = t`` (``result.py`` computes every variant, its
  constants set for the call);
* with ``--shift``, ``shifted k``: the rule of ``result.py``, its fit interval first hulled
  with the bias-corrected copy ``(ŷ − k·b) ± t·s``, ``b`` each key's mean deviation of the
  draws' refits from ``ŷ`` (the draws replayed from the error bars' own seed: twice the
  cost).

For each variant: the lowest top-decile coverage over the rows at ε = 2 and over the
others, the lowest next-to-a-jump coverage, the range of the average coverage, and the
mean width over raw at ε = 2 and below.
"""

from __future__ import annotations

import re
import warnings
from typing import Any

import numpy as np

from bench_coverage import denoisers, key_classes, setting_arguments, settings
from dpgauss.denoise import result
from dpgauss.denoise.result import CORE, TOWARD

Z = 1.959963984540054
LEVEL = 0.95


def collect(args: Any) -> list[dict[str, Any]]:
    """One row per setting and denoiser: θ, σ, its classes and every draw's error bars."""
    epsilons = [float(e) for e in args.eps.split(",")]
    wanted = None if args.methods is None else set(args.methods.split(","))
    rows = []
    for i, (name, kind, theta, sigma, edges, shape) in enumerate(
        settings(args, epsilons, np.random.default_rng(7))
    ):
        classes = key_classes(theta, edges, sigma)
        for mname, fn in denoisers(kind, edges, theta.size, shape, args.nonnegative).items():
            if wanted is not None and mname not in wanted:
                continue
            rng = np.random.default_rng(args.seed + i)
            bars, shifts = [], []
            for _ in range(args.draws):
                y = theta + sigma * rng.standard_normal(theta.size)
                res = fn(y, sigma)
                state = rng.bit_generator.state  # to replay the error bars' draws
                bars.append(res.error_bars(rng=rng))
                if args.shift:
                    shifts.append(mean_deviation(res, state, bars[-1]))
            rows.append(
                {
                    "setting": name,
                    "theta": theta,
                    "sigma": sigma,
                    "classes": classes,
                    "bars": bars,
                    "shifts": shifts,
                    "method": mname,
                }
            )
            print(f"  {name} / {mname}", flush=True)
    return rows


def mean_deviation(res: Any, state: dict[str, Any], bars: Any) -> np.ndarray:
    """Each key's mean deviation ``b`` of the refits from ``ŷ`` over the error bars' draws,
    replayed from the generator ``state`` they started from (:func:`dpgauss.denoise.error_bars`
    draws ``ŷ + σ·N(0, I)`` from it, one refit each); zeros for an exact scale."""
    est = np.asarray(res.estimate, dtype=np.float64)
    if bars.source != "bootstrap":
        return np.zeros(est.size)
    gen = np.random.Generator(np.random.PCG64())
    gen.bit_generator.state = state
    sigma = np.broadcast_to(np.asarray(res.sigma, dtype=np.float64), est.shape)
    total = np.zeros(est.shape)
    for _ in range(int(bars.draws)):
        sim = est + sigma * gen.standard_normal(est.shape)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            fit = res.refit(sim)
        total += np.asarray(fit.estimate, dtype=np.float64).reshape(est.shape) - est
    return np.ravel(total) / int(bars.draws)


def interval(
    bars: Any, away: float, toward: float, shift: np.ndarray | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """Step 4 as ``result.py`` computes it (:meth:`ErrorBars.interval`), with ``CORE`` set to
    ``away`` and ``TOWARD`` to ``toward`` for the call; ``away < 0``: the fit interval alone,
    ``ŷ ± t·s`` (no step 4); ``shift``: the fit interval hulled with itself moved by
    ``−shift`` before step 4."""
    if away < 0:
        half = bars.quantile(LEVEL) * np.ravel(bars.scale)
        return np.ravel(bars.estimate) - half, np.ravel(bars.estimate) + half
    if shift is not None:
        est = np.ravel(bars.estimate)
        half = bars.quantile(LEVEL) * np.ravel(bars.scale)
        lo = np.minimum(est - half, est - shift - half)
        hi = np.maximum(est + half, est - shift + half)
        if bars.observed is not None and bars.sigma is not None:
            lo, hi = result._bias_aware(
                lo,
                hi,
                est,
                np.ravel(bars.observed),
                np.ravel(bars.sigma),
                LEVEL,
                bars.nonnegative,
            )
        if bars.nonnegative:
            lo, hi = np.maximum(lo, 0.0), np.maximum(hi, 0.0)
        return lo, hi
    kept = result.CORE, result.TOWARD
    result.CORE, result.TOWARD = away, toward
    try:
        lo, hi = bars.interval(LEVEL)
    finally:
        result.CORE, result.TOWARD = kept
    return np.ravel(lo), np.ravel(hi)


def evaluate(rows: list[dict[str, Any]], away: float, toward: float, shifted: float = 0.0) -> str:
    out = []
    for r in rows:
        theta, sigma = r["theta"], r["sigma"]
        cover: dict[str, list[float]] = {k: [] for k in r["classes"]}
        width = []
        for j, bars in enumerate(r["bars"]):
            shift = shifted * r["shifts"][j] if shifted else None
            lo, hi = interval(bars, away, toward, shift)
            inside = (lo <= theta) & (theta <= hi)
            for k, mask in r["classes"].items():
                cover[k].append(inside[mask].mean())
            width.append(np.mean(hi - lo) / (2 * Z * sigma))
        m = re.search(r"ε=([\d.]+)", r["setting"])
        res = {k: float(np.mean(v)) for k, v in cover.items()}
        out.append((m is not None and float(m.group(1)) >= 2, res, float(np.mean(width))))

    def low(cls: str, at2: bool | None = None) -> str:
        v = [c[cls] for e2, c, _ in out if cls in c and (at2 is None or e2 == at2)]
        return f"{min(v):.3f}" if v else "-"

    def wid(at2: bool) -> str:
        v = [w for e2, _, w in out if e2 == at2]
        return f"{np.mean(v):.3f}" if v else "-"

    alls = [c["all"] for _, c, _ in out]
    return (
        f"| {low('top', True)} | {low('top', False)} | {low('jump')} | "
        f"{min(alls):.3f}–{max(alls):.3f} | {wid(True)} | {wid(False)} |"
    )


def main() -> None:
    ap = setting_arguments(__doc__.split("\n")[0])
    ap.add_argument("--seed", type=int, default=5000, help="the draws' seeds start here")
    ap.add_argument(
        "--shift", action="store_true", help="also the bias-corrected variants (twice the cost)"
    )
    args = ap.parse_args()
    rows = collect(args)
    print("\n| core | top ε=2 (lowest) | top ε<2 | jump | all | width ε=2 | width ε<2 |")
    print("|---|---|---|---|---|---|---|")
    variants = [("fit alone", -1.0, -1.0)]
    variants += [(f"symmetric {c:g}", c, c) for c in (CORE, 0.70, 0.75)]
    variants += [(f"toward {t:g}", CORE, t) for t in (0.75, 0.80, TOWARD, 0.90)]
    for label, away, toward in variants:
        print(f"| {label} {evaluate(rows, away, toward)}", flush=True)
    if args.shift:
        for k in (1.0, 2.0):
            print(f"| shifted {k:g} {evaluate(rows, CORE, TOWARD, k)}", flush=True)


if __name__ == "__main__":
    main()
