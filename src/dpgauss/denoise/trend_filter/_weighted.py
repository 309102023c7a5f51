"""Order-0 trend filtering with noise that differs per key: the weighted graph fused lasso.

When key ``i`` carries Gaussian noise of its own standard deviation ``σ_i``, the fidelity of
the maximum-likelihood (and of the penalised) estimate weights each key by ``w_i = 1/σ_i²``:

    β̂ = argmin_β ½ Σ_i w_i (y_i − β_i)² + λ ‖Dβ‖₁.

Dual and certificate.  With ``W = diag(w)`` the dual is
``max_{‖u‖∞ ≤ λ} ½ yᵀWy − ½ (Wy − Dᵀu)ᵀ W⁻¹ (Wy − Dᵀu)``, at whose solution
``β̂ = y − W⁻¹Dᵀu``.  For any ``β`` and feasible ``u`` the duality gap is, without
cancellation (every term is ≥ 0),

    P(β) − D(u) = λ‖Dβ‖₁ − (Dβ)ᵀu + ½ δᵀWδ,      δ = y − β − W⁻¹Dᵀu

(expand ``½ δᵀWδ``: the ``yᵀDᵀu`` and ``uᵀDW⁻¹Dᵀu`` terms of ``P − D`` are exactly its
cross and last terms).

Solvers.  Both exact solvers of the unweighted problem carry over: on a chain the direct
1-D algorithm with weighted segment means (:func:`._tv1d.tv1d`), on any other graph the
minimum-cut decomposition with weighted group levels and supplies ``w_i (t_i − α)``
(:func:`._graph_tv.graph_tv`; level sets of the solution are minimum cuts for any separable
strictly convex fidelity).

Degrees of freedom and SURE.  On a fused group ``G`` (fixed near almost every ``y``) the
solution is the weighted mean of ``y − λW⁻¹Dᵀs``, so ``∂β̂_i/∂y_i = w_i / W_G`` with
``W_G = Σ_{j∈G} w_j``.  Stein's lemma, coordinate by coordinate, gives an unbiased estimate of
the (unweighted) total squared error ``E‖β̂ − θ‖²``:

    SURE(λ) = ‖y − β̂‖² − Σ σ_i² + 2 Σ_i σ_i² ∂β̂_i/∂y_i
            = ‖y − β̂‖² − Σ σ_i² + 2 Σ_G |G| / W_G,

``|G| / W_G`` being the harmonic mean of σ² over the group (``σ² · #groups`` when σ is one
number).

Path.  For ``λ ≥ λ_max = ‖u‖∞`` with ``u = D L⁺ W (y − Π_W y)`` (``Π_W`` the per-component
weighted mean, so that ``W(y − Π_W y)`` sums to zero on every component and ``Dᵀu`` equals
it) the solution is ``Π_W y``; the SURE path runs down geometrically from there, each λ
warm-started from the last one's jumps and flow.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from . import _graph_tv
from ._tv1d import tv1d

__all__ = ["WeightedFit", "WeightedPath"]


@dataclass
class WeightedFit:
    """One λ: the solution, its fused edges, group count, SURE's divergence term
    ``Σ σ_i² ∂β̂_i/∂y_i``, objective, certified relative gap and cut rounds."""

    lam: float
    beta: np.ndarray
    zero: np.ndarray
    df: int
    divergence: float
    objective: float
    gap: float
    converged: bool
    rounds: int


class WeightedPath:
    """Solves order 0 with fidelity weights ``1/σ²`` at a decreasing sequence of λ.

    ``op`` is the trend filter's order-0 difference operator (its ``apply``, ``adjoint``,
    ``fused_components``, ``laplacian_power_solve``, ``components``, ``edges`` and ``m``);
    ``chain`` says whether it is a path graph labelled in order.
    """

    def __init__(self, y: np.ndarray, sigma: np.ndarray, op: Any, tol: float, chain: bool) -> None:
        self.y = y
        self.var = sigma * sigma
        self.w = 1.0 / self.var
        self.op = op
        self.tol = tol
        self.chain = chain
        comp = op.components
        n_comp = int(comp.max()) + 1 if comp.size else 0
        wsum = np.bincount(comp, weights=self.w, minlength=n_comp)
        self.projection = (np.bincount(comp, weights=self.w * y, minlength=n_comp) / wsum)[comp]
        r = self.w * (y - self.projection)
        self.u_ls = op.apply(op.laplacian_power_solve(r, 1)) if np.any(r) else np.zeros(op.m)
        self.lam_max = float(np.max(np.abs(self.u_ls))) if self.u_ls.size else 0.0
        self.jump: np.ndarray | None = None
        self.flow: np.ndarray = self.u_ls

    def sure(self, fit: WeightedFit) -> float:
        r = self.y - fit.beta
        return float(r @ r) - float(self.var.sum()) + 2.0 * fit.divergence

    def primal(self, beta: np.ndarray, dbeta: np.ndarray, lam: float) -> float:
        r = self.y - beta
        return 0.5 * float(r @ (self.w * r)) + lam * float(np.abs(dbeta).sum())

    def fit_of(
        self, lam: float, beta: np.ndarray, zero: np.ndarray, gap: float, rounds: int
    ) -> WeightedFit:
        n_comp, labels = self.op.fused_components(zero)
        sizes = np.bincount(labels, minlength=n_comp)
        wsum = np.bincount(labels, weights=self.w, minlength=n_comp)
        p = self.primal(beta, self.op.apply(beta), lam)
        rel = max(gap, 0.0) / max(p, 1e-300)
        return WeightedFit(
            lam=lam,
            beta=beta,
            zero=zero,
            df=int(n_comp),
            divergence=float(np.sum(sizes / wsum)),
            objective=p,
            gap=rel,
            converged=rel <= self.tol,
            rounds=rounds,
        )

    def solve(self, lam: float) -> WeightedFit:
        op, y = self.op, self.y
        if lam >= self.lam_max:  # u_ls is dual feasible: the weighted projection is exact
            return self.fit_of(lam, self.projection.copy(), np.ones(op.m, dtype=bool), 0.0, 0)
        if lam == 0.0:
            return self.fit_of(lam, y.copy(), np.zeros(op.m, dtype=bool), 0.0, 0)
        if self.chain:
            x, u = tv1d(y, lam, self.w)
            res = _graph_tv.TVSolution(x, np.clip(u, -lam, lam), 0)
        else:
            solved = _graph_tv.graph_tv_warm(y, op.edges, lam, self.jump, self.flow, weight=self.w)
            if solved is None:  # the round guard (never seen): solve from scratch
                solved = _graph_tv.graph_tv(y, op.edges, lam, weight=self.w)
            if solved is None:
                raise RuntimeError(
                    f"trend_filter: the weighted minimum-cut solver failed at lam={lam:g}"
                )
            res = solved
        dbeta = op.apply(res.beta)
        delta = y - res.beta - op.adjoint(res.u) / self.w
        gap = (
            lam * float(np.abs(dbeta).sum())
            - float(dbeta @ res.u)
            + 0.5 * float(delta @ (self.w * delta))
        )
        atol = 1e-9 * (float(np.max(np.abs(y))) if y.size else 0.0)
        zero = np.abs(dbeta) <= atol
        self.jump = np.where(zero, 0.0, np.sign(dbeta))
        self.flow = res.u
        return self.fit_of(lam, res.beta, zero, gap, res.rounds)
