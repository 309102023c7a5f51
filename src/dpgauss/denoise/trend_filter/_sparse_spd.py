"""Sparse factorisations of symmetric positive definite matrices, reusing one ordering.

SuperLU (``scipy.sparse.linalg.splu``) factorises ``PAPᵀ = LU`` with a fill-reducing
column order ``P``; for a symmetric positive definite ``A`` no pivoting is needed (Cholesky
exists for every symmetric permutation, so ``diag_pivot_thresh=0`` keeps the diagonal
pivots).  Its minimum-degree ordering (on ``Aᵀ + A``) costs about as much as the numeric
factorisation on road graphs, so matrices that share a sparsity pattern (or whose pattern
is contained in a fixed one: principal submatrices, whose filled graph under the induced
order is a subgraph of the full one — George & Liu, *Computer Solution of Large Sparse
Positive Definite Systems*, 1981, §5.1) are permuted once and factorised in that order.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import scipy.sparse as sp
import scipy.sparse.linalg as spla

__all__ = ["ReorderedSPD", "fill_reducing_order", "spd_lu"]


def spd_lu(matrix: sp.csc_matrix, ordered: bool = False, panel_size: int | None = None) -> Any:
    """Sparse LU of a symmetric positive (or quasi-) definite matrix, without pivoting.

    ``ordered=True`` says the rows and columns are already in a fill-reducing order (for
    instance ``perm_c`` of an earlier factorisation with the same pattern, see
    :class:`ReorderedSPD`): SuperLU then skips its minimum-degree ordering, about half of
    the factorisation time on road graphs.  ``panel_size`` is the number of consecutive
    columns SuperLU's left-looking supernodal factorisation updates together (None: its
    default); it changes the speed and the rounding, not the fill or the pivots.
    """
    return spla.splu(
        matrix,
        permc_spec="NATURAL" if ordered else "MMD_AT_PLUS_A",
        diag_pivot_thresh=0.0,
        panel_size=panel_size,
        options={"SymmetricMode": True},
    )


def fill_reducing_order(matrix: sp.spmatrix) -> np.ndarray:
    """A minimum-degree order of a symmetric positive definite ``matrix`` (SuperLU's, on
    ``Aᵀ + A``): ``order[k]`` is the row eliminated ``k``-th."""
    return _elimination_order(spd_lu(sp.csc_matrix(matrix)))[0]


def _elimination_order(lu: Any) -> tuple[np.ndarray, np.ndarray]:
    """``(order, inverse)`` of a factorisation's column permutation: ``order[k]`` is the row
    eliminated ``k``-th, ``inverse[i]`` when row ``i`` is (SuperLU's ``perm_c``)."""
    inverse = np.asarray(lu.perm_c, dtype=np.int64)
    order = np.empty_like(inverse)
    order[inverse] = np.arange(inverse.size)
    return order, inverse


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
            self._order = _elimination_order(lu)
            order = self._order[0]
            self._permuted = sp.csc_matrix(self.gram[order][:, order])
            return lu.solve
        order, inverse = self._order
        assert self._permuted is not None
        solve = spd_lu(sp.csc_matrix(eye + rho * self._permuted), ordered=True).solve

        def permuted_solve(b: np.ndarray) -> np.ndarray:
            return solve(b[order])[inverse]

        return permuted_solve
