"""Exact order-0 graph trend filtering (graph fused lasso) by divide and conquer on min-cuts.

An independent test reference for the library's solvers: the library's exact solver
(``dpgauss.denoise.trend_filter._graph_tv``) runs the same decomposition on real capacities
with its own compiled push-relabel; this one uses scipy's Dinic on scaled integer
capacities, the minimal source side of each cut and its own rounding, so agreement between
the two (same objective, same fused groups) checks both.

For order 0 the trend filter is graph total-variation denoising

    β̂ = argmin_β ½‖y − β‖² + λ Σ_{(i,j)∈E} |β_i − β_j|,

whose dual is ``min_u ½‖y − Dᵀu‖²`` subject to ``‖u‖∞ ≤ λ`` (``D`` the oriented edge
incidence matrix), with ``β̂ = y − Dᵀu``: ``u`` is a *flow* on the edges, of capacity λ in
either direction, whose net outflow at node ``i`` is ``y_i − β̂_i``.

The level sets of β̂ are minimum cuts (Hochbaum, "An efficient algorithm for image
segmentation, Markov random fields and related problems", J. ACM 48(4), 2001; Chambolle &
Darbon, "On total variation minimization and surface evolution using parametric maximum
flows", IJCV 84, 2009): for any level α, the set ``{β̂ > α}`` minimises

    λ·cut(S) + Σ_{i∈S} (α − y_i)        over S ⊆ V,

a minimum s–t cut in the network with arcs ``s → i`` of capacity ``(y_i − α)⁺``,
``i → t`` of capacity ``(α − y_i)⁺`` and both orientations of every edge with capacity λ.
This gives the *decomposition algorithm* (Groenevelt 1991; Hochbaum 2001; Bach, "Learning
with submodular functions", Found. Trends Mach. Learn. 6, 2013, §9.1), here for a set of
nodes ``V`` with targets ``t`` (``y`` minus the flow already fixed on edges leaving ``V``):

1. ``α = mean_V(t)``; compute a maximum flow in the network above (``y`` replaced by ``t``,
   only the edges inside ``V``).
2. If it saturates every source arc, its edge flows ``u`` have net outflow exactly
   ``t − α`` and ``|u| ≤ λ``: ``V`` is one fused group at level ``α``, and ``u`` is its
   part of an optimal dual.
3. Otherwise let ``S`` be the nodes reachable from ``s`` in the residual network (a
   minimum cut, ``∅ ≠ S ≠ V``).  Then ``β̂_S ≥ α ≥ β̂_{V∖S}``: every edge from ``S`` to
   ``V∖S`` carries the flow λ towards ``V∖S`` at the optimum, which is fixed (``t`` drops
   by λ per such edge on the ``S`` side and rises by λ on the other), and ``S`` and ``V∖S``
   (split into their connected components) are solved recursively.

All subproblems of one recursion depth are disjoint, so they are solved by *one* maximum
flow (scipy's Dinic, :func:`scipy.sparse.csgraph.maximum_flow`) per depth.  The number of
depths is about the depth of a quicksort of the fused levels.  scipy needs integer
capacities (32-bit): each depth scales by ``K = 2³⁰ / max(λ, Σ(t − α)⁺)``, rounds the
terminal capacities per subproblem so that they still balance (largest remainders), and
rounds λK down, so that the scaled-back flow ``u`` is dual feasible (``|u| ≤ λ``) and its
net outflow differs from ``y − β`` by ``δ`` with ``|δ_i| < 1/K``.  For ``β`` constant on the
groups and ``u = ±λ`` on the edges between them (in the direction of the jump) the duality
gap is then exactly

    P(β) − D(u) = Σ_{jumps e} (λ|(Dβ)_e| − u_e (Dβ)_e) + ½‖δ‖² = ½‖δ‖²,

(``P(β) = ½‖y − β‖² + λ‖Dβ‖₁``, ``D(u) = ½‖y‖² − ½‖y − Dᵀu‖²``), tiny, and it is always
verified by the caller, which falls back to ADMM when it exceeds the tolerance (e.g.
when rounding made a near-tie cut go the wrong way, giving a jump of the wrong sign).

Warm start on a λ path: the jumps of the previous (larger) λ's solution are fixed in
advance (the solution's groups mostly split as λ decreases), so only their refinements are
computed; if that is not certified the caller retries from scratch.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp
from scipy.sparse.csgraph import breadth_first_order, connected_components, maximum_flow

__all__ = ["DCResult", "fused_lasso_dc"]

_INT_BUDGET = 2**30  # capacities and the total flow of one max-flow call stay below this
_MAX_ROUNDS = 500  # recursion depths (one max-flow each) before giving up


@dataclass
class DCResult:
    """``beta`` (constant on the groups), a dual-feasible flow ``u`` (``|u| ≤ λ``) and the
    number of max-flow rounds."""

    beta: np.ndarray
    u: np.ndarray
    rounds: int


def _balanced_round(r: np.ndarray, scale: float, lab: np.ndarray, n_lab: int) -> np.ndarray:
    """Integers ``c`` with ``|c − scale·r| < 1`` and ``Σ c = 0`` on every label (``Σ r = 0``
    there): floors, plus one for the largest fractional parts (Hamilton's method)."""
    x = r * scale
    c = np.floor(x)
    frac = x - c
    c = c.astype(np.int64)
    need = -np.bincount(lab, weights=c, minlength=n_lab)  # units to add per label, >= 0
    need = np.rint(need).astype(np.int64)
    if not np.any(need):
        return c
    order = np.lexsort((-frac, lab))  # by label, largest fraction first
    sorted_lab = lab[order]
    start = np.searchsorted(sorted_lab, np.arange(n_lab))
    rank = np.arange(lab.size) - start[sorted_lab]
    c[order[rank < need[sorted_lab]]] += 1
    return c


def fused_lasso_dc(
    y: np.ndarray,
    edges: np.ndarray,
    lam: float,
    jump: np.ndarray | None = None,
    flow: np.ndarray | None = None,
    max_rounds: int = _MAX_ROUNDS,
) -> DCResult | None:
    """The graph fused lasso at ``lam`` by the decomposition algorithm (module doc).

    ``edges`` is ``(m, 2)`` (row ``e`` of ``D`` is ``e_{edges[e,0]} − e_{edges[e,1]}``).
    Warm starts: ``jump`` (values in {−1, 0, 1}) fixes ``u_e = λ·jump_e`` on its nonzero
    edges in advance; ``flow`` (clipped to ``±λ``) is an initial flow on the other edges
    (e.g. the previous λ's dual), so that each maximum flow only routes what it leaves
    unrouted.  Returns None if ``max_rounds`` is exceeded.
    """
    n, m = y.size, edges.shape[0]
    e0, e1 = edges[:, 0], edges[:, 1]
    u = np.zeros(m) if flow is None else np.clip(flow, -lam, lam)
    free = np.ones(m, dtype=bool)
    if jump is not None:
        fixed = jump != 0
        u[fixed] = lam * np.sign(jump[fixed])
        free = ~fixed
    ufix = np.where(free, 0.0, u)
    t = y - (
        np.bincount(e0, weights=ufix, minlength=n) - np.bincount(e1, weights=ufix, minlength=n)
    )
    beta = np.empty(n)
    done = np.zeros(n, dtype=bool)
    rounds = 0
    while True:
        act_e = np.flatnonzero(free)  # free edges join two undecided nodes of one subproblem
        if act_e.size == 0:
            beta[~done] = t[~done]
            return DCResult(beta, u, rounds)
        if rounds >= max_rounds:
            return None
        rounds += 1
        # subproblems: connected components of the free edges (singletons are final)
        mark = np.zeros(n, dtype=bool)
        mark[e0[act_e]] = True
        mark[e1[act_e]] = True
        nodes = np.flatnonzero(mark)
        alone = ~done & ~mark
        beta[alone] = t[alone]
        done |= alone
        local = np.full(n, -1, dtype=np.int64)
        local[nodes] = np.arange(nodes.size)
        a, b = local[e0[act_e]], local[e1[act_e]]
        na = nodes.size
        adj = sp.csr_matrix((np.ones(act_e.size), (a, b)), shape=(na, na))
        n_lab, lab = connected_components(adj, directed=False)
        tl = t[nodes]
        sizes = np.bincount(lab, minlength=n_lab)
        alpha = np.bincount(lab, weights=tl, minlength=n_lab) / sizes
        r = tl - alpha[lab]
        # the initial flow u0 on the free edges leaves q = r − Dᵀu0 to be routed
        u0 = u[act_e]
        q_real = (
            r - np.bincount(a, weights=u0, minlength=na) + np.bincount(b, weights=u0, minlength=na)
        )
        scale = _INT_BUDGET / max(2.0 * lam, float(np.abs(q_real).sum()), 1e-300)
        cap = int(np.floor(lam * scale))
        c = _balanced_round(r, scale, lab, n_lab)
        u0k = np.clip(np.rint(u0 * scale), -cap, cap).astype(np.int64)
        q = c - np.bincount(a, weights=u0k, minlength=na).astype(np.int64)
        q += np.bincount(b, weights=u0k, minlength=na).astype(np.int64)
        # network: local nodes 0..na-1, source na, sink na+1; residual capacities of u0
        src = np.flatnonzero(q > 0)
        snk = np.flatnonzero(q < 0)
        s_node, t_node = na, na + 1
        rows = np.concatenate([a, b, np.full(src.size, s_node), snk])
        cols = np.concatenate([b, a, src, np.full(snk.size, t_node)])
        data = np.concatenate([cap - u0k, cap + u0k, q[src], -q[snk]]).astype(np.int32)
        net = sp.csr_array((data, (rows, cols)), shape=(na + 2, na + 2))
        net.sum_duplicates()
        extra = sp.csr_array(maximum_flow(net, s_node, t_node, method="dinic").flow)
        # residual network and the source side of the minimum cut
        res = sp.csr_array(net - extra)
        res.data[res.data < 0] = 0  # (capacities are exact, flows never exceed them)
        res.eliminate_zeros()
        reach_nodes = breadth_first_order(res, s_node, directed=True, return_predecessors=False)
        reach = np.zeros(na + 2, dtype=bool)
        reach[reach_nodes] = True
        reach = reach[:na]
        # the flow so far on every free edge (a warm start for the next round)
        u[act_e] = (u0k + np.asarray(extra[a, b]).ravel()) / scale
        split = np.bincount(lab, weights=reach, minlength=n_lab) > 0
        # final groups: level alpha, their internal edge flows are their part of the dual
        final_node = ~split[lab]
        final_edge = final_node[a]
        free[act_e[final_edge]] = False
        beta[nodes[final_node]] = alpha[lab[final_node]]
        done[nodes[final_node]] = True
        # split groups: edges across the cut carry λ from the high side S to the low side
        cross = ~final_edge & (reach[a] != reach[b])
        if cross.any():
            ce = act_e[cross]
            ue = np.where(reach[a[cross]], lam, -lam)
            u[ce] = ue
            free[ce] = False
            t -= np.bincount(e0[ce], weights=ue, minlength=n)
            t += np.bincount(e1[ce], weights=ue, minlength=n)


def fused_lasso_repair(
    y: np.ndarray,
    edges: np.ndarray,
    lam: float,
    jump: np.ndarray,
    flow: np.ndarray | None,
    repairs: int,
    atol: float,
) -> DCResult | None:
    """:func:`fused_lasso_dc` with the jumps ``jump`` fixed (e.g. a nearby solution's),
    releasing the fixed jumps whose sign the result contradicts (``jump_e (Dβ)_e < −atol``:
    those edges are fused at λ, or jump the other way) and solving again, at most
    ``repairs`` times.  When no fixed jump is contradicted the result is optimal: its
    flow has ``u_e = λ·sign((Dβ)_e)`` on every jump, so only the rounding ``½‖δ‖²`` is left
    of the duality gap (module doc)."""
    jump = jump.copy()
    e0, e1 = edges[:, 0], edges[:, 1]
    res: DCResult | None = None
    for _ in range(repairs + 1):
        res = fused_lasso_dc(y, edges, lam, jump, flow)
        if res is None:
            return None
        bad = jump * (res.beta[e0] - res.beta[e1]) < -atol
        if not bad.any():
            return res
        jump[bad] = 0.0
        flow = res.u
    return res
