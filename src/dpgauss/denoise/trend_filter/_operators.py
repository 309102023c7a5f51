"""The difference operators of graph trend filtering and the structure of a solution.

``Δ⁽ᵏ⁺¹⁾`` (``D``, ``L = DᵀD``, ``DL``; see :mod:`dpgauss.denoise.trend_filter`) is built
from the graph's oriented edge incidence, either as an explicit sparse matrix whose
``I + ρΔᵀΔ`` is solved by a cached sparse LU (:class:`_SparseDifference`), or, on a 1-D chain
or a row-major ``H × W`` lattice, matrix-free with the system diagonalised by the orthonormal
DCT-II (:class:`_LatticeDifference`).  The structure of a solution: connected components of
the fused rows, and the degrees of freedom (the nullity of ``Δ_Z``, the package docstring).
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable

import numpy as np
import scipy.sparse as sp
from scipy import ndimage
from scipy.fft import dctn, idctn
from scipy.sparse.csgraph import connected_components

from ..graph import Graph, component_roots
from ._sparse_spd import ReorderedSPD
from ._sparse_spd import spd_lu as _spd_lu

# The factorisations of I + ρΔᵀΔ kept per operator (one per ρ).
_LU_CACHE = 3


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
# Structure of a solution: fused rows, degrees of freedom
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
