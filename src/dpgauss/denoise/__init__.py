"""Denoisers: post-processing of a released vector that uses only y, σ and public structure."""

from .graph import Graph, as_graph
from .result import Denoised, check_observation

__all__ = ["Denoised", "Graph", "as_graph", "check_observation"]
