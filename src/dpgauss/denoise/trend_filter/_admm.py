"""ADMM for one λ of graph trend filtering, with polishing and the primal-dual active set.

The iteration, its ρ adaptation, Anderson acceleration, polishing of a settled support into
the exact solution for that support, and the certified duality gap that stops it are
described in :mod:`dpgauss.denoise.trend_filter` ("Solver", "Stopping rule").
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass
from typing import Any

import numpy as np
import scipy.sparse as sp
from scipy.sparse.csgraph import minimum_spanning_tree

from ..graph import component_roots
from ._dual_newton import single_change
from ._operators import _degrees_of_freedom, _Operator, _SparseDifference
from ._order1 import FaceSolver
from ._sparse_spd import spd_lu as _spd_lu

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


# --------------------------------------------------------------------------------------
# Polishing: the exact solution for a support
# --------------------------------------------------------------------------------------


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


def harmonic_basis(op: _Operator, rows: np.ndarray) -> tuple[np.ndarray, Any] | None:
    """``(H, lu)``: the harmonic extensions ``H = [−L_{Z'Z'}⁻¹L_{Z'F}; I]`` spanning
    ``null(L_{Z'})`` for the row basis ``rows`` = ``Z'`` (:func:`_polish_harmonic`), and the
    factorisation of ``L_{Z'Z'}``; None if it cannot be factorised."""
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
    return basis, lu


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
    built = harmonic_basis(op, rows)
    if built is None:
        return None
    basis, lu = built
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
        # clamped: λ / scale_dy overflows to inf for a tiny scale (y near 1e-300, λ large)
        rho = min(max(rho, 1e-300), 1e300)
        return _State(z, w, step * round(math.log2(rho) / step))

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
        """Order 1: ``(β, u)`` for the support ``sign`` by :class:`._order1.FaceSolver`
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
