"""Graph trend filtering with λ chosen by Stein's unbiased risk estimate.

Graph trend filtering of order ``k`` (Wang, Sharpnack, Smola & Tibshirani, "Trend
filtering on graphs", JMLR 17(105), 2016) estimates the mean of ``y = θ + N(0, σ²I)``
observed on the nodes of a graph by

    β̂ = argmin_β ½‖y − β‖² + λ‖Δ⁽ᵏ⁺¹⁾β‖₁,

with the graph difference operators ``Δ⁽¹⁾ = D`` (the oriented ``m × n`` edge incidence
matrix), ``Δ⁽²⁾ = DᵀD = L`` (the Laplacian) and in general

    Δ⁽ᵏ⁺¹⁾ = D L^{k/2}        for even k   (rows ↔ edges),
    Δ⁽ᵏ⁺¹⁾ = L^{(k+1)/2}      for odd k    (rows ↔ nodes).

Order 0 is the graph fused lasso (piecewise constant fits), order 1 gives piecewise
"linear" (harmonic) fits, order 2 piecewise "quadratic" ones.  The null space of every
``Δ⁽ᵏ⁺¹⁾`` is that of ``L``: one constant per connected component, so components are never
smoothed toward each other and ``λ ≥ λ_max`` gives the per-component means.

Solver
------
ADMM (Boyd, Parikh, Chu, Peleato & Eckstein 2011, §3 and §6.4.1 generalised lasso) on
``min ½‖y − β‖² + λ‖z‖₁  s.t.  Δβ = z`` with over-relaxation ``α`` (§3.4.3)::

    β ← (I + ρΔᵀΔ)⁻¹ (y + Δᵀ(ρz − w))          (ΔᵀΔ = L^{k+1}; cached factorisation)
    x ← αΔβ + (1 − α)z + w/ρ
    z ← S_{λ/ρ}(x),   w ← ρ (x − z) = ρ·clip(x, ±λ/ρ)

The factorisation of ``I + ρΔᵀΔ`` is a sparse LU (SuperLU) computed once per ρ and
cached; its pattern does not depend on ρ, so the minimum-degree ordering of the first
factorisation is kept and later ones skip it (``_sparse_spd.ReorderedSPD``).  On a 1-D
chain or 2-D lattice graph (detected from the edge list) the system is instead
diagonalised by the orthonormal DCT-II, since the Neumann lattice Laplacian has the DCT
basis as eigenvectors.  ρ is a power of two and adapts by residual balancing (Boyd et al.
§3.4.1, on relative residuals), so only a few factorisations are ever made.  For order 0 the
update runs in place, in cache-sized chunks (on a 10⁶-node lattice the two DCTs and a few
passes over memory are all an iteration costs), and the fused groups of a lattice are
found by labelling an image.  For orders ≥ 1 the iteration is Anderson-accelerated
(Walker & Ni 2011; Zhang, Peng, Rao & Deng 2019).

Once the iterate's support ``A = {r : z_r ≠ 0}`` and signs ``s`` have (nearly) settled
they are *polished* into the exact solution for that support (as OSQP does, Stellato et
al. 2020): the minimiser of ``½‖y − β‖² + λ sᵀΔ_Aβ`` subject to ``Δ_Zβ = 0`` (``Z`` the
other rows),

    β_A,s = Π_{null(Δ_Z)} (y − λ Δ_Aᵀ s),

which for order 0 is the mean of ``y − λDᵀs`` over each fused group (connected component
of the graph restricted to the fused edges ``Z``), and for higher orders the solution of
a sparse saddle-point system ``[I Cᵀ; C 0][β; v] = [y − λΔ_Aᵀs; 0]`` with ``C`` a row
basis of ``Δ_Z``.  For odd orders the multipliers ``v`` are unique, so ``u = (λs, v)`` is
an exact dual point, and the support is repaired by the primal-dual active set method
(Hintermüller, Ito & Kunisch 2002), which on a path warm-started from the previous λ's
support usually finishes without any ADMM iteration.  For order 1 the faces of all
active-set steps are solved by :class:`._tf_order1.FaceSolver` (conjugate gradients on the
face's normal equations, preconditioned by a cached sparse factorisation of a nearby face,
one fill-reducing ordering for all of them; see below); a step adds only the violators
that are the largest within two hops (neighbouring multipliers leave the box together, but
one kink suffices), and on cycling changes only the worst violator.

Orders 1 and 2 with ``solver="auto"``: the box-constrained dual (:mod:`._tf_dual_newton`),
warm-started from the last λ's dual point.  An active-set phase with the local-maximum
entering rule above solves faces; a face (the free rows ``R`` of the dual) is solved

* on a chain by banded Cholesky of the normal equations (refined on the face residual),
  else banded LU of the augmented system;
* for order 1 on any other graph by :class:`._tf_order1.FaceSolver`: the normal equations
  ``(L²)_RR d = (Lβ)_R`` by conjugate gradients, preconditioned by a sparse factorisation
  (SuperLU, no pivoting) of ``(L²)_{R₀R₀}`` for an earlier face ``R₀``, refactorised at the
  current face when more than a few nodes moved or CG stalls.  Every ``(L²)_RR`` is a
  principal submatrix of ``L²``, so one minimum-degree ordering of ``L²`` (computed once)
  serves all of them without ordering cost, and the preconditioned matrix is the identity
  plus a matrix of rank about twice the number of moved nodes;
* otherwise (order 2 on forests, or when CG does not reach rounding) by sparse LU of the
  augmented system.

Order 2 first locates the support by a primal-dual interior-point method (Mehrotra's
predictor-corrector, :mod:`._tf_dual_ipm`; each step one banded LU of the augmented system
``[I Δᵀ; Δ −J]`` on a chain, ``O(n)``, which stays well conditioned where the normal
equations ``ΔΔᵀ + J``, of condition ``n⁶``, do not; a sparse LU elsewhere), and the active
set then finishes it in a step or two; order 1 starts with the active set, which usually
finishes at once from the last support, and calls the interior-point method only when it
cycles.  Projected Newton (Bertsekas 1982) is the last resort.  For order 2 on a chain the
fit is finally replaced by a nearby point of its face that floating point represents
exactly (:mod:`._tf_exact_face`), so that the certified gap is not rounding near ``λ_max``
(where ``λ`` is 10¹⁰ on 4,000 nodes) and the zero rows, hence df, are exact.  No dense
factorisation or dense solve is made on these paths.  Its fits report ``rounds``
(active-set, interior-point or Newton steps) and ``iterations = 0``; a λ it cannot certify
within ``tol`` goes to ADMM as above.

Order 0 exactly.  With numba installed (``solver="auto"`` or ``"exact"``), order 0 is not
solved by ADMM but exactly, by divide and conquer on minimum cuts (:mod:`._graph_tv`, cuts
from the compiled push-relabel of :mod:`._maxflow`), warm-started along the path from the
previous λ's jumps and flow; its flow certifies the solution to rounding and its fused
groups give the exact df.  On a chain (a path graph labelled in order) order 0 is 1-D TV
denoising, solved by the direct algorithm of :mod:`._tv1d` with or without numba.  On an
``H × W`` lattice (``H, W ≥ 2``) ``solver="auto"`` solves order 0 by accelerated
alternating exact 1-D TV solves over the rows and the columns (:mod:`._tv2d`, compiled),
whose flows certify the gap to ``tol`` and whose polished solution gives the fused groups;
a λ it does not certify within its iteration budget goes to the minimum cuts, warm-started
from its jumps and flow.  A λ that cannot be certified within ``tol`` goes to ADMM.

Stopping rule: a certified duality gap.  ADMM's ``w`` always satisfies ``‖w‖∞ ≤ λ``, so
it is dual feasible (as are the clipped multipliers above), and

    P(β) = ½‖y − β‖² + λ‖Δβ‖₁ ≥ P* ≥ D(u) = ½‖y‖² − ½‖y − Δᵀu‖²;

stop when ``min P − max D ≤ tol · min P`` over all primal and dual candidates.  The
returned estimate is then within ``tol`` relative objective of the optimum.  ADMM's
primal and dual residuals drive the ρ adaptation.

Path and λ_max.  The least-norm dual solution at the null-space projection is
``u = (Δᵀ)⁺(y − Πy) = Δx`` with ``L^{k+1}x = y − Πy`` (solved with a grounded Laplacian,
or the DCT on lattices); it is dual feasible for every ``λ ≥ λ_max = ‖u‖∞``, where the
solution is therefore exactly ``Πy`` (the per-component means), and it warm-starts the
path.

Degrees of freedom and SURE
---------------------------
For the generalised lasso the divergence of ``y ↦ β̂`` is, almost surely, the nullity of
``Δ`` restricted to the rows that are zero at the solution (Tibshirani & Taylor, "Degrees
of freedom in lasso problems", Ann. Statist. 2012; Wang et al. 2016, §3).  Writing
``Z = {r : (Δβ̂)_r = 0}``, this nullity is combinatorial for graph operators, because
``L^q`` is injective on ``range(L)`` and so ``rank(R_Z D L^q) = rank(D_Z)`` and
``rank(R_Z L^q) = rank(L_Z)``:

* even k: ``df`` = number of connected components of the graph ``(V, Z)`` (for order 0:
  the number of fused groups);
* odd k: ``df = |A| + c_Z``, with ``A`` the nodes where ``L^{(k+1)/2}β̂ ≠ 0`` and ``c_Z``
  the number of connected components of the graph containing no such node (a proper
  principal submatrix of a connected component's Laplacian is positive definite).

Since σ is public and exact, SURE (Stein 1981)

    SURE(λ) = ‖y − β̂_λ‖² − dσ² + 2σ² df(λ)

is an unbiased estimate of the total squared error ``E‖β̂_λ − θ‖²``.  ``lam="sure"`` solves
a warm-started geometric path from ``λ_max`` (where the solution is the projection onto
the null space) down and returns the λ with the smallest SURE.
"""

from __future__ import annotations

import functools
import math
import numbers
import time
import warnings
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import scipy.sparse as sp
from scipy import ndimage
from scipy.fft import dctn, idctn
from scipy.sparse.csgraph import connected_components, minimum_spanning_tree

from .._optional import install_hint
from .._validation import REAL, as_real_array, check_interval
from . import _graph_tv, _tv2d
from ._sparse_spd import ReorderedSPD
from ._sparse_spd import spd_lu as _spd_lu
from ._tf_dual_newton import DualNewton, single_change
from ._tf_order1 import FaceSolver
from ._tf_weighted import WeightedPath
from ._tv1d import tv1d
from .graph import Graph, component_roots
from .result import Denoised, check_noise
from .structure import graph_of

__all__ = ["TrendFilterConvergenceWarning", "trend_filter"]

ORDERS = (0, 1, 2)

# ADMM (tuned on the Manhattan and lattice benchmarks, see benchmarks/bench_denoise.py).
# ALPHA: over-relaxation (Boyd et al. §3.4.3 suggest 1.5–1.8).  MU: residual balancing
# threshold (Boyd et al. §3.4.1 eq. 3.13; τ = 2 since ρ is a power of two), applied every
# ADAPT_EVERY iterations.  RHO_SCALE: the initial ρ is RHO_SCALE · λ / rms(Δy).  The gap
# is checked every CHECK_EVERY iterations.  ANDERSON: memory of Anderson acceleration per
# order (0 = off: it does not pay for order 0); AA_RESET: restart when ‖g‖ grows so much.
_ALPHA = 1.6
_MU = 2.0
_ADAPT_EVERY = 10
# RHO_STEP_LU0: order 0 with a sparse LU moves ρ by factors of 2^RHO_STEP_LU0.  With 2
# (factors of 4: fewer factorisations) the benchmark path was 5.0-5.6x cvxpy instead of
# 4.5-4.6x, but on the unpruned Manhattan graph with the taxi counts 2 of 30 SURE paths
# stalled at max_iter (30.8 s against 10.3 s for the 30 paths), so the default stays 1.
_RHO_STEP_LU0 = 1
# The element-wise part of an ADMM iteration runs on chunks of this many rows (4 arrays of
# 512 KiB: cache-resident, so large lattices make one pass over memory instead of seven).
_CHUNK = 65_536
_CHECK_EVERY = 3
_RHO_SCALE = (8.0, 4.0, 4.0)
_LU_CACHE = 3
_ANDERSON = (0, 10, 10)
_AA_RESET = 10.0
# Polishing.  Start once at most SETTLED of the support moved since the last check, and
# spend at most POLISH_BUDGET[order] of the ADMM time on it.  Orders >= 1 factorise a sparse
# saddle-point matrix (regularised by KKT_REG, KKT_REFINE refinement steps), skipped above
# POLISH_MAX_N nodes; order 1 with at most HARMONIC_MAX free nodes uses harmonic
# extensions instead.  PDAS (odd orders): at most PDAS_STEPS steps, adding at most
# max(PDAS_MIN_ENTER, PDAS_ENTER × support size) rows per step, and (order 1) only rows
# whose violation is the largest within PDAS_LOCAL hops.
_SETTLED = 0.02
_POLISH_BUDGET = (0.1, 0.3, 0.3)
_POLISH_MAX_N = 200_000
_KKT_REG = 1e-10
_KKT_REFINE = 3
_HARMONIC_MAX = 100
_PDAS_STEPS = 30
_PDAS_ENTER = 0.25
_PDAS_MIN_ENTER = 1
_PDAS_LOCAL = 2
# Order 0 on a lattice (_tv2d): at most LATTICE_MAX_ITER accelerated alternating iterations
# per λ (each two passes of 1-D TV over the image) before the minimum cuts take over.
_LATTICE_MAX_ITER = 2_000
# Default SURE path: n_lambdas values from λ_max down to LAM_MIN_RATIO[order] · λ_max
# (λ_max grows with the order), extended while SURE still falls, at most to LAM_FLOOR.
_LAM_MIN_RATIO = (1e-3, 1e-3, 1e-4)
_LAM_FLOOR = 1e-12
# Orders 1 and 2 on the box-constrained dual (_tf_dual_newton) with solver="auto": on
# banded operators (chains) of any size, on other graphs up to NEWTON_MAX_N nodes (each step
# is a sparse LU of the augmented system there).
_NEWTON_MAX_N = 50_000


class TrendFilterConvergenceWarning(UserWarning):
    """ADMM reached ``max_iter`` before the duality gap fell below ``tol``."""


# --------------------------------------------------------------------------------------
# The difference operator Δ^(k+1) and the solver of (I + ρ ΔᵀΔ) β = b
# --------------------------------------------------------------------------------------


class _SparseDifference:
    """``Δ⁽ᵏ⁺¹⁾`` as an explicit sparse matrix; ``(I + ρΔᵀΔ)⁻¹`` by cached sparse LU."""

    kind = "sparse LU"

    def __init__(self, graph: Graph, order: int) -> None:
        self.n = graph.n
        self.order = order
        self.edges = graph.edges
        self.components = graph.components
        d = graph.incidence
        lap = graph.laplacian
        mat = d if order % 2 == 0 else lap
        for _ in range(order // 2 if order % 2 == 0 else (order - 1) // 2):
            mat = mat @ lap
        mat = sp.csr_matrix(mat)
        mat.eliminate_zeros()
        self.matrix = mat
        self.matrix_t = mat.T.tocsr()
        self.m = mat.shape[0]
        self._laplacian = lap
        self._gram: ReorderedSPD | None = None
        self._grounded: tuple[np.ndarray, Callable[[np.ndarray], np.ndarray] | None] | None = None
        self._lu: OrderedDict[float, Callable[[np.ndarray], np.ndarray]] = OrderedDict()
        self._tails: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None

    @property
    def sparse_laplacian(self) -> sp.csr_matrix:
        return self._laplacian

    def fused_components(self, zero: np.ndarray) -> tuple[int, np.ndarray]:
        """Connected components of the graph restricted to the edges ``zero`` (even orders).

        The adjacency matrix is assembled directly in CSR form from the edges sorted by
        their first node (no COO conversion) and searched as a directed graph for weakly
        connected components (no symmetrisation): about half the time of
        :func:`_n_components`, which matters for the frequent polishes of order 0.
        """
        if self._tails is None:
            by_tail = np.argsort(self.edges[:, 0], kind="stable")
            dtype = np.int32 if max(self.n, self.edges.shape[0]) < 2**31 - 1 else np.int64
            ends = self.edges[by_tail].astype(dtype)
            self._tails = (by_tail, ends[:, 0].copy(), ends[:, 1].copy())
        by_tail, tails, heads = self._tails
        keep = np.flatnonzero(zero[by_tail])
        indptr = np.zeros(self.n + 1, dtype=tails.dtype)
        np.cumsum(np.bincount(tails[keep], minlength=self.n), out=indptr[1:])
        adj = sp.csr_matrix((np.ones(keep.size), heads[keep], indptr), shape=(self.n, self.n))
        n_comp, labels = connected_components(adj, directed=True, connection="weak")
        return int(n_comp), labels

    def apply(self, beta: np.ndarray, out: np.ndarray | None = None) -> np.ndarray:
        """``Δβ`` (``out`` is a hint only: the result is always a new array here)."""
        return self.matrix @ beta

    def adjoint(self, u: np.ndarray) -> np.ndarray:
        return self.matrix_t @ u

    def solver(self, rho: float, overwrite: bool = False) -> Callable[[np.ndarray], np.ndarray]:
        """``b ↦ (I + ρΔᵀΔ)⁻¹ b``; the last few factorisations are cached.  (``b`` is never
        modified; ``overwrite`` only permits it, as for the lattice solver.)"""
        if rho in self._lu:
            self._lu.move_to_end(rho)
            return self._lu[rho]
        if self._gram is None:
            self._gram = ReorderedSPD(self.matrix_t @ self.matrix)
        solve = self._gram.factor(rho)
        self._lu[rho] = solve
        while len(self._lu) > _LU_CACHE:
            self._lu.popitem(last=False)
        return solve

    def laplacian_power_solve(self, r: np.ndarray, power: int) -> np.ndarray:
        """The solution ``x ⊥ null(L)`` of ``L^power x = r`` for ``r ⊥ null(L)`` (a vector or
        the columns of an ``n × k`` array), by a grounded Laplacian (one node per component
        removed; its sparse LU is cached)."""
        if self._grounded is None:
            keep = np.ones(self.n, dtype=bool)
            keep[component_roots(self.components)] = False
            idx = np.flatnonzero(keep)
            solve = _spd_lu(sp.csc_matrix(self._laplacian[idx][:, idx])).solve if idx.size else None
            self._grounded = (idx, solve)
        idx, solve = self._grounded
        if solve is None:
            return np.zeros_like(r, dtype=np.float64)
        x = r
        for _ in range(power):
            full = np.zeros(r.shape)
            full[idx] = solve(np.asarray(x[idx], dtype=np.float64))
            x = _center(full, self.components)
        return x


class _LatticeDifference:
    """``Δ⁽ᵏ⁺¹⁾`` on an ``H × W`` lattice (row-major nodes), solved exactly by the DCT-II.

    The lattice Laplacian is ``L = L_H ⊗ I + I ⊗ L_W`` with path Laplacians whose
    eigenvectors are the orthonormal DCT-II basis and eigenvalues ``2 − 2cos(πj/N)``, so
    ``(I + ρL^{k+1})⁻¹ = C diag(1 / (1 + ρ μ^{k+1})) Cᵀ`` costs two FFTs.
    """

    kind = "lattice DCT"

    def __init__(self, shape: tuple[int, int], order: int) -> None:
        h, w = shape
        self.shape = shape
        self.n = h * w
        self.order = order
        idx = np.arange(self.n, dtype=np.int64).reshape(h, w)
        horizontal = np.stack([idx[:, :-1].ravel(), idx[:, 1:].ravel()], axis=1)
        vertical = np.stack([idx[:-1, :].ravel(), idx[1:, :].ravel()], axis=1)
        self.edges = np.concatenate([horizontal, vertical])  # row order of D below
        self._n_horizontal = horizontal.shape[0]
        self.components = np.zeros(self.n, dtype=np.int64)
        self.m = self.edges.shape[0] if order % 2 == 0 else self.n
        mu_h = 2.0 - 2.0 * np.cos(np.pi * np.arange(h) / h)
        mu_w = 2.0 - 2.0 * np.cos(np.pi * np.arange(w) / w)
        self._eig = mu_h[:, None] + mu_w[None, :]
        self._eig[0, 0] = 0.0
        self._gram_eig = self._eig ** (order + 1)
        self._matrix: sp.csr_matrix | None = None

    def _d(self, beta: np.ndarray, out: np.ndarray | None = None) -> np.ndarray:
        h, w = self.shape
        b = beta.reshape(self.shape)
        if out is None:
            out = np.empty(self.edges.shape[0])
        np.subtract(b[:, :-1], b[:, 1:], out=out[: self._n_horizontal].reshape(h, w - 1))
        np.subtract(b[:-1, :], b[1:, :], out=out[self._n_horizontal :].reshape(h - 1, w))
        return out

    def _dt(self, u: np.ndarray) -> np.ndarray:
        h, w = self.shape
        uh = u[: self._n_horizontal].reshape(h, w - 1)
        uv = u[self._n_horizontal :].reshape(h - 1, w)
        out = np.empty(self.shape)
        if w > 1:
            out[:, 0] = uh[:, 0]
            np.subtract(uh[:, 1:], uh[:, :-1], out=out[:, 1:-1])
            out[:, -1] = -uh[:, -1]
        else:
            out[:] = 0.0
        if h > 1:
            out[0, :] += uv[0, :]
            out[1:-1, :] += uv[1:, :]
            out[1:-1, :] -= uv[:-1, :]
            out[-1, :] -= uv[-1, :]
        return out.ravel()

    def _lap(self, beta: np.ndarray) -> np.ndarray:
        return self._dt(self._d(beta))

    def column_image(self, u: np.ndarray) -> np.ndarray:
        """``D_vᵀu_v``: the part of ``Dᵀu`` from the vertical edges (order 0)."""
        v = np.zeros(self.edges.shape[0])
        v[self._n_horizontal :] = u[self._n_horizontal :]
        return self._dt(v)

    def fused_components(self, zero: np.ndarray) -> tuple[int, np.ndarray]:
        """As :meth:`_SparseDifference.fused_components`, by labelling an image: nodes at
        the even pixels of a ``(2H − 1) × (2W − 1)`` grid, each edge at the pixel between
        its ends, set iff the edge is in ``zero`` (4-connectivity; the odd-odd pixels stay
        empty).  Several times faster than a sparse-graph search at 10⁶ nodes."""
        h, w = self.shape
        img = np.zeros((2 * h - 1, 2 * w - 1), dtype=bool)
        img[::2, ::2] = True
        img[::2, 1::2] = zero[: self._n_horizontal].reshape(h, w - 1)
        img[1::2, ::2] = zero[self._n_horizontal :].reshape(h - 1, w)
        labels, n_comp = ndimage.label(img)
        return int(n_comp), labels[::2, ::2].ravel() - 1

    def apply(self, beta: np.ndarray, out: np.ndarray | None = None) -> np.ndarray:
        """``Δβ``; order 0 writes it into ``out`` if given (a buffer of length ``m``)."""
        if self.order == 0:
            return self._d(beta, out)
        x = beta
        for _ in range(self.order // 2):
            x = self._lap(x)
        return self._d(x) if self.order % 2 == 0 else self._lap(x)

    def adjoint(self, u: np.ndarray) -> np.ndarray:
        x = self._dt(u) if self.order % 2 == 0 else self._lap(u)
        for _ in range(self.order // 2):
            x = self._lap(x)
        return x

    def solver(self, rho: float, overwrite: bool = False) -> Callable[[np.ndarray], np.ndarray]:
        """``b ↦ (I + ρΔᵀΔ)⁻¹ b``.  With ``overwrite`` the solve may destroy ``b`` (float64,
        contiguous): both transforms then run in place on its buffer, with no temporaries."""
        scale = 1.0 / (1.0 + rho * self._gram_eig)

        def solve(b: np.ndarray) -> np.ndarray:
            coef = dctn(b.reshape(self.shape), type=2, norm="ortho", overwrite_x=overwrite)
            coef *= scale
            return idctn(coef, type=2, norm="ortho", overwrite_x=True).ravel()

        return solve

    def laplacian_power_solve(self, r: np.ndarray, power: int) -> np.ndarray:
        """As :meth:`_SparseDifference.laplacian_power_solve`, diagonal in the DCT basis."""
        with np.errstate(divide="ignore"):
            inv = np.where(self._eig > 0, 1.0 / self._eig**power, 0.0)
        inv[0, 0] = 0.0
        grid = r.reshape(self.shape + r.shape[1:])
        if r.ndim > 1:
            inv = inv[:, :, None]
        coef = dctn(grid, type=2, norm="ortho", axes=(0, 1)) * inv
        return idctn(coef, type=2, norm="ortho", axes=(0, 1)).reshape(r.shape)

    @property
    def matrix(self) -> sp.csr_matrix:
        if self._matrix is None:
            m = self.edges.shape[0]
            rows = np.repeat(np.arange(m), 2)
            d = sp.csr_matrix(
                (np.tile([1.0, -1.0], m), (rows, self.edges.ravel())), shape=(m, self.n)
            )
            lap = sp.csr_matrix(d.T @ d)
            mat = d if self.order % 2 == 0 else lap
            for _ in range(self.order // 2 if self.order % 2 == 0 else (self.order - 1) // 2):
                mat = mat @ lap
            self._matrix = sp.csr_matrix(mat)
        return self._matrix


_Operator = _SparseDifference | _LatticeDifference

_LATTICE_ALGORITHM = "accelerated alternating 1-D TV over rows and columns (Chambolle & Pock 2015)"


def _center(x: np.ndarray, comp: np.ndarray) -> np.ndarray:
    """Subtract each connected component's mean (of a vector, or of each column of an
    ``n × k`` array): the projection onto ``null(L)⊥``."""
    n_comp = int(comp.max()) + 1
    counts = np.bincount(comp, minlength=n_comp).astype(np.float64)
    if x.ndim == 1:
        sums = np.bincount(comp, weights=x, minlength=n_comp)
        return x - (sums / counts)[comp]
    if n_comp == 1:
        return x - x.mean(axis=0)
    ind = sp.csr_matrix(
        (np.ones(comp.size), (comp, np.arange(comp.size))), shape=(n_comp, comp.size)
    )
    return x - ((ind @ x) / counts[:, None])[comp]


def _lattice_shape(graph: Graph) -> tuple[int, int] | None:
    """``(H, W)`` if the edges are exactly those of a row-major ``H × W`` lattice."""
    n, edges = graph.n, graph.edges
    if n < 3 or edges.shape[0] == 0:
        return None
    diff = edges[:, 1] - edges[:, 0]
    width = int(diff.max())
    if width == 1:
        width = n  # a chain: one row
    if n % width:
        return None
    height = n // width
    horizontal = diff == 1
    vertical = diff == width
    if not np.all(horizontal | vertical) or width == 1:
        return None
    if int(horizontal.sum()) != height * (width - 1):
        return None
    if int(vertical.sum()) != (height - 1) * width:
        return None
    if np.any(edges[horizontal, 0] % width == width - 1):
        return None
    return (height, width)  # unique edges of the right kinds and counts: exactly the lattice


def _make_operator(graph: Graph, order: int) -> _Operator:
    shape = _lattice_shape(graph)
    if shape is not None:
        return _LatticeDifference(shape, order)
    return _SparseDifference(graph, order)


# --------------------------------------------------------------------------------------
# Structure of a solution: fused rows, degrees of freedom, polishing
# --------------------------------------------------------------------------------------


def _n_components(n: int, edges: np.ndarray) -> tuple[int, np.ndarray]:
    adj = sp.csr_matrix((np.ones(edges.shape[0]), (edges[:, 0], edges[:, 1])), shape=(n, n))
    n_comp, labels = connected_components(adj, directed=False)
    return int(n_comp), labels


def _degrees_of_freedom(op: _Operator, zero: np.ndarray) -> int:
    """Nullity of ``Δ_Z`` (``Z`` = rows in ``zero``): the exact divergence of β̂ (module doc)."""
    if op.order % 2 == 0:
        return op.fused_components(zero)[0]
    comp = op.components
    n_comp = int(comp.max()) + 1
    has_active = np.bincount(comp, weights=(~zero).astype(np.float64), minlength=n_comp) > 0
    return int(np.count_nonzero(~zero)) + int(np.count_nonzero(~has_active))


def _shift_free_components(op: _Operator, u: np.ndarray, zero: np.ndarray) -> np.ndarray:
    """Odd orders: on a component whose rows are all zero, multipliers are unique only up
    to a constant (its rows of ``L^q`` sum to zero); shift them to the mid-range."""
    comp = op.components
    n_comp = int(comp.max()) + 1
    has_active = np.bincount(comp, weights=(~zero).astype(np.float64), minlength=n_comp) > 0
    if has_active.all():
        return u
    hi = np.full(n_comp, -np.inf)
    lo = np.full(n_comp, np.inf)
    np.maximum.at(hi, comp, u)
    np.minimum.at(lo, comp, u)
    shift = np.where(has_active, 0.0, -(hi + lo) / 2)
    return u + shift[comp]


def _polish_groups(
    op: _Operator, y: np.ndarray, lam: float, sign: np.ndarray, zero: np.ndarray
) -> np.ndarray:
    """Order 0: the exact minimiser for fused edges ``zero`` and jump signs ``sign``.

    On each fused group ``G`` (component of the graph with edges ``zero``) the value is
    ``mean_G(y − λDᵀs)`` (Hoefling 2010, the fused lasso solution for a known partition).
    """
    target = y - lam * op.adjoint(sign)
    n_comp, labels = op.fused_components(zero)
    sums = np.bincount(labels, weights=target, minlength=n_comp)
    counts = np.bincount(labels, minlength=n_comp)
    return (sums / counts)[labels]


def _basis_rows(op: _Operator, zero: np.ndarray) -> np.ndarray:
    """Rows of ``Δ_Z`` that are linearly independent and span its row space (module doc)."""
    if op.order % 2 == 0:
        idx = np.flatnonzero(zero)
        e = op.edges[idx]
        weights = sp.csr_matrix((idx + 1.0, (e[:, 0], e[:, 1])), shape=(op.n, op.n))
        forest = minimum_spanning_tree(weights).tocoo()
        return np.sort(np.rint(forest.data).astype(np.int64) - 1)
    comp = op.components
    n_comp = int(comp.max()) + 1
    has_active = np.bincount(comp, weights=(~zero).astype(np.float64), minlength=n_comp) > 0
    keep = zero.copy()
    keep[component_roots(comp)[~has_active]] = False  # one dependent row per all-zero component
    return np.flatnonzero(keep)


def _polish_harmonic(
    op: _Operator, target: np.ndarray, rows: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
    """Order 1 with few free nodes: ``null(L_Z)`` is spanned by harmonic extensions.

    With ``F`` the nodes outside the row basis ``Z'`` (the active nodes plus one per
    all-zero component), ``L_{Z'Z'}`` is positive definite and ``β ∈ null(L_{Z'})`` iff
    ``β_{Z'} = −L_{Z'Z'}⁻¹ L_{Z'F} β_F``: the columns of ``H = [−L_{Z'Z'}⁻¹L_{Z'F}; I]``
    span it, ``β = H (HᵀH)⁻¹ Hᵀ target`` and the multipliers are
    ``v = L_{Z'Z'}⁻¹ (target − β)_{Z'}``.  Costs one sparse factorisation of a principal
    submatrix of ``L`` (as sparse as ``L``) and ``|F|`` solves.
    """
    lap = sp.csr_matrix(op.matrix)
    free = np.ones(op.n, dtype=bool)
    free[rows] = False
    free_idx = np.flatnonzero(free)
    sub = lap[rows]
    try:
        lu = _spd_lu(sp.csc_matrix(sub[:, rows]))
    except RuntimeError:
        return None
    basis = np.zeros((op.n, free_idx.size))
    basis[rows] = -lu.solve(sub[:, free_idx].toarray())
    basis[free_idx, np.arange(free_idx.size)] = 1.0
    coef = np.linalg.lstsq(basis, target, rcond=None)[0]
    beta = basis @ coef
    mult = lu.solve((target - beta)[rows])
    if not (np.all(np.isfinite(beta)) and np.all(np.isfinite(mult))):
        return None
    return beta, rows, mult


def _polish_saddle(
    op: _Operator, y: np.ndarray, lam: float, sign: np.ndarray, zero: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
    """Orders ≥ 1: ``Π_{null(Δ_Z)}(y − λΔᵀs)`` from the saddle-point system.

    ``[I Cᵀ; C 0] [β; v] = [y − λΔᵀs; 0]`` with ``C`` a row basis of ``Δ_Z``; ``v`` are the
    multipliers of the rows ``C`` (returned with their row indices).
    """
    rows = _basis_rows(op, zero)
    target = y - lam * op.adjoint(sign)
    if rows.size == 0:
        return target, rows, np.zeros(0)
    if op.order == 1 and op.n - rows.size <= _HARMONIC_MAX:
        return _polish_harmonic(op, target, rows)
    c = op.matrix[rows]
    eye_n = sp.identity(op.n, format="csc")
    exact = sp.csc_matrix(sp.bmat([[eye_n, c.T], [c, None]], format="csc"))
    # The regularised matrix [I Cᵀ; C −εI] is quasi-definite, so its LDLᵀ-like LU needs no
    # pivoting and keeps the fill of a symmetric minimum-degree ordering; iterative
    # refinement against the exact matrix removes the O(ε) error (as in OSQP's polish).
    reg = sp.csc_matrix(exact - _KKT_REG * sp.diags(np.r_[np.zeros(op.n), np.ones(rows.size)]))
    try:
        lu = _spd_lu(reg)
    except RuntimeError:  # numerically singular: skip this polish
        return None
    rhs = np.concatenate([target, np.zeros(rows.size)])
    sol = lu.solve(rhs)
    for _ in range(_KKT_REFINE):
        sol += lu.solve(rhs - exact @ sol)
    if not np.all(np.isfinite(sol)):
        return None
    return sol[: op.n], rows, sol[op.n :]


# --------------------------------------------------------------------------------------
# ADMM for one λ
# --------------------------------------------------------------------------------------


class _Anderson:
    """Type-II Anderson acceleration of a fixed-point map ``x ↦ T(x)`` (Walker & Ni 2011).

    Given the input ``x_k`` and output ``T(x_k)``, returns the next input
    ``T(x_k) − (ΔX + ΔG) γ`` with ``γ = argmin ‖g_k − ΔG γ‖`` (``g = T(x) − x``, ``ΔX``,
    ``ΔG`` the last ``memory`` differences), solved through the small Gram matrix with a
    tiny Tikhonov term.  For ADMM this is the scheme of Zhang, Peng, Rao & Deng,
    "Accelerating ADMM for efficient simulation and optimization" (2019) and Fu, Zhang &
    Boyd, "Anderson accelerated Douglas–Rachford splitting" (2020).  The history restarts
    when the residual ``‖g‖`` jumps (a simple safeguard) and whenever ρ changes.
    """

    def __init__(self, size: int, memory: int) -> None:
        self.memory = memory
        self.dx = np.zeros((memory, size))
        self.dg = np.zeros((memory, size))
        self.gram = np.zeros((memory, memory))
        self.reset()

    def reset(self) -> None:
        self.count = 0
        self.slot = 0
        self.prev_x: np.ndarray | None = None
        self.prev_g: np.ndarray | None = None
        self.prev_res = math.inf

    def step(self, x: np.ndarray, fx: np.ndarray) -> np.ndarray:
        g = fx - x
        res = float(np.linalg.norm(g))
        if res > _AA_RESET * self.prev_res:
            self.reset()
        self.prev_res = res
        if self.prev_x is not None and self.prev_g is not None:
            i = self.slot
            np.subtract(x, self.prev_x, out=self.dx[i])
            np.subtract(g, self.prev_g, out=self.dg[i])
            k = min(self.count + 1, self.memory)
            row = self.dg[:k] @ self.dg[i]
            self.gram[i, :k] = row
            self.gram[:k, i] = row
            self.count = k
            self.slot = (i + 1) % self.memory
        self.prev_x, self.prev_g = x, g
        k = self.count
        if k == 0:
            return fx
        gram = self.gram[:k, :k]
        reg = 1e-10 * float(np.trace(gram)) / k + 1e-300
        try:
            gamma = np.linalg.solve(gram + reg * np.eye(k), self.dg[:k] @ g)
        except np.linalg.LinAlgError:
            self.reset()
            return fx
        return fx - gamma @ self.dx[:k] - gamma @ self.dg[:k]


@dataclass
class _Fit:
    lam: float
    beta: np.ndarray
    zero: np.ndarray  # rows of Δ that are zero at beta
    df: int
    objective: float
    gap: float  # relative duality gap (P − D) / P
    iterations: int
    converged: bool
    polished: bool = False
    rounds: int = 0  # minimum cuts of the exact order-0 solver (0: ADMM)
    admm: bool = False  # solved by ADMM (the lattice solver counts iterations too)


@dataclass
class _State:
    """Warm start carried along the λ path: split variable, dual, log₂ ρ."""

    z: np.ndarray
    w: np.ndarray
    log2_rho: int
    sign: np.ndarray | None = None  # support of the last exact (polished) solution


class _Solver:
    def __init__(self, y: np.ndarray, op: _Operator, tol: float, max_iter: int) -> None:
        self.y = y
        self.op = op
        self.tol = tol
        self.max_iter = max_iter
        self.half_yy = 0.5 * float(y @ y)
        dy = op.apply(y)
        self.scale_dy = float(np.sqrt(np.mean(dy * dy))) if dy.size else 0.0
        self.y_scale = float(np.max(np.abs(y))) if y.size else 0.0
        # log₂ of the factor by which ρ moves (module constants above)
        self.rho_step = _RHO_STEP_LU0 if op.order == 0 and isinstance(op, _SparseDifference) else 1
        self.faces: FaceSolver | None = None  # order 1: the faces of the active-set steps

    # objective and dual -------------------------------------------------------------
    def primal(self, beta: np.ndarray, dbeta: np.ndarray, lam: float) -> float:
        r = self.y - beta
        return 0.5 * float(r @ r) + lam * float(np.abs(dbeta).sum())

    def dual(self, w: np.ndarray) -> float:
        r = self.y - self.op.adjoint(w)
        return self.half_yy - 0.5 * float(r @ r)

    def zero_rows(self, dbeta: np.ndarray, support_zero: np.ndarray) -> np.ndarray:
        """Rows that are zero at the solution: the iterate's support, plus rows whose value
        is rounding noise (a polished solution, or exactly equal neighbouring levels)."""
        atol = 1e-9 * self.y_scale * 4.0**self.op.order
        return support_zero | (np.abs(dbeta) <= atol)

    def initial_state(self, lam: float) -> _State:
        op = self.op
        z = op.apply(self.y)
        w = np.zeros(op.m)
        rho = _RHO_SCALE[op.order] * lam / self.scale_dy if self.scale_dy > 0 else 1.0
        step = self.rho_step
        return _State(z, w, step * round(math.log2(max(rho, 1e-300)) / step))

    # polishing -------------------------------------------------------------------------
    def polish(
        self, lam: float, sign: np.ndarray, best_d: float, best_p: float
    ) -> list[tuple[np.ndarray, np.ndarray, np.ndarray | None]]:
        """Exact solutions for the support ``sign`` (and, for odd orders, its PDAS updates).

        Returns candidates ``(β, zero rows, dual point or None)``.  For odd orders the
        multipliers of the saddle-point system are unique, so they give an exact dual
        point and the primal-dual active set method (Hintermüller, Ito & Kunisch 2002:
        semismooth Newton on the box-constrained dual ``min ½‖y − Δᵀu‖², |u| ≤ λ``)
        moves rows with ``|u_r| > λ`` into the support and rows whose jump changed sign
        out of it, for at most ``_PDAS_STEPS`` steps or until the gap is certified.
        """
        op, y = self.op, self.y
        if op.order == 0:
            zero = sign == 0
            beta = _polish_groups(op, y, lam, sign, zero)
            out: list[tuple[np.ndarray, np.ndarray, np.ndarray | None]] = [(beta, zero, None)]
            return out
        out = []
        steps = _PDAS_STEPS if op.order % 2 == 1 else 1
        seen = {sign.tobytes()}
        for _ in range(steps):
            zero = sign == 0
            solved = self.exact_support(lam, sign, zero)
            if solved is None:
                break
            beta, u = solved
            if u is None:
                out.append((beta, zero, None))
                break
            u = _shift_free_components(op, u, zero)
            dbeta = op.apply(beta)
            out.append((beta, zero, np.clip(u, -lam, lam)))
            best_p = min(best_p, self.primal(beta, dbeta, lam))
            best_d = max(best_d, self.dual(np.clip(u, -lam, lam)))
            if best_p - best_d <= self.tol * max(best_p, 1e-300):
                break
            # PDAS update, damped: drop the rows whose jump changed sign and add the rows
            # whose multiplier left the box, at most half the support size at a time, worst
            # first (full steps overshoot badly far from the solution).
            leave = ~zero & (sign * dbeta <= 0)
            enter = np.flatnonzero(zero & (np.abs(u) > lam))
            if enter.size and _PDAS_LOCAL and op.order == 1:
                enter = self.local_maxima(np.where(zero, np.abs(u) - lam, 0.0), enter)
            if not leave.any() and not enter.size:
                break
            new = np.where(leave, 0.0, sign)
            if enter.size:
                cap = max(_PDAS_MIN_ENTER, math.ceil(_PDAS_ENTER * np.count_nonzero(~zero)))
                enter = enter[np.argsort(-np.abs(u[enter]))[:cap]]
                new[enter] = np.sign(u[enter])
            if new.tobytes() in seen:  # cycling: change only the worst violator
                new = single_change(sign, enter, leave, u, dbeta)
                if new.tobytes() in seen:
                    break
            sign = new
            seen.add(sign.tobytes())
        return out

    def exact_support(
        self, lam: float, sign: np.ndarray, zero: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray | None] | None:
        """Orders >= 1: the exact solution for the support ``sign`` and, for odd orders, the
        full multiplier vector ``u`` (``u_A = λ s_A``); None if numerically singular."""
        op = self.op
        if op.order == 1:
            face = self.order1_face(lam, sign)
            if face is not None:
                return face
        solved = _polish_saddle(op, self.y, lam, sign, zero)
        if solved is None:
            return None
        beta, rows, mult = solved
        if op.order % 2 == 0:
            return beta, None
        u = lam * sign
        u[rows] = mult
        return beta, u

    def order1_face(self, lam: float, sign: np.ndarray) -> tuple[np.ndarray, np.ndarray] | None:
        """Order 1: ``(β, u)`` for the support ``sign`` by :class:`._tf_order1.FaceSolver`
        (``u = λs`` on the support, 0 at the ground of each component without support
        nodes, the face's multipliers elsewhere); None if it does not reach rounding."""
        op = self.op
        if self.faces is None:
            self.faces = FaceSolver(op.matrix)
        comp = op.components
        roots = component_roots(comp)
        fixed = sign != 0
        has = np.bincount(comp, weights=fixed.astype(np.float64), minlength=roots.size) > 0
        fixed[roots[~has]] = True
        rows = np.flatnonzero(~fixed)
        u = lam * sign
        solved = self.faces.solve(self.y - op.adjoint(u), rows)
        if solved is None:
            return None
        d, beta = solved
        u[rows] += d
        return beta, u

    def local_maxima(self, score: np.ndarray, cand: np.ndarray) -> np.ndarray:
        """The candidates whose score is the largest within ``_PDAS_LOCAL`` hops."""
        e = self.op.edges
        best = score.copy()
        for _ in range(_PDAS_LOCAL):
            nxt = best.copy()
            np.maximum.at(nxt, e[:, 0], best[e[:, 1]])
            np.maximum.at(nxt, e[:, 1], best[e[:, 0]])
            best = nxt
        return cand[score[cand] >= best[cand]]

    # one λ ---------------------------------------------------------------------------
    def solve(self, lam: float, state: _State) -> _Fit:
        """ADMM from the warm start ``state`` (updated in place) until the gap is certified."""
        y, op, tol = self.y, self.op, self.tol
        best = _Best(self.primal(y, op.apply(y), lam), y, np.zeros(op.m, dtype=bool))
        t_iter = t_polish = 0.0
        # Odd orders: first try the active-set method from the previous λ's exact support
        # (supports change little between neighbouring λ on the path).
        if state.sign is not None and op.order % 2 == 1 and op.n <= _POLISH_MAX_N:
            t0 = time.perf_counter()
            self.absorb(best, lam, self.polish(lam, state.sign, best.d, best.p))
            t_polish += time.perf_counter() - t0
            if best.gap <= tol * max(best.p, 1e-300):
                best.prefer_exact(tol)
                return self.finish(lam, best, 0, state)
        # scaled form: u = w/ρ, so that w/ρ = clip(x, ±λ/ρ) costs nothing
        z = state.z
        j = state.log2_rho
        rho = 2.0**j
        u = np.clip(state.w, -lam, lam) / rho
        solve = op.solver(rho, overwrite=True)
        last_sign: np.ndarray | None = None
        polished_sign: np.ndarray | None = None
        accel = _Anderson(2 * op.m, _ANDERSON[op.order]) if _ANDERSON[op.order] else None
        z_in, u_in = z, u
        # checks cost about a third of an iteration: rarer on big problems
        check_every = _CHECK_EVERY if op.m < 200_000 else 3 * _CHECK_EVERY
        adapted = it = 0
        buf = np.empty(op.m)
        # Without Anderson acceleration (order 0) z, u and Δβ live in fixed buffers updated
        # in place, by the same arithmetic (so the same iterates), and the element-wise part
        # runs in cache-sized chunks that also leave z − u in buf for the next iteration:
        # on large graphs the iteration is memory-bound.
        inplace = accel is None
        if inplace:
            z = z_in = z.copy()  # state.z may be shared
            dbuf: np.ndarray | None = np.empty(op.m)
        else:
            dbuf = None
        chunks = [slice(a, a + _CHUNK) for a in range(0, op.m, _CHUNK)]
        z_old = z
        fresh_buf = False  # buf holds z_in − u_in
        for it in range(1, self.max_iter + 1):
            t0 = time.perf_counter()
            check = it == 1 or it % check_every == 0
            if not fresh_buf:
                np.subtract(z_in, u_in, out=buf)
            rhs = op.adjoint(buf)
            rhs *= rho
            rhs += y
            beta = solve(rhs)  # (may overwrite rhs)
            if inplace:
                dbeta = op.apply(beta, out=dbuf)
                if check and it - adapted >= _ADAPT_EVERY:
                    z_old = z.copy()  # for the dual residual of the ρ adaptation below
                bound = lam / rho
                for sl in chunks:
                    # x = (1 − α)z + αΔβ + u, formed in z's buffer; then u, z and z − u
                    zc, uc, bc = z[sl], u[sl], buf[sl]
                    zc *= 1.0 - _ALPHA
                    np.multiply(dbeta[sl], _ALPHA, out=bc)
                    zc += bc
                    zc += uc
                    np.clip(zc, -bound, bound, out=uc)
                    zc -= uc
                    np.subtract(zc, uc, out=bc)
                fresh_buf = True
            else:
                dbeta = op.apply(beta)
                x = dbeta * _ALPHA  # x = αΔβ + (1 − α)z + u
                np.multiply(z_in, 1.0 - _ALPHA, out=buf)
                x += buf
                x += u_in
                u = np.clip(x, -lam / rho, lam / rho)
                z_old = z
                z = x
                z -= u
            if accel is not None:
                nxt = accel.step(np.concatenate([z_in, u_in]), np.concatenate([z, u]))
                z_in, u_in = nxt[: op.m], nxt[op.m :]
            else:
                z_in, u_in = z, u
            t_iter += time.perf_counter() - t0
            if not check:
                continue
            # certified duality gap (w = ρu is dual feasible: |w| ≤ λ) --------------
            w = rho * u
            best.offer(self.primal(beta, dbeta, lam), beta, z == 0, polished=False)
            best.d = max(best.d, self.dual(w))
            # polish (and for odd orders run PDAS) once the support has nearly settled,
            # within a time budget; order 0's polish is linear-time, the others factorise
            sign = np.sign(z)
            moved = op.m if last_sign is None else int(np.count_nonzero(sign != last_sign))
            last_sign = sign
            fresh = polished_sign is None or not np.array_equal(sign, polished_sign)
            settled = moved <= max(2, _SETTLED * np.count_nonzero(sign))
            wanted = (
                settled
                and fresh
                and (op.order == 0 or op.n <= _POLISH_MAX_N)
                and t_polish <= _POLISH_BUDGET[op.order] * t_iter
            )
            if wanted:
                t0 = time.perf_counter()
                polished_sign = sign
                self.absorb(best, lam, self.polish(lam, sign, best.d, best.p))
                t_polish += time.perf_counter() - t0
            if best.gap <= tol * max(best.p, 1e-300):
                break
            # residual balancing (relative residuals), ρ stays a power of two ---------
            if it - adapted >= _ADAPT_EVERY:
                adapted = it
                r = float(np.linalg.norm(dbeta - z)) / max(
                    float(np.linalg.norm(dbeta)), float(np.linalg.norm(z)), 1e-300
                )
                s = rho * float(np.linalg.norm(op.adjoint(z - z_old)))
                s /= max(float(np.linalg.norm(op.adjoint(w))), 1e-300)
                if r > _MU * s:
                    j += self.rho_step
                elif s > _MU * r:
                    j -= self.rho_step
                else:
                    continue
                u = w / 2.0**j  # the unscaled dual w is kept
                rho = 2.0**j
                fresh_buf = False
                if accel is not None:
                    accel.reset()
                z_in, u_in = z, u
                t0 = time.perf_counter()
                solve = op.solver(rho, overwrite=True)
                t_iter += time.perf_counter() - t0
        w = rho * u
        state.z, state.w, state.log2_rho = z, w, j
        best.prefer_exact(tol)
        if not best.polished and (op.order == 0 or op.n <= _POLISH_MAX_N):
            # a last polish of the final support, so that df comes from an exact support
            self.absorb(best, lam, self.polish(lam, np.sign(z), best.d, best.p))
            best.prefer_exact(tol)
        return self.finish(lam, best, it, state)

    def absorb(
        self,
        best: _Best,
        lam: float,
        candidates: list[tuple[np.ndarray, np.ndarray, np.ndarray | None]],
    ) -> None:
        for cand, zero, u in candidates:
            best.offer(self.primal(cand, self.op.apply(cand), lam), cand, zero, polished=True)
            if u is not None:
                best.d = max(best.d, self.dual(u))

    def finish(self, lam: float, best: _Best, iterations: int, state: _State) -> _Fit:
        op = self.op
        converged = best.gap <= self.tol * max(best.p, 1e-300)
        dbest = op.apply(best.beta)
        zero = self.zero_rows(dbest, best.zero)
        state.sign = np.where(zero, 0.0, np.sign(dbest)) if best.polished else None
        return _Fit(
            lam=lam,
            beta=best.beta,
            zero=zero,
            df=_degrees_of_freedom(op, zero),
            objective=best.p,
            gap=best.gap / max(best.p, 1e-300),
            iterations=iterations,
            converged=converged,
            polished=best.polished,
        )


@dataclass
class _Best:
    """The best primal candidates (any, and exact-support) and dual bound for one λ."""

    p: float
    beta: np.ndarray
    zero: np.ndarray
    polished: bool = False
    d: float = -math.inf
    exact_p: float = math.inf
    exact_beta: np.ndarray | None = None
    exact_zero: np.ndarray | None = None

    @property
    def gap(self) -> float:
        return self.p - self.d

    def offer(self, p: float, beta: np.ndarray, zero: np.ndarray, polished: bool) -> None:
        if p < self.p:
            self.p, self.beta, self.zero, self.polished = p, beta, zero, polished
        if polished and p < self.exact_p:
            self.exact_p, self.exact_beta, self.exact_zero = p, beta, zero

    def prefer_exact(self, tol: float) -> None:
        """Return the polished solution (its support is exact, so its df is) whenever it
        is itself certified within ``tol``, even if an ADMM iterate is marginally lower."""
        if self.exact_beta is None or self.exact_zero is None or self.polished:
            return
        if self.exact_p - self.d <= tol * max(self.exact_p, 1e-300):
            self.p, self.beta, self.zero = self.exact_p, self.exact_beta, self.exact_zero
            self.polished = True


# --------------------------------------------------------------------------------------
# λ_max and the path
# --------------------------------------------------------------------------------------


def _null_projection(op: _Operator, y: np.ndarray) -> np.ndarray:
    """``Π_{null(Δ)} y``: each connected component's mean."""
    comp = op.components
    return y - _center(y, comp)


def _least_norm_dual(op: _Operator, y: np.ndarray) -> np.ndarray:
    """``u = (Δᵀ)⁺(y − Πy) = Δ x`` with ``L^{k+1} x = y − Πy``; ``‖u‖∞`` is λ_max."""
    r = y - _null_projection(op, y)
    if not np.any(r):
        return np.zeros(op.m)
    return op.apply(op.laplacian_power_solve(r, op.order + 1))


def _projection_fit(op: _Operator, y: np.ndarray, lam: float) -> _Fit:
    beta = _null_projection(op, y)
    zero = np.ones(op.m, dtype=bool)
    r = y - beta
    return _Fit(
        lam=lam,
        beta=beta,
        zero=zero,
        df=_degrees_of_freedom(op, zero),
        objective=0.5 * float(r @ r),
        gap=0.0,
        iterations=0,
        converged=True,
        polished=True,
    )


# --------------------------------------------------------------------------------------
# Public function
# --------------------------------------------------------------------------------------


def _check_order(order: object) -> int:
    if isinstance(order, bool) or not isinstance(order, numbers.Integral):
        raise TypeError(f"order must be an integer in {ORDERS}; got {type(order).__name__}")
    if int(order) not in ORDERS:
        raise ValueError(f"order must be one of {ORDERS}; got {order!r}")
    return int(order)


_SOLVERS = ("auto", "exact", "admm")


def _check_solver(solver: object, order: int, chain: bool) -> bool:
    """Validate ``solver``; True when order 0 is solved exactly (min-cuts, or the direct
    1-D algorithm on a chain, which needs no numba)."""
    if not isinstance(solver, str) or solver not in _SOLVERS:
        raise ValueError(f"solver must be one of {_SOLVERS}; got {solver!r}")
    if solver == "exact":
        if order != 0:
            raise ValueError(f"solver='exact' solves order 0 only; got order={order}")
        if not chain and not _graph_tv.available():
            raise ImportError(
                "solver='exact' needs numba for its compiled minimum cut (except on a chain): "
                f"{install_hint('fast')} (or use solver='auto' or 'admm')"
            )
        return True
    return solver == "auto" and order == 0 and (chain or _graph_tv.available())


def _check_positive_int(value: object, name: str, low: int) -> int:
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise TypeError(f"{name} must be an integer >= {low}; got {type(value).__name__}")
    if int(value) < low:
        raise ValueError(f"{name} must be an integer >= {low}; got {value!r}")
    return int(value)


def _check_lam(lam: object) -> float | np.ndarray | None:
    """``None`` for "sure", a float for one λ, a 1-D array for a user grid."""
    if isinstance(lam, str):
        if lam != "sure":
            raise ValueError(
                f'lam must be a number >= 0, a sequence of them or "sure"; got {lam!r}'
            )
        return None
    arr = as_real_array(lam, "lam")
    if arr.ndim > 1 or arr.size == 0:
        raise ValueError(f"lam must be a number or a non-empty 1-D sequence; got shape {arr.shape}")
    check_interval(arr, "lam", REAL)
    if np.any(arr < 0):
        raise ValueError(f"lam must be >= 0; got {float(arr[arr < 0][0])!r}")
    return float(arr) if arr.ndim == 0 else np.array(arr, dtype=np.float64)


def _check_unit(value: object, name: str) -> float:
    arr = as_real_array(value, name)
    if arr.ndim or not 0.0 < float(arr) < 1.0:
        raise ValueError(f"{name} must be a number in (0, 1); got {value!r}")
    return float(arr)


def trend_filter(
    y: object,
    sigma: float | None = None,
    structure: object = None,
    *,
    order: int = 0,
    lam: float | Sequence[float] | str = "sure",
    n_lambdas: int = 20,
    lam_min_ratio: float | None = None,
    tol: float = 1e-6,
    max_iter: int = 20_000,
    solver: str = "auto",
) -> Denoised:
    """Graph trend filtering ``argmin_β ½‖y − β‖² + λ‖Δ⁽ᵏ⁺¹⁾β‖₁`` (Wang et al. 2016).

    Parameters
    ----------
    y
        The released vector, one value per node (any shape; flattened in C order, so an
        ``H × W`` image goes with a row-major ``H × W`` grid graph).
    sigma
        The public noise standard deviation.  Required for ``"sure"`` and for candidate
        sequences; with a single λ it may be ``None`` and, if given, the returned ``risk`` is
        SURE at that λ.  One σ per key (an array of ``y``'s shape) fits order 0 with the
        weighted fidelity ``½ Σ (y_i − β_i)² / σ_i²`` instead, exactly (the direct 1-D
        algorithm on a chain, else the minimum cuts, which need numba), with the
        heteroscedastic SURE ``‖y − β̂‖² − Σσ_i² + 2 Σ_G |G| / Σ_{i∈G} σ_i⁻²`` over the
        fused groups ``G`` (:mod:`dpgauss.denoise._tf_weighted`); λ is then in units of
        ``y/σ²`` and ``params`` adds ``divergence`` (the last sum).
    structure
        The public graph: a ``networkx.Graph``, a sparse adjacency matrix, an ``(m, 2)``
        edge array or a :class:`~dpgauss.denoise.graph.Graph` (see :func:`as_graph`), or a
        grid shape (its lattice; :mod:`dpgauss.denoise.structure`).  Required.
        Self-loops are ignored; disconnected graphs are fitted per component.
    order
        ``k`` ∈ {0, 1, 2}: ``Δ⁽¹⁾ = D``, ``Δ⁽²⁾ = L``, ``Δ⁽³⁾ = DL`` (piecewise constant,
        linear, quadratic fits).
    lam
        The penalty λ ≥ 0; or ``"sure"`` (needs ``sigma``) for the λ minimising
        ``SURE = ‖y − β̂‖² − dσ² + 2σ² df`` over ``n_lambdas`` geometric values from
        ``λ_max`` (the smallest λ whose solution is the per-component mean) down to
        ``lam_min_ratio · λ_max``, continued further down while SURE still decreases at
        the end (at most ``n_lambdas`` more values), and ``λ = 0`` (``β̂ = y``, the raw
        release: so the choice is never worse than it by SURE); or a sequence of
        candidate λ.
    n_lambdas, lam_min_ratio
        The default SURE path; ``lam_min_ratio`` defaults to 1e-3 for orders 0 and 1 and
        1e-4 for order 2.
    tol
        Stop when the certified relative duality gap ``(P(β) − D(u)) / P(β) ≤ tol``; the
        returned objective is then within ``tol`` (relative) of the optimum.
    max_iter
        ADMM iterations per λ; reaching it warns with
        :class:`TrendFilterConvergenceWarning` and returns the best iterate.
    solver
        ``"auto"`` (default): order 0 exactly — on a chain (a path graph labelled in
        order) by the direct 1-D algorithm, on any other graph by the minimum-cut
        decomposition when numba is installed (the ``fast`` extra); certified gap at
        rounding level, exact fused groups and so exact df — except on an ``H × W``
        lattice (``H, W ≥ 2``, a grid shape or its row-major lattice graph) with numba,
        where order 0 is solved by accelerated alternating exact 1-D TV over the rows and
        the columns (:mod:`._tv2d`) to a certified gap ``≤ tol``, its df from the fused
        groups of the polished solution (the minimum cuts finish a λ it does not certify);
        otherwise ADMM with polishing.  Orders 1 and 2 on the box-constrained dual
        (:mod:`._tf_dual_newton`; order 2 on forests only, other graphs up to 50,000 nodes
        unless banded): an interior-point method to locate the support (first for order 2,
        where the active set cycles for order 1), the active set to finish it, projected
        Newton as a last resort; each face by banded factorisations on chains, for order 1
        on other graphs by conjugate gradients preconditioned with cached sparse
        factorisations (:mod:`._tf_order1`), else by a sparse LU; ending on the exact
        solution of its support — for order 2 on a chain a fit exactly on its face in
        floating point, so that the gap is certified near ``λ_max`` too — else ADMM with
        polishing.  ``"exact"`` insists on the exact solver (order 0; numba required
        except on a chain; minimum cuts on lattices too); ``"admm"`` always uses ADMM.  A
        λ whose exact solution is not certified within ``tol`` is handed to ADMM (for
        orders 1 and 2 this happens when the dual multipliers are so much larger than
        ``y`` that rounding alone exceeds ``tol``: order 2 near λ_max on chains of tens of
        thousands of nodes).

    Returns
    -------
    Denoised
        ``estimate`` (shape of ``y``), ``risk`` = SURE of the total squared error (``None``
        when σ is not given), ``method="trend_filter"`` and ``params`` with ``order``,
        ``lam``, ``df``, ``iterations``, ``gap``, ``converged``, ``lam_max``, ``solver``
        and, when λ is chosen by SURE, ``path`` (arrays ``lam``, ``df``, ``sure``,
        ``rss``, ``objective``, ``iterations``, ``gap``, one entry per λ).
    """
    k = _check_order(order)
    lam_spec = _check_lam(lam)
    if sigma is None:
        if not isinstance(lam_spec, float):
            raise ValueError(
                "sigma is required when lam is 'sure' or a sequence (SURE needs the noise level)"
            )
        arr = as_real_array(y, "y")
        check_interval(arr, "y", REAL)
        arr = np.array(arr, dtype=np.float64)
        s: float | None = None
    else:
        arr, s = check_noise(y, sigma)
    n_lambdas = _check_positive_int(n_lambdas, "n_lambdas", 1)
    if lam_min_ratio is not None:
        lam_min_ratio = _check_unit(lam_min_ratio, "lam_min_ratio")
    tol_arr = as_real_array(tol, "tol")
    if tol_arr.ndim or not 0.0 < float(tol_arr) < 1.0:
        raise ValueError(f"tol must be a number in (0, 1); got {tol!r}")
    max_iter = _check_positive_int(max_iter, "max_iter", 1)

    shape = arr.shape
    yv = arr.ravel()
    g = graph_of(structure, yv.size, "trend_filter")
    op = _make_operator(g, k)
    chain = isinstance(op, _LatticeDifference) and op.shape[0] == 1
    exact = _check_solver(solver, k, chain)
    grid = (
        solver == "auto"
        and exact
        and not chain
        and isinstance(op, _LatticeDifference)
        and _tv2d.available()
    )
    if isinstance(s, np.ndarray):
        _check_weighted(k, solver, chain)
        return _weighted_trend_filter(
            yv.reshape(shape),
            s.ravel(),
            g,
            op,
            lam_spec,
            n_lambdas,
            lam_min_ratio,
            float(tol_arr),
            max_iter,
            solver,
            chain,
        )

    def sure(fit: _Fit) -> float | None:
        if s is None:
            return None
        r = yv - fit.beta
        return float(r @ r) - yv.size * s**2 + 2.0 * s**2 * fit.df

    newton: DualNewton | None = None
    if g.m == 0 or yv.size == 0:  # no differences: β̂ = y
        fits = [_identity_fit(op, yv, lam_spec if isinstance(lam_spec, float) else 0.0)]
        lam_max = 0.0
    else:
        u_ls = _least_norm_dual(op, yv)
        lam_max = float(np.max(np.abs(u_ls))) if u_ls.size else 0.0

        def new_path() -> _Path:
            admm = _Solver(yv, op, float(tol_arr), max_iter)
            lattice = None
            if grid and isinstance(op, _LatticeDifference):
                lattice = _tv2d.LatticeTV(
                    yv, op.shape, float(tol_arr), min(max_iter, _LATTICE_MAX_ITER)
                )
            return _Path(
                admm,
                lam_max,
                u_ls,
                exact=exact,
                chain=chain,
                lattice=lattice,
                newton=newton,
            )

        newton = _dual_newton(op, yv) if solver == "auto" and k > 0 else None
        path = new_path()
        if isinstance(lam_spec, float):
            fits = [path.solve(lam_spec)]
        elif lam_spec is not None:
            fits = [path.solve(float(v)) for v in np.sort(lam_spec)[::-1]]
        elif lam_max == 0.0:  # y is in the null space: β̂ = y for every λ
            fits = [path.solve(0.0)]
        else:
            ratio = _LAM_MIN_RATIO[k] if lam_min_ratio is None else lam_min_ratio
            fits = _sure_path(path.solve, sure, lam_max, ratio, n_lambdas)

    risks = [sure(f) for f in fits]
    if len(fits) == 1:
        best = 0
    else:
        best = int(np.argmin(np.asarray(risks, dtype=np.float64)))
        if grid and fits[best].lam > 0:
            # The lattice solver is exact only up to its certified gap, and along the path
            # it is warm-started: the chosen λ is solved again as a single λ is (a fresh
            # start), so that the refit with λ frozen (the error bars) gives this very fit.
            fits[best] = new_path().solve(fits[best].lam)
            risks[best] = sure(fits[best])
    fit = fits[best]
    if not all(f.converged for f in fits):
        bad = [f.lam for f in fits if not f.converged]
        warnings.warn(
            f"trend_filter: ADMM reached max_iter={max_iter} before the relative duality gap "
            f"fell below tol={float(tol_arr):g} at lam = {', '.join(f'{b:.4g}' for b in bad)}; "
            "returning the best iterate (see params['gap'])",
            TrendFilterConvergenceWarning,
            stacklevel=2,
        )
    params: dict[str, Any] = {
        "order": k,
        "lam": fit.lam,
        "df": fit.df,
        "iterations": int(sum(f.iterations for f in fits)),
        "gap": fit.gap,
        "converged": fit.converged,
        "lam_max": lam_max,
        "solver": solver,
        "algorithm": f"ADMM + polishing ({op.kind})",
    }
    rounds = int(sum(f.rounds for f in fits))
    if k > 0 and solver == "auto" and any(f.rounds > 0 for f in fits):
        if newton is not None and newton.banded:
            kind = "banded"
        elif newton is not None and newton.faces is not None:
            kind = "CG on cached sparse factorisations"
        else:
            kind = "sparse LU"
        params["algorithm"] = f"{_DUAL_ALGORITHM} ({kind})"
        params["rounds"] = rounds
        if any(f.iterations > 0 for f in fits):
            params["algorithm"] += f"; ADMM + polishing ({op.kind}) where not certified"
    if exact and grid:
        params["algorithm"] = _LATTICE_ALGORITHM
        params["rounds"] = rounds
        if rounds:
            params["algorithm"] += "; minimum-cut decomposition where not certified"
        if any(f.admm for f in fits):
            params["algorithm"] += f"; ADMM + polishing ({op.kind}) where not certified"
    elif exact:
        params["algorithm"] = (
            "direct 1-D TV (Condat 2013)" if chain else "minimum-cut decomposition (push-relabel)"
        )
        params["rounds"] = rounds
        if any(f.iterations > 0 for f in fits):
            params["algorithm"] += f"; ADMM + polishing ({op.kind}) where not certified"
    if len(fits) > 1:
        params["path"] = _path_table(fits, risks, yv)
    refit = functools.partial(
        trend_filter,
        sigma=s,
        structure=g,
        order=k,
        lam=fit.lam,
        tol=float(tol_arr),
        max_iter=max_iter,
        solver=solver,
    )
    return Denoised(
        estimate=fit.beta.reshape(shape),
        risk=risks[best],
        method="trend_filter",
        params=params,
        sigma=s,
        refit=refit if s is not None else None,
    )


#: ``params["algorithm"]`` of orders 1 and 2 solved on the dual (:mod:`._tf_dual_newton`).
_DUAL_ALGORITHM = "active set on the dual, after an interior-point start where needed"


def _dual_newton(op: _Operator, y: np.ndarray) -> DualNewton | None:
    """The projected-Newton dual solver for orders 1 and 2 (:mod:`._tf_dual_newton`), or
    None where it does not apply: order 2 off forests (its rows are dependent there), and
    graphs of more than ``_NEWTON_MAX_N`` nodes whose operator is not banded."""
    comp = op.components
    n_comp = int(comp.max()) + 1
    if op.order == 2 and op.m != op.n - n_comp:
        return None
    if op.order not in (1, 2):
        return None
    if op.n > _NEWTON_MAX_N:
        # only paths labelled in order (their Δ is banded) are worth it at this size
        edges = op.edges
        if edges.size and int(np.max(np.abs(edges[:, 0] - edges[:, 1]))) > 1:
            return None
    newton = DualNewton(op.matrix, y, comp, ground_rows=op.order == 1)
    if not newton.banded and op.n > _NEWTON_MAX_N:
        return None
    return newton


def _sure_path(
    solve: Callable[[float], Any],
    sure: Callable[[Any], float | None],
    lam_max: float,
    ratio: float,
    n_lambdas: int,
) -> list[Any]:
    """The fits of the default SURE path: ``n_lambdas`` geometric λ from ``λ_max`` down to
    ``ratio · λ_max``, extended (by at most ``n_lambdas`` more steps, never below
    ``_LAM_FLOOR · λ_max``) while SURE is still falling at its end, and then ``λ = 0``.

    The path ends at ``λ = 0``, where ``β̂ = y`` and ``SURE = Σσᵢ²`` (``‖y − y‖² = 0``,
    ``df = d``), the raw release's exact risk.  So the fit chosen by SURE is never worse than
    the raw release by its own SURE: a geometric path stops at a positive λ (issue #26: one
    that stopped at 7·10⁻⁷ λ_max published a map worse than the raw one, RMSE 5.01 against
    4.20, with nothing to fall back on)."""
    fits = [solve(float(v)) for v in lam_max * np.geomspace(1.0, ratio, n_lambdas)]
    step = ratio ** (1.0 / max(n_lambdas - 1, 1))
    extra = 0
    while (
        n_lambdas > 1
        and extra < n_lambdas
        and fits[-1].lam > lam_max * _LAM_FLOOR
        and int(np.argmin([sure(f) for f in fits])) == len(fits) - 1
    ):
        fits.append(solve(fits[-1].lam * step))
        extra += 1
    fits.append(solve(0.0))
    return fits


def _path_table(fits: Sequence[Any], risks: Sequence[float | None], y: np.ndarray) -> dict:
    """``params["path"]``: one entry per λ of the SURE path (exact fits: 0 iterations)."""
    return {
        "lam": np.array([f.lam for f in fits]),
        "df": np.array([f.df for f in fits]),
        "sure": np.array(risks, dtype=np.float64),
        "rss": np.array([float((y - f.beta) @ (y - f.beta)) for f in fits]),
        "objective": np.array([f.objective for f in fits]),
        "iterations": np.array([getattr(f, "iterations", 0) for f in fits], dtype=np.int64),
        "gap": np.array([f.gap for f in fits]),
    }


def _check_weighted(order: int, solver: str, chain: bool) -> None:
    """Per-key σ (the weighted fidelity of :mod:`._tf_weighted`) is solved exactly, for
    order 0 only: its SURE needs the divergence ``Σ σ_i² ∂β̂_i/∂y_i``, which is a sum over
    fused groups for order 0 but the trace of a weighted projection for higher orders."""
    if order != 0:
        raise ValueError(
            f"trend_filter with one sigma per key solves order 0 only; got order={order} "
            "(pass one sigma, or use order=0)"
        )
    if solver == "admm":
        raise ValueError(
            "trend_filter with one sigma per key is solved exactly (solver='auto' or "
            "'exact'), not by ADMM; got solver='admm'"
        )
    if not chain and not _graph_tv.available():
        raise ImportError(
            "trend_filter with one sigma per key needs numba for its compiled minimum cut "
            f"(except on a chain): {install_hint('fast')}"
        )


def _weighted_trend_filter(
    y: np.ndarray,
    sigma: np.ndarray,
    graph: Graph,
    op: _Operator,
    lam_spec: float | np.ndarray | None,
    n_lambdas: int,
    lam_min_ratio: float | None,
    tol: float,
    max_iter: int,
    solver: str,
    chain: bool,
) -> Denoised:
    """Order 0 with fidelity weights ``1/σ_i²`` (:mod:`._tf_weighted`), λ by SURE."""
    yv = y.ravel()
    path = WeightedPath(yv, sigma, op, tol, chain)
    lam_max = path.lam_max
    if isinstance(lam_spec, float):
        fits = [path.solve(lam_spec)]
    elif lam_spec is not None:
        fits = [path.solve(float(v)) for v in np.sort(lam_spec)[::-1]]
    elif lam_max == 0.0 or graph.m == 0:
        fits = [path.solve(0.0)]
    else:
        ratio = _LAM_MIN_RATIO[0] if lam_min_ratio is None else lam_min_ratio
        fits = _sure_path(path.solve, path.sure, lam_max, ratio, n_lambdas)
    risks = [path.sure(f) for f in fits]
    best = int(np.argmin(risks)) if len(fits) > 1 else 0
    fit = fits[best]
    if not all(f.converged for f in fits):
        bad = [f.lam for f in fits if not f.converged]
        warnings.warn(
            "trend_filter: the weighted exact solver's relative duality gap exceeded "
            f"tol={tol:g} at lam = {', '.join(f'{b:.4g}' for b in bad)} (see params['gap'])",
            TrendFilterConvergenceWarning,
            stacklevel=3,
        )
    params: dict[str, Any] = {
        "order": 0,
        "lam": fit.lam,
        "df": fit.df,
        "iterations": 0,
        "gap": fit.gap,
        "converged": fit.converged,
        "lam_max": lam_max,
        "solver": solver,
        "algorithm": (
            "weighted direct 1-D TV"
            if chain
            else "weighted minimum-cut decomposition (push-relabel)"
        ),
        "rounds": int(sum(f.rounds for f in fits)),
        "divergence": fit.divergence,
    }
    if len(fits) > 1:
        params["path"] = _path_table(fits, risks, yv)
    refit = functools.partial(
        trend_filter,
        sigma=sigma.reshape(y.shape),
        structure=graph,
        order=0,
        lam=fit.lam,
        tol=tol,
        max_iter=max_iter,
        solver=solver,
    )
    return Denoised(
        estimate=fit.beta.reshape(y.shape),
        risk=risks[best],
        method="trend_filter",
        params=params,
        sigma=sigma.reshape(y.shape),
        refit=refit,
    )


def _identity_fit(op: _Operator, y: np.ndarray, lam: float) -> _Fit:
    zero = np.zeros(op.m, dtype=bool)
    return _Fit(lam, y.copy(), zero, y.size, 0.0, 0.0, 0, True, True)


class _Path:
    """Solves a decreasing sequence of λ, warm-starting each solve from the last."""

    def __init__(
        self,
        solver: _Solver,
        lam_max: float,
        u_ls: np.ndarray,
        exact: bool = False,
        chain: bool = False,
        lattice: _tv2d.LatticeTV | None = None,
        newton: DualNewton | None = None,
    ) -> None:
        self.solver = solver
        self.newton = newton  # orders 1 and 2: the box-constrained dual
        self.dual: tuple[float, np.ndarray] = (lam_max, u_ls)  # its last (λ, u)
        self.lam_max = lam_max
        self.u_ls = u_ls
        self.state: _State | None = None
        self.previous: float | None = None
        self.log2_shift = 0.0  # the part of log₂(λ ratio) that ρ has not followed yet
        # order 0 by minimum cuts (_graph_tv): the last exact solution's jumps and flow
        self.exact = exact
        self.chain = chain  # order 0 on a chain: the direct 1-D algorithm (_tv1d)
        self.jump: np.ndarray | None = None
        self.flow: np.ndarray = u_ls
        # order 0 on an H × W lattice: accelerated alternating 1-D TV (_tv2d), warm-started
        # from the least-norm dual (feasible at λ_max) and then from the last λ
        self.lattice = lattice
        if lattice is not None and isinstance(solver.op, _LatticeDifference) and lam_max > 0:
            lattice.warm(solver.op.column_image(u_ls), lam_max)

    def solve(self, lam: float) -> _Fit:
        solver, op = self.solver, self.solver.op
        if lam == 0.0:
            return _identity_fit(op, solver.y, 0.0)
        if lam >= self.lam_max:  # u_ls is dual feasible: the null-space projection is exact
            self.state = _State(
                np.zeros(op.m),
                self.u_ls.copy(),
                solver.initial_state(lam).log2_rho,
                np.zeros(op.m),
            )
            self.previous = lam
            return _projection_fit(op, solver.y, lam)
        if self.lattice is not None:
            fit = self.solve_lattice(lam)
            if fit is not None:
                return fit
        elif self.exact:
            fit = self.solve_exact(lam)
            if fit is not None:
                return fit
        if self.newton is not None:
            fit = self.solve_newton(lam)
            if fit is not None:
                return fit
        if self.state is None:
            self.state = solver.initial_state(lam)
        elif self.previous is not None:
            shift = math.log2(lam / self.previous)
            step = solver.rho_step
            if step > 1:  # keep the rounding remainder, or small λ steps never move ρ
                self.log2_shift += shift
                shift = step * round(self.log2_shift / step)
                self.log2_shift -= shift
            self.state.log2_rho += round(shift)
        self.previous = lam
        fit = solver.solve(lam, self.state)
        fit.admm = True
        return fit

    def solve_lattice(self, lam: float) -> _Fit | None:
        """Order 0 on a lattice by :mod:`._tv2d`; None (the minimum cuts take over, from its
        jumps and flow) unless its certified gap is within ``tol``."""
        solver, op = self.solver, self.solver.op
        res = self.lattice.solve(lam) if self.lattice is not None else None
        if res is None:
            return None
        dbeta = op.apply(res.beta)
        flow = np.concatenate([res.uh.ravel(), res.uv.ravel()])
        if not res.certified:  # the cuts start from its jumps and flow
            zero = solver.zero_rows(dbeta, np.zeros(op.m, dtype=bool))
            self.jump = np.where(zero, 0.0, np.sign(dbeta))
            self.flow = flow
            fit = self.solve_exact(lam)
            if fit is not None:
                fit.iterations = res.iterations  # spent before the cuts took over
            return fit
        return self.settle(
            lam,
            res.beta,
            dbeta,
            flow,
            res.objective,
            res.gap,
            iterations=res.iterations,
            polished=res.polished,
        )

    def solve_newton(self, lam: float) -> _Fit | None:
        """Orders 1 and 2 on the box-constrained dual (:mod:`._tf_dual_newton`), from
        the last λ's dual point scaled by the ratio of the λ; None (ADMM takes over) unless
        its duality gap is within ``tol``."""
        assert self.newton is not None
        solver, op = self.solver, self.solver.op
        last_lam, last_u = self.dual
        start = last_u * (lam / last_lam) if last_lam > 0 else last_u
        res = self.newton.solve(lam, start, solver.tol)
        if res is None or not res.gap <= solver.tol * max(res.primal, 1e-300):
            return None
        self.dual = (lam, res.u)
        self.previous = lam
        if self.newton.exact_face is not None and res.exact:
            # the fit is exactly on its face (order 2 on a chain, _tf_exact_face): its zero
            # rows are exact, and a kink's jump may be far below any rounding threshold
            # (third differences of a 4,000-node fit just below λ_max)
            zero = res.free | (res.dbeta == 0)
        else:
            zero = solver.zero_rows(res.dbeta, res.free)
        sign = np.where(zero, 0.0, np.sign(res.dbeta))
        # an ADMM fallback at the next λ starts from this solution
        self.state = _State(res.dbeta, res.u.copy(), solver.initial_state(lam).log2_rho, sign)
        return _Fit(
            lam=lam,
            beta=res.beta,
            zero=zero,
            df=_degrees_of_freedom(op, zero),
            objective=res.primal,
            gap=res.gap / max(res.primal, 1e-300),
            iterations=0,
            converged=True,
            polished=res.exact,
            rounds=res.steps,
        )

    def solve_exact(self, lam: float) -> _Fit | None:
        """Order 0 exactly: on a chain by the direct 1-D algorithm, otherwise by the
        minimum-cut decomposition warm-started from the last solution's jumps and flow;
        None (ADMM takes over) unless its duality gap is within ``tol``."""
        solver, op, y = self.solver, self.solver.op, self.solver.y
        if self.chain:
            x, u = tv1d(y, lam)
            res: _graph_tv.TVSolution | None = _graph_tv.TVSolution(x, np.clip(u, -lam, lam), 0)
        else:
            res = _graph_tv.graph_tv_warm(y, op.edges, lam, self.jump, self.flow)
        if res is None:
            return None
        dbeta = op.apply(res.beta)
        p = solver.primal(res.beta, dbeta, lam)
        # P(β) − D(u) without cancellation (both terms are >= 0 for |u| <= λ):
        #   λ‖Dβ‖₁ − (Dβ)ᵀu + ½‖δ‖²,  δ = y − β − Dᵀu
        delta = y - res.beta - op.adjoint(res.u)
        gap = lam * float(np.abs(dbeta).sum()) - float(dbeta @ res.u) + 0.5 * float(delta @ delta)
        if not gap <= solver.tol * max(p, 1e-300):
            return None
        return self.settle(
            lam, res.beta, dbeta, res.u, p, gap, iterations=0, polished=True, rounds=res.rounds
        )

    def settle(
        self,
        lam: float,
        beta: np.ndarray,
        dbeta: np.ndarray,
        flow: np.ndarray,
        objective: float,
        gap: float,
        **fit: Any,
    ) -> _Fit:
        """The fit of a solution certified at ``λ`` (absolute ``gap``), kept as the start of
        the next λ: its jumps and flow (the minimum cuts), its ADMM state (a fallback)."""
        solver, op = self.solver, self.solver.op
        zero = solver.zero_rows(dbeta, np.zeros(op.m, dtype=bool))
        self.jump = np.where(zero, 0.0, np.sign(dbeta))
        self.flow = flow
        self.previous = lam
        self.state = _State(dbeta, flow.copy(), solver.initial_state(lam).log2_rho)
        return _Fit(
            lam=lam,
            beta=beta,
            zero=zero,
            df=_degrees_of_freedom(op, zero),
            objective=objective,
            gap=max(gap, 0.0) / max(objective, 1e-300),
            converged=True,
            **fit,
        )
