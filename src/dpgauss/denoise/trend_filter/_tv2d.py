"""Order-0 trend filtering on an ``H × W`` lattice: accelerated alternating 1-D TV solves.

The problem is anisotropic 2-D total variation denoising,

    β̂ = argmin_β ½‖y − β‖² + h₁(β) + h₂(β),   h₁ = λ Σ_rows TV,   h₂ = λ Σ_columns TV,

with ``TV(x) = Σ_k |x_{k+1} − x_k|`` on each row (column).  Its dual, in the images
``p = D_hᵀu_h`` and ``q = D_vᵀu_v`` of the row and column edge flows (``|u| ≤ λ``), is

    min_{p, q} ½‖y − p − q‖² + h₁*(p) + h₂*(q),     β̂ = y − p̂ − q̂.

Minimising over ``p`` in closed form, ``p(q) = prox_{h₁*}(y − q) = (y − q) − x₁(q)`` with
``x₁(q) = prox_{h₁}(y − q)`` (1-D TV of every row), leaves ``min_q E(q) + h₂*(q)`` where
``E`` is smooth with ``∇E(q) = −x₁(q)``, 1-Lipschitz.  FISTA with step 1 on it (Beck &
Teboulle 2009) is the *accelerated alternating minimisation* of Chambolle & Pock, "A
remark on accelerated block coordinate descent for computing the proximity operators of
a sum of convex functions", SMAI J. Comput. Math. 1 (2015), also studied by Kolmogorov,
Pock & Rolinek, "Total variation on a tree", SIAM J. Imaging Sci. 9(2), 2016 (rows and
columns are two forests of chains)::

    x₁ = TV_rows(y − q̄)                       (p = y − q̄ − x₁ = D_hᵀu_h)
    x₂ = TV_columns(q̄ + x₁),  q⁺ = q̄ + x₁ − x₂  (= D_vᵀu_v = prox_{h₂*}(q̄ − ∇E(q̄)))
    q̄ ← q⁺ + (t − 1)/t⁺ (q⁺ − q),  t⁺ = (1 + √(1 + 4t²)) / 2

with the gradient restart of O'Donoghue & Candès (Found. Comput. Math. 15, 2015): the
momentum is reset whenever ``(q̄ − q⁺)·(q⁺ − q) > 0``.  Every 1-D TV solve is exact, on a
contiguous copy of the row or column, and its dual flow (prefix sums of ``input − output``)
lies in ``[−λ, λ]``.

Warm 1-D solves (:func:`_line`).  Between iterations a row's input changes little, and so
does its segmentation: each 1-D solve records its jump signs (an ``int8`` per edge, rows
and columns apart), and the next solve of that line *verifies* the recorded segments
instead of searching for them — a segment's level follows from its ends, and it is optimal
if its running dual stays in ``[−λ, λ]`` and its jump has the recorded sign (the KKT
conditions of 1-D TV are local).  Where a segment fails, the direct algorithm of Condat
(2013, as in :mod:`._tv1d`, unweighted) scans from its left end until it ends a segment
where a jump of the same sign was recorded, and the verification resumes there.  The
result is the exact solution either way (tested against the cold scan from any sign
record).  Measured on the 300 × 300 benchmark image at λ ≈ 1: from iteration 20 a row or
column pass costs 0.3–0.45 of a cold pass (the scan covers 5–20 % of the samples); on the
1000 × 1000 one at λ ≈ 1.56 (longer segments, the scan 30–45 %) about 0.5.  The signs of
the last λ start the next λ of a path.

Memory.  At 10⁶ pixels an iteration is mostly memory traffic: the momentum step is fused
into the row pass (``q̄`` is never stored), the update of ``q`` and the restart test into
the column pass, and the columns go 8 at a time (one cache line of each row) through
contiguous buffers (one at a time, the column pass cost 1.6–1.8× the row pass at
1000 × 1000; blocked, 1.0–1.25×).

Certificate.  ``u = (u_h, u_v)`` of one iteration is dual feasible with
``Dᵀu = p + q⁺ = y − x₂``, so for any candidate β

    P(β) − D(u) = λ‖Dβ‖₁ − (Dβ)ᵀu + ½‖δ‖²,   δ = y − β − Dᵀu                  (*)

(expand ``½‖y − β‖² + λ‖Dβ‖₁ − ½‖y‖² + ½‖y − Dᵀu‖²``), evaluated without cancellation
(both parts are ≥ 0).  Candidates: ``x₂`` (δ = 0) and the *polished* solution for the
support the iterates show — rows fused where ``x₁`` is fused along the rows, columns where
``x₂`` is fused along the columns, signs of their jumps — whose value on each fused group
``G`` is ``mean_G(y − λDᵀs)`` (Hoefling 2010).  At the optimum ``x₁ = x₂ = β̂`` (each is a
prox at the optimal dual), so on non-degenerate problems the supports, and with them the
polished solution, are eventually exact; the iteration stops when a candidate's
relative gap (*) is ``≤ tol`` (or is rounding only: below ``1e-13`` times the magnitudes of
its terms plus ``‖Dβ‖₁·max|y|``, as with tiny λ, where ``P`` itself is tiny while the
flows, prefix sums of differences of ``O(|y|)`` numbers, are rounded relative to ``|y|``).
``x₂`` is evaluated only at ``max_iter`` (the fallback when the polish never certifies).
A polish kept from an earlier check that a later, better dual bound certifies also ends
the iteration.

A certificate (flows, union-find of the fused groups, the polish, (*)) streams over the
image once plus two passes for the groups, and costs about one late iteration at
300 × 300, 0.7 at 1000 × 1000.  Checks are scheduled from the gap's decay: the first at
iteration 1, then where the geometric decay measured since a check at least 8 iterations
back (or the first) would reach ``tol``, between 1 and ``CHECK_MOST`` iterations ahead.
The polished gap falls in steps (a support fixed) more than geometrically, so the
schedule overshoots by a few iterations; on 8 λ from 0.3 to 16 on the 300 × 300 image,
caps of 4, 6, 8, 10, 14 iterations cost 303–326 iterations and 85–51 checks, within 4 %
of each other counting a check as one iteration.

Start.  Cold: ``q₀ = ½(y − TV_columns(y))``, half the dual image of the columns-only
problem (the residual ``y − β̂`` is shared by the rows and the columns; measured on a
300 × 300 image, it reached a given support error in about 20 % fewer iterations than
``q₀ = 0`` or the full column dual).  Along a λ path: ``q`` of the last λ as it is
(unless the last λ was more than twice larger), and its jump signs; on the default 20-λ
SURE path of a 300 × 300 image this took 472 iterations in all, against 584 with ``q``
scaled by the ratio of the λ and 528 from cold starts (before the schedule of checks
above; now 459).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..._optional import install_hint

__all__ = ["LatticeTV", "available"]

try:
    import numba as _numba
except ImportError:  # pragma: no cover - exercised in environments without numba
    _numba = None  # type: ignore[assignment]  # a module or None: callers test for None

# A warm start from a λ more than 1/COLD_BELOW times larger is replaced by the cold start
# (one λ far below λ_max, blocks + N(0, 1) on 300 × 300, λ = 1: 72 iterations from the
# least-norm dual scaled by the λ ratio against 60 cold; on the default SURE path
# consecutive λ are 0.7 apart).
_COLD_BELOW = 0.5
# The second check comes CHECK_EVERY iterations after the first; later ones between 1 and
# CHECK_MOST iterations ahead, from the gap's decay (module doc).
_CHECK_EVERY = 4
_CHECK_MOST = 10
BLOCK = 8  # columns per gather (one 64-byte cache line of doubles)
RETREATS = 8  # wrong jump signs one warm 1-D solve mends locally before a cold scan
_WARM_SIGNS = True  # a λ of a path starts its 1-D solves from the last λ's jump signs
# A gap below ROUNDING × (the magnitudes of its terms, and ‖Dβ‖₁·max|y|: the flows are sums
# of differences of O(|y|) numbers, so (Dβ)ᵀu carries rounding of that size) is rounding.
_ROUNDING = 1e-13


def available() -> bool:
    """Whether the compiled lattice solver can run (it needs numba)."""
    return _numba is not None


def _line(src: Any, n: int, lam: float, dst: Any, sg: Any, warm: bool) -> None:
    """The 1-D TV solution of ``src[:n]`` at ``lam`` into ``dst[:n]``, exact, with its jump
    signs in ``sg[:n−1]`` (``sg[k] = sign(dst[k] − dst[k+1])``: +1, −1, or 0 where fused).

    Cold (``warm`` false): Condat's direct algorithm (as :func:`._tv1d._condat_unit`).
    Warm: ``sg`` holds the signs of a previous solution (the last iteration's, of a nearby
    input), and the segments it describes are *verified* left to right instead of
    searched for.  A segment ``[k₀, e]`` entered with the dual ``u₀`` (0 at the start,
    ``±λ`` after a jump) and ending with the sign ``s`` has the level
    ``v = (Σ_{k₀..e} src + u₀ − sλ) / (e − k₀ + 1)`` (its dual at ``e`` is then ``sλ``);
    it is optimal given its left end if its running dual ``u₀ + Σ_{k₀..k}(src − v)`` stays
    in ``[−λ, λ]`` and its jump from the previous level has the recorded sign (the KKT
    conditions of 1-D TV are local: the box on each segment, the signs of the jumps).
    At the first segment that fails the box, Condat's scan takes over from its left end
    with its ``u₀`` (the scan's segments are final: the solution right of a jump with dual
    ``±λ`` is that of the sub-signal with ``u₀ = ±λ``), and hands back to the verification
    as soon as it ends a segment where ``sg`` recorded a jump of the same sign.  Where a
    jump has the wrong sign (a level on the wrong side of its predecessor), the scan
    restarts at the predecessor's left end (a failure there: at the one before; after
    ``RETREATS`` such restarts, or with no predecessor known, the whole line is scanned
    cold).  Every path ends with the KKT conditions met, so the result is the exact
    solution either way (a verified level is computed with the very operations the scan
    would use); near convergence of the alternating iteration most segments persist, and
    a verification is a branch-free sum and running min/max instead of the scan's
    unpredictable branches.

    Always called on contiguous buffers: with an offset and a stride as arguments the
    compiled loop measured about 3x slower."""
    k0 = 0  # the current segment's left end, and the dual on the edge before it
    u0 = 0.0
    v_prev = 0.0  # the level of the segment before, and the sign of the jump after it
    s_prev = 0
    kp = -1  # that segment's left end (−1: unknown) and entry dual, the level and sign before
    up = 0.0
    v_pp = 0.0
    s_pp = 0
    kpp = -1  # the same for the segment before that
    upp = 0.0
    v_ppp = 0.0
    s_ppp = 0
    retreats = 0  # at most RETREATS, then the line is scanned cold
    verify = warm
    check_first = False  # the scan's first level must be on the recorded side of v_prev
    hold = False  # no verification after the scan's first segment (after a wrong sign)
    down = False
    end = 0
    while True:
        retreat = False
        if verify:
            e = k0  # the segment's end (the next recorded jump) and its sum
            sy = src[k0]
            while e < n - 1 and sg[e] == 0:
                e += 1
                sy += src[e]
            s = sg[e] if e < n - 1 else 0
            v = (sy + u0 - s * lam) / (e - k0 + 1)
            if s_prev * (v_prev - v) < 0.0:
                retreat = True
            else:
                acc = u0  # the running dual, its range; the level written meanwhile
                lo = 0.0
                hi = 0.0
                for i in range(k0, e):
                    acc += src[i] - v
                    lo = min(lo, acc)
                    hi = max(hi, acc)
                    dst[i] = v
                dst[e] = v
                if hi <= lam and lo >= -lam:
                    if e == n - 1:
                        return
                    kpp, upp, v_ppp, s_ppp = kp, up, v_pp, s_pp
                    kp, up, v_pp, s_pp = k0, u0, v_prev, s_prev
                    v_prev = v
                    s_prev = s
                    u0 = s * lam
                    k0 = e + 1
                    continue
                verify = False
                check_first = s_prev != 0
        if not retreat:
            # Condat's scan from k0 with the dual u0 on the edge before it
            k = k_lo = k_hi = k0
            sw = 1.0
            sy = src[k0]
            v_lo = sy + u0 - lam
            v_hi = sy + u0 + lam
            u_lo = lam
            u_hi = -lam
            while True:
                at_end = k == n - 1
                if at_end:
                    if u_lo < 0.0:
                        down, end = True, k_lo
                    elif u_hi > 0.0:
                        down, end = False, k_hi
                    else:
                        v = (sy + u0) / sw  # the final segment, dual 0 at the end
                        if check_first and s_prev * (v_prev - v) < 0.0:
                            retreat = True
                            break
                        for i in range(k0, n):
                            dst[i] = v
                        for i in range(k0, n - 1):
                            sg[i] = 0
                        return
                else:
                    yk = src[k + 1]
                    d_lo = u_lo + (yk - v_lo)
                    d_hi = u_hi + (yk - v_hi)
                    if d_lo < -lam:
                        down, end = True, k_lo
                    elif d_hi > lam:
                        down, end = False, k_hi
                    else:
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
                if check_first and s_prev * (v_prev - v) < 0.0:
                    retreat = True
                    break
                check_first = False
                s = 1 if down else -1
                for i in range(k0, end + 1):
                    dst[i] = v
                for i in range(k0, end):
                    sg[i] = 0
                resync = warm and not hold and sg[end] == s
                hold = False
                sg[end] = s
                kpp, upp, v_ppp, s_ppp = kp, up, v_pp, s_pp
                kp, up, v_pp, s_pp = k0, u0, v_prev, s_prev
                v_prev = v
                s_prev = s
                k = k0 = end + 1
                u0 = s * lam
                if resync:
                    verify = True
                    break
                sw = 1.0
                sy = src[k]
                if down:
                    k_lo = k
                    v_lo = src[k]
                    u_lo = lam
                    if at_end:  # keep the high bound (Condat's end-of-signal restart)
                        u_hi = lam + (src[k] - v_hi)
                    else:
                        k_hi = k
                        v_hi = sy + 2.0 * lam
                        u_hi = -lam
                else:
                    k_hi = k
                    v_hi = src[k]
                    u_hi = -lam
                    if at_end:
                        u_lo = -lam + (src[k] - v_lo)
                    else:
                        k_lo = k
                        v_lo = sy - 2.0 * lam
                        u_lo = lam
        if retreat:
            # a jump of the wrong sign: scan again from the segment before it (checked
            # against its own predecessor; one more failure there, from the one before)
            if kp >= 0 and retreats < RETREATS:
                retreats += 1
                k0, u0, v_prev, s_prev = kp, up, v_pp, s_pp
                kp, up, v_pp, s_pp = kpp, upp, v_ppp, s_ppp
                kpp = -1
                check_first = s_prev != 0
                hold = True
            else:
                k0, u0, s_prev, warm, check_first = 0, 0.0, 0, False, False
            verify = False


def _columns(a: Any, h: int, w: int, lam: float, out: Any, col: Any, res: Any, sg: Any) -> None:
    """Cold 1-D TV of every column of ``a`` into ``out``, through contiguous buffers ``col``
    and ``res`` of length ``h``; the jump signs of column ``j`` into ``sg[j(h−1):(j+1)(h−1)]``."""
    for j in range(w):
        for i in range(h):
            col[i] = a[i * w + j]
        _line(col, h, lam, res, sg[j * (h - 1) : (j + 1) * (h - 1)], False)
        for i in range(h):
            out[i * w + j] = res[i]


def _row_sweep(
    y: Any,
    q: Any,
    q_old: Any,
    mom: float,
    h: int,
    w: int,
    lam: float,
    x1: Any,
    store: bool,
    a: Any,
    buf: Any,
    res: Any,
    sg: Any,
    warm: bool,
) -> None:
    """One pass over the rows: ``q̄ = q + mom·(q − q_old)`` (not stored), ``x₁ =
    TV_rows(y − q̄)`` (stored only if ``store``) and ``a = q̄ + x₁``, each row through the
    contiguous buffers ``buf``, ``res``: on a 10⁶-pixel image an iteration is largely
    memory traffic, so every image read or written counts.  ``sg`` holds the rows' jump
    signs (row ``i`` at ``i(w−1)``), verified if ``warm`` (:func:`_line`)."""
    for i in range(h):
        o = i * w
        for j in range(w):
            k = o + j
            buf[j] = y[k] - (q[k] + mom * (q[k] - q_old[k]))
        _line(buf, w, lam, res, sg[i * (w - 1) : (i + 1) * (w - 1)], warm)
        for j in range(w):
            k = o + j
            if store:
                x1[k] = res[j]
            a[k] = y[k] - buf[j] + res[j]


def _column_sweep(
    a: Any,
    q: Any,
    q_old: Any,
    mom: float,
    h: int,
    w: int,
    lam: float,
    x2: Any,
    store: bool,
    col: Any,
    res: Any,
    sg: Any,
    warm: bool,
) -> float:
    """One pass over the columns: ``x₂ = TV_columns(a)`` (stored only if ``store``) and
    ``q⁺ = a − x₂`` written over ``q_old`` (the caller swaps the two).  Returns the restart
    test ``(q̄ − q⁺)·(q⁺ − q)``, with ``q̄ = q + mom·(q − q_old)`` recomputed.  ``sg``: the
    columns' jump signs (column ``j`` at ``j(h−1)``).

    The columns go ``BLOCK`` at a time through the contiguous buffers ``col`` and ``res``
    (``BLOCK·h`` each): a gather or scatter then uses whole cache lines of the row-major
    images (at 1000 × 1000, one column at a time measured 1.5–2x slower, the strided
    lines evicted before their neighbours came for them)."""
    restart = 0.0
    for j0 in range(0, w, BLOCK):
        nb = min(BLOCK, w - j0)
        for i in range(h):
            o = i * w + j0
            for b in range(nb):
                col[b * h + i] = a[o + b]
        for b in range(nb):
            j = j0 + b
            _line(
                col[b * h : (b + 1) * h],
                h,
                lam,
                res[b * h : (b + 1) * h],
                sg[j * (h - 1) : (j + 1) * (h - 1)],
                warm,
            )
        for i in range(h):
            o = i * w + j0
            for b in range(nb):
                k = o + b
                qk = q[k]
                qb = qk + mom * (qk - q_old[k])
                qn = col[b * h + i] - res[b * h + i]
                restart += (qb - qn) * (qn - qk)
                q_old[k] = qn
                if store:
                    x2[k] = res[b * h + i]
    return restart


def _find(parent: Any, i: int) -> int:
    """The root of ``i``'s set, halving the path on the way."""
    while parent[i] != i:
        nxt = parent[parent[i]]
        parent[i] = nxt
        i = nxt
    return i


def _gap(
    y: Any, h: int, w: int, lam: float, b: Any, uh: Any, uv: Any, dtu: Any, y_max: float, out: Any
) -> None:
    """``out[:3] = [P(b), gap (*) of b against the flows uh, uv (Dᵀu = dtu), its rounding
    allowance]``, in one pass over the image."""
    tv = 0.0
    inner = 0.0
    rss = 0.0
    dd = 0.0
    for i in range(h):
        for j in range(w):
            a = i * w + j
            bk = b[a]
            if j < w - 1:
                d = bk - b[a + 1]
                tv += abs(d)
                inner += d * uh[i * (w - 1) + j]
            if i < h - 1:
                d = bk - b[a + w]
                tv += abs(d)
                inner += d * uv[a]
            r = y[a] - bk
            rss += r * r
            e = r - dtu[a]
            dd += e * e
    out[0] = 0.5 * rss + lam * tv
    out[1] = lam * tv - inner + 0.5 * dd
    out[2] = _ROUNDING * (lam * tv + abs(inner) + 0.5 * dd + tv * y_max)


def _certify(
    y: Any,
    h: int,
    w: int,
    lam: float,
    x1: Any,
    x2: Any,
    a_img: Any,
    q_img: Any,
    uh: Any,
    uv: Any,
    dtu: Any,
    colsum: Any,
    parent: Any,
    sums: Any,
    counts: Any,
    pol: Any,
    both: bool,
    out: Any,
) -> None:
    """The dual point of one iteration and the gaps (*) of the polished solution (written
    to ``pol``) and, if ``both``, of ``x₂``.  ``out`` receives ``[P(x₂), gap(x₂), P(pol),
    gap(pol), number of fused groups of the support, rounding allowances of the two]``
    (``inf`` for ``x₂`` when not evaluated).  Streams over the rows: on a 10⁶-pixel image
    a certificate is memory traffic, about three iterations' worth."""
    y_max = 0.0
    for k in range(h * w):
        y_max = max(y_max, abs(y[k]))
    # u_h: prefix sums of p = y − a along each row; u_v: prefix sums of q down each column
    # (running sums colsum), both clipped to the box against rounding; Dᵀu from the
    # clipped flows.  Support: rows fused where x₁ is (each run's first pixel its root),
    # columns where x₂ is (union-find, the smaller root kept); pol accumulates the polish
    # target y − λDᵀs.
    for j in range(w):
        colsum[j] = 0.0
    for i in range(h):
        o = i * w
        s = 0.0
        for j in range(w):
            k = o + j
            v = 0.0
            if j < w - 1:
                s += y[k] - a_img[k]
                v = min(max(s, -lam), lam)
                uh[i * (w - 1) + j] = v
            if j > 0:
                v -= uh[i * (w - 1) + j - 1]
            if i < h - 1:
                colsum[j] += q_img[k]
                c = min(max(colsum[j], -lam), lam)
                uv[k] = c
                v += c
            if i > 0:
                v -= uv[k - w]
            dtu[k] = v
            pol[k] = y[k]
            if j > 0 and x1[k - 1] == x1[k]:
                parent[k] = parent[k - 1]
            else:
                parent[k] = k
                if j > 0:
                    sg = lam if x1[k - 1] > x1[k] else -lam
                    pol[k - 1] -= sg
                    pol[k] += sg
        if i > 0:
            for j in range(w):
                k = o + j
                if x2[k - w] == x2[k]:
                    ra = _find(parent, k - w)
                    rb = _find(parent, k)
                    if ra < rb:
                        parent[rb] = ra
                    elif rb < ra:
                        parent[ra] = rb
                else:
                    sg = lam if x2[k - w] > x2[k] else -lam
                    pol[k - w] -= sg
                    pol[k] += sg
    n = h * w
    groups = 0
    for k in range(n):  # a root precedes its set's other members
        r = _find(parent, k)
        if r == k:
            groups += 1
            sums[k] = 0.0
            counts[k] = 0.0
        parent[k] = r
        sums[r] += pol[k]
        counts[r] += 1.0
    for k in range(n):
        r = parent[k]
        pol[k] = sums[r] / counts[r]
    res = np.empty(3)
    _gap(y, h, w, lam, pol, uh, uv, dtu, y_max, res)
    out[2] = res[0]
    out[3] = res[1]
    out[6] = res[2]
    out[4] = groups
    if both:
        _gap(y, h, w, lam, x2, uh, uv, dtu, y_max, res)
        out[0] = res[0]
        out[1] = res[1]
        out[5] = res[2]
    else:
        out[0] = np.inf
        out[1] = np.inf
        out[5] = 0.0


def _iterate(
    y: Any,
    h: int,
    w: int,
    lam: float,
    q: Any,
    tol: float,
    max_iter: int,
    check_every: int,
    check_most: int,
    beta: Any,
    uh: Any,
    uv: Any,
    out: Any,
    sr: Any,
    sc: Any,
    warm: bool,
) -> None:
    """The accelerated alternating iteration (module doc) from ``q`` (updated in place) until
    a candidate's relative gap is ``≤ tol`` or ``max_iter`` iterations.  ``beta``, ``uh``,
    ``uv`` receive the best candidate and its dual point; ``out`` ``[objective, gap,
    iterations, polished (0/1), groups]``."""
    n = h * w
    q_in = q
    q = q_in.copy()  # q and q_old swap buffers every iteration; q_in gets the last q
    q_old = q_in.copy()  # so that the first q̄ is q
    a = np.empty(n)
    x1 = np.empty(n)
    x2 = np.empty(n)
    pol = np.empty(n)
    dtu = np.empty(n)
    sums = np.empty(n)
    counts = np.empty(n)
    parent = np.empty(n, dtype=np.int64)
    buf = np.empty(w)
    res_row = np.empty(w)
    col = np.empty(BLOCK * h)
    col_out = np.empty(BLOCK * h)
    uh_t = np.empty(h * (w - 1))
    uv_t = np.empty((h - 1) * w)
    colsum = np.empty(w)
    cert = np.empty(7)
    t = 1.0
    best_p = np.inf
    best_gap = np.inf
    best_d = -np.inf  # the best dual bound so far (FISTA's dual values are not monotone)
    out[2] = 0.0
    out[3] = 0.0
    out[4] = 0.0
    mom = 0.0
    next_check = 1
    seen_it = np.empty(max_iter + 1, dtype=np.int64)  # the checks so far, and their gaps
    seen_gap = np.empty(max_iter + 1)
    seen = 0
    for it in range(1, max_iter + 1):
        check = it == next_check or it == max_iter
        w_it = warm or it > 1
        _row_sweep(y, q, q_old, mom, h, w, lam, x1, check, a, buf, res_row, sr, w_it)
        # q⁺ = a − x2 (into q_old's buffer, then the two swap), the restart test (with q̄
        # recomputed) and the momentum of the next row sweep
        restart = _column_sweep(a, q, q_old, mom, h, w, lam, x2, check, col, col_out, sc, w_it)
        q, q_old = q_old, q
        if restart > 0.0:
            t = 1.0
        t_new = 0.5 * (1.0 + math.sqrt(1.0 + 4.0 * t * t))
        mom = (t - 1.0) / t_new
        t = t_new
        if check:
            last = it == max_iter  # x₂ is a candidate only then (the fallback)
            _certify(
                y, h, w, lam, x1, x2, a, q, uh_t, uv_t, dtu, colsum, parent, sums, counts, pol,
                last, cert,
            )  # fmt: skip
            d_now = cert[2] - cert[3]  # D(u) of this iteration's flows
            current = d_now >= best_d
            if current:  # the best dual bound so far: its flows are the ones returned
                best_d = d_now
                for k in range(uh.size):
                    uh[k] = uh_t[k]
                for k in range(uv.size):
                    uv[k] = uv_t[k]
            if best_p - best_d < best_gap:  # the kept candidate, against the better bound
                best_gap = max(best_p - best_d, 0.0)
                out[5] = 1.0 if best_gap <= tol * best_p else out[5]
            for c in range(0 if last else 1, 2):
                p_c = cert[2 * c]
                # (*) without cancellation for this iteration's flows, else P − best D
                g_c = max(cert[2 * c + 1], 0.0) if current else max(p_c - best_d, 0.0)
                # a gap within the rounding of its own terms is zero
                ok = g_c <= tol * p_c or (current and g_c <= cert[5 + c])
                # prefer the polished solution (exact support, exact df) once certified
                take = p_c < best_p if c == 0 else (ok or p_c < best_p)
                if take:
                    best_p = p_c
                    best_gap = g_c
                    src = x2 if c == 0 else pol
                    for k in range(n):
                        beta[k] = src[k]
                    out[3] = float(c)
                    out[4] = cert[4]
                    out[5] = 1.0 if ok else 0.0
            # done once the kept candidate is certified: by its own flows, or (an earlier
            # polish) by this iteration's better dual bound
            done = out[5] == 1.0
            out[0] = best_p
            out[1] = best_gap
            out[2] = it
            if done:
                break
            # the next check: where the gap's decay (geometric, per iteration, measured
            # since a check at least CHECK_EVERY + 4 iterations back, or the first) would
            # reach tol, within [1, check_most] iterations
            g = best_gap / best_p if best_p > 0.0 else 0.0
            seen_it[seen] = it
            seen_gap[seen] = g
            seen += 1
            ref = 0
            while ref + 1 < seen and seen_it[ref + 1] <= it - check_every - 4:
                ref += 1
            step = check_every
            if 0.0 < g < seen_gap[ref]:
                rate = math.log(g / seen_gap[ref]) / (it - seen_it[ref])
                ahead = math.log(tol / g) / rate if tol > 0.0 else float(check_most)
                step = check_most if ahead >= check_most else max(1, int(ahead))
            next_check = it + step
    for k in range(n):
        q_in[k] = q[k]


_compiled: Any = None


def _kernel() -> Any:
    global _compiled
    if _compiled is None:
        if _numba is None:
            raise ImportError("the lattice TV solver needs numba: " + install_hint("fast"))
        jit = _numba.njit(cache=True)
        g = globals()
        for name in ("_line", "_find", "_gap"):
            g[name] = jit(g[name])
        for name in ("_columns", "_row_sweep", "_column_sweep", "_certify"):
            g[name] = jit(g[name])
        _compiled = jit(_iterate)
    return _compiled


@dataclass
class LatticeFit:
    """One λ: the best candidate ``beta`` (polished if certified), its objective and
    absolute duality gap, the iterations, whether it is polished and whether its gap is
    certified (``≤ tol·objective``, or rounding, module doc), and the dual flows
    ``uh`` (``H × (W−1)``, horizontal edges) and ``uv`` (``(H−1) × W``)."""

    beta: np.ndarray
    objective: float
    gap: float
    iterations: int
    polished: bool
    certified: bool
    uh: np.ndarray
    uv: np.ndarray


class LatticeTV:
    """Order-0 trend filtering on an ``H × W`` lattice (module doc), warm-started along a
    path of λ; ``y`` is row-major (``H·W`` values)."""

    def __init__(self, y: np.ndarray, shape: tuple[int, int], tol: float, max_iter: int) -> None:
        h, w = shape
        if h < 2 or w < 2:
            raise ValueError(f"a lattice needs at least 2 rows and 2 columns; got {shape}")
        self.y = np.ascontiguousarray(y, dtype=np.float64).ravel()
        self.shape = (int(h), int(w))
        self.tol = float(tol)
        self.max_iter = int(max_iter)
        self.q: np.ndarray | None = None
        self.previous: float | None = None
        # the jump signs of the last rows' and columns' 1-D solutions (:func:`_line`)
        self.sr = np.zeros(self.shape[0] * (self.shape[1] - 1), dtype=np.int8)
        self.sc = np.zeros(self.shape[1] * (self.shape[0] - 1), dtype=np.int8)
        self.signs = False  # whether they are those of a previous solve

    def warm(self, q: np.ndarray, lam: float) -> None:
        """Start the next λ from the column dual image ``q`` known at ``lam``."""
        self.q = np.array(q, dtype=np.float64).ravel()
        self.previous = lam

    def solve(self, lam: float) -> LatticeFit:
        kernel = _kernel()
        h, w = self.shape
        if self.q is None or self.previous is None or lam < _COLD_BELOW * self.previous:
            x = np.empty_like(self.y)
            _columns(self.y, h, w, float(lam), x, np.empty(h), np.empty(h), self.sc)
            self.q = 0.5 * (self.y - x)
            self.signs = False
        self.previous = lam
        beta = np.empty(self.y.size)
        uh = np.empty(h * (w - 1))
        uv = np.empty((h - 1) * w)
        out = np.zeros(6)
        kernel(
            self.y,
            h,
            w,
            float(lam),
            self.q,
            self.tol,
            self.max_iter,
            _CHECK_EVERY,
            _CHECK_MOST,
            beta,
            uh,
            uv,
            out,
            self.sr,
            self.sc,
            self.signs and _WARM_SIGNS,
        )
        self.signs = True
        return LatticeFit(
            beta=beta,
            objective=float(out[0]),
            gap=float(out[1]),
            iterations=int(out[2]),
            polished=bool(out[3]),
            certified=bool(out[5]),
            uh=uh.reshape(h, w - 1),
            uv=uv.reshape(h - 1, w),
        )
