"""dpgauss.plotting: the heat maps and the experiments' figure helpers, one module; one error
without matplotlib (``PlotUnavailableError``, also named ``MatplotlibMissingError``)."""

from __future__ import annotations

import itertools
import sys

import numpy as np
import pytest

from dpgauss import _optional, errors, heatmap, plotting

HAVE_MPL = plotting.have_matplotlib()
needs_mpl = pytest.mark.skipif(not HAVE_MPL, reason="matplotlib is not installed")


def test_one_error_for_a_missing_matplotlib():
    assert errors.MatplotlibMissingError is errors.PlotUnavailableError
    assert plotting.PlotUnavailableError is errors.PlotUnavailableError
    assert issubclass(errors.PlotUnavailableError, ImportError)


def test_the_heatmap_shim_re_exports_the_plotting_names():
    for name in heatmap.__all__:
        assert getattr(heatmap, name) is getattr(plotting, name), name
    assert set(heatmap.__all__) <= set(plotting.__all__)


@pytest.mark.parametrize(
    "draw",
    [
        lambda p: plotting.draw_series(p, np.arange(3), [("y", np.ones(3))]),
        lambda p: plotting.draw_graph_panels(
            p, np.zeros(2), np.arange(2.0), np.array([[0, 1]]), [("y", np.ones(2))]
        ),
        lambda p: plotting.new_figure(2),
        lambda p: plotting.require_matplotlib(),
    ],
)
def test_without_matplotlib_every_drawing_says_how_to_install_it(monkeypatch, tmp_path, draw):
    monkeypatch.setattr(_optional, "_checkout", lambda: None)
    for name in [m for m in sys.modules if m.split(".")[0] == "matplotlib"]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.setitem(sys.modules, "matplotlib", None)
    assert not plotting.have_matplotlib()
    with pytest.raises(errors.PlotUnavailableError, match=r"pip install 'dpgauss\[plot\]'"):
        draw(tmp_path / "x.png")
    assert not (tmp_path / "x.png").exists()


@needs_mpl
def test_a_series_and_a_graph_are_drawn(tmp_path):
    keys = np.arange(10)
    y = np.sin(keys)
    out = plotting.draw_series(
        tmp_path / "s.png", keys, [("y", y)], lower=y - 1, upper=y + 1, title="series"
    )
    assert out.stat().st_size > 1000
    lat, lon = np.array([40.70, 40.71, 40.72]), np.array([-74.0, -74.01, -74.0])
    edges = np.array([[0, 1], [1, 2]])
    panels = [("true", np.array([1.0, 2.0, 3.0])), ("noisy", np.array([1.5, 1.0, 4.0]))]
    out = plotting.draw_graph_panels(tmp_path / "g.png", lat, lon, edges, panels)
    assert out.stat().st_size > 1000
    assert plotting.shared_scale(panels) > 0


@needs_mpl
def test_the_figure_helpers_draw_method_curves(tmp_path):
    fig, axes = plotting.new_figure(2)
    assert len(axes) == 2
    rows = [
        {"method": m, "d": d, "mse": 1.0 / d, "mse_se": 0.01}
        for m in ("laplace", "analytic")
        for d in (1, 10, 100)
    ]
    plotting.method_curves(axes[0], rows, "d")
    assert len(axes[0].get_lines()) == 2
    plotting.save(fig, tmp_path / "f.png")
    assert (tmp_path / "f.png").stat().st_size > 1000


def test_graph_inputs_are_checked():
    with pytest.raises(ValueError, match="edges must index nodes"):
        plotting.draw_graph_panels("x.png", np.zeros(2), np.zeros(2), np.array([[0, 2]]), [])


# Maps that show their uncertainty (issue #26, item 5).


def _chain(n: int) -> plotting.GraphGeometry:
    lat = 40.70 + 0.001 * np.arange(n)
    lon = -74.0 + 0.0005 * np.sin(np.arange(n))
    return plotting.GraphGeometry(lat, lon, np.stack([np.arange(n - 1), np.arange(1, n)], axis=1))


def _drawn(fig) -> None:
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    FigureCanvasAgg(fig).draw()


def test_the_robust_scale_is_the_2nd_and_98th_percentile():
    v = np.random.default_rng(0).standard_t(2, size=5000) * 10
    scale = plotting.robust_scale(v)
    lo, hi = np.percentile(v, [2, 98])
    assert (scale.vmin, scale.vmax) == (lo, hi) and not scale.constant
    assert v.min() < lo and v.max() > hi  # heavy tails: the outliers do not set the scale


def test_a_map_of_mostly_zeros_scales_to_its_min_and_max():
    v = np.zeros(1000)
    v[:5] = [3.0, 7.0, 9.0, 12.0, 40.0]  # 0.5 % hot spots: the 98th percentile is 0
    scale = plotting.robust_scale(v)
    assert (scale.vmin, scale.vmax) == (0.0, 40.0) and not scale.constant


@pytest.mark.parametrize("value", [0.0, 39.3, -1e6])
def test_a_constant_map_gets_a_sane_scale_and_says_constant(value):
    v = np.full(100, value)
    v[0] += 1e-12 * max(1.0, abs(value))  # a fused fit's last-bit differences
    scale = plotting.robust_scale(v)
    h = max(0.5, 0.05 * abs(value))
    assert scale.constant and scale.value == pytest.approx(value)
    assert (scale.vmin, scale.vmax) == pytest.approx((value - h, value + h))
    assert scale.vmax - scale.vmin >= 1.0  # never the collapsed [0, 1e-12]


def test_a_map_flat_within_its_error_bars_is_drawn_on_their_scale():
    """Shrunk noise (James–Stein toward 0 at shrinkage 0.002 of noise of σ = 21) spans
    ±0.1 while its intervals are ±33: on its own percentile scale it would read as hot
    spots (issue #26).  With the intervals' median half-width as ``resolution`` it is *flat
    within its error bars* (its span below ``FLAT · resolution``): drawn on ``median ±
    resolution``; a map that varies more keeps its percentile scale."""
    rng = np.random.default_rng(3)
    shrunk = 0.002 * 21.0 * rng.standard_normal(4000)
    scale = plotting.robust_scale(shrunk, resolution=33.0)
    assert scale.flat and not scale.constant and scale.span == pytest.approx(np.ptp(shrunk))
    c = float(np.median(shrunk))
    assert (scale.vmin, scale.vmax) == pytest.approx((c - 33.0, c + 33.0))
    assert not plotting.robust_scale(shrunk).flat  # no resolution: the percentile scale
    wide = np.linspace(0.0, 100.0, 500)
    assert not plotting.robust_scale(wide, resolution=33.0).flat
    # real structure under wide bias-aware intervals: the taxi map at ε = 1 (trend
    # filtering, values 0–12.2, intervals ±16.8) keeps its percentile scale
    taxi_like = np.concatenate([np.zeros(900), np.linspace(0.0, 12.2, 100)])
    assert not plotting.robust_scale(taxi_like, resolution=16.8).flat
    assert plotting.robust_scale(np.zeros(10), resolution=33.0).constant  # constant first


@needs_mpl
@pytest.mark.parametrize("kind", ["graph", "grid"])
def test_a_flat_panel_says_so_in_its_title(kind):
    rng = np.random.default_rng(4)
    n = 60
    geo = _chain(n) if kind == "graph" else plotting.GridGeometry(np.arange(10.0), np.arange(6.0))
    v = 0.05 * rng.standard_normal(n)
    fig = plotting.map_figure(geo, [plotting.MapPanel("denoised", v, resolution=2.0)])
    ax = fig.axes[0]
    clim = ax.collections[0].get_clim() if kind == "graph" else ax.images[0].get_clim()
    c = float(np.median(v))
    assert clim == pytest.approx((c - 2.0, c + 2.0))
    title = ax.get_title()
    assert f"flat within its error bars:\nvalues span {np.ptp(v):.3g}, intervals ±2" in title


@needs_mpl
def test_every_graph_panel_has_its_own_percentile_scale_and_the_pm_panel_too():
    rng = np.random.default_rng(1)
    geo = _chain(300)
    truth = np.linspace(0.0, 5.0, 300)
    released = truth + 20.0 * rng.standard_normal(300)
    half = 8.0 + rng.random(300)
    fig = plotting.map_figure(
        geo,
        [
            ("released", released),
            ("denoised", truth),
            plotting.MapPanel("±", half, cmap="viridis"),
        ],
    )
    for ax, v in zip(fig.axes[:3], (released, truth, half), strict=True):
        on_edges = 0.5 * (v[geo.edges[:, 0]] + v[geo.edges[:, 1]])
        assert ax.collections[0].get_clim() == tuple(np.percentile(on_edges, [2, 98]))
    assert len(fig.axes) == 6  # three panels, three colour bars
    assert fig.axes[2].collections[0].get_cmap().name == "viridis"


@needs_mpl
def test_a_constant_panel_is_drawn_on_a_sane_scale_with_constant_in_its_title():
    geo = plotting.GridGeometry(np.arange(6.0), np.arange(4.0))
    fig = plotting.map_figure(geo, [("denoised", np.zeros(24))])
    ax = fig.axes[0]
    assert ax.images[0].get_clim() == (-0.5, 0.5)
    assert "constant: every value is 0" in ax.get_title()


@needs_mpl
def test_the_keys_beyond_their_intervals_are_marked():
    n = 50
    est = np.full(n, 10.0)
    est[[3, 17, 30]] = 40.0  # three hot spots, intervals ±5: above the mean
    est[44] = -20.0  # one cold spot: below it
    lo, hi = est - 5.0, est + 5.0
    marks = plotting.stand_out(lo, hi, float(np.mean(est)))
    assert np.flatnonzero(marks == 1).tolist() == [3, 17, 30]
    assert np.flatnonzero(marks == -1).tolist() == [44]
    fig = plotting.map_figure(_chain(n), [plotting.MapPanel("denoised", est, marks=marks)])
    ax = fig.axes[0]
    counts = [len(c.get_offsets()) for c in ax.collections[1:]]
    assert sorted(counts) == [1, 3]
    assert "4 stand out beyond their intervals\n(3 above, 1 below the mean)" in ax.get_title()
    # regions: outlines of the marked regions
    shapely = pytest.importorskip("shapely.geometry")
    boxes = [shapely.box(i, 0, i + 1, 1) for i in range(n)]
    fig = plotting.map_figure(
        plotting.RegionGeometry(boxes), [plotting.MapPanel("denoised", est, marks=marks)]
    )
    outlined = [len(c.get_paths()) for c in fig.axes[0].collections[1:]]
    assert sorted(outlined) == [1, 3]


def test_stand_out_uses_the_intervals_not_the_values():
    lo, hi = np.array([1.0, -3.0, 0.5, np.nan]), np.array([2.0, -1.0, 3.0, 9.0])
    assert plotting.stand_out(lo, hi, 0.0).tolist() == [1, -1, 1, 0]
    assert plotting.stand_out(lo, hi, 1.5).tolist() == [0, -1, 0, 0]


@needs_mpl
@pytest.mark.parametrize(("n", "drawn"), [(5, 5), (12, 12), (24, 12), (100, 12)])
def test_small_multiples_draw_at_most_12_maps_and_say_how_many_are_left_out(n, drawn):
    picks = plotting.pick_multiples(n)
    assert len(picks) == drawn and picks[0] == 0 and picks[-1] == n - 1
    geo = plotting.GridGeometry(np.arange(5.0), np.arange(3.0))
    rng = np.random.default_rng(2)
    maps = [(f"hour = {k}", rng.random(15) * (k + 1)) for k in picks]
    fig = plotting.small_multiples_figure(geo, maps, total=n, what="values of hour")
    images = [ax for ax in fig.axes if ax.get_visible() and ax.images]
    assert len(images) == drawn
    heading = fig.get_suptitle()
    if n > drawn:
        assert f"{drawn} of {n} values of hour drawn" in heading
        assert f"{n - drawn} left out" in heading
    else:
        assert "left out" not in heading
    pooled = np.concatenate([m[1] for m in maps])
    clims = {ax.images[0].get_clim() for ax in images}
    assert clims == {tuple(np.percentile(pooled, [2, 98]))}  # one scale for comparison


@needs_mpl
def test_no_offset_on_the_axes_and_grid_x_labels_do_not_overlap():
    # the grid that drew its x labels over each other: 45 bins of 0.002 degrees
    geo = plotting.GridGeometry(
        -74.02 + 0.002 * np.arange(45), 40.70 + 0.002 * np.arange(90), "lon", "lat"
    )
    v = np.random.default_rng(3).random(45 * 90) + 1000.0  # would give a "+1e3" offset
    fig = plotting.map_figure(geo, [("a", v), ("b", v), ("c", v)])
    _drawn(fig)
    renderer = fig.canvas.get_renderer()
    for ax in fig.axes:
        for axis in (ax.xaxis, ax.yaxis):
            assert axis.get_offset_text().get_text() == ""
    for ax in fig.axes[:3]:
        boxes = [t.get_window_extent(renderer) for t in ax.get_xticklabels() if t.get_text()]
        assert len(boxes) >= 2
        for a, b in itertools.pairwise(boxes):
            assert not a.overlaps(b)
    series = plotting.SeriesGeometry(1e6 + np.arange(20.0))
    fig = plotting.map_figure(series, [("s", 1e4 + np.arange(20.0))])
    _drawn(fig)
    assert fig.axes[0].xaxis.get_offset_text().get_text() == ""
    assert fig.axes[0].yaxis.get_offset_text().get_text() == ""
