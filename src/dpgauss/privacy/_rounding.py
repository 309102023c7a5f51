r"""The one home of "never under-noise": every rounding toward the safe side.

A privacy guarantee computed in floating point is only a guarantee if every rounding error
moves the answer toward *more* privacy loss charged (μ, δ, ε up) or *more* noise (σ, Δ, a
half-width up).  The shared rounding steps live here, each stated and tested once; code
elsewhere imports them instead of writing its own (a one-off ``math.nextafter`` on a
correctly rounded result, inside a formula, is :func:`up` applied in place).

The contract
------------
Every ``*_up`` helper returns a double ``≥`` the exact (real) value it stands for, every
``*_down`` helper a double ``≤`` it; none returns NaN for a valid argument.  Proof sketch,
helper by helper (IEEE 754 binary64, round-to-nearest; ``fl(·)`` the rounded operation,
correctly rounded for ``+ − × ÷ √`` and for the conversion of an int or ``Fraction``):

* :func:`up` / :func:`down`: the next double above ``x`` / below ``x ≥ 0``.
  ``up(x) > x`` for every finite ``x`` (``up(inf) = inf``; NaN stays NaN), ``down(x) < x``
  for ``x > 0`` (``down(0) = 0``).  Applied to a correctly rounded ``fl(a ∘ b)``, which is
  within half an ulp of ``a ∘ b``, ``up`` gives a double ``≥ a ∘ b``.
* :func:`mu_up`: ``up(fl(Δ/σ)) ≥ Δ/σ`` by the previous line (one ulp above the nearest
  double: up to one ulp above the smallest double ``≥ Δ/σ``; an overflow gives ``inf``).
* :func:`mu_up_exact`, :func:`quotient_up`, :func:`mul_up`, :func:`rational_up`:
  ``q = fl(exact)`` is the nearest double; the exact comparison ``Fraction(q) < exact``
  (rational arithmetic, no rounding) decides whether ``up(q)`` is needed, so the result
  is the *smallest* double ``≥`` the exact value (an underflow to 0 gives the smallest
  subnormal, :data:`TINY`).
* :func:`sqrt_up` / :func:`sqrt_down` (of an exact rational ``x ≥ 0``): a first guess
  ``s`` in double precision, then steps of one ulp until ``Fraction(s)² ≥ x`` (``≤ x``),
  tested exactly, so the side is certain; the guess is within an ulp or two, so the
  result is at most an ulp or two from the nearest double on that side (the smallest
  when ``float(x)`` is exact).
* :func:`sqrt_sum_up`: a recursive sum of ``n`` non-negative doubles is within
  ``(n−1)u Σxᵢ`` of the exact sum (u = 2⁻⁵³; Higham, *Accuracy and Stability of
  Numerical Algorithms*, §4.2), the factor ``1 + 2(n+1)u`` covers that and the rounding
  of the product, and ``up`` covers the correctly rounded ``√``.
* :func:`delta_from_log` / :func:`delta_from_log_array`: ``exp`` of the libm / NumPy is
  within one ulp (absolute: one subnormal ulp, :data:`TINY`, below 2⁻¹⁰²²), ``up`` covers
  it; the result is clipped to ``[TINY, 1]``: a probability is at most 1, and a δ is
  never rounded down to 0 (a charge of 0 would be a claim of perfect privacy).
* :func:`sum_squares`: exact (a rational, no rounding at all); it is the ledger's exact
  composition ``Σ μᵢ²`` of μ-GDP charges (Dong, Roth & Su 2019, Cor. 3.3), compared
  exactly with the budget ``μ_B²`` by :func:`fits_budget`.

Two μ = Δ/σ helpers, on purpose: :func:`mu_up` is the accountant's and the privacy
profile's (vectorised, never raises, one ulp of slack), :func:`mu_up_exact` the ledger's
(the smallest double ``≥ Δ/σ``, which the ledger records and its tests check bit for bit;
it refuses an overflow).  Both are on the safe side; they differ by at most one ulp, and
keeping both keeps every number the library computed before identical.

The tests (``tests/privacy/test_rounding.py``) check each helper against mpmath at 200
digits, at 0, subnormals, huge values and ``inf``, and with hypothesis.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from fractions import Fraction
from typing import Any

import numpy as np

__all__ = [
    "TINY",
    "UNIT_ROUNDOFF",
    "delta_from_log",
    "delta_from_log_array",
    "down",
    "fits_budget",
    "mu_up",
    "mu_up_exact",
    "mul_up",
    "quotient_up",
    "rational_up",
    "sqrt_down",
    "sqrt_sum_up",
    "sqrt_up",
    "sub_down",
    "sum_squares",
    "sum_up",
    "up",
]

#: The smallest positive double (a subnormal): a δ is never rounded down below it.
TINY = 5e-324
#: The unit roundoff u = 2⁻⁵³ of round-to-nearest binary64.
UNIT_ROUNDOFF = 2.0**-53


def up(x: Any) -> Any:
    """The next double above ``x``: a Python float for a float, an array for an array.

    ``up(inf) = inf`` and NaN stays NaN.  Applied to a correctly rounded result it gives a
    double ≥ the exact result (module docstring).
    """
    if isinstance(x, float | int) and not isinstance(x, bool):
        return math.nextafter(float(x), math.inf)
    return np.nextafter(x, np.inf)


def down(x: Any) -> Any:
    """The next double below a non-negative ``x``, toward 0 (the mirror of :func:`up`).

    0 stays 0, so a lower bound of a non-negative quantity stays non-negative.
    """
    if isinstance(x, float | int) and not isinstance(x, bool):
        return math.nextafter(float(x), 0.0)
    return np.nextafter(x, 0.0)


def mu_up(sensitivity: np.ndarray, sigma: np.ndarray) -> np.ndarray:
    """``μ = Δ/σ`` rounded up, elementwise: ``up(fl(Δ/σ)) ≥ Δ/σ`` (an overflow gives inf).

    The accountant's and the profile's μ: a larger μ is always the conservative side.
    """
    with np.errstate(over="ignore"):
        return np.nextafter(sensitivity / sigma, np.inf)


def quotient_up(a: float, b: float) -> float:
    """The smallest double ≥ a/b for a ≥ 0, b > 0 finite (inf if a/b overflows; exact: the
    quotient is checked with rationals)."""
    with np.errstate(over="ignore"):
        q = float(np.float64(a) / np.float64(b))
    if math.isfinite(q) and Fraction(q) * Fraction(b) < Fraction(a):
        q = math.nextafter(q, math.inf)
    return q


def mu_up_exact(sensitivity: float, sigma: float) -> float:
    """The smallest double ≥ Δ/σ (exact: the quotient is checked with rationals).

    The ledger's μ.  Raises ``ValueError`` if Δ/σ overflows (no finite μ).
    """
    q = sensitivity / sigma
    if not math.isfinite(q):
        raise ValueError(
            f"sensitivity/sigma = {sensitivity!r}/{sigma!r} overflows; such a release "
            "has no privacy to speak of"
        )
    if q == 0.0 or Fraction(q) * Fraction(sigma) < Fraction(sensitivity):
        q = math.nextafter(q, math.inf)
    return q


def rational_up(q: Fraction | int) -> float:
    """The smallest double ≥ the exact rational ``q`` (``|q|`` ≤ the largest double)."""
    f = float(q)  # int / int: correctly rounded
    if Fraction(f) < q:
        f = math.nextafter(f, math.inf)
    return f


def mul_up(a: float, b: float) -> float:
    """The smallest double ≥ a·b for non-negative a, b (inf if a·b overflows)."""
    p = a * b
    if math.isinf(p):
        return p
    while Fraction(p) < Fraction(a) * Fraction(b):
        p = math.nextafter(p, math.inf)
    return p


def _sqrt(x: Fraction, *, up: bool) -> float:
    """√x for an exact rational x ≥ 0, as a double on the requested side (module docstring)."""
    if x <= 0:
        return 0.0
    k = (x.numerator.bit_length() - x.denominator.bit_length()) // 2
    scaled = x / Fraction(4) ** k if k >= 0 else x * Fraction(4) ** (-k)
    try:
        s = math.ldexp(math.sqrt(float(scaled)), k)
    except OverflowError:
        return math.inf if up else math.nextafter(math.inf, 0.0)
    if up:
        while Fraction(s) ** 2 < x:
            s = math.nextafter(s, math.inf)
    else:
        while Fraction(s) ** 2 > x:
            s = math.nextafter(s, 0.0)
    return s


def sqrt_up(x: Fraction | int | float) -> float:
    """A double ≥ √x for an exact rational ``x`` (inf beyond the largest double; 0 for x ≤ 0).

    The first guess is scaled by a power of 4 (exact), so the result is the smallest such
    double whenever ``float(x)`` is exact (integers below 2⁵³, doubles).
    """
    return _sqrt(Fraction(x), up=True)


def sqrt_down(x: Fraction | int | float) -> float:
    """A double ≤ √x for an exact rational ``x ≥ 0`` (the largest finite double beyond it)."""
    return _sqrt(Fraction(x), up=False)


def sum_squares(values: Iterable[float]) -> Fraction:
    """``Σ xᵢ²`` exactly.  Each double is n/2^k, so the sum is an integer over 2^(2 max k).

    The ledger's exact composition of μ-GDP charges: ``Σ μᵢ² ≤ μ_B²`` is decided on it.
    """
    pairs = [float(m).as_integer_ratio() for m in values]
    if not pairs:
        return Fraction(0)
    top = max(d.bit_length() for _, d in pairs) - 1
    total = sum((n * n) << (2 * (top - d.bit_length() + 1)) for n, d in pairs)
    return Fraction(total, 1 << (2 * top))


def fits_budget(mus: Iterable[float], mu_budget: float, count: int = 1) -> bool:
    """Whether ``count`` repetitions of the charges ``mus`` fit the budget ``μ_B``:
    ``count · Σ μᵢ² ≤ μ_B²``, decided exactly in rationals (no rounding either way).

    The ledger's test, which the planners (``plan_queries``, ``dpgauss budget plan``)
    reproduce so that what they plan is what the ledger accepts.
    """
    return count * sum_squares(mus) <= Fraction(mu_budget) ** 2


def sqrt_sum_up(squares: np.ndarray, extra_terms: int = 0) -> float:
    """``√(Σ xᵢ)`` of non-negative doubles, rounded up: any summation of n terms is within
    ``(n−1)u Σ|xᵢ|``; ``extra_terms`` counts terms already folded into the ``xᵢ``."""
    n = squares.size + extra_terms
    total = float(np.sum(squares))
    bound = total * (1.0 + 2.0 * (n + 1) * UNIT_ROUNDOFF)
    return float(np.nextafter(math.sqrt(bound), np.inf))


def delta_from_log(log_d: float) -> float:
    """δ = e^{log δ} rounded up, clipped to ``[TINY, 1]`` (a Python float).

    ``log_d ≥ 0`` gives 1 (also where ``exp`` would overflow); ``-inf`` gives :data:`TINY`.
    """
    if log_d >= 0.0:
        return 1.0
    return min(max(math.nextafter(math.exp(log_d), math.inf), TINY), 1.0)


def delta_from_log_array(log_d: np.ndarray) -> np.ndarray:
    """:func:`delta_from_log` elementwise on an array."""
    with np.errstate(under="ignore", over="ignore"):
        d = np.nextafter(np.exp(log_d), np.inf)
    return np.clip(d, TINY, 1.0)


def sum_up(values: Iterable[float]) -> float:
    """``Σ xᵢ`` of doubles, exactly in rationals, then the smallest double ≥ it (0.0 for none)."""
    total = sum((Fraction(float(v)) for v in values), Fraction(0))
    return rational_up(total) if total else 0.0


def sub_down(a: float, b: float) -> float:
    """``a − b`` rounded down — the largest double ≤ the exact difference — floored at 0."""
    diff = Fraction(float(a)) - Fraction(float(b))
    if diff <= 0:
        return 0.0
    out = float(diff)  # nearest; one ulp down if that rounded up
    return math.nextafter(out, 0.0) if Fraction(out) > diff else out
