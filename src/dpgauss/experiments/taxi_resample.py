"""Realistic-scale taxi trips resampled from a density fitted to the real trips of one window.

The bundled sample (:func:`dpgauss.datasets.load_trips`) holds the first 10,000 records of
the TLC's January 2013 trip file: 9,795 of them are pickups on Sunday 13 January 2013
between 00:00 and 12:00 (the rest are scattered over 1–18 January), so one hour of it has
at most about 2,100 trips — roughly a tenth of a real hour of New York's yellow cabs.  The
taxi experiment therefore also runs on a *resampled* version of an hour at the city's real
scale, drawn from a density fitted to the real trips of that hour:

* **Density.**  A kernel density estimate over (pickup point, dropoff point) of the real
  trips that touch the window (pickup or dropoff inside it): a real trip is drawn uniformly,
  its pickup and dropoff are moved by independent isotropic Gaussian offsets of standard
  deviation ``h_pickup`` and ``h_dropoff`` metres, and its pickup and dropoff times are
  kept.  Each bandwidth maximises the leave-one-out log-likelihood, over
  :data:`BANDWIDTH_GRID_M`, of the real points (pickups, resp. dropoffs) that lie in the
  release's domain — within :data:`FIT_CUTOFF_M` of a junction of the road graph — since
  that is the density the release measures (the few points in other boroughs and at the
  airports, kilometres from their neighbours, would otherwise push the fit to the largest
  bandwidth); the fitted bandwidths are reported with the results.  Coordinates that are invalid in
  the real record (228 pickups at (0, 0) in the sample) are copied unchanged, so the
  resampled data has invalid rows at the real rate and the release pipeline drops and
  counts them as on the real data.
* **Scale.**  The number of trips is chosen so that the window holds
  :data:`TRIPS_PER_HOUR` pickups in expectation: the TLC's January 2013 trip file has
  14,776,615 trips over 31 × 24 = 744 hours, 19,861 per hour on average.
* **Drivers.**  The sample's drivers cannot be reused (a tenth of the records, so a tenth of
  each driver's trips).  Synthetic drivers are made instead: each has ``1 + Poisson(1.5)``
  trips (mean 2.5, about what a cab carries in an hour of service: 14.8 million January
  trips over about 13,000 cabs and 744 hours is 1.5 trips per cab-hour, more in the hours a
  cab is actually working), and the trips are dealt to them at random.  With this law 1.9 %
  of the drivers have more than 5 trips, so the release's bound of 5 trips per driver bites
  for a few of them, as it would on the real data.

Everything is drawn from the ``numpy.random.Generator`` passed in: the same seed gives the
same trips, byte for byte.  This is an experiment's synthetic data, not a release.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from scipy.spatial import cKDTree
from scipy.spatial.distance import cdist
from scipy.special import logsumexp

from .._optional import require
from ..datasets import Trips
from ..datasets.trips import valid_coordinates
from ..release.domains.mapping import EARTH_RADIUS_M

__all__ = [
    "BANDWIDTH_GRID_M",
    "DRIVER_EXTRA_TRIPS",
    "FIT_CUTOFF_M",
    "TLC_JANUARY_2013_TRIPS",
    "TRIPS_PER_HOUR",
    "TripDensity",
    "fit_trip_density",
    "loo_bandwidth",
    "resample_trips",
    "write_parquet",
]

#: Trips in the TLC's January 2013 yellow-cab trip file (``trip_data_1.csv``).
TLC_JANUARY_2013_TRIPS = 14_776_615
#: Average trips per hour in January 2013: 14,776,615 / 744 hours.
TRIPS_PER_HOUR = round(TLC_JANUARY_2013_TRIPS / (31 * 24))
#: Mean of the Poisson number of trips a synthetic driver has beyond the first.
DRIVER_EXTRA_TRIPS = 1.5
#: Candidate kernel bandwidths (metres) for the leave-one-out fit.
BANDWIDTH_GRID_M = (25.0, 50.0, 75.0, 100.0, 150.0, 200.0, 300.0, 500.0)
#: Real points farther than this (metres) from every junction are left out of the fit.
FIT_CUTOFF_M = 150.0

_COLUMNS = (
    "hack_license",
    "pickup_datetime",
    "dropoff_datetime",
    "pickup_latitude",
    "pickup_longitude",
    "dropoff_latitude",
    "dropoff_longitude",
)


@dataclass(frozen=True, eq=False)
class TripDensity:
    """A kernel density fitted to the real trips touching a time window.

    ``trips`` holds the real trips whose pickup or dropoff time is in ``[start, stop)``
    (arrays keyed like the output columns); ``pickup_bandwidth_m`` and
    ``dropoff_bandwidth_m`` are the Gaussian kernels' standard deviations in metres;
    ``real_pickups`` is the number of real pickups inside the window.
    """

    start: np.datetime64
    stop: np.datetime64
    trips: dict[str, np.ndarray]
    pickup_bandwidth_m: float
    dropoff_bandwidth_m: float
    real_pickups: int

    @property
    def n_trips(self) -> int:
        """Number of real trips the density is fitted to."""
        return int(self.trips["pickup_datetime"].shape[0])


def _metres(lat: np.ndarray, lon: np.ndarray, lat0: float) -> np.ndarray:
    """Equirectangular projection about ``lat0`` (degrees), as the graph mapping does."""
    scale = EARTH_RADIUS_M * math.cos(math.radians(lat0))
    return np.stack([scale * np.radians(lon), EARTH_RADIUS_M * np.radians(lat)], axis=1)


def loo_bandwidth(
    lat: np.ndarray, lon: np.ndarray, grid: tuple[float, ...] = BANDWIDTH_GRID_M
) -> float:
    """The bandwidth (metres) of ``grid`` maximising the leave-one-out log-likelihood.

    For an isotropic 2-D Gaussian kernel of standard deviation h the leave-one-out
    log-likelihood of points ``x₁ … x_n`` is
    ``Σᵢ log( (1/(n−1)) Σ_{j≠i} exp(−‖xᵢ − xⱼ‖²/(2h²)) / (2πh²) )``.
    Needs at least two points; coordinates in degrees.
    """
    lat = np.asarray(lat, dtype=np.float64)
    lon = np.asarray(lon, dtype=np.float64)
    n = lat.size
    if n < 2:
        raise ValueError(f"the bandwidth fit needs at least 2 points; got {n}")
    xy = _metres(lat, lon, float(np.mean(lat)))
    h = np.asarray(grid, dtype=np.float64)
    score = np.zeros(h.size)
    chunk = max(1, 4_000_000 // n)
    for lo in range(0, n, chunk):
        d2 = cdist(xy[lo : lo + chunk], xy, "sqeuclidean")
        d2[np.arange(d2.shape[0]), lo + np.arange(d2.shape[0])] = np.inf
        for k, hk in enumerate(h):
            score[k] += float(np.sum(logsumexp(-d2 / (2.0 * hk * hk), axis=1)))
    score -= n * np.log((n - 1) * 2.0 * math.pi * h * h)
    return float(h[int(np.argmax(score))])


def fit_trip_density(
    trips: Trips, start: str, stop: str, node_lat: np.ndarray, node_lon: np.ndarray
) -> TripDensity:
    """Fit the density of the module docstring to the real trips touching ``[start, stop)``.

    ``start`` and ``stop`` are ISO timestamps (local New York time, as in the data);
    ``node_lat``, ``node_lon`` are the junctions of the release's road graph (degrees).
    """
    t0, t1 = np.datetime64(start, "s"), np.datetime64(stop, "s")
    if not t1 > t0:
        raise ValueError(f"stop must be after start; got {start!r}, {stop!r}")
    pick_in = (trips.pickup_time >= t0) & (trips.pickup_time < t1)
    drop_in = (trips.dropoff_time >= t0) & (trips.dropoff_time < t1)
    touch = pick_in | drop_in
    real_pickups = int(np.count_nonzero(pick_in))
    if real_pickups < 2:
        raise ValueError(f"the window [{start}, {stop}) has {real_pickups} real pickups; need 2")
    sel = {
        "pickup_datetime": trips.pickup_time[touch],
        "dropoff_datetime": trips.dropoff_time[touch],
        "pickup_latitude": trips.pickup_lat[touch],
        "pickup_longitude": trips.pickup_lon[touch],
        "dropoff_latitude": trips.dropoff_lat[touch],
        "dropoff_longitude": trips.dropoff_lon[touch],
    }
    node_lat = np.asarray(node_lat, dtype=np.float64)
    lat0 = float(np.mean(node_lat))
    tree = cKDTree(_metres(node_lat, np.asarray(node_lon, dtype=np.float64), lat0))
    bandwidths = []
    for end in ("pickup", "dropoff"):
        lat, lon = sel[f"{end}_latitude"], sel[f"{end}_longitude"]
        ok = valid_coordinates(lat, lon)
        dist, _ = tree.query(_metres(lat[ok], lon[ok], lat0), distance_upper_bound=FIT_CUTOFF_M)
        near = np.isfinite(dist)
        bandwidths.append(loo_bandwidth(lat[ok][near], lon[ok][near]))
    return TripDensity(t0, t1, sel, bandwidths[0], bandwidths[1], real_pickups)


def resample_trips(
    density: TripDensity, rng: np.random.Generator, pickups: int = TRIPS_PER_HOUR
) -> dict[str, np.ndarray]:
    """Draw trips from ``density`` so the window holds ``pickups`` pickups in expectation.

    Returns the columns ``hack_license`` (synthetic drivers, module docstring),
    ``pickup_datetime``, ``dropoff_datetime`` (``datetime64[s]``) and the four coordinate
    columns (degrees), one entry per trip.
    """
    if isinstance(pickups, bool) or not isinstance(pickups, int | np.integer) or pickups < 1:
        raise ValueError(f"pickups must be an integer >= 1; got {pickups!r}")
    n = round(int(pickups) * density.n_trips / density.real_pickups)
    src = rng.integers(0, density.n_trips, size=n)
    out: dict[str, np.ndarray] = {}
    for end, h in (
        ("pickup", density.pickup_bandwidth_m),
        ("dropoff", density.dropoff_bandwidth_m),
    ):
        lat = density.trips[f"{end}_latitude"][src].copy()
        lon = density.trips[f"{end}_longitude"][src].copy()
        ok = valid_coordinates(lat, lon)
        step = rng.standard_normal((n, 2)) * h
        lat0 = math.radians(float(np.mean(lat[ok]))) if ok.any() else 0.0
        lat[ok] += np.degrees(step[ok, 1] / EARTH_RADIUS_M)
        lon[ok] += np.degrees(step[ok, 0] / (EARTH_RADIUS_M * math.cos(lat0)))
        out[f"{end}_latitude"], out[f"{end}_longitude"] = lat, lon
    out["pickup_datetime"] = density.trips["pickup_datetime"][src]
    out["dropoff_datetime"] = density.trips["dropoff_datetime"][src]
    per_driver: list[np.ndarray] = []
    total = 0
    while total < n:
        more = 1 + rng.poisson(DRIVER_EXTRA_TRIPS, size=max(16, (n - total) // 2))
        per_driver.append(more)
        total += int(more.sum())
    counts = np.concatenate(per_driver)
    ends = np.cumsum(counts)
    counts = counts[: int(np.searchsorted(ends, n)) + 1]
    driver = np.repeat(np.arange(counts.size), counts)[:n]
    driver = driver[rng.permutation(n)]
    out["hack_license"] = np.char.add("driver-", driver.astype(str))
    return {k: out[k] for k in _COLUMNS}


def write_parquet(columns: dict[str, np.ndarray], path: str | Path) -> Path:
    """Write resampled trip columns to a Parquet file (needs ``pyarrow``, the ``data`` extra)."""
    require("pyarrow.parquet", "data", "writing resampled trips to Parquet")
    import pyarrow as pa
    import pyarrow.parquet as pq

    table = pa.table({k: pa.array(v) for k, v in columns.items()})
    out = Path(path)
    pq.write_table(table, out)
    return out
