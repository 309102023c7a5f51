r"""Typed privacy events: what a release costs, said without the release.

An event is a frozen dataclass holding the public facts the accountant needs: the
mechanism, its noise and its sensitivity, and ``count``, how many times it is repeated
(self-composition).  The accountant (:class:`dpgauss.privacy.accounting.GaussianAccountant`)
composes events (``add_event`` / ``compose``); it does not look inside releases.  The
mechanisms in :mod:`dpgauss.noise` build their own event (``mechanism.event(dim)``,
``NoisePlan.event()``, ``Release.event()``, ``noise_law.event(sensitivity)``), so a new
mechanism is accounted for by giving it an event, not by teaching the accountant about it.

The charge of each event in μ-GDP (Dong, Roth & Su 2019), always rounded up:

* :class:`GaussianEvent` — ``N(0, σ²I)`` added to a function of L2 sensitivity Δ: exactly
  μ-GDP with ``μ = Δ/σ`` (their Thm 2.7), :func:`._rounding.mu_up`;
* :class:`DiscreteGaussianEvent` — ``γ·N_Z(0, σ²)^d`` on the lattice ``γ·Z`` (a secure
  release), described in lattice units: not exactly μ-GDP, charged by the smallest μ whose
  GDP profile lies above its certified profile
  (:func:`dpgauss.privacy.discrete_multivariate.discrete_gaussian_vector_mu`);
* :class:`GdpEvent` — any mechanism already known to be μ-GDP;
* :class:`ThresholdEvent` — μ-GDP apart from a selection that spends η outside it
  (Gaussian thresholding of keys not known in advance): charged μ, and η beside it;
* :class:`LaplaceEvent` — Laplace (or discrete Laplace) noise: ε-DP, but not μ-GDP for any
  finite μ; the accountant refuses it with a ``TypeError``.

``k`` events of charges ``μᵢ`` compose exactly to ``√(Σ μᵢ²)`` (their Cor. 3.3); the ``ηᵢ``
of threshold events add, and the composition is ``(ε, δ_{√Σμᵢ²}(ε) + Σηᵢ)``-DP.

Every event validates its fields when it is made: a wrong value raises ``ValueError``
(``TypeError`` for a value that is not a number) naming the field and its allowed range.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from .._validation import NONNEGATIVE, POSITIVE, check_scalar
from ._rounding import up
from .discrete_multivariate import discrete_gaussian_vector_mu

__all__ = [
    "EVENT_TYPES",
    "DiscreteGaussianEvent",
    "GaussianEvent",
    "GdpEvent",
    "LaplaceEvent",
    "PrivacyEvent",
    "ThresholdEvent",
    "check_count",
    "event_of",
    "not_gdp",
]

_LIMIT_DIM = 2.0**53


def check_count(count: object) -> int:
    """``count`` as an int ≥ 1 (the number of repetitions of a release), or ``ValueError``."""
    if isinstance(count, bool) or not isinstance(count, int | np.integer) or count < 1:
        raise ValueError(f"count must be a positive integer; got {count!r}")
    return int(count)


def _dim(owner: str, dim: object) -> int:
    if isinstance(dim, bool) or not isinstance(dim, int | np.integer) or not 1 <= dim <= _LIMIT_DIM:
        raise ValueError(
            f"{owner}: dim must be an integer in [1, 2^53] (the number of coordinates); got {dim!r}"
        )
    return int(dim)


def _set(obj: object, name: str, value: Any) -> None:
    object.__setattr__(obj, name, value)  # frozen: normalise the fields once, when made


@dataclass(frozen=True)
class GaussianEvent:
    """``N(0, σ²I)`` noise on a function of L2 sensitivity Δ, ``count`` times.

    ``sigma`` ∈ (0, ∞), ``sensitivity`` ∈ (0, ∞).  Exactly μ-GDP with ``μ = Δ/σ``
    (rounded up; ``inf`` if the quotient overflows).
    """

    sigma: float
    sensitivity: float = 1.0
    count: int = 1

    def __post_init__(self) -> None:
        _set(self, "sigma", check_scalar(self.sigma, "sigma", POSITIVE, what=""))
        _set(self, "sensitivity", check_scalar(self.sensitivity, "sensitivity", POSITIVE, what=""))
        _set(self, "count", check_count(self.count))

    @property
    def mu(self) -> float:
        """The μ-GDP charge of one release: ``Δ/σ`` rounded up."""
        return up(self.sensitivity / self.sigma)


@dataclass(frozen=True)
class DiscreteGaussianEvent:
    """``N_Z(0, σ²)^dim`` noise on the integers (lattice units), ``count`` times.

    ``sigma_lattice`` ∈ (0, ∞) is σ in lattice units, ``lattice_sensitivity`` ∈ (0, ∞) the
    L2 sensitivity in lattice units (for values rounded to a grid γ: ``Δ/γ + √dim``, as
    :meth:`dpgauss.noise.release.DiscreteGaussianNoise.lattice_sensitivity` gives it),
    ``dim`` ∈ [1, 2^53] the number of coordinates.
    """

    sigma_lattice: float
    lattice_sensitivity: float
    dim: int = 1
    count: int = 1

    def __post_init__(self) -> None:
        owner = "DiscreteGaussianEvent"
        _set(
            self,
            "sigma_lattice",
            check_scalar(self.sigma_lattice, "sigma_lattice", POSITIVE, what=""),
        )
        _set(
            self,
            "lattice_sensitivity",
            check_scalar(self.lattice_sensitivity, "lattice_sensitivity", POSITIVE, what=""),
        )
        _set(self, "dim", _dim(owner, self.dim))
        _set(self, "count", check_count(self.count))

    @property
    def mu(self) -> float:
        """The μ-GDP charge of one release: the smallest μ whose GDP profile dominates the
        certified profile of ``dim`` coordinates (rounded up)."""
        return float(
            discrete_gaussian_vector_mu(self.sigma_lattice, self.lattice_sensitivity, self.dim)
        )


@dataclass(frozen=True)
class GdpEvent:
    """A mechanism known to be μ-GDP, ``count`` times; ``mu`` ∈ (0, ∞)."""

    mu: float
    count: int = 1

    def __post_init__(self) -> None:
        _set(self, "mu", check_scalar(self.mu, "mu", POSITIVE, what=""))
        _set(self, "count", check_count(self.count))


@dataclass(frozen=True)
class ThresholdEvent:
    """A μ-GDP mechanism apart from a selection that spends ``eta`` outside μ-GDP,
    ``count`` times: Gaussian thresholding of keys not known in advance
    (:mod:`dpgauss.privacy.partition_selection`), ``(ε, δ_μ(ε) + η)``-DP for every ε.

    ``mu`` ∈ (0, ∞), ``eta`` ∈ [0, 1).  Such events compose to ``√Σμᵢ²`` beside ``Σηᵢ``
    (the module of :mod:`~dpgauss.privacy.partition_selection` proves it).
    """

    mu: float
    eta: float
    count: int = 1

    def __post_init__(self) -> None:
        _set(self, "mu", check_scalar(self.mu, "mu", POSITIVE, what=""))
        eta = check_scalar(self.eta, "eta", NONNEGATIVE, what="")
        if not eta < 1.0:
            raise ValueError(f"eta must be in [0, 1); got {eta!r}")
        _set(self, "eta", eta)
        _set(self, "count", check_count(self.count))


@dataclass(frozen=True)
class LaplaceEvent:
    """Laplace noise of scale ``b`` (lattice: discrete Laplace) on a function of L1
    sensitivity Δ₁: ε-DP with ``ε = Δ₁/b``, but not μ-GDP for any finite μ.

    ``scale`` ∈ (0, ∞), ``sensitivity`` ∈ (0, ∞).  A μ-GDP accountant refuses it.
    """

    scale: float
    sensitivity: float = 1.0
    discrete: bool = False
    count: int = 1

    def __post_init__(self) -> None:
        _set(self, "scale", check_scalar(self.scale, "scale", POSITIVE, what=""))
        _set(self, "sensitivity", check_scalar(self.sensitivity, "sensitivity", POSITIVE, what=""))
        if not isinstance(self.discrete, bool):
            raise TypeError(f"LaplaceEvent: discrete must be a bool; got {self.discrete!r}")
        _set(self, "count", check_count(self.count))

    @property
    def noise(self) -> str:
        """The name of the noise law (``"laplace"`` or ``"discrete laplace"``)."""
        return "discrete laplace" if self.discrete else "laplace"


PrivacyEvent = GaussianEvent | DiscreteGaussianEvent | GdpEvent | ThresholdEvent | LaplaceEvent
EVENT_TYPES = (GaussianEvent, DiscreteGaussianEvent, GdpEvent, ThresholdEvent, LaplaceEvent)


def event_of(release: object) -> PrivacyEvent:
    """The event of a :class:`~dpgauss.noise.release.Release` or
    :class:`~dpgauss.noise.release.NoisePlan`: its noise law's ``event(sensitivity)``.

    The one place that reads a release object (``GaussianAccountant.add_release`` and the
    ledger's ``charge_mu`` go through it).  A law without ``event`` is read by its
    ``dominating_mu(Δ)`` (a :class:`GdpEvent`) or, if it is named ``"gaussian"``, by its
    ``sigma``; anything else raises ``TypeError``.
    """
    noise = getattr(release, "noise", None)
    sensitivity = getattr(release, "sensitivity", None)
    if noise is None or sensitivity is None:
        raise TypeError(f"add_release needs a Release or NoisePlan; got {type(release).__name__}")
    make = getattr(noise, "event", None)
    if callable(make):
        event = make(sensitivity)
        if not isinstance(event, EVENT_TYPES):
            raise TypeError(
                f"{type(noise).__name__}.event must return a privacy event; "
                f"got {type(event).__name__}"
            )
        return event
    if hasattr(noise, "dominating_mu"):
        return GdpEvent(float(noise.dominating_mu(sensitivity)))
    if getattr(noise, "name", None) == "gaussian":
        return GaussianEvent(noise.sigma, sensitivity)
    raise TypeError(
        f"a release with {getattr(noise, 'name', type(noise).__name__)} noise is not "
        "μ-GDP; only Gaussian (and discrete Gaussian) releases can be charged"
    )


def not_gdp(event: LaplaceEvent) -> TypeError:
    """The error a μ-GDP accountant raises for an event that is not μ-GDP."""
    return TypeError(
        f"a release with {event.noise} noise is not μ-GDP; only Gaussian (and discrete "
        "Gaussian) releases can be charged"
    )
