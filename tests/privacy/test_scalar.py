"""The scalar path of the privacy core (dpgauss.privacy._scalar) against mpmath, against the
vectorised path, and its hand-over to the vectorised path on anything exceptional.

The public functions' own tests (test_calibration.py, test_profile.py, test_accounting.py)
call them with Python numbers, so they check this path for safety and accuracy against the
mpmath reference; here are the checks specific to it.
"""

from __future__ import annotations

import math
import timeit

import mpmath
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dpgauss.privacy import (
    _scalar,
    analytic_gaussian_sigma,
    gaussian_delta,
    gaussian_epsilon,
    gdp_epsilon,
    gdp_log_delta,
    gdp_mu,
)
from dpgauss.privacy.profile import log_delta_error

from .reference import hp, mpf_exact, ref_delta_sigma, ref_log_delta
from .strategies import DELTA, EPS, MU, SENS


@settings(deadline=None, max_examples=300)
@given(x=st.floats(-26.5, 60.0))
def test_erfcx_to_a_few_ulps(x):
    with hp():
        exact = mpmath.exp(mpf_exact(x) ** 2) * mpmath.erfc(mpf_exact(x))
        err = abs(mpf_exact(_scalar.erfcx(x)) / exact - 1)
    assert err <= 2e-15, f"erfcx({x!r}) relative error {float(err):.3e}"


@pytest.mark.slow
@settings(deadline=None, max_examples=300)
@given(mu=MU, eps=EPS)
def test_kernel_within_its_error_bound(mu, eps):
    """The scalar kernel's log δ is within log_delta_error of the exact value: the bound the
    solvers and every safe-side rounding rely on."""
    log_d, t, _ = _scalar.log_delta_terms(mu, eps)
    exact = ref_log_delta(mu, eps)
    if not math.isfinite(log_d):
        assert exact < -700
        return
    bound = float(log_delta_error(np.array([log_d]), np.array([t]))[0])
    with hp():
        err = abs(mpf_exact(log_d) - exact)
    assert err <= max(bound, 1e-300), (
        f"log δ({mu!r}, {eps!r}): |err| {float(err):.3e} > {bound:.3e}"
    )


@pytest.mark.slow
@settings(deadline=None, max_examples=150)
@given(eps=EPS, delta=DELTA, sens=SENS)
def test_scalar_and_vector_paths_agree_and_are_both_safe(eps, delta, sens):
    fast = analytic_gaussian_sigma(eps, delta, sens)
    big = analytic_gaussian_sigma(np.full(_scalar.SMALL + 1, eps), delta, sens)
    assert np.all(big == big[0])
    slow = float(big[0])
    assert abs(fast - slow) <= 1e-13 * slow
    for sigma in (fast, slow):
        assert ref_delta_sigma(sigma, eps, sens) <= delta


@pytest.mark.parametrize(
    ("func", "first", "second"),
    [
        (analytic_gaussian_sigma, [0.0, 1e-8, 0.5, 20.0, 1e3], 1e-6),
        (gdp_mu, [0.0, 1e-3, 1.0, 50.0], 1e-12),
        (gaussian_delta, [0.01, 1.0, 7.0, 1e4], 1.0),
        (gaussian_epsilon, [0.01, 1.0, 7.0, 1e4], 1e-6),
        (gdp_log_delta, [1e-8, 1e-3, 1.0, 100.0], 5e-8),
        (gdp_epsilon, [1e-8, 1e-3, 1.0, 100.0], 1e-9),
    ],
    ids=lambda v: getattr(v, "__name__", ""),
)
def test_small_arrays_equal_the_scalar_calls(func, first, second):
    out = func(np.array(first), second)
    assert [float(v) for v in out] == [func(float(f), second) for f in first]


def test_exceptional_points_hand_over_to_the_vectorised_path():
    """Where the float arithmetic would overflow the scalar path returns None and the
    public function answers from the vectorised path (or raises its validation error)."""
    assert _scalar.gdp_mu(1.0, 0.0) is None  # outside the domain: validated elsewhere
    assert _scalar.plain(True, 1.0) is None and _scalar.plain(np.array(1.0)) is None
    assert _scalar.plain(float("nan")) is None
    with pytest.raises(ValueError, match="delta"):
        analytic_gaussian_sigma(1.0, 1.5)
    with pytest.raises(ValueError, match="above the largest double"):
        analytic_gaussian_sigma(0.0, 1e-320, 1e300)


def test_one_scalar_calibration_costs_a_few_microseconds():
    """Measured against a baseline in the same run (absolute times mean little here): the
    scalar path is at least 5× faster than the vectorised path on a 33-element array (about
    45× on a quiet machine; the margin is for load: speed itself is benchmarks/' business)."""
    n = 300
    fast = min(timeit.repeat(lambda: analytic_gaussian_sigma(1.0, 1e-5), number=n, repeat=3))
    x = np.full(_scalar.SMALL + 1, 1.0)
    slow = min(timeit.repeat(lambda: analytic_gaussian_sigma(x, 1e-5), number=n // 10, repeat=3))
    assert fast / n * 5 <= slow / (n // 10)
