"""Secure releases of real-valued queries: round to a public grid, add exact lattice noise.

Adding ``numpy``'s floating-point Gaussian or Laplace noise to a value leaks it through the
pattern of representable outputs (Mironov 2012; Jin et al. 2022).  The releases here never
add a floating-point random number to anything:

1. ``r = round(f(x)/γ)`` — the query rounded to the public grid γ·Z^d, *exactly* (the
   division is exact for the default power-of-two grids; for other grids the few values
   whose float quotient lies within rounding error of a half-integer are re-rounded with
   exact rational arithmetic).  Then |r − f(x)/γ| ≤ 1/2 per coordinate.
2. ``Y`` — integer noise from an exact sampler fed by a cryptographic source (or, for
   tests and experiments, a seeded ``numpy`` Generator).
3. The release is ``γ·(r + Y)``, a deterministic function of the integer vector r + Y
   (post-processing), exactly representable for power-of-two γ.

Rounding is paid for in the calibration.  If ‖f(x) − f(x′)‖ ≤ Δ then
``‖r − r′‖₂ ≤ Δ/γ + √d`` and ``‖r − r′‖₁ ≤ Δ₁/γ + d`` (each coordinate's rounding error
moves by less than 1), so in lattice units:

* Gaussian: Y ~ N_Z(0, σ_L²)^d with σ_L from
  :func:`dpgauss.privacy.discrete_multivariate.discrete_gaussian_gdp_sigma` for (ε, δ) at
  L2 sensitivity Δ_L = Δ/γ + √d (rounded up): certified for (ε, δ), and with a μ-GDP
  charge (``DiscreteGaussianNoise.dominating_mu``) of at most ``gdp_mu(ε, δ)``, so the
  release fits a ledger budget of the same (ε, δ) (it costs 1e-9 to 2.6e-7 of σ over the
  smallest σ certified at ε alone; ``docs/security.md``);
* Laplace: P[Y = y] ∝ exp(−|y|/t) per coordinate (the discrete Laplace / two-sided
  geometric mechanism of Ghosh, Roughgarden & Sundararajan 2009; sampled by CKS20 Alg. 2)
  with the integer scale t = ⌈Δ_L/ε⌉ and the integer L1 sensitivity Δ_L = ⌊Δ₁/γ + d⌋:
  for integer shifts s with ‖s‖₁ ≤ Δ_L, P[Y = y]/P[Y = y − s] ≤ e^{‖s‖₁/t} ≤ e^ε, so the
  release is ε-DP.  (Rounding the scale up to an integer costs a relative ε/Δ_L ≈ 1/(100d).)

Choice of the grid (:func:`choose_grid`).  The noise needed grows with the sensitivity, so
rounding costs a factor (1 + γ√d/Δ) in σ (Gaussian) resp. (1 + γd/Δ₁) in the scale
(Laplace).  The default γ is the largest power of two with γ√d ≤ Δ/100 (resp.
γd ≤ Δ₁/100): rounding costs between 0.5 % and 1 % of the noise, and ``value/γ`` is
exact.  σ enters only through the sampler's range: γ is raised (costing more than 1 %)
if σ/γ would exceed 2^36, which needs √d > 2^36 Δ/(100σ) — about d > 10^17 for usual σ/Δ.
``grid=`` overrides the rule (any positive float; a power of two keeps the outputs
exactly on the grid).

Only the changed coordinates count (``changed=``).  If neighbouring values can differ in at
most n ≤ d coordinates (a unit touches at most n keys), the other coordinates are equal,
round to the same grid point and carry the same noise law under both neighbours: they add
nothing to any divergence.  Then ``‖r − r′‖₂ ≤ Δ/γ + √n`` and the discrete Gaussian bound is
over n coordinates (:mod:`dpgauss.privacy.discrete_multivariate`); the default grid is the
largest power of two with γ√n ≤ ``cost``·Δ.

Integer-valued queries need no rounding (:func:`integer_lattice_law`).  An integer lies on
every grid γ = 2^-k, so ``r = value/γ`` exactly and the shift between neighbours is
``(q(x) − q(x′))/γ``: an integer vector of L2 norm at most Δ/γ (exactly: γ is a power of
two) whose non-zero coordinates are multiples of 2^k, hence at most ``⌊Δ²⌋`` of them (and
at most n).  No √d term: the noise is the exact discrete Gaussian calibrated at Δ itself.
γ = 1 releases integers; the default γ is the largest power of two ≤ 1 with σ/γ ≥ 2^8,
where the discrete Gaussian's own profile is within about 1e-5 of the continuous one (at
γ = 1 and σ ≈ 2, the exact CKS20 Thm 7 profile alone costs 0.7 % of σ at (2, 1e-6)).

Limits: |value|/γ must stay below 2^51 (else ValueError: pass a coarser ``grid``); σ_L
must lie in the sampler's range [2^-30, 2^40], the Laplace scale t below 2^47; an integer
value times 2^k must stay below 2^62.
"""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np

from .._validation import POSITIVE, Interval, check_scalar
from ..privacy._rounding import quotient_up
from ..privacy.calibration import analytic_gaussian_sigma
from ..privacy.discrete_multivariate import discrete_gaussian_gdp_sigma, integer_shift_bound
from .discrete_sampler import SIGMA_RANGE, _discrete_laplace, discrete_gaussian
from .randomness import RandomSource
from .release import DiscreteGaussianNoise, DiscreteLaplaceNoise

__all__ = [
    "add_lattice_noise",
    "choose_grid",
    "gaussian_lattice_law",
    "integer_grid",
    "integer_lattice_law",
    "laplace_lattice_law",
    "secure_gaussian_release",
    "secure_laplace_release",
]

ROUNDING_COST = 0.01
"""Default grids make the rounding cost at most this fraction of the noise (and at least
half of it, being powers of two)."""

INTEGER_LATTICE_SCALE_LOG2 = 8
"""Integer releases: the default grid 2^-k keeps σ/γ ≥ 2^8 (:func:`integer_grid`)."""

_MAX_LATTICE_SCALE_LOG2 = 36  # default grids keep σ/γ ≤ 2^36 (sampler allows 2^40)
_INT_LIMIT = 1 << 62
_MAX_QUOTIENT = 2.0**51
_MAX_LAPLACE_SCALE = 1 << 47
_DIM = Interval(1.0, math.inf, low_closed=True)
_COST = Interval(0.0, 1.0)


def choose_grid(
    sigma: float, dim: int, sensitivity: float, *, norm: int = 2, cost: float = ROUNDING_COST
) -> float:
    """The default public grid γ for a secure release (module docstring).

    Parameters
    ----------
    sigma
        The noise scale the release is calibrated for, in the values' units (the
        continuous analytic σ for Gaussian, the Laplace scale Δ₁/ε for Laplace).
    dim
        Number of released coordinates d ≥ 1 (or of the coordinates that can change).
    sensitivity
        Δ (L2, ``norm=2``) or Δ₁ (L1, ``norm=1``) of the real-valued query.
    cost
        The largest rounding cost allowed, a fraction of the noise in (0, 1)
        (:data:`ROUNDING_COST`, 1 %, by default).

    Returns
    -------
    γ = 2^k, the largest power of two with γ·d^{1/norm} ≤ cost·Δ, raised if needed so that
    σ/γ ≤ 2^36.

    >>> choose_grid(4.0, 100, 1.0)
    0.0009765625
    """
    sigma = check_scalar(sigma, "sigma", POSITIVE)
    sensitivity = check_scalar(sensitivity, "sensitivity", POSITIVE)
    d = int(check_scalar(dim, "dim", _DIM, integer=True))
    if norm not in (1, 2):
        raise ValueError(f"norm must be 1 or 2; got {norm!r}")
    cost = check_scalar(cost, "cost", _COST)
    spread = math.sqrt(d) if norm == 2 else float(d)
    k = math.floor(math.log2(cost * sensitivity / spread))
    # log2 is rounded: make sure 2^k·spread ≤ cost·Δ really holds, and 2^(k+1) does not.
    while math.ldexp(spread, k) > cost * sensitivity:
        k -= 1
    while math.ldexp(spread, k + 1) <= cost * sensitivity:
        k += 1
    k = max(k, math.ceil(math.log2(sigma)) - _MAX_LATTICE_SCALE_LOG2)
    return math.ldexp(1.0, k)


def _grid(grid: object, default: float) -> float:
    if grid is None:
        return default
    return check_scalar(grid, "grid", POSITIVE)


def round_to_grid(values: np.ndarray, grid: float) -> np.ndarray:
    """``round(values/grid)`` as int64, exactly (ties to even), for finite float values.

    The float quotient q has |q − v/γ| ≤ 2^-53 |v/γ|; wherever |q − rint(q)| is within
    2^-51 |q| of 1/2 the exact rational v/γ is rounded instead, so every result is a
    nearest integer of the exact quotient.
    """
    arr = np.asarray(values, dtype=np.float64)
    with np.errstate(over="ignore", under="ignore"):
        q = arr / grid
    ok = np.abs(q) < _MAX_QUOTIENT
    if not ok.all():
        bad = tuple(int(i) for i in np.argwhere(~ok)[0]) if arr.ndim else ()
        where = f" at index {bad}" if arr.ndim else ""
        raise ValueError(
            f"values must satisfy |value|/grid < 2^51 for a secure release on the grid "
            f"{grid!r}; got {float(arr[bad] if arr.ndim else arr)!r}{where} (pass a coarser grid=)"
        )
    r = np.rint(q)
    near = 0.5 - np.abs(q - r) <= np.abs(q) * 2.0**-51
    flat_r, flat_v = r.reshape(-1), arr.reshape(-1)
    exact_grid = Fraction(grid)
    for i in np.flatnonzero(near.reshape(-1)).tolist():
        flat_r[i] = round(Fraction(float(flat_v[i])) / exact_grid)
    return flat_r.reshape(arr.shape).astype(np.int64)


def lattice_sensitivity(sensitivity: float, grid: float, dim: int) -> float:
    """Δ/γ + √d rounded up: the L2 sensitivity of the rounded query in lattice units (d the
    coordinates that can change)."""
    return DiscreteGaussianNoise(1.0, grid, rounded=True, dim=dim).lattice_sensitivity(sensitivity)


def _changed(dim: int, changed: object) -> int:
    """``min(dim, changed)``, ``changed`` a positive integer or None (then ``dim``)."""
    if changed is None:
        return dim
    c = int(check_scalar(changed, "changed", _DIM, integer=True))
    return min(dim, c)


def lattice_sigma(
    epsilon: float,
    delta: float,
    sensitivity: float,
    dim: int,
    grid: float | None = None,
    *,
    changed: int | None = None,
    cost: float = ROUNDING_COST,
) -> tuple[float, float]:
    """``(σ_L, γ)``: the grid and the lattice σ of a secure Gaussian release (no sampling).

    σ_L is :func:`~dpgauss.privacy.discrete_multivariate.discrete_gaussian_gdp_sigma` at
    the lattice sensitivity :func:`lattice_sensitivity` over the n = ``min(dim, changed)``
    coordinates that can change (module docstring); the default grid is
    :func:`choose_grid` for n coordinates at ``cost``.
    """
    n = _changed(max(int(dim), 1), changed)
    if grid is None:
        sigma = float(analytic_gaussian_sigma(epsilon, delta, sensitivity))
        grid = choose_grid(sigma, n, sensitivity, cost=cost)
    sens_lattice = lattice_sensitivity(sensitivity, grid, n)
    sigma_l = float(discrete_gaussian_gdp_sigma(epsilon, delta, sens_lattice, n))
    _check_range(sigma_l, grid)
    return sigma_l, grid


def _check_range(sigma_l: float, grid: float) -> None:
    if not SIGMA_RANGE.contains(np.asarray(sigma_l)):
        raise ValueError(
            f"the lattice noise scale sigma/grid = {sigma_l!r} is outside the sampler's range "
            f"{SIGMA_RANGE}: choose a grid closer to the noise scale (got grid={grid!r})"
        )


def gaussian_lattice_law(
    epsilon: float,
    delta: float,
    sensitivity: float,
    dim: int,
    grid: float | None = None,
    *,
    changed: int | None = None,
    cost: float = ROUNDING_COST,
) -> DiscreteGaussianNoise:
    """The noise law of a secure Gaussian release of ``dim`` coordinates, without sampling.

    ``grid`` None chooses γ by :func:`choose_grid` (at ``cost``) from the continuous
    analytic σ; a given grid is validated (positive, finite).  ``changed`` bounds the
    coordinates in which neighbouring values can differ (module docstring).
    :func:`secure_gaussian_release` adds exactly this law.
    """
    gamma = _grid(grid, 0.0) if grid is not None else None
    d = max(int(dim), 1)
    sigma_l, gamma = lattice_sigma(
        epsilon, delta, sensitivity, d, gamma, changed=changed, cost=cost
    )
    c = None if changed is None else _changed(d, changed)
    return DiscreteGaussianNoise(sigma_l, gamma, rounded=True, dim=d, changed=c)


def integer_grid(sigma: float) -> float:
    """The default grid of an integer release: γ = 2^-k, the largest power of two ≤ 1 with
    σ/γ ≥ 2^8 (:data:`INTEGER_LATTICE_SCALE_LOG2`), for the continuous analytic σ.

    >>> integer_grid(300.0), integer_grid(21.12), integer_grid(2.23)
    (1.0, 0.0625, 0.0078125)
    """
    sigma = check_scalar(sigma, "sigma", POSITIVE)
    k = max(0, INTEGER_LATTICE_SCALE_LOG2 - math.floor(math.log2(sigma)))
    while k > 0 and math.ldexp(sigma, k - 1) >= 2.0**INTEGER_LATTICE_SCALE_LOG2:
        k -= 1  # log2 is rounded: the largest γ that keeps σ/γ ≥ 2^8
    while math.ldexp(sigma, k) < 2.0**INTEGER_LATTICE_SCALE_LOG2:
        k += 1
    return math.ldexp(1.0, -k)


def integer_lattice_law(
    epsilon: float,
    delta: float,
    sensitivity: float,
    dim: int,
    grid: float | None = None,
    *,
    changed: int | None = None,
) -> DiscreteGaussianNoise:
    """The noise law of a secure release of an *integer-valued* query (counts), no rounding.

    ``γ·N_Z(0, σ_L²)^d`` on the grid γ = 2^-k ≤ 1 (:func:`integer_grid` when None; a given
    grid must be such a power of two): integers lie on it, so the shift between neighbours
    is ``(q(x) − q(x′))/γ``, of L2 norm at most Δ/γ exactly, with at most
    ``n = min(d, changed, ⌊Δ²⌋)`` non-zero coordinates (each is a non-zero integer times
    2^k).  σ_L is :func:`~dpgauss.privacy.discrete_multivariate.discrete_gaussian_gdp_sigma`
    at Δ/γ over n coordinates: certified for (ε, δ), with a μ-GDP charge at most
    ``gdp_mu(ε, δ)``.  For n = 1 this is the exact CKS20 Thm 7 profile at the integer
    sensitivity ⌊Δ/γ⌋.  The law's ``rounded`` is False and its ``changed`` is n.
    """
    d = max(int(dim), 1)
    if grid is None:
        gamma = integer_grid(float(analytic_gaussian_sigma(epsilon, delta, sensitivity)))
    else:
        gamma = _grid(grid, 0.0)
        if not (gamma <= 1.0 and math.frexp(gamma)[0] == 0.5):
            raise ValueError(
                f"grid must be a power of two 2^-k <= 1 for an integer release (integers lie "
                f"on it); got {grid!r}"
            )
    m, _ = integer_shift_bound(sensitivity)  # ⌊Δ²⌋, exact: a changed key moves by ≥ 1
    if m < 1:
        raise ValueError(
            f"sensitivity must be >= 1 for an integer-valued query (a changed value moves by "
            f"at least 1); got {sensitivity!r}"
        )
    n = min(_changed(d, changed), m)
    sens_lattice = quotient_up(sensitivity, gamma)  # exact: γ is a power of two
    sigma_l = float(discrete_gaussian_gdp_sigma(epsilon, delta, sens_lattice, n))
    if not SIGMA_RANGE.contains(np.asarray(sigma_l)):
        raise ValueError(
            f"the lattice noise scale sigma/grid = {sigma_l!r} is outside the sampler's range "
            f"{SIGMA_RANGE}, and an integer release's grid is at most 1 (got grid={gamma!r}): "
            "release the values rounded (integer=False)"
        )
    return DiscreteGaussianNoise(sigma_l, gamma, rounded=False, dim=d, changed=n)


def add_lattice_noise(
    values: np.ndarray, law: DiscreteGaussianNoise | DiscreteLaplaceNoise, source: RandomSource
) -> np.ndarray:
    """``γ·(round(values/γ) + Y)`` with Y drawn exactly from ``law`` (rounded lattice laws).

    ``values`` is a finite float array; for a discrete Gaussian law its size must be the
    law's ``dim`` (the calibration depends on it).  Returns a float64 array of the same shape.
    """
    if isinstance(law, DiscreteGaussianNoise) and not law.rounded:
        return _add_integer_noise(values, law, source)
    arr = np.asarray(values, dtype=np.float64)
    if not law.rounded:
        raise ValueError("add_lattice_noise needs a law of a rounded (real-valued) release")
    if isinstance(law, DiscreteGaussianNoise):
        if max(arr.size, 1) != law.dim:
            raise ValueError(
                f"the law was calibrated for {law.dim} coordinates, the values have {arr.size}"
            )
        r = round_to_grid(arr, law.grid)
        y = discrete_gaussian(law.sigma_lattice, arr.shape, rng=source)
    else:
        r = round_to_grid(arr, law.grid)
        y = sample_discrete_laplace(int(law.scale), arr.shape, source)
    return (r + y).astype(np.float64) * law.grid


def _add_integer_noise(
    values: np.ndarray, law: DiscreteGaussianNoise, source: RandomSource
) -> np.ndarray:
    """``γ·(values/γ + Y)`` for integer ``values`` on the grid γ = 2^-k (no rounding)."""
    arr = np.asarray(values)
    if max(arr.size, 1) != law.dim:
        raise ValueError(
            f"the law was calibrated for {law.dim} coordinates, the values have {arr.size}"
        )
    exponent = -math.frexp(law.grid)[1] + 1  # γ = 2^-k
    if arr.dtype.kind == "f":
        flat = arr.astype(np.float64)
        bad = ~np.isfinite(flat) | (flat != np.floor(flat))
        if bad.any():
            raise ValueError(
                "values must be integers for an integer-valued release (counts); got "
                f"{float(flat[bad].ravel()[0])!r}"
            )
    elif arr.dtype.kind not in "iu":
        raise TypeError(f"values must be integers; got an array of dtype {arr.dtype}")
    limit = float(_INT_LIMIT >> exponent)
    if arr.size and float(np.max(np.abs(arr.astype(np.float64)))) >= limit:
        raise ValueError(
            f"values must have magnitude below 2^{62 - exponent} for an integer release on "
            f"the grid {law.grid!r}"
        )
    r = arr.astype(np.int64) << exponent  # value/γ, exact
    y = discrete_gaussian(law.sigma_lattice, arr.shape, rng=source)
    return (r + y).astype(np.float64) * law.grid


def secure_gaussian_release(
    values: np.ndarray,
    epsilon: float,
    delta: float,
    sensitivity: float,
    *,
    grid: float | None = None,
    source: RandomSource,
) -> tuple[np.ndarray, DiscreteGaussianNoise]:
    """``γ·(round(values/γ) + Y)``, Y ~ N_Z(0, σ_L²)^d: (ε, δ)-DP at L2 sensitivity Δ.

    Parameters
    ----------
    values
        Finite float array (any shape; d = its size).
    epsilon, delta, sensitivity
        The guarantee and the L2 sensitivity Δ of the real-valued query.
    grid
        γ, or None for :func:`choose_grid` of the continuous analytic σ.
    source
        ``SecureRandom`` for releases; a ``numpy.random.Generator`` for tests.

    Returns
    -------
    (noisy float64 array of the input's shape, its :class:`DiscreteGaussianNoise` law,
    equal to :func:`gaussian_lattice_law` for d = the values' size)
    """
    arr = np.asarray(values, dtype=np.float64)
    law = gaussian_lattice_law(epsilon, delta, sensitivity, max(arr.size, 1), grid)
    return add_lattice_noise(arr, law, source), law


def laplace_lattice_scale(
    epsilon: float, l1_sensitivity: float, dim: int, grid: float | None = None
) -> tuple[int, float]:
    """``(t, γ)``: the grid and the integer discrete-Laplace scale of a secure release."""
    d = max(int(dim), 1)
    if grid is None:
        grid = choose_grid(l1_sensitivity / epsilon, d, l1_sensitivity, norm=1)
    sens_lattice = math.floor(Fraction(l1_sensitivity) / Fraction(grid) + d)
    t = math.ceil(Fraction(sens_lattice) / Fraction(epsilon))
    if t > _MAX_LAPLACE_SCALE:
        raise ValueError(
            f"the lattice Laplace scale {t} exceeds 2^47: choose a coarser grid "
            f"(got grid={grid!r}) or a larger epsilon"
        )
    return t, grid


def sample_discrete_laplace(t: int, shape: tuple[int, ...], source: RandomSource) -> np.ndarray:
    """Exact i.i.d. draws with P[Y = y] ∝ exp(−|y|/t), integer t ≥ 1 (CKS20 Alg. 2)."""
    n = math.prod(shape)
    out = np.empty(n, dtype=np.int64)
    filled = 0
    while filled < n:
        need = n - filled
        y = _discrete_laplace(t, min(1 << 16, int(need * 1.8) + 32), source)[:need]
        out[filled : filled + y.size] = y
        filled += y.size
    return out.reshape(shape)


def laplace_lattice_law(
    epsilon: float, l1_sensitivity: float, dim: int, grid: float | None = None
) -> DiscreteLaplaceNoise:
    """The noise law of a secure Laplace release of ``dim`` coordinates, without sampling."""
    gamma = _grid(grid, 0.0) if grid is not None else None
    t, gamma = laplace_lattice_scale(epsilon, l1_sensitivity, max(int(dim), 1), gamma)
    return DiscreteLaplaceNoise(float(t), gamma, rounded=True)


def secure_laplace_release(
    values: np.ndarray,
    epsilon: float,
    l1_sensitivity: float,
    *,
    grid: float | None = None,
    source: RandomSource,
) -> tuple[np.ndarray, DiscreteLaplaceNoise]:
    """``γ·(round(values/γ) + Y)``, Y discrete Laplace of integer scale t: ε-DP at L1 Δ₁.

    t = ⌈⌊Δ₁/γ + d⌋/ε⌉ (module docstring); ``grid`` None chooses γ by :func:`choose_grid`
    (``norm=1``) from the scale Δ₁/ε.  Returns the noisy float64 array and its
    :class:`DiscreteLaplaceNoise` law (:func:`laplace_lattice_law`).
    """
    arr = np.asarray(values, dtype=np.float64)
    law = laplace_lattice_law(epsilon, l1_sensitivity, max(arr.size, 1), grid)
    return add_lattice_noise(arr, law, source), law
