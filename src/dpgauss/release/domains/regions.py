"""Public regions from a GeoJSON file: keys, point-in-polygon, and adjacency.

A ``[domain] kind = "regions"`` release has one key per feature of a GeoJSON
``FeatureCollection`` (in file order), named by the feature's ``id_property``.  Records are
placed by their coordinates (``lat``, ``lon``: point in polygon) or by a column that already
holds the region id (``column``: an exact match, as a ``values`` domain).  The structure is the
adjacency graph of the regions, which the graph denoisers use; a choropleth is drawn.

**Reading** (Shapely 2, the ``regions`` extra; :func:`read_geojson`). Features with a
``Polygon`` or ``MultiPolygon`` geometry (holes respected), coordinates ``[lon, lat]`` in
degrees — or ``[x, y]`` in the CRS that ``[domain] crs`` or the file's legacy ``crs`` member
names (:mod:`.crs`: pyproj, the ``geo`` extra), the polygons then transformed vertex by vertex
to WGS84 degrees (for the plot) and into the records' CRS (for point in polygon), once, at plan
time. ``name_property``: the feature property written as each region's ``name`` column (text,
an integer or null). Refused, before any record is read, in one line naming the file: a file
that is not JSON or not a ``FeatureCollection``, no features, a feature without a polygonal
geometry, a missing, empty or duplicate id, coordinates that are not finite degrees, a polygon
that is not valid (a self-intersecting ring, a hole outside its shell, …: Shapely's reason is
quoted).

**Point in polygon** (:class:`RegionMapper`).  A point belongs to the regions whose *closed*
polygon contains it (boundary included); a point on a border shared by several regions goes
to the **first of them in the file** (the smallest key), so one record never counts twice and
no point on a border is lost.  A point in no region is outside the domain.  The candidates
of a region are the points in its bounding box, the test is Shapely's vectorised
``intersects_xy`` on the prepared polygon.

**Adjacency** (:func:`adjacency`).  ``"queen"``: two regions are neighbours when their closed
polygons share at least one point; ``"rook"``: when they share more than isolated points (a
stretch of border, or an overlap); ``"none"``: no structure.  Or an edge table (``edges``,
columns ``u``, ``v``: region ids).

The regions are public: nothing here depends on the records.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from ..._optional import require
from .crs import WGS84, Crs, geojson_crs, map_crs, same_crs, transform_xy
from .graph_files import _digest, _fail, _show, check_text

__all__ = [
    "ADJACENCY",
    "BUNDLED_REGIONS",
    "PublicRegions",
    "RegionMapper",
    "adjacency",
    "load_public_regions",
    "read_geojson",
]

BUNDLED_REGIONS = ("nyc-neighbourhoods",)
ADJACENCY = ("queen", "rook", "none")


def _shapely() -> Any:
    return require("shapely", "regions", "a regions domain (polygons)", error=ValueError)


@dataclass(frozen=True, eq=False)
class PublicRegions:
    """Public regions: region ``i`` has id ``ids[i]`` and polygon ``geoms[i]`` (a Shapely
    geometry, WGS84 lon/lat degrees); ``name`` says what they are without a local path.

    ``crs`` is the file's CRS and ``native`` the polygons in it (None when it is WGS84);
    ``names`` the ``name_property`` of each region (None without one)."""

    ids: np.ndarray
    geoms: np.ndarray
    name: str
    crs: Crs = WGS84
    native: np.ndarray | None = None
    names: np.ndarray | None = None

    def geoms_in(self, crs: Crs, where: str = "source") -> np.ndarray:
        """The polygons in ``crs`` (the records'): the file's own when it is that CRS, else
        transformed vertex by vertex; refused (naming ``[where] crs``) if one cannot be."""
        if crs.wgs84:
            return self.geoms
        native = self.geoms if self.native is None else self.native
        if same_crs(self.crs, crs):
            return native
        return _transform(native, self.crs, crs, self.ids, f"[{where}] crs = {crs.text!r}")

    @property
    def n(self) -> int:
        """The number of regions."""
        return int(self.geoms.size)


def _transform(geoms: np.ndarray, src: Crs, dst: Crs, ids: np.ndarray, what: str) -> np.ndarray:
    """Each polygon's vertices from ``src`` to ``dst``; refused when a vertex cannot be
    transformed or a polygon becomes invalid (``what`` names the target)."""
    shapely = _shapely()

    def fn(xy: np.ndarray) -> np.ndarray:
        x, y = transform_xy(src, dst, xy[:, 0], xy[:, 1])
        return np.column_stack([x, y])

    out = shapely.transform(geoms, fn)
    for rid, g in zip(ids.tolist(), out, strict=True):
        xy = shapely.get_coordinates(g)
        ok = bool(np.all(np.isfinite(xy)))
        if ok and dst.geographic:
            ok = bool(np.all(np.abs(xy[:, 0]) <= 180) and np.all(np.abs(xy[:, 1]) <= 90))
        if not ok:
            raise ValueError(
                f"region {_show(rid)}: its polygon in {src.words()} cannot be expressed in "
                f"{what} (a vertex has no image there)"
            )
        if not shapely.is_valid(g):
            raise ValueError(
                f"region {_show(rid)}: its polygon in {src.words()} is not valid in {what} "
                f"({shapely.is_valid_reason(g)})"
            )
    return np.asarray(out, dtype=object)


def _check_coords(path: str, rid: str, coords: Any, depth: int, degrees: bool = True) -> None:
    """Every position ``[lon, lat]`` finite and in range (``depth`` nesting levels above);
    ``[x, y]`` finite when the file is not in degrees."""
    stack = [(coords, depth)]
    while stack:
        c, d = stack.pop()
        if not isinstance(c, list):
            raise _fail(path, f"feature {rid}: coordinates must be nested lists of [lon, lat]")
        if d == 0:
            if len(c) < 2 or not all(
                isinstance(v, int | float) and not isinstance(v, bool) for v in c[:2]
            ):
                raise _fail(path, f"feature {rid}: a position is not [lon, lat]: {_show(c)}")
            try:
                lon, lat = float(c[0]), float(c[1])
            except OverflowError:
                lon = lat = math.inf
            if not degrees:
                if not (math.isfinite(lon) and math.isfinite(lat)):
                    raise _fail(path, f"feature {rid}: the position {_show(c)} is not finite")
                continue
            if not (
                math.isfinite(lon)
                and math.isfinite(lat)
                and -180 <= lon <= 180
                and -90 <= lat <= 90
            ):
                raise _fail(
                    path,
                    f"feature {rid}: the position {_show(c)} is not [lon, lat] in degrees "
                    "(lon in [-180, 180], lat in [-90, 90]); a layer in another CRS needs "
                    "[domain] crs = 'EPSG:…' (or a crs member in the file)",
                )
            continue
        stack.extend((x, d - 1) for x in c)


def read_geojson(
    path: str | Path,
    id_property: str = "id",
    *,
    crs: str | None = None,
    name_property: str | None = None,
    where: str = "domain",
) -> PublicRegions:
    """The regions of a GeoJSON FeatureCollection, ids from ``id_property``, in ``crs`` (the
    ``[where] crs``; else the file's ``crs`` member; else WGS84), names from
    ``name_property`` (module docstring)."""
    shapely = _shapely()
    from shapely.geometry import shape

    p = str(path)
    try:
        data = json.loads(Path(p).read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise _fail(p, "no such file") from None
    except OSError as exc:
        raise _fail(p, f"cannot be read: {exc.strerror or exc}") from None
    except (UnicodeDecodeError, ValueError) as exc:  # JSONDecodeError is a ValueError
        raise _fail(p, f"is not JSON: {str(exc).splitlines()[0][:200]}") from None
    except RecursionError:
        raise _fail(p, "is not GeoJSON: its lists are nested too deeply") from None
    if not isinstance(data, dict) or data.get("type") != "FeatureCollection":
        got = data.get("type") if isinstance(data, dict) else type(data).__name__
        raise _fail(p, f"is not a GeoJSON FeatureCollection (its type is {_show(got)})")
    features = data.get("features")
    if not isinstance(features, list) or not features:
        raise _fail(p, "the FeatureCollection has no features")
    own = geojson_crs(p, data["crs"]) if "crs" in data else None
    the_crs, _ = map_crs(crs, own, p, where)  # assumed: WGS84, as RFC 7946 says
    names: list[str | None] = []
    ids: list[Any] = []
    geoms = []
    seen: set[Any] = set()
    for k, feat in enumerate(features, start=1):
        if not isinstance(feat, dict) or feat.get("type") != "Feature":
            raise _fail(p, f"feature {k} is not a GeoJSON Feature")
        props = feat.get("properties") or {}
        rid = props.get(id_property) if isinstance(props, dict) else None
        if rid is None or rid == "" or isinstance(rid, bool) or not isinstance(rid, int | str):
            raise _fail(
                p,
                f"feature {k} has no id: its property {id_property!r} must be an integer or "
                f"text (id_property names it); got {_show(rid)}",
            )
        if isinstance(rid, int) and not -(2**63) <= rid < 2**63:
            raise _fail(p, f"feature {k} has the id {_show(rid)}: integer ids are 64-bit")
        if isinstance(rid, str):
            check_text(p, f"feature {k} has the id", rid)
        geom = feat.get("geometry")
        kind = geom.get("type") if isinstance(geom, dict) else None
        if kind not in ("Polygon", "MultiPolygon"):
            raise _fail(
                p,
                f"feature {_show(rid)} has the geometry {_show(kind)}; a region is a Polygon "
                "or MultiPolygon",
            )
        assert isinstance(geom, dict)  # it has a geometry type
        _check_coords(
            p, _show(rid), geom.get("coordinates"), 2 if kind == "Polygon" else 3, the_crs.wgs84
        )
        if name_property is not None:
            names.append(_name_of(p, rid, props, name_property))
        try:
            g = shape(geom)
        except Exception as exc:  # shapely raises several types for malformed rings
            raise _fail(p, f"feature {_show(rid)} is not a polygon: {exc}") from None
        if g.is_empty:
            raise _fail(p, f"feature {_show(rid)} has an empty polygon")
        if not shapely.is_valid(g):
            raise _fail(
                p,
                f"feature {_show(rid)} is not a valid polygon ({shapely.is_valid_reason(g)}); "
                "repair it (e.g. shapely.make_valid) and write the file again",
            )
        ids.append(rid)
        geoms.append(g)
    # The keys: integers when every id is one, else every id as text; distinct as keys
    # (the ids 1 and "1" would both be the key "1": one record would count twice).
    keys = ids if all(isinstance(v, int) for v in ids) else [str(v) for v in ids]
    for key in keys:
        if key in seen:
            raise _fail(p, f"the region id {_show(key)} appears twice (ids are compared as keys)")
        seen.add(key)
    id_arr = (
        np.asarray(keys, dtype=np.int64)
        if all(isinstance(v, int) for v in keys)
        else np.asarray(keys, dtype=object)
    )
    if name_property is not None and all(v is None for v in names):
        raise _fail(
            p,
            f"no feature has the property {name_property!r} (name_property: the property "
            "holding each region's name)",
        )
    native = np.asarray(geoms, dtype=object)
    name = f"GeoJSON file, sha256 {_digest(p)}"
    names_arr = np.asarray(names, dtype=object) if name_property is not None else None
    if the_crs.wgs84:
        return PublicRegions(id_arr, native, name, names=names_arr)
    try:
        wgs = _transform(native, the_crs, WGS84, id_arr, "WGS84 degrees")
    except ValueError as exc:
        raise _fail(p, f"{exc} ([{where}] crs = {the_crs.text!r})") from None
    return PublicRegions(
        id_arr, wgs, f"{name}, {the_crs.text}", crs=the_crs, native=native, names=names_arr
    )


def _name_of(path: str, rid: Any, props: Any, key: str) -> str | None:
    """A feature's ``name_property``: text, an integer (as text) or null."""
    v = props.get(key) if isinstance(props, dict) else None
    if v is None:
        return None
    if isinstance(v, str):
        return check_text(path, f"feature {_show(rid)} has the name", v)
    if isinstance(v, int) and not isinstance(v, bool):
        return str(v)
    raise _fail(
        path,
        f"feature {_show(rid)} has the {key!r} {_show(v)}; a name (name_property) is text, "
        "an integer or null",
    )


def load_public_regions(domain: Any) -> PublicRegions:
    """The regions of a ``kind = "regions"`` :class:`~dpgauss.release.spec.DomainSpec`."""
    name = str(domain.regions)
    if name in BUNDLED_REGIONS:
        from ...datasets.neighbourhoods import nyc_neighbourhoods_path

        r = read_geojson(nyc_neighbourhoods_path(), "id", name_property=domain.name_property)
        return PublicRegions(r.ids, r.geoms, name, names=r.names)
    return read_geojson(
        name,
        domain.id_property,
        crs=domain.crs,
        name_property=domain.name_property,
        where=domain.where,
    )


def adjacency(regions: PublicRegions, rule: str) -> np.ndarray | None:
    """The ``(m, 2)`` edges ``(i, j)``, ``i < j``, sorted, of ``rule`` (module docstring)."""
    if rule == "none":
        return None
    if rule not in ("queen", "rook"):
        raise ValueError(
            f"adjacency must be one of {', '.join(map(repr, ADJACENCY))}; got {rule!r}"
        )
    shapely = _shapely()
    tree = shapely.STRtree(regions.geoms)
    a, b = tree.query(regions.geoms, predicate="intersects")
    keep = a < b
    a, b = a[keep], b[keep]
    if rule == "rook" and a.size:
        shared = shapely.intersection(regions.geoms[a], regions.geoms[b])
        dims = shapely.get_dimensions(shared)
        keep = dims >= 1
        a, b = a[keep], b[keep]
    edges = np.stack([a, b], axis=1).astype(np.int64).reshape(-1, 2)
    return edges[np.lexsort((edges[:, 1], edges[:, 0]))]


@dataclass(eq=False)
class RegionMapper:
    """Point in polygon over public regions (module docstring: the border rule).

    ``geoms`` are the polygons in the records' CRS (default: the regions' own, WGS84
    degrees); ``degrees = False`` for a projected CRS (``lat`` the northing, ``lon`` the
    easting; valid when finite).

    The points are sorted by longitude once; each region, in file order, takes the slice of
    points inside its bounding box (two binary searches and a latitude test) and asks
    Shapely's vectorised ``intersects_xy`` on its prepared polygon about the points no earlier
    region took.  About 5 × an STR-tree query of point geometries (``bench_domains.py``).
    """

    regions: PublicRegions
    geoms: np.ndarray | None = None
    degrees: bool = True
    mapping: str = field(default="nearest", init=False)  # a record maps to one key
    _bounds: np.ndarray = field(init=False, repr=False)

    def __post_init__(self) -> None:
        shapely = _shapely()
        if self.geoms is None:
            self.geoms = self.regions.geoms
        shapely.prepare(self.geoms)
        self._bounds = shapely.bounds(self.geoms)

    @property
    def n(self) -> int:
        return self.regions.n

    def valid(self, lat: object, lon: object) -> np.ndarray:
        """Finite coordinates, in [−90, 90] × [−180, 180] for degrees."""
        la = np.asarray(lat, dtype=np.float64).reshape(-1)
        lo = np.asarray(lon, dtype=np.float64).reshape(-1)
        with np.errstate(invalid="ignore"):
            ok = np.isfinite(la) & np.isfinite(lo)
            if not self.degrees:
                return ok
            return ok & (np.abs(la) <= 90.0) & (np.abs(lo) <= 180.0)

    def locate(self, lat: object, lon: object) -> np.ndarray:
        """The region index of each point (int64), −1 if in none or invalid; a point on a
        shared border goes to the first region of the file that contains it."""
        import shapely

        la = np.asarray(lat, dtype=np.float64).reshape(-1)
        lo = np.asarray(lon, dtype=np.float64).reshape(-1)
        out = np.full(la.shape, -1, dtype=np.int64)
        ok = np.flatnonzero(self.valid(la, lo))
        if ok.size == 0:
            return out
        order = ok[np.argsort(lo[ok], kind="stable")]
        xs, ys = lo[order], la[order]
        geoms = self.geoms
        assert geoms is not None  # set in __post_init__
        for i, (x0, y0, x1, y1) in enumerate(self._bounds):
            start = int(np.searchsorted(xs, x0, side="left"))
            stop = int(np.searchsorted(xs, x1, side="right"))
            if stop <= start:
                continue
            y = ys[start:stop]
            cand = order[start + np.flatnonzero((y >= y0) & (y <= y1))]
            cand = cand[out[cand] < 0]  # an earlier region took the others
            if cand.size:
                hit = shapely.intersects_xy(geoms[i], lo[cand], la[cand])
                out[cand[hit]] = i
        return out

    nearest = locate  # the engines' UDFs call `nearest` for every point mapper
