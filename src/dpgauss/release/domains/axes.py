"""The axes of a domain: one factor each — ``values``, ``range``, ``graph`` or ``regions``.

An :class:`Axis` is one factor of a :class:`~dpgauss.release.domains.key_domain.KeyDomain`:
its ``size`` keys, their labels, its public structure (``edges``) and, for a graph or regions
axis, how a record's coordinates map to its keys.  :func:`resolve_axis` builds an axis from
its ``[domain]`` part, reading public files only (a user graph, a GeoJSON, a key file).

* ``values``: a list of public keys (or a key file, :mod:`.key_files`); no structure.
* ``range``: public bins of a numeric or timestamp column (:class:`.keys.RangeBins`, exact
  in rationals); the chain of neighbouring bins.
* ``graph``: the nodes of a public graph (:mod:`.graph_files`), mapped by nearest node or
  kde (:mod:`.mapping`); its edges.
* ``regions``: the features of a GeoJSON file (:mod:`.regions`); their adjacency or an edge
  table.

:func:`product_edges` is the structure of a product of axes: the Cartesian product graph
(an edge between two keys that differ on one axis only, by an edge of that axis).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

import numpy as np

from ..spec import DomainSpec
from .crs import WGS84, Crs
from .graph_files import load_public_graph
from .keys import RangeBins
from .mapping import GraphMapper

if TYPE_CHECKING:
    from .regions import RegionMapper

__all__ = ["Axis", "product_edges", "resolve_axis"]


@dataclass(frozen=True, eq=False)
class Axis:
    """One factor of a domain: ``size`` keys, written as ``labels`` in the output column
    ``name``; ``edges`` its structure (None: none); ``mapper`` for a graph, whose nodes are
    at ``node_lat``, ``node_lon``."""

    spec: DomainSpec
    name: str
    size: int
    labels: np.ndarray
    edges: np.ndarray | None = None
    mapper: GraphMapper | RegionMapper | None = None
    node_lat: np.ndarray | None = None
    node_lon: np.ndarray | None = None
    source: str | None = None
    regions: Any = None

    @property
    def words(self) -> str:
        if self.spec.kind == "graph":
            m = 0 if self.edges is None else len(self.edges)
            return f"graph of {self.size} nodes and {m} edges ({self.source})"
        if self.spec.kind == "regions":
            m = 0 if self.edges is None else len(self.edges)
            return f"{self.size} regions with {m} edges ({self.source})"
        if self.spec.kind == "range":
            # The count and the last edge as the spec resolved them (a decimal range is
            # counted as written: keys.RangeBins.of), public like the spec itself.
            what = f"chain of {self.size} ordered bins" if self.edges is not None else "1 bin"
            first, last = self.labels[0], self.labels[-1]
            step = self.spec.step
            return f"{what} of {self.spec.column} from {first} by {step}" + (
                f", the last from {last}" if self.size > 1 else ""
            )
        return f"{self.size} values without order"


def product_edges(sizes: list[int], edges: list[np.ndarray | None]) -> np.ndarray | None:
    """The Cartesian product graph's edges ``(u, v)``, ``u < v``, sorted (module docstring)."""
    if not any(e is not None and len(e) for e in edges):
        return None
    n = math.prod(sizes)
    keys = np.arange(n, dtype=np.int64).reshape(sizes)
    out = []
    for axis, e in enumerate(edges):
        if e is None or not len(e):
            continue
        a = np.take(keys, e[:, 0], axis=axis).ravel()
        b = np.take(keys, e[:, 1], axis=axis).ravel()
        out.append(np.stack([np.minimum(a, b), np.maximum(a, b)], axis=1))
    pairs = np.concatenate(out)
    order = np.lexsort((pairs[:, 1], pairs[:, 0]))
    return pairs[order]


def _time_labels(bins: RangeBins) -> np.ndarray:
    """A timestamp range's bins (microseconds since 1970) as text: ``"2013-01-13 00:00:00"``
    (microseconds if any)."""
    start, step = int(bins.start), int(bins.step)
    epoch = datetime(1970, 1, 1)
    return np.array(
        [
            (epoch + timedelta(microseconds=start + i * step)).isoformat(sep=" ")
            for i in range(bins.size)
        ],
        dtype=object,
    )


def resolve_axis(part: DomainSpec, name: str, records: Crs = WGS84) -> Axis:
    """The axis of the domain part ``part``, its output column named ``name``; a graph's or
    regions' records are matched in ``records`` (the ``[source] crs``: the public map is
    transformed into it here, once — :mod:`.crs`)."""
    if part.kind == "values":
        values = part.values
        if part.values_from is not None:
            from .key_files import read_values

            values = read_values(part.values_from, part.where)
        labels = np.asarray(values, dtype=object)
        return Axis(part, name, len(labels), labels)
    if part.kind == "range":
        # Exact: n = ⌈(stop − start)/step⌉ in rationals, labels the exact lower edges
        # (integers, or each edge rounded once to the nearest double; timestamps as text).
        bins = part.bins
        n = bins.size
        labels = _time_labels(bins) if part.is_time else bins.labels()
        edges = np.stack([np.arange(n - 1), np.arange(1, n)], axis=1) if n >= 2 else None
        return Axis(part, name, n, labels, edges=edges)
    if part.kind == "regions":
        return _regions_axis(part, name, records)
    graph = load_public_graph(part)
    node_y, node_x = graph.nodes_in(records)
    mapper = GraphMapper(
        node_y,
        node_x,
        mapping=part.mapping,
        cutoff=part.effective_cutoff,
        bandwidth=part.bandwidth,
        neighbors=part.neighbors,
        bbox=part.bbox,
        planar=None if records.geographic else records.metres_per_unit,
    )
    return Axis(
        part,
        name,
        graph.n,
        graph.ids,
        edges=graph.edges,
        mapper=mapper,
        node_lat=graph.lat,
        node_lon=graph.lon,
        source=graph.name,
    )


def _regions_axis(part: DomainSpec, name: str, records: Crs = WGS84) -> Axis:
    """Regions: keys the features' ids, structure their adjacency (or an edge table)."""
    from .graph_files import edge_index, read_edge_pairs
    from .regions import RegionMapper, adjacency, load_public_regions

    regions = load_public_regions(part)
    if part.edges is not None:
        texts = [str(v) for v in regions.ids.tolist()]
        pairs = read_edge_pairs(part.edges, set(texts), part.edge_columns)
        edges: np.ndarray | None = edge_index(pairs, texts)
        how = "edges from a table"
    else:
        rule = part.adjacency or "queen"
        edges = adjacency(regions, rule)
        how = f"{rule} adjacency"
    return Axis(
        part,
        name,
        regions.n,
        regions.ids,
        edges=edges,
        mapper=(
            RegionMapper(regions, regions.geoms_in(records), records.geographic)
            if part.locates
            else None
        ),
        source=f"{regions.name}; {how}",
        regions=regions,
    )
