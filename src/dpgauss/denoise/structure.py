"""The public structure a denoiser may use: a graph on the keys, a grid shape, both or none.

Every denoiser is called ``f(y, sigma, structure=None, **params)``.  ``structure`` is what
is known about the keys before any data is seen (so using it costs no privacy):

* ``None``: nothing (James–Stein, thresholding);
* a graph on the ``y.size`` keys: a :class:`~dpgauss.denoise.Graph`, a ``networkx.Graph``,
  a square sparse adjacency matrix or an ``(m, 2)`` integer edge array
  (:func:`~dpgauss.denoise.as_graph`);
* a grid shape, a tuple of 1 or 2 integers ≥ 2 whose product is ``y.size``: the keys are
  the cells of an ordered series or an image, in C order;
* a :class:`Structure` holding both (a grid whose graph is given too, as a release of a
  grid domain has).

A denoiser that needs a graph and is given a grid uses the grid's lattice (the chain of a
1-D grid, the 4-neighbour lattice of a 2-D one); one that needs a grid and is not given one
refuses, naming what it needs.
"""

from __future__ import annotations

import math
import numbers
from dataclasses import dataclass
from typing import TypeGuard

import numpy as np

from .graph import Graph, as_graph

__all__ = ["Structure", "as_structure", "graph_of", "lattice_edges"]


@dataclass(frozen=True, eq=False)
class Structure:
    """A graph on the keys, a grid shape, both or neither (module docstring)."""

    graph: Graph | None = None
    grid: tuple[int, ...] | None = None

    def lattice(self) -> Graph | None:
        """The graph, or the grid's lattice when only a grid is known, or None."""
        if self.graph is not None:
            return self.graph
        if self.grid is not None:
            return lattice_graph(self.grid)
        return None


def lattice_graph(shape: tuple[int, ...]) -> Graph:
    """The chain or 4-neighbour lattice of ``shape`` as a :class:`Graph`, its edges written
    directly in the normal form (sorted pairs ``u < v``: node ``k``'s edge to ``k + 1``, then
    to ``k + W``), which :func:`as_graph` of :func:`lattice_edges` gives by a sort (about
    1–2.5 s at 10⁶ nodes on a loaded 2-core box)."""
    n = math.prod(shape)
    if len(shape) == 1:
        k = np.arange(n - 1, dtype=np.int64)
        return Graph(n, np.stack([k, k + 1], axis=1))
    h, w = shape
    idx = np.arange(n, dtype=np.int64).reshape(h, w)
    right = np.zeros((h, w), dtype=bool)
    right[:, :-1] = True
    down = np.zeros((h, w), dtype=bool)
    down[:-1, :] = True
    count = right.astype(np.int64) + down  # edges leaving each node, in node order
    start = np.concatenate([[0], np.cumsum(count.ravel())[:-1]]).reshape(h, w)
    edges = np.empty((int(count.sum()), 2), dtype=np.int64)
    edges[start[right], 0] = idx[right]
    edges[start[right], 1] = idx[right] + 1
    at = start + right  # the down edge follows the right one
    edges[at[down], 0] = idx[down]
    edges[at[down], 1] = idx[down] + w
    return Graph(n, edges)


def lattice_edges(shape: tuple[int, ...]) -> np.ndarray:
    """The ``(m, 2)`` edges of the chain (1-D) or 4-neighbour lattice (2-D), C order."""
    idx = np.arange(math.prod(shape)).reshape(shape)
    parts = []
    for axis in range(len(shape)):
        a = np.moveaxis(idx, axis, -1)
        parts.append(np.stack([a[..., :-1].ravel(), a[..., 1:].ravel()], axis=1))
    return np.concatenate(parts) if parts else np.zeros((0, 2), dtype=np.int64)


def _grid(value: object, n: int) -> tuple[int, ...]:
    if not _is_grid(value):
        raise TypeError(f"structure grid must be a tuple of 1 or 2 integers; got {value!r}")
    if isinstance(value, numbers.Integral):
        value = (value,)
    shape = tuple(int(v) for v in value)
    if len(shape) not in (1, 2) or min(shape) < 2:
        raise ValueError(
            f"structure as a grid must have 1 or 2 axes of length at least 2; got {shape}"
        )
    if math.prod(shape) != n:
        raise ValueError(f"structure grid {shape} has {math.prod(shape)} cells but y has {n}")
    return shape


def _is_grid(value: object) -> TypeGuard[numbers.Integral | tuple | list]:
    if isinstance(value, numbers.Integral) and not isinstance(value, bool):
        return True
    return (
        isinstance(value, tuple | list)
        and 0 < len(value) <= 2
        and all(isinstance(v, numbers.Integral) and not isinstance(v, bool) for v in value)
    )


def as_structure(structure: object, n: int) -> Structure:
    """``structure`` (module docstring) for ``n`` keys, checked.

    Raises ``ValueError``/``TypeError`` naming ``structure`` and what it may be.
    """
    if structure is None:
        return Structure()
    if isinstance(structure, Structure):
        graph = as_graph(structure.graph, n) if structure.graph is not None else None
        grid = _grid(structure.grid, n) if structure.grid is not None else None
        return Structure(graph, grid)
    if _is_grid(structure):
        return Structure(grid=_grid(structure, n))
    try:
        return Structure(graph=as_graph(structure, n))
    except TypeError as exc:
        raise TypeError(
            "structure must be None, a graph (Graph, networkx graph, sparse adjacency or "
            f"(m, 2) edge array), a grid shape (a tuple of 1 or 2 integers) or a Structure; "
            f"{exc}"
        ) from None


def graph_of(structure: object, n: int, who: str) -> Graph:
    """The graph ``who`` runs on: ``structure``'s graph, or its grid's lattice."""
    graph = None if structure is None else as_structure(structure, n).lattice()
    if graph is None:
        raise ValueError(
            f"{who} needs a graph (or a grid shape) as structure: the public structure of the "
            "keys it smooths over"
        )
    return graph
