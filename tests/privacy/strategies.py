"""Hypothesis strategies shared by the privacy tests: log-uniform draws plus explicit corners."""

from __future__ import annotations

import math

from hypothesis import strategies as st


def log_uniform(lo: float, hi: float) -> st.SearchStrategy[float]:
    """Floats whose base-10 logarithm is uniform on [log10 lo, log10 hi], clipped to [lo, hi]."""
    return st.floats(math.log10(lo), math.log10(hi)).map(lambda t: min(max(10.0**t, lo), hi))


def with_corners(corners: list[float], body: st.SearchStrategy[float]) -> st.SearchStrategy[float]:
    return st.one_of(st.sampled_from(corners), body)


#: epsilon >= 0, log-uniform on [1e-8, 1e3], with the corners 0, 1e-8 and 1e3.
EPS = with_corners([0.0, 1e-8, 1e3], log_uniform(1e-8, 1e3))
#: epsilon > 0.
EPS_POS = with_corners([1e-8, 1e3], log_uniform(1e-8, 1e3))
#: epsilon in (0, 1) (the classical mechanism's range).
EPS_BELOW_1 = with_corners([1e-8, 0.5, 0.999999], log_uniform(1e-8, 0.999999))
#: delta, log-uniform on [1e-300, 0.5], with the corners 1e-300 and 0.5.
DELTA = with_corners([1e-300, 0.5], log_uniform(1e-300, 0.5))
#: L2 (or L1) sensitivity, log-uniform on [1e-6, 1e6].
SENS = with_corners([1.0, 1e-6, 1e6], log_uniform(1e-6, 1e6))
#: mu = Delta / sigma, log-uniform on [1e-8, 1e3].
MU = with_corners([1e-8, 1.0, 1e3], log_uniform(1e-8, 1e3))
