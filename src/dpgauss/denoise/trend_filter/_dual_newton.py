"""Trend filtering of orders 1 and 2 on the box-constrained dual: interior point, active set,
projected Newton.

The dual of ``min_β ½‖y − β‖² + λ‖Δβ‖₁`` is

    min_u f(u) = ½‖y − Δᵀu‖²   subject to   |u| ≤ λ,        β = y − Δᵀu,      (1)

with ``−∇f(u) = Δβ``.  Every step solves a *face*: for the rows ``A`` held at ``±λ`` (signs
``s``) and the free rows ``F``, the minimiser of ``f`` with ``u_A = λs_A`` is
``β = Π_{null(Δ_F)}(y − λΔ_Aᵀs)`` with multipliers ``u_F`` (the polished solution of
:mod:`.trend_filter`); from a point ``u`` it is ``u_F + d`` with

    (Δ_F Δ_Fᵀ) d = (Δβ)_F,    i.e.    [ I    Δ_Fᵀ ] [x]   [β]
                                        [ Δ_F  0    ] [d] = [0],               (2)

``β = y − Δᵀu``, ``x`` the face's primal point.

1. Primal-dual active set (Hintermüller, Ito & Kunisch, SIAM J. Optim. 13(3), 2002): solve
   the face, drop rows of ``A`` whose jump has the wrong sign, add free rows with
   ``|u_r| > λ`` — only those whose excess is the largest among the rows sharing a node
   with them (a bulge of ``|u| > λ`` is one new kink), at most a quarter of the support at
   once; on a graph that is not a chain, a step that would repeat an earlier support
   changes only the worst violator instead.  It ends on the exact solution when no row
   violates the optimality conditions.
   It converges locally (in one or two steps from the right support) but not globally:
   for order 2 on a chain a lone kink wanders along the chain from a poor start.
2. The interior-point method of :mod:`._dual_ipm` (Mehrotra's predictor-corrector, each
   step one banded LU of the augmented system there, ``O(n)``) locates the support in
   15–25 steps from any start; its rows at their bounds start the active-set method, which
   then finishes in one or two steps.  Order 2 (rows ↔ edges) starts here from the last
   λ's dual point; order 1 (where the active set from the last λ's support usually
   finishes at once) comes here only when the active set cycles.  If the active set does
   not finish from the interior-point support, the interior-point method is run again to a
   smaller complementarity.
3. Last resort: projected Newton (Bertsekas, "Projected Newton methods for optimization
   problems with simple constraints", SIAM J. Control Optim. 20(2), 1982) with the
   binding rows ``I = {u_r ≥ λ − ε, (Δβ)_r > 0} ∪ {u_r ≤ −λ + ε, (Δβ)_r < 0}``, the
   Newton step (2) on the others and a scaled gradient step on ``I``, projected onto the
   box and backtracked (Armijo); a full, unclipped step whose binding rows keep their
   signs is again the exact solution.

Solving (2).  When ``Q = ΔΔᵀ`` is banded in the row order (a chain labelled in order:
half-bandwidth 2 for order 1, 3 for order 2), ``Q_FF`` is too, and ``Q_FF d = (Δβ)_F`` is
solved by banded Cholesky (LAPACK ``pbtrf``, ``O(n)``), refined on the face residual
``Δ_F x``, which must vanish, while it halves.  ``Q_FF`` may be badly conditioned (like
``n^{2(k+1)}`` on a chain: 10¹⁸ for order 2 on 4,000 nodes), so if Cholesky fails or the
refinement stalls above rounding, (2) itself is solved: its condition number is only that
of ``Δ_F``; with the unknowns interleaved by position (node ``i``, then the rows of ``Δ``
centred at ``i``) it is banded on a chain (banded LU with partial pivoting, ``gbsv``), else
it is factorised by sparse LU (SuperLU).  For order 1 on a chain labelled in order, the
active set runs first on the knots (:mod:`._knots`, compiled by numba): a face there is a
least-squares fit of ``K`` knot values (tridiagonal), not a system of ``n − K`` rows, and
the same rules finish a λ in well under a millisecond on 4,000 nodes; where it does not
finish, the steps below run as before.  For order 1 on a graph that is not a chain,
``Q_FF d = (Δβ)_F`` is first solved by conjugate gradients preconditioned with a cached
sparse factorisation of a nearby face, or at large λ by the exact solve of the capacitance
route (:class:`._order1.FaceSolver`, :mod:`._capacitance`), and (2) by sparse LU only if
that does not reach rounding.  No dense factorisation of a face is made (the capacitance
route's dense Cholesky factor is of the active nodes only, at most 400 of them).  Nothing is
cached across λ except the dual point (and the face solver's factorisation), which, scaled
by the ratio of the λ, warm-starts the next λ of a path (the active set from its support,
or the interior-point method from the point itself, pulled inside the box).

(2) needs ``Δ_F`` of full row rank.  For order 1 (``Δ = L``) a component's rows are
dependent only when all of them are free (``Lᵀ1 = 0`` there): one row of each such
component (its *ground*) is then held fixed, which changes nothing since ``f`` is constant
along ``1_c``.  For order 2 (``Δ = DL``, rows ↔ edges) the rows are independent exactly on
a forest (``m = n − c``), so order 2 is solved here only on forests.

Certification: ``u`` is dual feasible, so ``P(β) − D(u)`` with ``D(u) = ½‖y‖² − ½‖y − Δᵀu‖²``
bounds the suboptimality of ``β``; it is computed as
``Σ_r (λ|(Δβ)_r| − u_r(Δβ)_r) + ½‖y − β − Δᵀu‖²`` (non-negative terms, no ``½‖y‖²`` to
cancel, which matters for tiny λ).  The primal point is the ``x`` of (2) at the last face
(``Π_{null(Δ_F)}`` of the current ``y − Δᵀu``), not ``y − Δᵀu`` itself: for large λ
``|u| ≫ |β|`` and ``Δ(y − Δᵀu)`` on ``F`` is rounding of the size ``ε‖Δ‖²‖u‖``, which
``λ‖·‖₁`` would multiply into a gap of relative size 10⁻³ on a 4,000-node chain, while
``Δ_F x`` vanishes to rounding relative to ``|β|``.  Even that rounding, ``ε|x|`` per free
row, is ``10⁻⁶`` of the objective for order 2 near ``λ_max`` on a 4,000-node chain (``λ``
is 10¹⁰ there); on such a chain the fit is therefore replaced by a nearby point of its face
that floating point represents exactly (:mod:`._exact_face`: ``Δ_F x = 0`` without
rounding), whose gap is 10⁻⁸ of the objective or less and whose zero rows are exact.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import scipy.linalg as sla
import scipy.sparse as sp
import scipy.sparse.linalg as spla

from ..graph import component_roots
from . import _knots
from ._dual_ipm import BoxIPM
from ._exact_face import ChainFace
from ._order1 import FaceSolver

__all__ = ["DualNewton", "DualSolution", "single_change"]

_MAX_STEPS = 200  # projected Newton steps per λ
_PDAS_ENTER = 0.25  # at most this fraction of the support enters per PDAS step
_PDAS_STEPS = 30  # active-set steps per λ before projected Newton takes over
_KNOT_STEPS = 200  # the same on the knots of a chain (_knots: a step costs ~5n flops)
_MAX_BACKTRACK = 40
_ARMIJO = 1e-4
_EPS_BOUND = 1e-3  # ε of the binding set, relative to λ (Bertsekas's ε̄)
_MAX_BAND = 16  # solve (2) as a banded system when its half-bandwidth is at most this
_EXACT_GAP = 1e-13  # relative gap at which projected Newton stops without a face step
_REFINE = 6  # refinement steps of the banded normal equations
_FACE_RESIDUAL = 1e-13  # accept |Δ_R x| ≤ this × max|Δ|² × max(|x|, |β|)
_IPM_REDUCTION = (1e-10, 1e-13)  # complementarity / objective at which the IPM stops (2 tries)
_IPM_STEPS = 80  # interior-point steps per try


def single_change(
    sign: np.ndarray, enter: np.ndarray, leave: np.ndarray, u: np.ndarray, jump: np.ndarray
) -> np.ndarray:
    """The support ``sign`` with only its worst violator changed, for an active-set method
    that cycles: the first of ``enter`` (rows whose multiplier left the box, worst first)
    enters with the sign of its ``u``; if none, the row of ``leave`` (jumps ``jump`` of the
    wrong sign) whose jump is most wrong leaves."""
    new = sign.copy()
    if enter.size:
        new[enter[0]] = np.sign(u[enter[0]])
    else:
        bad = np.flatnonzero(leave)
        new[bad[np.argmin(sign[bad] * jump[bad])]] = 0.0
    return new


def _is_path_laplacian(mat: sp.csr_matrix) -> bool:
    """``mat`` (CSR, no stored zeros) is the Laplacian of the path ``0 − 1 − … − (n−1)``:
    rows ``(1, −1)``, ``(−1, 2, −1)`` … ``(−1, 1)`` on the diagonal band."""
    n = mat.shape[0]
    if mat.shape != (n, n) or n < 2 or mat.nnz != 3 * n - 2:
        return False
    sorted_ = mat if mat.has_sorted_indices else mat.sorted_indices()
    counts = np.full(n, 3)
    counts[[0, -1]] = 2
    if not np.array_equal(np.diff(sorted_.indptr), counts):
        return False
    rows = np.repeat(np.arange(n), counts)
    offset = sorted_.indices - rows  # sorted and distinct: (−1,) 0, 1 on each row
    ends = (rows == 0) | (rows == n - 1)
    expected = np.where(offset == 0, np.where(ends, 1.0, 2.0), -1.0)
    return bool(np.all(np.abs(offset) <= 1) and np.array_equal(sorted_.data, expected))


@dataclass
class DualSolution:
    beta: np.ndarray
    u: np.ndarray  # the dual point, |u| ≤ λ
    dbeta: np.ndarray  # Δβ
    free: np.ndarray  # rows of F (zero rows of Δβ on the exact face)
    primal: float
    gap: float  # absolute duality gap P(β) − D(u)
    steps: int
    exact: bool  # ended by a full, unclipped Newton step onto a face satisfying the KKT signs


class DualNewton:
    """Projected Newton on (1) for one operator ``Δ`` (an ``m × n`` sparse matrix)."""

    def __init__(
        self,
        matrix: sp.spmatrix,
        y: np.ndarray,
        components: np.ndarray,
        ground_rows: bool,
    ) -> None:
        mat = sp.csr_matrix(matrix, dtype=np.float64)
        mat.eliminate_zeros()
        self.matrix = mat
        self.matrix_t = sp.csr_matrix(mat.T)
        self.m, self.n = mat.shape
        self.y = np.asarray(y, dtype=np.float64)
        self.half_yy = 0.5 * float(self.y @ self.y)
        self.diag_q = np.asarray(mat.multiply(mat).sum(axis=1)).ravel()
        coo = mat.tocoo()
        self.e_row = coo.row.astype(np.int64)
        self.e_col = coo.col.astype(np.int64)
        self.e_val = coo.data.astype(np.float64)
        # grounds (order 1, Δ = L with rows ↔ nodes): the first row of each component
        self.ground_rows = ground_rows
        if ground_rows:
            self.comp = np.asarray(components, dtype=np.int64)
            self.first = component_roots(self.comp)
            self.n_comp = self.first.size
        # interleaved order: node i at key i, row r at the mean column of its entries
        count = np.bincount(self.e_row, minlength=self.m).astype(np.float64)
        centre = np.bincount(self.e_row, weights=self.e_col.astype(np.float64), minlength=self.m)
        centre = np.where(count > 0, centre / np.maximum(count, 1.0), 0.0)
        keys = np.concatenate([np.arange(self.n, dtype=np.float64), centre + 0.25])
        self.order_pos = np.empty(self.n + self.m, dtype=np.int64)
        self.order_pos[np.argsort(keys, kind="stable")] = np.arange(self.n + self.m)
        # rows sharing a node (and each row itself): the neighbourhoods of the PDAS rule
        pattern = abs(mat) @ abs(mat).T + sp.identity(self.m, format="csr")
        pattern = sp.csr_matrix(pattern)
        self.nb_ptr = pattern.indptr[:-1].copy()
        self.nb_idx = pattern.indices.copy()
        span = np.abs(self.order_pos[self.e_row + self.n] - self.order_pos[self.e_col])
        self.banded = bool(span.size == 0 or int(span.max()) <= _MAX_BAND)
        # Q = ΔΔᵀ in LAPACK's lower band storage, when it is banded in the row order
        gram = sp.csr_matrix(mat @ mat.T).tocoo()
        below = gram.row - gram.col
        self.q_band: np.ndarray | None = None
        if below.size and int(np.abs(below).max()) <= _MAX_BAND:
            width = int(np.abs(below).max())
            band = np.zeros((width + 1, self.m))
            low = below >= 0
            band[below[low], gram.col[low]] = gram.data[low]
            self.q_band = band
        # the interior-point method (rows ↔ edges, order 2: first; order 1: after PDAS)
        width = int(span.max()) if span.size else 0
        self.ipm = BoxIPM(
            mat, self.matrix_t, self.y, self.order_pos, width if self.banded else None
        )
        self.interior_first = not ground_rows
        # order 2 on a chain: fits exactly on their face (_exact_face)
        self.exact_face = ChainFace(self.n) if ChainFace.matches(mat) else None
        # order 1 on a chain labelled in order: the active set on the knots (_knots), compiled
        self.knots: tuple[np.ndarray, np.ndarray] | None = None
        # (numba is asked for only once the operator is a chain's)
        if ground_rows and _is_path_laplacian(mat) and _knots.kernel() is not None:
            self.knots = _knots.prefix_sums(self.y)
        # order 1 on other graphs: the faces by CG on cached sparse factorisations
        self.faces = (
            FaceSolver(mat, _FACE_RESIDUAL, self.comp) if ground_rows and not self.banded else None
        )

    # objective pieces --------------------------------------------------------------------
    def beta_of(self, u: np.ndarray) -> np.ndarray:
        return self.y - self.matrix_t @ u

    def gap(self, lam: float, x: np.ndarray, dx: np.ndarray, u: np.ndarray) -> float:
        """``P(x) − D(u) = Σ_r (λ|(Δx)_r| − u_r(Δx)_r) + ½‖y − x − Δᵀu‖²`` (``|u| ≤ λ``): a
        sum of non-negative terms, without the cancellation of ``½‖y‖²`` in ``P − D``."""
        r = self.y - x - self.matrix_t @ u
        return max(float(lam * np.abs(dx).sum() - dx @ u) + 0.5 * float(r @ r), 0.0)

    # the Newton system (2) ------------------------------------------------------------------
    def newton(self, beta: np.ndarray, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray] | None:
        """``(d, x)`` with ``(Δ_R Δ_Rᵀ) d = (Δβ)_R`` for the rows ``R`` (their indices,
        increasing) and ``x = β − Δ_Rᵀd = Π_{null(Δ_R)} β``: by banded normal equations on
        a chain, by the CG face solver for order 1 on other graphs, else (or where those do
        not reach rounding) through the augmented system (2); None if numerically
        singular."""
        n = self.n
        if rows.size == 0:
            return np.zeros(0), beta.copy()
        if self.q_band is not None:
            fast = self._normal(beta, rows)
            if fast is not None:
                return fast
        keep_row = np.zeros(self.m, dtype=bool)
        keep_row[rows] = True
        ent = keep_row[self.e_row]
        er, ec, ev = self.e_row[ent], self.e_col[ent], self.e_val[ent]
        size = n + rows.size
        if self.banded:
            kept = np.ones(n + self.m, dtype=bool)
            kept[n:] = keep_row
            full = np.zeros(n + self.m, dtype=bool)
            full[self.order_pos[kept]] = True
            rank = np.cumsum(full) - 1
            pos = np.full(n + self.m, -1, dtype=np.int64)
            pos[kept] = rank[self.order_pos[kept]]
            pr, pc = pos[n + er], pos[ec]
            band = int(np.abs(pr - pc).max()) if pr.size else 0
            ab = np.zeros((2 * band + 1, size))
            node_pos = pos[:n]
            ab[band, node_pos] = 1.0
            ab[band + pr - pc, pc] = ev  # A[pr, pc] (the row block)
            ab[band + pc - pr, pr] = ev  # A[pc, pr] (its transpose)
            rhs = np.zeros(size)
            rhs[node_pos] = beta
            try:
                sol = sla.solve_banded((band, band), ab, rhs, check_finite=False)
            except (np.linalg.LinAlgError, ValueError):
                return None
            d = sol[pos[n + rows]]
            x = sol[node_pos]
        else:
            if self.faces is not None:
                fast = self.faces.solve(beta, rows)
                if fast is not None:
                    return fast
            local = np.full(self.m, -1, dtype=np.int64)
            local[rows] = np.arange(rows.size)
            lr = n + local[er]
            r_idx = np.concatenate([np.arange(n), lr, ec])
            c_idx = np.concatenate([np.arange(n), ec, lr])
            vals = np.concatenate([np.ones(n), ev, ev])
            aug = sp.csc_matrix((vals, (r_idx, c_idx)), shape=(size, size))
            try:
                lu = spla.splu(aug)
            except RuntimeError:
                return None
            rhs = np.concatenate([beta, np.zeros(rows.size)])
            sol = lu.solve(rhs)
            d, x = sol[n:], sol[:n]
        if not (np.all(np.isfinite(d)) and np.all(np.isfinite(x))):
            return None
        return d, x

    def _normal(self, beta: np.ndarray, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray] | None:
        """(2) through the normal equations ``Q_RR d = (Δβ)_R`` (banded Cholesky, LAPACK
        ``pbsv``), refined on the residual ``Δ_R x`` of the face, which must vanish; None
        (the augmented system is used) if Cholesky fails or the refinement stalls (the
        condition number of ``Q_RR`` near ``1/ε``: long segments without active rows)."""
        assert self.q_band is not None
        width = self.q_band.shape[0] - 1
        size = rows.size
        band = np.zeros((width + 1, size))
        for k in range(width + 1):
            if k >= size:
                break
            dist = rows[k:] - rows[: size - k]
            ok = dist <= width
            band[k, : size - k][ok] = self.q_band[dist[ok], rows[: size - k][ok]]
        try:
            chol = sla.cholesky_banded(band, lower=True, check_finite=False)
        except (np.linalg.LinAlgError, ValueError):
            return None
        # Δ_R v as (Δv)_R: the same row sums, without building the rows' submatrix
        d = sla.cho_solve_banded((chol, True), (self.matrix @ beta)[rows], check_finite=False)
        full = np.zeros(self.m)
        full[rows] = d
        x = beta - self.matrix_t @ full
        floor = (
            _FACE_RESIDUAL
            * float(np.max(np.abs(self.e_val))) ** 2
            * max(float(np.max(np.abs(x))), float(np.max(np.abs(beta))), 1e-300)
        )
        # refine while the residual halves (down to rounding: λ‖Δ_F x‖₁ enters the gap,
        # and λ may be 10⁸ times |x|), then accept if it is below the floor
        size_res = math.inf
        best: tuple[np.ndarray, np.ndarray] | None = None
        for _ in range(_REFINE + 1):
            res = (self.matrix @ x)[rows]
            new = float(np.max(np.abs(res)))
            if new > 0.5 * size_res:
                break
            best = (d.copy(), x.copy())
            size_res = new
            if new == 0.0:
                break
            delta = sla.cho_solve_banded((chol, True), res, check_finite=False)
            d += delta
            full[rows] = delta
            x -= self.matrix_t @ full
        return best if best is not None and size_res <= floor else None

    def _grounds(self, fixed: np.ndarray) -> np.ndarray:
        """Order 1: components without a fixed row (their first rows are held fixed)."""
        has = np.bincount(self.comp, weights=fixed.astype(np.float64), minlength=self.n_comp)
        return has == 0

    def _centre(self, u: np.ndarray, loose: np.ndarray) -> np.ndarray:
        """Shift ``u`` by a constant on each component in ``loose`` (where ``f`` is constant
        along ``1_c``) so that it is centred in the box there."""
        hi = np.full(self.n_comp, -np.inf)
        lo = np.full(self.n_comp, np.inf)
        np.maximum.at(hi, self.comp, u)
        np.minimum.at(lo, self.comp, u)
        return u + np.where(loose, -(hi + lo) / 2, 0.0)[self.comp]

    def face(
        self, lam: float, sign: np.ndarray, u_start: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray] | None:
        """The minimiser of ``f`` with ``u_A = λ s_A`` (``A``: ``sign ≠ 0``) and the other
        rows free: ``(u, x)`` with ``x = y − Δᵀu`` from (2); None if singular."""
        u = np.where(sign != 0, lam * sign, u_start)
        fixed = sign != 0
        solve_rows = ~fixed
        loose = None
        if self.ground_rows:
            loose = self._grounds(fixed)
            solve_rows = solve_rows.copy()
            solve_rows[self.first[loose]] = False
        rows = np.flatnonzero(solve_rows)
        solved = self.newton(self.beta_of(u), rows)
        if solved is None:
            return None
        d, x = solved
        u[rows] += d
        if loose is not None and loose.any():
            u = self._centre(u, loose)
        return u, x

    def settle(
        self, lam: float, x: np.ndarray, dx: np.ndarray, u: np.ndarray, sign: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray, float, float]:
        """The fit of a face that satisfies the optimality conditions, its ``Δx``, primal
        objective and certified gap; on a chain of order 2 the point of the face that floating
        point represents exactly (:mod:`._exact_face`), if its gap is smaller."""
        r = self.y - x
        primal = 0.5 * float(r @ r) + lam * float(np.abs(dx).sum())
        gap = self.gap(lam, x, dx, u)
        if self.exact_face is not None and gap > _EXACT_GAP * max(primal, 1e-300):
            snapped = self.exact_face.snap(x, sign)
            if snapped is not None:
                dxs = self.matrix @ snapped
                rs = self.y - snapped
                primal_s = 0.5 * float(rs @ rs) + lam * float(np.abs(dxs).sum())
                gap_s = self.gap(lam, snapped, dxs, u)
                if gap_s < gap:
                    return snapped, dxs, primal_s, gap_s
        return x, dx, primal, gap

    def interior(self, lam: float, u0: np.ndarray, tol: float) -> DualSolution | np.ndarray:
        """The interior-point method (:mod:`._dual_ipm`) from ``u0`` to locate the
        support, then the active-set method from the rows it finds at their bounds; tried
        again to a higher accuracy if that does not finish.  Returns the exact solution or a
        box-feasible point to start projected Newton from."""
        point = np.clip(u0, -lam, lam)
        steps = 0
        for reduction in _IPM_REDUCTION:
            found = self.ipm.run(lam, u0, reduction, _IPM_STEPS)
            if found is None:
                break
            steps += found.steps
            sign = found.sign(lam)
            point = np.where(sign != 0, lam * sign, found.u)
            res = self.pdas(lam, point, tol)
            if isinstance(res, DualSolution):
                res.steps += steps
                return res
        return np.clip(point, -lam, lam)

    def pdas(self, lam: float, u0: np.ndarray, tol: float) -> DualSolution | np.ndarray:
        """Primal-dual active set (Hintermüller, Ito & Kunisch 2002) from the support of
        ``u0`` (its rows at ``±λ``): solve the face, then drop the rows whose jump has the
        wrong sign and add the rows whose multiplier left the box, only those whose
        violation is the largest among the rows sharing a node with them (a bulge of
        ``|u| > λ`` is one new kink, not many).  Returns the exact solution, or (on
        cycling or too many steps) a box-feasible point to start projected Newton from.
        Order 1 on a chain runs the same rules on the knots first (:mod:`._knots`)."""
        if self.knots is not None and lam > 0:
            fast = self._knot_pdas(lam, u0, tol)
            if fast is not None:
                return fast
        sign = np.where(np.abs(u0) >= lam, np.sign(u0), 0.0)
        u = np.asarray(u0, dtype=np.float64)
        seen = {sign.tobytes()}
        for step in range(1, _PDAS_STEPS + 1):
            solved = self.face(lam, sign, u)
            if solved is None:
                break
            u, x = solved
            dx = self.matrix @ x
            over = np.abs(u) - lam
            fixed = sign != 0
            wrong = fixed & (sign * dx < 0)
            enter = ~fixed & (over > 0)
            if not wrong.any() and not enter.any():
                x, dx, primal, gap = self.settle(lam, x, dx, u, sign)
                if gap <= tol * max(primal, 1e-300):
                    return DualSolution(x, u, dx, ~fixed, primal, gap, step, True)
                break
            score = np.where(enter, over, 0.0)
            best = np.maximum.reduceat(score[self.nb_idx], self.nb_ptr)
            enter &= score >= best
            # at most a quarter of the support enters at once, worst first (full steps
            # overshoot far from the solution)
            cand = np.flatnonzero(enter)
            cap = max(1, math.ceil(_PDAS_ENTER * np.count_nonzero(fixed)))
            cand = cand[np.argsort(-score[cand])[:cap]]
            new = np.where(wrong, 0.0, sign)
            new[cand] = np.sign(u[cand])
            if new.tobytes() in seen and not self.banded:
                # cycling (e.g. two single kinks, each wrong alone, swapping)
                new = single_change(sign, cand, wrong, u, dx)
            if new.tobytes() in seen:
                break
            seen.add(new.tobytes())
            sign = new
        return np.clip(u, -lam, lam)

    def _knot_pdas(
        self, lam: float, u0: np.ndarray, tol: float
    ) -> DualSolution | np.ndarray | None:
        """:func:`._knots.pdas` from ``u0``, certified as :meth:`pdas` certifies a face; a
        box-feasible point (as :meth:`pdas` returns when it fails) if its rules fail; None
        (:meth:`pdas` runs) if a face could not be solved or the gap is above ``tol``."""
        assert self.knots is not None
        y0, y1 = self.knots
        u, x, sign = np.empty(self.n), np.empty(self.n), np.empty(self.n)
        steps = _knots.kernel()(
            self.y,
            y0,
            y1,
            float(lam),
            np.ascontiguousarray(u0, dtype=np.float64),
            _KNOT_STEPS,
            _PDAS_ENTER,
            u,
            x,
            sign,
        )
        if steps == 0 or not (np.all(np.isfinite(u)) and np.all(np.isfinite(x))):
            return None
        if steps < 0:
            return np.clip(u, -lam, lam)
        dx = self.matrix @ x
        x, dx, primal, gap = self.settle(lam, x, dx, u, sign)
        if not gap <= tol * max(primal, 1e-300):
            return None
        return DualSolution(x, u, dx, sign == 0, primal, gap, int(steps), True)

    # one λ ------------------------------------------------------------------------------
    def solve(self, lam: float, u0: np.ndarray, tol: float) -> DualSolution | None:
        """The solution of (1) from the start ``u0`` (clipped into the box): PDAS, then
        projected Newton if it does not finish; None if no point with relative gap
        ``≤ tol`` was reached."""
        u0 = np.clip(np.asarray(u0, dtype=np.float64), -lam, lam)
        start = self.interior(lam, u0, tol) if self.interior_first else self.pdas(lam, u0, tol)
        if not isinstance(start, DualSolution) and not self.interior_first:
            start = self.interior(lam, u0, tol)
        if isinstance(start, DualSolution):
            return start
        u = start
        beta = self.beta_of(u)
        dbeta = self.matrix @ beta
        f = 0.5 * float(beta @ beta)
        best: DualSolution | None = None
        steps = 0
        for steps in range(1, _MAX_STEPS + 1):
            # binding set with Bertsekas's ε (scaled gradient step as the measure)
            step = np.clip(u + dbeta / np.maximum(self.diag_q, 1e-300), -lam, lam) - u
            eps = min(_EPS_BOUND * lam, float(np.max(np.abs(step))) if step.size else 0.0)
            binding = ((u >= lam - eps) & (dbeta > 0)) | ((u <= -lam + eps) & (dbeta < 0))
            free = ~binding
            solve_rows = free.copy()
            if self.ground_rows:
                has_bound = np.bincount(
                    self.comp, weights=binding.astype(np.float64), minlength=self.n_comp
                )
                solve_rows[self.first[has_bound == 0]] = False
            rows = np.flatnonzero(solve_rows)
            d = np.zeros(self.m)
            solved = self.newton(beta, rows)
            if solved is None:
                return best
            dn, face = solved
            d[rows] = dn
            if self.ground_rows and np.any(has_bound == 0):
                # f is constant along 1_c on a component without binding rows: shift the
                # step so that u + d is centred in the box there (fewer rows clipped)
                target = u + d
                hi = np.full(self.n_comp, -np.inf)
                lo = np.full(self.n_comp, np.inf)
                np.maximum.at(hi, self.comp, target)
                np.minimum.at(lo, self.comp, target)
                shift = np.where(has_bound == 0, -(hi + lo) / 2, 0.0)
                d += shift[self.comp]
            d[binding] = dbeta[binding] / np.maximum(self.diag_q[binding], 1e-300)
            # projected Armijo search on f
            slope_free = float(dbeta[rows] @ dn)
            alpha = 1.0
            accepted = False
            for _ in range(_MAX_BACKTRACK):
                cand = np.clip(u + alpha * d, -lam, lam)
                beta_c = self.beta_of(cand)
                f_c = 0.5 * float(beta_c @ beta_c)
                decrease = alpha * slope_free + float(dbeta[binding] @ (cand - u)[binding])
                if f - f_c >= _ARMIJO * decrease - 1e-15 * max(abs(f), 1.0):
                    accepted = True
                    break
                alpha *= 0.5
            if not accepted:
                return best
            clipped = alpha != 1.0 or bool(np.any(np.abs(u[rows] + d[rows]) > lam))
            u, beta, f = cand, beta_c, f_c
            dbeta = self.matrix @ beta
            # a full, unclipped step on the face with the binding rows at their bounds is
            # the face's exact minimiser; it is the solution when their signs are right.
            # Its primal point is then taken from (2) (``x``, on the face to rounding),
            # not as y − Δᵀu, which cancels (|u| ≫ |β| for large λ).
            on_face = not clipped and bool(np.all(np.abs(u[binding]) == lam))
            primal_beta = face if on_face else beta
            dprimal = self.matrix @ primal_beta if on_face else dbeta
            r = self.y - primal_beta
            primal = 0.5 * float(r @ r) + lam * float(np.abs(dprimal).sum())
            gap = self.gap(lam, primal_beta, dprimal, u)
            signs_ok = bool(np.all(u[binding] * dbeta[binding] >= 0.0))
            exact = on_face and signs_ok and gap <= tol * max(primal, 1e-300)
            sol = DualSolution(primal_beta, u, dprimal, free, primal, gap, steps, exact)
            if best is None or gap < best.gap:
                best = sol
            if exact or gap <= _EXACT_GAP * max(primal, 1e-300):
                return sol
        if best is not None and best.gap <= tol * max(best.primal, 1e-300):
            return best
        return None
