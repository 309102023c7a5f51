"""Exact 1-D total variation denoising: the order-0 trend filter on a chain, in O(n).

On a path graph (a chain ``0 − 1 − … − n−1``) the order-0 trend filter is 1-D TV denoising,
``argmin_x ½‖y − x‖² + λ Σ |x_{k+1} − x_k|``, which has a direct exact algorithm (Condat,
"A direct algorithm for 1-D total variation denoising", IEEE Signal Process. Lett. 20(11),
2013): scan left to right keeping, for the current segment, the lowest and highest level it
can still take (``v_lo``, ``v_hi``) and the running dual residuals (``u_lo``, ``u_hi``, the
value the dual would take at the next edge if the segment stayed at that level).  When the
next sample forces the dual below ``−λ`` (or above ``λ``) at every admissible level, the
segment ends at the last point where the low (high) bound was tight, with a downward
(upward) jump, and the scan restarts there.  On noisy signals each sample is visited about
twice, with no linear algebra and no tolerance; on smooth ones with a large λ the
restarts rescan long look-aheads (a ramp of slope ``s``: about ``2√(λ/s)`` visits per
sample).  The scan therefore stops once it has made more than ``BUDGET`` advances per
sample reached (plus ``SLACK``), and Johnson's dynamic programme, O(n) on any signal, finds
the segmentation instead; the levels are then set from segment sums exactly as the scan
sets them (:func:`_dp_unit`, :func:`_dp_weighted`), and the answer is checked
(:func:`_certified`); if the check fails the scan runs to the end (it failed on none of
2000 random unweighted inputs, on 3–9 % of inputs with weights over e^±42 … e^±72).

The dual point comes with the solution: with ``D`` the chain's incidence (row ``k`` =
``1_k − 1_{k+1}``), ``Dᵀu = W(y − x)`` holds for the sums ``u_k = u_in + Σ w_i(y_i − x_i)``
over each segment up to ``k``, restarted at the exact ``u_in = −λ·sign`` of the jump that
starts the segment (0 at the signal's start); they lie in ``[−λ, λ]`` at the optimum to
rounding, and the caller certifies the gap with them.  The kernel writes them as it writes
``x``: no second pass, no temporaries.

Compiled with numba when it is installed (``cache=True``), else plain Python on lists.
``benchmarks/bench_tv1d.py`` times it against prox_tv's C++ (``tv1_1d``): on 10⁶ noisy
samples both take about the same time (tv1d / prox_tv medians 0.93–1.16 in one run on a
loaded box), and the plain loops are 30–80× slower.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..._optional import numba

__all__ = ["tv1d", "tv1d_rows"]

_numba = numba()


def _condat(y: Any, w: Any, lam: float, x: Any, u: Any, rate: int, slack: int) -> bool:
    """Fill ``x`` with the 1-D TV solution of ``y`` at ``lam > 0`` (``len(y) ≥ 2``) with
    fidelity weights ``w``, and ``u`` with its dual: ``u[k]`` on the edge ``(k, k+1)``, the
    last entry the final segment's residual (≈ 0); arrays for the compiled kernel, Python
    lists for the plain loop (about 3× faster than indexing arrays element by element).

    The current segment starts at ``k0`` with the dual ``u0`` on the edge before it (0 at
    the signal's start, ``±λ`` after a jump) and has weight ``sw`` and weighted sum ``sy``
    (summed as the scan advances).  A bound that becomes tight at ``k`` is set from them,
    ``v = (sy + u0 ∓ λ) / sw`` (the level whose dual at ``k`` is ``±λ``), never by adding a
    correction to the old bound: with weights over many decades the first bound,
    ``y₀ ∓ λ/w₀``, can be astronomically far from the data, and corrections to it would
    cancel catastrophically.

    The dual is written with the segment: ``u_i = u0 + Σ_{k0 ≤ j ≤ i} w_j (y_j − v)``, so
    ``Dᵀu = W(y − x)`` holds exactly inside every segment and to one rounding at its start
    (where the sum restarts from the exact ``±λ`` instead of carrying the previous
    segment's rounding: no error accumulates along the chain).

    True when done; False (``x`` and ``u`` partly written) as soon as the scan's advances
    exceed ``rate·k + slack`` at sample ``k`` (at once if ``slack < 0``): the sign of a
    smooth stretch with a large λ, on which the restarts rescan long look-aheads (a ramp of
    slope ``s`` costs about ``2√(λ/s)`` advances per sample).  Checking against the
    position reached rather than against ``n`` gives up early in such a stretch, before
    much work is wasted."""
    n = len(y)
    if slack < 0:
        return False
    k = k0 = k_lo = k_hi = 0  # current sample, segment start, last tight low/high points
    u0 = 0.0
    sw = w[0]
    sy = w[0] * y[0]
    v_lo = (sy - lam) / sw
    v_hi = (sy + lam) / sw
    u_lo = lam
    u_hi = -lam
    down = False  # the jump that ends the current segment: downward (else upward)
    end = 0  # the segment's last sample
    steps = 0
    while True:
        at_end = k == n - 1
        if at_end:
            # end of the signal: close the segment if a bound's dual is out of range
            if u_lo < 0.0:
                down, end = True, k_lo
            elif u_hi > 0.0:
                down, end = False, k_hi
            else:
                v = (sy + u0) / sw  # the level whose dual at the end is 0
                acc = u0
                for i in range(k0, n):
                    x[i] = v
                    acc += w[i] * (y[i] - v)
                    u[i] = acc
                return True
        else:
            wk = w[k + 1]
            yk = y[k + 1]
            d_lo = u_lo + wk * (yk - v_lo)
            d_hi = u_hi + wk * (yk - v_hi)
            if d_lo < -lam:
                down, end = True, k_lo  # a downward jump after k_lo is unavoidable
            elif d_hi > lam:
                down, end = False, k_hi  # an upward jump after k_hi is unavoidable
            else:
                steps += 1
                if steps > rate * k + slack:
                    return False
                k += 1
                sw += wk
                sy += wk * yk
                u_lo = d_lo
                u_hi = d_hi
                if u_lo >= lam:
                    v_lo = (sy + u0 - lam) / sw
                    u_lo = lam
                    k_lo = k
                if u_hi <= -lam:
                    v_hi = (sy + u0 + lam) / sw
                    u_hi = -lam
                    k_hi = k
                continue
        v = v_lo if down else v_hi
        acc = u0
        for i in range(k0, end + 1):
            x[i] = v
            acc += w[i] * (y[i] - v)
            u[i] = acc
        k = k0 = end + 1
        if k >= n:
            return True
        sw = w[k]
        sy = w[k] * y[k]
        if down:
            u0 = lam
            k_lo = k
            v_lo = y[k]
            u_lo = lam
            if at_end:  # keep the high bound (Condat's end-of-signal restart)
                u_hi = lam + w[k] * (y[k] - v_hi)
            else:
                k_hi = k
                v_hi = (sy + 2.0 * lam) / sw
                u_hi = -lam
        else:
            u0 = -lam
            k_hi = k
            v_hi = y[k]
            u_hi = -lam
            if at_end:
                u_lo = -lam + w[k] * (y[k] - v_lo)
            else:
                k_lo = k
                v_lo = (sy - 2.0 * lam) / sw
                u_lo = lam


def _condat_unit(y: Any, lam: float, x: Any, u: Any, rate: int, slack: int) -> bool:
    """:func:`_condat` with every weight 1 (no weight array: fewer loads and no products),
    the same operations otherwise, so the same result to the last bit, and the same
    allowance.  ``u`` may be None: ``x`` only (the dual is then rebuilt from ``x`` by
    whoever needs it, as :func:`._fibres.certificate` does: the same sums)."""
    n = len(y)
    if slack < 0:
        return False
    k = k0 = k_lo = k_hi = 0  # current sample, segment start, last tight low/high points
    u0 = 0.0
    sw = 1.0
    sy = y[0]
    v_lo = sy - lam
    v_hi = sy + lam
    u_lo = lam
    u_hi = -lam
    down = False  # the jump that ends the current segment: downward (else upward)
    end = 0  # the segment's last sample
    steps = 0
    while True:
        at_end = k == n - 1
        if at_end:
            # end of the signal: close the segment if a bound's dual is out of range
            if u_lo < 0.0:
                down, end = True, k_lo
            elif u_hi > 0.0:
                down, end = False, k_hi
            else:
                v = (sy + u0) / sw  # the level whose dual at the end is 0
                if u is None:
                    for i in range(k0, n):
                        x[i] = v
                    return True
                acc = u0
                for i in range(k0, n):
                    x[i] = v
                    acc += y[i] - v
                    u[i] = acc
                return True
        else:
            yk = y[k + 1]
            d_lo = u_lo + (yk - v_lo)
            d_hi = u_hi + (yk - v_hi)
            if d_lo < -lam:
                down, end = True, k_lo  # a downward jump after k_lo is unavoidable
            elif d_hi > lam:
                down, end = False, k_hi  # an upward jump after k_hi is unavoidable
            else:
                steps += 1
                if steps > rate * k + slack:
                    return False
                k += 1
                sw += 1.0
                sy += yk
                u_lo = d_lo
                u_hi = d_hi
                if u_lo >= lam:
                    v_lo = (sy + u0 - lam) / sw
                    u_lo = lam
                    k_lo = k
                if u_hi <= -lam:
                    v_hi = (sy + u0 + lam) / sw
                    u_hi = -lam
                    k_hi = k
                continue
        v = v_lo if down else v_hi
        if u is None:
            for i in range(k0, end + 1):
                x[i] = v
        else:
            acc = u0
            for i in range(k0, end + 1):
                x[i] = v
                acc += y[i] - v
                u[i] = acc
        k = k0 = end + 1
        if k >= n:
            return True
        sw = 1.0
        sy = y[k]
        if down:
            u0 = lam
            k_lo = k
            v_lo = y[k]
            u_lo = lam
            if at_end:  # keep the high bound (Condat's end-of-signal restart)
                u_hi = lam + (y[k] - v_hi)
            else:
                k_hi = k
                v_hi = sy + 2.0 * lam
                u_hi = -lam
        else:
            u0 = -lam
            k_hi = k
            v_hi = y[k]
            u_hi = -lam
            if at_end:
                u_lo = -lam + (y[k] - v_lo)
            else:
                k_lo = k
                v_lo = sy - 2.0 * lam
                u_lo = lam


def _dp_unit(y: Any, lam: float, x: Any, u: Any, kx: Any, ka: Any, kb: Any) -> None:
    """Fill ``x`` and ``u`` as :func:`_condat_unit` does, in O(n) whatever the signal, by
    Johnson's dynamic programme ("A dynamic programming algorithm for the fused lasso and
    L0-segmentation", J. Comput. Graph. Statist. 22(2), 2013), then the levels again from
    segment sums; ``kx``, ``ka``, ``kb`` are scratch of length ``2n``.

    Forward, the derivative of the message ``f_k(b) = ½(y_k − b)² + min_c f_{k−1}(c) +
    λ|b − c|`` is ``(b − y_k) + clip(f'_{k−1}(b), −λ, λ)``: piecewise linear and increasing,
    kept as knots ``kx[left..right]`` where its slope and intercept change by ``ka``,
    ``kb`` (read from the left as is, from the right negated).  Step ``k`` finds the points
    ``tm_k``, ``tp_k`` where ``f'_k = ∓λ`` by walking in from either end, drops the knots
    walked over (each knot is added once and dropped once: O(n) in all) and adds the two
    new ones.
    Backward, ``x_{n−1}`` solves ``f'_{n−1} = 0`` and ``x_k = clip(x_{k+1}, tm_k, tp_k)``
    (``tm``, ``tp`` kept in ``x`` and ``u`` meanwhile).

    The intercepts sum ``y`` over long stretches, so the levels found this way are off by
    far more than one rounding (KKT violations up to 9e-10 relative on 10⁶-sample ramps and
    sines, against 1e-15–3e-12 once recomputed from segment sums as below; measured at
    λ ∈ {0.3, 1, 3, 100}); only the segmentation and the jump directions are kept.  Each fused run
    ``[k0, k1]`` gets the level its KKT conditions fix, ``v = (Σ y + u_in − u_out) / L``
    with ``u = −λ·sign`` of the jump on either side (0 at the ends): Condat's formula, so
    the same level where the two algorithms segment alike.  The dual is then written as in
    :func:`_condat`."""
    n = len(y)
    left = n - 1  # the knots are kx[left..right], left and right move out at most one per step
    right = n
    kx[left] = y[0] - lam
    kx[right] = y[0] + lam
    ka[left] = 1.0
    kb[left] = lam - y[0]
    ka[right] = -1.0
    kb[right] = y[0] + lam
    x[0] = y[0] - lam
    u[0] = y[0] + lam
    for k in range(1, n - 1):
        a = 1.0  # f'_k = a·b + c left of the knot at lo
        c = -y[k] - lam
        lo = left
        while lo <= right and a * kx[lo] + c <= -lam:
            a += ka[lo]
            c += kb[lo]
            lo += 1
        tm = (-lam - c) / a
        left = lo - 1
        kx[left] = tm
        ka[left] = a
        kb[left] = c + lam
        a = -1.0  # −f'_k = a·b + c right of the knot at hi
        c = y[k] - lam
        hi = right
        while hi > left and -a * kx[hi] - c >= lam:
            a += ka[hi]
            c += kb[hi]
            hi -= 1
        tp = (lam + c) / -a
        right = hi + 1
        kx[right] = tp
        ka[right] = a
        kb[right] = c + lam
        x[k] = tm
        u[k] = tp
    a = 1.0
    c = -y[n - 1] - lam
    lo = left
    while lo <= right and a * kx[lo] + c <= 0.0:
        a += ka[lo]
        c += kb[lo]
        lo += 1
    b = -c / a
    x[n - 1] = b
    for k in range(n - 2, -1, -1):
        if b > u[k]:
            b = u[k]
        elif b < x[k]:
            b = x[k]
        x[k] = b
    # the levels from segment sums, and the dual
    k0 = 0
    u_in = 0.0
    while k0 < n:
        k1 = k0
        while k1 + 1 < n and x[k1 + 1] == x[k0]:
            k1 += 1
        u_out = 0.0
        if k1 + 1 < n:
            u_out = -lam if x[k1 + 1] > x[k0] else lam
        sy = 0.0
        for i in range(k0, k1 + 1):
            sy += y[i]
        v = (sy + u_in - u_out) / (k1 - k0 + 1)
        acc = u_in
        for i in range(k0, k1 + 1):
            x[i] = v
            acc += y[i] - v
            u[i] = acc
        u_in = u_out
        k0 = k1 + 1


def _dp_weighted(y: Any, w: Any, lam: float, x: Any, u: Any, kx: Any, ka: Any, kb: Any) -> None:
    """:func:`_dp_unit` with fidelity weights (``f_k(b) = ½w_k(y_k − b)² + …``: slopes
    ``w_k`` instead of 1), the levels recomputed as :func:`_condat` sets them,
    ``(Σ w y + u_in − u_out) / Σ w`` summed from the run's start; with weights over many
    decades the programme's knots may be far off (``y₀ ∓ λ/w₀``), and its answer is only
    used once :func:`_certified`."""
    n = len(y)
    left = n - 1  # the knots are kx[left..right], left and right move out at most one per step
    right = n
    wy = w[0] * y[0]
    kx[left] = (wy - lam) / w[0]
    kx[right] = (wy + lam) / w[0]
    ka[left] = w[0]
    kb[left] = lam - wy
    ka[right] = -w[0]
    kb[right] = wy + lam
    x[0] = kx[left]
    u[0] = kx[right]
    for k in range(1, n - 1):
        wy = w[k] * y[k]
        a = w[k]  # f'_k = a·b + c left of the knot at lo
        c = -wy - lam
        lo = left
        while lo <= right and a * kx[lo] + c <= -lam:
            a += ka[lo]
            c += kb[lo]
            lo += 1
        tm = (-lam - c) / a
        left = lo - 1
        kx[left] = tm
        ka[left] = a
        kb[left] = c + lam
        a = -w[k]  # −f'_k = a·b + c right of the knot at hi
        c = wy - lam
        hi = right
        while hi > left and -a * kx[hi] - c >= lam:
            a += ka[hi]
            c += kb[hi]
            hi -= 1
        tp = (lam + c) / -a
        right = hi + 1
        kx[right] = tp
        ka[right] = a
        kb[right] = c + lam
        x[k] = tm
        u[k] = tp
    a = w[n - 1]
    c = -w[n - 1] * y[n - 1] - lam
    lo = left
    while lo <= right and a * kx[lo] + c <= 0.0:
        a += ka[lo]
        c += kb[lo]
        lo += 1
    b = -c / a
    x[n - 1] = b
    for k in range(n - 2, -1, -1):
        if b > u[k]:
            b = u[k]
        elif b < x[k]:
            b = x[k]
        x[k] = b
    # the levels from segment sums, and the dual
    k0 = 0
    u_in = 0.0
    while k0 < n:
        k1 = k0
        while k1 + 1 < n and x[k1 + 1] == x[k0]:
            k1 += 1
        u_out = 0.0
        if k1 + 1 < n:
            u_out = -lam if x[k1 + 1] > x[k0] else lam
        sw = w[k0]
        sy = w[k0] * y[k0]
        for i in range(k0 + 1, k1 + 1):
            sw += w[i]
            sy += w[i] * y[i]
        v = (sy + u_in - u_out) / sw
        acc = u_in
        for i in range(k0, k1 + 1):
            x[i] = v
            acc += w[i] * (y[i] - v)
            u[i] = acc
        u_in = u_out
        k0 = k1 + 1


UNLIMITED = 2**62  # a slack the scan never exhausts (it makes fewer than n² advances)


def _certified(lam: float, x: Any, u: Any, scale: float, jump: float) -> bool:
    """Whether ``(x, u)`` from a dynamic programme (``u`` on the ``n − 1`` edges, or with
    the final residual after them) meets the KKT conditions its recomputed levels do not
    impose by construction: ``|u| ≤ λ``, and ``u_k = −λ·sign(x_{k+1} − x_k)`` on every
    jump larger than ``jump`` (``Dᵀu = W(y − x)`` holds inside each run by construction,
    and across a jump exactly when the dual arrives at the ``±λ`` the next run starts
    from), each to the rounding of a sum along its run: ``scale·(1e-12 + 8·eps·L)`` at the
    ``L``-th sample of a run (``scale = λ + max|w·y|``).  A wrong segmentation breaks one
    of them; smaller jumps may have either sign (on exact ties the programme can split a
    run in two whose recomputed levels then differ by a rounding, either way: harmless,
    ``λ·|jump|`` to the objective).  One pass; compiled with the kernels."""
    run = 1
    for k in range(len(x) - 1):
        tol = scale * (1e-12 + 8 * 2.220446049250313e-16 * run)
        run += 1
        if abs(u[k]) > lam + tol:
            return False
        d = x[k + 1] - x[k]
        if d > jump:
            run = 1
            if u[k] > tol - lam:
                return False
        elif d < -jump:
            run = 1
            if u[k] < lam - tol:
                return False
    return True


def _fallback(dp: Any, scan: Any, data: tuple, lam: float, x: Any, u: Any, wy: Any) -> None:
    """Fill ``x``, ``u`` by the dynamic programme ``dp(*data, lam, x, u, scratch…)`` and
    check the answer (:func:`_certified`; jumps of up to 1e-9 of ``max|y|`` may have either
    sign: the levels lie within the data's range); if it fails (or the programme divides
    by zero, on knots cancelled to 0 by extreme weights), by the scan
    ``scan(*data, lam, x, u, …)`` run to the end.  ``data``: ``(y,)`` or ``(y, w)``."""
    n = len(x)
    check = _certified if isinstance(x, list) else _kernels()[4]
    new = (lambda size: [0.0] * size) if isinstance(x, list) else np.empty
    try:
        dp(*data, lam, x, u, new(2 * n), new(2 * n), new(2 * n))
        scale = lam + float(np.abs(wy).max())
        if check(lam, x, u, scale, 1e-9 * float(np.abs(data[0]).max())):
            return
    except ZeroDivisionError:
        pass
    scan(*data, lam, x, u, 0, UNLIMITED)


# The scan's allowance: BUDGET advances per sample reached, plus SLACK.  At 10⁶
# samples it makes 0.3-2.3 advances per sample on noisy steps, 6-8 on a random walk or a
# noisy ramp at λ = 100, 34-385 on a noiseless ramp or sine at λ ≤ 1, where the dynamic
# programme (1.5-3x slower than the scan on noisy signals) is the faster one.  (Measured
# without weights; the weighted scan gets the same allowance.)  A negative SLACK hands
# every signal to the programme (tests, benchmarks).
BUDGET = 5
SLACK = 10_000

_PYTHON = (_condat, _condat_unit, _dp_weighted, _dp_unit, _certified)  # plain loops, lists
_compiled: Any = None  # the kernels as _PYTHON lists them once chosen: numba's, else _PYTHON
_rows_compiled: Any = None  # _scan_rows compiled (numba only)
# the unit scan that _scan_rows calls: numba resolves this global when it compiles
# _scan_rows, so it is set to the compiled kernel first (_kernels)
_scan_unit_kernel: Any = _condat_unit


def _scan_rows(y: Any, lam: float, x: Any, rate: int, slack: int, done: Any) -> None:
    """:func:`_condat_unit` without its dual on every row of the C-contiguous 2-D arrays
    (``done[f]``: whether row ``f``'s scan finished within its allowance; the others are
    finished by :func:`_fallback`, as :func:`tv1d` does).  Compiled only: one call for all
    the fibres of a product (:mod:`._fibres`) instead of one Python call per fibre."""
    for f in range(y.shape[0]):
        done[f] = _scan_unit_kernel(y[f], lam, x[f], None, rate, slack)


def _kernels() -> Any:
    """The kernels, compiled by numba on first use when it is installed (``cache=True``:
    later processes load the machine code from ``__pycache__`` instead of compiling)."""
    global _compiled, _rows_compiled, _scan_unit_kernel
    if _compiled is None:
        if _numba is None:
            _compiled = _PYTHON
        else:
            jit = _numba.njit(cache=True, nogil=True)
            _compiled = tuple(jit(f) for f in _PYTHON)
            _scan_unit_kernel = _compiled[1]
            _rows_compiled = jit(_scan_rows)
    return _compiled


def tv1d(
    y: np.ndarray, lam: float, weight: np.ndarray | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """``(x, u)``: the 1-D TV solution of ``y`` at ``lam ≥ 0`` and its dual flow on the
    ``n − 1`` edges ``(k, k+1)`` (segment-wise prefix sums of ``w·(y − x)``, restarted at
    the exact ``±λ`` after every jump; :func:`_condat`).  ``weight`` (positive, one per
    sample; default 1) weights the fidelity:
    ``argmin_x ½ Σ w_k (y_k − x_k)² + λ Σ |x_{k+1} − x_k|``.

    One pass of the kernel writes both (no temporaries; a contiguous float64 ``y`` is not
    copied).  Without ``weight`` a kernel with no weight array runs, and hands over to the
    linear-time dynamic programme when the scan works too hard (module doc), whose answer
    is checked (:func:`_certified`; if it fails, the scan runs to the end); the same with
    ``weight``."""
    y = np.ascontiguousarray(y, dtype=np.float64).ravel()
    n = y.size
    w = None if weight is None else np.ascontiguousarray(weight, dtype=np.float64).ravel()
    if w is not None and w.size != n:
        raise ValueError(f"tv1d: {w.size} weights for {n} samples")
    lam = float(lam)
    if lam <= 0.0 or n < 2:
        return y.copy(), np.zeros(max(n - 1, 0))
    kernels = _kernels()
    ys: list[float] | np.ndarray
    ws: list[float] | np.ndarray | None
    xs: list[float] | np.ndarray
    us: list[float] | np.ndarray
    if kernels is _PYTHON:  # lists: about 3x faster than arrays element by element
        scan, scan_unit, dp, dp_unit = _condat, _condat_unit, _dp_weighted, _dp_unit
        ys, ws, xs, us = y.tolist(), None if w is None else w.tolist(), [0.0] * n, [0.0] * n
    else:
        scan, scan_unit, dp, dp_unit = kernels[:4]
        ys, ws, xs, us = y, w, np.empty(n), np.empty(n)
    if ws is None:
        if not scan_unit(ys, lam, xs, us, BUDGET, SLACK):
            _fallback(dp_unit, scan_unit, (ys,), lam, xs, us, y)
    elif not scan(ys, ws, lam, xs, us, BUDGET, SLACK):
        assert w is not None  # ws is None exactly when w is
        _fallback(dp, scan, (ys, ws), lam, xs, us, w * y)
    x, u = np.asarray(xs, dtype=np.float64), np.asarray(us, dtype=np.float64)
    return x, u[:-1]


def tv1d_rows(y: np.ndarray, lam: float, x: np.ndarray | None = None) -> np.ndarray:
    """The solutions :func:`tv1d` (unweighted) gives for the rows of the C-contiguous float64
    ``F × L`` array ``y`` (``L ≥ 2``, ``lam > 0``), written into ``x`` if given; without
    their duals (:func:`._fibres.certificate` rebuilds them).  Row by row the same kernels
    as :func:`tv1d`, so each row is exactly :func:`tv1d`'s solution; with numba one compiled
    loop over the rows (:func:`_scan_rows`), the rare rows whose scan gives up finished by
    the dynamic programme (:func:`_fallback`)."""
    lam = float(lam)
    n_rows, length = y.shape
    if x is None:
        x = np.empty((n_rows, length))
    kernels = _kernels()
    if kernels is _PYTHON:
        for f in range(n_rows):
            x[f] = tv1d(y[f], lam)[0]
        return x
    done = np.empty(n_rows, dtype=np.bool_)
    _rows_compiled(y, lam, x, BUDGET, SLACK, done)
    if not done.all():
        scan_unit, dp_unit = kernels[1], kernels[3]
        u = np.empty(length)  # the programme's scratch
        for f in np.flatnonzero(~done).tolist():
            _fallback(dp_unit, scan_unit, (y[f],), lam, x[f], u, y[f])
    return x
