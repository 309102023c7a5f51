"""Figure 2 (paper Fig. 1, two right panels, and Fig. 3): private mean estimation.

Each dataset (Section 5.2 of the paper): ``x₀ ~ N(0, I_d)`` and ``xᵢ = x₀ + ξᵢ``,
``i = 1..n``, ``ξᵢ`` uniform on ``[−½, ½]^d``, with ``n = 500``.  The released statistic is
the mean ``θ = f(x) = (1/n) Σ xᵢ``.  As in the paper, the points are taken to lie in an L∞
ball of diameter 1 (any two differ by at most 1 per coordinate), so replacing one point
moves θ by at most ``1/n`` per coordinate: ``Δ₂ = √d/n`` and ``Δ₁ = d/n``.  δ = 1e-4.

Methods (all through the public API: :class:`dpgauss.LaplaceMechanism`,
:class:`dpgauss.GaussianMechanism`, :mod:`dpgauss.denoise`): Laplace; classical Gaussian
(ε < 1 only; Theorem 1 is not valid beyond); analytic Gaussian; analytic + James–Stein
(toward zero); analytic + soft thresholding at the universal threshold σ√(2 ln d); analytic
+ ``denoise.auto`` (SURE selection).  The error of a method is the mean squared error per
coordinate ``‖ŷ − θ‖²/d``, averaged over the datasets of a point (100; 20 with
``--quick``), with its standard error.  The classical and analytic releases use the same
standard normal draws (common random numbers), so their MSE ratio is exactly the variance
ratio of Figure 1 at this (ε, δ).

Panel A: MSE against d ∈ {1, 2, 5, …, 1000} at ε = 0.01.  Panel B: MSE against
ε ∈ {0.01, 0.02, 0.05, …, 10} at d = 100 and at d = 1000.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from .. import GaussianMechanism, LaplaceMechanism, denoise, plotting
from .runner import Claim, Figure, Point, Summary

__all__ = ["FIGURE", "METHODS", "compare_methods", "sample_means"]

N = 500
DELTA = 1e-4
D_GRID = (1, 2, 5, 10, 20, 50, 100, 200, 500, 1000)
EPS_GRID = (0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1.0, 2.0, 5.0, 10.0)
PANEL_A_EPS = 0.01
PANEL_B_D = (100, 1000)
REPS = 100
QUICK_D_GRID = (1, 10, 100, 1000)
QUICK_EPS_GRID = (0.01, 0.1, 1.0, 10.0)
QUICK_REPS = 20

#: Methods compared, in plotting order (names of the CSV's ``method`` column).
METHODS = ("laplace", "classical", "analytic", "analytic+js", "analytic+soft", "analytic+auto")
DENOISED = ("analytic+js", "analytic+soft", "analytic+auto")
METHOD_LABELS = {
    "laplace": "Laplace",
    "classical": "the classical Gaussian",
    "analytic": "the analytic Gaussian",
    "analytic+js": "aGM + James–Stein",
    "analytic+soft": "aGM + soft thresholding",
    "analytic+auto": "aGM + auto",
}

#: Columns every method row carries (figure modules add their own parameters in front).
METHOD_COLUMNS = ("method", "mse", "mse_se", "sure_mse", "noise_sigma", "detail")

COLUMNS = ("d", "epsilon", "delta", "n", "reps", *METHOD_COLUMNS)


def sample_means(rng: np.random.Generator, reps: int, n: int, d: int) -> np.ndarray:
    """``reps`` datasets of the paper's model; returns their means θ, shape ``(reps, d)``."""
    x0 = rng.standard_normal((reps, d))
    noise_mean = np.empty((reps, d))
    for r in range(reps):
        noise_mean[r] = rng.uniform(-0.5, 0.5, size=(n, d)).mean(axis=0)
    return x0 + noise_mean


def _errors(estimate: np.ndarray, theta: np.ndarray) -> np.ndarray:
    """Per-dataset mean squared error per coordinate."""
    return np.mean((estimate - theta) ** 2, axis=-1)


def _row(method: str, err: np.ndarray, sigma: float, sure: float, detail: str) -> dict[str, Any]:
    reps = err.size
    se = float(np.std(err, ddof=1) / math.sqrt(reps)) if reps > 1 else math.nan
    return {
        "method": method,
        "mse": float(np.mean(err)),
        "mse_se": se,
        "sure_mse": sure,
        "noise_sigma": sigma,
        "detail": detail,
    }


def _choice(res: denoise.Denoised) -> str:
    if res.method == "james_stein":
        return f"james_stein/{res.params['target']}"
    return res.method


def compare_methods(
    theta: np.ndarray,
    epsilon: float,
    delta: float,
    l2_sensitivity: float,
    l1_sensitivity: float,
    seed: np.random.SeedSequence,
) -> list[dict[str, Any]]:
    """Release every row of ``theta`` (datasets × d) with every method; one row per method.

    The Laplace noise comes from one child of ``seed``, the Gaussian noise from another,
    shared by the classical and analytic mechanisms.  Denoisers see only the analytic
    release and its public σ.  ``sure_mse`` is the average of the estimator's own SURE
    (per coordinate) where it has one: compare it with ``mse`` to see that the reported
    error estimates are honest.  ``detail`` says, for ``auto``, how often it chose what.
    """
    reps, d = theta.shape
    lap_seed, gauss_seed = seed.spawn(2)
    rows = []

    lap = LaplaceMechanism(epsilon, l1_sensitivity).release(
        theta, rng=np.random.default_rng(lap_seed)
    )
    rows.append(_row("laplace", _errors(lap.values, theta), lap.sigma, math.nan, ""))

    if epsilon < 1.0:
        mech = GaussianMechanism(epsilon, delta, l2_sensitivity, calibration="classical")
        cl = mech.release(theta, rng=np.random.default_rng(gauss_seed))
        rows.append(_row("classical", _errors(cl.values, theta), cl.sigma, math.nan, ""))
    else:
        rows.append(
            _row(
                "classical",
                np.full(reps, math.nan),
                math.nan,
                math.nan,
                "not valid for ε ≥ 1 (Theorem 1)",
            )
        )

    rel = GaussianMechanism(epsilon, delta, l2_sensitivity).release(
        theta, rng=np.random.default_rng(gauss_seed)
    )
    y, sigma = np.asarray(rel.values), rel.sigma
    rows.append(_row("analytic", _errors(y, theta), sigma, sigma * sigma, ""))

    est = {m: np.empty_like(y) for m in DENOISED}
    sure = {m: np.empty(reps) for m in DENOISED}
    chosen: Counter[str] = Counter()
    for r in range(reps):
        results = {
            "analytic+js": denoise.james_stein(y[r], sigma, target="zero"),
            "analytic+soft": denoise.soft_threshold(y[r], sigma, threshold="universal"),
            "analytic+auto": denoise.auto(y[r], sigma),
        }
        for m, res in results.items():
            est[m][r] = res.estimate
            sure[m][r] = math.nan if res.risk is None else res.risk / d
        chosen[_choice(results["analytic+auto"])] += 1
    for m in DENOISED:
        detail = ""
        if m == "analytic+auto":
            detail = "; ".join(f"{k} {100 * v / reps:.0f}%" for k, v in chosen.most_common())
        rows.append(_row(m, _errors(est[m], theta), sigma, float(np.mean(sure[m])), detail))
    return rows


def _grid(quick: bool) -> tuple[tuple[int, ...], tuple[float, ...], int]:
    return (QUICK_D_GRID, QUICK_EPS_GRID, QUICK_REPS) if quick else (D_GRID, EPS_GRID, REPS)


def points(quick: bool) -> list[Point]:
    """The (d, ε) pairs of panel A and panel B (shared pairs computed once)."""
    d_grid, eps_grid, reps = _grid(quick)
    pairs = {(d, PANEL_A_EPS) for d in d_grid}
    pairs |= {(d, e) for d in PANEL_B_D for e in eps_grid}
    return [
        Point(
            f"d={d},eps={e:g}",
            {"d": d, "epsilon": e, "delta": DELTA, "n": N, "reps": reps},
            cost=reps * d * (N + 20) * 1e-7 + 0.002 * reps,
        )
        for d, e in sorted(pairs)
    ]


def run_point(params: Mapping[str, Any], seed: np.random.SeedSequence) -> list[dict[str, Any]]:
    """Sample the datasets of one (d, ε) point and compare every method on them."""
    d, eps, delta, n, reps = (params[k] for k in ("d", "epsilon", "delta", "n", "reps"))
    data_seed, noise_seed = seed.spawn(2)
    theta = sample_means(np.random.default_rng(data_seed), reps, n, d)
    rows = compare_methods(theta, eps, delta, math.sqrt(d) / n, d / n, noise_seed)
    head = {"d": d, "epsilon": eps, "delta": delta, "n": n, "reps": reps}
    return [{**head, **row} for row in rows]


# ------------------------------------------------------------------ summary


def lookup(rows: list[dict[str, Any]], **where: Any) -> dict[str, float]:
    """``{method: mse}`` of the rows matching ``where``."""
    return {r["method"]: r["mse"] for r in rows if all(r[k] == v for k, v in where.items())}


def _x(value: float) -> str:
    return f"{value:.3g}×"


def soft_claim(statement: str, prefix: str, ratios: dict[str, float], what: str) -> Claim:
    """The paper's remark that soft thresholding is "a little worse" than no denoising for
    ε > 5, checked on ``ratios`` (label → MSE(soft) / MSE(no denoising))."""
    worse = all(v > 1.0 for v in ratios.values())
    slight = all(v < 1.5 for v in ratios.values())
    return Claim(
        statement=statement,
        measured=prefix
        + ", ".join(f"{_x(v)} ({label})" for label, v in ratios.items())
        + (
            f": worse, and by more than a little — the universal threshold σ√(2 ln d) shrinks "
            f"every one of {what} by λ"
            if worse and not slight
            else ""
        )
        + ".",
        verdict="agrees" if worse and slight else ("partly" if worse else "disagrees"),
    )


def auto_claim(rows: list[dict[str, Any]]) -> tuple[Claim, float]:
    """How far ``denoise.auto`` falls behind the best of aGM, +JS, +soft (universal), worst case.

    Not a claim of the paper: a check of dpgauss's SURE-based selection on the same data.
    """
    regret = []
    for d, e in sorted({(r["d"], r["epsilon"]) for r in rows}):
        m = lookup(rows, d=d, epsilon=e)
        fixed = {k: m[k] for k in ("analytic", "analytic+js", "analytic+soft")}
        best = min(fixed, key=fixed.__getitem__)
        regret.append((m["analytic+auto"] / fixed[best], d, e, best))
    worst, d, e, best = max(regret)
    claim = Claim(
        statement="denoise.auto, choosing its denoiser by SURE from the release alone, does "
        "about as well as the best fixed choice.",
        measured=f"MSE(auto) / min(MSE of aGM, aGM + JS, aGM + soft at σ√(2 ln d)) is at most "
        f"{worst:.3g} over the {len(regret)} points (worst at d = {d}, ε = {e:g}, where "
        f"{METHOD_LABELS[best]} is best).",
        verdict="agrees" if worst < 1.25 else "partly",
        source="dpgauss",
    )
    return claim, worst


def summarize(rows: list[dict[str, Any]]) -> Summary:
    """Headline at ε = 0.01, d = max; the paper's claims checked against the rows."""
    d_grid = sorted({r["d"] for r in rows if r["epsilon"] == PANEL_A_EPS})
    eps_grid = sorted({r["epsilon"] for r in rows if r["d"] == PANEL_B_D[-1]})
    d_max, eps_hi = d_grid[-1], eps_grid[-1]
    top = lookup(rows, d=d_max, epsilon=PANEL_A_EPS)
    numbers = {f"mse_eps{PANEL_A_EPS:g}_d{d_max}_{m}": v for m, v in top.items()}
    headline = (
        f"at ε = {PANEL_A_EPS:g}, d = {d_max} the per-coordinate MSE is {top['analytic']:.4g} "
        f"for the analytic Gaussian, {top['analytic+js']:.4g} with James–Stein "
        f"({_x(top['analytic'] / top['analytic+js'])} lower), {top['analytic+soft']:.4g} with "
        f"soft thresholding, {top['analytic+auto']:.4g} with auto; classical "
        f"{top['classical']:.4g}, Laplace {top['laplace']:.4g}."
    )
    claims = []

    # 1. Denoising at ε = 0.01 beats everything else, sometimes by orders of magnitude.
    gains, winner = {}, {}
    for d in d_grid:
        m = lookup(rows, d=d, epsilon=PANEL_A_EPS)
        plain = {k: m[k] for k in ("laplace", "classical", "analytic")}
        winner[d] = min(plain, key=plain.__getitem__)
        gains[d] = plain[winner[d]] / min(m[k] for k in DENOISED)
    helped = [d for d in d_grid if gains[d] > 1.0]
    not_helped = [d for d in d_grid if gains[d] <= 1.0]
    best = max(gains.values())
    numbers.update({f"denoising_gain_eps{PANEL_A_EPS:g}_d{d}": g for d, g in gains.items()})
    claims.append(
        Claim(
            statement="at ε = 0.01 the denoised methods improve on all the others, sometimes by "
            "orders of magnitude.",
            measured="best undenoised MSE / best denoised MSE at ε = 0.01: "
            + ", ".join(f"{_x(g)} (d={d})" for d, g in gains.items())
            + (
                "; no gain at "
                + ", ".join(f"d = {d} ({METHOD_LABELS[winner[d]]} is best)" for d in not_helped)
                + ": below d = 3 James–Stein returns y unchanged, and soft thresholding at "
                "σ√(2 ln d) is the identity at d = 1"
                if not_helped
                else ""
            )
            + ".",
            verdict="agrees"
            if not not_helped and best >= 100
            else ("partly" if helped and best >= 10 else "disagrees"),
        )
    )

    # 2. James–Stein is the better denoiser in high dimension.
    js_better = {}
    for e in eps_grid:
        m = lookup(rows, d=d_max, epsilon=e)
        js_better[e] = m["analytic+soft"] / m["analytic+js"]
    losses = [e for e, v in js_better.items() if v < 1.0]
    claims.append(
        Claim(
            statement="for this problem James–Stein gives the better accuracy in high dimension.",
            measured=f"MSE(soft) / MSE(James–Stein) at d = {d_max}: "
            + ", ".join(f"{_x(v)} (ε={e:g})" for e, v in js_better.items())
            + (
                f"; soft thresholding wins at ε = {', '.join(f'{e:g}' for e in losses)}"
                if losses
                else ""
            )
            + ".",
            verdict="agrees"
            if not losses
            else ("partly" if len(losses) < len(eps_grid) else "disagrees"),
        )
    )

    # 3. Soft thresholding slightly worse than none for ε > 5 (the paper's taxi remark).
    soft_vs_none = {}
    for d in PANEL_B_D:
        m = lookup(rows, d=d, epsilon=eps_hi)
        soft_vs_none[f"d={d}"] = m["analytic+soft"] / m["analytic"]
    claims.append(
        soft_claim(
            "for ε > 5 soft thresholding does a little worse than no denoising "
            "(said of the taxi data; checked here on this problem).",
            f"MSE(soft) / MSE(analytic) at ε = {eps_hi:g}: ",
            soft_vs_none,
            "these dense coordinates",
        )
    )

    # 4. auto: SURE selection tracks the best of its candidates.
    claim, worst = auto_claim(rows)
    numbers["auto_worst_ratio_to_best"] = worst
    claims.append(claim)
    return Summary(headline, tuple(claims), numbers)


# ------------------------------------------------------------------ plot


def plot(rows: list[dict[str, Any]], path: Path) -> None:
    """Panel A (MSE vs d at ε = 0.01) and panel B (MSE vs ε at d = 100, 1000)."""
    fig, axes = plotting.new_figure(1 + len(PANEL_B_D))
    ax = axes[0]
    plotting.method_curves(ax, [r for r in rows if r["epsilon"] == PANEL_A_EPS], "d")
    ax.set_xlabel("dimension d")
    ax.set_ylabel("MSE per coordinate")
    ax.set_title(f"A: ε = {PANEL_A_EPS:g}, δ = {DELTA:g}, n = {N}")
    ax.legend(fontsize=7)
    for ax, d in zip(axes[1:], PANEL_B_D, strict=True):
        plotting.method_curves(ax, [r for r in rows if r["d"] == d], "epsilon")
        ax.set_xlabel("ε")
        ax.set_ylabel("MSE per coordinate")
        ax.set_title(f"B: d = {d}, δ = {DELTA:g}, n = {N}")
    plotting.save(fig, path)


FIGURE = Figure(
    number="2",
    name="fig2_mean_estimation",
    title="mean estimation",
    columns=COLUMNS,
    points=points,
    run_point=run_point,
    summarize=summarize,
    plot=plot,
)
