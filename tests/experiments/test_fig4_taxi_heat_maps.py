"""Figure 4 (taxi heat maps): the quick run of every figure, its files and what must hold."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("duckdb")
pytest.importorskip("pyarrow")

from dpgauss.experiments import fig4_taxi_heat_maps as fig4
from dpgauss.experiments import taxi_resample
from dpgauss.experiments.runner import write_csv

from ..helpers import csv_number as number
from ..helpers import read_csv

STEM = "fig4_taxi_heat_maps"


@pytest.fixture(scope="module")
def quick(quick_all):
    """The shared quick run of every figure (conftest): (out dir, report, seconds)."""
    return quick_all


def read_rows(out: Path) -> list[dict[str, str]]:
    return read_csv(out / f"{STEM}.csv")


@pytest.mark.slow
def test_all_figures_run_quickly_and_include_figure_4(quick):
    out, report, seconds = quick
    assert [r.figure.number for r in report.results] == ["1", "2", "3", "4"]
    assert seconds < 120.0  # the whole quick set on 2 workers
    summary = (out / "summary.md").read_text(encoding="utf-8")
    (line,) = [ln for ln in summary.splitlines() if ln.startswith("- **Figure 4:")]
    assert "resampled from a density fitted to the real trips" in line


@pytest.mark.slow
def test_files(quick):
    out, _, _ = quick
    data = json.loads((out / f"{STEM}.json").read_text(encoding="utf-8"))
    assert data["quick"] is True and data["claims"]
    assert f"{STEM}.csv" in data["files"] and f"{STEM}.json" in data["files"]
    rows = read_rows(out)
    assert list(rows[0]) == list(fig4.COLUMNS)  # the heat maps' payload is not in the CSV


@pytest.mark.slow
def test_pngs_mse_panels_and_heat_maps(quick):
    pytest.importorskip("matplotlib")
    out, _, _ = quick
    data = json.loads((out / f"{STEM}.json").read_text(encoding="utf-8"))
    maps = [f"{STEM}_{ds}_{w.name}_{k}.png" for ds, w, k in fig4.QUICK_CONFIGS]
    for name in (f"{STEM}.png", *maps):
        assert name in data["files"]
        assert (out / name).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


@pytest.mark.slow
def test_every_method_and_epsilon_with_finite_mse(quick):
    out, _, _ = quick
    rows = read_rows(out)
    configs = {(r["dataset"], r["window"], r["kind"]) for r in rows}
    assert configs == {(ds, w.name, k) for ds, w, k in fig4.QUICK_CONFIGS}
    for c in configs:
        mine = [r for r in rows if (r["dataset"], r["window"], r["kind"]) == c]
        got = {(float(r["epsilon"]), r["method"]) for r in mine}
        assert got == {(e, m) for e in fig4.QUICK_EPSILONS for m in fig4.METHODS}
        assert len(mine) == len(got)
    for r in rows:
        defined = not (r["method"] == "classical" and float(r["epsilon"]) >= 1)
        assert math.isfinite(number(r["mse"])) == defined
        if defined:
            assert number(r["mse"]) > 0


@pytest.mark.slow
def test_analytic_beats_classical_and_denoisers_beat_raw_at_small_eps(quick):
    out, _, _ = quick
    rows = read_rows(out)
    mse = {(r["dataset"], r["window"], r["epsilon"], r["method"]): number(r["mse"]) for r in rows}
    for ds, w, e, m in mse:
        if m == "classical" and float(e) < 1:
            analytic = mse[(ds, w, e, "analytic")]
            assert analytic < mse[(ds, w, e, m)]
            sig = {
                r["method"]: float(r["noise_sigma"])
                for r in rows
                if (r["dataset"], r["window"], r["epsilon"]) == (ds, w, e)
            }
            # Common random numbers: the MSE ratio is the variance ratio.
            ratio = mse[(ds, w, e, m)] / analytic
            assert ratio == pytest.approx((sig["classical"] / sig["analytic"]) ** 2, rel=1e-9)
        if m == "analytic+auto" and float(e) < 1:
            assert mse[(ds, w, e, m)] < 0.1 * mse[(ds, w, e, "analytic")]


@pytest.mark.slow
def test_true_mass_is_the_number_of_kept_trips_and_drops_are_counted(quick):
    out, _, _ = quick
    for r in read_rows(out):
        assert float(r["true_mass"]) == pytest.approx(int(r["trips_kept"]), abs=1e-6)
        assert float(r["sensitivity"]) == 5.0 and int(r["junctions"]) == 4091
        dropped = sum(
            int(r[k])
            for k in ("outside_window", "invalid_coordinates", "outside_graph", "dropped_by_bound")
        )
        assert dropped + int(r["trips_kept"]) == int(r["rows_read"])
        if (r["dataset"], r["window"], r["kind"]) == ("real", "all", "pickup"):
            assert int(r["rows_read"]) == 10_000
            assert int(r["invalid_coordinates"]) == 232  # the sample's invalid pickups
            assert int(r["dropped_by_bound"]) > 0
        if r["dataset"] == "resampled":
            assert int(r["dropped_by_bound"]) > 0  # the bound of 5 bites for some drivers
            assert float(r["resample_bandwidth_m"]) in taxi_resample.BANDWIDTH_GRID_M


@pytest.mark.slow
def test_resampled_trips_are_reproducible_from_the_seed():
    a = fig4.resampled_trips(fig4.SUN10, 0)
    b = fig4.resampled_trips(fig4.SUN10, 0)
    c = fig4.resampled_trips(fig4.SUN10, 1)
    assert set(a) == set(b) and all(np.array_equal(a[k], b[k]) for k in a)
    assert not np.array_equal(a["pickup_latitude"], c["pickup_latitude"])
    start, stop = np.datetime64(fig4.SUN10.start), np.datetime64(fig4.SUN10.stop)
    inside = int(np.count_nonzero((a["pickup_datetime"] >= start) & (a["pickup_datetime"] < stop)))
    n = taxi_resample.TRIPS_PER_HOUR
    assert abs(inside - n) < 5 * math.sqrt(n)  # the expected count, within binomial noise
    _, per_driver = np.unique(a["hack_license"], return_counts=True)
    assert per_driver.min() >= 1 and per_driver.max() > 5
    assert per_driver.mean() == pytest.approx(1 + taxi_resample.DRIVER_EXTRA_TRIPS, rel=0.05)


def test_true_map_goes_through_the_pipeline_and_is_shared_across_epsilon():
    a = fig4.true_map("real", fig4.SUN10, "pickup", 0)
    assert a is fig4.true_map("real", fig4.SUN10, "pickup", 0)  # cached: computed once
    assert a.rows["outside_filter"] > 0 and a.sensitivity == 5.0
    assert float(np.sum(a.counts)) == pytest.approx(a.rows["kept"])


def test_loo_bandwidth_follows_the_spread_of_the_points():
    rng = np.random.default_rng(0)
    metre = 1.0 / 111_195.0  # degrees of latitude per metre
    tight = rng.standard_normal((300, 2)) * 30 * metre
    wide = rng.standard_normal((300, 2)) * 1000 * metre
    h_tight = taxi_resample.loo_bandwidth(40.75 + tight[:, 0], -73.98 + tight[:, 1] * 1.32)
    h_wide = taxi_resample.loo_bandwidth(40.75 + wide[:, 0], -73.98 + wide[:, 1] * 1.32)
    assert h_tight < h_wide
    with pytest.raises(ValueError, match="at least 2"):
        taxi_resample.loo_bandwidth(np.array([40.7]), np.array([-73.9]))


def test_spec_and_runner_payload(tmp_path):
    with pytest.raises(ValueError, match="kind"):
        fig4.taxi_spec({"bundled": "trips"}, fig4.WHOLE, "transfer")
    spec = fig4.taxi_spec({"bundled": "trips"}, fig4.SUN04, "dropoff")
    assert spec.filter.column == "dropoff_datetime" and spec.bounds.max_records_per_unit == 5
    # Keys starting with "_" are payloads for the plot: not written, not an error.
    write_csv(tmp_path / "x.csv", ("a",), [{"a": 1, "_maps": {"true": np.zeros(2)}}])
    assert (tmp_path / "x.csv").read_text(encoding="utf-8") == "a\n1\n"
    with pytest.raises(ValueError, match="extra keys"):
        write_csv(tmp_path / "y.csv", ("a",), [{"a": 1, "b": 2}])


def test_quick_points_and_heat_map_epsilon():
    pts = fig4.points(True)
    assert len(pts) == len(fig4.QUICK_CONFIGS) * len(fig4.QUICK_EPSILONS)
    assert fig4.heatmap_epsilon(fig4.EPSILONS) == 1.0
    assert fig4.heatmap_epsilon(fig4.QUICK_EPSILONS) == 0.5
    full = fig4.points(False)
    assert len(full) == 10 * len(fig4.EPSILONS)
    assert sum(p.params["maps"] for p in full) == 5  # pickups of every dataset and window
