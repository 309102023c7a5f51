"""A floating-point fit that lies exactly on its face (order 2 on a chain).

For order 2 on a chain of ``n`` nodes ``Δ = DL`` has the ``n − 1`` rows

    row 0:        2x₀ − 3x₁ + x₂,
    row r:        −x_{r−1} + 3x_r − 3x_{r+1} + x_{r+2}     (1 ≤ r ≤ n − 3),
    row n − 2:    −x_{n−3} + 3x_{n−2} − 2x_{n−1}.

The certified duality gap of a fit ``x`` on the face with zero rows ``F`` contains
``Σ_{r∈F} (λ|(Δx)_r| − u_r(Δx)_r)``.  A floating-point ``x`` that solves the face to
rounding still has ``(Δx)_r`` of the size ``ε|x|`` on every free row (its entries are
rounded), and near ``λ_max`` (``λ ≈ 10¹⁰`` on 4,000 nodes) ``λ·Σ_F|(Δx)_r|`` is ``10⁻⁶`` of
the objective: no rounding of the exact face solution is certified to ``tol = 10⁻⁶``.

This module replaces ``x`` by a nearby point of the face that floating point represents
exactly: ``x' = h·K`` with ``h`` a power of two and ``K`` an integer vector (below
``2⁵⁰``) with ``(ΔK)_F = 0``, so that every ``(Δx')_r`` is computed without rounding and is
exactly 0 on ``F``.  The rows give a recurrence with unit leading coefficients: from
``K₀``, ``b = K₁ − K₀`` and the integer jumps ``W_a = (ΔK)_a`` on the active rows ``a ≤ n − 3``
(``W_r = 0`` on the free ones), the second differences are ``W₀ + b + Σ_{i<j} W_{i+1}``
and ``K`` follows by two cumulative sums (exact in ``int64``).  The last row, if free, is a
constraint; by linearity (``K`` responds to a unit ``b`` by ``j(j+1)/2`` and to a unit
``W_a`` by ``C(j − a, 2)``) its value is ``−n·b − Σ_a (n − 1 − a) W_a``, so ``b`` is an
integer exactly when ``Σ_a (n − 1 − a) W_a ≡ 0 (mod n)``, which one adjusted ``W_a`` restores
(a linear congruence, solvable when ``gcd(n − 1 − a, n)`` divides the remainder).

``x' − x`` lies in the face, where the objective is stationary at the face's minimiser, so
it costs only ``½‖x' − x‖²``.  The adjustment that restores the congruence moves ``x'`` by
up to ``h·n³/2``-ish (so the row changed is the one that moves it least, ``|δ|(n − 1 − a)``):
about 10⁻⁵ of ``max|x|`` on 4,000 nodes, a certified gap of 10⁻⁸ of the objective or less.
The representable points of a face with few kinks are that sparse intrinsically (one kink:
the face is ``span{1, v}`` with ``v`` an integer vector of size ``n³``), so on much longer
chains it stops sufficing: on 20,000 nodes (``λ ≈ 10¹²``) the first 8 λ below ``λ_max``
certified ``10⁻⁴`` rounded and ``5·10⁻¹⁰`` to ``6·10⁻⁶`` snapped (moved by up to
``5·10⁻⁴ max|x|``), and a λ not certified within ``tol`` goes to ADMM.
"""

from __future__ import annotations

import math

import numpy as np
import scipy.sparse as sp

__all__ = ["ChainFace"]

_PAIR_ROWS = 8  # rows tried in pairs when no single row fixes the congruence
_BITS = 50  # |K| < 2^50: Δ's row sums of |coefficients| (8) keep every partial sum exact


class ChainFace:
    """Exact-on-face representation for ``Δ = DL`` on an ``n``-node chain in order."""

    def __init__(self, n: int) -> None:
        self.n = n

    @staticmethod
    def matches(matrix: sp.csr_matrix) -> bool:
        """Whether ``matrix`` is exactly ``DL`` of a chain labelled in order (n ≥ 5)."""
        m, n = matrix.shape
        if n < 5 or m != n - 1:
            return False
        return (abs(matrix - chain_operator(n)) > 0).nnz == 0

    def snap(self, x: np.ndarray, sign: np.ndarray) -> np.ndarray | None:
        """A point ``h·K`` of the face of ``sign`` (``Δ_F x' = 0`` exactly, ``Δ_A x'`` of the
        signs ``sign_A``) near ``x``; None if no such point is found."""
        n = self.n
        scale = float(np.max(np.abs(x)))
        if not math.isfinite(scale) or scale == 0.0:
            return None
        h = 2.0 ** math.ceil(math.log2(4.0 * scale / 2.0**_BITS))
        dx = np.zeros(n - 1)
        dx[0] = 2 * x[0] - 3 * x[1] + x[2]
        dx[1:-1] = -x[:-3] + 3 * x[1:-2] - 3 * x[2:-1] + x[3:]
        dx[-1] = -x[-3] + 3 * x[-2] - 2 * x[-1]
        active = sign != 0
        jumps = np.where(active[: n - 2], np.rint(dx[: n - 2] / h), 0.0).astype(np.int64)
        last_free = not active[n - 2]
        if last_free:
            gamma = (n - 1 - np.arange(n - 2)).astype(np.int64)  # −coefficient of W_a
            rows = np.flatnonzero(active[: n - 2])
            total = _weighted_sum(gamma, jumps, rows) % n
            if total and _fix_congruence(jumps, gamma, rows, total, n) is None:
                return None
            weighted = _weighted_sum(gamma, jumps, rows)  # Python integers: no overflow
            if weighted % n:
                return None
            b = -weighted // n
        else:
            b = int(np.rint((x[1] - x[0]) / h))
        second = np.empty(n - 2, dtype=np.int64)
        second[0] = jumps[0] + b
        np.cumsum(jumps[1:], out=second[1:])
        second[1:] += second[0]
        first = np.empty(n - 1, dtype=np.int64)
        first[0] = b
        np.cumsum(second, out=first[1:])
        first[1:] += b
        k = np.zeros(n, dtype=np.int64)
        np.cumsum(first, out=k[1:])
        shift = float(np.mean(x / h - k))
        if not math.isfinite(shift) or abs(shift) >= 2.0**_BITS:
            return None
        k += round(shift)
        if int(np.max(np.abs(k))) >= 2**_BITS:
            return None
        xs = k.astype(np.float64) * h
        dk = np.zeros(n - 1, dtype=np.int64)
        dk[0] = 2 * k[0] - 3 * k[1] + k[2]
        dk[1:-1] = -k[:-3] + 3 * k[1:-2] - 3 * k[2:-1] + k[3:]
        dk[-1] = -k[-3] + 3 * k[-2] - 2 * k[-1]
        if np.any(dk[~active] != 0) or np.any(np.sign(dk[active]) != sign[active]):
            return None
        return xs


def _weighted_sum(gamma: np.ndarray, jumps: np.ndarray, rows: np.ndarray) -> int:
    return sum(int(gamma[a]) * int(jumps[a]) for a in rows)


def _fix_congruence(
    jumps: np.ndarray, gamma: np.ndarray, rows: np.ndarray, total: int, n: int
) -> bool | None:
    """Change one ``W_a`` (in place) by the ``δ`` with ``γ_a δ ≡ −total (mod n)`` that moves
    ``x'`` least (``|δ|γ_a``),
    else two of them (``γ_a δ_a + γ_c δ_c ≡ −total``, ``δ_a`` searched); None if neither
    works (the remainder is then not a multiple of the gcd of the ``γ`` and ``n``)."""
    best: tuple[int, int] | None = None
    cost = math.inf
    for a in rows:
        delta = _solve_congruence(int(gamma[a]), -total, n)
        # a unit change of W_a moves x' by about h·n·(n − 1 − a): prefer late rows
        if delta is not None and abs(delta) * int(gamma[a]) < cost:
            best, cost = (int(a), delta), abs(delta) * int(gamma[a])
    if best is not None:
        jumps[best[0]] += best[1]
        return True
    shifts = np.arange(-(n // 2), n - n // 2, dtype=np.int64)
    shifts = shifts[np.argsort(np.abs(shifts), kind="stable")]
    for a in rows[:_PAIR_ROWS]:
        for c in rows[:_PAIR_ROWS]:
            if c == a:
                continue
            g = math.gcd(int(gamma[c]), n)
            rest = (-total - int(gamma[a]) * shifts) % n
            ok = np.flatnonzero(rest % g == 0)
            if ok.size:
                delta_a = int(shifts[ok[0]])
                delta_c = _solve_congruence(int(gamma[c]), int(rest[ok[0]]), n)
                if delta_c is not None:
                    jumps[a] += delta_a
                    jumps[c] += delta_c
                    return True
    return None


def _solve_congruence(coef: int, rhs: int, n: int) -> int | None:
    """The ``δ`` of least magnitude with ``coef·δ ≡ rhs (mod n)``, or None."""
    g = math.gcd(coef, n)
    if rhs % g:
        return None
    mod = n // g
    if mod == 1:
        return 0
    delta = ((rhs // g) * pow(coef // g, -1, mod)) % mod
    return delta - mod if delta > mod // 2 else delta


def chain_operator(n: int) -> sp.csr_matrix:
    """``DL`` of the chain ``0 − 1 − … − (n − 1)`` (rows ↔ edges ``(i, i + 1)``)."""
    rows = np.repeat(np.arange(n - 1), 2)
    cols = np.stack([np.arange(n - 1), np.arange(1, n)], axis=1).ravel()
    d = sp.csr_matrix((np.tile([1.0, -1.0], n - 1), (rows, cols)), shape=(n - 1, n))
    return sp.csr_matrix(d @ (d.T @ d))
