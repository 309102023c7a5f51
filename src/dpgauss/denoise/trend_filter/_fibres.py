"""Chains and the chain fibres of a product: their layout and their order-0 certificates.

A graph is a *fibre layout* ``(outer, length, inner)`` when, with the nodes numbered in C
order of an ``outer × length × inner`` array, its edges are exactly those between
neighbours along the middle axis: ``outer·inner`` disjoint chains of ``length ≥ 2`` nodes
each (node ``k`` to ``k + inner``).  A chain is ``(1, n, 1)``; a product domain whose one
axis is a ``range`` (a chain) and whose other axes carry no structure (``values``) is such
a layout, e.g. ``values × range`` is ``(K, n, 1)``, ``range × values`` is ``(1, n, K)``.
Order-0 trend filtering there is one 1-D TV problem per fibre (:func:`._tv1d.tv1d_rows`).

On such a graph the order-0 operator ``D`` has full row rank (a forest), so the dual
``u`` with ``Dᵀu = r`` is unique: the running sums of ``r`` along each fibre.  The
least-norm dual at the null-space projection (:func:`dual`, :func:`lam_max`) is thus
exact sums instead of a Laplacian solve (two DCTs on a chain, a sparse LU on a product):
``r_i = y_i − ȳ_f`` with ``ȳ_f`` the fibre's mean (a constant fibre's own value, so that
its dual is exactly 0), and ``u_k = Σ_{i ≤ k} r_i`` summed in node order.  The general
route and the direct route (:mod:`._chain`) of :mod:`dpgauss.denoise.trend_filter` both
take λ_max from here, so their λ grids are the same to the last bit.

:func:`certificate` computes in one pass what :meth:`._path._Path.solve_exact`,
:meth:`._path._Path.settle` and SURE compute for a chain with several: ``‖y − x‖²``,
``Σ|Dx|``, ``(Dx)ᵀu`` with ``u`` clipped to ``[−λ, λ]``, ``‖y − x − Dᵀu‖²`` (the duality
gap's terms) and the number of rows ``|Dx| > atol`` (the jumps; df = fibres + jumps).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from ..._optional import numba
from ..structure import Structure

__all__ = ["Layout", "certificate", "dual", "lam_max", "layout_of_edges", "layout_of_structure"]

_numba = numba()


@dataclass(frozen=True)
class Layout:
    """``outer·inner`` chains of ``length`` nodes along the middle axis of C order."""

    outer: int
    length: int
    inner: int

    @property
    def n(self) -> int:
        return self.outer * self.length * self.inner

    @property
    def fibres(self) -> int:
        return self.outer * self.inner

    def rows(self, y: np.ndarray) -> np.ndarray:
        """``y`` (node order) as the C-contiguous ``fibres × length`` array of its fibres (a
        view when ``inner == 1``)."""
        cube = y.reshape(self.outer, self.length, self.inner)
        if self.inner == 1:
            return cube.reshape(self.outer, self.length)
        rows = np.ascontiguousarray(cube.transpose(0, 2, 1))
        return rows.reshape(self.fibres, self.length)

    def nodes(self, rows: np.ndarray) -> np.ndarray:
        """The inverse of :meth:`rows`: a ``fibres × length`` array back in node order."""
        if self.inner == 1:
            return rows.reshape(-1)
        cube = rows.reshape(self.outer, self.inner, self.length).transpose(0, 2, 1)
        return np.ascontiguousarray(cube).reshape(-1)

    def labels(self) -> np.ndarray:
        """The fibre of every node (a connected-component labelling)."""
        f = np.arange(self.fibres, dtype=np.int64).reshape(self.outer, 1, self.inner)
        return np.broadcast_to(f, (self.outer, self.length, self.inner)).reshape(-1)


def layout_of_edges(n: int, edges: np.ndarray) -> Layout | None:
    """The fibre layout of the graph with ``n`` nodes and ``edges`` (``(m, 2)``, ``u < v``,
    no repeats: :class:`~dpgauss.denoise.graph.Graph`'s normal form, in any order), or None.

    ``n − m`` fibres of ``n / (n − m)`` nodes; every edge ``(t, t + s)`` with one stride
    ``s`` and ``t`` not at a fibre's end; with distinct tails (checked) these are all
    ``n − m`` edges of the layout, hence exactly its edges.  O(m); with numba, edges sorted
    by tail (as :func:`~dpgauss.denoise.as_graph` writes them) are checked in one compiled
    pass against the layout's edges in order (:func:`_sorted_layout`)."""
    m = int(edges.shape[0])
    if m == 0 or m >= n:
        return None
    count = n - m
    if n % count:
        return None
    length = n // count
    tails = edges[:, 0]
    stride = int(edges[0, 1] - edges[0, 0])
    if length < 2 or stride <= 0 or n % (length * stride):
        return None
    kernels = _kernels()
    if kernels and kernels[3](edges, stride, length):  # sorted (the normal form): one pass
        return Layout(n // (length * stride), length, stride)
    if not np.array_equal(edges[:, 1] - tails, np.broadcast_to(stride, tails.shape)):
        return None
    if int(tails.min()) < 0 or int(tails.max()) + stride >= n:
        return None
    if np.any((tails // stride) % length == length - 1):
        return None
    if int(np.bincount(tails, minlength=n).max()) > 1:
        return None
    return Layout(n // (length * stride), length, stride)


def layout_of_structure(known: Structure) -> Layout | None:
    """The fibre layout of a checked structure (:func:`~dpgauss.denoise.structure.as_structure`):
    of its graph if it has one (:func:`layout_of_edges`), else the chain of a 1-D grid,
    without building its edges; None otherwise."""
    if known.graph is not None:
        return layout_of_edges(known.graph.n, known.graph.edges)
    if known.grid is not None and len(known.grid) == 1:
        return Layout(1, known.grid[0], 1)
    return None


# --------------------------------------------------------------------------------------
# The least-norm dual (λ_max) and the certificate, compiled when numba is installed
# --------------------------------------------------------------------------------------


def _sorted_layout(edges: Any, stride: int, length: int) -> bool:
    """Whether ``edges`` are exactly the layout's edges ``(t, t + stride)`` in increasing
    ``t`` (``t`` runs over the nodes not at a fibre's end: blocks of ``(length − 1)·stride``
    consecutive nodes, ``stride`` skipped after each); the caller checked their number."""
    pos = 0
    run = 0
    block = (length - 1) * stride
    for k in range(edges.shape[0]):
        if edges[k, 0] != pos or edges[k, 1] != pos + stride:
            return False
        pos += 1
        run += 1
        if run == block:
            pos += stride
            run = 0
    return True


def _scan_kernel(y: Any) -> tuple[Any, float]:
    """Each row's mean (a constant row's own value, so that its dual is exactly 0) and
    ``max|y|`` (compiled with ``fastmath``: the sums vectorised, in an order of the
    compiler's)."""
    n_rows, length = y.shape
    means = np.zeros(n_rows)
    scale = 0.0
    for f in range(n_rows):
        yf = y[f]
        first = yf[0]
        s = 0.0
        differ = 0
        for k in range(length):
            v = yf[k]
            s += v
            differ += 1 if v != first else 0
            scale = max(scale, abs(v))
        means[f] = first if differ == 0 else s / length
    return means, scale


def _dual_kernel(y: Any, means: Any, u: Any, write: bool) -> float:
    """``max|u|`` with ``u`` the dual of the rows of ``y`` (``F × L``; module doc; the rows'
    means from :func:`_scan_kernel`), written into ``u`` (``F × (L − 1)``) if ``write``.
    The running sums in node order along each row."""
    top = 0.0
    n_rows, length = y.shape
    for f in range(n_rows):
        yf = y[f]
        mean = means[f]
        acc = 0.0
        for k in range(length - 1):
            acc += yf[k] - mean
            if write:
                u[f, k] = acc
            top = max(top, abs(acc))
    return top


def _certificate_kernel(
    y: Any, x: Any, lam: float, atol: float, means: Any
) -> tuple[float, float, float, float, int, float]:
    """``(‖y − x‖², Σ|Dx|, (Dx)ᵀu, ‖y − x − Dᵀu‖², #{|Dx| > atol}, λ_max)`` over the rows
    (``D`` row ``k`` is ``e_k − e_{k+1}``), with ``u`` the dual of :func:`._tv1d.tv1d`
    rebuilt from ``x`` (the running sums of ``y − x``, restarted at ``±λ`` after every
    jump, as the kernel writes it; clipped to ``[−λ, λ]``) and, if ``means`` (each row's, as
    :func:`scan` gives them) is not None, λ_max (:func:`lam_max`) on the way (else NaN):
    the same sums in the same order as :func:`_dual_kernel`, so the same number."""
    rss = 0.0
    tv = 0.0
    dot = 0.0
    dd = 0.0
    jumps = 0
    top = 0.0
    n_rows, length = y.shape
    last = length - 1
    for f in range(n_rows):
        yf = y[f]
        xf = x[f]
        acc = 0.0
        least = 0.0
        mean = 0.0 if means is None else means[f]
        prev = 0.0
        for k in range(last):
            res = yf[k] - xf[k]
            rss += res * res
            acc += res
            uk = min(max(acc, -lam), lam)
            d = xf[k] - xf[k + 1]
            ad = abs(d)
            tv += ad
            dot += d * uk
            jumps += 1 if ad > atol else 0
            # a new segment: its dual starts at the exact ±λ (selects, not branches: a
            # quarter of the edges can be jumps, at random)
            start = lam if d > 0.0 else -lam
            acc = start if d != 0.0 else acc
            delta = res - (uk - prev)
            dd += delta * delta
            prev = uk
            if means is not None:
                least += yf[k] - mean
                top = max(top, abs(least))
        res = yf[last] - xf[last]
        rss += res * res
        dd += (res + prev) * (res + prev)
    if means is None:
        top = np.nan
    return rss, tv, dot, dd, jumps, top


_compiled: Any = None


def _kernels() -> Any:
    global _compiled
    if _compiled is None:
        if _numba is None:
            _compiled = ()
        else:
            jit = _numba.njit(cache=True, nogil=True)
            fast = _numba.njit(cache=True, nogil=True, fastmath=True)
            _compiled = (
                fast(_scan_kernel),
                jit(_dual_kernel),
                jit(_certificate_kernel),  # scalar anyway (the dual's recurrence): strict
                jit(_sorted_layout),
            )
    return _compiled


def _means_numpy(rows: np.ndarray) -> np.ndarray:
    mean = rows.sum(axis=1) / rows.shape[1]
    return np.where(np.all(rows == rows[:, :1], axis=1), rows[:, 0], mean)


def scan(rows: np.ndarray) -> tuple[np.ndarray, float]:
    """Each fibre's mean (a constant fibre's own value) and ``max|y|``, one pass."""
    kernels = _kernels()
    if kernels:
        means, scale = kernels[0](rows)
        return means, float(scale)
    return _means_numpy(rows), float(np.max(np.abs(rows)))


def _dual_numpy(rows: np.ndarray, means: np.ndarray) -> np.ndarray:
    """:func:`_dual_kernel` in numpy."""
    return np.cumsum(rows[:, :-1] - means[:, None], axis=1)


def lam_max(rows: np.ndarray, means: np.ndarray) -> float:
    """``‖u‖∞`` of the least-norm dual of the fibres ``rows`` (``F × L``; module doc), their
    means from :func:`scan`."""
    kernels = _kernels()
    if kernels:
        return float(kernels[1](rows, means, np.empty((0, 0)), False))
    return float(np.max(np.abs(_dual_numpy(rows, means))))


def dual(rows: np.ndarray) -> np.ndarray:
    """The least-norm dual of the fibres ``rows``, ``F × (L − 1)`` (module doc): the same
    numbers whose largest magnitude :func:`lam_max` returns."""
    means, _ = scan(rows)
    kernels = _kernels()
    if kernels:
        u = np.empty((rows.shape[0], rows.shape[1] - 1))
        kernels[1](rows, means, u, True)
        return u
    return _dual_numpy(rows, means)


def certificate(
    y: np.ndarray, x: np.ndarray, lam: float, atol: float, means: np.ndarray | None = None
) -> tuple[float, float, float, float, int, float]:
    """``(‖y − x‖², Σ|Dx|, (Dx)ᵀu, ‖y − x − Dᵀu‖², jumps, λ_max or NaN)`` over the fibres
    (``F × L`` arrays; :func:`_certificate_kernel`)."""
    kernels = _kernels()
    if kernels:
        rss, tv, dot, dd, jumps, top = kernels[2](y, x, lam, atol, means)
        return float(rss), float(tv), float(dot), float(dd), int(jumps), float(top)
    r = y - x
    d = x[:, :-1] - x[:, 1:]
    u = np.empty_like(d)
    for f in range(y.shape[0]):  # the running sums, restarted at ±λ after each jump
        acc = 0.0
        for k in range(d.shape[1]):
            acc += r[f, k]
            u[f, k] = acc
            if d[f, k] != 0.0:
                acc = lam if d[f, k] > 0.0 else -lam
    uc = np.clip(u, -lam, lam)
    dtu = np.zeros_like(x)
    dtu[:, :-1] += uc
    dtu[:, 1:] -= uc
    delta = r - dtu
    ad = np.abs(d)
    top = float("nan") if means is None else lam_max(y, means)
    return (
        float(np.sum(r * r)),
        float(ad.sum()),
        float(np.sum(d * uc)),
        float(np.sum(delta * delta)),
        int(np.count_nonzero(ad > atol)),
        top,
    )
