"""The box-constrained trend-filtering dual by a primal-dual interior-point method.

For ``min_β ½‖y − β‖² + λ‖Δβ‖₁`` (``Δ`` an ``m × n`` sparse matrix) the dual is the box QP

    min_u ½‖y − Δᵀu‖²   subject to   −λ ≤ u ≤ λ,        β = y − Δᵀu,               (1)

whose optimality conditions, with multipliers ``μ₁, μ₂ ≥ 0`` of ``u ≤ λ`` and ``−u ≤ λ`` and
slacks ``f₁ = λ − u``, ``f₂ = λ + u``, are

    β + Δᵀu = y,    Δβ = μ₁ − μ₂,    μ₁f₁ = μ₂f₂ = 0,    f, μ ≥ 0.

This module follows them by Mehrotra's predictor-corrector interior-point method (Mehrotra,
SIAM J. Optim. 2(4), 1992; Wright, "Primal-Dual Interior-Point Methods", SIAM 1997, ch. 10),
as Kim, Koh, Boyd & Gorinevsky ("ℓ₁ trend filtering", SIAM Review 51(2), 2009, §4) do for
the chain's second differences.  Each Newton step with complementarity targets ``c₁, c₂``
(``μ₁df₁ + f₁dμ₁ = c₁``, ``μ₂df₂ + f₂dμ₂ = c₂``) eliminates ``dμ`` and solves

    [ I   Δᵀ ] [dβ]   [ y − β − Δᵀu                  ]
    [ Δ   −J ] [du] = [ −Δβ + μ₁ − μ₂ + c₁/f₁ − c₂/f₂ ],     J = diag(μ₁/f₁ + μ₂/f₂),   (2)

then ``dμ₁ = (c₁ + μ₁du)/f₁``, ``dμ₂ = (c₂ − μ₂du)/f₂``.  Kim et al. eliminate ``dβ`` and
factorise ``ΔΔᵀ + J`` instead; for order 2 on a chain ``ΔΔᵀ`` has condition number of order
``n⁶`` (10²¹ on 4,000 nodes) and ``J`` vanishes on the free rows as the method converges, so
those normal equations lose every digit of ``dβ``.  (2) is solved as it stands: it is
quasi-definite, its primal block is the identity, and ``dβ`` — the part that fixes the fit —
is as well conditioned as the projection onto a face of ``Δ``.  With the unknowns interleaved
by position (node ``i``, then the rows of ``Δ`` centred at ``i``; the ordering of
:mod:`._dual_newton`) it is banded on a chain and is factorised by banded LU with
partial pivoting (LAPACK ``gbtrf``, ``O(n)``), once per step for both the predictor and the
corrector; elsewhere by sparse LU (SuperLU).  No dense factorisation is made.

``β`` is carried as a variable of its own (the primal residual ``y − β − Δᵀu`` is part of
(2)), not recomputed as ``y − Δᵀu``: near ``λ_max`` ``|u| ≫ |β|``, and that difference
would carry a rounding error ``ε‖Δ‖‖u‖`` in every ``(Δβ)_r``, larger than the third
differences that decide which rows are at their bounds.  For the same reason the slacks
``f₁, f₂`` are variables updated by the steps, not ``λ ∓ u``, which cancel to 0 near a
bound when ``λ`` is 10¹² (order 2 on 20,000 nodes).

The method is used to locate the solution's support, not to certify it: it stops when the
complementarity ``μ₁ᵀf₁ + μ₂ᵀf₂`` (the duality gap on the central path) is below
``reduction`` times the primal objective, and reports the rows it sees at their bounds
(``μ_r/max μ > f_r/λ``: the multiplier large and the slack small, each in its own scale),
from which :mod:`._dual_newton` solves the face exactly and repairs it by the active-set
method.  It is warm-started from the last λ's dual point, pulled to ``0.9λ`` inside the
box, with multipliers ``max(±Δβ, 0) + η/f`` (``η = 0.1·λ·mean|Δβ|``, a centred start).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import scipy.linalg.lapack as lapack
import scipy.sparse as sp
import scipy.sparse.linalg as spla

__all__ = ["BoxIPM", "IPMPoint"]

_Solve = Callable[[np.ndarray, np.ndarray], tuple[np.ndarray, np.ndarray]]

_STEP_TO_BOUNDARY = 0.99  # fraction of the step to the boundary of the positive orthant
_CENTRE = 0.1  # the start's complementarity relative to λ·mean|Δβ|
_PULL = 0.9  # the start is pulled inside the box to |u| ≤ this × λ


@dataclass
class IPMPoint:
    beta: np.ndarray  # the primal point carried by the method
    u: np.ndarray  # strictly inside the box
    mu1: np.ndarray  # multipliers of u ≤ λ
    mu2: np.ndarray  # multipliers of −u ≤ λ
    f1: np.ndarray  # slacks λ − u
    f2: np.ndarray  # slacks λ + u
    steps: int

    def sign(self, lam: float) -> np.ndarray:
        """``±1`` on the rows at their bounds (``μ_r/scale > f_r/λ``), else 0."""
        f1, f2 = self.f1, self.f2
        scale = max(float(np.max(self.mu1 + self.mu2)), 1e-300)
        upper = self.mu1 / scale > f1 / lam
        lower = self.mu2 / scale > f2 / lam
        return np.where(upper, 1.0, 0.0) - np.where(lower, 1.0, 0.0)


class BoxIPM:
    """Mehrotra's predictor-corrector on (1) for one operator ``Δ``.

    ``order_pos`` maps the unknowns (the ``n`` nodes, then the ``m`` rows) to their
    positions in the interleaved order; ``band`` is the half-bandwidth of (2) in that order,
    or None (sparse LU).
    """

    def __init__(
        self,
        matrix: sp.csr_matrix,
        matrix_t: sp.csr_matrix,
        y: np.ndarray,
        order_pos: np.ndarray,
        band: int | None,
    ) -> None:
        self.matrix = matrix
        self.matrix_t = matrix_t
        self.y = y
        self.m, self.n = matrix.shape
        self.band = band
        coo = matrix.tocoo()
        size = self.n + self.m
        self.size = size
        self.node_pos = order_pos[: self.n]
        self.row_pos = order_pos[self.n :]
        if band is not None:
            # LAPACK gbtrf storage: row kl + ku + i − j of column j holds A[i, j] (kl = ku)
            k = band
            template = np.zeros((3 * k + 1, size))
            template[2 * k, self.node_pos] = 1.0
            pr = self.row_pos[coo.row]
            pc = self.node_pos[coo.col]
            template[2 * k + pr - pc, pc] = coo.data  # the Δ block
            template[2 * k + pc - pr, pr] = coo.data  # the Δᵀ block
            self.template = template
        else:
            rows = np.concatenate([np.arange(self.n), coo.row + self.n, coo.col])
            cols = np.concatenate([np.arange(self.n), coo.col, coo.row + self.n])
            vals = np.concatenate([np.ones(self.n), coo.data, coo.data])
            self.static = sp.csc_matrix((vals, (rows, cols)), shape=(size, size))
            self.row_diag = sp.csc_matrix(
                (np.ones(self.m), (np.arange(self.m) + self.n, np.arange(self.m) + self.n)),
                shape=(size, size),
            )

    def _factor(self, jac: np.ndarray) -> _Solve | None:
        """A solver of (2) for ``J = diag(jac)``; None if singular."""
        n = self.n
        if self.band is not None:
            k = self.band
            ab = self.template.copy()
            ab[2 * k, self.row_pos] = -jac
            lu, piv, info = lapack.dgbtrf(ab, k, k, overwrite_ab=1)
            if info != 0:
                return None

            def solve(r1: np.ndarray, r2: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
                rhs = np.empty(self.size)
                rhs[self.node_pos] = r1
                rhs[self.row_pos] = r2
                sol = lapack.dgbtrs(lu, k, k, rhs, piv, overwrite_b=1)[0]
                return sol[self.node_pos], sol[self.row_pos]

            return solve
        mat = sp.csc_matrix(self.static - self.row_diag.multiply(np.r_[np.zeros(n), jac]))
        try:
            lu_sparse = spla.splu(mat)
        except RuntimeError:
            return None

        def solve_sparse(r1: np.ndarray, r2: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
            sol = lu_sparse.solve(np.concatenate([r1, r2]))
            return sol[:n], sol[n:]

        return solve_sparse

    def run(self, lam: float, u0: np.ndarray, reduction: float, max_steps: int) -> IPMPoint | None:
        """From ``u0`` (pulled inside the box) until the complementarity is below
        ``reduction`` times the primal objective (or ``max_steps``); None if (2) is
        singular or the iterates stop being finite."""
        y, mat, mat_t = self.y, self.matrix, self.matrix_t
        m = self.m
        u = np.clip(np.asarray(u0, dtype=np.float64), -_PULL * lam, _PULL * lam)
        beta = y - mat_t @ u
        g = mat @ beta
        scale = max(float(np.mean(np.abs(g))), 1e-300)
        f1, f2 = lam - u, lam + u
        eta = _CENTRE * lam * scale
        mu1 = np.maximum(g, 0.0) + eta / f1
        mu2 = np.maximum(-g, 0.0) + eta / f2
        steps = 0
        while steps < max_steps:
            steps += 1
            comp = (float(mu1 @ f1) + float(mu2 @ f2)) / (2 * m)
            r1 = y - beta - mat_t @ u
            r2 = -(g - mu1 + mu2)
            jac = mu1 / f1 + mu2 / f2
            solve = self._factor(jac)
            if solve is None:
                return None
            # predictor (affine scaling): c = −μf
            db, du = solve(r1, r2 - mu1 + mu2)
            dm1 = (-mu1 * f1 + mu1 * du) / f1
            dm2 = (-mu2 * f2 - mu2 * du) / f2
            alpha = _max_step(f1, f2, mu1, mu2, du, dm1, dm2)
            comp_aff = (
                float((mu1 + alpha * dm1) @ (f1 - alpha * du))
                + float((mu2 + alpha * dm2) @ (f2 + alpha * du))
            ) / (2 * m)
            sigma = (comp_aff / comp) ** 3 if comp > 0 else 0.0
            # corrector: c = σ·comp − μf − df_aff·dμ_aff (df₁ = −du, df₂ = du)
            c1 = sigma * comp - mu1 * f1 + du * dm1
            c2 = sigma * comp - mu2 * f2 - du * dm2
            db, du = solve(r1, r2 + c1 / f1 - c2 / f2)
            dm1 = (c1 + mu1 * du) / f1
            dm2 = (c2 - mu2 * du) / f2
            alpha = _STEP_TO_BOUNDARY * _max_step(f1, f2, mu1, mu2, du, dm1, dm2)
            alpha = min(alpha, 1.0)
            beta = beta + alpha * db
            u = u + alpha * du
            mu1 = mu1 + alpha * dm1
            mu2 = mu2 + alpha * dm2
            f1 = f1 - alpha * du  # not λ ∓ u: near a bound that cancels (ε·λ ≫ f)
            f2 = f2 + alpha * du
            g = mat @ beta
            if not (np.all(np.isfinite(u)) and np.all(np.isfinite(beta))):
                return None
            r = y - beta
            primal = 0.5 * float(r @ r) + lam * float(np.abs(g).sum())
            if float(mu1 @ f1) + float(mu2 @ f2) <= reduction * primal:
                break
        return IPMPoint(beta, np.clip(u, -lam, lam), mu1, mu2, f1, f2, steps)


def _max_step(
    f1: np.ndarray,
    f2: np.ndarray,
    mu1: np.ndarray,
    mu2: np.ndarray,
    du: np.ndarray,
    dm1: np.ndarray,
    dm2: np.ndarray,
) -> float:
    """The largest ``α ≤ 1`` keeping ``f₁ − α du, f₂ + α du, μ + α dμ ≥ 0``."""
    alpha = 1.0
    for value, step in ((f1, -du), (f2, du), (mu1, dm1), (mu2, dm2)):
        neg = step < 0
        if neg.any():
            alpha = min(alpha, float(np.min(-value[neg] / step[neg])))
    return max(alpha, 0.0) if math.isfinite(alpha) else 0.0
