"""The 10,000-trip sample: parsing, the counts of data/README.md, validity flags."""

from __future__ import annotations

import csv
from importlib import resources

import numpy as np
import pytest

from dpgauss.datasets import Trips, load_trips
from dpgauss.datasets.trips import NYC_LAT, NYC_LON, valid_coordinates


@pytest.fixture(scope="module")
def rows():
    path = resources.files("dpgauss.datasets").joinpath("data", "taxivis_sample_trip_data_1.csv")
    with path.open(newline="") as fh:
        return list(csv.DictReader(fh))


def test_counts_match_readme():
    t = load_trips()
    assert isinstance(t, Trips) and len(t) == 10_000
    assert len(np.unique(t.medallion)) == 4361
    assert len(np.unique(t.hack_license)) == 5451
    assert np.unique(t.medallion, return_counts=True)[1].max() == 10
    assert str(t.pickup_time.min()) == "2013-01-01T02:28:00"
    assert str(t.pickup_time.max()) == "2013-01-18T23:59:49"
    assert np.all(t.dropoff_time >= t.pickup_time)


def test_invalid_coordinates_are_flagged():
    t = load_trips()
    assert np.count_nonzero(~t.pickup_valid) == 232  # data/README.md
    assert np.count_nonzero(~t.dropoff_valid) == 251
    assert np.count_nonzero(~t.valid) == 256
    zero = (t.pickup_lat == 0) | (t.pickup_lon == 0)
    assert np.count_nonzero(zero) == 229 and not np.any(t.pickup_valid & zero)
    assert np.count_nonzero((t.pickup_lat == 0) & (t.pickup_lon == 0)) == 228
    ok = t.valid
    for lat, lon in ((t.pickup_lat, t.pickup_lon), (t.dropoff_lat, t.dropoff_lon)):
        assert np.all((lat[ok] >= NYC_LAT[0]) & (lat[ok] <= NYC_LAT[1]))
        assert np.all((lon[ok] >= NYC_LON[0]) & (lon[ok] <= NYC_LON[1]))
    # the garbage ones named in the docstring
    assert not t.pickup_valid[np.flatnonzero(t.pickup_lat > 400)].any()
    assert np.count_nonzero(t.pickup_lat > 400) == 1
    assert np.array_equal(
        valid_coordinates([40.7, 0.0, np.nan, 404.6], [-74.0, 0.0, -74.0, -74.0]),
        [True, False, False, False],
    )


def test_rows_parse_exactly(rows):
    t = load_trips()
    assert len(rows) == len(t)
    for i in (0, 1, 4292, 9999):
        r = rows[i]
        assert t.medallion[i] == r["medallion"]
        assert t.hack_license[i] == r["hack_license"]
        assert t.vendor_id[i] == r["vendor_id"]
        assert t.rate_code[i] == int(r["rate_code"])
        assert t.store_and_fwd_flag[i] == r["store_and_fwd_flag"]
        assert str(t.pickup_time[i]) == r["pickup_datetime"].replace(" ", "T")
        assert str(t.dropoff_time[i]) == r["dropoff_datetime"].replace(" ", "T")
        assert t.passenger_count[i] == int(r["passenger_count"])
        assert t.trip_time[i] == int(r["trip_time_in_secs"])
        assert t.trip_distance[i] == float(r["trip_distance"])
        assert t.pickup_lat[i] == float(r["pickup_latitude"])
        assert t.pickup_lon[i] == float(r["pickup_longitude"])
        assert t.dropoff_lat[i] == float(r["dropoff_latitude"])
        assert t.dropoff_lon[i] == float(r["dropoff_longitude"])
    assert t.pickup_time.dtype == np.dtype("datetime64[s]")
    assert t.pickup_lat.dtype == np.float64


def test_cached_and_read_only():
    t = load_trips()
    assert load_trips() is t
    with pytest.raises(ValueError):
        t.pickup_lat[0] = 1.0
    with pytest.raises(ValueError):
        t.pickup_valid[0] = False
