"""What every denoiser returns, and the validation every denoiser starts with.

Denoisers are post-processing: they see only the released vector ``y``, the public noise
level ``σ`` and public structure (a graph, a grid), never the true data, so they cost no
privacy.  Because σ is public and exact, Stein's unbiased risk estimate (SURE) of the
squared error ``‖ŷ − θ‖²`` is unbiased for the true risk; every estimator that has one
reports it, and :func:`dpgauss.denoise.auto` uses it to choose.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .._validation import REAL, Interval, as_real_array, check_interval

__all__ = ["Denoised", "check_observation"]


@dataclass(frozen=True)
class Denoised:
    """The output of a denoiser.

    Attributes
    ----------
    estimate
        The denoised vector, same shape as the input ``y``.
    risk
        Stein's unbiased estimate of ``E‖estimate − θ‖²`` (the total squared error, not
        per coordinate), or ``None`` where no such estimate exists.
    method
        The estimator's name, e.g. ``"james_stein"``.
    params
        The parameters chosen or used (threshold, λ, degrees of freedom, …).
    """

    estimate: np.ndarray
    risk: float | None
    method: str
    params: dict[str, Any] = field(default_factory=dict)

    @property
    def mse(self) -> float | None:
        """Estimated mean squared error per coordinate, ``risk / d``."""
        if self.risk is None or self.estimate.size == 0:
            return None
        return self.risk / self.estimate.size


def check_observation(y: object, sigma: object) -> tuple[np.ndarray, float]:
    """Validate the released vector and the public σ shared by all denoisers.

    ``y``: finite reals of any shape (returned as a float64 array); ``σ``: a finite
    positive number.  Raises ``TypeError``/``ValueError`` naming the argument.
    """
    arr = as_real_array(y, "y")
    check_interval(arr, "y", REAL)
    s = as_real_array(sigma, "sigma")
    if s.ndim:
        raise TypeError(f"sigma must be a single number, not an array of shape {s.shape}")
    check_interval(s, "sigma", Interval(0.0, math.inf))
    return np.array(arr, dtype=np.float64), float(s)
