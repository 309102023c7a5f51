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
sample).  Without weights, the scan therefore stops once it has made more than ``BUDGET``
advances per sample reached (plus ``SLACK``), and Johnson's dynamic programme, O(n) on any
signal, finds the segmentation instead; the levels are then set from segment sums exactly
as the scan sets them (:func:`_dp_unit`).

The dual point comes with the solution: with ``D`` the chain's incidence (row ``k`` =
``1_k − 1_{k+1}``), ``Dᵀu = W(y − x)`` holds for the sums ``u_k = u_in + Σ w_i(y_i − x_i)``
over each segment up to ``k``, restarted at the exact ``u_in = −λ·sign`` of the jump that
starts the segment (0 at the signal's start); they lie in ``[−λ, λ]`` at the optimum to
rounding, and the caller certifies the gap with them.  The kernel writes them as it writes
``x``: no second pass, no temporaries.

Compiled with numba when it is installed (``cache=True``), else plain Python on lists.
``benchmarks/bench_tv1d.py`` times it against prox_tv's C++ (``tv1_1d``): on 10⁶ noisy
samples both take about the same time (medians within 0.9–1.1× of each other in one run on
a loaded box), and the plain loops are 30–80× slower.
"""

from __future__ import annotations

from typing import Any

import numpy as np

__all__ = ["tv1d"]

try:
    import numba as _numba
except ImportError:  # pragma: no cover - exercised in environments without numba
    _numba = None


def _condat(y: Any, w: Any, lam: float, x: Any, u: Any) -> None:
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
    segment's rounding: no error accumulates along the chain)."""
    n = len(y)
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
                return
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
            return
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
    the same operations otherwise, so the same result to the last bit; True when done,
    False (``x`` and ``u`` partly written) as soon as its advances exceed ``rate·k + slack``
    at sample ``k`` (at once if ``slack < 0``): the sign of a smooth stretch with a large λ,
    on which the restarts rescan long look-aheads (a ramp of slope ``s`` costs about
    ``2√(λ/s)`` advances per sample).  Checking against the position reached rather than
    against ``n`` gives up early in such a stretch, before much work is wasted."""
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


UNLIMITED = 2**62  # a slack the scan never exhausts (it makes fewer than n² advances)


def _certified(y: Any, lam: float, x: Any, u: Any) -> bool:
    """Whether ``(x, u)`` from :func:`_dp_unit` (``u`` on the ``n − 1`` edges) meets the KKT
    conditions its recomputed levels do not impose by construction, to 1e-9 of
    ``λ + max|y|``: ``|u| ≤ λ``, and ``u_k = −λ·sign(x_{k+1} − x_k)`` on every jump
    (``Dᵀu = y − x`` holds inside each run by construction, and across a jump exactly when
    the dual arrives at the ``±λ`` the next run starts from).  A wrong segmentation, which
    rounding in the programme's intercepts could cause in principle (never seen), breaks
    one of them.  One pass; compiled with the kernels."""
    n = len(y)
    big = 0.0
    for i in range(n):
        big = max(big, abs(y[i]))
    tol = 1e-9 * (lam + big)
    for k in range(n - 1):
        if abs(u[k]) > lam + tol:
            return False
        if x[k + 1] > x[k] and u[k] > tol - lam:
            return False
        if x[k + 1] < x[k] and u[k] < lam - tol:
            return False
    return True


# The unweighted scan's allowance: BUDGET advances per sample reached, plus SLACK.  At 10⁶
# samples it makes 0.3-2.3 advances per sample on noisy steps, 6-8 on a random walk or a
# noisy ramp at λ = 100, 34-385 on a noiseless ramp or sine at λ ≤ 1, where the dynamic
# programme (1.5-3x slower than the scan on noisy signals) is the faster one.  A negative
# SLACK hands every signal to the programme (tests, benchmarks).
BUDGET = 5
SLACK = 10_000

_PYTHON = (_condat, _condat_unit, _dp_unit, _certified)  # the plain loops, on lists
_compiled: Any = None  # (weighted, unit, DP, check) kernels once chosen: numba's, else _PYTHON


def _kernels() -> Any:
    """The kernels, compiled by numba on first use when it is installed (``cache=True``:
    later processes load the machine code from ``__pycache__`` instead of compiling)."""
    global _compiled
    if _compiled is None:
        if _numba is None:
            _compiled = _PYTHON
        else:
            jit = _numba.njit(cache=True, nogil=True)
            _compiled = (jit(_condat), jit(_condat_unit), jit(_dp_unit), jit(_certified))
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
    is checked (:func:`_certified`; if it failed, the scan would run to the end); with
    ``weight`` the scan runs to the end (quadratic at worst)."""
    y = np.ascontiguousarray(y, dtype=np.float64).ravel()
    n = y.size
    w = None if weight is None else np.ascontiguousarray(weight, dtype=np.float64).ravel()
    if w is not None and w.size != n:
        raise ValueError(f"tv1d: {w.size} weights for {n} samples")
    lam = float(lam)
    if lam <= 0.0 or n < 2:
        return y.copy(), np.zeros(max(n - 1, 0))
    kernels = _kernels()
    new: Any
    if kernels is _PYTHON:  # lists: about 3x faster than arrays element by element
        weighted, unit, dp, check = _condat, _condat_unit, _dp_unit, _certified
        ys, ws = y.tolist(), None if w is None else w.tolist()

        def new(size: int) -> list[float]:
            return [0.0] * size
    else:
        (weighted, unit, dp, check), ys, ws, new = kernels, y, w, np.empty
    xs, us = new(n), new(n)
    if ws is not None:
        weighted(ys, ws, lam, xs, us)
    elif not unit(ys, lam, xs, us, BUDGET, SLACK):
        dp(ys, lam, xs, us, new(2 * n), new(2 * n), new(2 * n))
        if not check(ys, lam, xs, us):
            unit(ys, lam, xs, us, 0, UNLIMITED)  # (never seen) the scan, to the end
    x, u = np.asarray(xs, dtype=np.float64), np.asarray(us, dtype=np.float64)
    return x, u[:-1]
