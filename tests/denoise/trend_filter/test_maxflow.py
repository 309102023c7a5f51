"""The compiled minimum cut (push-relabel preflow) against networkx's maximum flow."""

from __future__ import annotations

import networkx as nx
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dpgauss.denoise.trend_filter import _maxflow

pytestmark = pytest.mark.skipif(not _maxflow.available(), reason="numba is not installed")


def reference_value(n: int, tail, head, cap, s: int, t: int) -> float:
    g = nx.DiGraph()
    g.add_nodes_from(range(n))
    for a, b, c in zip(tail, head, cap, strict=True):  # parallel arcs add up
        if g.has_edge(a, b):
            g[a][b]["capacity"] += float(c)
        else:
            g.add_edge(int(a), int(b), capacity=float(c))
    return float(nx.maximum_flow_value(g, s, t)) if g.has_node(t) else 0.0


def check(n: int, tail, head, cap, s: int, t: int, tol: float = 0.0) -> None:
    flow, side = _maxflow.maximum_preflow(n, tail, head, cap, s, t, tol)
    scale = max(1.0, float(cap.sum()))
    assert np.all(flow >= 0.0) and np.all(flow <= cap)
    net = np.bincount(tail, flow, n) - np.bincount(head, flow, n)  # outflow per node
    value = -net[t]
    expected = reference_value(n, tail, head, cap, s, t)
    assert value == pytest.approx(expected, abs=1e-9 * scale)
    # the cut is a minimum cut: its capacity is the flow value
    assert side[s] and not side[t]
    cut = float(cap[side[tail] & ~side[head]].sum())
    assert cut == pytest.approx(expected, abs=1e-9 * scale)
    # a preflow: conserved on the sink side, never a deficit elsewhere
    inner = np.ones(n, dtype=bool)
    inner[[s, t]] = False
    assert np.all(np.abs(net[inner & ~side]) <= 1e-9 * scale)
    assert np.all(net[inner] <= 1e-9 * scale)


@pytest.mark.slow
@settings(max_examples=150, deadline=None)
@given(
    n=st.integers(2, 25),
    arcs=st.integers(0, 120),
    seed=st.integers(0, 2**32 - 1),
    real=st.booleans(),
)
def test_maximum_preflow_matches_networkx(n, arcs, seed, real):
    rng = np.random.default_rng(seed)
    tail = rng.integers(0, n, arcs)
    head = rng.integers(0, n, arcs)
    keep = tail != head
    tail, head = tail[keep], head[keep]
    cap = rng.exponential(3.0, tail.size) if real else rng.integers(0, 9, tail.size) * 1.0
    s, t = (int(v) for v in rng.choice(n, 2, replace=False))
    check(n, tail, head, cap, s, t)


def test_terminal_networks_like_the_graph_tv_cuts():
    """Every node tied to the source or the sink, both orientations of every edge: the
    shape of the networks the exact trend filter cuts (long paths, many augmentations)."""
    rng = np.random.default_rng(3)
    g = nx.connected_watts_strogatz_graph(300, 4, 0.2, seed=3)
    e = np.array(g.edges())
    q = rng.standard_normal(300)
    q -= q.mean()
    s, t = 300, 301
    src, snk = np.flatnonzero(q > 0), np.flatnonzero(q < 0)
    tail = np.concatenate([e[:, 0], e[:, 1], np.full(src.size, s), snk])
    head = np.concatenate([e[:, 1], e[:, 0], src, np.full(snk.size, t)])
    for lam in (0.01, 0.3, 10.0):
        cap = np.concatenate([np.full(2 * len(e), lam), q[src], -q[snk]])
        check(302, tail, head, cap, s, t, tol=1e-12)


def test_no_path_and_bad_terminals():
    tail, head, cap = np.array([0, 2]), np.array([1, 3]), np.array([1.0, 1.0])
    flow, side = _maxflow.maximum_preflow(4, tail, head, cap, 0, 3)
    assert np.all(flow[1:] == 0.0) and side[0] and not side[3]
    with pytest.raises(ValueError, match="differ"):
        _maxflow.maximum_preflow(4, tail, head, cap, 1, 1)


def test_without_numba_it_says_how_to_get_it(monkeypatch):
    monkeypatch.setattr(_maxflow, "_numba", None)
    assert not _maxflow.available()
    with pytest.raises(RuntimeError, match="numba"):
        _maxflow.maximum_preflow(2, np.array([0]), np.array([1]), np.array([1.0]), 0, 1)
