r"""Analytic calibration of the Gaussian mechanism (Balle & Wang 2018, Algorithm 1 / Thm 8).

The analytic mechanism uses the smallest σ for which the exact profile of
``profile.py`` satisfies ``δ_{Δ/σ}(ε) ≤ δ``.  Since ``δ_μ(ε)`` increases with μ = Δ/σ, this
is ``σ = Δ/μ*`` with μ* the root of ``log δ_μ(ε) = log δ``.

Solver
------
Newton's method on ``x = log μ`` with the exact derivative
``∂ log δ / ∂ log μ = μ φ(t)/δ`` (``t = ε/μ − μ/2``), safeguarded by a bracket and bisection.
It starts from two closed-form lower bounds of μ*:

* ``δ_μ(ε) ≤ δ_μ(0) = 2Φ(μ/2) − 1`` gives ``μ* ≥ 2√2 · erfinv(δ)``;
* ``δ_μ(ε) ≤ Φ(μ/2 − ε/μ)`` gives ``μ* ≥ −q + √(q² + 2ε)`` with ``q = −Φ⁻¹(δ)``;

moved up by one step of an asymptotic model (``_log_mu_start``), typically to within 1 %
of μ*, so that two Halley steps on the fast kernel and one exact Newton step finish
(``_solve.solve_safe``).  That last step lands below the root by the bound on the
evaluation error of ``log δ`` (``profile.log_delta_error``) divided by the slope, and
``σ = Δ/μ`` is rounded up: the profile at the returned σ never exceeds the requested δ,
and σ exceeds the exact optimum by about 1e-13 relative.

Large arrays
------------
Calls with at least :data:`TABLE_FROM` points take a streamlined version of the same
steps, about 3× cheaper per point (``docs/calibration.md`` has the measured ratio):

1. the start comes from a table of ``log μ*`` over ``(ln ε, ln(−ln δ))`` (``_StartTable``,
   built once by the solver above), within ~1e-3 of the root at 99 % of points, so that
   one Halley step on the fast kernel ends within ~1e-8;
2. the kernel runs one branch on contiguous arrays: the table also says which of the
   two common branches (``_settle``: ``D`` by the midpoint series with one ``erfcx``, or
   directly with two) holds at the optimum of each cell;
3. one Halley step, one exact Newton step with the same safe-side move as above, and
   every point that does not finish there (or is outside the table) takes the general
   path.

The exact kernel and the safe step are those of the general path, so the answer's
guarantee does not depend on the start; the two paths agree to about 1e-13 relative.
"""

from __future__ import annotations

import functools

import numpy as np
from scipy.special import erfinv, ndtri

from .._validation import NONNEGATIVE, POSITIVE, UNIT_OPEN, finish, real_args
from . import _scalar, _solve
from . import _settle as _settle_cases
from .profile import log_delta_error, log_delta_terms

__all__ = ["analytic_gaussian_sigma", "gdp_mu"]

_BLOCK = 1 << 15


def _log_mu_start(eps: np.ndarray, delta: np.ndarray) -> np.ndarray:
    """A starting point for ``log μ*``, usually within 1 % of it.

    Two exact lower bounds (module docstring): ``μ_tv = 2√2 erfinv(δ)`` (linear,
    ``√(2π) δ``, for subnormal δ where erfinv underflows) and the tail bound ``μ_a``
    solving ``Φ(μ/2 − ε/μ) = δ``, i.e. ``t = ε/μ − μ/2 = q``.  When the tail bound is the
    larger one and ``q ≥ 1``, one Newton step on the asymptotic model
    ``δ ≈ φ(t) μ/(t (t + μ))`` (from ``M1(s) ≈ 1/s²``) moves it up: at ``μ_a`` the model
    gives ``log δ − log δ_t ≈ −log(1 + q/μ_a)`` with slope ``≈ q (q + μ_a)``.
    """
    q = -ndtri(delta)
    root = np.sqrt(q * q + 2.0 * eps)
    with np.errstate(divide="ignore", invalid="ignore"):
        # −q + √(q² + 2ε) without cancellation when q > 0.
        mu_tail = np.where(q > 0, 2.0 * eps / (q + root), root - q)
        mu_tv = np.where(
            delta < 1e-300, np.sqrt(2.0 * np.pi) * delta, 2.0 * np.sqrt(2.0) * erfinv(delta)
        )
        tail_wins = (mu_tail > mu_tv) & (q >= 1.0)
        step = np.log1p(q / mu_tail) / (q * (q + mu_tail))
        return np.where(
            tail_wins,
            np.log(mu_tail) + np.minimum(step, 0.5),
            np.log(np.maximum(mu_tail, mu_tv)),
        )


# Starting-point table (_StartTable): x* = log μ* on a grid of u = ln ε and v = ln(−ln δ).
_TABLE_STEP = 0.05
_TABLE_U = (-18.5, 7.0)
_TABLE_V = (float(np.log(np.log(2.0))), float(np.log(700.0)))
#: Calls with at least this many points use (and, the first time, build) the table.
TABLE_FROM = _settle_cases.ARRAY_FROM

# Halley passes of the streamlined solver before a point goes to the safeguarded one.
_LEAN_PASSES = 2
_HALLEY_STOP = 1e-3


def _kernel(eps: np.ndarray, log_target: np.ndarray) -> _solve.Kernel:
    """The solver's kernel for ``g(x) = log δ_{e^x}(ε) − log δ`` (``idx`` selects points)."""

    def kernel(x: np.ndarray, idx: np.ndarray | None, exact: bool) -> tuple[np.ndarray, ...]:
        e, lt = (eps, log_target) if idx is None else (eps[idx], log_target[idx])
        mu = np.exp(x)
        log_d, t, log_phi = log_delta_terms(mu, e, exact)
        g1, curvature = _derivatives(log_d, t, log_phi, x)
        err = log_delta_error(log_d, t) if exact else 0.0 * g1
        return log_d - lt, g1, curvature, err

    return kernel  # type: ignore[return-value]


def _pad(x: np.ndarray) -> np.ndarray:
    """Rounding of ``x = log μ`` and of ``μ = e^x``: a few ulps of ``1 + |x|``."""
    return 1e-15 * (1.0 + np.abs(x))


def _derivatives(
    log_d: np.ndarray, t: np.ndarray, log_phi: np.ndarray, x: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """``g′`` and ``g″/g′`` of ``g = log δ`` in ``x = log μ``.

    ``g′ = μ φ(t)/δ`` (from ∂δ/∂μ = φ(t)), formed in log space so that neither factor
    overflows, and, with ``dt/dx = −(t + μ)``, ``g″/g′ = 1 + t (t + μ) − g′``.
    """
    g1 = np.exp(x + log_phi - log_d)
    return g1, 1.0 + t * (t + np.exp(x)) - g1


def _solve_mu_safeguarded(eps: np.ndarray, delta: np.ndarray) -> np.ndarray:
    """``log μ*`` by :func:`._solve.solve_safe` (bracketed Halley, then exact Newton steps)
    from the closed-form start: the general path, for every point the streamlined one
    (:func:`_solve_mu`) does not settle."""
    kernel = _kernel(eps, np.log(delta))
    return _solve.solve_safe(kernel, _log_mu_start(eps, delta), pad=_pad)


class _StartTable:
    """``x* = log μ*(ε, δ)`` on a grid, for starting points within ~1e-3 of the root.

    The grid covers ``u = ln ε ∈ [−18.5, 7]`` and ``v = ln(−ln δ) ∈ [ln ln 2, ln 700]``
    (ε from 1e-8 to 1100, δ from e⁻⁷⁰⁰ to ½) with spacing 0.05 in both; its values are
    computed once, by the safeguarded solver, the first time a call has
    :data:`TABLE_FROM` points.  Bilinear interpolation is within 4e-3 of ``x*`` at 99 %
    of points (median 3e-5), so that one Halley step on the fast kernel usually ends at
    ~1e-9.  Only the iteration count depends on the table: every answer is settled by
    the exact kernel and the safe-side step as without it.
    """

    def __init__(self) -> None:
        h = _TABLE_STEP
        self.u = np.arange(_TABLE_U[0], _TABLE_U[1], h)
        self.v = np.arange(_TABLE_V[0], _TABLE_V[1], h)
        uu, vv = np.meshgrid(self.u, self.v, indexing="ij")
        eps, delta = np.exp(uu).ravel(), np.exp(-np.exp(vv)).ravel()
        x = np.empty(eps.size)
        for start in range(0, eps.size, _BLOCK):
            block = slice(start, start + _BLOCK)
            x[block] = _solve_mu_safeguarded(eps[block], delta[block])
        x = x.reshape(uu.shape)
        # Per cell (i, j) the bilinear form c0 + a c1 + b c2 + a b c3 in its local
        # coordinates a, b ∈ [0, 1), stored as one row so that a lookup is one gather.
        x00, x01, x10, x11 = x[:-1, :-1], x[:-1, 1:], x[1:, :-1], x[1:, 1:]
        cells = np.stack([x00, x10 - x00, x01 - x00, x11 - x10 - x01 + x00], axis=-1)
        self.cells = np.ascontiguousarray(cells.reshape(-1, 4), dtype=np.float32)
        # Per cell the case of :mod:`._settle` its four corners share at the optimum
        # (0: midpoint, 2: direct), or 1 where they do not: then _branches decides.
        mid, direct = (a.reshape(uu.shape) for a in _branches(eps, x.ravel()))
        code = np.ones(x00.shape, dtype=np.int8)
        code[mid[:-1, :-1] & mid[:-1, 1:] & mid[1:, :-1] & mid[1:, 1:]] = 0
        code[direct[:-1, :-1] & direct[:-1, 1:] & direct[1:, :-1] & direct[1:, 1:]] = 2
        self.code = code.ravel()

    def lookup(self, eps: np.ndarray, delta: np.ndarray) -> tuple[np.ndarray, ...]:
        """Interpolated ``x*``, the mask of the points inside the grid, and their cells'
        case codes (1 outside the grid)."""
        nu, nv, inv_h = self.u.size - 1, self.v.size - 1, 1.0 / _TABLE_STEP  # cells
        with np.errstate(divide="ignore", invalid="ignore"):
            a = np.log(eps)
            a -= self.u[0]
            a *= inv_h
            b = np.log(delta)
            np.negative(b, out=b)
            np.log(b, out=b)
            b -= self.v[0]
            b *= inv_h
        inside = (a >= 0.0) & (a < nu) & (b >= 0.0) & (b < nv)
        if not inside.all():
            a[~inside] = 0.0
            b[~inside] = 0.0
        i, j = np.floor(a), np.floor(b)
        a -= i
        b -= j
        i *= nv
        i += j
        k = i.astype(np.intp)
        c = self.cells.take(k, axis=0)
        code = self.code.take(k)
        if not inside.all():
            code[~inside] = 1
        x = c[:, 3] * b
        x += c[:, 1]
        x *= a
        b *= c[:, 2]
        x += b
        x += c[:, 0]
        return x, inside, code


@functools.cache
def _start_table() -> _StartTable:
    return _StartTable()


def _start(eps: np.ndarray, delta: np.ndarray, table: bool) -> tuple[np.ndarray, ...]:
    """Starting ``log μ`` — the table inside its grid (large calls), else closed form —
    and the masks of the points for the midpoint and direct cases of :mod:`._settle`
    (the cell's code, or :func:`_branches` at the start where the cell has none)."""
    if not table:
        x = _log_mu_start(eps, delta)
        return (x, *_branches(eps, x))
    x, inside, code = _start_table().lookup(eps, delta)
    if not inside.all():
        out = np.flatnonzero(~inside)
        x[out] = _log_mu_start(eps[out], delta[out])
    mid, direct = code == 0, code == 2
    unknown = np.flatnonzero(code == 1)
    if unknown.size:
        mid[unknown], direct[unknown] = _branches(eps[unknown], x[unknown])
    return x, mid, direct


def _branches(eps: np.ndarray, x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Points whose start ``μ = e^x`` is in the midpoint branch of both kernels, and in
    the direct branch: the cases of :mod:`._settle`."""
    with np.errstate(over="ignore", divide="ignore", invalid="ignore", under="ignore"):
        mu = np.exp(x)
        q = eps / mu
        t = q - 0.5 * mu
        mid = _settle_cases.midpoint_in_branch(mu, t, q, True)
        mid &= _settle_cases.midpoint_in_branch(mu, t, q, False)
        direct = _settle_cases.direct_in_branch(mu, t)
    return mid, direct


def _solve_mu(eps: np.ndarray, delta: np.ndarray, table: bool) -> np.ndarray:
    """μ* from :func:`_start`: the two common branches by :mod:`._settle`, on contiguous
    copies of their points, everything else (and whatever those leave) by :func:`_settle`.
    """
    if not table:  # small calls: the table would cost more than it saves
        return np.exp(_solve_mu_safeguarded(eps, delta))
    x0, mid, direct = _start(eps, delta, table)
    log_target = np.log(delta)
    x = np.empty_like(x0)
    left = np.zeros(x0.size, dtype=bool)
    rest = ~(mid | direct)
    for case, where in ((_settle_cases.midpoint, mid), (_settle_cases.direct, direct)):
        if where.all():
            x, left = case(eps, log_target, x0)
            break
        idx = np.flatnonzero(where)
        if idx.size:
            x[idx], left[idx] = case(eps[idx], log_target[idx], x0[idx])
    left |= rest
    if left.any():
        idx = np.flatnonzero(left)
        x[idx] = _settle(eps[idx], delta[idx], x0[idx])
    return np.exp(x)


def _settle(eps: np.ndarray, delta: np.ndarray, x: np.ndarray) -> np.ndarray:
    """``log μ`` of the largest μ with exact log δ_μ(ε) + error ≤ log δ, from ``x`` ≈
    log μ* (flat arrays).

    The streamlined path of :func:`._solve.solve_safe`: at most :data:`_LEAN_PASSES`
    Halley steps on the fast kernel (no bracket), then the exact Newton step onto the safe
    side (:func:`._solve.exact_newton`).  A point whose Halley step is not yet below 1e-3
    after these passes is solved again by the safeguarded solver from the closed-form
    start.  ``x`` is overwritten.
    """
    log_target = np.log(delta)
    kernel = _kernel(eps, log_target)
    todo: np.ndarray | None = None  # None: every point
    with np.errstate(over="ignore", invalid="ignore", divide="ignore", under="ignore"):
        for _ in range(_LEAN_PASSES):
            xi = x if todo is None else x[todo]
            g, g1, c, _ = kernel(xi, todo, False)
            newton = g / g1
            denom = 1.0 - 0.5 * newton * c
            step = np.where(denom > 0.5, newton / denom, newton)
            new = xi - step
            done = np.abs(step) <= _HALLEY_STOP * np.maximum(1.0, np.abs(new))
            if todo is None:
                x = new
                todo = None if done.all() else np.flatnonzero(~done)
            else:
                x[todo] = new
                todo = todo[~done]
            if todo is None or todo.size == 0:
                todo = None
                break
        if todo is not None:
            x[todo] = _solve_mu_safeguarded(eps[todo], delta[todo])
            settled = np.ones(x.size, dtype=bool)
            settled[todo] = False
            rest = np.flatnonzero(settled)
            x[rest] = _solve.exact_newton(kernel, x[rest], _pad, rest)
        else:
            x = _solve.exact_newton(kernel, x, _pad, None)
    if not np.isfinite(x).all():
        bad = int(np.flatnonzero(~np.isfinite(x))[0])
        raise FloatingPointError(f"dpgauss internal error: no finite root at element {bad}")
    return x


#: From this ε on, μ* is the tail bound in closed form (:func:`_mu_huge_eps`).
HUGE_EPS = _scalar.HUGE_EPS


def _mu_huge_eps(eps: np.ndarray, delta: np.ndarray) -> np.ndarray:
    """μ for ε ≥ :data:`HUGE_EPS`: the tail bound ``μ_a = −q + √(q² + 2ε)``, rounded down.

    ``δ_μ(ε) ≤ Φ(μ/2 − ε/μ)``, which is at most δ as soon as ``ε/μ − μ/2 ≥ q = −Φ⁻¹(δ)``,
    i.e. ``μ ≤ μ_a``: any μ below μ_a is safe.  Here ``μ_a ≥ √(2·1e20) − 38.5 > 1e10``,
    where the solver cannot work (one ulp of μ moves ``t`` by ``μ·1e-16``, up to 1e138,
    and from ε ≈ 1e47 it found no finite root), and where nothing is lost: the optimum
    is ``μ* ≈ μ_a + 1/μ_a`` (the dropped term ``e^ε Φ(−μ/2 − ε/μ)`` is ``≈ q/μ`` of δ),
    within 1e-20 relative.  Formed as ``s/(r + √(r² + 1))`` with ``s = √2·√ε``,
    ``r = q/s`` (no overflow up to the largest double), with ``q`` raised by
    ``1e-9·(1 + |q|)`` (``ndtri`` is within ~1e-15 relative) and the result lowered by
    4e-15 relative (the ~4 roundings of the formula are below 1e-15): the returned μ is
    below μ_a, by about 4e-15 of it.
    """
    q = -ndtri(delta)
    q = q + 1e-9 * (1.0 + np.abs(q))
    s = _scalar.SQRT2 * np.sqrt(eps)
    r = q / s
    return s / (r + np.sqrt(r * r + 1.0)) * (1.0 - _scalar.HUGE_EPS_MARGIN)


def _mu_flat(eps: np.ndarray, delta: np.ndarray, table: bool) -> np.ndarray:
    """μ* on flat arrays, with the subnormal corner and huge ε handled in closed form.

    For tiny δ with tiny ε, μ* is at or below the subnormal range, where μ has too few
    bits for a solver.  There ``δ_μ(ε) ≤ δ_μ(0) = erf(μ/(2√2)) ≈ μ/√(2π)``, so the (0, δ)
    solution ``√(2π) δ``, one subnormal step down, is safe (and optimal up to the spacing
    of subnormals when ε = 0).  For ε ≥ :data:`HUGE_EPS`, :func:`_mu_huge_eps`.
    """
    huge = eps >= HUGE_EPS
    if huge.any():
        mu = np.empty_like(eps)
        mu[huge] = _mu_huge_eps(eps[huge], delta[huge])
        rest = np.flatnonzero(~huge)
        if rest.size:
            mu[rest] = _mu_flat(eps[rest], delta[rest], table)
        return mu
    closed = (delta < 1e-300) & (eps <= 1e-280)
    if not closed.any():
        return _solve_mu(eps, delta, table)
    mu = np.nextafter(np.sqrt(2.0 * np.pi) * delta, 0.0)
    solve = np.flatnonzero(~closed)
    if solve.size:
        mu[solve] = _solve_mu(eps[solve], delta[solve], table)
    return mu


def _calibrate(eps: np.ndarray, delta: np.ndarray) -> np.ndarray:
    shape = np.broadcast(eps, delta).shape
    eps_f, d_f = (np.broadcast_to(a, shape).ravel() for a in (eps, delta))
    out = np.empty(eps_f.size)
    table = eps_f.size >= TABLE_FROM  # decided for the whole call: one path per call size
    # Blocks small enough for the temporaries to stay in cache: ~20 % faster at 10^6.
    for start in range(0, eps_f.size, _BLOCK):
        block = slice(start, start + _BLOCK)
        out[block] = _mu_flat(eps_f[block], d_f[block], table)
    return out.reshape(shape)


def gdp_mu(epsilon: object, delta: object) -> float | np.ndarray:
    """Largest μ such that μ-GDP implies (ε, δ)-DP, rounded down (the safe side).

    ε ∈ [0, ∞), δ ∈ (0, 1).  ``analytic_gaussian_sigma(ε, δ, Δ) = Δ / gdp_mu(ε, δ)``
    (rounded up).
    """
    args = _scalar.plain(epsilon, delta)
    if args is not None and (fast := _scalar.gdp_mu(*args)) is not None:
        return fast
    (eps_a, d_a), scalar = real_args(epsilon=(epsilon, NONNEGATIVE), delta=(delta, UNIT_OPEN))
    small = _scalar.elementwise(_scalar.gdp_mu, eps_a, d_a)
    return finish(_calibrate(eps_a, d_a) if small is None else small, scalar)


def analytic_gaussian_sigma(
    epsilon: object, delta: object, sensitivity: object = 1.0
) -> float | np.ndarray:
    r"""Smallest σ for which ``f(x) + N(0, σ²I)`` is (ε, δ)-DP (Balle & Wang 2018, Thm 8).

    Solves ``Φ(Δ/(2σ) − εσ/Δ) − e^ε Φ(−Δ/(2σ) − εσ/Δ) = δ`` for σ, exactly up to rounding,
    which is always toward more noise: the exact profile at the returned σ never exceeds
    δ.  Valid for every ε ≥ 0 (ε = 0 is the (0, δ) case, where the solution is
    ``σ = Δ / (2√2 erfinv(δ))``; from ε = 1e20 on σ is ``Δ/(−q + √(q² + 2ε))``,
    ``q = −Φ⁻¹(δ)``, rounded up, within 1e-14 of the optimum), unlike the classical
    ``Δ√(2 ln(1.25/δ))/ε``.

    Parameters
    ----------
    epsilon : array_like, ε ∈ [0, ∞)
    delta : array_like, δ ∈ (0, 1)
    sensitivity : array_like, global L2 sensitivity Δ ∈ (0, ∞)

    Returns
    -------
    float or ndarray
        σ, broadcast over the inputs; a Python float for scalar inputs.

    Examples
    --------
    >>> round(analytic_gaussian_sigma(1.0, 1e-5), 6)
    3.730632

    Python numbers take the scalar path of :mod:`dpgauss.privacy._scalar` (the same
    kernels on floats, a few microseconds); arrays the vectorised one.
    """
    args = _scalar.plain(epsilon, delta, sensitivity)
    if args is not None and (fast := _scalar.analytic_gaussian_sigma(*args)) is not None:
        return fast
    (eps_a, d_a, sens_a), scalar = real_args(
        epsilon=(epsilon, NONNEGATIVE),
        delta=(delta, UNIT_OPEN),
        sensitivity=(sensitivity, POSITIVE),
    )
    small = _scalar.elementwise(_scalar.analytic_gaussian_sigma, eps_a, d_a, sens_a)
    if small is not None:
        return finish(small, scalar)
    mu = _calibrate(eps_a, d_a)
    with np.errstate(over="ignore", divide="ignore"):
        sigma = np.nextafter(sens_a / mu, np.inf)
    if not np.isfinite(sigma).all():
        bad = np.argwhere(~np.isfinite(sigma))[0] if sigma.ndim else ()
        where = f" at index {tuple(int(i) for i in bad)}" if sigma.ndim else ""
        raise ValueError(
            f"delta={float(d_a[tuple(bad)])!r} with sensitivity={float(sens_a[tuple(bad)])!r}"
            f"{where} needs a sigma above the largest double (1.8e308)"
        )
    return finish(sigma, scalar)
