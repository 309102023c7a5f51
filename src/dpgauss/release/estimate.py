"""The estimates of a release: noise, denoise, the mean's ratios and their intervals.

:func:`estimate` is step 4 of :func:`~dpgauss.release.pipeline.run_release`, after the
charge: it adds the calibrated noise to the bounded aggregate (:func:`add_noise`: the secure
sampler for a secure release, seeded floating-point noise for an uncharged experiment; the
unnoised aggregate never leaves this module), denoises the released values with σ and the
domain's public structure (post-processing), and builds the table's columns with their
intervals and what the public report says of them.

:func:`add_noise` is the one place noise is drawn, a named module-level function: tests
replace it (``monkeypatch.setattr(estimate, "add_noise", ...)``) to compare whole releases
with exact aggregates; a report built while it is replaced says ``noise_off`` (NOT private).

The output table has one row per key of the domain: ``key, released, denoised, sigma,
released_lower, released_upper, denoised_lower, denoised_upper`` (``[released_lower,
released_upper]`` covers the true bounded value with probability ≥ ``level``, 95 % by
default, exactly for the noise law;
``[denoised_lower, denoised_upper]`` is the denoised value's interval at the same level,
which targets average coverage over keys: :mod:`dpgauss.denoise.result`); graph domains
add ``lat, lon`` of each node, a ``mean`` adds ``sum_released, count_released``.

Means. A mean is released as a noisy centred sum ``S'`` and a noisy count ``C`` of the same
kept records (one Gaussian mechanism on the normalised pair; see
:mod:`dpgauss.release.sensitivity`), and ``released = clip(m + S'/C, lower, upper)`` where ``C
≥ 1`` (empty otherwise); ``sigma`` is the delta-method standard error ``√(σ_S² + (S'/C)²
σ_C²)/C`` (an approximation, stated in the report), and ``[released_lower, released_upper]`` is
the range of ``m + S/C`` over the two level-``(1+level)/2`` intervals of ``S'`` and ``C``,
clipped to the clamping bounds: it covers the true mean of the kept clamped values with
probability ≥ ``level`` (union bound), or is the whole ``[lower, upper]`` when the count's
interval reaches 0. ``denoised`` is the same ratio of the denoised sum and count, and
``[denoised_lower, denoised_upper]`` the same range over the denoised sum's and count's
level-``(1+level)/2`` intervals.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from scipy import sparse, special

from ..denoise import Denoised, ErrorBars
from ..denoise.result import INTERVAL_METHOD, error_bars, public_seed
from ..noise.release import Release
from ..privacy import classical_gaussian_sigma
from .engines.base import Aggregate
from .groups import group_table, median_widths
from .plan import Calibration, ReleasePlan
from .report import candidates_table, error_fields, json_ready

__all__ = ["Estimate", "add_noise", "estimate", "noise_replaced", "ratio", "ratio_range"]


def add_noise(cal: Calibration, y: np.ndarray, seed: int | None) -> Release:
    """``y`` plus the calibrated noise: the one place a release's noise is drawn (the seam).

    A secure calibration draws from the secure sampler (``rng="secure"``, never seeded); an
    uncharged experiment (``secure = false``) draws floating-point noise from
    ``numpy.random.default_rng(seed)``.  The law drawn must be the law planned and charged
    (``cal.noise``), else ``RuntimeError``.

    A secure release first clamps ``y`` to ``±cal.noise.value_limit``, the largest
    magnitude its lattice holds exactly (:func:`dpgauss.noise.release.value_limit`: about
    2^51 grid steps): an aggregate beyond it, which no real source reaches but records could
    make, is released as that bound instead of failing after the charge.  Clamping a
    coordinate to a public range never increases the sensitivity.
    """
    if cal.secure:
        limit = getattr(cal.noise, "value_limit", None)
        if limit is not None:
            y = np.clip(np.asarray(y, dtype=np.float64), -limit, limit)
        rel = cal.mechanism.release(y, rng="secure", **cal.options)
    else:
        rel = cal.mechanism.release(y, rng=np.random.default_rng(seed))
    if rel.noise != cal.noise:  # the charged law must be the law used
        raise RuntimeError("internal error: the release's noise law differs from the charged one")
    return rel


_ADD_NOISE = add_noise


def noise_replaced() -> bool:
    """Whether :func:`add_noise` is replaced (a test's seam): the report then says
    ``noise_off`` and that the output is NOT private."""
    return add_noise is not _ADD_NOISE


@dataclass(frozen=True, eq=False)
class Estimate:
    """What :func:`estimate` returns: the table's ``columns``, the report's ``privacy``
    section (``noise``) and ``denoise`` section (``denoise``), ``noise_off`` when the
    noise seam was replaced (tests only), and the ``revisions`` table of the earlier
    periods a series period was denoised with (:mod:`dpgauss.release.history`)."""

    columns: dict[str, np.ndarray]
    noise: dict[str, Any]
    denoise: dict[str, Any]
    noise_off: bool = False
    revisions: dict[str, np.ndarray] | None = None
    #: ``[[levels]]``: each coarser level's table columns, by level name
    levels: dict[str, dict[str, np.ndarray]] = field(default_factory=dict)
    #: ``[output] groups``: the groups table's columns (:func:`~.groups.group_table`)
    groups: dict[str, list[Any]] | None = None


def estimate(
    plan: ReleasePlan, agg: Aggregate, seed: int | None, timing: dict[str, float] | None = None
) -> Estimate:
    """The noisy release, its denoising and their columns.  ``timing`` (confidential: the
    diagnostics) gets ``denoise_s``, the seconds in the denoiser and its error bars, and
    ``auto`` candidates' own seconds (``denoise <candidate>_s``)."""
    timing = {} if timing is None else timing
    noise_off = noise_replaced()
    spec, sens, cal, domain = plan.spec, plan.sensitivity, plan.calibration, plan.domain
    level = spec.output.level
    d = domain.size
    stat = sens.statistic
    eps, delta = cal.epsilon, cal.delta
    classical = None
    if 0.0 < eps < 1.0:
        with np.errstate(over="ignore", divide="ignore"):  # a subnormal epsilon: no finite σ
            classical = classical_gaussian_sigma(eps, delta, sens.l2)
        classical = classical if math.isfinite(classical) else None
    noise_info: dict[str, Any] = {
        "epsilon": eps,
        "delta": delta,
        "secure": spec.privacy.secure,
        "mechanism": cal.label,
        "sensitivity": sens.l2,
        "analytic_sigma": cal.sigma,
        "classical_sigma": classical,
        "classical_note": "the classical mechanism (Theorem 1) for comparison; valid for "
        "epsilon < 1 only",
        "mu": cal.mu,
        "level": level,
    }
    if stat != "mean":
        y = agg.counts if stat == "count" else agg.sums
        assert y is not None
        rel = add_noise(cal, y, seed)
        values = np.asarray(rel.values, dtype=np.float64)
        t = time.perf_counter()
        hist = plan.history
        if hist is not None and hist.used and plan.history_denoiser is not None:
            # with the published periods before it, on time × the domain's structure
            stacked = np.concatenate([hist.released.ravel(), values])
            den = plan.history_denoiser(stacked, rel.sigma)
            weights = None
            if plan.groups is not None:  # this period's keys: the earlier periods weigh 0
                g = plan.groups.matrix
                weights = sparse.hstack([sparse.csr_matrix((g.shape[0], hist.used * d)), g])
            bars = error_bars(den, rng=_post_rng((stacked, rel.sigma)), weights=weights)
            lo_all, hi_all = bars.interval(level)
            est_all = np.asarray(den.estimate, dtype=np.float64)
            m = hist.used
            den_est, den_lower, den_upper = est_all[m * d :], lo_all[m * d :], hi_all[m * d :]
            revisions = _revisions(plan, est_all[: m * d], lo_all[: m * d], hi_all[: m * d])
            scope = (m + 1) * d
        else:
            den = plan.denoiser(values, rel.sigma)
            weights = None if plan.groups is None else plan.groups.matrix
            bars = error_bars(den, rng=_post_rng((values, rel.sigma)), weights=weights)
            den_lower, den_upper = bars.interval(level)
            den_est = np.asarray(den.estimate, dtype=np.float64)
            revisions, scope = None, d
        timing["denoise_s"] = time.perf_counter() - t
        _candidate_timing(timing, den)
        lower, upper = rel.interval(level)
        noise_info["sigma"] = rel.sigma
        noise_info["sigma_over_analytic"] = rel.sigma / cal.sigma
        noise_info["interval_half_width"] = rel.noise.half_width(level)
        columns = {
            **domain.key_columns(),
            "released": values,
            "denoised": den_est,
            "sigma": np.full(d, rel.sigma),
            "released_lower": np.asarray(lower, dtype=np.float64),
            "released_upper": np.asarray(upper, dtype=np.float64),
            "denoised_lower": np.asarray(den_lower, dtype=np.float64),
            "denoised_upper": np.asarray(den_upper, dtype=np.float64),
        }
        den_info = _den_info(den, bars, rel.sigma, scope, level)
        groups = None
        if plan.groups is not None:
            groups = group_table(plan.groups, values, np.full(d, rel.sigma), bars, level)
            den_info["groups"] = {
                "groups": len(plan.groups.names),
                "table": plan.groups_table.name if plan.groups_table is not None else None,
                **median_widths(groups),
                "method": "sums of keys from the per-key error model, drawn with the per-key "
                "intervals' draws (docs/denoising.md)",
            }
        if hist is not None:
            den_info["history"] = {
                **hist.as_dict(),
                "structure": den.params.get("history_structure"),
                "keys": scope,
                "note_error": "the estimated error and its bounds are over the "
                "denoised periods together"
                if hist.used
                else None,
            }
    else:
        revisions = groups = None
        columns, den_info = _mean_columns(plan, agg, noise_info, seed, timing)
    columns.update(domain.place_columns())
    tables: dict[str, dict[str, np.ndarray]] = {}
    if plan.levels is not None and stat != "mean":  # zoom levels (the spec refuses a mean)
        from .levels_estimate import estimate_levels

        fine = agg.counts if stat == "count" else agg.sums
        assert fine is not None
        t = time.perf_counter()
        columns, tables = estimate_levels(
            plan, fine, seed, columns, noise_info, den_info, add_noise
        )
        timing["levels_s"] = time.perf_counter() - t
    return Estimate(columns, noise_info, den_info, noise_off, revisions, tables, groups)


def _revisions(
    plan: ReleasePlan, est: np.ndarray, lower: np.ndarray, upper: np.ndarray
) -> dict[str, np.ndarray]:
    """The revised denoised values of the earlier periods (:mod:`dpgauss.release.history`):
    one row per earlier period and key, oldest period first."""
    hist, domain = plan.history, plan.domain
    assert hist is not None
    m, d = hist.used, domain.size
    keys = domain.key_columns()
    out: dict[str, np.ndarray] = {
        "period": np.repeat(np.array([p.start for p in hist.periods], dtype=object), d)
    }
    for name, col in keys.items():
        out[name] = np.concatenate([np.asarray(col)] * m) if m else np.asarray(col)[:0]
    out.update({"denoised": est, "denoised_lower": lower, "denoised_upper": upper})
    return out


def _candidate_timing(timing: dict[str, float], *results: Denoised) -> None:
    """``auto``'s seconds per candidate (its ``params["timing"]``) into the confidential
    timing, summed over the denoised parts."""
    for res in results:
        own = res.params.get("timing")
        if isinstance(own, dict):
            for name, seconds in own.items():
                key = f"denoise {name}_s"
                timing[key] = timing.get(key, 0.0) + float(seconds)


def _post_rng(*released: tuple[np.ndarray, float]) -> np.random.Generator:
    """The error bars' simulation stream: post-processing of public values, so not the
    secure sampler; seeded by the released values and their σ (``public_seed``), so that the
    published intervals can be recomputed from the published table."""
    values = np.concatenate([np.ravel(v) for v, _ in released])
    return np.random.default_rng(public_seed(values, [s for _, s in released]))


def _den_info(den: Denoised, bars: ErrorBars, sigma: float, d: int, level: float) -> dict[str, Any]:
    risk = bars.risk if bars.risk is not None else float("nan")
    # timings are confidential (the diagnostics): never in the public report
    params = {k: v for k, v in den.params.items() if k not in ("candidates", "timing")}
    # SURE is unbiased but noisy; its standard deviation is that of the bootstrap
    # replicates' own SURE (dpgauss.denoise.result), 0 for an exact (linear) estimator.
    upper = bars.risk_upper(0.95)
    lo, hi = bars.interval(level)
    err = error_fields(risk, upper, d)  # never a zero or negative error
    info: dict[str, Any] = {
        "method": den.method,
        "estimated_error": err["estimated_error"],
        "estimated_error_sd": bars.risk_sd,
        "estimated_error_upper95": upper,
        **(
            {"estimated_error_note": err["estimated_error_note"]}
            if "estimated_error_note" in err
            else {}
        ),
        "sure": err["sure"],
        "rmse_per_key": err["rmse_per_key"],
        "rmse_per_key_upper95": err["rmse_per_key_upper95"],
        "raw_error": d * sigma * sigma,
        "raw_rmse_per_key": sigma,
        "intervals": {
            "level": level,
            "method": "exact" if bars.source == "exact" else INTERVAL_METHOD,
            "draws": bars.draws,
            "weak_fit": bars.weak,
            "median_width": float(np.median(hi - lo)) if d else None,
            "raw_width": 2.0 * float(-special.ndtri((1.0 - level) / 2.0)) * sigma,
            "target": "coverage at hot spots, next to jumps, on average (docs/denoising.md)",
        },
        "params": json_ready({k: v for k, v in params.items() if not isinstance(v, dict)}),
    }
    if "candidates" in den.params:
        # every candidate auto tried, with its parameters (order, target, λ): report.py
        info["candidates"] = candidates_table(den.params["candidates"], den.params.get("selected"))
    return info


def ratio(s: np.ndarray, c: np.ndarray, m: float, lo: float, hi: float) -> np.ndarray:
    """A mean from its centred sum and count: ``clip(m + s/c, lo, hi)`` where ``c ≥ 1``,
    NaN (empty in the table) elsewhere."""
    ok = c >= 1.0
    out = np.full(np.shape(c), np.nan)
    out[ok] = np.clip(m + s[ok] / c[ok], lo, hi)
    return out


def ratio_range(
    s: np.ndarray,
    c: np.ndarray,
    ws: np.ndarray | float,
    wc: np.ndarray | float,
    m: float,
    lo: float,
    hi: float,
) -> tuple[np.ndarray, np.ndarray]:
    """The range of m + S/C over S ∈ s ± ws, C ∈ c ± wc, clipped to ``[lo, hi]`` (all of
    [lo, hi] if C may be ≤ 0)."""
    d = np.shape(c)[0]
    lower, upper = np.full(d, lo), np.full(d, hi)
    ws_a, wc_a = np.broadcast_to(ws, (d,)), np.broadcast_to(wc, (d,))
    pos = c - wc_a > 0
    if pos.any():
        corners = np.stack(
            [
                m + (s[pos] + a * ws_a[pos]) / (c[pos] + b * wc_a[pos])
                for a in (-1.0, 1.0)
                for b in (-1.0, 1.0)
            ]
        )
        lower[pos] = np.clip(corners.min(axis=0), lo, hi)
        upper[pos] = np.clip(corners.max(axis=0), lo, hi)
    return lower, upper


def _mean_columns(
    plan: ReleasePlan,
    agg: Aggregate,
    noise_info: dict[str, Any],
    seed: int | None,
    timing: dict[str, float],
) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
    spec, sens, cal, domain = plan.spec, plan.sensitivity, plan.calibration, plan.domain
    d = domain.size
    ds, dc = sens.parts["sum"], sens.parts["count"]
    assert agg.sums is not None
    y = np.concatenate([agg.sums / ds, agg.counts / dc])
    rel = add_noise(cal, y, seed)
    noisy = np.asarray(rel.values, dtype=np.float64)
    s_rel, c_rel = noisy[:d] * ds, noisy[d:] * dc
    sig_s, sig_c = rel.sigma * ds, rel.sigma * dc
    t = time.perf_counter()
    den_s = plan.denoiser(s_rel, sig_s)
    den_c = plan.denoiser(c_rel, sig_c)
    post = _post_rng((s_rel, sig_s), (c_rel, sig_c))
    bars_s, bars_c = den_s.error_bars(rng=post), den_c.error_bars(rng=post)
    timing["denoise_s"] = time.perf_counter() - t
    _candidate_timing(timing, den_s, den_c)
    joint = (1.0 + spec.output.level) / 2.0  # each part at (1+level)/2: a union bound
    lo_b, hi_b = float(spec.statistic.lower), float(spec.statistic.upper)  # type: ignore[arg-type]
    m = (lo_b + hi_b) / 2.0
    half = rel.noise.half_width((1.0 + spec.output.level) / 2.0)
    ws, wc = half * ds, half * dc

    released = ratio(s_rel, c_rel, m, lo_b, hi_b)
    denoised = ratio(np.asarray(den_s.estimate), np.asarray(den_c.estimate), m, lo_b, hi_b)
    ok = c_rel >= 1.0
    sigma = np.full(d, np.nan)
    sigma[ok] = np.sqrt(sig_s**2 + (s_rel[ok] / c_rel[ok]) ** 2 * sig_c**2) / c_rel[ok]

    lower, upper = ratio_range(s_rel, c_rel, ws, wc, m, lo_b, hi_b)
    est_s, est_c = np.asarray(den_s.estimate), np.asarray(den_c.estimate)
    den_lower, den_upper = ratio_range(
        est_s,
        est_c,
        bars_s.quantile(joint) * bars_s.scale,
        bars_c.quantile(joint) * bars_c.scale,
        m,
        lo_b,
        hi_b,
    )
    noise_info.update(
        {
            "sigma": rel.sigma,
            "sigma_over_analytic": rel.sigma / cal.sigma,
            "sigma_note": "noise on the normalised pair (sum/Delta_sum, count/Delta_count); "
            "the column 'sigma' is the delta-method standard error of each mean",
            "sigma_sum": sig_s,
            "sigma_count": sig_c,
        }
    )
    columns = {
        **domain.key_columns(),
        "released": released,
        "denoised": denoised,
        "sigma": sigma,
        "released_lower": lower,
        "released_upper": upper,
        "denoised_lower": den_lower,
        "denoised_upper": den_upper,
        "sum_released": m * c_rel + s_rel,
        "count_released": c_rel,
    }
    # The mean's own error, by the delta method from the two parts' error scales, over the
    # keys whose denoised count is at least 1 (where a ratio is written).
    shown = est_c >= 1.0
    ratio_sq = np.zeros(d)
    ratio_sq[shown] = (est_s[shown] / est_c[shown]) ** 2

    def mean_rmse(scale_s: np.ndarray, scale_c: np.ndarray) -> float | None:
        if not shown.any():
            return None
        se2 = (scale_s[shown] ** 2 + ratio_sq[shown] * scale_c[shown] ** 2) / est_c[shown] ** 2
        return float(math.sqrt(np.mean(se2)))

    def inflate(bars: ErrorBars) -> np.ndarray:
        total = float(np.sum(bars.scale**2))
        return bars.scale * math.sqrt(bars.risk_upper(0.95) / total) if total > 0 else bars.scale

    raw = sigma[np.isfinite(sigma)]
    widths = (den_upper - den_lower)[ok]
    info = {
        "method": f"sum: {den_s.method}, count: {den_c.method}",
        "sum": _den_info(den_s, bars_s, sig_s, d, joint),
        "count": _den_info(den_c, bars_c, sig_c, d, joint),
        "rmse_per_key": mean_rmse(bars_s.scale, bars_c.scale),
        "rmse_per_key_upper95": mean_rmse(inflate(bars_s), inflate(bars_c)),
        "raw_rmse_per_key": float(math.sqrt(np.mean(raw**2))) if raw.size else None,
        "intervals": {
            "level": spec.output.level,
            "method": "the range of the ratio over the sum's and the count's intervals at "
            "(1+level)/2 (a union bound)",
            "draws": bars_c.draws,
            "median_width": float(np.median(widths)) if widths.size else None,
            "raw_width": float(np.median((upper - lower)[ok])) if ok.any() else None,
            "target": "coverage at hot spots, next to jumps, on average (docs/denoising.md)",
        },
        "note": "the mean's estimated error is the delta method on the denoised sum and count "
        "(their own estimates are under 'sum' and 'count'); the raw error is the RMS of the "
        "column 'sigma'",
    }
    return columns, info
