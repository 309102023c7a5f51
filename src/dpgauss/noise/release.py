"""The result of a mechanism: the noisy values and everything public about the noise.

A :class:`Release` carries the released vector together with the exact law of the noise
that was added (public: σ, the grid of a secure release), the privacy guarantee it was
calibrated for, and the sensitivity it assumed.  From the law it gives exact
per-coordinate confidence intervals: ``released ± w`` with ``P(|noise| ≤ w) ≥ level``.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Callable
from dataclasses import dataclass
from fractions import Fraction
from typing import Any, Protocol, TypeGuard

import numpy as np
from scipy.special import log_ndtr, ndtri

from .._validation import REAL, UNIT_OPEN, as_real_array, check_interval, check_scalar
from ..privacy._rounding import quotient_up, up
from ..privacy.events import (
    DiscreteGaussianEvent,
    GaussianEvent,
    LaplaceEvent,
    PrivacyEvent,
    event_of,
)

__all__ = [
    "DiscreteGaussianNoise",
    "DiscreteLaplaceNoise",
    "GaussianNoise",
    "LaplaceNoise",
    "NoiseLaw",
    "NoisePlan",
    "Release",
]


class NoiseLaw(Protocol):
    """The public law of the noise added to each coordinate."""

    @property
    def name(self) -> str: ...

    @property
    def std(self) -> float: ...

    def half_width(self, level: float) -> float:
        """The smallest ``w`` with ``P(|noise| ≤ w) ≥ level`` (rounded up)."""
        ...


@dataclass(frozen=True)
class GaussianNoise:
    """``N(0, σ²)`` noise: ``half_width(level) = σ Φ⁻¹((1 + level)/2)``."""

    sigma: float

    @property
    def name(self) -> str:
        return "gaussian"

    @property
    def std(self) -> float:
        return self.sigma

    def half_width(self, level: float) -> float:
        level = check_scalar(level, "level", UNIT_OPEN)
        # Φ⁻¹((1+ℓ)/2) = −Φ⁻¹((1−ℓ)/2): the second form keeps digits for ℓ near 1.
        return float(np.nextafter(-self.sigma * ndtri(0.5 * (1.0 - level)), np.inf))

    def event(self, sensitivity: float) -> GaussianEvent:
        """The privacy event of this noise on a function of L2 sensitivity Δ."""
        return GaussianEvent(self.sigma, sensitivity)


@dataclass(frozen=True)
class LaplaceNoise:
    """Laplace noise of scale ``b``: ``P(|noise| > w) = e^{−w/b}``, so ``w = b ln(1/(1−ℓ))``."""

    scale: float

    @property
    def name(self) -> str:
        return "laplace"

    @property
    def std(self) -> float:
        return math.sqrt(2.0) * self.scale

    def half_width(self, level: float) -> float:
        level = check_scalar(level, "level", UNIT_OPEN)
        return float(np.nextafter(-self.scale * math.log1p(-level), np.inf))

    def event(self, sensitivity: float) -> LaplaceEvent:
        """The privacy event of this noise on a function of L1 sensitivity Δ₁ (ε-DP, not
        μ-GDP: a μ-GDP accountant refuses it)."""
        return LaplaceEvent(self.scale, sensitivity)


# ------------------------------------------------------------------ lattice (discrete) laws
#
# A secure release adds γ·Y to γ·r, where Y is integer noise and r = round(value/γ) is the
# value rounded to the public grid γ·Z (``rounded=True``), or adds Y to an integer value
# itself (γ = 1, ``rounded=False``).  The error of the release is then γ(Y + e) with a
# rounding offset e = r − value/γ ∈ [−1/2, 1/2] that depends on the (secret) value, so the
# interval must cover for *every* e.  With C(k) = P(|Y| ≤ k) and p(k) = P(Y = k), the
# worst-case coverage of the window |Y + e| ≤ W over e is (Y symmetric and unimodal):
#
#   C(k − 1)          for W ∈ [k − 1/2, k)   (at e = 0 only |Y| ≤ k − 1 is covered),
#   C(k) − p(k)       for W ∈ [k, k + 1/2)   (at e = ±1/2 only k of the 2k + 1 central
#                                             integers' mirror images, {−k, …, k − 1}),
#   C(k)              for W = k + 1/2.
#
# So with k the smallest integer with C(k) ≥ level, the smallest W is k if
# C(k) − p(k) ≥ level (k ≥ 1) and k + 1/2 otherwise; without rounding it is k.  Both
# laws below decide C(k) ≥ level through the tail T(k) = 1 − C(k) = 2 P(Y > k) and
# T(k) + p(k), bracketed rigorously in log space; a decision that the bracket cannot
# make is taken on the safe side (the wider interval), so the half-width is never too
# small, and exceeds the smallest one only when P lies within a relative 1e-9 of the
# level (or, for σ > 2^16 lattice units, within the Euler-Maclaurin bracket).

_LOG_MARGIN = 1e-9  # relative error allowance of the brackets (analysis: < 1e-10)
_DIRECT_MAX_SIGMA = 2.0**16  # up to here the tails are summed term by term
_LOG_SQRT_2PI = 0.5 * math.log(2.0 * math.pi)


def _theta_sum(sigma: float) -> float:
    """2 Σ_{k≥1} exp(−2π²σ²k²) for σ ≥ 1/2 (Σ_y e^{−y²/(2σ²)} = σ√(2π)(1 + this))."""
    k = np.arange(1, 7, dtype=np.float64)
    with np.errstate(under="ignore"):
        return float(2.0 * np.sum(np.exp(-2.0 * math.pi**2 * sigma * sigma * k * k)))


def _dg_log_tail_sum(sigma: float, a: int) -> float:
    """log Σ_{y ≥ a} e^{−y²/(2σ²)} for an integer a ≥ 0, summed directly (σ ≤ 2^16).

    Terms are summed relative to the first until they fall below e^-80 of it; the rest is
    bounded by a geometric series (ratio e^{−(2y+1)/(2σ²)} decreases) and added.
    """
    s2 = 2.0 * sigma * sigma
    last = math.ceil(-a + math.sqrt(a * a + 80.0 * s2)) + 1  # j(2a + j)/(2σ²) ≥ 80 at j = last
    total = 0.0
    for start in range(0, last + 1, 1 << 20):
        j = np.arange(start, min(start + (1 << 20), last + 1), dtype=np.float64)
        total += float(np.sum(np.exp(-j * (2.0 * a + j) / s2)))
    nxt = last + 1
    rem = math.exp(-nxt * (2.0 * a + nxt) / s2) / -math.expm1(-(2.0 * (a + nxt) + 1.0) / s2)
    return -(a * a) / s2 + math.log(total + rem)


class _DiscreteGaussianTails:
    """Brackets (lo, hi) on log T(k) and log(T(k) + p(k)) for N_Z(0, σ²)."""

    def __init__(self, sigma: float) -> None:
        self.sigma = sigma
        if sigma > _DIRECT_MAX_SIGMA:
            self.log_z = 0.0  # normalised by σ√(2π): Z̃ = 1 + θ ∈ [1, 1 + 1e-100]
        elif sigma >= 0.5:
            self.log_z = math.log(sigma) + _LOG_SQRT_2PI + math.log1p(_theta_sum(sigma))
        else:
            self.log_z = float(np.logaddexp(0.0, math.log(2.0) + _dg_log_tail_sum(sigma, 1)))

    def bracket(self, k: int, with_pmf: bool) -> tuple[float, float]:
        s = self.sigma
        if s <= _DIRECT_MAX_SIGMA:
            log_q = math.log(2.0) + _dg_log_tail_sum(s, k + 1)
            if with_pmf:
                log_q = float(np.logaddexp(log_q, -(k * k) / (2.0 * s * s)))
            v = log_q - self.log_z
            return v - _LOG_MARGIN, v + _LOG_MARGIN
        # Euler-Maclaurin (p = 2) for φ(y) = e^{−y²/(2σ²)}/(σ√(2π)), a = k + 1:
        # Σ_{y≥a} φ(y) = Φ̄(a/σ) + φ(a)/2 + R, |R| ≤ (1/12)∫_a^∞|φ''|, and ∫_a^∞|φ''| is
        # |φ'(a)| for a ≥ σ (φ convex there) and at most 2|φ'(σ)| = 2φ(σ)/σ otherwise.
        a = k + 1

        def log_phi(y: float) -> float:
            return -((y / s) ** 2) / 2.0 - math.log(s) - _LOG_SQRT_2PI

        log_e = float(np.logaddexp(float(log_ndtr(-a / s)), log_phi(a) - math.log(2.0)))
        if a >= s:
            log_r = math.log(a / (s * s)) + log_phi(a) - math.log(12.0)
        else:
            log_r = math.log(2.0 / s) + log_phi(s) - math.log(12.0)
        ratio = math.exp(log_r - log_e)
        lo = log_e + math.log1p(-ratio) if ratio < 1.0 else -math.inf
        hi = log_e + math.log1p(ratio)
        lo, hi = lo + math.log(2.0), hi + math.log(2.0)
        if with_pmf:
            lp = log_phi(k)
            lo, hi = float(np.logaddexp(lo, lp)), float(np.logaddexp(hi, lp))
        return lo - _LOG_MARGIN, hi + _LOG_MARGIN


def _lattice_half_width(
    bracket: Callable[[int, bool], tuple[float, float]],
    guess: float,
    level: float,
    rounded: bool,
    grid: float,
) -> float:
    """The smallest W (module comment above), times the grid and rounded up."""
    target = math.log1p(-level)  # log(1 − ℓ), accurate also for ℓ near 1

    def holds(k: int, with_pmf: bool) -> bool | None:
        lo, hi = bracket(k, with_pmf)
        if hi <= target:
            return True
        if lo > target:
            return False
        return None  # undecidable within the bracket: treated as False (the safe side)

    k = max(0, math.floor(guess) - 1)
    while k > 0 and holds(k - 1, False):
        k -= 1
    while not holds(k, False):
        k += 1
    half = float(k)
    if rounded:
        half = float(k) if k >= 1 and holds(k, True) else k + 0.5
    width = grid * half
    if Fraction(width) != Fraction(grid) * Fraction(half):
        width = float(np.nextafter(width, np.inf))
    return width


@dataclass(frozen=True)
class DiscreteGaussianNoise:
    """γ·Y with Y ~ N_Z(0, σ²) on the lattice γ·Z (σ = ``sigma_lattice``, γ = ``grid``).

    ``rounded`` says whether the value was first rounded to the grid (a real-valued
    query): then the interval also covers the rounding offset (comment above).  ``dim``
    is the number of released coordinates (it enters the privacy bound, not the law).  For an
    integer query released on a grid γ = 2^-k (γ = 1 included: integers lie on every such
    grid, so nothing is rounded), ``rounded=False`` and the interval is exactly the central
    interval of γ·N_Z(0, σ²).  ``changed``, when given, bounds the number of coordinates in
    which neighbouring values can differ (a unit touches at most that many keys): the
    privacy bound and the rounding term of the lattice sensitivity use
    :attr:`support` = ``min(dim, changed)`` instead of ``dim`` (the other coordinates have
    the same law under both neighbours and add nothing to any divergence; and a coordinate
    whose value does not change is rounded to the same grid point).  ``std`` is γ·√Var[Y],
    Var[Y] < σ² exactly (CKS20 Cor. 9), from Poisson summation (σ ≥ 1) or a direct sum
    (σ < 1).
    """

    sigma_lattice: float
    grid: float = 1.0
    rounded: bool = False
    dim: int = 1
    changed: int | None = None

    @property
    def name(self) -> str:
        return "discrete gaussian"

    def __post_init__(self) -> None:
        c = self.changed
        if c is not None and (isinstance(c, bool) or not isinstance(c, int) or c < 1):
            raise ValueError(f"changed must be a positive integer or None; got {c!r}")

    @property
    def support(self) -> int:
        """The most coordinates in which neighbouring releases can differ: ``dim``, or
        ``min(dim, changed)`` when ``changed`` is given."""
        return self.dim if self.changed is None else min(self.dim, self.changed)

    @property
    def value_limit(self) -> float:
        """The largest magnitude of a value this law releases exactly (:func:`value_limit`)."""
        return value_limit(self.grid, self.rounded)

    def lattice_sensitivity(self, sensitivity: float) -> float:
        """L2 sensitivity in lattice units: Δ/γ + √n (rounded up; n = :attr:`support`, the
        coordinates that can change, each by at most one grid step more than Δ/γ moves it)
        if the values were rounded to the grid, else Δ/γ."""
        sens = quotient_up(sensitivity, self.grid)  # the smallest double ≥ Δ/γ
        if self.rounded:
            sens = up(up(sens + up(math.sqrt(self.support))))
        return sens

    def dominating_mu(self, sensitivity: float) -> float:
        """The μ-GDP charge of this noise at ``sensitivity``: the smallest μ whose μ-GDP
        profile lies above the release's certified profile for ``dim`` coordinates,
        :func:`dpgauss.privacy.discrete_multivariate.discrete_gaussian_vector_mu` at the
        :meth:`lattice_sensitivity`; lets a μ-GDP accountant or the ledger charge the
        release (``GaussianAccountant.add_release``).  The secure mechanisms calibrate
        σ so that this is at most ``gdp_mu(ε, δ)`` (a budget of their own (ε, δ) fits)."""
        return self.event(sensitivity).mu

    def event(self, sensitivity: float) -> DiscreteGaussianEvent:
        """The privacy event of this noise at L2 ``sensitivity`` (in data units): σ and
        the :meth:`lattice_sensitivity` in lattice units, and the :attr:`support` (the
        coordinates that can change; ``dim`` unless ``changed`` is smaller)."""
        return DiscreteGaussianEvent(
            self.sigma_lattice, self.lattice_sensitivity(sensitivity), self.support
        )

    def tail_above(self, k: int) -> float:
        """An upper bound on ``P[Y > k]`` for an integer ``k ≥ 0`` (lattice units), from the
        rigorous bracket of ``T(k) = 2 P[Y > k]``, rounded up: the per-key tail of a
        threshold on integer counts (:mod:`dpgauss.release.selection`), where the mass at
        the threshold is not in the tail only because the rule ``ỹ > τ`` is strict and
        ``τ − Δ∞ = k`` is an integer."""
        if isinstance(k, bool) or not isinstance(k, int | np.integer) or k < 0:
            raise ValueError(f"k must be an integer >= 0; got {k!r}")
        _, hi = _DiscreteGaussianTails(self.sigma_lattice).bracket(int(k), False)
        return min(1.0, up(math.exp(hi) * 0.5 * (1.0 + 1e-12)))

    @property
    def std(self) -> float:
        s = self.sigma_lattice
        if s >= 1.0:
            k = np.arange(1, 7, dtype=np.float64)
            with np.errstate(under="ignore"):
                e = np.exp(-2.0 * math.pi**2 * s * s * k * k)
            num = 2.0 * float(np.sum((1.0 - 4.0 * math.pi**2 * s * s * k * k) * e))
            den = 2.0 * float(np.sum(e))
            var = s * s * (1.0 + num) / (1.0 + den)
        else:
            y = np.arange(1, int(40 * s) + 8, dtype=np.float64)
            w = np.exp(-(y * y) / (2.0 * s * s))
            var = 2.0 * float(np.sum(y * y * w)) / (1.0 + 2.0 * float(np.sum(w)))
        return self.grid * math.sqrt(var)

    def half_width(self, level: float) -> float:
        """Smallest w with P(|noise| ≤ w) ≥ level for every rounding offset (rounded up)."""
        level = check_scalar(level, "level", UNIT_OPEN)
        tails = _DiscreteGaussianTails(self.sigma_lattice)
        guess = -self.sigma_lattice * float(ndtri(0.5 * (1.0 - level)))
        return _lattice_half_width(tails.bracket, guess, level, self.rounded, self.grid)


def value_limit(grid: float, rounded: bool) -> float:
    """The largest magnitude of a value a lattice law on ``grid`` releases exactly.

    A rounded (real-valued) release computes ``round(value/γ)`` as an int64 below 2^51
    (:func:`dpgauss.noise.lattice.round_to_grid`): ``(2^51 − 2)·γ``.  An integer release on
    γ = 2^-k shifts the value by k bits inside int64's 62: ``2^(62−k)`` minus one (as a
    float, the largest integer below it).  A release clamps its aggregate to
    ``±value_limit`` before the noise (:func:`dpgauss.release.estimate.add_noise`):
    clamping each coordinate to a public range never increases a sensitivity, so no record
    can make a release fail there.
    """
    if rounded:
        return (2.0**51 - 2.0) * grid
    k = 1 - math.frexp(grid)[1]  # γ = 2^-k
    top = 2.0 ** (62 - k)
    return top - 1.0 if top <= 2.0**53 else float(np.nextafter(top, 0.0))


@dataclass(frozen=True)
class DiscreteLaplaceNoise:
    """γ·Y with P[Y = y] = (1 − q)/(1 + q) · q^{|y|}, q = e^{−1/t} (t = ``scale``, lattice units).

    T(k) = P(|Y| > k) = 2q^{k+1}/(1 + q) and T(k) + p(k) = q^k in closed form;
    ``std`` = γ √(2q)/(1 − q).  ``rounded`` as for :class:`DiscreteGaussianNoise`.
    """

    scale: float
    grid: float = 1.0
    rounded: bool = False

    @property
    def name(self) -> str:
        return "discrete laplace"

    @property
    def value_limit(self) -> float:
        """The largest magnitude of a value this law releases exactly (:func:`value_limit`)."""
        return value_limit(self.grid, self.rounded)

    @property
    def std(self) -> float:
        q = math.exp(-1.0 / self.scale)
        return self.grid * math.sqrt(2.0 * q) / -math.expm1(-1.0 / self.scale)

    def _bracket(self, k: int, with_pmf: bool) -> tuple[float, float]:
        t = self.scale
        if with_pmf:
            v = -k / t
        else:
            v = math.log(2.0) - (k + 1) / t - math.log1p(math.exp(-1.0 / t))
        err = 1e-13 * (1.0 + abs(v))
        return v - err, v + err

    def half_width(self, level: float) -> float:
        """Smallest w with P(|noise| ≤ w) ≥ level for every rounding offset (rounded up)."""
        level = check_scalar(level, "level", UNIT_OPEN)
        t = self.scale
        guess = -t * (math.log1p(-level) - math.log(2.0) + math.log1p(math.exp(-1.0 / t))) - 1.0
        return _lattice_half_width(self._bracket, guess, level, self.rounded, self.grid)

    def event(self, sensitivity: float) -> LaplaceEvent:
        """The privacy event of this noise (scale γ·t in data units) at L1 ``sensitivity``:
        ε-DP, not μ-GDP (a μ-GDP accountant refuses it)."""
        return LaplaceEvent(self.grid * self.scale, sensitivity, discrete=True)


@dataclass(frozen=True)
class Release:
    """A differentially private release and the public facts about its noise.

    Attributes
    ----------
    values
        The noisy values, with the shape of the input (a pandas Series keeps its index; a
        scalar input gives a Python float).
    sigma
        Standard deviation of the noise on each coordinate (for the Gaussian mechanisms,
        the σ of the noise; for Laplace, ``√2 b``).
    epsilon, delta
        The guarantee the noise was calibrated for: the release is (ε, δ)-DP for inputs
        whose sensitivity is at most ``sensitivity``.
    sensitivity
        The sensitivity the calibration assumed (L2 for Gaussian, L1 for Laplace).
    mechanism
        A short description, e.g. ``"gaussian (analytic)"``.
    noise
        The exact law of the noise, which gives the intervals.
    """

    values: Any
    sigma: float
    epsilon: float
    delta: float
    sensitivity: float
    mechanism: str
    noise: NoiseLaw

    def __post_init__(self) -> None:
        for name in ("sigma", "epsilon", "delta", "sensitivity"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, numbers.Real):
                raise TypeError(f"Release: {name} must be a number; got {value!r}")
        if not isinstance(self.mechanism, str):
            raise TypeError(
                f"Release: mechanism must be a description (str); got {self.mechanism!r}"
            )
        if not hasattr(self.noise, "half_width"):
            raise TypeError(f"Release: noise must be a noise law; got {type(self.noise).__name__}")

    def interval(self, level: float = 0.95) -> tuple[Any, Any]:
        """Per-coordinate confidence intervals ``(lower, upper)`` at the given level.

        Exact for the public noise law: for every coordinate,
        ``P(lower ≤ true value ≤ upper) ≥ level``.  Same type and shape as ``values``.
        """
        width = self.noise.half_width(level)
        return _like(self.values, _raw(self.values) - width), _like(
            self.values, _raw(self.values) + width
        )

    def event(self) -> PrivacyEvent:
        """The privacy event of this release (:func:`dpgauss.privacy.events.event_of`)."""
        return event_of(self)


@dataclass(frozen=True)
class NoisePlan:
    """What a mechanism will add to a release of ``dim`` coordinates, known before any noise
    is drawn (``mechanism.noise_plan(dim, ...)``).

    ``noise`` equals the ``noise`` of every :class:`Release` the mechanism makes of ``dim``
    coordinates with the same options, and ``mechanism`` its label; ``epsilon``,
    ``delta`` and ``sensitivity`` are the release's.  A plan can be charged like a release
    (``GaussianAccountant.add_release(plan)``: it has ``noise`` and ``sensitivity``), so a
    ledger can be charged before the data are read and the noise drawn.
    """

    noise: NoiseLaw
    mechanism: str
    dim: int
    epsilon: float
    delta: float
    sensitivity: float

    @property
    def sigma(self) -> float:
        """The standard deviation of the noise on each coordinate (``noise.std``)."""
        return self.noise.std

    def event(self) -> PrivacyEvent:
        """The privacy event of the planned release, what the accountant and the ledger
        charge (:func:`dpgauss.privacy.events.event_of`)."""
        return event_of(self)


def _raw(values: Any) -> np.ndarray | float:
    if _is_series(values):
        return values.to_numpy(dtype=np.float64)
    return values


def _is_series(values: object) -> TypeGuard[Any]:
    return type(values).__name__ == "Series" and hasattr(values, "index")


def _like(template: Any, data: np.ndarray | float) -> Any:
    """Wrap ``data`` like ``template``: a Series keeps its index and name."""
    if _is_series(template):
        return type(template)(np.asarray(data), index=template.index, name=template.name)
    if isinstance(template, float | int) and not isinstance(template, bool):
        return np.asarray(data).item()  # a Python float, or an int for integer releases
    return data


def values_array(values: object) -> tuple[np.ndarray, Any]:
    """Validate the input of a release: finite reals of any shape.

    Returns the float64 array and a function-free template to wrap results like the input.
    """
    if _is_series(values):
        arr = as_real_array(values.to_numpy(), "values")
        template: Any = values
    else:
        arr = as_real_array(values, "values")
        template = 0.0 if arr.ndim == 0 else arr
    check_interval(arr, "values", REAL)
    return arr, template


def wrap(template: Any, data: np.ndarray) -> Any:
    """Shape the released data like the validated input (see :func:`values_array`)."""
    return _like(template, data)
