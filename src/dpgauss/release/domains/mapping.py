"""Map records' coordinates to the nodes of a public graph: nearest node, or a KDE spread.

Both mappings are pure functions of one record's coordinates and public data (the graph,
the bandwidth, the cutoff), so they can run anywhere — inside DuckDB as a vectorised UDF,
inside Spark as a pandas UDF — and never mix records of different units.

Geometry.  Coordinates (degrees, WGS84) are placed on the sphere of radius R = 6,371,008.8 m
(the mean Earth radius) as 3-D points ``R·(cos φ cos λ, cos φ sin λ, sin φ)``, and a k-d tree
(``scipy.spatial.cKDTree``) on the nodes answers the queries by chord length.  The chord
``c`` and the great-circle distance ``s`` are each other's monotone functions,
``c = 2R·sin(s/(2R))``, so the nearest node by chord *is* the nearest node on the sphere, at
any latitude (Helsinki, Santiago, a graph across the antimeridian) and at any extent; the
cutoff is converted to a chord exactly, and the kde kernel uses ``s = 2R·asin(c/(2R))``.
(The sphere differs from the WGS84 ellipsoid by at most 0.5 % in distance; the choice of
nearest node between two nodes at nearly the same distance may differ from an ellipsoidal
answer, never the rule that a record maps to exactly one node.)

* ``nearest``: the nearest node closer than ``cutoff`` metres, else "outside the domain" (−1).
* ``kde``: the record's unit mass is spread over its ``neighbors`` nearest nodes within
  ``cutoff`` metres with Gaussian kernel weights ``exp(−dⱼ²/(2h²))`` (``h`` the bandwidth),
  normalised to sum to 1 (computed relative to the nearest node, so no weight underflows to a
  zero sum).  A record with no node within the cutoff is outside the domain.  Its *primary*
  node (used by per-key bounds) is its nearest node.

Coordinates are *valid* when both are finite, ``lat ∈ [−90, 90]``, ``lon ∈ [−180, 180]`` and,
if a bounding box is given, inside it (closed); invalid coordinates map to nothing.

**Planar** (``planar = metres per unit``: records in a projected CRS, :mod:`.crs`).  ``lat``
is then the northing (y) and ``lon`` the easting (x), both in the CRS's unit; the nodes are
in the same CRS (the public graph transformed once, at plan time), distances are Euclidean
in the plane, in metres (``unit × planar``), and coordinates are valid when both are finite.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np

__all__ = ["EARTH_RADIUS_M", "GraphMapper"]

EARTH_RADIUS_M = 6_371_008.8
_CHUNK = 1 << 18  # points per k-d tree query


def _coords(value: object, name: str) -> np.ndarray:
    try:
        arr = np.asarray(value, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise TypeError(f"{name} must be an array of numbers: {exc}") from None
    if arr.ndim != 1:
        arr = arr.reshape(-1)
    return arr


@dataclass(eq=False)
class GraphMapper:
    """Maps (lat, lon) points to the nodes ``0 … n−1`` of a graph whose nodes are at
    ``node_lat``, ``node_lon`` (module docstring).

    Parameters
    ----------
    node_lat, node_lon : the nodes' coordinates in degrees.
    mapping : ``"nearest"`` or ``"kde"``.
    cutoff : metres > 0; points farther than this from every node are outside the domain.
    bandwidth : metres > 0, the kernel's standard deviation (``kde`` only).
    neighbors : the number of nearest nodes a ``kde`` record is spread over (≥ 1).
    bbox : optional ``(lat_min, lat_max, lon_min, lon_max)``; points outside are invalid.
    planar : metres per unit of a projected CRS (module docstring), or None for degrees.
    """

    node_lat: np.ndarray
    node_lon: np.ndarray
    mapping: str = "nearest"
    cutoff: float = 150.0
    bandwidth: float | None = None
    neighbors: int = 8
    bbox: tuple[float, float, float, float] | None = None
    planar: float | None = None
    _tree: Any = field(init=False, repr=False)
    _chord: float = field(init=False, repr=False)

    def __post_init__(self) -> None:
        self.node_lat = _coords(self.node_lat, "node_lat")
        self.node_lon = _coords(self.node_lon, "node_lon")
        if self.node_lat.shape != self.node_lon.shape or self.node_lat.size == 0:
            raise ValueError("node_lat and node_lon must be non-empty arrays of the same length")
        if not (np.all(np.isfinite(self.node_lat)) and np.all(np.isfinite(self.node_lon))):
            raise ValueError("node coordinates must be finite")
        if self.mapping not in ("nearest", "kde"):
            raise ValueError(f"mapping must be 'nearest' or 'kde'; got {self.mapping!r}")
        if not (isinstance(self.cutoff, int | float) and self.cutoff > 0):
            raise ValueError(f"cutoff must be a positive number of metres; got {self.cutoff!r}")
        if self.mapping == "kde":
            if not (isinstance(self.bandwidth, int | float) and self.bandwidth > 0):
                raise ValueError(
                    f"bandwidth must be a positive number of metres; got {self.bandwidth!r}"
                )
            if isinstance(self.neighbors, bool) or not isinstance(self.neighbors, int):
                raise TypeError(f"neighbors must be an integer; got {self.neighbors!r}")
            if self.neighbors < 1:
                raise ValueError(f"neighbors must be >= 1; got {self.neighbors!r}")
        from scipy.spatial import cKDTree

        if self.planar is not None:
            if not (
                isinstance(self.planar, int | float)
                and math.isfinite(self.planar)
                and self.planar > 0
            ):
                raise ValueError(f"planar must be metres per unit > 0; got {self.planar!r}")
            if self.bbox is not None:
                raise ValueError("bbox (degrees) does not apply to planar coordinates")
            self._chord = float(self.cutoff)
            self._tree = cKDTree(self._project(self.node_lat, self.node_lon))
            return
        # The cutoff as a chord (a cutoff of half the circumference or more admits every node).
        half = min(float(self.cutoff) / (2.0 * EARTH_RADIUS_M), math.pi / 2)
        self._chord = 2.0 * EARTH_RADIUS_M * math.sin(half)
        if half >= math.pi / 2:
            self._chord = math.inf
        self._tree = cKDTree(self._project(self.node_lat, self.node_lon))

    @classmethod
    def from_graph(cls, graph: Any, **kwargs: Any) -> GraphMapper:
        """A mapper for a graph object with ``lat`` and ``lon`` node arrays (a ``RoadGraph``)."""
        return cls(np.asarray(graph.lat), np.asarray(graph.lon), **kwargs)

    @property
    def n(self) -> int:
        """Number of nodes."""
        return int(self.node_lat.size)

    @property
    def degrees(self) -> bool:
        """Whether coordinates are degrees (else planar: :attr:`planar` metres per unit)."""
        return self.planar is None

    def _project(self, lat: np.ndarray, lon: np.ndarray) -> np.ndarray:
        """Points on the sphere of radius R (metres), one row per point; in the plane
        (metres), ``(x, y)``, for planar coordinates."""
        if self.planar is not None:
            f = float(self.planar)
            return np.stack([lon * f, lat * f], axis=-1)
        phi, lam = np.radians(lat), np.radians(lon)
        c = np.cos(phi)
        return EARTH_RADIUS_M * np.stack([c * np.cos(lam), c * np.sin(lam), np.sin(phi)], axis=-1)

    @staticmethod
    def arc(chord: np.ndarray) -> np.ndarray:
        """The great-circle distance (metres) of a chord (metres): ``2R·asin(c/(2R))``."""
        x = np.minimum(np.asarray(chord, dtype=np.float64) / (2.0 * EARTH_RADIUS_M), 1.0)
        with np.errstate(invalid="ignore"):
            return 2.0 * EARTH_RADIUS_M * np.arcsin(x)

    def valid(self, lat: object, lon: object) -> np.ndarray:
        """Which points have valid coordinates (module docstring)."""
        la, lo = _coords(lat, "lat"), _coords(lon, "lon")
        with np.errstate(invalid="ignore", over="ignore"):
            ok = np.isfinite(la) & np.isfinite(lo)
            if self.planar is not None:  # and finite in metres (a huge number × the unit)
                f = float(self.planar)
                return ok & (np.abs(la) * f < math.inf) & (np.abs(lo) * f < math.inf)
            ok &= (la >= -90.0) & (la <= 90.0) & (lo >= -180.0) & (lo <= 180.0)
            if self.bbox is not None:
                a, b, c, d = self.bbox
                ok &= (la >= a) & (la <= b) & (lo >= c) & (lo <= d)
        return ok

    def nearest(self, lat: object, lon: object) -> np.ndarray:
        """The nearest node within the cutoff of each point (int64), −1 if none or invalid."""
        la, lo = _coords(lat, "lat"), _coords(lon, "lon")
        out = np.full(la.shape, -1, dtype=np.int64)
        ok = np.flatnonzero(self.valid(la, lo))
        for start in range(0, ok.size, _CHUNK):  # chunks: the 3-D points stay in cache
            sel = ok[start : start + _CHUNK]
            dist, idx = self._tree.query(
                self._project(la[sel], lo[sel]), k=1, distance_upper_bound=self._chord, workers=-1
            )
            out[sel] = np.where(np.isfinite(dist), idx, -1)
        return out

    def spread(self, lat: object, lon: object) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The KDE spread of each point: ``(offsets, nodes, weights)`` in CSR form.

        Point ``i``'s nodes and weights are ``nodes[offsets[i]:offsets[i+1]]`` and
        ``weights[...]``: non-negative, summing to 1 (up to rounding), nearest node first;
        empty for a point outside the domain or with invalid coordinates.  With
        ``mapping="nearest"`` every point in the domain gets its nearest node with weight 1.
        """
        la, lo = _coords(lat, "lat"), _coords(lon, "lon")
        m = la.size
        if self.mapping == "nearest":
            node = self.nearest(la, lo)
            has = node >= 0
            offsets = np.zeros(m + 1, dtype=np.int64)
            np.cumsum(has, out=offsets[1:])
            return offsets, node[has], np.ones(int(has.sum()))
        k = min(self.neighbors, self.n)
        dist = np.full((m, k), np.inf)
        idx = np.full((m, k), self.n, dtype=np.int64)
        ok = self.valid(la, lo)
        if ok.any():
            d, i = self._tree.query(
                self._project(la[ok], lo[ok]), k=k, distance_upper_bound=self._chord, workers=-1
            )
            dist[ok] = np.reshape(d, (-1, k))
            idx[ok] = np.reshape(i, (-1, k))
        has = np.isfinite(dist)
        if self.planar is None:  # chords to great-circle metres (planar: already metres)
            dist = np.where(has, self.arc(np.where(has, dist, 0.0)), np.inf)
        h2 = 2.0 * float(self.bandwidth) ** 2  # type: ignore[arg-type]
        d0 = np.where(has[:, :1], dist[:, :1], 0.0)  # the nearest node's distance
        with np.errstate(invalid="ignore"):
            w = np.where(has, np.exp(-(np.square(dist) - np.square(d0)) / h2), 0.0)
        total = w.sum(axis=1, keepdims=True)
        w = np.divide(w, total, out=np.zeros_like(w), where=total > 0)
        counts = has.sum(axis=1)
        offsets = np.zeros(m + 1, dtype=np.int64)
        np.cumsum(counts, out=offsets[1:])
        return offsets, idx[has], w[has]
