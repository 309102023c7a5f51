r"""The private selection of keys not known in advance, and their release (issue #30).

A ``[domain] kind = "discovered"`` release (:mod:`dpgauss.release.domains.discovered`) adds
noise to the bounded count of every key found in the data and publishes the keys whose
noisy count passes a threshold τ, with that noisy count, sorted by key: Gaussian
thresholding, whose exact guarantee is proved in :mod:`dpgauss.privacy.partition_selection`
(``docs/security.md``).

**One noisy count, one charge.**  The noisy count that passes τ *is* the released value:
selection and release are one mechanism, ``(ε, δ_μ(ε) + η)``-DP, charged once as a
:class:`~dpgauss.privacy.events.ThresholdEvent` ``(μ, η)`` — planned before the charge,
from public quantities only (:func:`calibrate_selection`).

**The split of δ.**  The spec's ``(ε, δ)`` covers both: the selection gets
``η = SELECTION_SHARE · δ`` (half), the counts the μ-GDP budget ``μ = gdp_mu(ε, δ − η)``
(:func:`~dpgauss.privacy.partition_selection.split`), so ``δ_μ(ε) + η ≤ δ``.

**The bounds.**  ``Δ₀ = min(max_keys_per_unit, max_records_per_unit)`` keys a unit can
create, each count moved by at most ``Δ∞ = min(max_records_per_key,
max_records_per_unit)``; the counts' L2 sensitivity Δ is :mod:`dpgauss.release.sensitivity`'s
over ``Δ₀`` keys (at most ``√Δ₀·Δ∞``; the proof needs only that the counts a unit moves
form a vector of L2 norm at most Δ, on at most Δ₀ keys).

**The noise.**  ``secure = true`` (a release): exact discrete Gaussian noise on the integer
counts, ``N_Z(0, σ_L²)`` (no rounding: counts are integers), σ_L the least whose certified
μ-GDP charge over the ``Δ₀`` coordinates a unit can move is at most μ
(:func:`~dpgauss.privacy.discrete_multivariate.discrete_gaussian_gdp_sigma`; the
coordinates a unit does not move have the same law on both neighbours and add nothing);
the threshold is ``τ = Δ∞ + t`` for the least integer ``t`` whose certified tail
``P[Y > t]`` (:meth:`~dpgauss.noise.release.DiscreteGaussianNoise.tail_above`) gives
``−Δ₀·log(1 − p) ≤ η``.  ``secure = false`` (an uncharged experiment): continuous
``N(0, σ²)`` noise with ``σ = Δ/μ`` and τ of
:func:`~dpgauss.privacy.partition_selection.gaussian_threshold`.

**What is published.**  The released keys, their noisy counts and intervals (the noise
law's, *not* adjusted for the selection: a key just above τ is more likely to have been
pushed up), sorted by key; their number is a DP output and public.  The report's
``privacy.selection`` gives τ, η, the per-key tail, Δ₀, Δ∞ and the split of δ.  The number
of candidate keys is confidential (the diagnostics' ``rows.candidate_keys``).  No denoising:
the keys have no public structure.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np
from scipy import special

from ..noise.discrete_sampler import discrete_gaussian
from ..noise.mechanisms import GaussianMechanism
from ..noise.release import DiscreteGaussianNoise, GaussianNoise, NoisePlan
from ..privacy import classical_gaussian_sigma
from ..privacy.discrete_multivariate import discrete_gaussian_gdp_sigma
from ..privacy.events import GaussianEvent, ThresholdEvent
from ..privacy.partition_selection import (
    SELECTION_SHARE,
    gaussian_tail,
    gaussian_threshold,
    selection_eta_of_tail,
    split,
    tail_for,
    thresholded_delta,
)
from .engines.base import Aggregate
from .estimate import Estimate
from .plan import SIGMA_RANGE, Calibration, ReleasePlan
from .sensitivity import Sensitivity, derive_sensitivity
from .spec import ReleaseSpec

__all__ = [
    "SelectionCalibration",
    "add_selection_noise",
    "calibrate_selection",
    "estimate_selection",
    "selection_bounds",
    "selection_sensitivity",
]


def selection_bounds(spec: ReleaseSpec) -> tuple[int, int]:
    """``(Δ₀, Δ∞)``: the keys one unit can create and the most it adds to one key's count."""
    b = spec.bounds
    k = b.max_keys_per_unit
    assert k is not None  # domains/discovered.check_spec
    d0 = min(k, b.max_records_per_unit) if b.max_records_per_unit else k
    caps = [c for c in (b.max_records_per_key, b.max_records_per_unit) if c is not None]
    return d0, min(caps)


def selection_sensitivity(spec: ReleaseSpec) -> Sensitivity:
    """The counts' L2 sensitivity (:mod:`dpgauss.release.sensitivity`) over the Δ₀ keys a
    unit can move."""
    b = spec.bounds
    d0, _ = selection_bounds(spec)
    return derive_sensitivity(
        "count",
        max_records_per_unit=b.max_records_per_unit,
        max_keys_per_unit=b.max_keys_per_unit,
        max_records_per_key=b.max_records_per_key,
        domain_size=d0,
    )


@dataclass(frozen=True, eq=False)
class SelectionCalibration(Calibration):
    """A :class:`~dpgauss.release.plan.Calibration` with the selection (module docstring):
    ``eta`` (the selection's δ), ``tau`` (the threshold on the noisy count: a key is
    released iff its noisy count is above it), ``tail`` (the per-key tail ``p``),
    ``max_keys`` (Δ₀), ``max_per_key`` (Δ∞) and ``delta_counts`` (δ − η, the counts'
    share).  ``mechanism`` is the continuous Gaussian at ``(ε, δ − η)``; ``mu`` the charge
    of the noise actually drawn."""

    eta: float
    tau: float
    tail: float
    max_keys: int
    max_per_key: int
    delta_counts: float
    delta_total: float

    @property
    def delta(self) -> float:
        """The δ of the whole release at ε: the spec's (selection and counts together)."""
        return self.delta_total

    @property
    def event(self) -> ThresholdEvent:  # type: ignore[override]
        """The one charge: μ-GDP counts beside the selection's η."""
        return ThresholdEvent(self.mu, self.eta)


def calibrate_selection(spec: ReleaseSpec, sens: Sensitivity) -> SelectionCalibration:
    """The noise, threshold and charge of a discovered release (module docstring), from
    public quantities only; ``ValueError`` naming ``[privacy]`` if the noise is out of range."""
    p = spec.privacy
    eps, delta = float(p.epsilon), float(p.delta)  # type: ignore[arg-type]
    d0, cap = selection_bounds(spec)
    mu_budget, eta = split(eps, delta, SELECTION_SHARE)
    rest = delta - eta
    if not mu_budget > 0.0:
        raise ValueError(
            f"[privacy] epsilon = {eps:g}, delta = {delta:g} leave no budget for the counts once "
            f"the selection's delta {eta:g} is set aside"
        )
    mech = GaussianMechanism(eps, rest, sens.l2)
    lo, hi = SIGMA_RANGE
    if not lo <= mech.sigma <= hi:
        raise ValueError(
            f"[privacy] epsilon = {eps:g}, delta = {delta:g} put noise {mech.sigma:.6g} on the "
            f"counts, outside the supported [{lo:g}, {hi:g}]"
        )
    if p.secure:
        try:
            sigma_l = float(discrete_gaussian_gdp_sigma(eps, rest, sens.l2, d0))
        except (ValueError, FloatingPointError) as exc:
            raise ValueError(
                f"[privacy] the secure sampler cannot serve epsilon = {eps:g}, delta = "
                f"{delta:g}: {' '.join(str(exc).split())}"
            ) from None
        law: Any = DiscreteGaussianNoise(sigma_l, 1.0, rounded=False, dim=d0)
        mu = float(law.event(sens.l2).mu)
        tau, tail = _lattice_threshold(law, eta, d0, cap)
        label = "gaussian (analytic), secure discrete gaussian on the integer counts"
    else:
        sigma = mech.sigma  # the analytic σ at (ε, δ − η); raised by ulps until Δ/σ ≤ μ
        while GaussianEvent(sigma, sens.l2).mu > mu_budget:
            sigma = float(np.nextafter(sigma, math.inf))
        law = GaussianNoise(sigma)
        mu = float(GaussianEvent(sigma, sens.l2).mu)
        tau = gaussian_threshold(sigma, eta, d0, cap)
        tail = gaussian_tail(sigma, tau, cap)
        label = "gaussian (analytic)"
    if not mu <= mu_budget:  # unreachable: both calibrations certify μ ≤ gdp_mu(ε, δ − η)
        raise RuntimeError("internal error: the counts' charge exceeds their budget")
    probe = NoisePlan(law, label, d0, eps, rest, sens.l2)
    total = thresholded_delta(mu, eps, eta)
    return SelectionCalibration(
        mech, d0, mu, probe, bool(p.secure), eta, tau, tail, d0, cap, rest, min(delta, total)
    )


def _lattice_threshold(
    law: DiscreteGaussianNoise, eta: float, d0: int, cap: int
) -> tuple[float, float]:
    """``(τ, p)``: ``τ = Δ∞ + t`` for the least integer ``t ≥ 0`` with
    ``−Δ₀ log(1 − P[Y > t]) ≤ η``, and that certified tail."""
    s = law.sigma_lattice
    guess = max(0, math.floor(-s * float(special.ndtri(tail_for(eta, d0)))) - 2)

    def fits(t: int) -> bool:
        return selection_eta_of_tail(law.tail_above(t), d0) <= eta

    t = guess
    while t > 0 and fits(t - 1):
        t -= 1
    while not fits(t):
        t += 1
    return float(cap + t), law.tail_above(t)


def add_selection_noise(
    cal: SelectionCalibration, counts: np.ndarray, seed: int | None
) -> np.ndarray:
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
    assert isinstance(cal, SelectionCalibration) and agg.labels is not None
    level = plan.spec.output.level
    noisy = add_selection_noise(cal, agg.counts, seed)
    keep = noisy > cal.tau
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
        classical = float(classical_gaussian_sigma(eps, cal.delta_counts, cal.sensitivity))
    noise_info: dict[str, Any] = {
        "epsilon": eps,
        "delta": cal.delta_total,
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
            "threshold": cal.tau,
            "rule": "a key found in the data is released iff its noisy count > threshold",
            "eta": cal.eta,
            "per_key_tail": cal.tail,
            "max_keys_per_unit": cal.max_keys,
            "max_records_per_key": cal.max_per_key,
            "delta_split": {
                "selection": cal.eta,
                "counts": cal.delta_counts,
                "share": SELECTION_SHARE,
                "delta": float(plan.spec.privacy.delta),  # type: ignore[arg-type]
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
