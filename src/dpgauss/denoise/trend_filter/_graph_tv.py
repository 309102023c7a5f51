"""Exact order-0 trend filtering (graph total variation) by divide and conquer on min-cuts.

The order-0 trend filter is graph TV denoising, ``β̂ = argmin ½‖y − β‖² + λ‖Dβ‖₁``, with
dual ``max_u ½‖y‖² − ½‖y − Dᵀu‖²`` over ``‖u‖∞ ≤ λ`` and ``β̂ = y − Dᵀu``: ``u`` is a flow
on the edges, of capacity λ either way, whose net outflow at node ``i`` is ``y_i − β̂_i``
(``D`` oriented by the edge list, row ``e`` equal to ``1_{e₀} − 1_{e₁}``).

Level sets of β̂ are minimum cuts (Hochbaum, J. ACM 48(4), 2001; Chambolle & Darbon, IJCV
84, 2009), which gives the *decomposition algorithm* (Groenevelt 1991; Bach, Found. Trends
Mach. Learn. 6, 2013, §9.1).  For a set of nodes ``V``, connected by free edges, with
targets ``t`` (``y`` minus the flows already fixed on edges leaving ``V``):

1. ``α = mean_V(t)``; find a maximum flow from a source with arcs ``s → i`` of capacity
   ``(t_i − α)⁺`` to a sink with arcs ``i → s'`` of capacity ``(α − t_i)⁺``, through both
   orientations of every free edge with capacity λ.
2. If it saturates every source arc, its edge flows route ``t − α`` exactly within the
   box: ``V`` is one fused group at level ``α``, and the flows are its part of an optimal
   dual.
3. Otherwise the source side ``S`` of a minimum cut (``∅ ≠ S ≠ V``) satisfies
   ``β̂_S ≥ α ≥ β̂_{V∖S}``: every edge from ``S`` to ``V ∖ S`` carries λ towards ``V ∖ S``
   at the optimum; it is fixed, ``t`` is updated, and ``S`` and ``V ∖ S`` (split into
   connected components) are solved again.

All sets of one round are disjoint, so one minimum cut (:mod:`._maxflow`, compiled)
serves them all.  Flows carry over between rounds as a warm start: each round routes only
the supply ``q = t − α − Dᵀu`` that the current flow ``u`` leaves, on the residual
capacities ``λ ∓ u_e``.  (The cut's flow is a maximum *preflow*: exact on the groups that
end, and any ``|u| ≤ λ`` is a valid warm start for the groups that are cut.)

On a λ path, the previous solution's jumps are fixed in advance (at the new λ) and its
flow warm-starts the free edges, so that only the refinements are computed.  A fixed jump
that the result contradicts (``s_e (Dβ)_e < 0``) is released and the λ solved again; when
none is contradicted the result is optimal: the flow is dual feasible, equal to
``λ sign((Dβ)_e)`` on every jump and routes ``y − β`` exactly, so the duality gap is
rounding only.  The caller still verifies the gap.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp
from scipy.sparse.csgraph import connected_components

from . import _maxflow

__all__ = ["TVSolution", "available", "graph_tv", "graph_tv_warm"]

_MAX_ROUNDS = 10_000  # a guard only: every round fixes at least one edge or ends a group
_TOL = 1e-12  # residual capacities below this (relative to λ and the supplies) are zero


def available() -> bool:
    """Whether the exact solver can run (the compiled maximum flow needs numba)."""
    return _maxflow.available()


@dataclass
class TVSolution:
    """``beta`` (constant on fused groups), a dual-feasible flow ``u`` (``|u| ≤ λ``), and
    the number of maximum-flow rounds."""

    beta: np.ndarray
    u: np.ndarray
    rounds: int


def _outflow(e0: np.ndarray, e1: np.ndarray, n: int, u: np.ndarray) -> np.ndarray:
    """``Dᵀu``: net outflow of the edge flows ``u`` at every node."""
    return np.bincount(e0, weights=u, minlength=n) - np.bincount(e1, weights=u, minlength=n)


def graph_tv(
    y: np.ndarray,
    edges: np.ndarray,
    lam: float,
    jump: np.ndarray | None = None,
    flow: np.ndarray | None = None,
    weight: np.ndarray | None = None,
) -> TVSolution | None:
    """Graph TV at ``lam`` by the decomposition algorithm (module doc).

    ``jump`` (values in {−1, 0, 1}, one per edge) fixes ``u_e = λ·jump_e`` on its nonzero
    edges in advance; ``flow`` is an initial flow on the others (clipped to ``±λ``).
    ``weight`` (positive, one per node; default 1) weights the fidelity,
    ``½ Σ w_i (y_i − β_i)²``: then ``β̂ = y − W⁻¹Dᵀu``, a group's level is the weighted
    mean ``α = Σ w_i t_i / Σ w_i`` of its targets and the supplies are ``w_i (t_i − α)``
    (the decomposition holds for any separable strictly convex fidelity; Bach 2013, §9.1).
    Returns None if the round guard is exceeded (never expected).
    """
    n, m = y.size, edges.shape[0]
    w = np.ones(n) if weight is None else np.asarray(weight, dtype=np.float64)
    e0 = np.ascontiguousarray(edges[:, 0], dtype=np.int64)
    e1 = np.ascontiguousarray(edges[:, 1], dtype=np.int64)
    u = np.zeros(m) if flow is None else np.clip(np.asarray(flow, dtype=np.float64), -lam, lam)
    free = np.ones(m, dtype=bool)
    if jump is not None:
        fixed = jump != 0
        u[fixed] = lam * np.sign(jump[fixed])
        free = ~fixed
    t = y - _outflow(e0, e1, n, np.where(free, 0.0, u)) / w
    beta = np.empty(n)
    done = np.zeros(n, dtype=bool)
    for rounds in range(1, _MAX_ROUNDS + 1):
        nodes = np.flatnonzero(~done)
        if nodes.size == 0:
            return TVSolution(beta, u, rounds - 1)
        local = np.full(n, -1, dtype=np.int64)
        local[nodes] = np.arange(nodes.size)
        act = np.flatnonzero(free & ~done[e0])  # free edges join undone nodes only
        a, b = local[e0[act]], local[e1[act]]
        na = nodes.size
        adj = sp.csr_matrix((np.ones(act.size), (a, b)), shape=(na, na))
        n_lab, lab = connected_components(adj, directed=False)
        tl, wl = t[nodes], w[nodes]
        alpha = np.bincount(lab, weights=wl * tl, minlength=n_lab) / np.bincount(
            lab, weights=wl, minlength=n_lab
        )
        ua = u[act]
        q = wl * (tl - alpha[lab]) - _outflow(a, b, na, ua)  # the supply the flow ua leaves
        if weight is not None:
            # A supply beyond the node's edge capacities (each residual is ≤ 2λ) only says
            # the node is on its side of every minimum cut: clipping it there changes no
            # minimum cut, and keeps the tolerance below relative to λ rather than to the
            # heaviest node's supply, so that light nodes (w tiny: supplies tiny) are still
            # routed (with weights over many decades they were left at a wrong side).
            cap_i = lam * (2.0 * np.bincount(np.concatenate([a, b]), minlength=na) + 1.0)
            q = np.clip(q, -cap_i, cap_i)
        scale = lam + float(np.abs(q).max(initial=0.0))
        tol = _TOL * scale
        src = np.flatnonzero(q > tol)
        snk = np.flatnonzero(q < -tol)
        s_node, t_node = na, na + 1
        tail = np.concatenate([a, b, np.full(src.size, s_node), snk])
        head = np.concatenate([b, a, src, np.full(snk.size, t_node)])
        cap = np.concatenate(
            [np.maximum(lam - ua, 0.0), np.maximum(lam + ua, 0.0), q[src], -q[snk]]
        )
        f, side = _maxflow.maximum_preflow(na + 2, tail, head, cap, s_node, t_node, tol)
        k = act.size
        u[act] = np.clip(ua + f[:k] - f[k : 2 * k], -lam, lam)
        reach = side[:na]
        # a group is cut when part (not all) of it is on the source side; all of it there
        # means only supplies below the tolerance were left unrouted: it is final too
        hit = np.bincount(lab, weights=reach, minlength=n_lab)
        split = (hit > 0) & (hit < np.bincount(lab, minlength=n_lab))
        final = ~split[lab]
        beta[nodes[final]] = alpha[lab[final]]
        done[nodes[final]] = True
        # split groups: the edges across the cut carry λ from the high side S to the rest
        cross = ~final[a] & (reach[a] != reach[b])
        if cross.any():
            ce = act[cross]
            uc = np.where(reach[a[cross]], lam, -lam)
            u[ce] = uc
            free[ce] = False
            t -= _outflow(e0[ce], e1[ce], n, uc) / w
    return None


def graph_tv_warm(
    y: np.ndarray,
    edges: np.ndarray,
    lam: float,
    jump: np.ndarray | None,
    flow: np.ndarray | None,
    repairs: int = 20,
    weight: np.ndarray | None = None,
) -> TVSolution | None:
    """:func:`graph_tv` with a nearby solution's jumps fixed, releasing the fixed jumps
    that the result contradicts and solving again (at most ``repairs`` times, then from
    scratch)."""
    if jump is None or not np.any(jump):
        return graph_tv(y, edges, lam, None, flow, weight)
    jump = jump.copy()
    e0, e1 = edges[:, 0], edges[:, 1]
    rounds = 0
    for _ in range(repairs):
        res = graph_tv(y, edges, lam, jump, flow, weight)
        if res is None:
            return None
        rounds += res.rounds
        diff = res.beta[e0] - res.beta[e1]
        bad = jump * diff < 0
        if not bad.any():
            res.rounds = rounds
            return res
        jump[bad] = 0.0
        flow = res.u
    res = graph_tv(y, edges, lam, None, flow, weight)
    if res is not None:
        res.rounds += rounds
    return res
