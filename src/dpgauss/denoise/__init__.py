"""Denoisers: post-processing of a released vector that uses only y, σ and public structure.

Every denoiser is ``f(y, sigma, structure=None, **params) -> Denoised``; ``sigma`` is one
number or (where noted) one per key, ``structure`` a graph, a grid shape or both
(:mod:`.structure`).

Denoisers (by name in :data:`DENOISERS`, run any with :func:`denoise`)
    :func:`auto`, :func:`james_stein`, :func:`soft_threshold`, :func:`hard_threshold`,
    :func:`wavelet_denoise`, :func:`graph_wavelet_denoise`, :func:`trend_filter`, and
    :func:`posterior_mean` (needs a prior variance; not in the registry).
Results and error bars
    :class:`Denoised` (``estimate``, ``risk`` = SURE, ``params``, ``interval(level)``,
    ``sum_interval(weights)``, ``error_bars()``), :class:`ErrorBars`, :class:`Interval`,
    :func:`error_bars`
    (:mod:`.result`: exact for linear estimators, a bias-aware parametric bootstrap
    for the others).
Zoom levels that add up
    :func:`consistent_levels` → :class:`Levels` (:mod:`.levels`): the consistent GLS
    estimate of a tree of noisy totals, with exact intervals per node and for sums.
Structure
    :class:`Graph`, :func:`as_graph`, :class:`Structure`, :func:`as_structure`,
    :func:`tree_wavelet_basis`.
Validation
    :func:`check_observation` (one σ), :func:`check_noise` (one σ or one per key).
"""

from .auto import auto
from .graph import Graph, as_graph
from .levels import Levels, consistent_levels
from .registry import DENOISERS, denoise
from .result import Denoised, ErrorBars, Interval, check_noise, check_observation, error_bars
from .shrinkage import james_stein, posterior_mean
from .structure import Structure, as_structure
from .thresholding import hard_threshold, soft_threshold
from .tree_wavelets import graph_wavelet_denoise, tree_wavelet_basis
from .trend_filter import trend_filter
from .wavelets import wavelet_denoise

__all__ = [
    "DENOISERS",
    "Denoised",
    "ErrorBars",
    "Graph",
    "Interval",
    "Levels",
    "Structure",
    "as_graph",
    "as_structure",
    "auto",
    "check_noise",
    "check_observation",
    "consistent_levels",
    "denoise",
    "error_bars",
    "graph_wavelet_denoise",
    "hard_threshold",
    "james_stein",
    "posterior_mean",
    "soft_threshold",
    "tree_wavelet_basis",
    "trend_filter",
    "wavelet_denoise",
]
