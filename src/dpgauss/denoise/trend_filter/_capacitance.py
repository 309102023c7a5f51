"""Principal subsystems of ``Q = L²`` through one factorisation and a capacitance matrix.

A face of order-1 trend filtering (:mod:`._order1`) solves ``Q_RR d = r`` for the free
nodes ``R``; its complement ``S`` (the removed nodes: the active ones, and a ground of each
component without any) is small at large λ, while ``R`` holds almost every node.  Instead
of factorising ``Q_RR`` at each face, this module factorises once per λ path

    M = Q + α Σ_c e_{g_c} e_{g_c}ᵀ,                                              (1)

``g_c`` the first node of component ``c`` (its *ground*) and ``α`` the mean diagonal of
``Q``.  ``M`` is positive definite (``Q`` is positive semidefinite with null space spanned
by the ``1_c``, and ``e_{g_c}ᵀ 1_c = 1``), and since ``Q 1_c = 0`` its inverse on a ground
is known exactly: ``M⁻¹ e_{g_c} = 1_c / α``.  For any other removed node ``a`` the column
``w_a = M⁻¹ e_a`` is computed once, when ``a`` is first removed, and cached.

The solve (the capacitance-matrix method of Buzbee, Dorr, George & Golub, "The direct
solution of the discrete Poisson equation on irregular regions", SIAM J. Numer. Anal. 8(4),
1971): ``x`` with ``x_S = 0`` and ``(Q x)_R = r_R`` (``r_S = 0``).  Write
``Q = M − α Σ_c e_{g_c} e_{g_c}ᵀ``; the grounds in ``S`` drop out (``x_g = 0``), and those
in ``R`` (the set ``K``: components with a removed node other than their ground) give

    M x = r + Σ_{s∈S} μ_s e_s + α Σ_{g∈K} t_g e_g,      t_g = x_g,
    x = M⁻¹(r + Σ_{s∈S} μ_s e_s) + Σ_{g∈K} t_g 1_{c(g)}.                           (2)

``x_S = 0`` gives ``z_S + C μ + B t = 0`` with ``z = M⁻¹ r``, the capacitance matrix
``C = (M⁻¹)_SS`` (``C_{sa} = (w_a)_s``) and ``B_{sg} = [c(s) = c(g)]``; ``x_g = t_g`` gives
``Bᵀ μ = −α z_K`` (``(w_s)_g = (w_g)_s = 1/α`` on ``c(g)``).  ``C`` is positive definite
(a principal submatrix of ``M⁻¹``): with ``C = ΛΛᵀ`` (Cholesky), ``v = Λ⁻¹ z_S`` and
``Y = Λ⁻¹ B``,

    (YᵀY) t = α z_K − Yᵀv,        μ = −Λ⁻ᵀ(v + Y t).                             (3)

``C`` and ``B`` are block diagonal by component, so ``YᵀY`` is diagonal and (3) is one
division per component of ``K``.  A component whose only removed node is its ground needs
no unknown at all: ``x_c = z_c − z_{g_c} 1_c``.  So a solve is two pairs of sparse
triangular solves with ``M``'s factors (``z``, then (2)) and two dense triangular solves of
order ``|S|`` (BLAS ``dtrsv``), against a sparse factorisation of ``Q_RR`` per face by the
other route (5 ms on the 4,091-node Manhattan graph).  ``Λ`` is kept from face to face in
the order the nodes were removed: a face keeps the rows of the longest prefix whose nodes
are all still removed and appends the others one at a time (a bordered Cholesky step,
``O(|S|²)``).  Neither a dense factorisation nor a matrix product of more than one vector
is made (multithreaded BLAS at these sizes cost 10–100 × its single-threaded time on the
shared 2-core machines this was measured on).

Accuracy.  ``M`` has the condition number of ``Q`` on ``1_c^⊥`` (``10⁹`` on the Manhattan
graph), so a solve is accurate to a few digits only; :class:`._order1.FaceSolver` uses it
as the preconditioner of conjugate gradients on the true face residual, which it certifies
exactly as it certifies its other route, and falls back to that route when a bordered step
finds ``C`` numerically singular (a pivot ``d² ≤`` :data:`PIVOT_MIN` ``· C_aa``) or CG does
not reach the face's rounding floor.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np
import scipy.sparse as sp
from scipy.linalg import blas

from ._sparse_spd import spd_lu

__all__ = ["PIVOT_MIN", "Capacitance"]

#: A bordered Cholesky step of ``C`` whose pivot ``d²`` is at most this times ``C_aa`` (the
#: node's column is nearly in the span of the others') refuses the face.
PIVOT_MIN = 1e-13
#: Columns ``w_a`` per multi-column solve (4: 0.13 ms a column on the Manhattan graph
#: against 0.24 ms one at a time; 16 took 0.9 ms, its BLAS calls multithreaded)
_BATCH = 4
#: The first order of ``Λ``'s storage (it doubles as needed, up to ``max_size``)
_FIRST_CAPACITY = 64


class Capacitance:
    """``r ↦ Q_RR⁻¹ r`` for the faces of one ``Q = L²`` (module doc).

    ``q_perm`` is ``Q`` in the fill-reducing order ``order`` (``pos`` its inverse) that
    :class:`._order1.FaceSolver` computed for it, ``comp`` the component of each node,
    ``max_size`` the largest ``|S|`` served (the order of ``Λ``) and ``max_columns`` the size of
    the column cache (the number of distinct removed nodes it can serve along a path)."""

    def __init__(
        self,
        q_perm: sp.csc_matrix,
        order: np.ndarray,
        pos: np.ndarray,
        comp: np.ndarray,
        max_size: int,
        max_columns: int,
        panel_size: int | None = None,
    ) -> None:
        self.n = q_perm.shape[0]
        self.q_perm = q_perm
        self.order, self.pos = order, pos
        self.comp = np.asarray(comp, dtype=np.int64)
        self.n_comp = int(self.comp.max()) + 1 if self.comp.size else 0
        ground = np.full(self.n_comp, -1, dtype=np.int64)
        ground[self.comp[::-1]] = np.arange(self.n)[::-1]
        self.ground = ground
        self.is_ground = np.zeros(self.n, dtype=bool)
        self.is_ground[ground] = True
        diag = q_perm.diagonal()
        mean = float(np.mean(diag)) if diag.size else 0.0
        self.alpha = mean if mean > 0 else 1.0
        self.max_size = max_size
        self.max_columns = max_columns
        self.panel_size = panel_size
        self.lu: Any = None
        self.failed = False
        self.cols = np.zeros((self.n, 0), order="F")  # w_a for the cached a, by slot
        self.slot = np.full(self.n, -1, dtype=np.int64)
        self.used = 0
        # Λ (lower triangular, order max_size; identity past the first `k` rows) and the
        # removed nodes it is the Cholesky factor of C for, in its order
        self.chol = np.asfortranarray(np.eye(min(_FIRST_CAPACITY, max(max_size, 1))))
        self.sel = np.zeros(0, dtype=np.int64)
        self.factorisations = 0
        self.column_solves = 0

    # the factorisation of M and its columns ------------------------------------------------
    def _factor(self) -> bool:
        if self.lu is not None:
            return True
        if self.failed:
            return False
        g = self.pos[self.ground]
        bump = sp.csc_matrix((np.full(g.size, self.alpha), (g, g)), shape=(self.n, self.n))
        try:
            self.lu = spd_lu(
                sp.csc_matrix(self.q_perm + bump), ordered=True, panel_size=self.panel_size
            )
        except RuntimeError:
            self.failed = True
            return False
        self.factorisations += 1
        return True

    def m_solve(self, b: np.ndarray) -> np.ndarray:
        """``M⁻¹ b`` for one vector ``b`` (node order)."""
        return np.asarray(self.lu.solve(b[self.order])[self.pos])

    def _cache(self, nodes: np.ndarray) -> bool:
        """Compute and cache ``w_a`` for the (non-ground) ``nodes`` not cached yet, one
        vector solve each; False if the cache is full."""
        missing = nodes[self.slot[nodes] < 0]
        if not missing.size:
            return True
        if self.used + missing.size > self.max_columns:
            return False
        if self.used + missing.size > self.cols.shape[1]:
            grow = min(max(2 * self.cols.shape[1], self.used + missing.size, 16), self.max_columns)
            cols = np.zeros((self.n, grow), order="F")
            cols[:, : self.used] = self.cols[:, : self.used]
            self.cols = cols
        # a few columns per solve: SuperLU's multi-column solve is faster per column, but
        # past _BATCH its dense kernels become multithreaded BLAS (module doc)
        for lo in range(0, missing.size, _BATCH):
            part = missing[lo : lo + _BATCH]
            rhs = np.zeros((self.n, part.size), order="F")
            rhs[self.pos[part], np.arange(part.size)] = 1.0  # already in M's order
            sol = self.lu.solve(rhs)
            self.cols[:, self.used : self.used + part.size] = sol[self.pos]
            self.slot[part] = np.arange(self.used, self.used + part.size)
            self.used += part.size
        self.column_solves += missing.size
        return True

    def _entries(self, a: int, nodes: np.ndarray) -> np.ndarray:
        """``(M⁻¹ e_a)`` at ``nodes``."""
        if self.is_ground[a]:
            return (self.comp[nodes] == self.comp[a]) / self.alpha
        return np.asarray(self.cols[nodes, self.slot[a]])

    def _refactor(self, nodes: np.ndarray) -> bool:
        """``Λ`` for the removed nodes ``nodes`` (a set), reusing the rows of the longest
        prefix of the last order whose nodes are all in it; False if ``C`` is numerically
        singular there (``Λ`` is then left for the prefix)."""
        if nodes.size > self.chol.shape[0]:  # grow Λ's storage (identity past its rows)
            size = min(max(2 * self.chol.shape[0], nodes.size), self.max_size)
            grown = np.asfortranarray(np.eye(size))
            old = self.chol.shape[0]
            grown[:old, :old] = self.chol
            self.chol = grown
        chol = self.chol
        cap = chol.shape[0]
        inside = np.zeros(self.n, dtype=bool)
        inside[nodes] = True
        sel = self.sel
        gone = np.flatnonzero(~inside[sel])
        keep = int(gone[0]) if gone.size else sel.size
        if keep < sel.size:  # rows past the prefix back to the identity
            chol[keep:, :] = 0.0
            chol[keep:, keep:] = np.eye(cap - keep)
        prefix = sel[:keep]
        taken = np.zeros(self.n, dtype=bool)
        taken[prefix] = True
        tail = np.concatenate([sel[keep:][inside[sel[keep:]]], nodes[~np.isin(nodes, sel)]])
        order = np.concatenate([prefix, tail]).astype(np.int64)
        c = np.zeros(cap)
        for p in range(keep, order.size):
            a = int(order[p])
            col = self._entries(a, order[: p + 1])
            c[:p] = col[:p]
            lrow = blas.dtrsv(chol, c, lower=1) if p else c
            d2 = float(col[p]) - float(lrow[:p] @ lrow[:p])
            if not d2 > PIVOT_MIN * float(col[p]):
                self.sel = order[:p]
                chol[p:, :] = 0.0
                chol[p:, p:] = np.eye(cap - p)
                return False
            chol[p, :p] = lrow[:p]
            chol[p, p] = math.sqrt(d2)
            c[:p] = 0.0
        self.sel = order
        return True

    # one face ---------------------------------------------------------------------------
    def face(self, removed: np.ndarray, max_new: int) -> Callable[[np.ndarray], np.ndarray] | None:
        """``r ↦ x`` with ``x_S = 0`` and ``(Q x)_R = r_R`` for ``S = removed`` (a mask over
        the nodes); None if a component has no removed node, ``C`` would be larger than
        ``max_size`` or numerically singular, more than ``max_new`` of its columns are not
        cached yet, or the column cache is full."""
        comp = self.comp
        count = np.bincount(comp[removed], minlength=self.n_comp)
        if np.any(count == 0):
            return None
        # components whose only removed node is their ground: x_c = z_c − z_g 1_c
        lone = (count == 1) & removed[self.ground]
        s_nodes = np.flatnonzero(removed & ~lone[comp])
        if s_nodes.size > self.max_size or not self._factor():
            return None
        plain = s_nodes[~self.is_ground[s_nodes]]
        if np.count_nonzero(self.slot[plain] < 0) > max_new or not self._cache(plain):
            return None
        if not self._refactor(s_nodes):
            return None
        sel, chol, alpha = self.sel, self.chol, self.alpha
        k = sel.size
        k_comps = np.flatnonzero(~lone & ~removed[self.ground])  # components with g in R
        k_nodes = self.ground[k_comps]
        in_k = np.zeros(self.n_comp, dtype=bool)
        in_k[k_comps] = True
        comp_sel = comp[sel]
        ysum = np.zeros(chol.shape[0])
        norm = np.zeros(self.n_comp)
        if k_comps.size:
            ysum[:k] = in_k[comp_sel]
            ysum = blas.dtrsv(chol, ysum, lower=1)
            norm = np.asarray(
                np.bincount(comp_sel, weights=ysum[:k] ** 2, minlength=self.n_comp), dtype=float
            )
            if not np.all(norm[k_comps] > 0.0):
                return None
        lone_mask = lone[comp]
        lone_of = self.ground[comp]

        def solve(r: np.ndarray) -> np.ndarray:
            rr = np.where(removed, 0.0, r)
            z = self.m_solve(rr)
            if k:
                v = np.zeros(chol.shape[0])
                v[:k] = z[sel]
                v = blas.dtrsv(chol, v, lower=1)
                t = np.zeros(self.n_comp)
                if k_comps.size:
                    yv = np.bincount(comp_sel, weights=ysum[:k] * v[:k], minlength=self.n_comp)
                    t[k_comps] = (alpha * z[k_nodes] - yv[k_comps]) / norm[k_comps]
                    v[:k] += ysum[:k] * t[comp_sel]
                mu = blas.dtrsv(chol, v, lower=1, trans=1)
                rr[sel] -= mu[:k]
                x = self.m_solve(rr)
                if k_comps.size:
                    x += t[comp]
            else:
                x = z
            if lone_mask.any():
                x[lone_mask] -= x[lone_of[lone_mask]]
            x[removed] = 0.0
            return x

        return solve
