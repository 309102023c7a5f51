"""Public graphs from the user's files: GraphML (as OSMnx writes it) or node and edge tables.

A graph domain's keys are the nodes of a public graph, and its edges are the public
structure the graph denoisers use.  :func:`load_public_graph` returns a :class:`PublicGraph`
for a ``[domain] kind = "graph"`` spec:

* ``graph = "manhattan"`` or ``"manhattan-pruned"``: the bundled TaxiVis road graph
  (:func:`dpgauss.datasets.load_manhattan_graph`); its keys are the node indices ``0 … n−1``.
* ``graph = "city.graphml"``: a GraphML file (``networkx``, the ``graphs`` extra).  Node
  attributes ``y`` (latitude) and ``x`` (longitude) in degrees, as OSMnx writes them (other
  names with ``node_columns = { lat = "…", lon = "…" }``).  A directed graph or a
  multigraph becomes one undirected edge per pair of distinct nodes; self-loops are dropped.
* ``nodes = "nodes.csv"`` (or ``.parquet``) with ``edges = "edges.csv"`` (or ``.parquet``):
  columns ``id``, ``lat``, ``lon`` and ``u``, ``v`` (other names with ``node_columns = { id =
  "…", lat = "…", lon = "…" }`` and ``edge_columns = { u = "…", v = "…" }``); ``pyarrow``,
  the ``data`` extra.  Edges are undirected; repeats and self-loops are dropped.  ``edges``
  may be omitted: a graph without edges (the keys have no structure).

**Node ids.**  The keys are the user's node ids in the file's order, written back in the
output.  An id is an integer when *every* id of the file is the canonical text of an integer
in the int64 range (``"42"``, ``"-7"``; not ``"007"`` or ``"4.0"``) or an integer column,
else text; an edge names its nodes by the same text.

**Coordinates** are WGS84 degrees unless ``[domain] crs`` (or a GraphML graph's ``crs``
attribute, as OSMnx writes it) names another CRS (:mod:`.crs`, pyproj: the ``geo`` extra):
then ``lat`` is the northing (y) and ``lon`` the easting (x) of that CRS, and the nodes are
transformed to WGS84 degrees (the output's ``lat``/``lon``) and into the records' CRS (the
matching), once, at plan time.  A node table or a GraphML file without a ``crs`` says nothing
of its CRS: its coordinates are *assumed* to be degrees, with a
:class:`~dpgauss.errors.CrsWarning`.

**Refused, before any record is read** (one ``ValueError`` naming the file): a file that does
not exist or cannot be parsed, a missing column or attribute, a duplicate or empty node id, a
node without coordinates or with coordinates that are not finite degrees (``lat ∈ [−90, 90]``,
``lon ∈ [−180, 180]``; a map in another CRS needs ``[domain] crs``) or, in another CRS, not
finite or without an image in degrees, an edge to an unknown node, a graph without nodes; for
GraphML also a file with no ``<graph>`` element, with more than one, or with a ``<graph>``
nested in a node or an edge (only one graph is read, never the first of several silently), with
or without the GraphML namespace (comments are not elements). Disconnected graphs and isolated
nodes are allowed: every node is a key.

The graph is public: nothing here depends on the records.  Edge weights are not read (the
graph denoisers are unweighted).
"""

from __future__ import annotations

import hashlib
import math
import re
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ..._optional import require
from ...errors import CrsWarning
from .crs import WGS84, Crs, map_crs, same_crs, transform_xy

__all__ = [
    "BUNDLED_GRAPHS",
    "PublicGraph",
    "edge_index",
    "load_public_graph",
    "read_edge_pairs",
    "read_graph_tables",
    "read_graphml",
]

BUNDLED_GRAPHS = ("manhattan", "manhattan-pruned")
_INT = re.compile(r"0|-?[1-9][0-9]*")  # canonical: no "-0", no leading zeros
_INT64 = (-(2**63), 2**63 - 1)


@dataclass(frozen=True, eq=False)
class PublicGraph:
    """A public graph: node ``i`` has id ``ids[i]`` at (``lat[i]``, ``lon[i]``) degrees.

    ``edges`` is the ``(m, 2)`` int64 array of undirected edges ``(i, j)``, ``i < j``, without
    repeats, sorted; ``name`` says what the graph is without a local path (the bundled name,
    or the kind of file and the SHA-256 of its bytes), for the report.  ``crs`` is the
    file's CRS, ``x``/``y`` the nodes in it (None when it is WGS84: ``lon``/``lat``), and
    ``assumed`` says that nothing named the CRS (degrees by the rule of :mod:`.crs`).
    """

    ids: np.ndarray
    lat: np.ndarray
    lon: np.ndarray
    edges: np.ndarray
    name: str
    crs: Crs = WGS84
    x: np.ndarray | None = None
    y: np.ndarray | None = None
    assumed: bool = False

    def nodes_in(self, crs: Crs, where: str = "source") -> tuple[np.ndarray, np.ndarray]:
        """``(y, x)`` of the nodes in ``crs`` (the records': latitude and longitude for a
        geographic one), transformed once; refused (naming ``[where] crs``) if a node has
        no image there."""
        if crs.wgs84:
            return self.lat, self.lon
        x = self.lon if self.x is None else self.x
        y = self.lat if self.y is None else self.y
        if same_crs(self.crs, crs):
            return y, x
        tx, ty = transform_xy(self.crs, crs, x, y)
        bad = ~(np.isfinite(tx) & np.isfinite(ty))
        if crs.geographic:
            with np.errstate(invalid="ignore"):
                bad |= ~((np.abs(ty) <= 90) & (np.abs(tx) <= 180))
        if bad.any():
            i = int(np.flatnonzero(bad)[0])
            raise ValueError(
                f"node {_show(self.ids.tolist()[i])} of the {self.name} cannot be expressed in "
                f"[{where}] crs = {crs.text!r} ({int(bad.sum())} of {self.n} nodes cannot)"
            )
        return ty, tx

    @property
    def n(self) -> int:
        """The number of nodes."""
        return int(self.lat.size)


def _digest(path: str) -> str:
    """The first 16 hex digits of the SHA-256 of a file's bytes (names a public file without
    its path)."""
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()[:16]


def _fail(path: str, what: str) -> ValueError:
    return ValueError(f"{path}: {what}")


def _show(value: object) -> str:
    if isinstance(value, int) and value.bit_length() > 200:
        return "an integer of more than 60 digits"
    try:
        text = repr(value)
    except ValueError:  # beyond Python's digit limit for int → str
        return "a very long integer"
    return text if len(text) <= 60 else text[:57] + "..."


def check_text(path: str, what: str, text: str) -> str:
    """``text``, refused unless it can be written as UTF-8 (a lone surrogate cannot: the
    table would fail to be written after the charge)."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        raise _fail(
            path,
            f"{what} {text.encode('utf-8', 'backslashreplace').decode()!r} is not "
            "valid text (it cannot be written as UTF-8)",
        ) from None
    return text


def _id_texts(path: str, raw: Sequence[Any], what: str) -> list[str]:
    """The ids as text (integers in canonical form), refusing empty and missing ones."""
    out = []
    for i, v in enumerate(raw):
        if v is None or (isinstance(v, float) and math.isnan(v)):
            raise _fail(path, f"{what} {i + 1} has no id")
        if isinstance(v, bool):
            raise _fail(path, f"{what} {i + 1} has the id {v!r}; ids are integers or text")
        if isinstance(v, int | np.integer):
            out.append(str(int(v)))
        elif isinstance(v, str):
            if v == "":
                raise _fail(path, f"{what} {i + 1} has an empty id")
            out.append(check_text(path, f"{what} {i + 1} has the id", v))
        else:
            raise _fail(path, f"{what} {i + 1} has the id {_show(v)}; ids are integers or text")
    return out


def _ids(texts: list[str]) -> np.ndarray:
    """int64 ids when every text is a canonical int64 integer, else the texts (object)."""
    if texts and all(_INT.fullmatch(t) for t in texts):
        values = [int(t) for t in texts]
        if all(_INT64[0] <= v <= _INT64[1] for v in values):
            return np.asarray(values, dtype=np.int64)
    return np.asarray(texts, dtype=object)


def _coordinate(path: str, node: str, name: str, value: object, limit: float) -> float:
    """A node's coordinate, finite and in ``[−limit, limit]`` (``inf``: any finite number)."""
    if value is None or isinstance(value, bool):
        raise _fail(path, f"node {_show(node)} has no {name}")
    try:
        x = float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError, OverflowError):
        raise _fail(
            path, f"node {_show(node)} has the {name} {_show(value)}, not a number"
        ) from None
    if not math.isfinite(x):
        raise _fail(path, f"node {_show(node)} has the {name} {_show(value)}, not finite")
    if not -limit <= x <= limit:
        raise _fail(
            path,
            f"node {_show(node)} has the {name} {_show(value)}; degrees in [-{limit:g}, {limit:g}] "
            "(a map in another CRS needs [domain] crs = 'EPSG:…')",
        )
    return x


def _build(
    path: str,
    texts: list[str],
    lat: Sequence[object],
    lon: Sequence[object],
    pairs: Sequence[tuple[str, str]],
    names: tuple[str, str],
    name: str,
    crs: Crs = WGS84,
    assumed: bool = False,
) -> PublicGraph:
    if not texts:
        raise _fail(path, "the graph has no nodes")
    index: dict[str, int] = {}
    for i, t in enumerate(texts):
        if t in index:
            raise _fail(path, f"the node id {_show(t)} appears twice")
        index[t] = i
    lim = (90.0, 180.0) if crs.wgs84 else (math.inf, math.inf)
    la = np.array(
        [_coordinate(path, t, names[0], v, lim[0]) for t, v in zip(texts, lat, strict=True)]
    )
    lo = np.array(
        [_coordinate(path, t, names[1], v, lim[1]) for t, v in zip(texts, lon, strict=True)]
    )
    native: tuple[np.ndarray, np.ndarray] | None = None
    if not crs.wgs84:
        native = (lo, la)
        name = f"{name}, {crs.text}"
        graph = PublicGraph(_ids(texts), la, lo, np.empty((0, 2), np.int64), name, crs, lo, la)
        la, lo = _wgs84_or_fail(path, graph)
    ends = np.empty((len(pairs), 2), dtype=np.int64)
    for e, (a, b) in enumerate(pairs):
        for j, t in enumerate((a, b)):
            k = index.get(t)
            if k is None:
                raise _fail(
                    path, f"edge {e + 1} ({_show(a)}, {_show(b)}) names the unknown node {_show(t)}"
                )
            ends[e, j] = k
    ends = ends[ends[:, 0] != ends[:, 1]]  # self-loops dropped
    ends = np.unique(np.sort(ends, axis=1), axis=0).reshape(-1, 2)
    x, y = native if native is not None else (None, None)
    return PublicGraph(_ids(texts), la, lo, ends.astype(np.int64), name, crs, x, y, assumed)


def _wgs84_or_fail(path: str, graph: PublicGraph) -> tuple[np.ndarray, np.ndarray]:
    """``(lat, lon)`` of the nodes in WGS84 degrees, refused (naming the file and its CRS)
    when a node has no image there."""
    assert graph.x is not None and graph.y is not None
    lon, lat = transform_xy(graph.crs, WGS84, graph.x, graph.y)
    with np.errstate(invalid="ignore"):
        bad = ~(np.isfinite(lat) & np.isfinite(lon) & (np.abs(lat) <= 90) & (np.abs(lon) <= 180))
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        raise _fail(
            path,
            f"node {_show(graph.ids.tolist()[i])} at ({graph.x[i]!r}, {graph.y[i]!r}) in "
            f"{graph.crs.text!r} has no image in WGS84 degrees ({int(bad.sum())} of {graph.n} "
            "nodes have none; is [domain] crs right?)",
        )
    return lat, lon


_GRAPHML_NS = "{http://graphml.graphdrawing.org/xmlns}"


def _graphml_tag(tag: object) -> str | None:
    """The local name of a GraphML element (the GraphML namespace or none), else ``None``."""
    if not isinstance(tag, str):
        return None
    if tag.startswith(_GRAPHML_NS):
        return tag[len(_GRAPHML_NS) :]
    return None if tag.startswith("{") else tag


def read_graphml(
    path: str | Path,
    *,
    lat: str = "y",
    lon: str = "x",
    crs: str | None = None,
    where: str = "domain",
) -> PublicGraph:
    """The graph of a GraphML file, coordinates in the node attributes ``lat`` and ``lon``,
    in ``crs`` (``[where] crs``), else in the graph's ``crs`` attribute, else assumed WGS84.

    Directed graphs and multigraphs are read as undirected simple graphs (module docstring).
    A node declared twice, which ``networkx`` would merge silently, is refused, and so is a
    file of several ``<graph>`` elements or a nested one (``networkx`` reads the first graph
    only) or of none: one streaming pass over the file before ``networkx`` reads it.
    """
    import xml.etree.ElementTree as ET

    nx = require("networkx", "graphs", "a GraphML graph", error=ValueError)
    p = str(path)
    declared: list[str] = []
    graphs = 0  # top-level <graph> elements
    open_: list[str] = []  # the GraphML elements enclosing this one (a streaming parse)
    try:
        for event, elem in ET.iterparse(p, events=("start", "end")):
            tag = _graphml_tag(elem.tag)
            if tag is None:
                continue  # another namespace's element (inside <data>), e.g. yEd's
            if event == "start":
                if tag == "graph":
                    if "graph" in open_:
                        where = next((t for t in reversed(open_) if t in ("node", "edge")), "graph")
                        raise _fail(
                            p,
                            f"has a <graph> nested in {'an' if where == 'edge' else 'a'} "
                            f"<{where}>: nested graphs are not read (one graph per file)",
                        )
                    graphs += 1
                    if graphs > 1:
                        raise _fail(
                            p, "has more than one <graph> element: one graph per file is read"
                        )
                open_.append(tag)
                continue
            open_.pop()
            if tag == "node":
                declared.append(str(elem.get("id")))
            if tag in ("node", "edge"):
                elem.clear()
    except FileNotFoundError:
        raise _fail(p, "no such file") from None
    except OSError as exc:
        raise _fail(p, f"cannot be read: {exc.strerror or exc}") from None
    except ET.ParseError as exc:
        raise _fail(p, f"is not XML: {exc}") from None
    if graphs == 0:
        raise _fail(p, "has no GraphML <graph> element")
    seen: set[str] = set()
    for t in declared:
        if t in seen:
            raise _fail(p, f"the node id {_show(t)} appears twice")
        seen.add(t)
    try:
        g = nx.read_graphml(p)
    except Exception as exc:  # networkx raises several types for a malformed file
        why = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise _fail(p, f"is not a GraphML graph: {why}") from None
    nodes = list(g.nodes(data=True))
    texts = _id_texts(p, [n for n, _ in nodes], "node")
    missing = [
        t for t, (_, data) in zip(texts, nodes, strict=True) if lat not in data or lon not in data
    ]
    if missing:
        which = lat if lat not in nodes[texts.index(missing[0])][1] else lon
        raise _fail(
            p,
            f"node {_show(missing[0])} has no attribute {which!r} (the coordinates: node_columns = "
            f"{{ lat = {lat!r}, lon = {lon!r} }}); {len(missing)} of {len(texts)} nodes lack one",
        )
    text_of = dict(zip((n for n, _ in nodes), texts, strict=True))
    pairs = [(text_of[a], text_of[b]) for a, b in g.edges()]
    own = g.graph.get("crs")
    if own is not None and not isinstance(own, str):
        raise _fail(p, f"its graph attribute crs is {_show(own)}, not text")
    the_crs, assumed = map_crs(crs, own, p, where)
    return _build(
        p,
        texts,
        [d[lat] for _, d in nodes],
        [d[lon] for _, d in nodes],
        pairs,
        (lat, lon),
        f"GraphML file, sha256 {_digest(p)}",
        the_crs,
        assumed,
    )


def _table(path: str, id_columns: tuple[str, ...], role: str) -> Any:
    """A node or edge table (CSV or Parquet), id columns read as text from CSV."""
    require("pyarrow", "data", f"a graph's {role} file", error=ValueError)
    import pyarrow as pa

    p = Path(path)
    if not p.is_file():
        raise _fail(path, f"no such {role} file")
    try:
        if p.suffix.lower() in (".parquet", ".pq"):
            import pyarrow.parquet as pq

            return pq.read_table(path)
        import pyarrow.csv as pcsv

        types = {c: pa.string() for c in id_columns}
        return pcsv.read_csv(path, convert_options=pcsv.ConvertOptions(column_types=types))
    except (pa.ArrowException, OSError) as exc:
        raise _fail(path, f"cannot be read as a {role} table: {str(exc).splitlines()[0]}") from None


def _column(path: str, table: Any, name: str, key: str) -> list[Any]:
    dup = sorted({c for c in table.column_names if table.column_names.count(c) > 1})
    if dup:
        raise _fail(path, f"has the column {dup[0]!r} twice: column names must be distinct")
    if name not in table.column_names:
        shown = ", ".join(table.column_names[:20])
        raise _fail(path, f"has no column {name!r} ({key}; columns: {shown})")
    import pyarrow as pa

    col = table.column(name)
    if pa.types.is_floating(col.type) and key.endswith(("id", "u", "v")):
        raise _fail(
            path, f"column {name!r} holds numbers with a fraction; node ids are integers or text"
        )
    try:
        return col.to_pylist()
    except (UnicodeDecodeError, pa.ArrowException) as exc:
        raise _fail(path, f"column {name!r} cannot be read: {str(exc).splitlines()[0]}") from None


def read_edge_pairs(
    path: str | Path, known: set[str], edge_columns: Mapping[str, str] | None = None
) -> list[tuple[str, str]]:
    """The ``(u, v)`` id texts of an edge table (CSV or Parquet), each a ``known`` id."""
    ec = {"u": "u", "v": "v", **(edge_columns or {})}
    ep = str(path)
    et = _table(ep, (ec["u"], ec["v"]), "edges")
    us = _id_texts(ep, _column(ep, et, ec["u"], "edge_columns u"), "edge")
    vs = _id_texts(ep, _column(ep, et, ec["v"], "edge_columns v"), "edge")
    pairs = list(zip(us, vs, strict=True))
    for e, (a, b) in enumerate(pairs):
        for t in (a, b):
            if t not in known:
                raise _fail(
                    ep, f"edge {e + 1} ({_show(a)}, {_show(b)}) names the unknown node {_show(t)}"
                )
    return pairs


def edge_index(pairs: list[tuple[str, str]], texts: list[str]) -> np.ndarray:
    """``(m, 2)`` int64 edges ``i < j`` of id pairs, self-loops and repeats dropped, sorted."""
    index = {t: i for i, t in enumerate(texts)}
    ends = np.array([[index[a], index[b]] for a, b in pairs], dtype=np.int64).reshape(-1, 2)
    ends = ends[ends[:, 0] != ends[:, 1]]
    return np.unique(np.sort(ends, axis=1), axis=0).reshape(-1, 2)


def read_graph_tables(
    nodes: str | Path,
    edges: str | Path | None = None,
    *,
    node_columns: Mapping[str, str] | None = None,
    edge_columns: Mapping[str, str] | None = None,
    crs: str | None = None,
    where: str = "domain",
) -> PublicGraph:
    """The graph of a node table and an optional edge table (CSV or Parquet; module doc),
    coordinates in ``crs`` (``[where] crs``), else assumed WGS84."""
    nc = {"id": "id", "lat": "lat", "lon": "lon", **(node_columns or {})}
    ec = {"u": "u", "v": "v", **(edge_columns or {})}
    np_ = str(nodes)
    nt = _table(np_, (nc["id"],), "nodes")
    texts = _id_texts(np_, _column(np_, nt, nc["id"], "node_columns id"), "row")
    lat = _column(np_, nt, nc["lat"], "node_columns lat")
    lon = _column(np_, nt, nc["lon"], "node_columns lon")
    pairs: list[tuple[str, str]] = []
    if edges is not None:
        pairs = read_edge_pairs(edges, set(texts), ec)
    files = [np_] + ([str(edges)] if edges is not None else [])
    what = "node and edge tables" if edges is not None else "node table"
    digests = ", ".join(_digest(f) for f in files)
    the_crs, assumed = map_crs(crs, None, np_, where)
    return _build(
        np_,
        texts,
        lat,
        lon,
        pairs,
        (nc["lat"], nc["lon"]),
        f"{what}, sha256 {digests}",
        the_crs,
        assumed,
    )


def _assumed(graph: PublicGraph, path: str, where: str) -> PublicGraph:
    """``graph``, with a :class:`~dpgauss.errors.CrsWarning` if its CRS was assumed."""
    if graph.assumed:
        warnings.warn(
            f"{path}: the graph's coordinates are read as WGS84 longitude/latitude in degrees "
            f"because nothing says which CRS they are in; set [{where}] crs = 'EPSG:4326' to "
            "say so, or the CRS they are in (e.g. 'EPSG:32618')",
            CrsWarning,
            stacklevel=3,
        )
    return graph


def load_public_graph(domain: Any) -> PublicGraph:
    """The public graph of a ``kind = "graph"`` :class:`~dpgauss.release.spec.DomainSpec`
    (a :class:`~dpgauss.errors.CrsWarning` when its CRS is assumed)."""
    cols = dict(domain.node_columns or {})
    crs, where = getattr(domain, "crs", None), getattr(domain, "where", "domain")
    if domain.nodes is not None:
        g = read_graph_tables(
            domain.nodes,
            domain.edges,
            node_columns=cols,
            edge_columns=domain.edge_columns,
            crs=crs,
            where=where,
        )
        return _assumed(g, str(domain.nodes), where)
    name = str(domain.graph)
    if name in BUNDLED_GRAPHS:
        from ...datasets import load_manhattan_graph

        road = load_manhattan_graph(prune_dead_ends=name == "manhattan-pruned")
        return PublicGraph(
            np.arange(road.n, dtype=np.int64),
            np.asarray(road.lat),
            np.asarray(road.lon),
            np.asarray(road.edges, dtype=np.int64),
            name,
        )
    g = read_graphml(name, lat=cols.get("lat", "y"), lon=cols.get("lon", "x"), crs=crs, where=where)
    return _assumed(g, name, where)
