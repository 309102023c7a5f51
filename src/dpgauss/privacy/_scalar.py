"""The privacy core on Python floats: one calibration in microseconds, not milliseconds.

The vectorised kernels (:mod:`._mills`, :mod:`.profile`, :mod:`._solve`) pay NumPy's
per-call overhead, about a microsecond per ufunc and a few dozen ufuncs per kernel
evaluation, so one scalar ``analytic_gaussian_sigma`` cost ~300 µs on a quiet machine.  This
module runs *the same formulas* on Python floats with the :mod:`math` module — the same
branches (the Mills-ratio difference or its Gauss–Legendre integral, the continued
fraction for ``M1``, the double-double ``t``), the same error bound
(:func:`.profile.log_delta_error`), the same safeguarded Halley-then-exact-Newton solver
and the same safe-side rounding — and is chosen automatically when every argument is a
plain ``int`` or ``float`` inside its domain.

Only one function is not NumPy's: ``erfcx`` (SciPy's), here

* ``erfcx(x) = e^{x²}·erfc(x)`` for ``x < 26``, with ``x² = h + l`` split exactly (Dekker)
  so that ``e^{x²} = e^h (1 + l)`` carries no error from rounding ``x²`` (which would cost
  ``x²`` ulps: 6e-14 relative at ``x = 25``); ``erfc`` is the C library's;
* the asymptotic series ``(1/(x√π)) Σ_k (−1)^k (2k−1)!!/(2x²)^k`` (12 terms, below 1e-25
  relative) for ``x ≥ 26``, where ``erfc`` underflows.

Its accuracy, and that of every kernel here, is checked against mpmath with the same
tolerances as the vectorised kernels (``tests/privacy/test_scalar.py``).  Anything
exceptional — an overflow, a ``log`` of 0, a non-finite result, an argument of another
type — returns ``None`` and the caller takes the vectorised path, which also raises the
validation errors: the fast path never decides an edge case on its own.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from statistics import NormalDist

import numpy as np

from .._validation import REAL_SCALAR_TYPES
from ._rounding import TINY, delta_from_log

__all__ = [
    "SMALL",
    "elementwise",
    "erfcx",
    "gdp_epsilon",
    "gdp_log_delta",
    "gdp_mu",
    "log_delta_terms",
    "plain",
]

_SQRT_HALF_PI = math.sqrt(math.pi / 2.0)
_INV_SQRT2 = 1.0 / math.sqrt(2.0)
_INV_SQRT_PI = 1.0 / math.sqrt(math.pi)
_HALF_LOG_2PI = 0.5 * math.log(2.0 * math.pi)
_SQRT_2PI = math.sqrt(2.0 * math.pi)
_SPLIT = 134217729.0  # 2**27 + 1
_SPLIT_MAX = 1e150
_CF_FROM = 6.0
_CF_TERMS = 24
_SMALL_STEP = 0.05
# Gauss–Legendre nodes and weights on [−1, 1] (numpy.polynomial.legendre.leggauss)
_GL_EXACT = (
    (-0.8611363115940526, 0.3478548451374538),
    (-0.3399810435848563, 0.6521451548625461),
    (0.3399810435848563, 0.6521451548625461),
    (0.8611363115940526, 0.3478548451374538),
)
_GL_FAST = ((-0.5773502691896257, 1.0), (0.5773502691896257, 1.0))
_MU_MAX = 1e100
_EPS_BOUND_FROM = 1e8  # = profile.BOUND_FROM (a test checks they agree)
_MAX_ITER = 100
_HALLEY_STOP = 1e-3
_CURVATURE_OK = 1e-13
_ERFCX_SERIES_FROM = 26.0
_NORMAL = NormalDist()


def plain(*values: object) -> tuple[float, ...] | None:
    """The values as floats if every one is a finite real number — a Python ``int`` or
    ``float`` or a NumPy scalar of those kinds, not a ``bool`` or an array — else None (the
    caller's vectorised path then validates and computes)."""
    out: list[float] = []
    for v in values:
        t = type(v)
        if type(v) is float:  # t is float, narrowed for the checker
            f = v
        elif t in REAL_SCALAR_TYPES:
            f = float(v)  # type: ignore[arg-type]
        else:
            return None
        if not math.isfinite(f):
            return None
        out.append(f)
    return tuple(out)


#: Arrays of at most this many elements run element by element here too, so that a small
#: array gives exactly the values of the scalar calls (the vectorised kernels agree with
#: these to about 1e-14 relative, not bit for bit: their ``erfcx``, ``exp`` and ``log``
#: are SciPy's and NumPy's, and both sides are within the same error bound).
SMALL = 32


def elementwise(func: Callable[..., float | None], *arrays: np.ndarray) -> np.ndarray | None:
    """``func`` (one of this module's) over broadcast arrays of at most :data:`SMALL`
    elements, or None (too large, or an element that needs the general path)."""
    shape = np.broadcast_shapes(*(a.shape for a in arrays))
    size = math.prod(shape)
    if size > SMALL:
        return None
    flat = [np.broadcast_to(a, shape).ravel().tolist() for a in arrays]
    out = np.empty(size)
    for i, args in enumerate(zip(*flat, strict=True)):
        value = func(*args)
        if value is None:
            return None
        out[i] = value
    return out.reshape(shape)


# --------------------------------------------------------------------------------------
# Special functions
# --------------------------------------------------------------------------------------


def erfcx(x: float) -> float:
    """The scaled complementary error function ``e^{x²} erfc(x)`` (module doc)."""
    if x >= _ERFCX_SERIES_FROM:
        inv = 1.0 / (2.0 * x * x)
        term, total = 1.0, 1.0
        for k in range(1, 12):
            term *= -(2 * k - 1) * inv
            total += term
        return total * _INV_SQRT_PI / x
    # x² = p + e exactly (Dekker's split, inlined: this is the hot loop)
    c = _SPLIT * x
    h = c - (c - x)
    lo = x - h
    p = x * x
    e = ((h * h - p) + 2.0 * h * lo) + lo * lo
    return math.exp(p) * (1.0 + e) * math.erfc(x)


def _mills(t: float) -> float:
    return _SQRT_HALF_PI * erfcx(t * _INV_SQRT2)


def _mills_fast(t: float) -> float:
    """``R(t)`` for the solver's iterations: ``x²`` rounded (``x²`` ulps, 6e-14 at most)."""
    x = t * _INV_SQRT2
    if x >= _ERFCX_SERIES_FROM:
        return _SQRT_HALF_PI * erfcx(x)
    return _SQRT_HALF_PI * math.exp(x * x) * math.erfc(x)


def _mills_m1(s: float, exact: bool) -> float:
    if not exact:
        return 1.0 - s * _mills_fast(s)
    if s < _CF_FROM:
        return 1.0 - s * _mills(s)
    cf = s
    for k in range(_CF_TERMS, 1, -1):
        cf = s + k / cf
    return _mills(s) / cf


def _mills_diff(t: float, mu: float, exact: bool) -> float:
    if mu >= _SMALL_STEP * max(1.0, abs(t)):
        if exact:
            return _mills(t) - _mills(t + mu)
        return _mills_fast(t) - _mills_fast(t + mu)
    half = 0.5 * mu
    mid = t + half
    acc = 0.0
    for node, weight in _GL_EXACT if exact else _GL_FAST:
        acc += weight * _mills_m1(mid + node * half, exact)
    return acc * half


def log_delta_terms(mu: float, eps: float, exact: bool = True) -> tuple[float, float, float]:
    """``(log δ, t, log φ(t))`` as :func:`.profile.log_delta_terms`, for one point."""
    mu = min(mu, _MU_MAX)
    if exact:
        # _profile_t and _log_phi, inlined (the hot path of every calibration)
        q = eps / mu
        half = 0.5 * mu
        t = q - half
        if abs(q) < _SPLIT_MAX and mu < _SPLIT_MAX:
            c = _SPLIT * q
            q_hi = c - (c - q)
            q_lo = q - q_hi
            c = _SPLIT * mu
            m_hi = c - (c - mu)
            m_lo = mu - m_hi
            p = q * mu
            p_err = ((q_hi * m_hi - p) + q_hi * m_lo + q_lo * m_hi) + q_lo * m_lo
            z = t - q
            t_lo = ((q - (t - z)) + (-half - z)) + ((eps - p) - p_err) / mu
            c = _SPLIT * t
            h = c - (c - t)
            lo = t - h
            sq = t * t
            sq_err = ((h * h - sq) + 2.0 * h * lo) + lo * lo
            log_phi = -0.5 * sq - ((0.5 * sq_err + t * t_lo) + _HALF_LOG_2PI)
        else:
            log_phi = -0.5 * t * t - _HALF_LOG_2PI
    else:
        t = eps / mu - 0.5 * mu
        log_phi = -0.5 * t * t - _HALF_LOG_2PI
        if t >= -1.0 and mu >= _SMALL_STEP * (t if t > 1.0 else 1.0):
            # the solver's usual case, _mills_diff's first branch inlined
            a = t * _INV_SQRT2
            b = (t + mu) * _INV_SQRT2
            if b < _ERFCX_SERIES_FROM:
                diff = math.exp(a * a) * math.erfc(a) - math.exp(b * b) * math.erfc(b)
                return log_phi + math.log(_SQRT_HALF_PI * diff), t, log_phi
    if t >= -1.0:
        return log_phi + math.log(_mills_diff(t, mu, exact)), t, log_phi
    far = math.exp(log_phi + math.log(_mills(t + mu)))
    return math.log1p(-(0.5 * math.erfc(-t * _INV_SQRT2) + far)), t, log_phi


#: :func:`.profile.log_delta_error` for ``t ≥ −1``: ``ERROR_ABS + ERROR_REL·|log δ|`` (one
#: definition for the scalar, the array and the streamlined array kernels).
ERROR_ABS = 1e-13
ERROR_REL = 2e-15
#: :func:`.profile.log_delta_error`'s absolute bound where ``1 − δ`` is below SUBNORMAL_TAIL
#: (the ``t < −1`` kernel's factors are subnormal there).
SUBNORMAL_TAIL = 1e-290
SUBNORMAL_TAIL_ERROR = 1e-300


def log_delta_error(log_d: float, t: float) -> float:
    """:func:`.profile.log_delta_error` for one point."""
    if not math.isfinite(log_d):
        return 0.0
    if t < -1.0:
        tail = -math.expm1(log_d)
        err = 1e-15 * (1.0 + t * t) * tail + 4e-16 * abs(log_d)
        return err + SUBNORMAL_TAIL_ERROR if tail < SUBNORMAL_TAIL else err
    return ERROR_ABS + ERROR_REL * abs(log_d)


def _safe_log_delta(mu: float, eps: float) -> float:
    log_d, t, _ = log_delta_terms(mu, eps)
    return min(log_d + log_delta_error(log_d, t), 0.0)


# --------------------------------------------------------------------------------------
# The solver (_solve.solve_safe on one point)
# --------------------------------------------------------------------------------------

_Kernel = Callable[[float, bool], tuple[float, float, float, float]]


def _solve_safe(
    kernel: _Kernel, x: float, pad: Callable[[float], float], lo: float, hi: float
) -> float:
    """:func:`._solve.solve_safe` on one point: Halley on the fast kernel until a step is
    below 1e-3 (relative), then exact Newton steps onto the safe side (module doc there)."""
    for _ in range(_MAX_ITER):
        g, g1, c, _ = kernel(x, False)
        if (g <= 0.0) if g1 > 0.0 else (g >= 0.0):  # the root lies above x
            lo = x
        else:
            hi = x
        newton = g / g1
        denom = 1.0 - 0.5 * newton * c
        step = newton / denom if denom > 0.5 else newton
        new = x - step
        bad = not (lo <= new <= hi)
        if bad:
            if hi < math.inf:
                new = (
                    0.5 * (lo + hi) if lo > -math.inf else hi - (abs(hi) if abs(hi) > 1.0 else 1.0)
                )
            else:
                new = lo + (abs(lo) if abs(lo) > 1.0 else 1.0)
        x = new
        scale = abs(new) if abs(new) > 1.0 else 1.0
        if (not bad and abs(step) <= _HALLEY_STOP * scale) or hi - lo <= 1e-15 * scale:
            break
    for _ in range(_MAX_ITER):
        g, g1, c, err = kernel(x, True)
        step = (g + 2.0 * err) / g1
        curvature = 2.0 * abs(c) * step * step
        if curvature > _CURVATURE_OK * (abs(x) if abs(x) > 1.0 else 1.0):
            x -= step
            continue
        widen = curvature + pad(x)
        x = x - step - widen if g1 > 0.0 else x - step + widen
        break
    if not math.isfinite(x):
        raise FloatingPointError("no finite root")
    return x


# --------------------------------------------------------------------------------------
# Calibration and the profile
# --------------------------------------------------------------------------------------


def _log_mu_start(eps: float, delta: float) -> float:
    """:func:`.calibration._log_mu_start` for one point (only the iteration count depends
    on it)."""
    q = -_NORMAL.inv_cdf(delta)
    root = math.sqrt(q * q + 2.0 * eps)
    mu_tail = 2.0 * eps / (q + root) if q > 0 else root - q
    if delta < 1e-4:  # erfinv(δ) = (√π/2)(δ + πδ³/12 + …)
        mu_tv = _SQRT_2PI * delta * (1.0 + math.pi * delta * delta / 12.0)
    else:
        mu_tv = 2.0 * _NORMAL.inv_cdf(0.5 + 0.5 * delta)
    if mu_tail > mu_tv and q >= 1.0:
        step = math.log1p(q / mu_tail) / (q * (q + mu_tail))
        return math.log(mu_tail) + min(step, 0.5)
    return math.log(max(mu_tail, mu_tv))


#: From this ε on, μ is the tail bound in closed form (:func:`.calibration._mu_huge_eps`),
#: lowered by HUGE_EPS_MARGIN relative.
HUGE_EPS = 1e20
HUGE_EPS_MARGIN = 4e-15
SQRT2 = math.sqrt(2.0)


def _mu_huge_eps(eps: float, delta: float) -> float:
    """:func:`.calibration._mu_huge_eps` for one point."""
    q = -_NORMAL.inv_cdf(delta)
    q += 1e-9 * (1.0 + abs(q))
    s = SQRT2 * math.sqrt(eps)
    r = q / s
    return s / (r + math.sqrt(r * r + 1.0)) * (1.0 - HUGE_EPS_MARGIN)


def _mu(eps: float, delta: float) -> float:
    if eps >= HUGE_EPS:
        return _mu_huge_eps(eps, delta)
    if delta < 1e-300 and eps <= 1e-280:
        return math.nextafter(_SQRT_2PI * delta, 0.0)
    log_target = math.log(delta)

    def kernel(x: float, exact: bool) -> tuple[float, float, float, float]:
        mu = math.exp(x)
        log_d, t, log_phi = log_delta_terms(mu, eps, exact)
        g1 = math.exp(x + log_phi - log_d)
        curvature = 1.0 + t * (t + mu) - g1
        err = log_delta_error(log_d, t) if exact else 0.0
        return log_d - log_target, g1, curvature, err

    x = _solve_safe(
        kernel,
        _log_mu_start(eps, delta),
        lambda x: 1e-15 * (1.0 + abs(x)),
        -math.inf,
        math.inf,
    )
    return math.exp(x)


def gdp_mu(eps: float, delta: float) -> float | None:
    """:func:`.calibration.gdp_mu` for valid plain floats; None to take the general path."""
    if not (eps >= 0.0 and 0.0 < delta < 1.0):
        return None
    try:
        mu = _mu(eps, delta)
    except (OverflowError, ValueError, ZeroDivisionError, FloatingPointError):
        return None
    return mu if math.isfinite(mu) and mu > 0.0 else None


def analytic_gaussian_sigma(eps: float, delta: float, sens: float) -> float | None:
    """:func:`.calibration.analytic_gaussian_sigma` for valid plain floats, or None."""
    if not sens > 0.0:
        return None
    mu = gdp_mu(eps, delta)
    if mu is None:
        return None
    try:
        sigma = math.nextafter(sens / mu, math.inf)
    except (OverflowError, ZeroDivisionError):
        return None
    return sigma if math.isfinite(sigma) else None


def _mu_upper(sens: float, sigma: float) -> float | None:
    """μ = Δ/σ rounded up (the conservative side), or None where it is not a finite number."""
    if not (sigma > 0.0 and sens > 0.0):
        return None
    try:
        mu = math.nextafter(sens / sigma, math.inf)
    except (OverflowError, ZeroDivisionError):
        return None
    return mu if math.isfinite(mu) else None


def gdp_log_delta(mu: float, eps: float) -> float | None:
    """:func:`.profile.gdp_log_delta` for valid plain floats, or None."""
    if not (mu > 0.0 and eps >= 0.0):
        return None
    try:
        out = _safe_log_delta(mu, eps)
    except (OverflowError, ValueError, ZeroDivisionError):
        return None
    return out if not math.isnan(out) else None


def gdp_delta(mu: float, eps: float) -> float | None:
    log_d = gdp_log_delta(mu, eps)
    if log_d is None:
        return None
    try:
        return delta_from_log(log_d)
    except OverflowError:
        return None


def gaussian_log_delta(sigma: float, eps: float, sens: float) -> float | None:
    mu = _mu_upper(sens, sigma)
    return None if mu is None else gdp_log_delta(mu, eps)


def gaussian_delta(sigma: float, eps: float, sens: float) -> float | None:
    log_d = gaussian_log_delta(sigma, eps, sens)
    return None if log_d is None else delta_from_log(log_d)


def _epsilon(mu: float, delta: float) -> float:
    if mu >= _EPS_BOUND_FROM:  # the tail bound (.profile.BOUND_FROM), safe and exact enough
        try:
            bound = mu * (0.5 * mu - _NORMAL.inv_cdf(delta))
        except OverflowError:
            return math.inf
        return max(bound, 0.0) * (1.0 + 1e-12)
    log_target = math.log(delta)
    log_d0, t0, _ = log_delta_terms(mu, 0.0)
    if log_d0 + log_delta_error(log_d0, t0) <= log_target:
        return 0.0

    def kernel(x: float, exact: bool) -> tuple[float, float, float, float]:
        log_d, t, log_phi = log_delta_terms(mu, x, exact)
        log_r = math.log(_mills(t + mu))
        g1 = -math.exp(log_phi + log_r - log_d)
        curvature = 1.0 - math.exp(-log_r) / mu - g1
        err = log_delta_error(log_d, t) if exact else 0.0
        return log_d - log_target, g1, curvature, err

    q = -_NORMAL.inv_cdf(delta)
    hi = max(mu * (0.5 * mu + q), 0.0) * (1.0 + 1e-12) + 1e-300
    x = _solve_safe(kernel, hi, lambda x: 4e-16 * abs(x) + TINY, 0.0, hi * 2.0)
    return math.nextafter(x, math.inf)


def gdp_epsilon(mu: float, delta: float) -> float | None:
    """:func:`.profile.gdp_epsilon` for valid plain floats, or None."""
    if not (mu > 0.0 and 0.0 < delta < 1.0):
        return None
    try:
        eps = _epsilon(mu, delta)
    except (OverflowError, ValueError, ZeroDivisionError, FloatingPointError):
        return None
    return eps if math.isfinite(eps) and eps >= 0.0 else None


def gaussian_epsilon(sigma: float, delta: float, sens: float) -> float | None:
    mu = _mu_upper(sens, sigma)
    return None if mu is None else gdp_epsilon(mu, delta)
