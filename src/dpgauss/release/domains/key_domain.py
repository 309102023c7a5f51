"""The public domain of a release: its keys, their order, and the public structure on them.

A domain is what a ``[domain]`` table of the spec resolves to (:func:`resolve_domain`), before
any record is read.  It knows

* its **keys**, in a fixed order: every key is released, zeros included;
* how a record **maps** to a key — the engines' part (:mod:`dpgauss.release.engines.base`):
  exact SQL for values and ranges (:mod:`dpgauss.release.domains.keys`), a vectorised
  nearest-node or kde UDF for graphs (:mod:`dpgauss.release.domains.mapping`);
* its **public structure**, the only structure a denoiser may use: ``edges`` over the keys and
  ``grid`` (a lattice shape). A domain declares what it has and nothing more: a ``values``
  domain has none, so ``auto`` compares structure-free estimators only;
  :attr:`KeyDomain.structure` names it in the report.

Every domain is a product of one or more **axes** (:class:`~.axes.Axis`, :mod:`.axes`):
``values`` (a list of public keys; no structure), ``range`` (public bins of a numeric or
timestamp column; the chain of neighbouring bins) and ``graph`` (the nodes of a public graph —
bundled, GraphML, or node and edge tables, :mod:`dpgauss.release.domains.graph_files`; its
edges) and ``regions`` (the features of a GeoJSON file, :mod:`dpgauss.release.domains.regions`;
their adjacency). ``grid`` is the product of two ranges ``(y, x)``, ``product`` the product of
its parts in order.

**Composite keys.**  With axis sizes ``n₀ … n_{a−1}``, the key of a record whose axis keys are
``k₀ … k_{a−1}`` is ``Σ kᵢ·sᵢ`` with ``sᵢ = n_{i+1}···n_{a−1}`` (row-major: the first axis
outermost, a grid's ``y`` before its ``x``).  A record maps to a key only when *every* axis
maps it; if any axis finds its column invalid the record is ``invalid_domain``, else if any
axis maps it to nothing it is ``outside_domain``.  The bounds (records per unit, keys per
unit, records per key) apply to the composite keys, so the sensitivity derivation of
:mod:`dpgauss.release.sensitivity` is unchanged.

**Structure of a product**: the Cartesian product graph — an edge between two keys that differ
on one axis only, by an edge of that axis — so a day of hourly maps is smoothed in space and
in time.  A product of ranges (a grid) also has the lattice shape, for 2-D wavelets.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

import numpy as np

from ..spec import DomainSpec, ReleaseSpec
from .axes import Axis, product_edges, resolve_axis
from .crs import WGS84, parse_crs
from .discovered import OTHER_KEY
from .keys import MAX_KEYS
from .mapping import GraphMapper

if TYPE_CHECKING:
    from .regions import RegionMapper

__all__ = ["KeyDomain", "resolve_domain"]


@dataclass(frozen=True, eq=False)
class KeyDomain:
    """The resolved public domain: ``size`` keys and how records map to them.

    ``labels[i]`` is key ``i`` as written to a one-axis domain's ``key`` column (a value, a
    bin's lower edge, a node id); :meth:`key_columns` gives the output's key columns for
    every kind.  ``mapper`` is set for a one-axis graph domain; ``edges`` and ``grid`` are the
    public structure the denoisers may use.  ``node_lat``/``node_lon`` are the graph nodes'
    coordinates (written beside the keys); ``source`` names where a graph came from.
    ``axes`` are the factors of the key (module docstring).
    """

    kind: str
    size: int
    labels: np.ndarray
    mapper: GraphMapper | RegionMapper | None = None
    edges: np.ndarray | None = None
    grid: tuple[int, ...] | None = None
    node_lat: np.ndarray | None = None
    node_lon: np.ndarray | None = None
    source: str | None = None
    axes: tuple[Axis, ...] = field(default=())
    #: ``[domain] other = true``: the last key, ``__other__``, counts the records whose key
    #: is outside the domain (bounded like every other key; no edge, no lattice)
    other: bool = False

    @property
    def spread(self) -> bool:
        """Whether a record's mass is spread over several keys (kde)."""
        return self.mapper is not None and self.mapper.mapping == "kde"

    @property
    def structure(self) -> str:
        """The public structure the denoisers may use, in words (for the report)."""
        if len(self.axes) > 1:
            inner = " × ".join(a.words for a in self.axes)
            m = 0 if self.edges is None else len(self.edges)
            shape = " × ".join(str(a.size) for a in self.axes)
            what = "lattice (y × x)" if self.kind == "grid" else "product"
            return f"{what} of {shape} keys: {inner}; {m} edges in all"
        if self.kind in ("graph", "regions") or (self.axes and self.axes[0].spec.kind == "range"):
            return self.axes[0].words
        return "none"

    def keys_of(self, part: DomainSpec) -> tuple[Any, ...]:
        """The keys an axis matches records against (a values domain's values, a regions
        domain's ids, read from their files), for the axis whose spec is ``part``."""
        for a in self.axes:
            if a.spec is part:
                return tuple(a.labels.tolist())
        raise KeyError(f"no axis of this domain has the spec [{part.where}]")

    def _indices(self) -> np.ndarray:
        sizes = [a.size for a in self.axes]
        return np.indices(sizes).reshape(len(sizes), -1)

    def key_columns(self) -> dict[str, np.ndarray]:
        """The output's key columns, first in the table: ``key`` for a one-axis domain, else
        one column per axis, named after it (a grid: ``y``'s column, then ``x``'s).  A
        regions axis with ``name_property`` is followed by its regions' names (public, from
        the map): ``name`` for a one-axis domain, else ``<axis>_name``."""
        if len(self.axes) <= 1:
            out = {"key": self.labels}
            names = _names(self.axes[0]) if self.axes else None
            if names is not None:
                out["name"] = _append(names, None) if self.other else names
            return out
        cols: dict[str, np.ndarray] = {}
        for a, i in zip(self.axes, self._indices(), strict=True):
            cols[a.name] = _append(a.labels[i], OTHER_KEY) if self.other else a.labels[i]
            names = _names(a)
            if names is not None:
                cols[f"{a.name}_name"] = _append(names[i], None) if self.other else names[i]
        return cols

    def place_columns(self) -> dict[str, np.ndarray]:
        """``lat``, ``lon`` of each key's graph node (the last columns), if the domain has a
        graph axis (the first one of a product)."""
        out: dict[str, np.ndarray] = {}
        if len(self.axes) <= 1:
            if self.node_lat is not None:
                out = {"lat": self.node_lat, "lon": self.node_lon}  # type: ignore[dict-item]
        else:
            for a, i in zip(self.axes, self._indices(), strict=True):
                if a.node_lat is not None:
                    out = {"lat": a.node_lat[i], "lon": a.node_lon[i]}  # type: ignore[index]
                    break
        if self.other and out:  # the other key has no place
            out = {
                k: np.append(np.asarray(v, dtype=np.float64)[: self.size - 1], np.nan)
                for k, v in out.items()
            }
        return out


def _append(values: np.ndarray, last: Any) -> np.ndarray:
    """``values`` and one more, as an object array (the other key's row)."""
    out = np.empty(len(values) + 1, dtype=object)
    out[:-1] = values.tolist()
    out[-1] = last
    return out


def _with_other(domain: KeyDomain) -> KeyDomain:
    """``domain`` with the ``__other__`` key last (module docstring of
    :mod:`.discovered`): its edges unchanged (the other key is isolated), no lattice."""
    for a in domain.axes:  # the key column must name one key (review finding 2)
        if any(isinstance(v, str) and v == OTHER_KEY for v in a.labels.tolist()):
            raise ValueError(
                f"[{a.spec.where}] other = true adds the key {OTHER_KEY!r}, which is already a "
                "key of the domain: the table would hold two rows of that key (rename the "
                "public key, or set other = false)"
            )
    if len(domain.axes) <= 1:
        labels = _append(domain.labels, OTHER_KEY)
    else:  # the key columns say it (key_columns); the labels stay indices
        labels = np.arange(domain.size + 1, dtype=np.int64)
    return replace(domain, size=domain.size + 1, labels=labels, grid=None, other=True)


def _names(axis: Axis) -> np.ndarray | None:
    """A regions axis's ``name_property`` values, one per key (None: no names)."""
    regions = axis.regions
    return None if regions is None else regions.names


def resolve_domain(spec: ReleaseSpec) -> KeyDomain:
    """The public domain of ``spec``: its keys, their labels and its public structure.

    Reads public files only (a user graph); raises ``ValueError`` naming the file for a bad one.
    """
    d = spec.domain
    if d.kind == "discovered":  # no public keys: the data's, selected (domains/discovered.py)
        return KeyDomain("discovered", 0, np.empty(0, dtype=object))
    names = [part.output_name if len(d.axes) > 1 else "key" for part in d.axes]
    records = WGS84 if spec.source.crs is None else parse_crs(spec.source.crs, "[source] crs")
    axes = tuple(
        resolve_axis(part, name, records) for part, name in zip(d.axes, names, strict=True)
    )
    for a in axes:  # every key is written after the charge: it must be writable text
        if a.labels.dtype == object:
            for v in a.labels.tolist():
                if isinstance(v, str):
                    try:
                        v.encode("utf-8")
                    except UnicodeEncodeError:
                        raise ValueError(
                            f"[{a.spec.where}] the key {v.encode('utf-8', 'backslashreplace')!r} "
                            "is not valid text (it cannot be written as UTF-8)"
                        ) from None
    out = _resolve(d, axes)
    return _with_other(out) if d.other else out


def _resolve(d: DomainSpec, axes: tuple[Axis, ...]) -> KeyDomain:
    if len(axes) == 1:
        a = axes[0]
        grid = (a.size,) if a.spec.kind == "range" and a.size >= 2 else None
        return KeyDomain(
            d.kind,
            a.size,
            a.labels,
            mapper=a.mapper,
            edges=a.edges,
            grid=grid,
            node_lat=a.node_lat,
            node_lon=a.node_lon,
            source=a.source,
            axes=axes,
        )
    sizes = [a.size for a in axes]
    n = math.prod(sizes)
    if n > MAX_KEYS:
        raise ValueError(f"[domain] the {d.kind} has {n:,} keys; at most {MAX_KEYS:,} allowed")
    edges = product_edges(sizes, [a.edges for a in axes])
    lattice = all(a.spec.kind == "range" for a in axes) and len(axes) == 2 and min(sizes) >= 2
    return KeyDomain(
        d.kind,
        n,
        np.arange(n, dtype=np.int64),
        edges=edges,
        grid=tuple(sizes) if lattice else None,
        axes=axes,
    )
