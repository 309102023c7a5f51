"""Denoisers: post-processing of a released vector that uses only y, σ and public structure."""

from .auto import auto
from .graph import Graph, as_graph
from .intervals import ErrorBars, Interval, error_bars
from .result import Denoised, check_observation
from .shrinkage import james_stein, posterior_mean
from .thresholding import hard_threshold, soft_threshold
from .tree_wavelets import graph_wavelet_denoise, tree_wavelet_basis
from .trend_filter import trend_filter
from .wavelets import wavelet_denoise

__all__ = [
    "Denoised",
    "ErrorBars",
    "Graph",
    "Interval",
    "as_graph",
    "auto",
    "check_observation",
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
