"""The faces of order-1 trend filtering on a general graph, by preconditioned CG.

For order 1 (``Δ = L``, the graph Laplacian, rows ↔ nodes) a face of the dual
``min ½‖y − Lu‖², |u| ≤ λ`` (:mod:`._dual_newton`) fixes ``u`` on the rows ``S`` (the
active nodes, and one *ground* node of each component without any) and solves for the
others, ``R``, from a point ``β = y − Lu``:

    Q_RR d = (Lβ)_R,      Q = L²,      x = β − L E_R d = Π_{null(L_R)} β,          (1)

``E_R`` the injection of ``R`` into the nodes.  ``Q_RR`` is positive definite (every
component has a node outside ``R``, so ``L_R`` has full row rank), and its residual is the
face residual: ``(Lβ)_R − Q_RR d = (L x)_R``, which must vanish.

The solver never factorises a dense matrix.  ``Q``'s pattern is ordered once (minimum
degree on ``Q + I``, :func:`._sparse_spd.fill_reducing_order`); every ``Q_RR`` is a
principal submatrix, so the induced order serves it with no fill beyond the full one and no
ordering cost (:mod:`._sparse_spd`).  A factorisation of

    N = Q_{R₀R₀} ⊕ diag(Q)_{S₀}

for some earlier face ``R₀`` is kept, and (1) is solved by conjugate gradients (Hestenes &
Stiefel 1952) preconditioned by ``P = (N⁻¹)_RR`` (positive definite: a principal submatrix
of ``N⁻¹``).  ``Q_RR`` and ``(P⁻¹)`` agree except on the rows and columns of nodes that
moved between ``R`` and ``S`` (``P⁻¹`` is the Schur complement of ``N`` onto ``R``, which
differs from ``N_RR`` only through the nodes of ``S ∩ R₀``, and ``N_RR`` from ``Q_RR`` only
on those of ``R ∩ S₀``), so ``P Q_RR`` is the identity plus a matrix of rank at most
``2|R ∖ R₀| + |R₀ ∖ R|``, and in exact arithmetic CG ends within that many steps plus one
(Saad, *Iterative Methods for Sparse Linear Systems*, 2003, §6.11).  ``Q_RR`` is badly
conditioned, so in floating point this holds only for small ranks: ``N`` is refactorised
at the current face when more than ``_REFACTOR_MOVED`` nodes moved since it was made, or
when CG does not converge within two steps per moved node (and a few more).  With ``N`` at
the current face CG is iterative refinement of the factorisation.  Along a λ path the
first face of each λ is the last face of the previous one, and the active-set steps often
move only a few nodes: on the Manhattan road graph 57 of the 120 faces of a SURE path are
solved without a factorisation (the threshold between 2 and 8 moved nodes made little
difference there, at 6 the path took 0.6 s against 0.72 s refactorising every face).

At large λ few nodes are removed (``|S|`` small) and most of the faces' cost above is the
refactorisations of ``Q_RR`` over nearly all the nodes (5 ms each on the 4,091-node
Manhattan graph).  There a face is solved first by the capacitance route
(:mod:`._capacitance`): one factorisation of the grounded ``Q`` per λ path, one cached
column ``(grounded Q)⁻¹ e_a`` per node that is ever removed, and a dense Cholesky factor of
the ``|S| × |S|`` capacitance matrix updated from face to face; it is an exact solve of
``Q_RR`` up to rounding, so CG (the same iteration, budget and certificate as with ``N`` at
the current face) ends in one or two steps.  It is used while the capacitance matrix has at
most ``_CAPACITANCE_MAX`` rows and at most ``_CAPACITANCE_NEW`` of the face's columns are
not cached yet (a column costs about 1/40 of a factorisation); a face it does not certify
(CG not at the floor in ``_CG_FRESH`` steps, a singular capacitance matrix, a full cache)
takes the route above.  On the Manhattan SURE path it served 76 of the 92 faces (up to 189
active nodes; the later steps add more than 32 new active nodes each and are factorised:
11 factorisations of ``Q_RR`` instead of 37, 242 cached columns), and the path took 0.35 s
of CPU against 0.49 s (``docs/benchmarks.md``).

``Q_RR`` has the condition number of ``L_R`` squared, so each step's residual is the true
one, ``(L x)_R`` recomputed from ``d``; the solve is accepted once it falls to
``_FACE_RESIDUAL · max|L|² · max|x|``, else the caller solves the augmented system, whose
condition number is that of ``L_R``.  The floor is relative to ``x`` alone, not to ``β``:
for large λ, ``|β| ≫ |x|`` (the multipliers are far larger than the fit), and
``λ‖(L x)_R‖₁`` enters the duality gap, so a residual at the rounding of ``β`` would
exceed the tolerance (a scrambled 2,000-node path: relative gap 3e-4).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import scipy.sparse as sp
from scipy.sparse.csgraph import connected_components

from ._capacitance import Capacitance
from ._sparse_spd import fill_reducing_order, spd_lu

__all__ = ["FaceSolver"]

_FACE_RESIDUAL = 1e-13  # accept max|(L x)_R| ≤ this × max|L|² × max|x|
_REFACTOR_MOVED = 6  # refactorise N when more nodes than this moved since it was made
_CG_PER_MOVED = 2  # CG steps allowed per moved node (the rank bound of the module doc) …
_CG_SLACK = 6  # … and beyond, before refactorising
_CG_FRESH = 8  # CG (refinement) steps allowed with N at the current face
# SuperLU's panel width for N (None: its default): the factorisations are most of a
# lattice path's time, and 4 made them ~8% faster on the faces of 60 × 60 and 100 × 100
# lattices (same fill; no measurable change at 250 × 250 nor on the Manhattan road graph)
_PANEL = 4
# The capacitance route (:mod:`._capacitance`) serves faces whose capacitance matrix has at
# most _CAPACITANCE_MAX rows (the active nodes) of which at most _CAPACITANCE_NEW are not
# cached yet; other faces take the factorisation route.  On the Manhattan SURE path
# (median CPU of 3, same session): (200, any) 0.37 s, (200, 16) 0.38, (400, 16) 0.37,
# (400, 32) 0.35, (1000, 24) 0.37, (1000, 64) 0.41; without the route 0.50 s.
# Its column cache holds at most _CAPACITANCE_COLUMNS columns and _CAPACITANCE_BYTES.
_CAPACITANCE_MAX = 400
_CAPACITANCE_NEW = 32
_CAPACITANCE_COLUMNS = 1_000
_CAPACITANCE_BYTES = 64 << 20


class FaceSolver:
    """Solves (1) of the module doc for any face of one Laplacian ``L``."""

    def __init__(
        self,
        laplacian: sp.spmatrix,
        face_residual: float = _FACE_RESIDUAL,
        components: np.ndarray | None = None,
    ) -> None:
        lap = sp.csr_matrix(laplacian, dtype=np.float64)
        self.lap = lap
        self.n = lap.shape[0]
        self.face_residual = face_residual
        self.max_entry = float(np.max(np.abs(lap.data))) if lap.nnz else 0.0
        q = sp.csr_matrix(lap @ lap)
        diag = q.diagonal()
        self.inv_diag = np.divide(1.0, diag, out=np.zeros(self.n), where=diag > 0)
        order = fill_reducing_order(q + sp.identity(self.n, format="csr"))
        pos = np.empty_like(order)
        pos[order] = np.arange(self.n)
        self.order, self.pos = order, pos
        # Q in the fill-reducing order, compressed by columns (rows sorted in each)
        qp = sp.csc_matrix(q[order][:, order])
        qp.sort_indices()
        self.q_indptr, self.q_indices, self.q_data = qp.indptr, qp.indices, qp.data
        self.q_col = np.repeat(np.arange(self.n), np.diff(qp.indptr))
        self.base: np.ndarray | None = None  # R₀ as a mask over the nodes
        self.base_solve: Callable[[np.ndarray], np.ndarray] | None = None
        self.factorisations = 0
        if components is None:
            components = connected_components(abs(lap), directed=False)[1]
        columns = min(_CAPACITANCE_COLUMNS, _CAPACITANCE_BYTES // (8 * max(self.n, 1)))
        self.capacitance = Capacitance(
            qp, order, pos, components, _CAPACITANCE_MAX, columns, _PANEL
        )
        self.capacitance_solves = 0  # faces certified through the capacitance route
        self.capacitance_refused = 0  # faces it was tried on and did not certify

    def _factor(self, rows: np.ndarray) -> bool:
        """Factorise ``N`` at the face ``R = rows`` (a mask); False if it fails."""
        keep = rows[self.order]  # by position
        local = np.cumsum(keep) - 1
        ent = keep[self.q_indices] & keep[self.q_col]
        size = int(np.count_nonzero(keep))
        # the principal submatrix keeps CSC order (local is increasing): no sorting
        indptr = np.zeros(size + 1, dtype=np.int64)
        np.cumsum(np.bincount(local[self.q_col[ent]], minlength=size), out=indptr[1:])
        mat = sp.csc_matrix(
            (self.q_data[ent], local[self.q_indices[ent]], indptr), shape=(size, size)
        )
        try:
            lu = spd_lu(mat, ordered=True, panel_size=_PANEL) if size else None
        except RuntimeError:
            self.base = None
            return False
        self.factorisations += 1
        self.base = rows.copy()
        kept = self.order[keep]  # the nodes of R₀ in elimination order

        def solve(r: np.ndarray) -> np.ndarray:
            z = r * self.inv_diag  # diag(Q) on S₀
            if lu is not None:
                z[kept] = lu.solve(r[kept])
            return z

        self.base_solve = solve
        return True

    def solve(self, beta: np.ndarray, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray] | None:
        """``(d, x)`` of (1) for the solve rows ``rows`` (indices, increasing), ``d`` on
        those rows only; None if CG does not reach the rounding floor even with ``N``
        factorised at this face."""
        n = self.n
        mask = np.zeros(n, dtype=bool)
        mask[rows] = True
        if n - rows.size <= _CAPACITANCE_MAX:
            pre = self.capacitance.face(~mask, _CAPACITANCE_NEW)
            if pre is not None:
                d = np.zeros(n)
                x = beta.copy()
                if (
                    self._cg(mask, d, x, _CG_FRESH, pre)
                    and np.all(np.isfinite(d))
                    and np.all(np.isfinite(x))
                ):
                    self.capacitance_solves += 1
                    return d[rows], x
                self.capacitance_refused += 1
        moved = n if self.base is None else int(np.count_nonzero(mask != self.base))
        fresh = False
        if moved > _REFACTOR_MOVED or self.base_solve is None:
            if not self._factor(mask):
                return None
            fresh, moved = True, 0
        d = np.zeros(n)
        x = beta.copy()
        while True:
            budget = _CG_FRESH if fresh else _CG_PER_MOVED * moved + _CG_SLACK
            assert self.base_solve is not None
            done = self._cg(mask, d, x, budget, self.base_solve)
            if done:
                break
            if fresh or not self._factor(mask):
                return None
            fresh = True
        if not (np.all(np.isfinite(d)) and np.all(np.isfinite(x))):
            return None
        return d[rows], x

    def _cg(
        self,
        mask: np.ndarray,
        d: np.ndarray,
        x: np.ndarray,
        budget: int,
        solve: Callable[[np.ndarray], np.ndarray],
    ) -> bool:
        """CG on (1) preconditioned by ``solve`` from ``d`` (zero off ``R``), updating ``d``
        and ``x = β − L d`` in place; True once ``max|(L x)_R|`` is at the rounding floor."""
        lap = self.lap
        off = ~mask
        floor_factor = self.face_residual * self.max_entry**2

        def residual() -> tuple[np.ndarray, float]:
            r = lap @ x
            r[off] = 0.0
            size = float(np.max(np.abs(r))) if r.size else 0.0
            return r, size

        r, size = residual()
        floor = floor_factor * float(np.max(np.abs(x)))
        if size <= floor:
            return True
        p = np.zeros_like(d)
        rz_old = 1.0
        for step in range(budget):
            z = solve(r)
            z[off] = 0.0
            rz = float(r @ z)
            if rz <= 0.0:
                return False
            p = z if step == 0 else z + (rz / rz_old) * p
            lp = lap @ p
            qp = lap @ lp
            qp[off] = 0.0
            pqp = float(p @ qp)
            if not pqp > 0.0:
                return False
            alpha = rz / pqp
            d += alpha * p
            x -= alpha * lp
            rz_old = rz
            r, size = residual()  # the true residual: Q_RR is badly conditioned
            floor = floor_factor * float(np.max(np.abs(x)))
            if size <= floor:
                return True
        return False
