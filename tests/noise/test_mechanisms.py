"""GaussianMechanism / LaplaceMechanism and the Release they return (experiment path)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

import dpgauss
from dpgauss.noise.mechanisms import GaussianMechanism, LaplaceMechanism
from dpgauss.noise.release import GaussianNoise, LaplaceNoise


def test_sigma_matches_calibration():
    mech = GaussianMechanism(0.5, 1e-6, 2.0)
    assert mech.sigma == dpgauss.analytic_gaussian_sigma(0.5, 1e-6, 2.0)
    classical = GaussianMechanism(0.5, 1e-6, 2.0, calibration="classical")
    assert classical.sigma == dpgauss.classical_gaussian_sigma(0.5, 1e-6, 2.0)
    assert classical.sigma > mech.sigma


@pytest.mark.parametrize(
    "values",
    [3.0, [1.0, 2.0, 3.0], np.arange(12.0).reshape(3, 4), np.zeros((2, 0, 3)), []],
)
def test_release_keeps_shape_and_records_parameters(values):
    mech = GaussianMechanism(1.0, 1e-5, 1.5)
    rel = mech.release(values, rng=7)
    if np.ndim(values) == 0:
        assert isinstance(rel.values, float)
    else:
        assert np.shape(rel.values) == np.shape(values)
    assert (rel.sigma, rel.epsilon, rel.delta, rel.sensitivity) == (mech.sigma, 1.0, 1e-5, 1.5)
    assert rel.mechanism == "gaussian (analytic)"
    lower, upper = rel.interval(0.9)
    assert np.shape(lower) == np.shape(values)
    assert np.all(np.asarray(lower) <= np.asarray(rel.values))
    assert np.all(np.asarray(rel.values) <= np.asarray(upper))


def test_seed_reproducible_and_generator_advances():
    mech = GaussianMechanism(1.0, 1e-5)
    assert np.array_equal(
        mech.release(np.zeros(5), rng=3).values, mech.release(np.zeros(5), rng=3).values
    )
    gen = np.random.default_rng(3)
    first = mech.release(np.zeros(5), rng=gen).values
    second = mech.release(np.zeros(5), rng=gen).values
    assert not np.array_equal(first, second)


def test_gaussian_noise_has_the_calibrated_law():
    mech = GaussianMechanism(2.0, 1e-4, 1.0)
    noise = mech.release(np.zeros(200_000), rng=11).values
    assert stats.kstest(noise / mech.sigma, "norm").pvalue > 1e-3


def test_laplace_noise_has_the_calibrated_law():
    mech = LaplaceMechanism(0.5, 3.0)
    assert mech.scale == pytest.approx(6.0)
    noise = mech.release(np.zeros(200_000), rng=12).values
    assert stats.kstest(noise / mech.scale, "laplace").pvalue > 1e-3
    rel = mech.release([1.0], rng=1)
    assert rel.delta == 0.0 and rel.sigma == pytest.approx(math.sqrt(2) * 6.0)


@pytest.mark.parametrize("level", [0.5, 0.9, 0.95, 0.999])
def test_interval_coverage_is_exact(level):
    """Coverage over many coordinates matches the level (binomial 5-sigma band)."""
    n = 100_000
    for mech in (GaussianMechanism(1.0, 1e-5, 2.0), LaplaceMechanism(1.0, 2.0)):
        truth = np.linspace(-5, 5, n)
        lower, upper = mech.release(truth, rng=5).interval(level)
        covered = np.mean((lower <= truth) & (truth <= upper))
        band = 5 * math.sqrt(level * (1 - level) / n)
        assert abs(covered - level) < band, (mech, covered)


def test_half_widths_are_exact_quantiles():
    assert GaussianNoise(2.0).half_width(0.95) == pytest.approx(2.0 * 1.959963984540054, rel=1e-14)
    assert GaussianNoise(2.0).half_width(0.95) >= 2.0 * stats.norm.ppf(0.975)
    assert LaplaceNoise(3.0).half_width(0.9) == pytest.approx(3.0 * math.log(10.0), rel=1e-14)
    # Far tail: no loss of digits (the level's own complement is what is represented).
    level = 1 - 1e-12
    expected = -stats.norm.ppf((1 - level) / 2)
    assert GaussianNoise(1.0).half_width(level) == pytest.approx(expected, rel=1e-12)


@pytest.mark.parametrize("level", [0, 1, -0.1, 1.5, float("nan")])
def test_bad_levels(level):
    rel = GaussianMechanism(1.0, 1e-5).release([0.0], rng=0)
    with pytest.raises(ValueError, match="level"):
        rel.interval(level)


def test_bad_values_name_the_first_offending_position():
    mech = GaussianMechanism(1.0, 1e-5)
    with pytest.raises(ValueError, match=r"values must be finite; got nan at index \(1,\)"):
        mech.release([0.0, float("nan"), float("inf")], rng=0)
    with pytest.raises(ValueError, match=r"at index \(1, 0\)"):
        mech.release([[0.0, 1.0], [float("-inf"), 2.0]], rng=0)
    with pytest.raises(TypeError, match="values"):
        mech.release(["a", "b"], rng=0)
    with pytest.raises(TypeError, match="values"):
        mech.release(None, rng=0)


@pytest.mark.parametrize(
    ("kwargs", "exc", "match"),
    [
        ({"epsilon": -1, "delta": 1e-5}, ValueError, "epsilon"),
        ({"epsilon": 1, "delta": 0}, ValueError, "delta"),
        ({"epsilon": 1, "delta": 1e-5, "sensitivity": 0}, ValueError, "sensitivity"),
        ({"epsilon": [1, 2], "delta": 1e-5}, TypeError, "epsilon"),
        ({"epsilon": 1, "delta": 1e-5, "calibration": "textbook"}, ValueError, "calibration"),
        ({"epsilon": 2, "delta": 1e-5, "calibration": "classical"}, ValueError, "analytic"),
    ],
)
def test_bad_parameters(kwargs, exc, match):
    with pytest.raises(exc, match=match):
        GaussianMechanism(**kwargs)


def test_bad_rng():
    mech = GaussianMechanism(1.0, 1e-5)
    with pytest.raises(TypeError, match="rng"):
        mech.release([0.0], rng=None)
    with pytest.raises(ValueError, match="rng"):
        mech.release([0.0], rng="insecure")
    with pytest.raises(ValueError, match="grid"):
        mech.release([0.0], rng=0, grid=0.1)


def test_pandas_series_keeps_index():
    pd = pytest.importorskip("pandas")
    series = pd.Series([1.0, 2.0, 3.0], index=["a", "b", "c"], name="counts")
    rel = GaussianMechanism(1.0, 1e-5).release(series, rng=0)
    assert isinstance(rel.values, pd.Series)
    assert list(rel.values.index) == ["a", "b", "c"] and rel.values.name == "counts"
    lower, upper = rel.interval()
    assert list(lower.index) == ["a", "b", "c"]
    assert (lower < rel.values).all() and (rel.values < upper).all()


# --------------------------------------------------------------------- secure (default) path


def test_default_rng_is_secure_and_works():
    import inspect

    from dpgauss.noise.mechanisms import DiscreteGaussianMechanism
    from dpgauss.noise.release import DiscreteGaussianNoise, DiscreteLaplaceNoise

    mechs = [
        GaussianMechanism(1.0, 1e-6),
        LaplaceMechanism(1.0, 1.0),
        DiscreteGaussianMechanism(1.0, 1e-6),
    ]
    for mech in mechs:
        assert inspect.signature(mech.release).parameters["rng"].default == "secure"
    truth = np.array([3.0, -1.25, 1e6])
    rel = mechs[0].release(truth)
    assert isinstance(rel.noise, DiscreteGaussianNoise) and rel.noise.rounded
    assert rel.mechanism == "gaussian (analytic), secure lattice discrete gaussian"
    assert rel.sigma == rel.noise.std and mechs[0].sigma <= rel.sigma <= 1.011 * mechs[0].sigma
    rel = mechs[1].release(truth)
    assert isinstance(rel.noise, DiscreteLaplaceNoise) and rel.delta == 0.0
    assert rel.sigma == pytest.approx(mechs[1].sigma, rel=0.011) and rel.sigma >= mechs[1].sigma
    rel = mechs[2].release([3, -1, 10**6])
    assert rel.values.dtype == np.int64 and rel.mechanism == "discrete gaussian"
    for mech, values in zip(mechs, (truth, truth, [3, -1, 10**6]), strict=True):
        lower, upper = mech.release(values).interval(0.99)
        assert np.all(lower <= upper)


def test_secure_release_keeps_shapes_and_types():
    pd = pytest.importorskip("pandas")
    mech = GaussianMechanism(1.0, 1e-5)
    assert isinstance(mech.release(2.0).values, float)
    assert mech.release(np.zeros((2, 3))).values.shape == (2, 3)
    assert mech.release(np.zeros((0, 3))).values.shape == (0, 3)
    series = pd.Series([1.0, 2.0], index=["x", "y"], name="s")
    rel = LaplaceMechanism(1.0, 1.0).release(series)
    assert list(rel.values.index) == ["x", "y"] and rel.values.name == "s"
    with pytest.raises(ValueError, match="classical"):
        GaussianMechanism(0.5, 1e-5, calibration="classical").release([1.0])


# ------------------------------------------------------------------ DiscreteGaussianMechanism


@pytest.mark.slow
def test_discrete_gaussian_mechanism_sigma():
    from dpgauss.noise.mechanisms import DiscreteGaussianMechanism
    from dpgauss.privacy import discrete_gaussian_sigma
    from dpgauss.privacy.discrete_multivariate import (
        discrete_gaussian_gdp_sigma,
        discrete_gaussian_vector_sigma,
    )

    # σ is the certified σ raised so that the μ-GDP charge fits gdp_mu(ε, δ): by 9e-4 for
    # counts (Δ₂ = 1, the exact scalar profile for every d), 2.4e-4 / 1.1e-3 for Δ₂ = 2.
    mech = DiscreteGaussianMechanism(1.0, 1e-6)
    for d in (1, 10, 10**6):
        assert mech.sigma_for(d) == discrete_gaussian_gdp_sigma(1.0, 1e-6, 1.0, d)
        exact = discrete_gaussian_sigma(1.0, 1e-6, 1)
        assert exact < mech.sigma_for(d) <= exact * (1 + 1e-3)
    mech = DiscreteGaussianMechanism(1.0, 1e-6, l2_sensitivity=2.0)
    exact = discrete_gaussian_sigma(1.0, 1e-6, 2)
    assert exact < mech.sigma_for(1) <= exact * (1 + 3e-4)
    vector = discrete_gaussian_vector_sigma(1.0, 1e-6, 2.0, 100)
    assert vector < mech.sigma_for(100) <= vector * (1 + 1.5e-3)
    cont = dpgauss.analytic_gaussian_sigma(1.0, 1e-6, 2.0)
    assert cont <= mech.sigma_for(100) <= 1.01 * cont
    rel = mech.release(np.zeros(100, dtype=np.int64), rng=0)
    assert rel.noise.sigma_lattice == mech.sigma_for(100) and rel.sensitivity == 2.0


def test_discrete_gaussian_mechanism_uses_the_exact_sampler_from_the_generator():
    from dpgauss.noise.discrete_sampler import discrete_gaussian
    from dpgauss.noise.mechanisms import DiscreteGaussianMechanism

    mech = DiscreteGaussianMechanism(0.5, 1e-6, 1.0)
    values = np.arange(-50, 50).reshape(10, 10)
    rel = mech.release(values, rng=42)
    noise = discrete_gaussian(mech.sigma_for(100), (10, 10), rng=np.random.default_rng(42))
    assert rel.values.dtype == np.int64 and np.array_equal(rel.values - values, noise)
    assert np.array_equal(rel.values, mech.release(values, rng=42).values)


def test_discrete_gaussian_mechanism_types_and_index():
    pd = pytest.importorskip("pandas")
    from dpgauss.noise.mechanisms import DiscreteGaussianMechanism

    mech = DiscreteGaussianMechanism(1.0, 1e-6)
    scalar = mech.release(5)
    assert type(scalar.values) is int
    assert isinstance(scalar.interval()[0], float)
    assert mech.release(np.uint8(7)).values.__class__ is int
    assert mech.release([1.0, 2.0]).values.dtype == np.int64  # integral floats accepted
    series = pd.Series([4, 0, 9], index=pd.Index(["a", "b", "c"], name="cell"), name="count")
    rel = mech.release(series)
    assert isinstance(rel.values, pd.Series) and rel.values.dtype == np.int64
    assert list(rel.values.index) == ["a", "b", "c"] and rel.values.name == "count"
    assert rel.values.index.name == "cell"
    lower, upper = rel.interval(0.9)
    assert list(upper.index) == ["a", "b", "c"] and (lower <= rel.values).all()


@pytest.mark.parametrize(
    ("values", "exc", "match"),
    [
        ([1, 2.5, 3], ValueError, r"values must be integers.*got 2\.5 at index \(1,\)"),
        ([[0.0, 1.0], [2.0, 0.5]], ValueError, r"integers.*at index \(1, 1\)"),
        ([1.0, float("nan")], ValueError, r"finite.*at index \(1,\)"),
        ([0, 2**62], ValueError, r"below 2\^62.*at index \(1,\)"),
        (np.array([1, 2**63], dtype=np.uint64), ValueError, r"at index \(1,\)"),
        (0.5, ValueError, "integers"),
        (["a"], TypeError, "values"),
        (True, TypeError, "values"),
        (None, TypeError, "values"),
        ([2**70], TypeError, "values"),
    ],
)
def test_discrete_gaussian_mechanism_rejects_non_integers(values, exc, match):
    from dpgauss.noise.mechanisms import DiscreteGaussianMechanism

    with pytest.raises(exc, match=match):
        DiscreteGaussianMechanism(1.0, 1e-6).release(values, rng=0)


def test_discrete_gaussian_mechanism_bad_parameters():
    from dpgauss.noise.mechanisms import DiscreteGaussianMechanism

    with pytest.raises(ValueError, match="l2_sensitivity"):
        DiscreteGaussianMechanism(1.0, 1e-6, l2_sensitivity=0.5)
    with pytest.raises(ValueError, match="delta"):
        DiscreteGaussianMechanism(1.0, 0.0)
    with pytest.raises(ValueError, match="epsilon"):
        DiscreteGaussianMechanism(-1.0, 1e-6)
    with pytest.raises(TypeError, match="rng"):
        DiscreteGaussianMechanism(1.0, 1e-6).release([1], rng=None)


@pytest.mark.parametrize("level", [0.5, 0.9, 0.99])
def test_discrete_gaussian_mechanism_law_and_exact_coverage(level):
    """Secure path over many coordinates: the noise is N_Z(0, σ²) and the intervals cover
    with the exact probability C(k) = P(|Y| ≤ k) ≥ level > C(k − 1)."""
    from dpgauss.noise.mechanisms import DiscreteGaussianMechanism

    n = 100_000
    mech = DiscreteGaussianMechanism(1.0, 1e-6)
    truth = np.arange(n, dtype=np.int64) % 1000
    rel = mech.release(truth)
    sigma = mech.sigma_for(n)
    span = 200
    y = np.arange(-span, span + 1)
    pmf = np.exp(-(y * y) / (2 * sigma * sigma))
    pmf /= pmf.sum()
    noise = rel.values - truth
    counts = np.bincount(np.clip(noise, -12, 12) + 12, minlength=25)
    inner = pmf[span - 11 : span + 12]
    expected = np.array([pmf[: span - 11].sum(), *inner, pmf[span + 12 :].sum()])
    assert stats.chisquare(counts, expected * n).pvalue > 1e-3
    lower, upper = rel.interval(level)
    k = int(rel.noise.half_width(level))
    exact = pmf[np.abs(y) <= k].sum()
    assert exact >= level > pmf[np.abs(y) <= k - 1].sum()
    covered = np.mean((lower <= truth) & (truth <= upper))
    assert abs(covered - exact) < 5 * math.sqrt(exact * (1 - exact) / n)


def test_secure_law_is_cached_and_still_validated():
    """noise_plan's secure law is cached per arguments (a repeated release spends its time
    drawing, not calibrating): the same law object, and the law of an uncached call."""
    from dpgauss.noise import mechanisms as mechanisms_module
    from dpgauss.noise.lattice import gaussian_lattice_law, integer_lattice_law

    mech = mechanisms_module.GaussianMechanism(1.0, 1e-6, 1.0)
    first = mech.noise_plan(4000, integer=True).noise
    assert mech.noise_plan(4000, integer=True).noise is first
    assert first == integer_lattice_law(1.0, 1e-6, 1.0, 4000, None)
    assert mech.noise_plan(4000).noise == gaussian_lattice_law(1.0, 1e-6, 1.0, 4000, None)
    assert mech.noise_plan(4001, integer=True).noise != first
    # the typed cache keeps 1 and True apart, and unhashable arguments bypass it
    with pytest.raises((TypeError, ValueError)):
        mech.noise_plan(4000, changed=True)
    with pytest.raises((TypeError, ValueError)):
        mech.noise_plan(4000, grid=[0.5])
