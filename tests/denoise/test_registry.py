"""One signature for every denoiser, parameters that round-trip, one registry."""

from __future__ import annotations

import inspect

import numpy as np
import pytest

from dpgauss.denoise import DENOISERS, Structure, as_graph, denoise, registry
from dpgauss.release.spec import DENOISERS as SPEC_DENOISERS

pytest.importorskip("pywt")

ROWS, COLS = 12, 15
D = ROWS * COLS


def _structure() -> Structure:
    idx = np.arange(D).reshape(ROWS, COLS)
    edges = np.concatenate(
        [
            np.stack([idx[:, :-1].ravel(), idx[:, 1:].ravel()], 1),
            np.stack([idx[:-1].ravel(), idx[1:].ravel()], 1),
        ]
    )
    return Structure(graph=as_graph(edges, D), grid=(ROWS, COLS))


def _y() -> np.ndarray:
    rng = np.random.default_rng(3)
    theta = np.where(np.arange(D) % COLS < COLS // 2, 0.0, 4.0)
    return theta + rng.standard_normal(D)


def test_the_release_specs_read_the_registry() -> None:
    assert tuple(DENOISERS) == SPEC_DENOISERS


@pytest.mark.parametrize("name", list(DENOISERS))
def test_every_denoiser_has_the_one_signature(name: str) -> None:
    fn = DENOISERS[name].load()
    params = list(inspect.signature(fn).parameters.values())
    assert [p.name for p in params[:3]] == ["y", "sigma", "structure"]
    assert params[2].default is None
    assert all(p.kind is inspect.Parameter.KEYWORD_ONLY for p in params[3:])


@pytest.mark.parametrize("name", list(DENOISERS))
def test_reported_parameters_round_trip(name: str) -> None:
    """What ``params`` reports under a parameter's name, passed back, gives the same fit."""
    y, s, st = _y(), 1.0, _structure()
    res = denoise(y, s, st, method=name)
    e = DENOISERS[name]
    again = denoise(y, s, st, method=name, **e.reusable(res.params))
    np.testing.assert_allclose(again.estimate, res.estimate, atol=1e-8)
    lo, hi = res.interval(0.95, draws=4, rng=0)
    assert lo.shape == y.shape and np.all(lo <= hi)


def test_unknown_names_and_parameters_are_refused() -> None:
    with pytest.raises(ValueError, match="method must be one of none, auto"):
        denoise(np.zeros(5), 1.0, method="median")
    with pytest.raises(TypeError, match=r"has no parameter 'lam'.*accepts: target"):
        denoise(np.zeros(5), 1.0, method="james_stein", lam=1.0)


def test_a_denoiser_that_needs_a_graph_says_so() -> None:
    with pytest.raises(ValueError, match="trend_filter needs a graph"):
        denoise(np.zeros(5), 1.0, method="trend_filter")
    with pytest.raises(ValueError, match="wavelet_denoise needs a grid shape"):
        denoise(np.zeros(D), 1.0, _structure().graph, method="wavelet")


def test_a_grid_stands_for_its_lattice() -> None:
    y = _y()
    st = _structure()
    a = denoise(y, 1.0, (ROWS, COLS), method="trend_filter", lam=2.0)
    b = denoise(y, 1.0, st.graph, method="trend_filter", lam=2.0)
    np.testing.assert_allclose(a.estimate, b.estimate, atol=1e-8)


def test_the_identity_is_exact() -> None:
    res = registry.identity(np.arange(4.0), 2.0)
    assert res.risk == 16.0 and res.method == "none"
    lo, hi = res.interval(0.95)
    np.testing.assert_allclose(hi - lo, 2 * 1.959963984540054 * 2.0)


def test_a_grid_must_be_integers() -> None:
    from dpgauss.denoise import as_structure

    with pytest.raises(TypeError, match="grid must be a tuple of 1 or 2 integers"):
        as_structure(Structure(grid=(2.5, 4)), 10)  # type: ignore[arg-type]
