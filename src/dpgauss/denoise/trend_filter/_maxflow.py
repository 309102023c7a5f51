"""Minimum s–t cuts with real capacities (push-relabel), compiled with numba when present.

The exact order-0 trend filter (:mod:`._graph_tv`) cuts graphs by minimum s–t cuts many
times per λ.  scipy's :func:`scipy.sparse.csgraph.maximum_flow` needs integer
capacities and was 5–20× slower than ADMM's whole solve on the Manhattan graph, so this
module has its own, written for numba (an optional dependency: ``pip install
'dpgauss[fast]'``).  :func:`available` says whether it can run; without numba the caller
keeps to ADMM.

The algorithm is the first phase of push-relabel (Goldberg & Tarjan, J. ACM 35(4), 1988)
with FIFO selection and global relabelling (Cherkassky & Goldberg, Algorithmica 19, 1997):
saturate the source arcs; then, while some node below label ``n`` holds excess, push it
along admissible residual arcs (``d(v) = d(w) + 1``) or relabel the node; every
``6n + A/2`` units of relabelling work the labels are reset to exact residual distances to
the sink by a breadth-first search.  When no active node is left, the nodes that cannot
reach the sink in the residual network are the source side of a minimum cut, and the
value into the sink is a maximum flow (max-flow min-cut theorem).  The result is a
*preflow*: conservation holds on the sink side; source-side nodes may keep excess (the
second phase, returning it to the source, is not needed by the caller, which only uses
the flows of sink-side parts and warm starts).  Capacities are real: a residual at most
``tol`` counts as zero, and an excess at most ``tol`` as none.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..._optional import install_hint

__all__ = ["available", "maximum_preflow"]

try:  # numba is optional (the `fast` extra)
    import numba as _numba
except ImportError:  # pragma: no cover - exercised in environments without numba
    _numba = None  # type: ignore[assignment]  # a module or None: callers test for None


def available() -> bool:
    """Whether the compiled maximum flow can run (numba is installed)."""
    return _numba is not None


def _sink_distances(
    n: int,
    n_arcs: int,
    start: np.ndarray,
    adj: np.ndarray,
    to: np.ndarray,
    res: np.ndarray,
    source: int,
    sink: int,
    tol: float,
    d: np.ndarray,
    queue: np.ndarray,
) -> None:
    """``d[v]`` ← the number of residual arcs (residual > ``tol``) on a shortest path from
    ``v`` to the sink, ``n`` if there is none (and for the source): a breadth-first search
    from the sink over reversed residual arcs."""
    for v in range(n):
        d[v] = n
    d[sink] = 0
    queue[0] = sink
    q_head, q_tail = 0, 1
    while q_head < q_tail:
        w = queue[q_head]
        q_head += 1
        for p in range(start[w], start[w + 1]):
            a = adj[p]
            v = to[a]
            back = a + n_arcs if a < n_arcs else a - n_arcs  # the residual arc v → w
            if d[v] == n and v != source and res[back] > tol:
                d[v] = d[w] + 1
                queue[q_tail] = v
                q_tail += 1


if _numba is not None:  # compiled lazily, on the first call; the caller below refers to it
    _sink_distances = _numba.njit(cache=True, nogil=True)(_sink_distances)


def _push_relabel(
    n: int,
    tail: np.ndarray,
    head: np.ndarray,
    cap: np.ndarray,
    source: int,
    sink: int,
    tol: float,
) -> tuple[np.ndarray, np.ndarray]:
    n_arcs = tail.size
    total = 2 * n_arcs
    frm = np.empty(total, dtype=np.int64)
    to = np.empty(total, dtype=np.int64)
    res = np.empty(total, dtype=np.float64)
    for k in range(n_arcs):
        frm[k] = tail[k]
        to[k] = head[k]
        res[k] = cap[k]
        frm[n_arcs + k] = head[k]
        to[n_arcs + k] = tail[k]
        res[n_arcs + k] = 0.0
    start = np.zeros(n + 1, dtype=np.int64)
    for a in range(total):
        start[frm[a] + 1] += 1
    for v in range(n):
        start[v + 1] += start[v]
    fill = start[:n].copy()
    adj = np.empty(total, dtype=np.int64)
    for a in range(total):
        adj[fill[frm[a]]] = a
        fill[frm[a]] += 1
    excess = np.zeros(n, dtype=np.float64)
    d = np.empty(n, dtype=np.int64)
    cur = np.empty(n, dtype=np.int64)
    queue = np.empty(n, dtype=np.int64)  # BFS queue
    fifo = np.empty(n + 1, dtype=np.int64)  # circular active queue
    inq = np.zeros(n, dtype=np.bool_)
    # preflow: saturate the source arcs
    for p in range(start[source], start[source + 1]):
        a = adj[p]
        if a < n_arcs and res[a] > 0.0:
            w = to[a]
            f = res[a]
            res[a] = 0.0
            res[a + n_arcs] += f
            excess[w] += f
            excess[source] -= f
    # global relabel: exact distances to the sink in the residual network
    def_relabel = True
    f_head = 0
    f_tail = 0
    work = 0
    relabel_every = 6 * n + total // 2
    while True:
        if def_relabel:
            _sink_distances(n, n_arcs, start, adj, to, res, source, sink, tol, d, queue)
            for v in range(n):
                cur[v] = start[v]
                inq[v] = False
            f_head = 0
            f_tail = 0
            for v in range(n):
                if v != source and v != sink and excess[v] > tol and d[v] < n:
                    fifo[f_tail] = v
                    f_tail += 1
                    inq[v] = True
            def_relabel = False
            work = 0
        if f_head == f_tail:
            break
        v = fifo[f_head % (n + 1)]
        f_head += 1
        inq[v] = False
        # discharge v
        while excess[v] > tol and d[v] < n:
            if cur[v] == start[v + 1]:
                # relabel
                best = 2 * n
                for p in range(start[v], start[v + 1]):
                    a = adj[p]
                    if res[a] > tol and d[to[a]] + 1 < best:
                        best = d[to[a]] + 1
                d[v] = best if best < n else n
                cur[v] = start[v]
                work += 12 + start[v + 1] - start[v]
                continue
            a = adj[cur[v]]
            w = to[a]
            if res[a] > tol and d[v] == d[w] + 1:
                f = excess[v] if excess[v] < res[a] else res[a]
                res[a] -= f
                res[a + n_arcs if a < n_arcs else a - n_arcs] += f
                excess[v] -= f
                excess[w] += f
                if w != sink and w != source and not inq[w] and excess[w] > tol:
                    fifo[f_tail % (n + 1)] = w
                    f_tail += 1
                    inq[w] = True
                if res[a] <= tol:
                    cur[v] += 1
            else:
                cur[v] += 1
        if work > relabel_every:
            def_relabel = True
    # final: nodes that cannot reach the sink form the source side of a minimum cut
    _sink_distances(n, n_arcs, start, adj, to, res, source, sink, tol, d, queue)
    flow = np.empty(n_arcs, dtype=np.float64)
    for k in range(n_arcs):  # the pushes, within [0, cap] despite rounding
        flow[k] = min(max(res[n_arcs + k], 0.0), cap[k])
    side = d == n
    return flow, side


_compiled: Any = None


def maximum_preflow(
    n: int,
    tail: np.ndarray,
    head: np.ndarray,
    cap: np.ndarray,
    source: int,
    sink: int,
    tol: float = 0.0,
) -> tuple[np.ndarray, np.ndarray]:
    """A maximum preflow from ``source`` to ``sink`` and the source side of a minimum cut.

    Arc ``k`` goes ``tail[k] → head[k]`` with capacity ``cap[k] ≥ 0`` (nodes ``0 … n−1``;
    parallel and opposite arcs are allowed).  Returns ``(flow, side)``: ``flow[k]`` in
    ``[0, cap[k]]``, whose value into the sink is a maximum flow, conserved (up to
    ``tol``) at every node that can still reach the sink; ``side[v]`` is True for the nodes
    that cannot reach the sink through arcs of residual capacity above ``tol`` — the
    source side of a minimum cut (module doc).  Compiled with numba on the first call
    (cached on disk); :class:`RuntimeError` if numba is not installed.
    """
    global _compiled
    if _numba is None:
        raise RuntimeError("dpgauss: the compiled minimum cut needs numba: " + install_hint("fast"))
    if source == sink:
        raise ValueError("source and sink must differ")
    if _compiled is None:
        _compiled = _numba.njit(cache=True, nogil=True)(_push_relabel)
    return _compiled(
        int(n),
        np.ascontiguousarray(tail, dtype=np.int64),
        np.ascontiguousarray(head, dtype=np.int64),
        np.ascontiguousarray(cap, dtype=np.float64),
        int(source),
        int(sink),
        float(tol),
    )
