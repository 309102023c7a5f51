"""Exact order-1 trend filtering on a given support, by bordered Schur complements.

For order 1 (``Δ = L``, the graph Laplacian) the dual of
``min ½‖y − β‖² + λ‖Lβ‖₁`` is ``min_u ½‖y − Lu‖²`` subject to ``|u| ≤ λ``, with
``β = y − Lu``.  Given the nodes ``A`` where ``Lβ ≠ 0`` and their signs ``s``, the
optimality conditions fix ``u_A = λ s_A`` and leave ``u_F`` (``F`` the other nodes) to
minimise ``½‖y − Lu‖²``:

    (L²)_FF u_F = (L y − λ L² s)_F ,          β = y − L u,            (1)

which is the polished solution ``Π_{null(L_F)}(y − λLs)`` of the trend-filter module, with
its (unique) multipliers ``u_F``.  On a connected component without active nodes ``u`` is
determined only up to a constant: one node of it (its *ground* node ``g``) is fixed at 0.

Every primal-dual active-set step solves (1) for a different ``F``.  Instead of
factorising ``(L²)_FF`` each time, all of them are solved with one fixed positive definite
matrix

    M = L² + Σ_g e_g e_gᵀ        (one ground node ``g`` per connected component),

whose inverse is two pseudo-inverse Laplacian solves (cached sparse LU, or the DCT on
lattices): with ``σ_c`` the sum of ``b`` over component ``c`` and ``r = b − Σ_c σ_c e_{g_c}``
(orthogonal to the null space), ``M⁻¹b = L⁺²r + Σ_c (σ_c − (L⁺²r)_{g_c}) 1_c``.

Write ``D`` for the fixed nodes (``A`` and the ground nodes of components without active
nodes) and ``G`` for the ground nodes left free.  Then ``(L²)_FF = M_FF − E_G E_Gᵀ`` and (1)
is the bordered system (Gill, Murray, Saunders & Wright, "A Schur-complement method for
sparse quadratic programming", 1990; Bartlett & Biegler, "QPSchur", 2006)

    M x = b̃ − E_D μ + E_G ν,     x_D = 0,     x_G = ν,

with ``b̃`` the right side of (1) on ``F`` and 0 on ``D``.  With ``W = M⁻¹`` restricted to
``K = D ∪ G`` and ``r = M⁻¹ b̃`` its Schur complement is the small dense system

    [ W_DD   −W_DG     ] [μ]   [r_D]
    [ W_GD   I − W_GG  ] [ν] = [r_G],

after which ``x = M⁻¹(b̃ − E_D μ + E_G ν)``; negating ``ν`` makes it symmetric,
``T = W_KK − E_G E_Gᵀ``.  The columns ``M⁻¹e_k`` do not depend on the support, so the
block of ``M⁻¹`` on every node that ever becomes active is computed once and cached for the
whole λ path.  ``T`` is factorised (dense LU) for a base key set and reused while the keys
change little, through a second, small Schur complement (deleted keys bordered by unit
vectors, added keys by their rows of ``T``), so a step costs a few sparse solves and
``O(|K|² k)`` for ``k`` changed keys, instead of a sparse factorisation.  Iterative
refinement on the residual ``(Lβ)_F`` of (1), which must vanish, removes the rounding of the
ill-conditioned ``W`` (condition number up to that of ``L²``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol

import numpy as np
import scipy.linalg as sla
import scipy.sparse as sp
import scipy.sparse.linalg as spla

__all__ = ["ReorderedSPD", "SupportSolver", "spd_lu"]

_BATCH = 8  # SuperLU solves a few right-hand sides at a time fastest
_REFINE = 3  # at most this many refinement steps
_RESIDUAL = 1e-11  # stop refining when max|(Lβ)_F| is this small relative to |Ly| + λ|Ls|
_MAX_ENTRIES = 25_000_000  # the cached block of M⁻¹: at most this many floats (200 MB)


def spd_lu(matrix: sp.csc_matrix, ordered: bool = False) -> Any:
    """Sparse LU of a symmetric positive (or quasi-) definite matrix, without pivoting.

    ``ordered=True`` says the rows and columns are already in a fill-reducing order (for
    instance ``perm_c`` of an earlier factorisation with the same pattern, see
    :class:`ReorderedSPD`): SuperLU then skips its minimum-degree ordering, about half of
    the factorisation time on road graphs.
    """
    return spla.splu(
        matrix,
        permc_spec="NATURAL" if ordered else "MMD_AT_PLUS_A",
        diag_pivot_thresh=0.0,
        options={"SymmetricMode": True},
    )


class ReorderedSPD:
    """Factorisations of ``I + ρG`` for many ρ with one fill-reducing ordering of ``G``.

    The sparsity pattern of ``I + ρG`` does not depend on ρ > 0, so the minimum-degree
    order of the first factorisation serves every later one: ``G`` is permuted once,
    ``P G Pᵀ``, and each ρ is factorised in that order (``spd_lu(…, ordered=True)``);
    a solve permutes ``b`` in and the solution back out, ``x = Pᵀ (I + ρ P G Pᵀ)⁻¹ P b``.
    """

    def __init__(self, gram: sp.spmatrix) -> None:
        self.gram = sp.csc_matrix(gram)
        self.n = self.gram.shape[0]
        self._order: tuple[np.ndarray, np.ndarray] | None = None
        self._permuted: sp.csc_matrix | None = None

    def factor(self, rho: float) -> Callable[[np.ndarray], np.ndarray]:
        """``b ↦ (I + ρG)⁻¹ b``."""
        eye = sp.identity(self.n, format="csc")
        if self._order is None:
            lu = spd_lu(sp.csc_matrix(eye + rho * self.gram))
            inverse = np.asarray(lu.perm_c, dtype=np.int64)
            order = np.empty_like(inverse)
            order[inverse] = np.arange(self.n)
            self._order = (order, inverse)
            self._permuted = sp.csc_matrix(self.gram[order][:, order])
            return lu.solve
        order, inverse = self._order
        assert self._permuted is not None
        solve = spd_lu(sp.csc_matrix(eye + rho * self._permuted), ordered=True).solve

        def permuted_solve(b: np.ndarray) -> np.ndarray:
            return solve(b[order])[inverse]

        return permuted_solve


class _Laplacian(Protocol):
    n: int
    components: np.ndarray

    def apply(self, beta: np.ndarray) -> np.ndarray: ...

    def laplacian_power_solve(self, r: np.ndarray, power: int) -> np.ndarray: ...


class SupportSolver:
    """Solves (1) of the module doc for any support, reusing one factorisation."""

    def __init__(self, op: _Laplacian, y: np.ndarray) -> None:
        self.op = op
        n = op.n
        comp = op.components
        self.comp = comp
        self.n_comp = int(comp.max()) + 1
        ground = np.full(self.n_comp, -1, dtype=np.int64)
        ground[comp[::-1]] = np.arange(n)[::-1]
        self.ground = ground
        self.ly = op.apply(y)
        self.y = y
        self._indicator = (
            sp.csr_matrix((np.ones(n), (comp, np.arange(n))), shape=(self.n_comp, n))
            if self.n_comp > 1
            else None
        )
        # explicit operators (not lattices): one sparse LU of M is faster than two of L
        self._m_lu: Callable[[np.ndarray], np.ndarray] | None = None
        matrix = getattr(op, "sparse_laplacian", None)
        if matrix is not None:
            lap = sp.csc_matrix(matrix)
            bump = sp.csc_matrix((np.ones(ground.size), (ground, ground)), shape=(n, n))
            try:
                self._m_lu = spd_lu(sp.csc_matrix(lap @ lap + bump)).solve
            except RuntimeError:  # numerically singular: use the pseudo-inverse form
                self._m_lu = None
        # cache: W = M⁻¹ restricted to the nodes seen so far (slot order), grown as needed
        self.max_nodes = int(np.sqrt(_MAX_ENTRIES))
        self.nodes = np.zeros(0, dtype=np.int64)
        self.w = np.zeros((0, 0))
        self.slot = np.full(n, -1, dtype=np.int64)
        # the current Schur complement: its keys, their kind (0 none, 1 D, 2 G), inverse
        self.k_nodes = np.zeros(0, dtype=np.int64)
        self.k_kind = np.zeros(n, dtype=np.int8)
        self.base_nodes = np.zeros(0, dtype=np.int64)
        self.base_kind = np.zeros(0, dtype=np.int8)
        self.base_kind_full = np.zeros(n, dtype=np.int8)
        self.base_lu: tuple[np.ndarray, np.ndarray] | None = None

    # M⁻¹ ---------------------------------------------------------------------------------
    def _component_sums(self, b: np.ndarray) -> np.ndarray:
        if self._indicator is None:
            return np.atleast_1d(b.sum(axis=0))[None] if b.ndim > 1 else np.array([b.sum()])
        return np.asarray(self._indicator @ b)

    def m_inv(self, b: np.ndarray) -> np.ndarray:
        """``M⁻¹ b`` for a vector or the columns of an ``n × k`` array (module doc)."""
        if self._m_lu is not None:
            return self._m_lu(np.asarray(b, dtype=np.float64))
        sums = self._component_sums(b)
        r = np.array(b, dtype=np.float64)
        r[self.ground] -= sums
        p = self.op.laplacian_power_solve(r, 2)
        return p + (sums - p[self.ground])[self.comp]

    def _ensure(self, nodes: np.ndarray) -> bool:
        """Extend the cached ``W`` by the entries of ``M⁻¹ e_k`` for ``nodes``; False if over
        the memory budget."""
        missing = np.unique(nodes[self.slot[nodes] < 0])
        if missing.size == 0:
            return True
        old = self.nodes.size
        total = old + missing.size
        if total > self.max_nodes:
            return False
        cols = np.empty((self.op.n, missing.size))
        for start in range(0, missing.size, _BATCH):
            chunk = missing[start : start + _BATCH]
            unit = np.zeros((self.op.n, chunk.size))
            unit[chunk, np.arange(chunk.size)] = 1.0
            cols[:, start : start + chunk.size] = self.m_inv(unit)
        if total > self.w.shape[0]:
            grown = np.empty((min(max(2 * total, 64), self.max_nodes),) * 2)
            grown[:old, :old] = self.w[:old, :old]
            self.w = grown
        self.nodes = np.concatenate([self.nodes, missing])
        block = cols[self.nodes]  # (M⁻¹)_{all cached, new}
        self.w[:total, old:total] = block
        self.w[old:total, :old] = block[:old].T
        self.slot[missing] = np.arange(old, total)
        return True

    # the Schur complement ------------------------------------------------------------------
    def _t_matrix(self, rows: np.ndarray, cols: np.ndarray) -> np.ndarray:
        """Entries of ``T = W − E_G E_Gᵀ`` (the kind of each key from ``self.k_kind``)."""
        t = self.w[np.ix_(self.slot[rows], self.slot[cols])]
        ground = (rows[:, None] == cols[None, :]) & (self.k_kind[rows] == 2)[:, None]
        t[ground] -= 1.0
        return t

    def _schur(
        self, keys: np.ndarray, kind: np.ndarray, fresh: bool
    ) -> Callable[[np.ndarray], np.ndarray] | None:
        """A solver ``r_K ↦ T_KK⁻¹ r_K`` for ``T = W_KK − E_G E_Gᵀ`` (``kind`` 1 for ``D``,
        2 for ``G``), the symmetric form of the module doc's system (``ν`` negated).

        ``T`` is factorised (dense LU) for a *base* key set ``K₀`` and reused while the keys
        change little: the current ``T_KK`` is the bordered matrix ``[T₀ U; Uᵀ V]`` whose
        extra columns are the added keys and unit vectors ``e_r`` for the deleted keys
        ``r`` (their multipliers absorb their equations and their unknowns are forced to
        zero), solved by a second, small Schur complement ``V − UᵀT₀⁻¹U``.  The base is
        refactorised when more than a third of the keys changed, or when ``fresh``.
        None if numerically singular.
        """
        kind_new = np.zeros(self.op.n, dtype=np.int8)
        kind_new[keys] = kind
        base = self.base_nodes
        stale = base.size == 0 or fresh
        if not stale:
            same = self.base_kind == kind_new[base]
            deleted = np.flatnonzero(~same)
            added = keys[kind_new[keys] != self.base_kind_full[keys]]
            stale = deleted.size + added.size > max(16, keys.size // 3)
        self.k_kind = kind_new
        try:
            if stale:
                self.base_nodes, self.base_kind = keys, kind.copy()
                self.base_kind_full = kind_new.copy()
                self.base_lu = sla.lu_factor(self._t_matrix(keys, keys), check_finite=False)
                if not np.all(np.isfinite(self.base_lu[0])):
                    raise ValueError
                lu = self.base_lu
                self.k_nodes = keys
                return lambda r: sla.lu_solve(lu, r, check_finite=False)
            lu = self.base_lu
            nb, na = base.size, added.size
            if deleted.size + na == 0:
                self.k_nodes = base
                return lambda r: sla.lu_solve(lu, r, check_finite=False)
            u = np.zeros((nb, deleted.size + na))
            u[deleted, np.arange(deleted.size)] = 1.0
            kept = np.flatnonzero(same)
            u[kept, deleted.size :] = self._t_matrix(base[kept], added)
            v = np.zeros((deleted.size + na,) * 2)
            v[deleted.size :, deleted.size :] = self._t_matrix(added, added)
            y = sla.lu_solve(lu, u, check_finite=False)
            small = sla.lu_factor(v - u.T @ y, check_finite=False)
            if not np.all(np.isfinite(small[0])):
                raise ValueError
        except (ValueError, np.linalg.LinAlgError):
            self.base_nodes = np.zeros(0, dtype=np.int64)
            return None
        self.k_nodes = np.concatenate([base[kept], added])
        nd = deleted.size

        def solve(r: np.ndarray) -> np.ndarray:
            b = np.zeros(nb)
            b[kept] = r[: kept.size]
            c = np.zeros(nd + na)
            c[nd:] = r[kept.size :]
            t = sla.lu_solve(lu, b, check_finite=False)
            z = sla.lu_solve(small, c - u.T @ t, check_finite=False)
            x = t - y @ z
            return np.concatenate([x[kept], z[nd:]])

        return solve

    # one support ---------------------------------------------------------------------------
    def solve(
        self, lam: float, sign: np.ndarray, start: np.ndarray | None = None
    ) -> tuple[np.ndarray, np.ndarray] | None:
        """``(β, u)`` solving (1) for the support and signs ``sign`` (``u`` not yet shifted
        on components without active nodes), or None if the cache would be too large or
        the system is numerically singular.  ``start`` (a previous ``u``) warm-starts the
        iterative refinement."""
        op, comp = self.op, self.comp
        active = sign != 0
        comp_active = np.bincount(comp, weights=active.astype(np.float64), minlength=self.n_comp)
        comp_active = comp_active > 0
        fixed = active.copy()
        fixed[self.ground[~comp_active]] = True
        d_nodes = np.flatnonzero(fixed)
        g_nodes = self.ground[comp_active & ~active[self.ground]]
        keys = np.concatenate([d_nodes, g_nodes])
        kind = np.concatenate([np.ones(d_nodes.size, np.int8), np.full(g_nodes.size, 2, np.int8)])
        if not self._ensure(keys):
            return None
        fresh = False
        schur = self._schur(keys, kind, fresh)
        if schur is None:
            return None

        def correction(rhs_free: np.ndarray) -> np.ndarray:
            """``x`` with ``x_D = 0`` and ``(L²)_FF x_F = rhs_F`` (rhs zero on ``D``)."""
            r = self.m_inv(rhs_free)
            coef = schur(r[self.k_nodes])
            rhs = rhs_free.copy()
            rhs[self.k_nodes] -= coef
            x = self.m_inv(rhs)
            x[d_nodes] = 0.0
            return x

        # u_A = λ s_A, u = 0 on the other fixed nodes, u_F from ``start`` (so that the
        # corrections are small), refined on the residual (L β)_F of (1)
        u = np.zeros(op.n) if start is None else np.array(start, dtype=np.float64)
        u[d_nodes] = 0.0
        u += lam * sign
        scale = float(np.max(np.abs(self.ly))) + lam * float(np.max(np.abs(op.apply(sign))))
        floor = _RESIDUAL * scale

        def residual(v: np.ndarray) -> tuple[np.ndarray, float]:
            r = op.apply(self.y - op.apply(v))  # L β: must vanish on F
            r[fixed] = 0.0
            return r, float(np.max(np.abs(r))) if r.size else 0.0

        res, best = residual(u)
        best_u = u
        for _ in range(_REFINE + 2):
            if best <= floor:
                break
            cand = best_u + correction(res)
            res_c, size = residual(cand)
            improved = size < best
            slow = size > 0.01 * best
            if improved:
                best_u, best, res = cand, size, res_c
            if slow:
                if fresh:
                    if not improved:
                        break
                else:  # the updated inverse has drifted: refactorise
                    fresh = True
                    schur = self._schur(keys, kind, fresh)
                    if schur is None:
                        return None
        u = best_u
        beta = self.y - op.apply(u)
        if best > 1e3 * floor or not (np.all(np.isfinite(beta)) and np.all(np.isfinite(u))):
            return None
        return beta, u
