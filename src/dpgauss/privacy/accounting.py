r"""Exact composition of Gaussian releases and the budget planner (μ-GDP accounting).

A Gaussian release of a function with L2 sensitivity Δ and noise σ is exactly μ-GDP with
``μ = Δ/σ`` (Dong, Roth & Su 2019, Thm 2.7), and μ-GDP is *equivalent* to the analytic
Gaussian mechanism's whole privacy profile (their Cor. 2.13): it is (ε, δ_μ(ε))-DP for
every ε ≥ 0 with ``δ_μ`` of :mod:`dpgauss.privacy.profile`, and nothing better.  k such
releases, chosen adaptively, compose *exactly* to

.. math::  μ = \sqrt{μ_1^2 + … + μ_k^2}

(their Cor. 3.3).  So the composed (ε, δ) is read off the same exact profile: no slack
from advanced composition, Rényi DP or zCDP (compare :mod:`dpgauss.privacy.composition`).
This answers the dilemma in the conclusion of Balle & Wang (2018): calibrate each release
exactly *and* compose tightly.

Rounding is never in the unsafe direction: each ``μᵢ = Δ/σ`` is rounded up, the sum of
squares is inflated by a bound on its rounding error, and ``epsilon``/``delta`` use the
safe profile functions.

Discrete Gaussian releases are *not* exactly μ-GDP with μ = Δ/σ (their profile is slightly
worse); :func:`dominating_mu` charges any mechanism by the smallest μ whose GDP profile lies
above its own (ε, δ(ε)) profile, which is valid because a symmetric trade-off function is
determined by its privacy profile (Dong, Roth & Su, Prop. 2.12).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass, field
from decimal import ROUND_CEILING, ROUND_FLOOR, ROUND_HALF_EVEN, Decimal
from fractions import Fraction
from typing import Any

import numpy as np

from .._validation import (
    NONNEGATIVE,
    POSITIVE,
    UNIT_OPEN,
    as_real_array,
    check_interval,
    plain_number,
)
from ._rounding import UNIT_ROUNDOFF, fits_budget, mu_up, rational_up, sqrt_sum_up, sub_down, up
from .calibration import gdp_mu
from .domination import dominating_mu
from .events import (
    DiscreteGaussianEvent,
    GaussianEvent,
    GdpEvent,
    LaplaceEvent,
    PrivacyEvent,
    ThresholdEvent,
    check_count,
    event_of,
    not_gdp,
)
from .profile import gaussian_epsilon, gdp_delta, gdp_epsilon

__all__ = [
    "Charge",
    "GaussianAccountant",
    "QueryPlan",
    "dominating_mu",
    "plan",
    "plan_equal",
    "plan_queries",
]


#: The events the accountant composes (the Laplace event is not μ-GDP).
_GDP_EVENTS = (GaussianEvent, DiscreteGaussianEvent, GdpEvent, ThresholdEvent)


def _positive_array(value: object, name: str) -> np.ndarray:
    arr = np.atleast_1d(as_real_array(value, name)).ravel()
    check_interval(arr, name, POSITIVE)
    return arr


def _certified_mu(
    event: GaussianEvent | DiscreteGaussianEvent | GdpEvent | ThresholdEvent,
) -> float:
    """The μ of one release of ``event``, refused unless it is in (0, ∞]: a discrete law
    whose domination cannot be certified gives μ = 0, which must never be charged (an
    infinite μ, from an overflowing Δ/σ, is charged: it spends the whole budget)."""
    mu = float(event.mu)
    if not mu > 0:
        raise ValueError(
            f"mu must be in (0, inf]: a certified mu-GDP charge; got {mu!r} for "
            f"{type(event).__name__} (its noise is too far below its grid to certify)"
        )
    return mu


@dataclass(frozen=True)
class Charge:
    """One call to the accountant: ``count`` releases of each μ in ``mu``, each also
    spending ``eta`` outside μ-GDP (a :class:`~.events.ThresholdEvent`; 0 otherwise)."""

    mu: np.ndarray
    count: int
    label: str | None
    eta: float = 0.0


@dataclass
class GaussianAccountant:
    """Exact composition of Gaussian releases as μ-GDP.

    Examples
    --------
    >>> acc = GaussianAccountant()
    >>> mu = acc.add(sigma=1.0, sensitivity=1.0, count=10)  # μ = 1 each, rounded up
    >>> round(acc.epsilon(1e-6), 2)   # 10 unit-σ releases: ε at δ = 1e-6
    19.42
    """

    charges: list[Charge] = field(default_factory=list)

    def add(
        self,
        sigma: object,
        sensitivity: object = 1.0,
        count: int = 1,
        label: str | None = None,
    ) -> float | np.ndarray:
        """Charge ``count`` releases with noise σ at L2 sensitivity Δ (``μ = Δ/σ`` each).

        σ and Δ may be arrays (one release per element, broadcast): composing many
        releases in one call is vectorised.  Returns the μ of each release.
        """
        fast_s, fast_d = plain_number(sigma, POSITIVE), plain_number(sensitivity, POSITIVE)
        if fast_s is not None and fast_d is not None:  # one release: no array machinery
            mu = up(fast_d / fast_s)
            if math.isfinite(mu):
                self.charges.append(Charge(np.array([mu]), check_count(count), label))
                return mu
        s = _positive_array(sigma, "sigma")
        d = _positive_array(sensitivity, "sensitivity")
        try:
            s, d = np.broadcast_arrays(s, d)
        except ValueError:
            raise ValueError(
                f"argument shapes do not broadcast: sigma {s.shape}, sensitivity {d.shape}"
            ) from None
        scalar = np.ndim(sigma) == 0 and np.ndim(sensitivity) == 0  # type: ignore[arg-type]
        return self._charge(mu_up(d, s), count, label, scalar)

    def add_mu(self, mu: object, count: int = 1, label: str | None = None) -> float | np.ndarray:
        """Charge ``count`` μ-GDP mechanisms (e.g. a discrete release's dominating μ)."""
        # np.ndim takes any object (the stubs ask for ArrayLike), here and in add
        return self._charge(_positive_array(mu, "mu"), count, label, np.ndim(mu) == 0)  # type: ignore[arg-type]

    def add_event(self, event: PrivacyEvent, label: str | None = None) -> float:
        """Charge one typed event (:mod:`dpgauss.privacy.events`), ``event.count`` times.

        Returns the μ of one release of the event.  A :class:`~.events.GaussianEvent`
        is charged ``μ = Δ/σ`` rounded up (as :meth:`add`), a
        :class:`~.events.DiscreteGaussianEvent` its dominating μ, a
        :class:`~.events.GdpEvent` its μ; a :class:`~.events.LaplaceEvent` is not μ-GDP
        for any finite μ and raises ``TypeError``.
        """
        if isinstance(event, _GDP_EVENTS):
            # μ must be certified positive and finite: a discrete law whose domination cannot
            # be certified gives 0 (dominating_mu), which must refuse, never charge nothing.
            mu = _certified_mu(event)
            eta = event.eta if isinstance(event, ThresholdEvent) else 0.0
            self.charges.append(Charge(np.array([mu]), event.count, label, eta))
            return mu
        if isinstance(event, LaplaceEvent):
            raise not_gdp(event)
        raise TypeError(
            "add_event needs a privacy event (GaussianEvent, DiscreteGaussianEvent, GdpEvent, "
            f"ThresholdEvent); got {type(event).__name__}"
        )

    def compose(
        self, events: Iterable[PrivacyEvent], label: str | None = None
    ) -> GaussianAccountant:
        """Charge every event of ``events`` (:meth:`add_event`) and return the accountant,
        so that ``GaussianAccountant().compose(events).epsilon(δ)`` reads the composition.

        The events are checked before any is charged: a refused event charges nothing.
        """
        todo = list(events)
        for event in todo:
            if isinstance(event, LaplaceEvent):
                raise not_gdp(event)
            if not isinstance(event, _GDP_EVENTS):
                raise TypeError(
                    "compose needs privacy events (GaussianEvent, DiscreteGaussianEvent, "
                    f"GdpEvent, ThresholdEvent); got {type(event).__name__}"
                )
        for event in todo:  # every μ certified before any is charged
            assert isinstance(event, _GDP_EVENTS)  # above
            _certified_mu(event)
        for event in todo:
            self.add_event(event, label)
        return self

    def add_release(self, release: object, label: str | None = None) -> float:
        """Charge a :class:`dpgauss.noise.release.Release` by the μ its noise law gives.

        A :class:`~dpgauss.noise.release.NoisePlan` (the law of a release not yet drawn)
        is charged the same.  A thin wrapper: the release's event
        (:func:`dpgauss.privacy.events.event_of`) is charged by :meth:`add_event`.
        Continuous Gaussian noise: ``μ = Δ/σ``.  Discrete Gaussian noise is charged by
        its dominating μ; anything else (Laplace) is not μ-GDP for any finite μ and
        raises ``TypeError``.
        """
        return self.add_event(event_of(release), label=label)

    def _charge(
        self, mu: np.ndarray, count: object, label: str | None, scalar: bool
    ) -> float | np.ndarray:
        self.charges.append(Charge(mu.copy(), check_count(count), label))
        return float(mu[0]) if scalar else mu

    @property
    def n_releases(self) -> int:
        """Number of releases charged so far (counting ``count``)."""
        return sum(c.mu.size * c.count for c in self.charges)

    @property
    def mu(self) -> float:
        """Total ``μ = √(Σ μᵢ²)`` of everything charged, rounded up (0 when empty)."""
        if not self.charges:
            return 0.0
        squares = [
            np.nextafter(np.nextafter(c.mu * c.mu, np.inf) * c.count, np.inf) for c in self.charges
        ]
        return sqrt_sum_up(np.concatenate(squares))

    @property
    def eta(self) -> float:
        """Total δ spent outside μ-GDP, ``Σ ηᵢ`` over the threshold events (rounded up;
        0 without them).  Everything charged is ``(ε, δ_μ(ε) + η)``-DP."""
        if not any(c.eta for c in self.charges):
            return 0.0
        total = sum((Fraction(c.eta) * c.mu.size * c.count for c in self.charges), Fraction(0))
        return rational_up(total)

    def epsilon(self, delta: object) -> float | np.ndarray:
        """Smallest ε such that everything charged is (ε, δ)-DP (never rounded down):
        ``gdp_epsilon(μ, δ − η)``, and ``inf`` where ``δ ≤ η``."""
        eta = self.eta
        if eta == 0.0:
            return self._read(gdp_epsilon, delta, "delta", UNIT_OPEN)
        arr = as_real_array(delta, "delta")
        check_interval(arr, "delta", UNIT_OPEN)
        # δ − η rounded down, exactly
        rest = np.array([sub_down(d, eta) for d in np.atleast_1d(arr).ravel().tolist()])
        out = np.full(rest.shape, math.inf)
        ok = rest > 0
        if ok.any():
            out[ok] = self._read(gdp_epsilon, rest[ok], "delta", UNIT_OPEN)
        return float(out[0]) if arr.ndim == 0 else out.reshape(arr.shape)

    def delta(self, epsilon: object) -> float | np.ndarray:
        """Smallest δ such that everything charged is (ε, δ)-DP (never rounded down):
        ``δ_μ(ε) + η``, at most 1."""
        d = self._read(gdp_delta, epsilon, "epsilon", NONNEGATIVE)
        eta = self.eta
        if eta == 0.0:
            return d
        total = np.minimum(np.nextafter(np.asarray(d, dtype=np.float64) + eta, np.inf), 1.0)
        return float(total) if np.ndim(d) == 0 else total

    def _read(
        self, profile: Callable[..., float | np.ndarray], value: object, name: str, allowed: Any
    ) -> float | np.ndarray:
        """The composed profile at ``value``; nothing charged is (0, 0)-DP."""
        mu = self.mu
        if mu > 0.0:
            return profile(mu, value)
        arr = as_real_array(value, name)
        check_interval(arr, name, allowed)
        return 0.0 if arr.ndim == 0 else np.zeros(arr.shape)


def plan(epsilon: float, delta: float, sensitivities: object, weights: object = None) -> np.ndarray:
    r"""Noise levels σᵢ for k queries that together are exactly (ε, δ)-DP.

    Minimises ``Σ wᵢ σᵢ²`` (weighted total variance) subject to the composed guarantee
    ``Σ (Δᵢ/σᵢ)² = μ²`` with ``μ = gdp_mu(ε, δ)``.  The Lagrangian
    ``Σ wᵢσᵢ² + λ(Σ Δᵢ²/σᵢ² − μ²)`` is stationary at ``wᵢσᵢ⁴ = λΔᵢ²``, so

    .. math::  σᵢ^2 = \frac{Δᵢ}{\sqrt{wᵢ}} \cdot \frac{\sum_j Δ_j \sqrt{w_j}}{μ^2}.

    With equal weights and sensitivities this is ``σ = Δ√k/μ`` (:func:`plan_equal`).
    Every σᵢ is rounded up and the result is checked to compose within (ε, δ).
    """
    d = _positive_array(sensitivities, "sensitivities")
    w = np.ones_like(d) if weights is None else _positive_array(weights, "weights")
    if w.shape != d.shape:
        raise ValueError(f"weights has {w.size} entries but sensitivities has {d.size}")
    mu = gdp_mu(epsilon, delta)
    root_w = np.sqrt(w)
    total = float(np.sum(d * root_w)) * (1.0 + 2.0 * (d.size + 1) * UNIT_ROUNDOFF)
    sigma = up(np.sqrt(d / root_w * total / (mu * mu)) * (1.0 + 4 * UNIT_ROUNDOFF))
    # Verify the composition with the accountant's own rounding; nudge up if ever needed.
    for _ in range(8):
        if sqrt_sum_up(np.nextafter(mu_up(d, sigma) ** 2, np.inf)) <= mu:
            return sigma
        sigma = np.nextafter(sigma * (1.0 + 1e-15), np.inf)
    raise FloatingPointError("dpgauss internal error: plan could not verify its rounding")


def plan_equal(epsilon: float, delta: float, k: int, sensitivity: float = 1.0) -> float:
    """σ for each of ``k`` equal queries that together are exactly (ε, δ)-DP: ``Δ√k/μ``."""
    kk = check_count(k)
    d = float(_positive_array(sensitivity, "sensitivity")[0])
    mu = gdp_mu(epsilon, delta)
    sigma = float(np.nextafter(d * math.sqrt(kk) / mu * (1.0 + 8 * UNIT_ROUNDOFF), np.inf))
    for _ in range(8):
        mu_i = float(mu_up(np.array(d), np.array(sigma)))
        total = float(np.nextafter(np.nextafter(mu_i * mu_i, np.inf) * kk, np.inf))
        if float(np.nextafter(math.sqrt(total * (1.0 + 4 * UNIT_ROUNDOFF)), np.inf)) <= mu:
            return sigma
        sigma = float(np.nextafter(sigma * (1.0 + 1e-15), np.inf))
    raise FloatingPointError("dpgauss internal error: plan_equal could not verify its rounding")


@dataclass(frozen=True)
class QueryPlan:
    """K equal releases that fit an (ε, δ) budget as the ledger charges them.

    Each release is specified by ``epsilon`` (at ``delta``) or, equivalently for the budget,
    by ``sigma`` at ``sensitivity`` (the spec's ``[privacy] sigma``, from which the release
    derives its ε).  Either way it is charged at most ``mu`` — continuous noise exactly
    Δ/σ, secure noise its dominating μ, both at most ``gdp_mu`` of the release's (ε, δ) —
    and ``queries`` charges of ``mu`` fit ``mu_budget = gdp_mu(budget ε, δ)`` exactly:
    ``K·mu² ≤ mu_budget²`` in rational arithmetic, as :class:`dpgauss.release.Ledger`
    compares.  ``epsilon`` is rounded down and ``sigma`` up to 10 significant digits, so the
    printed numbers are the planned ones.
    """

    queries: int
    epsilon: float
    delta: float
    sigma: float
    sensitivity: float
    mu: float
    mu_budget: float
    budget_epsilon: float

    def as_dict(self) -> dict[str, Any]:
        """A JSON-ready dict of the fields."""
        return asdict(self)


def _fits(mu: float, k: int, mu_budget: float) -> bool:
    """The ledger's test for k equal charges of μ: k μ² ≤ μ_B², exactly."""
    return fits_budget([mu], mu_budget, count=k)


def _decimals(x: float, up: bool, digits: int = 10) -> tuple[float, float]:
    """x rounded to ``digits`` significant decimal digits: to nearest, then toward +∞ (up)
    or toward 0 (the candidates in the order a plan tries them)."""
    d = Decimal(repr(x))
    unit = Decimal(1).scaleb(d.adjusted() - digits + 1)
    return float(d.quantize(unit, rounding=ROUND_HALF_EVEN)), float(
        d.quantize(unit, rounding=ROUND_CEILING if up else ROUND_FLOOR)
    )


def _search(start: float, up: bool, ok: Callable[[float], bool]) -> float:
    """The first 10-digit decimal near ``start`` (moving up or down) that is ``ok``."""
    x = start
    for n in range(200):
        for cand in _decimals(x, up):
            if ok(cand):
                return cand
        x = x * (1.0 + 1e-15 * 2.0**n) if up else x * (1.0 - 1e-15 * 2.0**n)
    raise FloatingPointError(  # pragma: no cover - gdp_mu is increasing in ε
        "dpgauss internal error: plan_queries found no candidate"
    )


def plan_queries(epsilon: float, delta: float, k: int, sensitivity: float = 1.0) -> QueryPlan:
    """Per-query ε (at δ) and σ for ``k`` equal releases that fit an (ε, δ) budget.

    Unlike :func:`plan_equal`, which gives σ for releases charged Δ/σ directly, this plans
    releases *specified* by ε (or by σ, from which ε is derived) and calibrated like the
    release pipeline does: such a release is charged at most ``gdp_mu(ε_q, δ)``, for
    continuous and for secure noise and any number of keys (the secure laws are fitted to
    it; :func:`dpgauss.privacy.discrete_multivariate.discrete_gaussian_gdp_sigma`).  So

    * ε_q is the largest 10-digit decimal with ``k·gdp_mu(ε_q, δ)² ≤ μ_B²`` (exactly),
    * σ_q the smallest 10-digit decimal ≥ ``plan_equal`` whose derived
      ε′ = ``gaussian_epsilon(σ_q, δ, Δ)`` satisfies ``k·gdp_mu(ε′, δ)² ≤ μ_B²``,

    with μ_B = ``gdp_mu(ε, δ)``, the budget's μ.  ``mu`` is the larger of the two
    ``gdp_mu`` bounds.  Raises ``ValueError`` if no ε_q ≥ 0 at this δ fits (k so large
    that even an ε = 0 release is charged too much: plan with a smaller δ per query).
    """
    kk = check_count(k)
    eps_b = float(epsilon)
    dlt = float(delta)
    sens = float(_positive_array(sensitivity, "sensitivity")[0])
    mu_b = float(gdp_mu(eps_b, dlt))

    def ok_eps(e: float) -> bool:
        return e >= 0.0 and _fits(float(gdp_mu(e, dlt)), kk, mu_b)

    if not ok_eps(0.0):
        raise ValueError(
            f"{kk} releases at delta={dlt:g} each cannot fit the budget (epsilon={eps_b:g}, "
            f"delta={dlt:g}): even epsilon=0 at that delta is charged more than "
            f"mu={mu_b / math.sqrt(kk):.6g}; use a smaller delta per release"
        )

    def sigma_mu(s: float) -> float:
        return float(gdp_mu(float(gaussian_epsilon(s, dlt, sens)), dlt))

    eps_q = _search(float(gdp_epsilon(mu_b / math.sqrt(kk), dlt)), False, ok_eps)
    sigma_q = _search(
        plan_equal(eps_b, dlt, kk, sens), True, lambda s: _fits(sigma_mu(s), kk, mu_b)
    )
    mu_q = max(float(gdp_mu(eps_q, dlt)), sigma_mu(sigma_q))
    return QueryPlan(kk, eps_q, dlt, sigma_q, sens, mu_q, mu_b, eps_b)
