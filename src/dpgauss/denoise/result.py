"""What every denoiser returns, and the validation every denoiser starts with.

Denoisers are post-processing: they see only the released vector ``y``, the public noise
level ``σ`` and public structure (a graph, a grid), never the true data, so they cost no
privacy.  Because σ is public and exact, Stein's unbiased risk estimate (SURE) of the
squared error ``‖ŷ − θ‖²`` is unbiased for the true risk; every estimator that has one
reports it, and :func:`dpgauss.denoise.auto` uses it to choose.

Every result can also say how wrong each of its values may be: :meth:`Denoised.interval`
gives per-key intervals and :meth:`Denoised.error_bars` the per-key error scale and an
upper confidence bound on the total error (:mod:`dpgauss.denoise.intervals`).
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from .._validation import REAL, Interval, as_real_array, check_interval

if TYPE_CHECKING:
    from .intervals import ErrorBars, Interval

__all__ = ["Denoised", "check_noise", "check_observation"]


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
    sigma
        The noise standard deviation the estimate was computed with (a number, or one per
        key), or ``None`` where the denoiser was run without it.
    refit
        The same estimator with its tuning frozen (the λ, thresholds, order chosen here):
        a function of a new vector ``y*`` returning its :class:`Denoised`.  The error bars
        re-run it on simulated releases (:mod:`dpgauss.denoise.intervals`).
    scale
        For a linear estimator, the exact per-key standard deviation of its error (the
        error bars then need no simulation); ``None`` otherwise.
    """

    estimate: np.ndarray
    risk: float | None
    method: str
    params: dict[str, Any] = field(default_factory=dict)
    sigma: float | np.ndarray | None = field(default=None, repr=False, compare=False)
    refit: Callable[[np.ndarray], Denoised] | None = field(default=None, repr=False, compare=False)
    scale: np.ndarray | None = field(default=None, repr=False, compare=False)
    _bars: dict[int, ErrorBars] = field(default_factory=dict, init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if np.asarray(self.estimate).dtype.kind not in "fiu":
            raise TypeError(
                f"Denoised: estimate must be an array of real numbers; got "
                f"{type(self.estimate).__name__}"
            )
        if self.risk is not None and not isinstance(self.risk, numbers.Real):
            raise TypeError(f"Denoised: risk must be a number or None; got {self.risk!r}")
        if not isinstance(self.method, str):
            raise TypeError(f"Denoised: method must be a name (str); got {self.method!r}")
        if not isinstance(self.params, dict):
            raise TypeError(f"Denoised: params must be a dict; got {type(self.params).__name__}")
        if self.refit is not None and not callable(self.refit):
            raise TypeError("Denoised: refit must be a function of y or None")

    @property
    def mse(self) -> float | None:
        """Estimated mean squared error per coordinate, ``risk / d``."""
        if self.risk is None or self.estimate.size == 0:
            return None
        return self.risk / self.estimate.size

    def error_bars(self, *, draws: int | None = None, rng: object = None) -> ErrorBars:
        """Per-key error scale and a bound on the total error (:func:`~.intervals.error_bars`).

        Without ``rng`` the result is computed once per ``draws`` and kept.
        """
        from .intervals import DRAWS, error_bars

        n = DRAWS if draws is None else draws
        if rng is not None:
            return error_bars(self, draws=n, rng=rng)
        if n not in self._bars:
            self._bars[n] = error_bars(self, draws=n)
        return self._bars[n]

    def interval(
        self, level: float = 0.95, *, draws: int | None = None, rng: object = None
    ) -> Interval:
        """Per-key ``(lower, upper)`` arrays at confidence ``level`` (a named tuple).

        See :mod:`dpgauss.denoise.intervals` for the method and the coverage it targets.
        """
        return self.error_bars(draws=draws, rng=rng).interval(level)


#: σ lies in this range, so that σ², 1/σ² and the denoisers' sums of squares are finite
#: (a release's σ is within (1e-100, 1e100): ``dpgauss.release.pipeline.SIGMA_RANGE``).
SIGMA_LIMITS = Interval(1e-150, 1e150)

#: The denoisers that accept one σ per key (the others need a single σ).
PER_KEY_SIGMA = (
    "none, posterior_mean, james_stein, soft_threshold, hard_threshold, wavelet, "
    "graph_wavelet, trend_filter (order 0) and auto"
)


def check_observation(y: object, sigma: object) -> tuple[np.ndarray, float]:
    """Validate the released vector and a single public σ (denoisers that need one).

    As :func:`check_noise`, but ``σ`` must be one number (an array of one value repeated is
    that number).  Raises ``TypeError``/``ValueError`` naming the argument.
    """
    s = as_real_array(sigma, "sigma")
    if s.ndim:
        if not (s.size and np.all(s == s.flat[0])):
            raise TypeError(
                f"sigma must be a single number here, not an array of shape {s.shape} (one σ "
                f"per key is accepted by {PER_KEY_SIGMA})"
            )
        s = np.asarray(s.flat[0])  # one σ written once per key
    arr, one = check_noise(y, s)
    assert isinstance(one, float)
    return arr, one


def check_noise(y: object, sigma: object) -> tuple[np.ndarray, float | np.ndarray]:
    """Validate the released vector and its public σ: one number, or one per key.

    ``σ`` may be a finite positive number or an array of them broadcastable to ``y``'s
    shape (returned at that shape; a constant array is returned as its number, so a
    denoiser given σ written once per key does exactly what it does with the number).
    """
    arr = as_real_array(y, "y")
    check_interval(arr, "y", REAL)
    s = as_real_array(sigma, "sigma")
    check_interval(s, "sigma", Interval(0.0, math.inf))
    check_interval(s, "sigma", SIGMA_LIMITS, "so that σ² and 1/σ² are finite")
    if s.ndim == 0:
        return np.array(arr, dtype=np.float64), float(s)
    try:
        full = np.broadcast_to(s, arr.shape)
    except ValueError:
        raise ValueError(
            f"sigma must be one number or one per key: shape {s.shape} does not fit y's shape "
            f"{arr.shape}"
        ) from None
    if full.size and np.all(full == full.flat[0]):
        return np.array(arr, dtype=np.float64), float(full.flat[0])
    return np.array(arr, dtype=np.float64), np.array(full, dtype=np.float64)
