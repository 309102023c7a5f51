"""Noise: samplers and mechanisms that turn a true vector into a released one.

Randomness is always injected (``rng=``): a ``numpy.random.Generator`` or an int seed for
experiments, ``"secure"`` (the operating system's CSPRNG) for releases.
"""

from ..privacy.discrete_profile import discrete_gaussian_delta, discrete_gaussian_sigma
from .discrete_sampler import discrete_gaussian
from .mechanisms import DiscreteGaussianMechanism, GaussianMechanism, LaplaceMechanism
from .randomness import SecureRandom, resolve_rng
from .release import Release

__all__ = [
    "DiscreteGaussianMechanism",
    "GaussianMechanism",
    "LaplaceMechanism",
    "Release",
    "SecureRandom",
    "discrete_gaussian",
    "discrete_gaussian_delta",
    "discrete_gaussian_sigma",
    "resolve_rng",
]
