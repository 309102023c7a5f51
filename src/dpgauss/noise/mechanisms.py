"""Output-perturbation mechanisms: a true vector f(x) and a budget in, a :class:`Release` out.

* :class:`GaussianMechanism` — ``f(x) + N(0, σ²I)`` with σ from the analytic calibration
  (Balle & Wang 2018, Thm 8) or, as a baseline, the classical one (Thm 1).
* :class:`LaplaceMechanism` — ``f(x) + Lap(b)^d`` with ``b = Δ₁/ε``, the paper's baseline.
* :class:`DiscreteGaussianMechanism` — ``q(x) + N_Z(0, σ²)^d`` for *integer-valued* queries
  (counts), with exact discrete Gaussian noise and σ from the discrete Gaussian's own
  profile (CKS20; :mod:`dpgauss.privacy.discrete_multivariate`).

Randomness is always injected through ``rng``:

* a ``numpy.random.Generator`` or an ``int`` seed — floating-point noise, reproducible:
  for experiments.  Floating-point samplers leak through the pattern of representable
  outputs (Mironov 2012), so this is *not* for publishing real data;
* ``"secure"`` (the default) — the values are rounded to a public grid and noise from an
  exact discrete sampler fed by the operating system's CSPRNG is added, with the rounding
  paid for in the calibration (``dpgauss.noise.lattice``; the argument is in
  ``docs/security.md``).  ``integer=True`` (counts) rounds nothing: the integers lie on a
  grid 2^-k and the exact discrete Gaussian is calibrated at Δ itself, within about 1e-5
  of the analytic σ; ``changed=n`` says that neighbouring values differ in at most n
  coordinates, and only those enter the bound.

:class:`DiscreteGaussianMechanism` needs no grid (its input is integral) and always uses
the exact sampler; a seed or Generator only replaces the source of random bits.

``noise_plan(dim, ...)`` gives the noise law and the label of a release of ``dim``
coordinates without drawing anything (a :class:`~dpgauss.noise.release.NoisePlan`); a
release uses exactly that law.  The secure Gaussian laws are calibrated so that their μ-GDP
charge (``DiscreteGaussianNoise.dominating_mu``) is at most ``gdp_mu(ε, δ)``: a release at
(ε, δ) fits a ledger budget of the same (ε, δ)
(:func:`dpgauss.privacy.discrete_multivariate.discrete_gaussian_gdp_sigma`).
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable
from typing import Any

import numpy as np

from .._validation import (
    NONNEGATIVE,
    POSITIVE,
    REAL,
    UNIT_OPEN,
    Interval,
    check_interval,
    check_scalar,
)
from ..privacy import analytic_gaussian_sigma, classical_gaussian_sigma, laplace_scale
from ..privacy.discrete_multivariate import discrete_gaussian_gdp_sigma
from ..privacy.events import PrivacyEvent
from .discrete_sampler import discrete_gaussian
from .lattice import (
    ROUNDING_COST,
    add_lattice_noise,
    gaussian_lattice_law,
    integer_lattice_law,
    laplace_lattice_law,
)
from .randomness import SecureRandom, resolve_rng
from .release import (
    DiscreteGaussianNoise,
    GaussianNoise,
    LaplaceNoise,
    NoiseLaw,
    NoisePlan,
    Release,
    _is_series,
    values_array,
    wrap,
)

__all__ = ["DiscreteGaussianMechanism", "GaussianMechanism", "LaplaceMechanism"]

_CALIBRATIONS = ("analytic", "classical")
#: integer releases on a grid γ ≤ 1 keep σ/γ ≤ 2^36 (the sampler allows 2^40, the margin of
#: :func:`~dpgauss.noise.lattice.choose_grid`); beyond, the rounded lattice of before serves
_INTEGER_MAX_SIGMA = 2.0**36


@functools.lru_cache(maxsize=64, typed=True)
def _secure_law(
    epsilon: float,
    delta: float,
    sensitivity: float,
    d: int,
    grid: float | None,
    changed: int | None,
    kind: str,
    cost: float,
) -> NoiseLaw:
    """The lattice law of :meth:`GaussianMechanism.noise_plan` (secure) of ``kind``
    (``"integers"``, ``"rounded"`` or ``"lattice"``): a pure function of its arguments,
    cached (``typed``: ``1``, ``1.0`` and ``True`` stay apart), since a repeated release
    would otherwise spend more time calibrating than drawing its noise."""
    if kind == "integers":
        return integer_lattice_law(epsilon, delta, sensitivity, d, grid, changed=changed)
    if kind == "rounded":  # σ beyond the grids ≤ 1: the rounded lattice, as it always was
        return gaussian_lattice_law(epsilon, delta, sensitivity, d, grid)
    return gaussian_lattice_law(epsilon, delta, sensitivity, d, grid, changed=changed, cost=cost)


class GaussianMechanism:
    """Adds ``N(0, σ²)`` to every coordinate, σ calibrated for (ε, δ) at L2 sensitivity Δ.

    Parameters
    ----------
    epsilon : float, ε ≥ 0 (ε in (0, 1) for ``calibration="classical"``)
    delta : float, δ ∈ (0, 1)
    sensitivity : float, global L2 sensitivity Δ > 0 of the released vector
    calibration : ``"analytic"`` (exact, the default) or ``"classical"`` (baseline)

    Examples
    --------
    >>> mech = GaussianMechanism(epsilon=1.0, delta=1e-5, sensitivity=1.0)
    >>> round(mech.sigma, 4)
    3.7306
    >>> rel = mech.release([10.0, 20.0], rng=0)   # seeded: an experiment
    >>> lower, upper = rel.interval(0.95)
    """

    def __init__(
        self,
        epsilon: float,
        delta: float,
        sensitivity: float = 1.0,
        calibration: str = "analytic",
    ) -> None:
        if calibration not in _CALIBRATIONS:
            raise ValueError(f"calibration must be one of {_CALIBRATIONS}; got {calibration!r}")
        self.epsilon = check_scalar(epsilon, "epsilon", NONNEGATIVE, what="")
        self.delta = check_scalar(delta, "delta", UNIT_OPEN, what="")
        self.sensitivity = check_scalar(sensitivity, "sensitivity", POSITIVE, what="")
        self.calibration = calibration
        calibrate = (
            analytic_gaussian_sigma if calibration == "analytic" else classical_gaussian_sigma
        )
        self.sigma: float = float(calibrate(self.epsilon, self.delta, self.sensitivity))

    def __repr__(self) -> str:
        return (
            f"GaussianMechanism(epsilon={self.epsilon!r}, delta={self.delta!r}, "
            f"sensitivity={self.sensitivity!r}, calibration={self.calibration!r})"
        )

    def noise_plan(
        self,
        dim: int,
        *,
        secure: bool = True,
        grid: float | None = None,
        changed: int | None = None,
        integer: bool = False,
        cost: float = ROUNDING_COST,
    ) -> NoisePlan:
        """The noise law and label of a release of ``dim`` coordinates, drawing no noise.

        ``secure=True``: the lattice law of ``release(values, rng="secure", grid=grid,
        changed=changed, integer=integer)`` for ``values`` of size ``dim`` (a
        :class:`~dpgauss.noise.release.DiscreteGaussianNoise` whose μ-GDP charge is at
        most ``gdp_mu(ε, δ)``); ``secure=False``: ``GaussianNoise(σ)``, the law of a
        seeded release.  ``release`` computes its law by this method, so they are equal.

        ``changed`` (secure only): a bound on the number of coordinates in which
        neighbouring values can differ (e.g. the keys one unit can touch); the lattice
        sensitivity's rounding term and the discrete bound use it instead of ``dim``.
        ``integer`` (secure only): the values are integers (counts), released on a grid
        2^-k ≤ 1 without rounding and calibrated at Δ itself
        (:func:`~dpgauss.noise.lattice.integer_lattice_law`; delivered σ within about
        1e-5 of the analytic σ); the values must then be integers.  Where the analytic σ
        exceeds 2^36 (tiny ε and δ, or huge Δ: a grid ≤ 1 would leave the sampler's range)
        the rounded lattice over all ``dim`` coordinates at the 1 % cost serves them, as
        before ``integer`` existed.  ``cost``:
        the rounding cost of the default grid of a real-valued release
        (:func:`~dpgauss.noise.lattice.choose_grid`).
        """
        d = _dim(dim)
        if secure:
            if self.calibration != "analytic":
                raise ValueError(
                    "the classical calibration is a baseline for experiments: pass rng=<int "
                    "seed or numpy Generator>, or use calibration='analytic' for a secure "
                    "release"
                )
            on_integers = integer and self.sigma <= _INTEGER_MAX_SIGMA
            kind = "integers" if on_integers else "rounded" if integer else "lattice"
            args = (self.epsilon, self.delta, self.sensitivity, d, grid, changed, kind, cost)
            try:
                law: NoiseLaw = _secure_law(*args)
            except TypeError:  # an unhashable argument: no cache, the law's own validation
                law = _secure_law.__wrapped__(*args)
            on = " on the integers" if on_integers else ""
            name = f"gaussian ({self.calibration}), secure lattice {law.name}{on}"
        else:
            _no_grid(grid)
            law, name = GaussianNoise(self.sigma), f"gaussian ({self.calibration})"
        return NoisePlan(law, name, d, self.epsilon, self.delta, self.sensitivity)

    def event(
        self,
        dim: int,
        *,
        secure: bool = True,
        grid: float | None = None,
        changed: int | None = None,
        integer: bool = False,
        cost: float = ROUNDING_COST,
    ) -> PrivacyEvent:
        """The privacy event of a release of ``dim`` coordinates (``noise_plan(...).event()``):
        what an accountant or a ledger charges for it, known before any noise is drawn."""
        return self.noise_plan(
            dim, secure=secure, grid=grid, changed=changed, integer=integer, cost=cost
        ).event()

    def release(
        self,
        values: object,
        rng: object = "secure",
        *,
        grid: float | None = None,
        changed: int | None = None,
        integer: bool = False,
        cost: float = ROUNDING_COST,
    ) -> Release:
        """Release ``values`` (any shape, finite reals) with calibrated Gaussian noise.

        ``rng="secure"`` (default) rounds to a public grid (``grid``, chosen from σ when
        None) and adds exact discrete Gaussian noise; a seed or Generator adds
        floating-point noise, for experiments.  The law is ``noise_plan(d, ...)``;
        ``changed``, ``integer`` and ``cost`` are :meth:`noise_plan`'s.
        """
        source = resolve_rng(rng)
        if self.calibration != "analytic" and isinstance(source, SecureRandom):
            self.noise_plan(1)  # raises: the classical calibration has no secure release
        arr, template = values_array(values)

        def experiment(gen: np.random.Generator) -> np.ndarray:
            return arr + gen.normal(0.0, self.sigma, size=arr.shape)

        def plan(d: int, *, secure: bool, grid: float | None) -> NoisePlan:
            opts = {"changed": changed, "integer": integer, "cost": cost} if secure else {}
            return self.noise_plan(d, secure=secure, grid=grid, **opts)  # type: ignore[arg-type]

        return _release(arr, template, source, grid, plan, experiment)


class LaplaceMechanism:
    """Adds Laplace noise of scale ``b = Δ₁/ε`` to every coordinate: ε-DP (δ = 0).

    Parameters
    ----------
    epsilon : float, ε > 0
    l1_sensitivity : float, global L1 sensitivity Δ₁ > 0
    """

    def __init__(self, epsilon: float, l1_sensitivity: float) -> None:
        self.epsilon = check_scalar(epsilon, "epsilon", POSITIVE, what="")
        self.l1_sensitivity = check_scalar(l1_sensitivity, "l1_sensitivity", POSITIVE, what="")
        self.scale: float = float(laplace_scale(self.epsilon, self.l1_sensitivity))
        self.sigma = math.sqrt(2.0) * self.scale

    def __repr__(self) -> str:
        return f"LaplaceMechanism(epsilon={self.epsilon!r}, l1_sensitivity={self.l1_sensitivity!r})"

    def noise_plan(self, dim: int, *, secure: bool = True, grid: float | None = None) -> NoisePlan:
        """The noise law and label of a release of ``dim`` coordinates, drawing no noise
        (secure: the discrete Laplace lattice law; else ``LaplaceNoise(b)``)."""
        d = _dim(dim)
        if secure:
            law: NoiseLaw = laplace_lattice_law(self.epsilon, self.l1_sensitivity, d, grid)
            name = f"laplace, secure lattice {law.name}"
        else:
            _no_grid(grid)
            law, name = LaplaceNoise(self.scale), "laplace"
        return NoisePlan(law, name, d, self.epsilon, 0.0, self.l1_sensitivity)

    def event(self, dim: int, *, secure: bool = True, grid: float | None = None) -> PrivacyEvent:
        """The privacy event of a release of ``dim`` coordinates (ε-DP, not μ-GDP)."""
        return self.noise_plan(dim, secure=secure, grid=grid).event()

    def release(
        self, values: object, rng: object = "secure", *, grid: float | None = None
    ) -> Release:
        """Release ``values`` with Laplace noise (secure lattice version by default)."""
        source = resolve_rng(rng)
        arr, template = values_array(values)

        def experiment(gen: np.random.Generator) -> np.ndarray:
            return arr + gen.laplace(0.0, self.scale, size=arr.shape)

        return _release(arr, template, source, grid, self.noise_plan, experiment)


def _dim(dim: object) -> int:
    if isinstance(dim, bool) or not isinstance(dim, int | np.integer) or dim < 1:
        raise ValueError(f"dim must be a positive integer (the number of coordinates); got {dim!r}")
    return int(dim)


def _no_grid(grid: object) -> None:
    if grid is not None:
        raise ValueError("grid applies to secure releases only (rng='secure')")


def _release(
    arr: np.ndarray,
    template: Any,
    source: object,
    grid: float | None,
    noise_plan: Callable[..., NoisePlan],
    experiment: Callable[[np.random.Generator], np.ndarray],
) -> Release:
    """The shared path of the real-valued mechanisms: plan the law, draw, wrap like the input."""
    secure = isinstance(source, SecureRandom)
    plan = noise_plan(max(arr.size, 1), secure=secure, grid=grid)
    if secure:
        noisy = add_lattice_noise(arr, plan.noise, source)  # type: ignore[arg-type]
    else:
        noisy = experiment(source)  # type: ignore[arg-type]
    return _from_plan(plan, wrap(template, noisy))


def _from_plan(plan: NoisePlan, values: Any) -> Release:
    return Release(
        values=values,
        sigma=plan.noise.std,
        epsilon=plan.epsilon,
        delta=plan.delta,
        sensitivity=plan.sensitivity,
        mechanism=plan.mechanism,
        noise=plan.noise,
    )


# ------------------------------------------------------------------ integer-valued queries

_AT_LEAST_ONE = Interval(1.0, math.inf, low_closed=True)
_INT_LIMIT = 1 << 62  # |value| below this: adding the noise cannot overflow int64


def integer_values_array(values: object) -> tuple[np.ndarray, Any]:
    """Validate integer-valued input: an int64 array and a template to wrap results.

    Accepts integer dtypes and integral floats (a pandas Series keeps its index); raises
    ``TypeError`` for non-numbers and ``ValueError`` naming the first position that is not
    a finite integer or whose magnitude is 2^62 or more.
    """
    series = _is_series(values)
    raw = values.to_numpy() if _is_series(values) else values
    if isinstance(raw, bool | np.bool_) or raw is None or isinstance(raw, str | bytes):
        raise TypeError(
            f"values must be an integer or an array of integers; got {type(raw).__name__}"
        )
    try:
        arr = np.asarray(raw)
    except (TypeError, ValueError, OverflowError) as exc:
        raise TypeError(f"values must be integers; could not convert: {exc}") from None
    if arr.dtype.kind not in "iuf":
        raise TypeError(f"values must be integers; got an array of dtype {arr.dtype}")
    template: Any = values if series else (0 if arr.ndim == 0 else arr)

    def fail(mask: np.ndarray, rule: str) -> None:
        bad = tuple(int(i) for i in np.argwhere(mask)[0]) if arr.ndim else ()
        value = (arr[bad] if arr.ndim else arr[()]).item()
        where = f" at index {bad}" if arr.ndim else ""
        raise ValueError(f"values must {rule}; got {value!r}{where}")

    if arr.dtype.kind == "f":
        check_interval(arr.astype(np.float64), "values", REAL)
        frac = arr != np.floor(arr)
        if frac.any():
            fail(frac, "be integers (DiscreteGaussianMechanism is for integer-valued queries)")
        big = np.abs(arr) >= float(_INT_LIMIT)
    elif arr.dtype.kind == "u":
        big = arr >= np.uint64(_INT_LIMIT)
    else:
        big = np.abs(arr.astype(np.int64)) >= _INT_LIMIT
    if big.any():
        fail(big, "have magnitude below 2^62")
    return arr.astype(np.int64), template


class DiscreteGaussianMechanism:
    """Adds exact discrete Gaussian noise N_Z(0, σ²) to every coordinate of an integer query.

    For integer-valued queries (counts, histograms): the released values are integers,
    the noise is sampled exactly (CKS20 Algorithms 1-3) from the operating system's CSPRNG
    by default, and σ is calibrated with the discrete Gaussian's own guarantee for the
    number d of released coordinates
    (:func:`dpgauss.privacy.discrete_multivariate.discrete_gaussian_vector_sigma`), then
    raised until its μ-GDP charge fits a budget of the same (ε, δ)
    (:func:`~dpgauss.privacy.discrete_multivariate.discrete_gaussian_gdp_sigma`: about
    1e-3 of σ for counts at (1, 1e-6), much more where σ < 1, i.e. ε of several units):

    * d = 1, or 1 ≤ Δ₂ < √2 (e.g. a histogram where one person changes one count by one):
      the exact scalar profile of CKS20 Thm 7 (integer sensitivity ⌊Δ₂⌋ resp. 1);
    * otherwise the smaller of two valid bounds: CKS20 Thm 14 (½(Δ₂/σ)²-zCDP) with the
      Cor. 13 conversion, and a Poisson-summation comparison with the continuous Gaussian
      (derived in that module), over the at most min(d, ⌊Δ₂²⌋) coordinates an integer
      shift can change; it costs τ²/(2σ²) of σ, e.g. 0.11 % at Δ₂ = 5, d ≥ 25, (1, 1e-6).

    The output is integers (γ = 1), where σ is a few units and the discrete Gaussian's own
    profile is not Gaussian-shaped: at (2, 1e-6) with Δ₂ = 1 its exact profile alone needs
    0.7 % more σ than the analytic one.  For the least noise on counts use
    ``GaussianMechanism(ε, δ, Δ).release(counts, integer=True)`` (the same exact noise on
    a finer grid 2^-k: within about 1e-5 of the analytic σ; floats out).

    Parameters
    ----------
    epsilon : float, ε ≥ 0
    delta : float, δ ∈ (0, 1)
    l2_sensitivity : float, Δ₂ ≥ 1 — the largest L2 norm of the change of the integer
        vector between neighbouring datasets.

    Examples
    --------
    >>> mech = DiscreteGaussianMechanism(epsilon=1.0, delta=1e-6)
    >>> rel = mech.release([12, 40, 7], rng=0)     # seeded: an experiment
    >>> rel.values.dtype
    dtype('int64')
    """

    def __init__(self, epsilon: float, delta: float, l2_sensitivity: float = 1.0) -> None:
        self.epsilon = check_scalar(epsilon, "epsilon", NONNEGATIVE, what="")
        self.delta = check_scalar(delta, "delta", UNIT_OPEN, what="")
        self.l2_sensitivity = check_scalar(l2_sensitivity, "l2_sensitivity", _AT_LEAST_ONE, what="")

    def __repr__(self) -> str:
        return (
            f"DiscreteGaussianMechanism(epsilon={self.epsilon!r}, delta={self.delta!r}, "
            f"l2_sensitivity={self.l2_sensitivity!r})"
        )

    def sigma_for(self, dim: int) -> float:
        """The calibrated σ for a release of ``dim`` coordinates (cached).

        :func:`~dpgauss.privacy.discrete_multivariate.discrete_gaussian_gdp_sigma`: certified
        for (ε, δ), and its μ-GDP charge is at most ``gdp_mu(ε, δ)``, so the release fits a
        ledger budget of the same (ε, δ).
        """
        d = _dim(dim)
        sens = DiscreteGaussianNoise(1.0, dim=d).lattice_sensitivity(self.l2_sensitivity)
        return float(discrete_gaussian_gdp_sigma(self.epsilon, self.delta, sens, d))

    def noise_plan(self, dim: int) -> NoisePlan:
        """The noise law and label of a release of ``dim`` coordinates, drawing no noise."""
        d = _dim(dim)
        law = DiscreteGaussianNoise(self.sigma_for(d), dim=d)
        return NoisePlan(law, "discrete gaussian", d, self.epsilon, self.delta, self.l2_sensitivity)

    def event(self, dim: int) -> PrivacyEvent:
        """The privacy event of a release of ``dim`` coordinates (``noise_plan(dim).event()``)."""
        return self.noise_plan(dim).event()

    def release(self, values: object, rng: object = "secure") -> Release:
        """Release integer ``values`` (any shape) plus exact N_Z(0, σ²) noise.

        ``rng="secure"`` (default) draws from the OS CSPRNG; an int seed or a Generator
        runs the same exact sampler from that Generator (reproducible experiments, not for
        publishing).  Returns int64 values (a Python int for a scalar, a Series keeps its
        index) and the exact :class:`~dpgauss.noise.release.DiscreteGaussianNoise` law,
        ``noise_plan(d).noise``.
        """
        arr, template = integer_values_array(values)
        source = resolve_rng(rng)
        plan = self.noise_plan(max(arr.size, 1))
        law = plan.noise
        assert isinstance(law, DiscreteGaussianNoise)
        noisy = arr + discrete_gaussian(law.sigma_lattice, arr.shape, rng=source)
        return _from_plan(plan, wrap(template, noisy))
