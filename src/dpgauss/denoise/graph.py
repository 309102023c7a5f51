"""Public graph structure for the graph denoisers, in one normal form.

A graph may be given as a ``networkx.Graph`` (nodes in ``list(graph.nodes)`` order: the
released vector's coordinate ``i`` belongs to the ``i``-th node), a square scipy sparse
adjacency matrix (any nonzero entry is an edge), or an ``(m, 2)`` integer array of edges
between nodes ``0 … n−1``.  All become a :class:`Graph`: ``n`` nodes and a deduplicated
``(m, 2)`` array of undirected edges ``u < v``.  Self-loops are dropped (a difference
``β_u − β_u`` is always zero, so they change nothing); edge weights are ignored.
Disconnected graphs are allowed: every denoiser treats each component on its own (a
component's level is never smoothed toward another's).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

import numpy as np
import scipy.sparse as sp
from scipy.sparse.csgraph import connected_components

__all__ = ["Graph", "as_graph"]


@dataclass(frozen=True, eq=False)
class Graph:
    """``n`` nodes and undirected edges ``edges[k] = (u, v)`` with ``u < v``, no repeats."""

    n: int
    edges: np.ndarray

    @property
    def m(self) -> int:
        return int(self.edges.shape[0])

    @cached_property
    def incidence(self) -> sp.csr_matrix:
        """The ``m × n`` oriented incidence matrix ``Δ⁽¹⁾``: row ``k`` is ``e_u − e_v``."""
        rows = np.repeat(np.arange(self.m), 2)
        cols = self.edges.ravel()
        vals = np.tile([1.0, -1.0], self.m)
        return sp.csr_matrix((vals, (rows, cols)), shape=(self.m, self.n))

    @cached_property
    def laplacian(self) -> sp.csr_matrix:
        """The graph Laplacian ``L = Δ⁽¹⁾ᵀ Δ⁽¹⁾``."""
        d = self.incidence
        return (d.T @ d).tocsr()

    @cached_property
    def components(self) -> np.ndarray:
        """Connected-component label of every node (``0 … c−1``)."""
        adj = sp.csr_matrix(
            (np.ones(self.m), (self.edges[:, 0], self.edges[:, 1])), shape=(self.n, self.n)
        )
        return connected_components(adj, directed=False)[1]

    @property
    def n_components(self) -> int:
        return int(self.components.max()) + 1 if self.n else 0


def _normalise_edges(edges: np.ndarray, n: int) -> np.ndarray:
    if edges.size == 0:
        return np.zeros((0, 2), dtype=np.int64)
    if edges.min() < 0 or edges.max() >= n:
        bad = int(np.flatnonzero((edges < 0).any(axis=1) | (edges >= n).any(axis=1))[0])
        raise ValueError(
            f"graph edge {bad} = {tuple(int(v) for v in edges[bad])} names a node outside "
            f"0..{n - 1} (the released vector has {n} entries)"
        )
    if _normal(edges):  # already sorted pairs u < v without repeats: no sort needed
        return np.array(edges, dtype=np.int64)
    lo = np.minimum(edges[:, 0], edges[:, 1])
    hi = np.maximum(edges[:, 0], edges[:, 1])
    keep = lo != hi  # self-loops change nothing
    pairs = np.unique(np.stack([lo[keep], hi[keep]], axis=1), axis=0)
    return pairs.astype(np.int64)


def _normal(edges: np.ndarray) -> bool:
    """Whether the ``(m, 2)`` edges are already in the normal form that ``np.unique`` would
    give (``u < v``, rows strictly increasing in lexicographic order), checked in O(m): a
    chain or a lattice written in order, or a graph written by ``Graph`` itself, then costs
    no sort (``np.unique`` of 10⁶ edges takes about 0.5 s)."""
    u, v = edges[:, 0], edges[:, 1]
    if not np.all(u < v):
        return False
    du = np.diff(u)
    return bool(np.all((du > 0) | ((du == 0) & (np.diff(v) > 0))))


def as_graph(graph: object, n: int) -> Graph:
    """Normalise ``graph`` for a released vector of ``n`` entries (see module doc)."""
    if isinstance(graph, Graph):
        if graph.n != n:
            raise ValueError(f"graph has {graph.n} nodes but the released vector has {n} entries")
        return graph
    if sp.issparse(graph):
        shape = graph.shape  # type: ignore[attr-defined]  # sp.issparse is no TypeGuard
        if shape != (n, n):
            raise ValueError(
                f"graph adjacency must be {n} x {n} to match the released vector; "
                f"got {shape[0]} x {shape[1]}"
            )
        coo = sp.coo_matrix(graph)
        nz = coo.data != 0
        edges = np.stack([coo.row[nz], coo.col[nz]], axis=1).astype(np.int64)
        return Graph(n, _normalise_edges(edges, n))
    if type(graph).__module__.startswith("networkx"):
        nodes = list(graph.nodes)  # type: ignore[attr-defined]
        if len(nodes) != n:
            raise ValueError(
                f"graph has {len(nodes)} nodes but the released vector has {n} entries"
            )
        index = {node: i for i, node in enumerate(nodes)}
        pairs = [(index[u], index[v]) for u, v in graph.edges()]  # type: ignore[attr-defined]
        edges = np.array(pairs, dtype=np.int64).reshape(-1, 2)
        return Graph(n, _normalise_edges(edges, n))
    try:
        arr = np.asarray(graph)
    except (TypeError, ValueError):
        arr = np.asarray(None)
    if arr.dtype.kind not in "iu" or arr.ndim != 2 or arr.shape[1] != 2:
        raise TypeError(
            "graph must be a networkx.Graph, a scipy sparse adjacency matrix or an (m, 2) "
            f"integer array of edges; got {type(graph).__name__}"
            + (f" of shape {arr.shape} and dtype {arr.dtype}" if arr.ndim else "")
        )
    return Graph(n, _normalise_edges(arr.astype(np.int64), n))


def component_roots(components: np.ndarray) -> np.ndarray:
    """The first node (smallest index) of each connected component, from the labels
    ``0 … c−1`` of :attr:`Graph.components`: the node a grounded Laplacian or a dual with one
    dependent row per component holds fixed."""
    comp = np.asarray(components, dtype=np.int64)
    roots = np.full(int(comp.max()) + 1 if comp.size else 0, -1, dtype=np.int64)
    roots[comp[::-1]] = np.arange(comp.size)[::-1]
    return roots
