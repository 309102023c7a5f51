"""Exact privacy profile and calibration of the discrete Gaussian mechanism.

M(x) = q(x) + X with X ~ N_Z(0, σ²), P[X = x] = w(x)/Z, w(x) = exp(-x²/(2σ²)),
Z = Σ_{y∈Z} w(y), for an integer-valued query q with |q(x) - q(x')| ≤ Δ (Δ a positive
integer).  Canonne, Kamath & Steinke, "The Discrete Gaussian for Differential Privacy"
(NeurIPS 2020), Theorem 7: M is (ε, δ)-DP if and only if

    δ ≥ δ(ε) = P[X > εσ²/Δ - Δ/2] - e^ε · P[X > εσ²/Δ + Δ/2].

(It is the hockey-stick divergence between N_Z(0, σ²) and N_Z(Δ, σ²).  The worst pair of
neighbours has |q(x) - q(x')| = Δ: N_Z is log-concave, so the likelihood ratio of two
shifts is monotone, the optimal test is a threshold, and for every threshold the
divergence grows with the shift.)

Computation.  Let m be the smallest integer above a = εσ²/Δ - Δ/2 (exact rational
arithmetic on the floats' exact values).  Shifting the second tail by Δ gives a sum of
*positive* terms, with no cancellation and no overflowing e^ε:

    δ = (1/Z) Σ_{x ≥ m} w(x) · (1 - e^{-r(x)}),   r(x) = Δ(2x + Δ)/(2σ²) - ε > 0,

where r(x) = r(m) + (x - m)Δ/σ² with r(m) computed exactly, and 1 - e^{-r} = -expm1(-r).
The terms are summed in log space relative to the largest weight (x₀ = max(m, 0)), and
the sum is truncated at the first X > 0 where the rigorous bound on the rest,
Σ_{x≥X} w(x)/w(x₀) ≤ exp(-(X² - x₀²)/(2σ²)) / (1 - exp(-X/σ²)) (as x² - X² ≥ 2X(x - X)),
is below e^-50 of the partial sum; the bound is then *added*.  Z is bounded from below by
a partial sum of its own series (1 + 2Σ_{x≥1} w(x) for σ < 1/2, else the Jacobi dual
σ√(2π)(1 + 2Σ_{k≥1} exp(-2π²σ²k²))).  Floating-point error in all of this is below
1e-12 relative; the result is inflated by a relative 1e-11 to cover it, so the returned δ
is never below the exact one (nor below the smallest positive double).  For ε = 0 the sum
telescopes exactly to δ = (1/Z) Σ_{x=m}^{m+Δ-1} w(x).

Cost: the number of terms is about min(10σ, 55Δ/ε) (at most 2^26; more raises
ValueError), i.e. microseconds to milliseconds for usual parameters, about a second at
ε = 1e-5, σ = 5e5.

Not monotone in σ.  Unlike the continuous profile, δ(σ) is a sawtooth in σ: the threshold
m moves in integer steps, and between two steps δ can *grow* with σ.  For large ε and small
σ the teeth are huge (ε = 8, Δ = 1: δ(0.44) = 2.8e-5 but δ(0.54) = 3.4e-4); at ε = 2 they
are ~1% and persist until δ underflows; for ε ≤ 1 none were found on fine grids (σ up to
200).  More noise is therefore not automatically more private: see
:func:`discrete_gaussian_sigma`.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from fractions import Fraction

import numpy as np

from .._validation import (
    NONNEGATIVE,
    POSITIVE,
    UNIT_OPEN,
    Interval,
    check_integral,
    elementwise,
    real_args,
)
from ._rounding import TINY

__all__ = ["discrete_gaussian_delta", "discrete_gaussian_sigma"]

_SAFETY = 1e-11  # relative inflation covering floating-point error (analysis: < 1e-12)
_TAIL = 50.0  # truncate when the tail bound is below e^-50 of the partial sum
_CHUNK = 1 << 20
_MAX_TERMS = 1 << 26
_MAX_SCAN = 2000  # calibration: jump points of m checked below the first crossing
_SCAN_TERMS = 1 << 22  # calibration: budget of summed terms for that scan
_UNDERFLOW = 800.0  # -log of a δ certainly below TINY
_LOG_SQRT_2PI = 0.5 * math.log(2.0 * math.pi)


def _log_normaliser(sigma: float) -> float:
    """A lower bound (up to rounding) on log Z, Z = Σ_{x∈Z} exp(-x²/(2σ²))."""
    if sigma < 0.5:
        x = np.arange(1, int(12 * sigma) + 3, dtype=np.float64)
        return math.log1p(2.0 * float(np.sum(np.exp(-(x * x) / (2.0 * sigma * sigma)))))
    k = np.arange(1, 4, dtype=np.float64)  # exp(-2π²σ²k²) < 1e-69 for k ≥ 4, σ ≥ 1/2
    theta = 2.0 * float(np.sum(np.exp(-2.0 * math.pi**2 * sigma * sigma * k * k)))
    return math.log(sigma) + _LOG_SQRT_2PI + math.log1p(theta)


def _logsumexp_into(acc: tuple[float, float], logs: np.ndarray) -> tuple[float, float]:
    """Merge ``logs`` into a running (max, Σ exp(· - max)) pair."""
    top = float(np.max(logs))
    big, total = acc
    if top > big:
        total *= math.exp(big - top) if big > -math.inf else 0.0
        big = top
    return big, total + float(np.sum(np.exp(logs - big)))


def _log_delta(sigma: float, epsilon: float, sens: int) -> float:
    """log of an upper bound (relative excess ≤ ~1e-11) on δ(ε) for one (σ, ε, Δ)."""
    if sigma < 1e-150:  # 1/σ² overflows; all mass but P[X = 0] < exp(-1e300): trivial bound
        return 0.0
    s = Fraction(sigma) ** 2
    eps = Fraction(epsilon)
    m = math.floor(eps * s / sens - Fraction(sens, 2)) + 1
    x0 = max(m, 0)  # the x ≥ m of largest weight
    c0: Fraction | float = x0 * x0 / (2 * s)  # -log w(x₀), exact
    if c0 > _UNDERFLOW:  # Z ≥ 1 and the sum is < 2^26 + 1 times w(x₀): δ < e^-780
        return -_UNDERFLOW + math.log(_MAX_TERMS + 1)
    c0 = float(c0)
    d0, s0 = float(m - x0), float(m + x0)  # x = m + j: x² - x0² = (j + d0)(j + s0)
    h = float(1 / (2 * s))
    log_z = _log_normaliser(sigma)
    if eps == 0:  # δ·Z = Σ_{x=m}^{m+Δ-1} w(x): all terms positive, Δ of them
        if sens > _MAX_TERMS:
            raise ValueError(f"sensitivity={sens} needs too many terms (limit {_MAX_TERMS})")
        j = np.arange(sens, dtype=np.float64)
        acc = _logsumexp_into((-math.inf, 0.0), -(j + d0) * (j + s0) * h)
        return -c0 + acc[0] + math.log(acc[1]) - log_z + _SAFETY

    r_m = max(float(sens * (2 * m + sens) / (2 * s) - eps), TINY)  # exact, then rounded
    step = float(sens / s)
    # first guess for the end: (X² - x0²)/(2σ²) ≥ _TAIL + 5
    j_stop = math.isqrt(x0 * x0 + math.ceil((_TAIL + 5) * 2 * s)) + 2 - m
    acc, start = (-math.inf, 0.0), 0
    while True:
        end = max(j_stop, start + 16)
        if end > _MAX_TERMS:
            raise ValueError(
                f"discrete_gaussian_delta: sigma={sigma!r}, epsilon={epsilon!r}, "
                f"sensitivity={sens} needs more than {_MAX_TERMS} terms (about min(10 sigma, "
                f"55 sensitivity/epsilon)); not supported"
            )
        for lo in range(start, end, _CHUNK):
            j = np.arange(lo, min(lo + _CHUNK, end), dtype=np.float64)
            logs = -(j + d0) * (j + s0) * h + np.log(-np.expm1(-(r_m + j * step)))
            acc = _logsumexp_into(acc, logs)
        start = end
        log_sum = acc[0] + math.log(acc[1])
        if m + start > 0:  # tail bound over x ≥ X = m + start
            big_j = float(start)
            log_tail = -(big_j + d0) * (big_j + s0) * h - math.log(
                -math.expm1(-2.0 * float(m + start) * h)
            )
            if log_tail < log_sum - _TAIL:
                log_sum = float(np.logaddexp(log_sum, log_tail))
                return -c0 + log_sum - log_z + _SAFETY
        j_stop = 2 * start


def _args(**spec: tuple[object, Interval]) -> tuple[tuple[np.ndarray, ...], bool]:
    arrays, scalar = real_args(**spec)
    check_integral(
        arrays[-1],
        "sensitivity",
        "the discrete Gaussian is for integer-valued queries",
        "a positive integer",
    )
    return arrays, scalar


def discrete_gaussian_delta(
    sigma: object, epsilon: object, sensitivity: object = 1
) -> float | np.ndarray:
    """Exact δ(ε) of the discrete Gaussian mechanism (CKS20 Theorem 7), rounded up.

    δ = P[X > εσ²/Δ - Δ/2] - e^ε P[X > εσ²/Δ + Δ/2], X ~ N_Z(0, σ²), for an integer
    query of sensitivity Δ; the release is (ε, δ')-DP iff δ' ≥ δ.  Broadcasts like a
    ``scipy.special`` function.

    Parameters
    ----------
    sigma : σ in (0, inf).   epsilon : ε in [0, inf).
    sensitivity : Δ, a positive integer (integral floats are accepted).

    Returns
    -------
    δ, never below the exact value (relative excess ≤ ~1e-11) and never below the
    smallest positive double.  A float for scalar input, else a float64 array.
    """
    arrays, scalar = _args(
        sigma=(sigma, POSITIVE),
        epsilon=(epsilon, NONNEGATIVE),
        sensitivity=(sensitivity, POSITIVE),
    )

    def one(s: float, e: float, k: float) -> float:
        return max(math.exp(min(_log_delta(s, e, int(k)), 0.0)), TINY)

    return elementwise(one, arrays, scalar)


def _bisect(safe: Callable[[float], bool], lo: float, hi: float) -> float:
    """Shrink [lo, hi] (lo unsafe, hi safe) to relative width 2e-11; return hi."""
    while hi - lo > 2e-11 * hi:
        mid = 0.5 * (lo + hi)
        if safe(mid):
            hi = mid
        else:
            lo = mid
    return hi


def _unsafe_below(safe: Callable[[float], bool], hi: float) -> tuple[float, float]:
    """From a safe hi, halve until unsafe: returns (unsafe lo, safe hi)."""
    while True:
        lo = hi / 2.0
        if not safe(lo):
            return lo, hi
        hi = lo


def _sigma_scalar(epsilon: float, delta: float, sens: int) -> float:
    log_target = math.log(delta)

    def safe(s: float) -> bool:
        return _log_delta(s, epsilon, sens) <= log_target

    # 1. A crossing: bracket from σ = Δ by halving / doubling, then bisect.
    start = float(sens)
    if safe(start):
        lo, hi = _unsafe_below(safe, start)
    else:
        lo = start
        while not safe(hi := 2.0 * lo):
            lo = hi
    best = _bisect(safe, lo, hi)
    if epsilon == 0.0:
        return best
    # 2. Pockets below it: δ(σ) has its local minima where m = ⌊εσ²/Δ - Δ/2⌋ + 1 jumps,
    #    at σ_n = sqrt((n + Δ/2)Δ/ε).  Scan the ones just below the crossing upwards
    #    (as many as _MAX_SCAN and a budget of _SCAN_TERMS summed terms allow: the scan
    #    is cheap exactly where pockets occur, large ε and small σ); at the first safe one,
    #    bisect the piece before it.
    terms = min(10.5 * best, 55.0 * sens / epsilon) + sens + 16  # per evaluation, roughly
    count = min(_MAX_SCAN, int(_SCAN_TERMS / terms))
    n_hi = math.floor(epsilon * best * best / sens - sens / 2)
    n_lo = max(math.floor(-sens / 2) + 1, n_hi - count + 1)
    prev = None
    for n in range(n_lo, n_hi + 1):
        sigma_n = math.sqrt((n + sens / 2) * sens / epsilon)
        if sigma_n >= best:
            break
        if safe(sigma_n):
            if prev is None:
                prev, sigma_n = _unsafe_below(safe, sigma_n)
            return _bisect(safe, prev, sigma_n)
        prev = sigma_n
    return best


def discrete_gaussian_sigma(
    epsilon: object, delta: object, sensitivity: object = 1
) -> float | np.ndarray:
    """The smallest σ for which N_Z(0, σ²) noise is (ε, δ)-DP for sensitivity Δ (see notes).

    The returned σ is always *safe*: ``discrete_gaussian_delta(σ, ε, Δ) ≤ δ`` holds at it,
    with δ evaluated rounded up.  Because δ(σ) is a sawtooth (module docstring), the safe
    set is not an interval, and the search is:

    1. from σ = Δ, halve or double to a bracket with an unsafe lower and a safe upper end,
       then bisect to relative width 2e-11 keeping that invariant: a crossing point σ_c;
    2. the local minima of δ(σ) are where m jumps, σ_n = sqrt((n + Δ/2)Δ/ε); check those
       below σ_c in increasing order (at most 2000 of them, and fewer when one profile
       evaluation is expensive, i.e. for small ε, where no teeth were ever seen); at the
       first safe σ_n, bisect the stretch between σ_{n-1} and σ_n instead.

    Step 2 assumes that between two jumps δ rises and then falls (what all our grids
    show); under it the result is the smallest safe σ up to the 2e-11 tolerance.  In the
    tests it equals the smallest safe σ on fine grids, including ε = 8 and 20 where
    step 1 alone is 15% too large.  A larger σ is *not* automatically safe: check any σ
    you change to with :func:`discrete_gaussian_delta`.  ε = 0 (δ decreasing in σ) skips
    step 2.

    Parameters
    ----------
    epsilon : ε in [0, inf).   delta : δ in (0, 1).
    sensitivity : Δ, a positive integer.
    """
    arrays, scalar = _args(
        epsilon=(epsilon, NONNEGATIVE),
        delta=(delta, UNIT_OPEN),
        sensitivity=(sensitivity, POSITIVE),
    )
    return elementwise(lambda e, d, k: _sigma_scalar(e, d, int(k)), arrays, scalar)
