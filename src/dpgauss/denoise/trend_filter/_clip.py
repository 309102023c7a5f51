"""The divergence of the positive part ``max(β̂, 0)`` of a trend-filtering fit.

SURE of the clipped fit needs ``Σ_{i∈P} ∂β̂_i/∂y_i``, ``P = {i : β̂_i > 0}``
(:mod:`dpgauss.denoise._nonnegative`).  Almost surely the Jacobian of ``y ↦ β̂`` is the
orthogonal projection ``J = Π_{null(Δ_Z)}`` onto the face of the solution (Tibshirani &
Taylor 2012), ``Z`` its zero rows.

* Order 0: ``J`` averages over each fused group ``G``, so ``J_ii = 1/|G|`` and the sum is
  the number of groups with a positive value (with fidelity weights ``1/σ_i²``:
  ``J_ii = w_i / Σ_G w`` and the SURE term ``Σ σ_i² J_ii`` is ``Σ_{G>0} |G| / Σ_G w``).
  There the positive part is also the exact solution of the problem constrained to
  ``β ≥ 0`` (``trend_filter``'s docstring).
* Order 1 with a small face (``df ≤`` :data:`HARMONIC_MAX_DF`): exactly, from the
  harmonic basis ``H = [−L_{Z'Z'}⁻¹ L_{Z'F}; I]`` of ``null(L_{Z'})`` (as the polish of
  :mod:`._admm` builds it): ``J = H (HᵀH)⁻¹ Hᵀ``, ``J_ii = ‖R⁻ᵀ h_i‖²`` with ``HᵀH = RᵀR``.
* Otherwise ``J`` is applied by one sparse factorisation of the saddle-point system
  ``[I Cᵀ; C 0]`` (``C`` a row basis of ``Δ_Z``, as the polish of :mod:`._admm` solves).
  With ``S`` the smaller of ``P`` and its complement ``N`` (``Σ_P J_ii = tr J − Σ_N J_ii``,
  ``tr J = df`` exactly), ``Σ_S J_ii`` is computed exactly by ``|S|`` solves when
  ``|S| ≤`` :data:`EXACT_MAX`, else estimated by :data:`PROBES` Rademacher probes supported
  on ``S`` (Hutchinson 1989: ``E[zᵀJz] = Σ_S J_ii``), drawn from
  :func:`~dpgauss.denoise.result.public_seed` of ``y`` and σ, so the estimate is a
  deterministic function of the release (SURE stays unbiased: the probes are independent of
  the noise given ``y``; its added standard deviation is about ``2σ²√(2‖J_SS‖²_F/K)``, far
  below SURE's own ``σ²√(2d)``).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import scipy.sparse as sp
from scipy.linalg import solve_triangular

from ..result import public_seed
from ._admm import _KKT_REG, _basis_rows, harmonic_basis
from ._operators import _Operator
from ._sparse_spd import spd_lu

__all__ = ["EXACT_MAX", "PROBES", "positive_divergence", "positive_groups"]

#: Up to this many keys in the smaller of the positive and nonpositive sets, the diagonal
#: of the Jacobian is summed exactly (one solve per key); beyond, by PROBES probes.
EXACT_MAX = 32
PROBES = 32
#: Order 1: the harmonic basis (n × df, dense) is used up to this df (its dense Gram
#: factorisation costs df³; under load a multithreaded BLAS made df = 400 cost 0.8 s).
HARMONIC_MAX_DF = 100
_REFINE = 1


def positive_groups(
    op: _Operator, beta: np.ndarray, zero: np.ndarray, weights: np.ndarray | None = None
) -> float:
    """Order 0: ``Σ_{i: β̂_i>0} σ_i² J_ii`` in units of σ² — the number of fused groups with
    a positive value, or ``Σ_{G>0} |G| / Σ_G w`` with fidelity weights ``w = 1/σ²``."""
    n_comp, labels = op.fused_components(zero)
    sizes = np.bincount(labels, minlength=n_comp).astype(np.float64)
    value = np.bincount(labels, weights=beta, minlength=n_comp) / np.maximum(sizes, 1.0)
    pos = value > 0
    if weights is None:
        return float(np.count_nonzero(pos & (sizes > 0)))
    wsum = np.bincount(labels, weights=weights, minlength=n_comp)
    return float(np.sum(sizes[pos] / wsum[pos]))


def positive_divergence(
    op: _Operator, beta: np.ndarray, zero: np.ndarray, df: float, y: np.ndarray, sigma: float
) -> float:
    """``Σ_{i: β̂_i>0} J_ii`` for any order (module doc); ``df = tr J``."""
    if op.order == 0:
        return positive_groups(op, beta, zero)
    n = beta.size
    pos = beta > 0
    if pos.all():
        return float(df)
    if not pos.any():
        return 0.0
    rows = _basis_rows(op, zero)
    if rows.size == 0:  # J = I
        return float(np.count_nonzero(pos))
    if op.order == 1 and n - rows.size <= HARMONIC_MAX_DF:
        diag = _harmonic_diagonal(op, rows)
        if diag is not None:
            return float(np.sum(diag[pos]))
    small = pos if np.count_nonzero(pos) <= n - np.count_nonzero(pos) else ~pos
    idx = np.flatnonzero(small)
    project = _projector(op, rows)
    if idx.size <= EXACT_MAX:
        rhs = np.zeros((n, idx.size))
        rhs[idx, np.arange(idx.size)] = 1.0
        part = float(np.sum(project(rhs)[idx, np.arange(idx.size)]))
    else:
        gen = np.random.default_rng(public_seed(y, sigma))
        z = np.zeros((n, PROBES))
        z[idx] = gen.choice([-1.0, 1.0], size=(idx.size, PROBES))
        part = float(np.sum(z * project(z)) / PROBES)
    return part if small is pos else float(df) - part


def _harmonic_diagonal(op: _Operator, rows: np.ndarray) -> np.ndarray | None:
    """Order 1: the diagonal of ``J = Π_{null(L_rows)}`` from the harmonic basis (module
    doc); None if ``L_{rows,rows}`` cannot be factorised."""
    built = harmonic_basis(op, rows)
    if built is None:
        return None
    basis = built[0]
    if not np.all(np.isfinite(basis)):
        return None
    try:
        chol = np.linalg.cholesky(basis.T @ basis)  # HᵀH = R Rᵀ here (numpy's lower factor)
    except np.linalg.LinAlgError:
        return None
    x = solve_triangular(chol, basis.T, lower=True)  # R⁻¹ Hᵀ, df × n
    return np.einsum("ij,ij->j", x, x)


def _projector(op: _Operator, rows: np.ndarray) -> Callable[[np.ndarray], np.ndarray]:
    """``v ↦ Π_{null(Δ_rows)} v`` for a block of columns ``v`` (the polish's KKT system)."""
    n = op.n
    c = sp.csr_matrix(op.matrix)[rows]
    eye_n = sp.identity(n, format="csc")
    exact = sp.csc_matrix(sp.bmat([[eye_n, c.T], [c, None]], format="csc"))
    reg = sp.csc_matrix(exact - _KKT_REG * sp.diags(np.r_[np.zeros(n), np.ones(rows.size)]))
    lu = spd_lu(reg)

    def project(v: np.ndarray) -> np.ndarray:
        rhs = np.concatenate([v, np.zeros((rows.size, v.shape[1]))])
        sol = lu.solve(rhs)
        for _ in range(_REFINE):
            sol += lu.solve(rhs - exact @ sol)
        return np.asarray(sol[:n])

    return project
