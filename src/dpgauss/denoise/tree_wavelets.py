"""Spanning-tree Haar wavelets on a graph, and wavelet shrinkage with them.

Sharpnack, Krishnamurthy & Singh, "Detecting activations over graphs using spanning tree
wavelet bases" (AISTATS 2013): take a spanning tree of the graph and split it recursively,
by removing one edge, into two connected parts ``A`` and ``B`` as equal in size as possible.
Every split contributes one Haar vector, constant on each part and orthogonal to the
constants of their union::

    ψ = √(|B| / (|A|(|A|+|B|))) · 1_A  −  √(|A| / (|B|(|A|+|B|))) · 1_B

(``+1/|A|`` on ``A``, ``−1/|B|`` on ``B``, normalised).  Two Haar vectors of different
splits either have disjoint supports or one is constant on the other's support, so with the
normalised indicator ``1_C/√|C|`` of every connected component ``C`` they form an
orthonormal basis of ℝⁿ: ``n − c`` wavelets for ``c`` components.  A signal that is
constant on the pieces left by cutting ``s`` tree edges has at most ``s·L + c`` nonzero
coefficients, ``L`` the number of levels.  Because the basis is orthonormal, white noise
stays white in it, so soft thresholding the coefficients is SureShrink on the graph
(Balle & Wang 2018, Sec. 4: post-processing, free of privacy cost; their Thm 12 bounds the
coordinatewise risk).

Construction, in ``O(n log² n)`` vectorised numpy (no Python recursion):

* **Spanning forest**: breadth-first, one tree per connected component, rooted at the
  component's smallest node (scipy's BFS from a virtual root joined to every component's
  root, one C call for all components).
* **Bounded degree**: a tree vertex with ``k ≥ 3`` children keeps its first child and hangs
  the others on a chain of ``k − 2`` weightless *virtual* vertices (child ``i`` on virtual
  vertex ``i``, the last two on the last one).  Every vertex then has at most 3 tree
  neighbours, so some edge leaves at least ``(W − 1)/3`` of the ``W`` real nodes of a part
  on either side (cut next to a weighted centroid), the part sizes shrink by a factor
  ≤ 2/3 per level and a node lies in at most ``⌊log_{3/2}(n − 1)⌋ + 1`` wavelets: total
  nonzeros ``O(n log n)`` even for a star (which without this would need ``n − 1`` levels
  and ``n²/2`` nonzeros).  Cutting the edge above a real vertex is cutting that tree edge;
  cutting the edge above a virtual vertex separates a group of sibling subtrees from their
  parent and its other children (the group is connected through the parent, not in
  itself).  Among equally balanced cuts a real edge is preferred.
* **Balanced splits of all parts of a level at once**: in a DFS preorder of the
  (binarised) forest every subtree is an interval, and the part of a subtree that lies in
  the current piece is its nodes with the piece's label, so after one sort by
  ``(label, preorder)`` every within-part subtree weight is a difference of a cumulative sum
  found by binary search; the best edge per part is a segmented argmax.

Columns of the returned matrix: first the ``c`` component indicators (in the order of
:attr:`Graph.components` labels), then the wavelets, coarse to fine (level by level).
"""

from __future__ import annotations

import functools
import weakref

import numpy as np
import scipy.sparse as sp
from scipy.sparse.csgraph import breadth_first_order, depth_first_order

from ._nonnegative import MARK, check_nonnegative, clipped_sure, positive_part
from .graph import Graph, as_graph
from .result import Denoised, check_noise
from .structure import graph_of
from .thresholding import soft_threshold

__all__ = ["graph_wavelet_denoise", "tree_wavelet_basis"]

_CACHE: weakref.WeakKeyDictionary[Graph, tuple[sp.csc_matrix, int]] = weakref.WeakKeyDictionary()


def tree_wavelet_basis(graph: object, n: int | None = None) -> sp.csc_matrix:
    """The ``n × n`` orthonormal spanning-tree Haar basis of ``graph`` (columns).

    Parameters
    ----------
    graph
        A :class:`~dpgauss.denoise.graph.Graph`, a ``networkx.Graph`` (nodes in
        ``list(graph.nodes)`` order), a square scipy sparse adjacency matrix or an
        ``(m, 2)`` integer edge array (then ``n`` is required).  Disconnected graphs are
        allowed: each component gets its own tree and its own constant vector.
    n
        The number of nodes; optional except for edge arrays (where isolated nodes at the
        end could not be seen otherwise).

    Returns
    -------
    scipy.sparse.csc_matrix
        ``W`` with ``WᵀW = I`` to rounding (entries of ``WᵀW − I`` of order 1e-16; its
        Frobenius norm is ~1e-13 for the 4,091-node Manhattan graph, ~3e-12 for
        ``n = 10⁵``).  Columns ``0 … c−1`` are the
        normalised component indicators, the other ``n − c`` the Haar wavelets, coarse to
        fine.  Coefficients of a signal ``y`` are ``W.T @ y``; ``y = W @ coef``.  Each node
        lies in at most ``⌊log_{3/2}(n − 1)⌋ + 2`` columns (see the module docstring).
        The construction is cached per :class:`Graph` object (a fresh copy is returned).
    """
    return _basis(_resolve_graph(graph, n))[0].copy()


def graph_wavelet_denoise(
    y: object,
    sigma: object,
    structure: object = None,
    *,
    threshold: object = "sure",
    nonnegative: bool = False,
) -> Denoised:
    """Soft-threshold the spanning-tree Haar coefficients of ``y`` (SureShrink on a graph).

    ``c = Wᵀy`` (:func:`tree_wavelet_basis`), the detail coefficients are soft thresholded
    ``sign(c)(|c| − λ)₊``, the ``c`` component means are kept as they are, ``ŷ = W ĉ``.

    Parameters
    ----------
    y
        The released vector, one finite value per node (1-D, length ``n``).
    sigma
        The public noise standard deviation ``σ > 0`` of ``y = θ + N(0, σ²I)``, or one per
        node.  Then coefficient ``j`` has variance ``v_j = Σᵢ W_ij² σᵢ²`` (exact, from the
        sparse basis), is thresholded at ``t·√v_j`` (SURE's ``t`` weighs each coefficient
        by ``v_j``), and SURE is ``Σ_means v_j + Σ_details [min(c_j², λ_j²) + v_j(2·1{kept}
        − 1)]``: Stein's ``2 tr(Σ J) = 2 Σ_kept v_j`` with ``J = W D Wᵀ``, and
        ``Σ_j v_j = Σᵢ σᵢ²`` because the rows of ``W`` have unit norm.
    structure
        The graph, as for :func:`tree_wavelet_basis` with ``n = len(y)``, or a grid shape
        (its lattice).  Required.  Pass a :class:`~dpgauss.denoise.graph.Graph`
        (``as_graph(edges, n)``) to reuse the basis across calls.
    threshold
        ``"sure"`` (default): the λ minimising SURE over the detail coefficients
        (Donoho & Johnstone 1995); ``"universal"``: ``σ√(2 ln d)``, ``d`` the number of
        detail coefficients; or a number ``λ ≥ 0``.  One λ for all levels.
    nonnegative
        False (default) or True: return the positive part ``max(ŷ, 0)`` (counts and sums of
        values ≥ 0), with its exact SURE ``‖max(ŷ, 0) − y‖² + 2 Σ_{ŷᵢ>0} σᵢ² Jᵢᵢ − Σσᵢ²``,
        ``Jᵢᵢ = Σ_{j kept or a mean} W_ij²`` the diagonal of the Jacobian ``W D Wᵀ``
        (``df`` is ``Σ_{ŷᵢ>0} Jᵢᵢ``).  λ is still chosen by the unclipped SURE.
        ``params["nonnegative"] = True``.

    Returns
    -------
    Denoised
        ``risk`` is SURE of the total squared error ``‖ŷ − θ‖²``, computed in the
        coefficient domain (``W`` is orthonormal, so errors and white noise carry over
        unchanged): ``cσ²`` for the kept means plus soft thresholding's
        ``dσ² − 2σ²·#{|cᵢ| ≤ λ} + Σ min(cᵢ², λ²)``.  Exactly unbiased for a fixed or the
        universal λ; slightly optimistic for ``"sure"`` (minimum of an unbiased curve).
        ``params``: ``threshold`` (the rule), ``lambda``, ``n_nonzero`` (nonzero
        coefficients of ``ŷ``), ``df`` (``c`` + kept details, the divergence),
        ``n_components`` (``c``).
    """
    arr, s = check_noise(y, sigma)
    if arr.ndim != 1:
        raise ValueError(f"y must be a 1-D array with one value per node; got shape {arr.shape}")
    g = graph_of(structure, arr.shape[0], "graph_wavelet_denoise")
    if isinstance(threshold, str) and threshold not in ("sure", "universal"):
        raise ValueError(
            f"threshold must be 'sure', 'universal' or a number λ ≥ 0; got {threshold!r}"
        )
    basis, c = _basis(g)
    coef = basis.T @ arr
    if np.ndim(s) == 0:
        coef_sd: float | np.ndarray = s  # an orthonormal basis keeps white noise white
        means = c * float(s) ** 2
    else:
        # coefficient j is N(⟨w_j, θ⟩, v_j) with v_j = Σᵢ W_ij² σᵢ² (exact, not white)
        var = np.asarray(basis.multiply(basis).T @ (np.asarray(s) ** 2)).ravel()
        coef_sd = np.sqrt(var[c:])
        means = float(var[:c].sum())
    shrunk = soft_threshold(coef[c:], coef_sd, threshold=threshold)
    new_coef = np.concatenate([coef[:c], shrunk.estimate])
    estimate = np.asarray(basis @ new_coef, dtype=np.float64)
    risk = means + float(shrunk.risk)  # type: ignore[arg-type]
    params = {
        "threshold": shrunk.params["threshold"],
        "lambda": shrunk.params["lambda"],
        "n_nonzero": int(np.count_nonzero(new_coef)),
        "df": c + int(shrunk.params["df"]),
        "n_components": c,
    }
    clip = check_nonnegative(nonnegative)
    if clip:
        # the Jacobian's diagonal: Σ_j W_ij² over the means and the kept details
        kept = np.concatenate([np.ones(c), (np.asarray(shrunk.estimate) != 0).astype(float)])
        diag = np.asarray(basis.multiply(basis) @ kept).ravel()
        clipped = positive_part(estimate)
        pos = clipped > 0
        s2 = np.broadcast_to(np.asarray(s, dtype=np.float64) ** 2, arr.shape)
        estimate = clipped
        risk = clipped_sure(arr, clipped, s, float(np.sum((s2 * diag)[pos])))
        params["df"] = float(np.sum(diag[pos]))
        params[MARK] = True
    return Denoised(
        estimate,
        risk,
        "graph_wavelet",
        params,
        sigma=s,
        refit=functools.partial(
            graph_wavelet_denoise,
            sigma=s,
            structure=g,
            threshold=shrunk.params["lambda"],
            nonnegative=clip,
        ),
        observed=arr,
    )


# --------------------------------------------------------------------------- internals


def _resolve_graph(graph: object, n: int | None) -> Graph:
    if n is not None:
        if isinstance(n, bool) or not isinstance(n, int | np.integer) or n < 0:
            raise ValueError(f"n must be a non-negative integer; got {n!r}")
        return as_graph(graph, int(n))
    if isinstance(graph, Graph):
        return graph
    if sp.issparse(graph):
        return as_graph(graph, int(graph.shape[0]))  # type: ignore[attr-defined]
    if type(graph).__module__.startswith("networkx"):
        return as_graph(graph, graph.number_of_nodes())  # type: ignore[attr-defined]
    raise TypeError(
        "n (the number of nodes) is required unless graph is a Graph, a networkx graph or "
        f"a sparse adjacency matrix; got graph of type {type(graph).__name__}"
    )


def _basis(g: Graph) -> tuple[sp.csc_matrix, int]:
    hit = _CACHE.get(g)
    if hit is None:
        hit = _build_basis(g)
        _CACHE[g] = hit
    return hit


def _binarised_forest(g: Graph) -> tuple[np.ndarray, np.ndarray, int]:
    """BFS spanning forest with bounded degree.

    Returns ``parent`` over ``N = n + 1 + n_virtual + c`` vertices (real ``0 … n−1``, the
    super-root ``n`` (parent ``−1``), the virtual vertices, then a chain of ``c`` vertices
    below the super-root carrying the ``c`` component roots), the component label of every
    vertex (``−1`` for the super-root and its chain), and ``N``.
    """
    n = g.n
    comp = g.components
    roots = np.unique(comp, return_index=True)[1]
    u = np.concatenate([g.edges[:, 0], np.full(roots.shape[0], n)])
    v = np.concatenate([g.edges[:, 1], roots])
    adj = sp.csr_matrix((np.ones(u.shape[0]), (u, v)), shape=(n + 1, n + 1))
    order, pred = breadth_first_order(adj, n, directed=False, return_predecessors=True)
    child = order[1:].astype(np.int64)  # BFS order, all real vertices
    par = pred[child].astype(np.int64)
    # group children by parent, keeping BFS order inside a group
    s = np.argsort(par, kind="stable")
    child, par = child[s], par[s]
    start = np.flatnonzero(np.r_[True, par[1:] != par[:-1]])
    size = np.diff(np.r_[start, child.shape[0]])
    rank = np.arange(child.shape[0]) - np.repeat(start, size)
    k = np.repeat(size, size)
    wide = (k >= 3) & (par != n)  # real parents with ≥ 3 children get a virtual chain
    new_par = par.copy()
    # virtual ids: each wide group gets k − 2 consecutive ids after the super-root
    wide_group = (size >= 3) & (par[start] != n)
    gk = size[wide_group]
    n_virtual = int(np.sum(gk - 2))
    base = np.full(start.shape[0], -1, dtype=np.int64)
    base[wide_group] = n + 1 + np.concatenate([[0], np.cumsum(gk - 2)[:-1]]).astype(np.int64)
    group_base = np.repeat(base, size)
    # child of rank r (1 ≤ r ≤ k−2) hangs on virtual r, rank k−1 on virtual k−2
    r = np.minimum(rank, k - 2)
    mid = wide & (rank >= 1)
    new_par[mid] = group_base[mid] + r[mid] - 1
    # the super-root's children (component roots) hang on a chain of c "super" vertices
    # instead, so that no vertex has more than 3 neighbours (scipy's DFS rescans a
    # vertex's neighbour list after each child: quadratic in the degree)
    c = roots.shape[0]
    chain = n + 1 + n_virtual + np.arange(c)
    N = n + 1 + n_virtual + c
    parent = np.full(N, -1, dtype=np.int64)
    parent[child] = new_par
    parent[roots] = chain
    parent[chain] = np.r_[n, chain[:-1]]
    # virtual i (0-based in its group) hangs on the real parent (i = 0) or on virtual i − 1
    label = np.full(N, -1, dtype=np.int64)  # −1: super-root and its chain, in no part
    label[:n] = comp
    if n_virtual:
        first = wide & (rank == 0)
        gpar = par[first]
        gsize = k[first]
        vb = group_base[first]
        vid = np.arange(n + 1, n + 1 + n_virtual)
        vgroup = np.repeat(np.arange(gpar.shape[0]), gsize - 2)
        vi = vid - vb[vgroup]
        parent[vid] = np.where(vi == 0, gpar[vgroup], vid - 1)
        label[vid] = comp[gpar[vgroup]]
    return parent, label, N


def _build_basis(g: Graph) -> tuple[sp.csc_matrix, int]:
    n = g.n
    if n == 0:
        return sp.csc_matrix((0, 0)), 0
    comp = g.components
    c = int(comp.max()) + 1
    counts = np.bincount(comp, minlength=c)
    rows = [np.arange(n)]
    cols = [comp.astype(np.int64)]
    vals = [1.0 / np.sqrt(counts[comp].astype(np.float64))]

    parent, label, N = _binarised_forest(g)
    # DFS preorder of the binarised forest (from the super-root) and subtree sizes
    nonroot = np.flatnonzero(parent >= 0)
    tree = sp.csr_matrix((np.ones(nonroot.shape[0]), (nonroot, parent[nonroot])), shape=(N, N))
    order = depth_first_order(tree, n, directed=False, return_predecessors=False)
    pre = np.empty(N, dtype=np.int64)
    pre[order] = np.arange(N)
    sz_list = [1] * N
    par_list = parent.tolist()
    for x in order[:0:-1].tolist():  # reverse preorder: children before parents
        sz_list[par_list[x]] += sz_list[x]
    sz = np.array(sz_list, dtype=np.int64)
    weight = (np.arange(N) < n).astype(np.int64)

    # active vertices: those in parts (components) with ≥ 2 real nodes
    node = np.flatnonzero(label >= 0)
    node = node[counts[label[node]] >= 2]
    lab = label[node]
    col = c
    while node.shape[0]:
        key = lab * N + pre[node]
        s = np.argsort(key, kind="stable")
        node, lab, key = node[s], lab[s], key[s]
        w = weight[node]
        cw = np.concatenate([[0], np.cumsum(w)])
        m = node.shape[0]
        first = np.flatnonzero(np.r_[True, lab[1:] != lab[:-1]])
        seg_len = np.diff(np.r_[first, m])
        seg = np.repeat(np.arange(first.shape[0]), seg_len)
        hi = np.searchsorted(key, key + sz[node], side="left")
        within = cw[hi] - cw[np.arange(m)]  # real nodes of v's subtree inside its part
        total = cw[first + seg_len] - cw[first]
        bal = np.minimum(within, total[seg] - within)
        score = 2 * bal + (node < n)
        score[first] = -1  # a part's root has no edge above it inside the part
        best_score = np.maximum.reduceat(score, first)
        hit = np.flatnonzero(score == best_score[seg])
        pick = hit[np.unique(seg[hit], return_index=True)[1]]  # first best per part
        a = within[pick].astype(np.float64)
        b = total.astype(np.float64) - a
        diff = np.zeros(m + 1, dtype=np.int64)
        np.add.at(diff, pick, 1)
        np.add.at(diff, hi[pick], -1)
        in_a = np.cumsum(diff[:-1]) > 0
        pos_val = np.sqrt(b / (a * (a + b)))
        neg_val = -np.sqrt(a / (b * (a + b)))
        real = node < n
        rows.append(node[real])
        cols.append(col + seg[real])
        vals.append(np.where(in_a, pos_val[seg], neg_val[seg])[real])
        col += first.shape[0]
        part_w = np.where(in_a, a[seg], b[seg])
        keep = part_w >= 2
        node = node[keep]
        lab = (2 * seg + in_a)[keep]
    if col != n:  # pragma: no cover - a bug, not an input error
        raise AssertionError(f"tree wavelet construction produced {col} columns for {n} nodes")
    basis = sp.csc_matrix(
        (np.concatenate(vals), (np.concatenate(rows), np.concatenate(cols))), shape=(n, n)
    )
    return basis, c
