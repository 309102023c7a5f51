"""Order 1 on a chain: the active-set method on the knots, compiled.

On the path ``0 − 1 − … − (n−1)`` labelled in order, order-1 trend filtering has
``Δ = L``, the path's Laplacian (rows ↔ nodes): ``(Lv)_0 = v_0 − v_1``,
``(Lv)_i = 2v_i − v_{i−1} − v_{i+1}``, ``(Lv)_{n−1} = v_{n−1} − v_{n−2}``.  A face of the dual
(:mod:`._dual_newton`) holds the rows of its *knots* ``a_0 < … < a_{K−1}`` at ``u_a = λs_a``
and frees the others; its fit is ``x = Π_V(y − λLs)`` with

    V = null(L_F) = {x linear between consecutive knots, constant before a_0 and after
    a_{K−1}},

the continuous piecewise-linear functions with those knots and flat ends, of dimension
``K``.  So a face is a ``K × K`` least-squares problem, not an ``n``-row banded one
(:meth:`._dual_newton.DualNewton._normal`): with ``x = Hc`` (``c`` the values at the knots,
``H`` linear interpolation with constant extrapolation), the normal equations are

    (HᵀH) c = Hᵀy − λ Hᵀ L s = Hᵀy − λ D s_A,                                         (1)

``HᵀH`` tridiagonal (per segment of length ``h``: ``Σ t² = S₂/h²`` and
``Σ t(1 − t) = S₁/h − S₂/h²`` over ``t = j/h``, ``j = 1 … h−1``, ``S₁ = Σj``, ``S₂ = Σj²``,
plus 1 per knot and the flat ends' counts), ``Hᵀy`` from two prefix sums of ``y`` (made
once), and ``HᵀLs = (LH)ᵀs = Ds_A`` because ``Lφ_k`` vanishes off the knots: ``D`` is the
weighted Laplacian of the chain of knots, weights ``1/h``.  No ``λ``-sized number enters a
prefix sum.  The dual on the free rows solves ``Lu = y − x`` with ``u_A = λs_A``: one
particular solution is ``v`` with ``v_0 = 0``, ``v_{i+1} − v_i = −Σ_{j≤i}(y − x)_j``
(``(Lv)_i = (y − x)_i`` at every row but the last, where it holds since ``Σ(y − x) = 0``),
and ``u = v + `` the piecewise-linear interpolation of ``λs_A − v_A`` (flat ends), which
``L`` annihilates off the knots.  The jump at knot ``a_k`` is the change of slope,
``(Lx)_{a_k} = slope_left − slope_right`` (0 beyond the ends).

:func:`pdas` runs the primal-dual active set of :meth:`._dual_newton.DualNewton.pdas` —
the same rules: drop the knots whose jump has the wrong sign, add the free rows with
``|u| > λ`` whose excess is the largest among the rows sharing a node with them (here
``|i − j| ≤ 2``), at most a quarter of the support at once — with these faces: about
``10n`` flops a face instead of a banded factorisation and a dozen calls into LAPACK and
sparse products (on the 4,000-bin chain of ``benchmarks/bench_auto.py`` a λ of the SURE
path takes 0.2–0.7 ms instead of 5–15 ms).  Where those rules repeat a support, it changes
one violator instead (as :func:`._dual_newton.single_change` does off chains: the worst
entering row, or the next whose change gives a support not seen yet, else the worst
leaving knot), which a face this cheap affords.  It is compiled by numba
(``cache=True``).  Without numba, or when a face cannot be solved (an empty support, a
pivot ≤ 0, a number not finite), the caller runs :mod:`._dual_newton`'s own active set
from the same start; when the rules fail (a support repeated even so, or 200 steps), its
interior-point start.  Its answer is the caller's to certify (the duality gap within
``tol``, as every face), and the solution being unique, the path's df and chosen λ are
those of the banded route (``tests/denoise/trend_filter/test_knots.py``).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from ..._optional import numba

__all__ = ["kernel", "pdas", "prefix_sums"]

_HASH = np.uint64(0x9E3779B97F4A7C15)


def prefix_sums(y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(Y0, Y1)``: ``Y0[i] = Σ_{j<i} y_j`` and ``Y1[i] = Σ_{j<i} j·y_j`` (``n + 1`` each)."""
    y = np.asarray(y, dtype=np.float64)
    y0 = np.concatenate([[0.0], np.cumsum(y)])
    y1 = np.concatenate([[0.0], np.cumsum(np.arange(y.size) * y)])
    return y0, y1


def pdas(
    y: Any,
    y0: Any,
    y1: Any,
    lam: float,
    u0: Any,
    max_steps: int,
    enter_frac: float,
    u_out: Any,
    x_out: Any,
    sign_out: Any,
) -> int:
    """The active set from the support of ``u0`` (its rows at ``±λ``) at ``λ > 0`` (module
    doc); writes the last face's ``u``, ``x`` and support signs into the outputs and returns
    its number of steps if it satisfies the optimality conditions; −1 if the rules fail
    (a repeated support after a single change, or ``max_steps``; ``u_out`` is then the
    last face's dual), 0 if a face cannot be solved (an empty support, a pivot ≤ 0, a
    number not finite)."""
    n = y.shape[0]
    sign = np.zeros(n)
    for i in range(n):
        if abs(u0[i]) >= lam:
            sign[i] = 1.0 if u0[i] > 0 else -1.0
    seen = {_key(sign)}
    knots = np.empty(n, dtype=np.int64)
    signs = np.empty(n)
    c = np.empty(n)
    score = np.zeros(n)
    for step in range(1, max_steps + 1):
        k_count = 0
        for i in range(n):
            if sign[i] != 0.0:
                knots[k_count] = i
                signs[k_count] = sign[i]
                k_count += 1
        if k_count == 0:
            return 0
        if not _face(y, y0, y1, lam, knots[:k_count], signs[:k_count], c, x_out, u_out):
            return 0
        # the jumps at the knots: the wrong-signed ones leave
        any_change = False
        new = sign.copy()
        worst, worst_row = 0.0, -1
        for k in range(k_count):
            left = (c[k] - c[k - 1]) / (knots[k] - knots[k - 1]) if k > 0 else 0.0
            right = (c[k + 1] - c[k]) / (knots[k + 1] - knots[k]) if k < k_count - 1 else 0.0
            jump = signs[k] * (left - right)
            if jump < 0.0:
                new[knots[k]] = 0.0
                any_change = True
                if jump < worst:
                    worst, worst_row = jump, knots[k]
        # free rows whose multiplier left the box, the largest excess among their neighbours
        n_enter = 0
        for i in range(n):
            over = abs(u_out[i]) - lam
            score[i] = over if (sign[i] == 0.0 and over > 0.0) else 0.0
        cand = np.empty(n, dtype=np.int64)
        for i in range(n):
            if score[i] > 0.0:
                best = score[i]
                for j in range(max(i - 2, 0), min(i + 2, n - 1) + 1):
                    best = max(best, score[j])
                if score[i] >= best:
                    cand[n_enter] = i
                    n_enter += 1
        if not any_change and n_enter == 0:
            sign_out[:] = sign
            return step
        picked = cand[:n_enter]
        order = np.argsort(-score[picked], kind="mergesort")
        if n_enter:
            cap = max(1, math.ceil(enter_frac * k_count))
            for idx in order[:cap]:
                i = picked[idx]
                new[i] = 1.0 if u_out[i] > 0 else -1.0
        key = _key(new)
        if key in seen:
            # cycling: change only one violator, the worst whose change gives a support not
            # seen yet (_dual_newton.single_change changes the worst one only)
            found = False
            for idx in order:
                i = picked[idx]
                new = sign.copy()
                new[i] = 1.0 if u_out[i] > 0 else -1.0
                key = _key(new)
                if key not in seen:
                    found = True
                    break
            if not found and worst_row >= 0:
                new = sign.copy()
                new[worst_row] = 0.0
                key = _key(new)
                found = key not in seen
            if not found:
                return -1
        seen.add(key)
        sign = new
    return -1


def _key(sign: Any) -> Any:
    """A 64-bit hash of a support (its rows and signs), for the repeated-support stop."""
    h = np.uint64(1469598103934665603)
    for i in range(sign.shape[0]):
        if sign[i] != 0.0:
            h = (h ^ np.uint64(2 * i + (1 if sign[i] > 0 else 0))) * _HASH
    return h


def _face(
    y: Any, y0: Any, y1: Any, lam: float, knots: Any, signs: Any, c: Any, x: Any, u: Any
) -> bool:
    """The face of the knots (module doc): ``c`` (values at the knots), ``x`` and ``u``;
    False if (1) is not positive definite or a number is not finite."""
    n = y.shape[0]
    k_count = knots.shape[0]
    diag = np.empty(k_count)
    off = np.zeros(k_count)  # off[k] couples knots k and k + 1
    rhs = np.empty(k_count)
    for k in range(k_count):
        a = knots[k]
        diag[k] = 1.0
        rhs[k] = y[a]
    first, last = knots[0], knots[k_count - 1]
    diag[0] += first  # the flat start: x_i = c_0 for i < a_0
    rhs[0] += y0[first]
    diag[k_count - 1] += n - 1 - last  # the flat end
    rhs[k_count - 1] += y0[n] - y0[last + 1]
    for k in range(k_count - 1):
        a, b = knots[k], knots[k + 1]
        h = b - a
        if h > 1:
            hf = float(h)
            s1 = hf * (hf - 1.0) / 2.0
            s2 = (hf - 1.0) * hf * (2.0 * hf - 1.0) / 6.0
            tt = s2 / (hf * hf)
            diag[k] += tt
            diag[k + 1] += tt
            off[k] = s1 / hf - tt
            z0 = y0[b] - y0[a + 1]
            zt = ((y1[b] - y1[a + 1]) - a * z0) / hf  # Σ t y over the segment's interior
            rhs[k] += z0 - zt
            rhs[k + 1] += zt
        # − λ (D s)_k: D the knots' chain Laplacian with weights 1/h
        w = lam / h
        rhs[k] -= w * (signs[k] - signs[k + 1])
        rhs[k + 1] -= w * (signs[k + 1] - signs[k])
    # symmetric tridiagonal LDLᵀ, in place
    for k in range(k_count):
        if k > 0:
            m = off[k - 1] / diag[k - 1]
            diag[k] -= m * off[k - 1]
            rhs[k] -= m * rhs[k - 1]
        if not diag[k] > 0.0:
            return False
    c[k_count - 1] = rhs[k_count - 1] / diag[k_count - 1]
    for k in range(k_count - 2, -1, -1):
        c[k] = (rhs[k] - off[k] * c[k + 1]) / diag[k]
    # x = Hc
    for i in range(first + 1):
        x[i] = c[0]
    for i in range(last, n):
        x[i] = c[k_count - 1]
    for k in range(k_count - 1):
        a, b = knots[k], knots[k + 1]
        h = float(b - a)
        for i in range(a, b + 1):
            t = (i - a) / h
            x[i] = (1.0 - t) * c[k] + t * c[k + 1]
    # u = v + the interpolation of λ s_A − v_A (module doc)
    run = 0.0
    v = 0.0
    for i in range(n):
        u[i] = v
        run += y[i] - x[i]
        v -= run
    if not math.isfinite(v):
        return False
    for i in range(first):
        u[i] += lam * signs[0] - u[first]
    for i in range(last + 1, n):
        u[i] += lam * signs[k_count - 1] - u[last]
    for k in range(k_count - 1):
        a, b = knots[k], knots[k + 1]
        h = float(b - a)
        ca, cb = lam * signs[k] - u[a], lam * signs[k + 1] - u[b]
        for i in range(a + 1, b):
            t = (i - a) / h
            u[i] += (1.0 - t) * ca + t * cb
    for k in range(k_count):
        u[knots[k]] = lam * signs[k]
    return True


_compiled: Any = None
_tried = False


def kernel() -> Any:
    """:func:`pdas` compiled by numba on first use, or None without numba."""
    global _compiled, _tried
    if not _tried:
        _tried = True
        nb = numba()
        if nb is not None:
            jit = nb.njit(cache=True, nogil=True)
            # pdas calls these globals: numba resolves them to the compiled helpers
            global _key, _face
            _key = jit(getattr(_key, "py_func", _key))
            _face = jit(getattr(_face, "py_func", _face))
            _compiled = jit(pdas)
    return _compiled
