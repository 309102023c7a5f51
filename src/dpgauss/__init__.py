"""dpgauss: differentially private releases with exactly calibrated Gaussian noise.

Built on Balle & Wang, "Improving the Gaussian Mechanism for Differential Privacy:
Analytical Calibration and Optimal Denoising" (ICML 2018).  The flow, from ``cli.py``
down: bound contributions → aggregate → calibrate σ (:mod:`dpgauss.privacy`) → add noise
(:mod:`dpgauss.noise`) → denoise → release.
"""

from .noise import DiscreteGaussianMechanism, GaussianMechanism, LaplaceMechanism, Release
from .privacy import (
    analytic_gaussian_sigma,
    classical_gaussian_sigma,
    delta0,
    discrete_gaussian_delta,
    discrete_gaussian_sigma,
    gaussian_delta,
    gaussian_epsilon,
    gaussian_log_delta,
    gdp_delta,
    gdp_epsilon,
    gdp_log_delta,
    gdp_mu,
    laplace_scale,
    theorem2_sigma,
    theorem4_sigma_lower_bound,
)

__version__ = "0.1.0"

__all__ = [
    "DiscreteGaussianMechanism",
    "GaussianMechanism",
    "LaplaceMechanism",
    "Release",
    "__version__",
    "analytic_gaussian_sigma",
    "classical_gaussian_sigma",
    "delta0",
    "discrete_gaussian_delta",
    "discrete_gaussian_sigma",
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
