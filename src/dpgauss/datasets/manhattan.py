"""The Manhattan road graph of TaxiVis (Doraiswamy et al., 2014), as a junction graph.

The file ``taxivis_manhattan_with_weights.txt`` (shipped in ``dpgauss/datasets/data``;
provenance and licence in ``data/README.md``) is plain text: a line ``nv ne``, then ``nv``
lines ``lat lon`` (vertex ``i``, 0-based, in file order), then ``ne`` lines
``src dst weight`` of **directed** road segments.  ``weight`` is a travel-time-like length,
unit undocumented (about 15 m per unit).

:func:`load_manhattan_graph` turns it into the public structure a released vector lives on:

1. **Undirected and simple.**  ``src → dst`` and ``dst → src`` become one edge ``{u, v}``;
   repeated segments collapse to one (if their weights differed the smallest would be kept;
   in this file they never differ); self-loops are dropped (the file has none).  Result:
   9,888 vertices, 12,955 edges, 145 connected components.
2. **Largest connected component** (9,474 vertices, 12,670 edges); the other 144 are
   fragments of at most 157 vertices.
3. Optionally (``prune_dead_ends=True``) **prune dead ends iteratively**: remove every
   vertex of degree ≤ 1 until none is left (the 2-core), so whole dangling streets and
   trees of cul-de-sacs go, not only their last vertex.  Pruning before step 4 is the same
   as pruning the contracted graph iteratively and contracting again the junctions that
   pruning leaves with degree 2.
4. With ``junctions=True`` (the default), **contract shape points**: vertices of degree 2
   lie in the middle of a street and only draw its shape.  Every maximal chain
   ``j₀ – s₁ – … – s_k – j₁`` between two *junctions* (vertices of degree ≠ 2) becomes one
   edge ``{j₀, j₁}`` whose length is the sum of the weights along the chain.

   Contraction can create multi-edges (two streets between the same pair of junctions) and
   self-loops (a street that leaves a junction and comes back to it).  Both would be lost
   in a simple graph (self-loops carry no difference, duplicates collapse), so we keep the
   street and keep the graph simple instead: of ``p`` parallel chains the shortest (fewest
   segments, then smallest length) stays one edge and each of the other ``p − 1`` keeps its
   middle shape point as a junction (one extra node and one extra edge each); a loop keeps
   two shape points, at about a third and two thirds of its way, as junctions (a triangle:
   two extra nodes and two extra edges).  The largest component has 20 redundant parallel
   chains and 4 loops, hence 20 + 2·4 = 28 more nodes and edges than the 4,063 junctions /
   7,259 chains of naive contraction.

Resulting sizes (tested):

=====================  ============  ==========  ======================
``junctions``          ``prune``     nodes       edges
=====================  ============  ==========  ======================
False                  False         9,474       12,670
False                  True          8,635       11,831
True                   False         4,091       7,287
True                   True          3,907       7,103
=====================  ============  ==========  ======================

The last two rows are the numbers of ``data/README.md``; the paper's graph (Balle & Wang,
ICML 2018, Sec. 5.3, after Doraiswamy et al.) has 3,784 junctions and 7,070 segments, within
3 %.  Node ``i`` of the result is original vertex ``vertex_id[i]``; nodes are ordered by
original vertex id, and edges ``(u, v)``, ``u < v``, lexicographically.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources

import numpy as np
import scipy.sparse as sp
from scipy.sparse.csgraph import connected_components

from .._validation import Interval, check_scalar

__all__ = ["RoadGraph", "load_manhattan_graph", "snap_to_nodes"]

_GRAPH_FILE = "taxivis_manhattan_with_weights.txt"
_EARTH_RADIUS_M = 6_371_008.8
_DISTANCE = Interval(0.0, math.inf, low_closed=True, high_closed=True)


@dataclass(frozen=True, eq=False)
class RoadGraph:
    """A road network as an undirected simple graph (all arrays read-only).

    Attributes
    ----------
    lat, lon
        ``(n,)`` coordinates of the nodes, degrees (WGS84).
    edges
        ``(m, 2)`` int64 array of undirected edges ``(u, v)``, ``u < v``, no repeats,
        sorted lexicographically.  Pass it with ``n`` to any graph denoiser.
    lengths
        ``(m,)`` edge lengths in the file's unit: for a contracted edge the sum of the
        weights of the segments of its chain.
    vertex_id
        ``(n,)`` the original (file) vertex of every node.
    node_of_vertex
        ``(nv,)`` for every original vertex its node index, or ``−1`` if it is not a node
        (contracted into an edge, pruned, or outside the largest component).
    edge_of_vertex
        ``(nv,)`` for every original vertex contracted into an edge, that edge's index;
        ``−1`` otherwise (nodes, pruned vertices, other components).
    """

    lat: np.ndarray
    lon: np.ndarray
    edges: np.ndarray
    lengths: np.ndarray
    vertex_id: np.ndarray
    node_of_vertex: np.ndarray
    edge_of_vertex: np.ndarray

    @property
    def n(self) -> int:
        """Number of nodes."""
        return int(self.lat.shape[0])

    @property
    def m(self) -> int:
        """Number of edges."""
        return int(self.edges.shape[0])

    def adjacency(self, weighted: bool = False) -> sp.csr_matrix:
        """The symmetric ``n × n`` adjacency matrix (entries 1, or the edge lengths)."""
        vals = self.lengths if weighted else np.ones(self.m)
        u, v = self.edges[:, 0], self.edges[:, 1]
        return sp.csr_matrix(
            (np.concatenate([vals, vals]), (np.concatenate([u, v]), np.concatenate([v, u]))),
            shape=(self.n, self.n),
        )


def load_manhattan_graph(junctions: bool = True, prune_dead_ends: bool = False) -> RoadGraph:
    """Load the Manhattan road graph (see the module docstring for every step).

    Parameters
    ----------
    junctions
        Contract degree-2 shape points into edges (4,091 nodes / 7,287 edges); ``False``
        keeps every vertex of the largest component (9,474 / 12,670).
    prune_dead_ends
        Remove dead ends iteratively first (the 2-core): 3,907 / 7,103 with junctions,
        8,635 / 11,831 without.

    The result is cached: repeated calls return the same (read-only) object.
    """
    for name, value in (("junctions", junctions), ("prune_dead_ends", prune_dead_ends)):
        if not isinstance(value, bool | np.bool_):
            raise TypeError(f"{name} must be True or False; got {type(value).__name__}")
    return _build(bool(junctions), bool(prune_dead_ends))


def snap_to_nodes(
    graph: RoadGraph,
    lat: object,
    lon: object,
    max_distance_m: float = math.inf,
) -> tuple[np.ndarray, np.ndarray]:
    """The nearest node of ``graph`` to each point, and its distance in metres.

    Distances use an equirectangular projection about the graph's mean latitude (error
    below 0.1 % over a city).  Points farther than ``max_distance_m`` from every node, or
    with non-finite coordinates, get node ``−1`` (their distance is still reported, ``inf``
    for non-finite points).  ``lat`` and ``lon`` broadcast against each other.
    """
    from scipy.spatial import cKDTree

    if not isinstance(graph, RoadGraph):
        raise TypeError(f"graph must be a RoadGraph; got {type(graph).__name__}")
    try:
        la, lo = np.broadcast_arrays(
            np.asarray(lat, dtype=np.float64), np.asarray(lon, dtype=np.float64)
        )
    except (TypeError, ValueError) as exc:
        raise TypeError(f"lat and lon must be real arrays of the same shape: {exc}") from None
    max_distance_m = check_scalar(max_distance_m, "max_distance_m", _DISTANCE)
    if graph.n == 0:
        raise ValueError("graph has no nodes to snap to")
    lat0 = math.radians(float(np.mean(graph.lat)))

    def project(a: np.ndarray, b: np.ndarray) -> np.ndarray:
        return np.stack(
            [_EARTH_RADIUS_M * math.cos(lat0) * np.radians(b), _EARTH_RADIUS_M * np.radians(a)],
            axis=-1,
        )

    tree = cKDTree(project(graph.lat, graph.lon))
    flat_la, flat_lo = la.ravel(), lo.ravel()
    finite = np.isfinite(flat_la) & np.isfinite(flat_lo)
    dist = np.full(flat_la.shape, np.inf)
    node = np.full(flat_la.shape, -1, dtype=np.int64)
    if finite.any():
        d, i = tree.query(project(flat_la[finite], flat_lo[finite]))
        dist[finite] = d
        node[finite] = np.where(d <= max_distance_m, i, -1)
    return node.reshape(la.shape), dist.reshape(la.shape)


# --------------------------------------------------------------------------- internals


@lru_cache(maxsize=1)
def _read_raw() -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Parse the file: ``lat, lon`` per vertex and directed ``src, dst, weight``."""
    text = resources.files("dpgauss.datasets").joinpath("data", _GRAPH_FILE).read_text("ascii")
    tokens = text.split()
    nv, ne = int(tokens[0]), int(tokens[1])
    if len(tokens) != 2 + 2 * nv + 3 * ne:
        raise ValueError(
            f"{_GRAPH_FILE}: header announces {nv} vertices and {ne} edges, "
            f"so {2 + 2 * nv + 3 * ne} numbers, but the file has {len(tokens)}"
        )
    coords = np.array(tokens[2 : 2 + 2 * nv], dtype=np.float64).reshape(nv, 2)
    arcs = np.array(tokens[2 + 2 * nv :], dtype=np.float64).reshape(ne, 3)
    src, dst = arcs[:, 0].astype(np.int64), arcs[:, 1].astype(np.int64)
    if not (np.array_equal(src, arcs[:, 0]) and np.array_equal(dst, arcs[:, 1])):
        raise ValueError(f"{_GRAPH_FILE}: non-integer vertex id in the edge list")
    if min(src.min(), dst.min()) < 0 or max(src.max(), dst.max()) >= nv:
        raise ValueError(f"{_GRAPH_FILE}: edge endpoint outside 0..{nv - 1}")
    if not (np.all(np.isfinite(arcs[:, 2])) and np.all(arcs[:, 2] > 0)):
        raise ValueError(f"{_GRAPH_FILE}: edge weights must be finite and positive")
    out = (coords[:, 0], coords[:, 1], src, dst, arcs[:, 2])
    for a in out:
        a.setflags(write=False)
    return out


def _simple_undirected(
    nv: int, src: np.ndarray, dst: np.ndarray, w: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Undirected simple edges ``u < v`` (smallest weight among repeats), sorted."""
    lo, hi = np.minimum(src, dst), np.maximum(src, dst)
    keep = lo != hi
    key, wk = lo[keep] * nv + hi[keep], w[keep]
    order = np.lexsort((wk, key))  # by key, then weight: the first of each key is lightest
    uniq, first = np.unique(key[order], return_index=True)
    return uniq // nv, uniq % nv, wk[order][first]


def _csr_with_ids(n: int, u: np.ndarray, v: np.ndarray) -> tuple[np.ndarray, ...]:
    """Adjacency lists as CSR arrays: neighbours and the id of the connecting edge."""
    m = u.shape[0]
    tail = np.concatenate([u, v])
    head = np.concatenate([v, u])
    eid = np.concatenate([np.arange(m), np.arange(m)])
    order = np.argsort(tail, kind="stable")
    indptr = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(np.bincount(tail, minlength=n), out=indptr[1:])
    return indptr, head[order], eid[order]


def _two_core(n: int, u: np.ndarray, v: np.ndarray) -> np.ndarray:
    """Mask of the vertices that survive iterated removal of vertices of degree ≤ 1."""
    indptr, nbr, _ = _csr_with_ids(n, u, v)
    deg = np.diff(indptr).tolist()
    alive = [True] * n
    nbr_l, ptr = nbr.tolist(), indptr.tolist()
    stack = [x for x in range(n) if deg[x] <= 1]
    while stack:
        x = stack.pop()
        if not alive[x]:
            continue
        alive[x] = False
        for y in nbr_l[ptr[x] : ptr[x + 1]]:
            if alive[y]:
                deg[y] -= 1
                if deg[y] <= 1:
                    stack.append(y)
    return np.array(alive, dtype=bool)


def _chains(
    indptr: np.ndarray, nbr: np.ndarray, eid: np.ndarray, junction: np.ndarray
) -> list[tuple[list[int], list[int]]]:
    """Every maximal path between junctions through non-junctions: (vertices, edge ids).

    Every non-junction has degree exactly 2 and every component has a junction, so the
    chains partition the edges.
    """
    ptr, nb, ed = indptr.tolist(), nbr.tolist(), eid.tolist()
    is_j = junction.tolist()
    used = [False] * (max(ed) + 1 if ed else 0)
    chains = []
    for j in np.flatnonzero(junction).tolist():
        for p in range(ptr[j], ptr[j + 1]):
            k = ed[p]
            if used[k]:
                continue
            used[k] = True
            verts, es, cur = [j], [k], nb[p]
            while not is_j[cur]:
                verts.append(cur)
                p0 = ptr[cur]
                q = p0 if ed[p0] != es[-1] else p0 + 1
                used[ed[q]] = True
                es.append(ed[q])
                cur = nb[q]
            verts.append(cur)
            chains.append((verts, es))
    return chains


def _contract(
    n: int, u: np.ndarray, v: np.ndarray, w: np.ndarray
) -> tuple[np.ndarray, list[tuple[list[int], list[int]]]]:
    """Junction mask and chains of a connected simple graph, loops and repeats resolved."""
    indptr, nbr, eid = _csr_with_ids(n, u, v)
    junction = np.diff(indptr) != 2
    if n and not junction.any():  # a bare cycle: start it somewhere
        junction[0] = True
    chains = _chains(indptr, nbr, eid, junction)
    promote: list[int] = []
    groups: dict[tuple[int, int], list[tuple[int, float, list[int]]]] = {}
    for verts, es in chains:
        inner = verts[1:-1]
        if verts[0] == verts[-1]:  # loop: keep a triangle
            k = len(inner)  # ≥ 2 in a simple graph
            promote += [inner[k // 3], inner[(2 * k) // 3]]
        else:
            key = (min(verts[0], verts[-1]), max(verts[0], verts[-1]))
            length = math.fsum(w[es].tolist())
            groups.setdefault(key, []).append((len(es), length, verts))
    for group in groups.values():
        if len(group) > 1:
            group.sort(key=lambda c: (c[0], c[1], c[2]))
            for _, _, verts in group[1:]:  # ≥ 1 inner vertex: only one chain is a bare edge
                inner = verts[1:-1]
                promote.append(inner[len(inner) // 2])
    if promote:
        junction[promote] = True
        chains = _chains(indptr, nbr, eid, junction)
    return junction, chains


@lru_cache(maxsize=4)
def _build(junctions: bool, prune: bool) -> RoadGraph:
    lat_all, lon_all, src, dst, w_all = _read_raw()
    nv = lat_all.shape[0]
    u, v, w = _simple_undirected(nv, src, dst, w_all)

    adj = sp.csr_matrix((np.ones(u.shape[0]), (u, v)), shape=(nv, nv))
    _, label = connected_components(adj, directed=False)
    keep = label == np.argmax(np.bincount(label))
    if prune:
        inside = keep[u]
        core = _two_core(nv, u[inside], v[inside])
        keep &= core
    inside = keep[u] & keep[v]
    verts = np.flatnonzero(keep)
    local = np.full(nv, -1, dtype=np.int64)
    local[verts] = np.arange(verts.shape[0])
    lu, lv, lw = local[u[inside]], local[v[inside]], w[inside]

    edge_of_vertex = np.full(nv, -1, dtype=np.int64)
    if not junctions:
        nodes = verts
        eu, ev, lengths = lu, lv, lw  # already sorted, u < v (local order is monotone)
    else:
        junction, chains = _contract(verts.shape[0], lu, lv, lw)
        jidx = np.full(verts.shape[0], -1, dtype=np.int64)
        jidx[junction] = np.arange(int(junction.sum()))
        nodes = verts[junction]
        ends = np.array([(c[0][0], c[0][-1]) for c in chains], dtype=np.int64).reshape(-1, 2)
        a, b = jidx[ends[:, 0]], jidx[ends[:, 1]]
        eu, ev = np.minimum(a, b), np.maximum(a, b)
        lengths = np.array([math.fsum(lw[es].tolist()) for _, es in chains], dtype=np.float64)
        order = np.lexsort((ev, eu))
        eu, ev, lengths = eu[order], ev[order], lengths[order]
        rank = np.empty(len(chains), dtype=np.int64)
        rank[order] = np.arange(len(chains))
        for c, (vs, _) in enumerate(chains):
            if len(vs) > 2:
                edge_of_vertex[verts[vs[1:-1]]] = rank[c]
        pairs = eu * max(nodes.shape[0], 1) + ev
        if np.any(eu == ev) or np.unique(pairs).shape[0] != pairs.shape[0]:  # pragma: no cover
            raise AssertionError("contraction left a loop or a repeated edge")

    node_of_vertex = np.full(nv, -1, dtype=np.int64)
    node_of_vertex[nodes] = np.arange(nodes.shape[0])
    graph = RoadGraph(
        lat=np.array(lat_all[nodes]),
        lon=np.array(lon_all[nodes]),
        edges=np.stack([eu, ev], axis=1).astype(np.int64),
        lengths=np.asarray(lengths, dtype=np.float64).copy(),
        vertex_id=nodes.astype(np.int64),
        node_of_vertex=node_of_vertex,
        edge_of_vertex=edge_of_vertex,
    )
    for field in (
        graph.lat,
        graph.lon,
        graph.edges,
        graph.lengths,
        graph.vertex_id,
        graph.node_of_vertex,
        graph.edge_of_vertex,
    ):
        field.setflags(write=False)
    return graph
