"""High-precision mpmath reference for the Gaussian privacy profile (Balle & Wang 2018, Thm 8).

Independent of ``dpgauss``: nothing here imports the package under test.  Every function
sets its own precision with ``mp.workdps`` and never changes the global mpmath precision.

Notation: ``mu = Delta / sigma``.  The exact (eps, delta) profile of N(0, sigma^2) noise on a
function of L2 sensitivity Delta (equivalently of mu-GDP, Dong-Roth-Su) is

    delta(mu, eps) = Phi(mu/2 - eps/mu) - exp(eps) * Phi(-mu/2 - eps/mu).

It is increasing in mu and decreasing in eps, and d delta / d mu = phi(mu/2 - eps/mu).

The two terms can agree to many digits (at mu=1e-10, eps=1e-8 they agree to about 11
digits, and far worse for smaller mu), so :func:`ref_delta` measures the cancellation it
suffered and recomputes with more digits until ``DPS`` correct digits remain.  A second,
cancellation-free form (:func:`ref_delta_integral`) is provided to cross-check it.

All results are returned as ``mpf`` values carrying their working precision; callers that do
arithmetic on them must do it inside ``mp.workdps(DPS)`` (see :func:`rel_err`), since the
default mpmath precision is only 15 digits.
"""

from __future__ import annotations

import math

import mpmath
from mpmath import mp, mpf
from scipy.special import ndtri

__all__ = [
    "DPS",
    "hp",
    "mpf_exact",
    "ref_classical_sigma",
    "ref_delta",
    "ref_delta0",
    "ref_delta_integral",
    "ref_delta_sigma",
    "ref_epsilon",
    "ref_log_delta",
    "ref_mu",
    "ref_one_minus_delta",
    "ref_sigma",
    "rel_err",
]

#: Correct significant digits guaranteed by every reference function.
DPS = 60
#: Extra digits carried through the computations.
_GUARD = 20
#: Relative width at which the root finders stop (far below double precision).
_ROOT_RTOL_DIGITS = DPS - 10


def mpf_exact(x: object) -> mpf:
    """Convert a Python/numpy float, int or mpf to mpf without rounding (needs >= 53 bits)."""
    if isinstance(x, mpf):
        return x
    if isinstance(x, int):
        return mpf(x)
    return mpf(float(x))


def _Phi(x: mpf) -> mpf:
    """Standard normal CDF, accurate in relative terms in both tails."""
    return mpmath.erfc(-x / mpmath.sqrt(2)) / 2


def _delta_terms(m: mpf, e: mpf, dps: int = DPS) -> tuple[mpf, mpf]:
    """(delta(m, e), e^e Phi(-m/2 - e/m)), the first to ``dps`` significant digits.

    The working precision is raised until at least ``dps`` digits survive the cancellation
    between the two terms; it also covers the size of the exponent (about (e/m)^2 / 2) so
    that rounding the exponent does not cost relative accuracy.
    """
    with mp.workdps(30):
        size = max(abs(e / m), m, mpf(1))
        work = dps + _GUARD + 2 * int(mpmath.ceil(mpmath.log10(size)))
    for _ in range(60):
        with mp.workdps(work):
            r = e / m
            t1 = _Phi(m / 2 - r)
            t2 = mpmath.exp(e) * _Phi(-m / 2 - r)
            d = t1 - t2
            if d > 0:
                lost = int(mpmath.ceil(mpmath.log10(t1 / d)))
                if work - lost >= dps + 5:
                    return d, t2
                work += lost + 5
            else:  # complete cancellation: no digit left, double the precision
                work *= 2
    raise ArithmeticError(f"ref_delta did not converge for mu={m}, eps={e}")


def ref_delta(mu: object, eps: object, dps: int = DPS) -> mpf:
    """delta(mu, eps) = Phi(mu/2 - eps/mu) - e^eps Phi(-mu/2 - eps/mu) to ``dps`` digits.

    ``mu > 0`` and ``eps >= 0`` may be floats, ints or mpf (taken exactly).
    """
    m = mpf_exact(mu)
    e = mpf_exact(eps)
    if not m > 0 or not mpmath.isfinite(m):
        raise ValueError(f"mu must be finite and > 0, got {mu!r}")
    if not e >= 0 or not mpmath.isfinite(e):
        raise ValueError(f"eps must be finite and >= 0, got {eps!r}")
    return _delta_terms(m, e, dps)[0]


def ref_one_minus_delta(mu: object, eps: object, dps: int = DPS) -> mpf:
    """1 - delta(mu, eps) = Phi(eps/mu - mu/2) + e^eps Phi(-mu/2 - eps/mu), without cancellation.

    Resolves the profile when delta is within 10^-dps of 1, where :func:`ref_delta`, being
    accurate in relative terms only, rounds to 1.
    """
    m = mpf_exact(mu)
    e = mpf_exact(eps)
    with mp.workdps(30):
        size = max(abs(e / m), m, mpf(1))
        work = dps + _GUARD + 2 * int(mpmath.ceil(mpmath.log10(size)))
    with mp.workdps(work):
        r = e / m
        return _Phi(r - m / 2) + mpmath.exp(e) * _Phi(-m / 2 - r)


def ref_log_delta(mu: object, eps: object) -> mpf:
    """Natural log of the profile: absolute accuracy near 0, and far below the double range."""
    d = ref_delta(mu, eps)
    with mp.workdps(DPS + _GUARD):
        if d > 0.5:  # log(delta) = log1p(-(1 - delta)), near 0 when delta is near 1
            return mpmath.log1p(-ref_one_minus_delta(mu, eps))
        return mpmath.log(d)


def ref_delta_sigma(sigma: object, eps: object, sensitivity: object = 1.0) -> mpf:
    """Profile of N(0, sigma^2) noise with sensitivity Delta; Delta/sigma formed exactly enough."""
    with mp.workdps(DPS + 2 * _GUARD):
        mu = mpf_exact(sensitivity) / mpf_exact(sigma)
    return ref_delta(mu, eps)


def ref_delta_integral(mu: object, eps: object, dps: int = 40) -> mpf:
    """Cancellation-free form of the profile, for cross-checking :func:`ref_delta`.

    The privacy loss L = log(p/q)(Y) of Y ~ N(mu, 1) vs N(0, 1) is N(mu^2/2, mu^2), and
    delta(eps) = E[(1 - e^(eps - L))_+].  With z0 = eps/mu - mu/2 and L = mu^2/2 + mu z,

        delta(mu, eps) = integral_0^inf -expm1(-mu u) phi(z0 + u) du,

    an integral of a positive function (no subtraction of nearly equal terms).  With
    w = max(z0, 1) and u = v / w, phi(z0 + u) = phi(z0) exp(-z0 v/w - v^2/(2 w^2)), which
    quadrature handles well.  Slow: tests only.
    """
    m = mpf_exact(mu)
    e = mpf_exact(eps)
    with mp.workdps(30):
        size = max(abs(e / m), m, mpf(1))
        work = dps + 10 + 2 * int(mpmath.ceil(mpmath.log10(size)))
    with mp.workdps(work):
        z0 = e / m - m / 2
        w = max(z0, mpf(1))

        # mpmath.quad's tolerance is absolute: scale the integrand to size about 1
        c = min(m / w, mpf(1))

        def f(v: mpf) -> mpf:
            return -mpmath.expm1(-m * v / w) / c * mpmath.exp(-z0 * v / w - v * v / (2 * w * w))

        pts = {mpf(p) for p in (0, 0.25, 0.5, 1, 2, 4, 8, 16, 32, 64)}
        if z0 < 0:  # the Gaussian factor peaks at v = -z0 w
            pts |= {-z0 * w + k for k in (-2, -1, 0, 1, 2) if -z0 * w + k > 0}
        integral = mpmath.quad(f, [*sorted(pts), mpmath.inf])
        return integral * c * mpmath.npdf(z0) / w


def _safe_newton(f, lo: mpf, hi: mpf, g_lo: mpf, x: mpf, tol) -> mpf:
    """Newton's method kept inside a sign-change bracket (bisection when a step leaves it).

    ``f(x)`` returns ``(g(x), g'(x))``; g(lo) = ``g_lo`` and g(hi) have opposite signs and
    ``x`` is a starting point in [lo, hi].  Stops when a step is below ``tol(x)``; the
    returned point is then accurate to about the square of that step.
    """
    for _ in range(200):
        g, dg = f(x)
        if g == 0:
            return x
        if (g > 0) == (g_lo > 0):
            lo, g_lo = x, g
        else:
            hi = x
        a, b = min(lo, hi), max(lo, hi)
        if dg != 0:
            xn = x - g / dg
            if abs(xn - x) <= tol(x):  # converged (before any bracket test: x may be an end)
                return min(max(xn, a), b)
        if dg == 0 or not a < xn < b:
            xn = (lo + hi) / 2
        if b - a <= tol(xn):
            return xn
        x = xn
    raise ArithmeticError("safeguarded Newton iteration did not converge")


def _check_eps(eps: mpf) -> None:
    if not (mpmath.isfinite(eps) and eps >= 0):
        raise ValueError(f"eps must be finite and >= 0, got {eps}")


def _check_delta(delta: mpf) -> None:
    if not (0 < delta < 1):
        raise ValueError(f"delta must be in (0, 1), got {delta}")


def ref_mu(eps: object, delta: object) -> mpf:
    """The exact optimum mu* > 0 with delta(mu*, eps) = delta (largest safe mu).

    Bracket: delta(mu, eps) < Phi(mu/2 - eps/mu), so delta(mu) >= delta forces
    mu >= -q + sqrt(q^2 + 2 eps), q = -Phi^{-1}(delta); the upper end is found by doubling.
    The root of log delta(e^x, eps) - log delta is found in x = log mu.
    """
    with mp.workdps(DPS + _GUARD):
        e = mpf_exact(eps)
        d = mpf_exact(delta)
        _check_eps(e)
        _check_delta(d)
        logd = mpmath.log(d)

        def g(x: mpf) -> mpf:
            return mpmath.log(_delta_terms(mpmath.exp(x), e)[0]) - logd

        def g_and_slope(x: mpf) -> tuple[mpf, mpf]:
            # d delta / d mu = phi(mu/2 - eps/mu), so d log delta / d log mu = mu phi / delta
            mu = mpmath.exp(x)
            dl = _delta_terms(mu, e)[0]
            return mpmath.log(dl) - logd, mu * mpmath.npdf(mu / 2 - e / mu) / dl

        q = mpf(-float(ndtri(float(d))))  # starting guess only: checked below
        lo = 2 * e / (q + mpmath.sqrt(q * q + 2 * e)) if q > 0 else -q + mpmath.sqrt(q * q + 2 * e)
        if not lo > 0:
            lo = d  # eps = 0: delta(mu, 0) = erf(mu / (2 sqrt 2)) < 0.4 mu
        xlo = mpmath.log(lo)
        glo = g(xlo)
        while glo > 0:
            xlo -= mpmath.log(2)
            glo = g(xlo)
        xhi = xlo + mpmath.log(2)
        ghi = g(xhi)
        while ghi < 0:
            xlo, glo = xhi, ghi
            xhi += mpmath.log(2)
            ghi = g(xhi)
        # the root in x = log(mu) is needed to absolute accuracy ~ relative accuracy of mu
        x0 = xlo if -glo < ghi else xhi
        tol = mpf(10) ** (-_ROOT_RTOL_DIGITS)
        return mpmath.exp(_safe_newton(g_and_slope, xlo, xhi, glo, x0, lambda _x: tol))


def ref_sigma(eps: object, delta: object, sensitivity: object = 1.0) -> mpf:
    """Optimal (smallest safe) sigma = Delta / mu*."""
    mu = ref_mu(eps, delta)
    with mp.workdps(DPS + _GUARD):
        return mpf_exact(sensitivity) / mu


def ref_epsilon(mu: object, delta: object) -> mpf:
    """Smallest eps >= 0 with delta(mu, eps) <= delta (0 if already (0, delta)-DP)."""
    with mp.workdps(DPS + _GUARD):
        m = mu if isinstance(mu, mpf) else mpf_exact(mu)
        d = mpf_exact(delta)
        _check_delta(d)
        if not m > 0:
            raise ValueError(f"mu must be > 0, got {mu}")
        logd = mpmath.log(d)

        def g_and_slope(e: mpf) -> tuple[mpf, mpf]:
            # d delta / d eps = -e^eps Phi(-mu/2 - eps/mu)
            dl, t2 = _delta_terms(m, e)
            return mpmath.log(dl) - logd, -t2 / dl

        g0 = g_and_slope(mpf(0))[0]
        if g0 <= 0:
            return mpf(0)
        # delta(mu, eps) < Phi(mu/2 - eps/mu) <= delta once eps >= mu (mu/2 + q)
        q = mpf(-float(ndtri(float(d))))
        hi = m * (m / 2 + q)
        if not hi > 0:
            hi = m * m
        while g_and_slope(hi)[0] > 0:
            hi *= 2
        rtol = mpf(10) ** (-_ROOT_RTOL_DIGITS)  # purely relative: eps* can be ~1e-300
        return _safe_newton(g_and_slope, mpf(0), hi, g0, hi, lambda x: rtol * abs(x))


def ref_delta0(eps: object) -> mpf:
    """delta0(eps) = Phi(0) - e^eps Phi(-sqrt(2 eps)) = delta(sqrt(2 eps), eps); 0 at eps = 0."""
    with mp.workdps(DPS + _GUARD):
        e = mpf_exact(eps)
        _check_eps(e)
        if e == 0:
            return mpf(0)
        mu = mpmath.sqrt(2 * e)
    return ref_delta(mu, e)


def ref_classical_sigma(eps: object, delta: object, sensitivity: object = 1.0) -> mpf:
    """Classical Gaussian mechanism (paper Thm 1): Delta sqrt(2 ln(1.25/delta)) / eps."""
    with mp.workdps(DPS + _GUARD):
        e = mpf_exact(eps)
        d = mpf_exact(delta)
        return mpf_exact(sensitivity) * mpmath.sqrt(2 * mpmath.log(mpf("1.25") / d)) / e


def hp() -> object:
    """Context manager for test-side arithmetic on reference values (mpmath's default is 15)."""
    return mp.workdps(DPS + _GUARD)


def rel_err(x: object, ref: mpf) -> float:
    """|x - ref| / |ref| computed at high precision, returned as a float."""
    with mp.workdps(DPS + _GUARD):
        r = ref if isinstance(ref, mpf) else mpf_exact(ref)
        xx = x if isinstance(x, mpf) else mpf_exact(x)
        if r == 0:
            return math.inf if xx != 0 else 0.0
        return float(abs(xx - r) / abs(r))
