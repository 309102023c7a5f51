"""The release of keys not known in advance, after the charge: the noisy counts of the keys
found, the keys whose noisy count passes the planned threshold, and the report's
``privacy.selection`` (:mod:`dpgauss.release.selection` plans it; issue #30).

:func:`add_selection_noise` is the one place the noise of a discovered release is drawn (a
seam for tests, like :func:`dpgauss.release.estimate.add_noise`): secure exact discrete
Gaussian noise on the integer counts, or seeded floating-point noise for an uncharged
experiment.  :func:`estimate_selection` keeps the keys whose noisy count is above τ,
sorted by key (the aggregate's order), with their noisy counts and the noise law's
intervals (not adjusted for the selection).  The number released is public; the number of
candidates is not (the diagnostics only).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from ..noise.discrete_sampler import discrete_gaussian
from ..noise.release import DiscreteGaussianNoise
from ..privacy import classical_gaussian_sigma
from .engines.base import Aggregate
from .estimate import Estimate
from .plan import Calibration, ReleasePlan

__all__ = ["add_selection_noise", "estimate_selection"]


def add_selection_noise(cal: Calibration, counts: np.ndarray, seed: int | None) -> np.ndarray:
    """The noisy counts of every candidate: the one place a discovered release's noise is
    drawn (a seam for tests, like :func:`dpgauss.release.estimate.add_noise`)."""
    y = np.asarray(counts, dtype=np.float64)
    if y.size == 0:
        return y.copy()
    if cal.secure:
        law = cal.noise
        assert isinstance(law, DiscreteGaussianNoise)
        z = discrete_gaussian(law.sigma_lattice, y.shape, rng="secure")
        return y + z.astype(np.float64)
    gen = np.random.default_rng(seed)
    return y + gen.normal(0.0, float(cal.noise.std), size=y.shape)


_ADD = add_selection_noise


def estimate_selection(
    plan: ReleasePlan, agg: Aggregate, seed: int | None, timing: dict[str, float] | None = None
) -> Estimate:
    """The released keys (those whose noisy count is above τ), their noisy counts and
    intervals, and the report's ``privacy`` section with the selection (module docstring)."""
    cal = plan.calibration
    sel = cal.selection
    assert sel is not None and agg.labels is not None
    level = plan.spec.output.level
    noisy = add_selection_noise(cal, agg.counts, seed)
    keep = noisy > sel.tau
    values = noisy[keep]
    keys = agg.labels[keep]
    n = int(values.size)
    std = float(cal.noise.std)
    half = float(cal.noise.half_width(level))
    lower, upper = values - half, values + half
    columns = {
        "key": keys,
        "released": values,
        "denoised": values.copy(),
        "sigma": np.full(n, std),
        "released_lower": lower,
        "released_upper": upper,
        "denoised_lower": lower.copy(),
        "denoised_upper": upper.copy(),
    }
    eps = cal.epsilon
    classical = None
    if 0.0 < eps < 1.0:
        classical = float(classical_gaussian_sigma(eps, sel.delta_counts, cal.sensitivity))
    noise_info: dict[str, Any] = {
        "epsilon": eps,
        "delta": sel.delta_total,
        "secure": plan.spec.privacy.secure,
        "mechanism": cal.label,
        "sensitivity": cal.sensitivity,
        "analytic_sigma": cal.sigma,
        "classical_sigma": classical
        if classical is not None and math.isfinite(classical)
        else None,
        "classical_note": "the classical mechanism (Theorem 1) at the counts' delta, for "
        "comparison; valid for epsilon < 1 only",
        "sigma": std,
        "mu": cal.mu,
        "level": level,
        "interval_half_width": half,
        "interval_note": "the noise law's interval, not adjusted for the selection (a key "
        "just above the threshold is more likely to have been pushed up)",
        "selection": {
            "method": "gaussian thresholding (dpgauss.privacy.partition_selection)",
            "threshold": sel.tau,
            "rule": "a key found in the data is released iff its noisy count > threshold",
            "eta": sel.eta,
            "per_key_tail": sel.tail,
            "max_keys_per_unit": sel.max_keys,
            "max_records_per_key": sel.max_per_key,
            "delta_split": {
                "selection": sel.eta,
                "counts": sel.delta_counts,
                "share": sel.share,
                "delta": sel.delta,
            },
            "one_charge": "the noisy count that passes the threshold is the released value: "
            "selection and values are one mechanism, charged once (mu, eta)",
            "released_keys": n,
        },
    }
    den_info: dict[str, Any] = {
        "method": "none",
        "note": "no denoising: keys not known in advance have no public structure",
        "raw_rmse_per_key": std,
    }
    return Estimate(columns, noise_info, den_info, add_selection_noise is not _ADD)
