"""The axes of a domain (:mod:`dpgauss.release.domains.axes`): the product structure against
networkx's Cartesian product, and the labels of a timestamp range."""

from __future__ import annotations

from datetime import datetime, timedelta

import networkx as nx
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dpgauss.release.domains.axes import _time_labels, product_edges
from dpgauss.release.domains.keys import RangeBins


def _random_edges(n: int, data: st.DataObject) -> np.ndarray | None:
    if n < 2 or not data.draw(st.booleans()):
        return None
    pairs = data.draw(
        st.lists(
            st.tuples(st.integers(0, n - 1), st.integers(0, n - 1)).filter(lambda p: p[0] != p[1]),
            max_size=2 * n,
            unique_by=lambda p: (min(p), max(p)),
        )
    )
    return np.array(pairs, dtype=np.int64).reshape(-1, 2)


def _graph(n: int, e: np.ndarray | None) -> nx.Graph:
    g = nx.Graph()
    g.add_nodes_from(range(n))
    if e is not None:
        g.add_edges_from(map(tuple, e.tolist()))
    return g


@settings(max_examples=60, deadline=None, derandomize=True)
@given(sizes=st.lists(st.integers(1, 5), min_size=1, max_size=3), data=st.data())
def test_product_edges_is_the_cartesian_product(sizes, data):
    """Keys are row-major over the axes (as ``KeyDomain`` numbers them); an edge joins two
    keys equal on every axis but one, where they are joined by that axis's edge."""
    edges = [_random_edges(n, data) for n in sizes]
    got = product_edges(sizes, edges)
    if all(e is None or not len(e) for e in edges):
        assert got is None
        return
    g = _graph(sizes[0], edges[0])
    for n, e in zip(sizes[1:], edges[1:], strict=True):
        # relabel (u, v) -> u·n + v: row-major, as KeyDomain numbers a product's keys
        g = nx.relabel_nodes(
            nx.cartesian_product(g, _graph(n, e)), lambda uv, n=n: uv[0] * n + uv[1]
        )
    want = sorted((min(u, v), max(u, v)) for u, v in g.edges())
    assert got is not None
    assert [tuple(p) for p in got.tolist()] == want
    assert np.all(got[:, 0] < got[:, 1])


def test_product_of_two_chains_is_the_grid():
    a = np.array([[0, 1], [1, 2]])
    b = np.array([[0, 1]])
    got = product_edges([3, 2], [a, b])
    # keys (i, j) -> 2i + j: the 3 × 2 grid's 3 + 4 edges
    assert got.tolist() == [[0, 1], [0, 2], [1, 3], [2, 3], [2, 4], [3, 5], [4, 5]]


@pytest.mark.parametrize(
    ("start", "step", "size"),
    [
        (0, 3_600_000_000, 3),  # hourly from the epoch
        (1_358_035_200_000_000, 86_400_000_000, 2),  # 2013-01-13, daily
        (-86_400_000_000, 1_500_000, 2),  # before the epoch, 1.5 s: microseconds shown
    ],
)
def test_time_labels_are_the_bins_lower_edges(start, step, size):
    bins = RangeBins.of(start, start + size * step, step)
    assert bins.size == size
    got = _time_labels(bins)
    epoch = datetime(1970, 1, 1)
    want = [
        (epoch + timedelta(microseconds=start + i * step)).isoformat(sep=" ") for i in range(size)
    ]
    assert got.tolist() == want
    assert got[0].startswith(str((epoch + timedelta(microseconds=start)).date()))
