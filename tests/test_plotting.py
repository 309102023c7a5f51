"""dpgauss.plotting: the heat maps and the experiments' figure helpers, one module; one error
without matplotlib (``PlotUnavailableError``, also named ``MatplotlibMissingError``)."""

from __future__ import annotations

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
