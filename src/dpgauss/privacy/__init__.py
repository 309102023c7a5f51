"""Pure privacy mathematics: exact Gaussian profiles, calibration and baselines.

Nothing in this package samples noise or reads data.
"""

from .baselines import (
    classical_gaussian_sigma,
    delta0,
    laplace_scale,
    theorem2_sigma,
    theorem4_sigma_lower_bound,
)
from .calibration import analytic_gaussian_sigma, gdp_mu
from .discrete_multivariate import discrete_gaussian_vector_delta, discrete_gaussian_vector_sigma
from .discrete_profile import discrete_gaussian_delta, discrete_gaussian_sigma
from .profile import (
    gaussian_delta,
    gaussian_epsilon,
    gaussian_log_delta,
    gdp_delta,
    gdp_epsilon,
    gdp_log_delta,
)

__all__ = [
    "analytic_gaussian_sigma",
    "classical_gaussian_sigma",
    "delta0",
    "discrete_gaussian_delta",
    "discrete_gaussian_sigma",
    "discrete_gaussian_vector_delta",
    "discrete_gaussian_vector_sigma",
    "gaussian_delta",
    "gaussian_epsilon",
    "gaussian_log_delta",
    "gdp_delta",
    "gdp_epsilon",
    "gdp_log_delta",
    "gdp_mu",
    "laplace_scale",
    "theorem2_sigma",
    "theorem4_sigma_lower_bound",
]
