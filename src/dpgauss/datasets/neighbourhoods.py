"""The 260 NYC neighbourhoods of data-polygamy as a GeoJSON FeatureCollection.

``nyc_neighbourhoods.geojson`` (in ``dpgauss/datasets/data``, BSD-3-clause, see
``LICENSE.data-polygamy.txt``) was written by :func:`convert_data_polygamy` from
``datapolygamy_neighborhood.txt`` of VIDA-NYU/data-polygamy @ 4b3f7c0 (``data/``): one feature
per region, ``properties = {"id": <region id>}``, a ``Polygon`` in WGS84 ``[lon, lat]``
(data-polygamy's blocks: ``<region id>``, ``<number of polygons>``, then per polygon
``<number of points>`` and that many ``lon lat`` lines; every region here is one polygon).

One region is repaired: region 105's ring crosses itself (at about −73.99877, 40.67160), a
polygon GeoJSON readers reject, so :func:`convert_data_polygamy` replaces every invalid
polygon by the polygonal part of ``shapely.make_valid`` of it (for 105, one polygon).  The
region ids are 0 … 259 in file order.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from .._optional import require

__all__ = ["NEIGHBOURHOODS", "convert_data_polygamy", "nyc_neighbourhoods_path"]

NEIGHBOURHOODS = "nyc_neighbourhoods.geojson"


def nyc_neighbourhoods_path() -> Path:
    """The path of the bundled GeoJSON file (260 features, id property ``"id"``)."""
    return Path(__file__).with_name("data") / NEIGHBOURHOODS


def _rounded(coords: Any) -> Any:
    if isinstance(coords, (list, tuple)) and coords and isinstance(coords[0], float | int):
        return [round(float(c), 10) for c in coords]
    return [_rounded(c) for c in coords]


def convert_data_polygamy(text: str) -> dict[str, Any]:
    """The FeatureCollection of a data-polygamy neighbourhood file's text (module doc).

    Needs shapely (the ``regions`` extra) for the repair of invalid polygons.
    """
    require("shapely", "regions", "repairing a data-polygamy neighbourhood file")
    import shapely
    from shapely.geometry import MultiPolygon, Polygon, mapping

    lines = [ln.strip() for ln in text.splitlines()]
    i, features = 0, []
    while i < len(lines) and lines[i]:
        rid, count = int(lines[i]), int(lines[i + 1])
        i += 2
        polys = []
        for _ in range(count):
            k = int(lines[i])
            pts = [tuple(float(v) for v in lines[i + 1 + j].split()) for j in range(k)]
            polys.append(Polygon(pts))
            i += 1 + k
        geom = polys[0] if len(polys) == 1 else MultiPolygon(polys)
        if not shapely.is_valid(geom):
            fixed = shapely.make_valid(geom)
            parts = [g for g in getattr(fixed, "geoms", [fixed]) if g.geom_type == "Polygon"]
            parts += [
                p
                for g in getattr(fixed, "geoms", [])
                if g.geom_type == "MultiPolygon"
                for p in g.geoms
            ]
            geom = parts[0] if len(parts) == 1 else MultiPolygon(parts)
        shape = mapping(geom)
        features.append(
            {
                "type": "Feature",
                "properties": {"id": rid},
                "geometry": {"type": shape["type"], "coordinates": _rounded(shape["coordinates"])},
            }
        )
    return {"type": "FeatureCollection", "features": features}


if __name__ == "__main__":  # regenerate: python -m dpgauss.datasets.neighbourhoods SOURCE
    import sys

    data = convert_data_polygamy(Path(sys.argv[1]).read_text())
    nyc_neighbourhoods_path().write_text(json.dumps(data, separators=(",", ":")) + "\n")
    print(f"wrote {nyc_neighbourhoods_path()} ({len(data['features'])} regions)")
