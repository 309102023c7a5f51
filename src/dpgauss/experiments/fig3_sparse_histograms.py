"""Figure 3 (paper Appendix B, Fig. 4): sparse histograms.

Each dataset: bin probabilities ``p ~ Dirichlet(α = 1/d, …, 1/d)`` (resampled for every
dataset, which makes the histograms very sparse: a handful of occupied bins whatever d),
then ``n = 500`` draws from ``Multinomial(n, p)``; the released statistic is the
normalised histogram ``θ = counts / n``.  δ = 1e-4 as in the mean-estimation experiment.

Sensitivity (replace-one neighbouring datasets, the same relation as in Figure 2):
replacing one of the n draws by another moves one unit of count out of one bin and into
another, so θ changes by ``−1/n`` in one bin and ``+1/n`` in another (or not at all):
``Δ₁ = 2/n`` and ``Δ₂ = √2/n``.  (Add/remove-one neighbouring would give ``Δ₁ = Δ₂ = 1/n``
for the counts, but it changes n and so the normalisation; replace-one keeps n public.)

Methods and error measure as in :mod:`.fig2_mean_estimation` (per-coordinate MSE over 100
datasets, 20 with ``--quick``); ε ∈ {0.1, 1} and d ∈ {10, 20, 50, …, 10 000}
({10, 100, 1000} with ``--quick``).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from .. import plotting
from .fig2_mean_estimation import DENOISED, METHOD_COLUMNS, auto_claim, compare_methods, lookup
from .runner import Claim, Figure, Point, Summary

__all__ = ["FIGURE", "L1_SENSITIVITY", "L2_SENSITIVITY"]

N = 500
DELTA = 1e-4
#: Replace-one neighbouring: one draw leaves a bin and enters another.
L1_SENSITIVITY = 2.0 / N
L2_SENSITIVITY = math.sqrt(2.0) / N
EPSILONS = (0.1, 1.0)
D_GRID = (10, 20, 50, 100, 200, 500, 1000, 2000, 5000, 10000)
REPS = 100
QUICK_D_GRID = (10, 100, 1000)
QUICK_REPS = 20

COLUMNS = ("d", "epsilon", "delta", "n", "reps", "mean_nonzero_bins", *METHOD_COLUMNS)


def points(quick: bool) -> list[Point]:
    """One point per (ε, d)."""
    d_grid, reps = (QUICK_D_GRID, QUICK_REPS) if quick else (D_GRID, REPS)
    return [
        Point(
            f"d={d},eps={e:g}",
            {"d": d, "epsilon": e, "delta": DELTA, "n": N, "reps": reps},
            cost=reps * d * 4e-6 + 0.002 * reps,
        )
        for e in EPSILONS
        for d in d_grid
    ]


def sample_histograms(rng: np.random.Generator, reps: int, n: int, d: int) -> np.ndarray:
    """``reps`` normalised histograms of n draws, each from its own Dirichlet(1/d) p."""
    p = rng.dirichlet(np.full(d, 1.0 / d), size=reps)
    return rng.multinomial(n, p) / n


def run_point(params: Mapping[str, Any], seed: np.random.SeedSequence) -> list[dict[str, Any]]:
    """Sample the histograms of one (d, ε) point and compare every method on them."""
    d, eps, delta, n, reps = (params[k] for k in ("d", "epsilon", "delta", "n", "reps"))
    data_seed, noise_seed = seed.spawn(2)
    theta = sample_histograms(np.random.default_rng(data_seed), reps, n, d)
    rows = compare_methods(theta, eps, delta, L2_SENSITIVITY, L1_SENSITIVITY, noise_seed)
    head = {
        "d": d,
        "epsilon": eps,
        "delta": delta,
        "n": n,
        "reps": reps,
        "mean_nonzero_bins": float(np.mean(np.count_nonzero(theta, axis=1))),
    }
    return [{**head, **row} for row in rows]


def _x(value: float) -> str:
    return f"{value:.3g}×"


def _verdict(ok: list[bool]) -> str:
    return "agrees" if all(ok) else ("partly" if any(ok) else "disagrees")


def summarize(rows: list[dict[str, Any]]) -> Summary:
    """Headline at the largest d; the appendix's claims checked against the rows."""
    d_grid = sorted({r["d"] for r in rows})
    d_max = d_grid[-1]
    lo, hi = EPSILONS
    numbers: dict[str, float] = {}
    parts = []
    for e in EPSILONS:
        m = lookup(rows, d=d_max, epsilon=e)
        numbers.update({f"mse_eps{e:g}_d{d_max}_{k}": v for k, v in m.items()})
        parts.append(
            f"ε = {e:g}: Laplace {m['laplace']:.3g}, aGM {m['analytic']:.3g}, +JS "
            f"{m['analytic+js']:.3g}, +soft {m['analytic+soft']:.3g}, +auto "
            f"{m['analytic+auto']:.3g}"
        )
    nonzero = max(r["mean_nonzero_bins"] for r in rows)
    headline = (
        f"per-coordinate MSE at d = {d_max} (at most {nonzero:.1f} occupied bins on average; "
        f"Δ₁ = 2/n, Δ₂ = √2/n): " + "; ".join(parts) + "."
    )
    at = {(d, e): lookup(rows, d=d, epsilon=e) for d in d_grid for e in EPSILONS}
    claims = []

    def ratios(e: float, num: str, den: str | tuple[str, ...]) -> dict[int, float]:
        dens = (den,) if isinstance(den, str) else den
        return {d: at[d, e][num] / min(at[d, e][k] for k in dens) for d in d_grid}

    def listing(values: dict[int, float]) -> str:
        return ", ".join(f"{_x(v)} (d={d})" for d, v in values.items())

    # 1. Laplace beats the classical Gaussian.
    r1 = ratios(lo, "classical", "laplace")
    claims.append(
        Claim(
            statement="the Laplace mechanism is better than the classical Gaussian mechanism.",
            measured=f"MSE(classical) / MSE(Laplace) at ε = {lo:g} (the classical mechanism is "
            f"only defined for ε < 1): {listing(r1)}.",
            verdict=_verdict([v > 1 for v in r1.values()]),
        )
    )

    # 2. At ε = 1 Laplace beats aGM, with and without denoising.
    r2 = ratios(hi, "laplace", ("analytic", *DENOISED))
    r2plain = ratios(hi, "laplace", "analytic")
    claims.append(
        Claim(
            statement="at ε = 1 Laplace is better even than the analytic Gaussian mechanism, with "
            "and without denoising.",
            measured=f"MSE(Laplace) / MSE(aGM) at ε = {hi:g}: {listing(r2plain)}; "
            f"MSE(Laplace) / MSE(best of aGM and its denoised versions): {listing(r2)}"
            + (
                f"; denoised aGM beats Laplace at d = "
                f"{', '.join(str(d) for d, v in r2.items() if v > 1)}"
                if any(v > 1 for v in r2.values())
                else ""
            )
            + ".",
            verdict=_verdict([v < 1 for v in r2.values()]),
        )
    )

    # 3. At smaller ε the analytic Gaussian mechanism beats Laplace.
    r3plain = ratios(lo, "laplace", "analytic")
    r3 = ratios(lo, "laplace", ("analytic", *DENOISED))
    plain_ok = [v > 1 for v in r3plain.values()]
    claims.append(
        Claim(
            statement=f"as ε decreases (ε = {lo:g}) the analytic Gaussian mechanism becomes better "
            "than Laplace.",
            measured=f"MSE(Laplace) / MSE(aGM) at ε = {lo:g}: {listing(r3plain)}"
            + ("" if all(plain_ok) else " (without denoising aGM is NOT better)")
            + f"; MSE(Laplace) / MSE(best denoised aGM): {listing(r3)}.",
            verdict="agrees"
            if all(plain_ok)
            else ("partly" if any(plain_ok) or any(v > 1 for v in r3.values()) else "disagrees"),
        )
    )

    # 4. Denoising helps significantly at small ε.
    r4 = ratios(lo, "analytic", DENOISED)
    claims.append(
        Claim(
            statement="denoising gives a significant advantage over the mechanisms without it.",
            measured=f"MSE(aGM) / MSE(best denoised aGM) at ε = {lo:g}: {listing(r4)}; "
            f"at ε = {hi:g}: {listing(ratios(hi, 'analytic', DENOISED))}.",
            verdict=_verdict([v > 2 for v in r4.values()]),
        )
    )

    # 5. Soft thresholding beats shrinkage on sparse data.
    r5 = {e: ratios(e, "analytic+js", "analytic+soft") for e in EPSILONS}
    claims.append(
        Claim(
            statement="on these sparse histograms soft thresholding beats shrinkage (James–Stein).",
            measured="MSE(James–Stein) / MSE(soft) "
            + "; ".join(f"at ε = {e:g}: {listing(v)}" for e, v in r5.items())
            + ".",
            verdict=_verdict([v > 1 for vals in r5.values() for v in vals.values()]),
        )
    )

    # 6. dpgauss's auto selection on sparse data.
    claim, worst = auto_claim(rows)
    numbers["auto_worst_ratio_to_best"] = worst
    claims.append(claim)
    return Summary(headline, tuple(claims), numbers)


def plot(rows: list[dict[str, Any]], path: Path) -> None:
    """One panel per ε: MSE against d for every method."""
    fig, axes = plotting.new_figure(len(EPSILONS))
    for ax, e in zip(axes, EPSILONS, strict=True):
        plotting.method_curves(ax, [r for r in rows if r["epsilon"] == e], "d")
        ax.set_xlabel("number of bins d")
        ax.set_ylabel("MSE per coordinate")
        ax.set_title(f"sparse histograms: ε = {e:g}, δ = {DELTA:g}, n = {N}")
    axes[0].legend(fontsize=7)
    plotting.save(fig, path)


FIGURE = Figure(
    number="3",
    name="fig3_sparse_histograms",
    title="sparse histograms",
    columns=COLUMNS,
    points=points,
    run_point=run_point,
    summarize=summarize,
    plot=plot,
)
