"""10,000 real NYC yellow-cab trips of January 2013 (TaxiVis sample of the TLC records).

The file ``taxivis_sample_trip_data_1.csv`` (shipped in ``dpgauss/datasets/data``;
provenance and licence in ``data/README.md``) has a header and 10,000 rows of
``medallion, hack_license, vendor_id, rate_code, store_and_fwd_flag, pickup_datetime,
dropoff_datetime, passenger_count, trip_time_in_secs, trip_distance, pickup_longitude,
pickup_latitude, dropoff_longitude, dropoff_latitude``.  ``medallion`` (the cab) and
``hack_license`` (the driver) are hashed ids: 4,361 cabs and 5,451 drivers.  Pickups run
from 2013-01-01 to 2013-01-18, but the sample is not spread over those days: 9,795 of the
10,000 pickups fall on Sunday 2013-01-13, 9,734 of them between 00:00 and 12:00 (all
from vendor VTS); only 205 fall on other days.  One hour of that morning holds roughly a
tenth of the hour's real yellow-cab traffic (about 14.8 million trips in January 2013,
20,000 an hour).  For privacy, the *driver* (or the cab) is the natural unit whose
contribution must be bounded before a release.

Real data has bad coordinates.  A point is **valid** when both coordinates are finite and
inside the box ``lat ∈ [40.40, 41.00]``, ``lon ∈ [−74.30, −73.60]`` (the five boroughs with
a few km of margin; Newark and JFK airports are inside).  Pickups: 232 are invalid — 228 at
``(0, 0)``, one with longitude 0, two garbage values (longitude −0.21; latitude 404.56) and
one on Long Island (−73.43, 40.71) whose trip goes nowhere (same dropoff, 0.31 miles in
60 s).  Dropoffs: 251 are invalid; 256 rows have an invalid pickup or dropoff.  Nothing is
dropped: the flags ``pickup_valid``, ``dropoff_valid`` and ``valid`` say which rows to use.
"""

from __future__ import annotations

import csv
import io
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources

import numpy as np

__all__ = ["NYC_LAT", "NYC_LON", "Trips", "load_trips", "valid_coordinates"]

_TRIPS_FILE = "taxivis_sample_trip_data_1.csv"

NYC_LAT = (40.40, 41.00)
"""Closed latitude range of a valid point (degrees)."""
NYC_LON = (-74.30, -73.60)
"""Closed longitude range of a valid point (degrees)."""

_COLUMNS = (
    "medallion",
    "hack_license",
    "vendor_id",
    "rate_code",
    "store_and_fwd_flag",
    "pickup_datetime",
    "dropoff_datetime",
    "passenger_count",
    "trip_time_in_secs",
    "trip_distance",
    "pickup_longitude",
    "pickup_latitude",
    "dropoff_longitude",
    "dropoff_latitude",
)


@dataclass(frozen=True, eq=False)
class Trips:
    """Taxi trips as parallel read-only arrays, one entry per trip (file order).

    Times are ``datetime64[s]`` (local New York time, as in the file); coordinates are
    degrees; ``trip_distance`` is in miles, ``trip_time`` in seconds.  ``store_and_fwd_flag``
    is ``""`` where the file leaves it empty.
    """

    medallion: np.ndarray
    hack_license: np.ndarray
    vendor_id: np.ndarray
    rate_code: np.ndarray
    store_and_fwd_flag: np.ndarray
    pickup_time: np.ndarray
    dropoff_time: np.ndarray
    passenger_count: np.ndarray
    trip_time: np.ndarray
    trip_distance: np.ndarray
    pickup_lat: np.ndarray
    pickup_lon: np.ndarray
    dropoff_lat: np.ndarray
    dropoff_lon: np.ndarray
    pickup_valid: np.ndarray
    dropoff_valid: np.ndarray

    def __len__(self) -> int:
        return int(self.medallion.shape[0])

    @property
    def valid(self) -> np.ndarray:
        """Rows whose pickup and dropoff are both valid (9,744 of 10,000)."""
        return self.pickup_valid & self.dropoff_valid


def valid_coordinates(lat: np.ndarray, lon: np.ndarray) -> np.ndarray:
    """Whether each point is finite and inside the box :data:`NYC_LAT` × :data:`NYC_LON`."""
    lat = np.asarray(lat, dtype=np.float64)
    lon = np.asarray(lon, dtype=np.float64)
    (la0, la1), (lo0, lo1) = NYC_LAT, NYC_LON
    with np.errstate(invalid="ignore"):
        return (lat >= la0) & (lat <= la1) & (lon >= lo0) & (lon <= lo1)


def load_trips() -> Trips:
    """Load the 10,000 trips (cached; see the module docstring for the validity flags)."""
    return _load()


@lru_cache(maxsize=1)
def _load() -> Trips:
    text = resources.files("dpgauss.datasets").joinpath("data", _TRIPS_FILE).read_text("ascii")
    reader = csv.reader(io.StringIO(text))
    header = tuple(h.strip() for h in next(reader))
    if header != _COLUMNS:
        raise ValueError(f"{_TRIPS_FILE}: unexpected header {header}")
    rows = [row for row in reader if row]
    bad = next((i for i, r in enumerate(rows) if len(r) != len(_COLUMNS)), None)
    if bad is not None:
        raise ValueError(
            f"{_TRIPS_FILE}: row {bad + 2} has {len(rows[bad])} fields, not {len(_COLUMNS)}"
        )
    cols = (
        [[s.strip() for s in col] for col in zip(*rows, strict=True)]
        if rows
        else [[] for _ in _COLUMNS]
    )
    c = dict(zip(_COLUMNS, cols, strict=True))

    def real(name: str) -> np.ndarray:
        return np.array([float(s) if s else np.nan for s in c[name]], dtype=np.float64)

    pickup_lat, pickup_lon = real("pickup_latitude"), real("pickup_longitude")
    dropoff_lat, dropoff_lon = real("dropoff_latitude"), real("dropoff_longitude")
    trips = Trips(
        medallion=np.array(c["medallion"], dtype=str),
        hack_license=np.array(c["hack_license"], dtype=str),
        vendor_id=np.array(c["vendor_id"], dtype=str),
        rate_code=np.array(c["rate_code"], dtype=np.int64),
        store_and_fwd_flag=np.array(c["store_and_fwd_flag"], dtype=str),
        pickup_time=np.array(c["pickup_datetime"], dtype="datetime64[s]"),
        dropoff_time=np.array(c["dropoff_datetime"], dtype="datetime64[s]"),
        passenger_count=np.array(c["passenger_count"], dtype=np.int64),
        trip_time=np.array(c["trip_time_in_secs"], dtype=np.int64),
        trip_distance=real("trip_distance"),
        pickup_lat=pickup_lat,
        pickup_lon=pickup_lon,
        dropoff_lat=dropoff_lat,
        dropoff_lon=dropoff_lon,
        pickup_valid=valid_coordinates(pickup_lat, pickup_lon),
        dropoff_valid=valid_coordinates(dropoff_lat, dropoff_lon),
    )
    for value in vars(trips).values():
        value.setflags(write=False)
    return trips
