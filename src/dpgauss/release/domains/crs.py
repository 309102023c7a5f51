"""Coordinate reference systems: the public map's and the records', and the one transform.

A map (a GraphML graph, a node table, a GeoJSON layer) and the records' coordinates may each
be in their own CRS: ``[domain] crs`` names the map's, ``[source] crs`` the records'
(``"EPSG:32618"``, ``"EPSG:2263"``, any text pyproj reads — the ``geo`` extra).  Without a
``[source] crs`` the records are WGS84 longitude/latitude in degrees, as before.

**The records are matched in their own CRS; the map is transformed, once, at plan time.**  The
map is public, the records private: the public map's nodes or polygons are brought into the
records' CRS before any record is read, so no record is ever transformed (a record's row
expressions are the same in every engine, :mod:`dpgauss.release.engines.sql`).  Matching is
then on the sphere for a geographic CRS (:mod:`.mapping`: great-circle metres) and in the
plane for a projected one (Euclidean distance in the CRS's unit, converted to metres; a
conformal projection near its standard lines — UTM, a state plane — measures ground metres
within 0.1 %, Web Mercator does not: a factor 1/cos φ).  The output's ``lat``/``lon`` columns
and the plots are always WGS84 degrees.

**Which CRS a map is in** (the documented rule, decided before any record is read):

1. ``[domain] crs``, when given;
2. else the file's own: a GeoJSON's legacy ``crs`` member (``{"type": "name", "properties":
   {"name": "urn:ogc:def:crs:EPSG::32618"}}``, GeoJSON 2008) or a GraphML graph's ``crs``
   attribute (as OSMnx writes it); a file that declares one *and* a different ``[domain]
   crs`` is refused (one of them is wrong);
3. else WGS84 longitude/latitude: for GeoJSON by its standard (RFC 7946), for GraphML and
   node tables by dpgauss's rule — and since those formats cannot say, the plan warns
   (:class:`~dpgauss.errors.CrsWarning`) that the coordinates are *assumed* to be degrees.

A map in degrees (declared or assumed) whose coordinates leave [−180, 180] × [−90, 90] is
refused, naming ``[domain] crs``.  Why a warning and not a refusal for the assumed case:
coordinates inside that range *are* valid degrees, nothing public tells a planar layer that
happens to fall inside it from a layer in degrees, and the records that would tell are
private — a release may not look at them for that.  ``dpgauss check``, the data owner's
confidential look, does (:mod:`dpgauss.release.check`: it warns when most records fall
outside the map).  The warning is silenced by declaring the CRS, ``crs = "EPSG:4326"``
included.

WGS84 by its common names (``EPSG:4326``, ``OGC:CRS84``, their URNs) needs no pyproj; every
other CRS does.  Transforms use ``always_xy`` (x = easting or longitude first, whatever the
CRS's axis order); a point that cannot be transformed comes back non-finite, and a map with
such a point is refused at plan time.  The transform is pyproj's best operation for the pair,
computed once in the process that plans the release (every engine then sees the same map);
between datums, a PROJ install with more grids may pick a finer operation and move a map by
centimetres to metres.
"""

from __future__ import annotations

import functools
import math
import re
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..._optional import require

__all__ = ["WGS84", "Crs", "geojson_crs", "map_crs", "parse_crs", "same_crs", "transform_xy"]

#: The names of WGS84 longitude/latitude that need no pyproj (compared without case).
_WGS84_NAMES = frozenset(
    {
        "epsg:4326",
        "urn:ogc:def:crs:epsg::4326",
        "urn:ogc:def:crs:epsg:6.3:4326",
        "urn:ogc:def:crs:epsg:6.6:4326",
        "ogc:crs84",
        "crs84",
        "urn:ogc:def:crs:ogc:1.3:crs84",
        "urn:ogc:def:crs:ogc::crs84",
        "http://www.opengis.net/def/crs/ogc/1.3/crs84",
        "http://www.opengis.net/def/crs/epsg/0/4326",
    }
)


@dataclass(frozen=True)
class Crs:
    """A 2-D CRS as written (``text``): ``geographic`` (degrees) or projected with
    ``metres_per_unit``; ``wgs84`` when it is WGS84 longitude/latitude (no transform to the
    output's degrees)."""

    text: str
    geographic: bool
    metres_per_unit: float
    wgs84: bool

    def words(self) -> str:
        """The CRS in a report's words."""
        return "WGS84 lon/lat" if self.wgs84 else self.text


WGS84 = Crs("EPSG:4326", True, math.nan, True)


def _pyproj(purpose: str) -> Any:
    return require("pyproj", "geo", purpose, error=ValueError)


@functools.lru_cache(maxsize=64)
def _pyproj_crs(text: str) -> Any:
    return _pyproj(f"the CRS {text!r}").CRS.from_user_input(text)


def parse_crs(text: object, where: str) -> Crs:
    """The CRS ``text`` names, refused in one ``ValueError`` naming ``where`` (e.g.
    ``"[domain] crs"``) unless it is a 2-D geographic CRS in degrees or a projected one."""
    if not isinstance(text, str) or not text.strip():
        raise TypeError(f"{where} must be a CRS as text (e.g. 'EPSG:32618'); got {text!r}")
    if text.strip().lower() in _WGS84_NAMES:
        return Crs(text, True, math.nan, True)
    _pyproj(f"{where} = {text!r}")
    try:
        crs = _pyproj_crs(text)
    except Exception as exc:  # pyproj.exceptions.CRSError, and a few others for odd text
        why = str(exc).splitlines()[0][:160] if str(exc) else type(exc).__name__
        raise ValueError(
            f"{where} must be a CRS pyproj knows (e.g. 'EPSG:32618'); got {text!r} ({why})"
        ) from None
    axes = crs.axis_info
    if len(axes) != 2 or not (crs.is_geographic or crs.is_projected):
        raise ValueError(
            f"{where} must be a 2-D geographic or projected CRS; {text!r} is "
            f"{crs.type_name or 'another kind'} with {len(axes)} axes"
        )
    if crs.is_geographic:
        if any(
            a.unit_name not in ("degree", "degree (supplier to define representation)")
            for a in axes
        ):
            raise ValueError(f"{where}: the geographic CRS {text!r} is not in degrees")
        wgs84 = crs.equals(_pyproj_crs("OGC:CRS84"), ignore_axis_order=True)
        return Crs(text, True, math.nan, bool(wgs84))
    factor = float(axes[0].unit_conversion_factor)
    if not (math.isfinite(factor) and factor > 0) or axes[1].unit_conversion_factor != factor:
        raise ValueError(f"{where}: the projected CRS {text!r} has no single linear unit")
    return Crs(text, False, factor, False)


def same_crs(a: Crs, b: Crs) -> bool:
    """Whether two CRSs are the same (axis order aside): no transform between them."""
    if a.text == b.text or (a.wgs84 and b.wgs84):
        return True
    if a.wgs84 != b.wgs84 or a.geographic != b.geographic:
        return False
    return bool(_pyproj_crs(a.text).equals(_pyproj_crs(b.text), ignore_axis_order=True))


@functools.lru_cache(maxsize=64)
def _transformer(src: str, dst: str) -> Any:
    pyproj = _pyproj(f"a transform from {src!r} to {dst!r}")
    return pyproj.Transformer.from_crs(_pyproj_crs(src), _pyproj_crs(dst), always_xy=True)


def transform_xy(src: Crs, dst: Crs, x: object, y: object) -> tuple[np.ndarray, np.ndarray]:
    """``(x, y)`` (easting or longitude first) from ``src`` to ``dst``, as float64 arrays;
    the very arrays' values when the CRSs are the same; non-finite where a point cannot be
    transformed (never an exception for a point)."""
    xa = np.array(x, dtype=np.float64).reshape(-1)
    ya = np.array(y, dtype=np.float64).reshape(-1)
    if same_crs(src, dst):
        return xa, ya
    src_text = "OGC:CRS84" if src.wgs84 else src.text
    dst_text = "OGC:CRS84" if dst.wgs84 else dst.text
    with np.errstate(invalid="ignore", over="ignore"):
        ox, oy = _transformer(src_text, dst_text).transform(xa, ya, errcheck=False)
    return np.asarray(ox, dtype=np.float64), np.asarray(oy, dtype=np.float64)


def map_crs(declared: str | None, in_file: str | None, path: str, where: str) -> tuple[Crs, bool]:
    """The CRS of the map at ``path`` by the module's rule, and whether it is *assumed*
    (neither ``[domain] crs`` nor the file says): ``declared`` is ``[where] crs``, ``in_file``
    the file's own; refused when both are given and differ."""
    key = f"[{where}] crs"
    if declared is not None:
        crs = parse_crs(declared, key)
        if in_file is not None:
            own = parse_crs(in_file, f"{path}: its own crs")
            if not same_crs(crs, own):
                raise ValueError(
                    f"{path}: the file says its CRS is {in_file!r} but {key} = {declared!r}; "
                    f"one of them is wrong (remove {key} to use the file's)"
                )
        return crs, False
    if in_file is not None:
        return parse_crs(in_file, f"{path}: its own crs ({in_file!r}; or set {key})"), False
    return WGS84, True


_EPSG_URN = re.compile(r"urn:ogc:def:crs:epsg:[0-9.]*:([0-9]+)", re.IGNORECASE)


def geojson_crs(path: str, member: object) -> str | None:
    """The CRS text of a GeoJSON's legacy ``crs`` member (GeoJSON 2008), None if it has none.

    ``{"type": "name", "properties": {"name": "…"}}`` gives the name (an EPSG URN is written
    ``EPSG:<code>``); ``{"type": "EPSG", "properties": {"code": …}}`` (older still) its code;
    a ``link`` member (a CRS at a URL or in a file) and ``"crs": null`` ("no CRS can be
    assumed") are refused: say the CRS with ``[domain] crs``.
    """
    if member is None:
        raise ValueError(
            f"{path}: its crs member is null (the file says no CRS can be assumed); "
            "name it with [domain] crs = 'EPSG:…'"
        )
    kind = member.get("type") if isinstance(member, dict) else None
    props = member.get("properties") if isinstance(member, dict) else None
    if kind == "name" and isinstance(props, dict) and isinstance(props.get("name"), str):
        name = props["name"].strip()
        m = _EPSG_URN.fullmatch(name)
        return f"EPSG:{m.group(1)}" if m and name.lower() not in _WGS84_NAMES else name
    if (
        isinstance(kind, str)
        and kind.upper() == "EPSG"
        and isinstance(props, dict)
        and isinstance(props.get("code"), int)
        and not isinstance(props.get("code"), bool)
    ):
        return f"EPSG:{props['code']}"
    shown = repr(member)
    shown = shown if len(shown) <= 80 else shown[:77] + "..."
    raise ValueError(
        f"{path}: its crs member {shown} is not one dpgauss reads (a named CRS: "
        '{"type": "name", "properties": {"name": "EPSG:…"}}); name the CRS with '
        "[domain] crs = 'EPSG:…'"
    )
