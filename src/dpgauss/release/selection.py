r"""The plan of the private selection of keys not known in advance (issue #30).

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
the keys have no public structure.  This module plans (public quantities only, before the
charge); :mod:`dpgauss.release.selected` draws the noise and selects, after it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np
from scipy import special

from ..noise.mechanisms import GaussianMechanism
from ..noise.release import DiscreteGaussianNoise, GaussianNoise, NoisePlan
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
from .sensitivity import Sensitivity, derive_sensitivity
from .spec import ReleaseSpec

__all__ = ["Selection", "calibrate_selection", "selection_bounds", "selection_sensitivity"]


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


@dataclass(frozen=True)
class Selection:
    """The planned selection (module docstring): ``eta`` (its δ), ``tau`` (the threshold on
    the noisy count: a key is released iff its noisy count is above it), ``tail`` (the
    certified per-key tail ``p``), ``max_keys`` (Δ₀), ``max_per_key`` (Δ∞),
    ``delta_counts`` (δ − η, the counts' share), ``delta`` (the spec's) and
    ``delta_total`` (``δ_μ(ε) + η`` at the charged μ, at most ``delta``)."""

    eta: float
    tau: float
    tail: float
    max_keys: int
    max_per_key: int
    delta_counts: float
    delta: float
    delta_total: float
    share: float = SELECTION_SHARE

    def event(self, mu: float) -> ThresholdEvent:
        """The one charge of the release: the counts' μ beside the selection's η."""
        return ThresholdEvent(mu, self.eta)


def calibrate_selection(
    spec: ReleaseSpec, sens: Sensitivity
) -> tuple[GaussianMechanism, float, NoisePlan, Selection]:
    """``(mechanism, μ, noise plan, selection)`` of a discovered release (module docstring),
    from public quantities only: what :func:`dpgauss.release.plan.calibrate` gives a public
    domain, and the selection; ``ValueError`` naming ``[privacy]`` if the noise is out of
    range."""
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
    mech = GaussianMechanism(eps, rest, sens.l2)  # the range of σ: plan.py checks it
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
    total = min(delta, thresholded_delta(mu, eps, eta))
    return mech, mu, probe, Selection(eta, tau, tail, d0, cap, rest, delta, total)


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
