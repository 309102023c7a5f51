"""The public domain of a release: its keys, their order, and the public structure on them.

A domain is what a ``[domain]`` table of the spec resolves to (:func:`resolve_domain`), before
any record is read.  It knows

* its **keys**, in a fixed order: key ``i`` is written as ``labels[i]`` (a value, a bin's
  lower edge, a node id); every key is released, zeros included;
* how a record **maps** to a key — the engines' part (:mod:`dpgauss.release.engine`): exact
  SQL for values and ranges (:mod:`dpgauss.release.keymap`), a vectorised nearest-node or kde
  UDF for graphs (:mod:`dpgauss.release.mapping`);
* its **public structure**, the only structure a denoiser may use: ``edges`` over the keys
  (a graph's edges, a range's chain of neighbouring bins) and ``grid`` (the lattice shape of
  a range).  A domain declares what it has and nothing more: a ``values`` domain has no
  structure, so ``auto`` compares structure-free estimators only; :attr:`KeyDomain.structure`
  names it in the report.

Kinds: ``values`` (a list of public keys), ``range`` (public bins of a numeric column) and
``graph`` (the nodes of a public graph: bundled, GraphML, or node and edge tables —
:mod:`dpgauss.release.graph_files`).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .graph_files import load_public_graph
from .mapping import GraphMapper
from .spec import ReleaseSpec

__all__ = ["KeyDomain", "resolve_domain"]


@dataclass(frozen=True, eq=False)
class KeyDomain:
    """The resolved public domain: ``size`` keys, their labels, and how records map to them.

    ``labels[i]`` is key ``i`` as written to the output (a value, a bin's lower edge, or a
    node id).  ``mapper`` is set for graph domains; ``edges`` (graph, or a range's chain) and
    ``grid`` (range) are the public structure the denoisers may use.  ``node_lat``/``node_lon``
    are the graph nodes' coordinates (written to the output beside the keys); ``source`` names
    where a graph came from (a bundled name or a file name).
    """

    kind: str
    size: int
    labels: np.ndarray
    mapper: GraphMapper | None = None
    edges: np.ndarray | None = None
    grid: tuple[int, ...] | None = None
    node_lat: np.ndarray | None = None
    node_lon: np.ndarray | None = None
    source: str | None = None

    @property
    def spread(self) -> bool:
        """Whether a record's mass is spread over several keys (kde)."""
        return self.mapper is not None and self.mapper.mapping == "kde"

    @property
    def structure(self) -> str:
        """The public structure the denoisers may use, in words (for the report)."""
        if self.kind == "graph":
            m = 0 if self.edges is None else len(self.edges)
            return f"graph of {self.size} nodes and {m} edges ({self.source})"
        if self.grid is not None:
            return f"chain of {self.size} ordered bins"
        return "none"


def resolve_domain(spec: ReleaseSpec) -> KeyDomain:
    """The public domain of ``spec``: its keys, their labels and its public structure.

    Reads public files only (a user graph); raises ``ValueError`` naming the file for a bad one.
    """
    d = spec.domain
    if d.kind == "values":
        labels = np.asarray(d.values, dtype=object)
        return KeyDomain("values", len(labels), labels)
    if d.kind == "range":
        # Exact: n = ⌈(stop − start)/step⌉ in rationals, labels the exact lower edges (integers,
        # or each edge rounded once to the nearest double); see dpgauss.release.keymap.
        bins = d.bins
        n = bins.size
        labels = bins.labels()
        grid = (n,) if n >= 2 else None
        edges = np.stack([np.arange(n - 1), np.arange(1, n)], axis=1) if n >= 2 else None
        return KeyDomain("range", n, labels, edges=edges, grid=grid)
    graph = load_public_graph(d)
    mapper = GraphMapper(
        graph.lat,
        graph.lon,
        mapping=d.mapping,
        cutoff=d.effective_cutoff,
        bandwidth=d.bandwidth,
        neighbors=d.neighbors,
        bbox=d.bbox,
    )
    return KeyDomain(
        "graph",
        graph.n,
        graph.ids,
        mapper=mapper,
        edges=graph.edges,
        node_lat=graph.lat,
        node_lon=graph.lon,
        source=graph.name,
    )
