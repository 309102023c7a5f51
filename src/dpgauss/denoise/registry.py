"""Every denoiser by name, in one place: what the release specs, ``auto`` and the CLI read.

All denoisers share one signature, ``f(y, sigma, structure=None, **params)``
(:mod:`dpgauss.denoise.structure` says what ``structure`` may be), and report in
``Denoised.params`` the parameters they were run with under the names they accept, so a
result's parameters can be passed back to reproduce it (``method`` plus
:meth:`Entry.reusable`).

========================  ==========================================================  =========
name                      estimator                                                   structure
========================  ==========================================================  =========
``none``                  the released vector itself (exact intervals)                none
``auto``                  the smallest SURE among the candidates that apply           any
``james_stein``           positive-part James–Stein toward 0 or the mean              none
``soft_threshold``        soft thresholding (SureShrink or universal λ)               none
``hard_threshold``        hard thresholding (universal or fixed λ)                    none
``wavelet``               orthonormal wavelet shrinkage (PyWavelets)                  grid
``graph_wavelet``         spanning-tree Haar wavelets on a graph                      graph
``trend_filter``          graph trend filtering of order 0, 1, 2, λ by SURE           graph
========================  ==========================================================  =========

``posterior_mean`` needs a prior variance, which a release does not know; it is a
function of the package, not a registry entry.
"""

from __future__ import annotations

import functools
import importlib
import inspect
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from .._optional import require
from .result import Denoised, check_noise

__all__ = ["DENOISERS", "Entry", "denoise", "entry", "identity"]

#: The arguments every denoiser takes itself, never through ``params``.
OWN = ("y", "sigma", "structure")


def identity(y: object, sigma: object, structure: object = None) -> Denoised:
    """No denoising: ``ŷ = y``, risk ``dσ²`` exactly, intervals ``y ± z·σ`` exactly."""
    arr, s = check_noise(y, sigma)
    scale = np.array(np.broadcast_to(s, arr.shape), dtype=np.float64)
    return Denoised(arr.copy(), float(np.sum(scale**2)), "none", {}, sigma=s, scale=scale)


@dataclass(frozen=True)
class Entry:
    """One denoiser: where it lives, what structure it uses, what it needs installed."""

    name: str
    module: str
    function: str
    structure: str  # "none", "graph", "grid" or "any"
    summary: str
    needs: tuple[str, str] | None = None  # (importable module, pip extra)

    def load(self) -> Callable[..., Denoised]:
        """The function, after checking that its optional dependency is installed."""
        if self.needs is not None:
            module, extra = self.needs
            require(module, extra, f"the {self.name!r} denoiser")
        if self.module == "registry":
            return identity
        mod = importlib.import_module(f"{__package__}.{self.module}")
        return getattr(mod, self.function)

    @functools.cached_property
    def params(self) -> tuple[str, ...]:
        """The keyword parameters the denoiser accepts (beyond ``y, sigma, structure``)."""
        sig = inspect.signature(self.load())
        return tuple(p for p in sig.parameters if p not in OWN)

    def reusable(self, params: dict[str, Any]) -> dict[str, Any]:
        """The entries of a result's ``params`` that are parameters of this denoiser."""
        return {k: v for k, v in params.items() if k in self.params}


DENOISERS: dict[str, Entry] = {
    e.name: e
    for e in (
        Entry("none", "registry", "identity", "none", "the released vector itself"),
        Entry("auto", "auto", "auto", "any", "the smallest SURE among the candidates"),
        Entry("james_stein", "shrinkage", "james_stein", "none", "James–Stein shrinkage"),
        Entry("soft_threshold", "thresholding", "soft_threshold", "none", "soft thresholding"),
        Entry("hard_threshold", "thresholding", "hard_threshold", "none", "hard thresholding"),
        Entry(
            "wavelet",
            "wavelets",
            "wavelet_denoise",
            "grid",
            "orthonormal wavelet shrinkage",
            ("pywt", "wavelets"),
        ),
        Entry(
            "graph_wavelet",
            "tree_wavelets",
            "graph_wavelet_denoise",
            "graph",
            "spanning-tree Haar wavelets",
        ),
        Entry("trend_filter", "trend_filter", "trend_filter", "graph", "graph trend filtering"),
    )
}

#: The defaults a release uses where the function's own default is not what a release wants.
RELEASE_DEFAULTS: dict[str, dict[str, Any]] = {
    "soft_threshold": {"threshold": "sure"},
    "trend_filter": {"lam": "sure"},
}


def entry(method: object) -> Entry:
    """The registry entry of ``method``; ``ValueError`` naming the allowed names."""
    if not isinstance(method, str) or method not in DENOISERS:
        names = ", ".join(DENOISERS)
        raise ValueError(f"method must be one of {names}; got {method!r}")
    return DENOISERS[method]


def denoise(
    y: object, sigma: object, structure: object = None, *, method: str = "auto", **params: Any
) -> Denoised:
    """Run the denoiser ``method`` on ``y``: ``DENOISERS[method](y, sigma, structure,
    **params)``, with unknown parameter names refused by name."""
    e = entry(method)
    fn = e.load()
    bad = sorted(set(params) - set(e.params))
    if bad:
        raise TypeError(
            f"method {method!r} has no parameter {', '.join(map(repr, bad))} "
            f"(it accepts: {', '.join(e.params) or 'none'})"
        )
    return fn(y, sigma, structure, **params)
