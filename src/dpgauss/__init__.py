"""dpgauss: differentially private releases with exactly calibrated Gaussian noise.

Built on Balle & Wang, "Improving the Gaussian Mechanism for Differential Privacy:
Analytical Calibration and Optimal Denoising" (ICML 2018).  The flow a user follows, and
every name this package exports for it (``dpgauss.NAME``; each is defined in the module
named after its concept, given in brackets)::

    records --bound--> aggregate --calibrate σ--> add noise --denoise--> release (+ ledger)

Calibration and the exact privacy profile [privacy.calibration, privacy.profile]
    analytic_gaussian_sigma  -- smallest σ for (ε, δ)-DP (Balle & Wang, Thm 8), exact
    gaussian_delta           -- δ(ε) of N(0, σ²) noise at sensitivity Δ, never rounded down
    gaussian_log_delta       -- log δ(ε), meaningful far below the double range
    gaussian_epsilon         -- smallest ε at a δ for given σ
    gdp_mu                   -- largest μ such that μ-GDP implies (ε, δ)-DP
    gdp_delta, gdp_log_delta, gdp_epsilon -- the same profile in μ-GDP form
Baselines [privacy.baselines]
    classical_gaussian_sigma -- σ = Δ√(2 ln(1.25/δ))/ε (Dwork & Roth, Thm A.1; ε < 1)
    laplace_scale            -- b = Δ₁/ε of the Laplace mechanism
    delta0, theorem2_sigma, theorem4_sigma_lower_bound -- the paper's Section 2 results
Discrete (lattice) noise [privacy.discrete_profile]
    discrete_gaussian_delta, discrete_gaussian_sigma -- the discrete Gaussian's profile
Accounting [privacy.accounting]
    GaussianAccountant       -- exact composition of Gaussian releases in μ-GDP
    plan_queries             -- ε and σ per query so that K releases fit (ε, δ) exactly
Mechanisms [noise.mechanisms, noise.release]
    GaussianMechanism        -- σ calibrated for (ε, δ); releases with the secure sampler
    DiscreteGaussianMechanism, LaplaceMechanism -- lattice and Laplace noise
    Release                  -- a released vector with its noise law and intervals
Denoising: post-processing, no privacy cost [denoise.*]
    auto                     -- the candidate with the smallest SURE (the default)
    DENOISERS                -- the registry: every denoiser by name (``dpgauss.denoise.denoise``
                                runs one; ``dpgauss.denoise`` is the subpackage)
    james_stein, posterior_mean, soft_threshold, hard_threshold,
    wavelet_denoise, graph_wavelet_denoise, trend_filter -- the denoisers
    Denoised                 -- estimate, SURE, params, interval(level), error_bars()
    error_bars, ErrorBars    -- per-key intervals of denoised values, and of sums of keys
                                (Denoised.sum_interval(weights))
    as_graph                 -- a public graph from networkx, edges or a sparse matrix
Releases from records [release.*]
    load_spec, ReleaseSpec   -- a release described in TOML
    run_release              -- plan, charge the ledger, aggregate, noise, denoise, write
    release_frame            -- the same for a pandas/Polars DataFrame or pyarrow Table
    bounded_aggregate        -- the bounded aggregate without noise (evaluation only)
    Ledger, BudgetExceeded   -- the privacy budget ledger (SQLite) and its refusal

Every name is loaded on first use (``import dpgauss`` imports nothing, not even NumPy).
Every name is documented, validates its arguments and appears in ``docs/``
(``tests/test_public_api.py``).

>>> import dpgauss
>>> round(dpgauss.analytic_gaussian_sigma(1.0, 1e-5), 6)
3.730632
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # for type checkers; at run time every name is loaded on first use
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
    from .privacy.accounting import GaussianAccountant, plan_queries

__version__ = "0.1.0"

#: Names loaded on first use, and the module that defines each: ``import dpgauss`` imports
#: nothing (not even NumPy), so that the ``dpgauss`` command's start-up is inside its
#: handlers (a Ctrl-C during it is one line, exit 130).
_LAZY = {
    "DiscreteGaussianMechanism": "dpgauss.noise",
    "GaussianMechanism": "dpgauss.noise",
    "LaplaceMechanism": "dpgauss.noise",
    "Release": "dpgauss.noise",
    "analytic_gaussian_sigma": "dpgauss.privacy",
    "classical_gaussian_sigma": "dpgauss.privacy",
    "delta0": "dpgauss.privacy",
    "discrete_gaussian_delta": "dpgauss.privacy",
    "discrete_gaussian_sigma": "dpgauss.privacy",
    "gaussian_delta": "dpgauss.privacy",
    "gaussian_epsilon": "dpgauss.privacy",
    "gaussian_log_delta": "dpgauss.privacy",
    "gdp_delta": "dpgauss.privacy",
    "gdp_epsilon": "dpgauss.privacy",
    "gdp_log_delta": "dpgauss.privacy",
    "gdp_mu": "dpgauss.privacy",
    "laplace_scale": "dpgauss.privacy",
    "theorem2_sigma": "dpgauss.privacy",
    "theorem4_sigma_lower_bound": "dpgauss.privacy",
    "GaussianAccountant": "dpgauss.privacy.accounting",
    "plan_queries": "dpgauss.privacy.accounting",
    "DENOISERS": "dpgauss.denoise",
    "Denoised": "dpgauss.denoise",
    "ErrorBars": "dpgauss.denoise",
    "as_graph": "dpgauss.denoise",
    "auto": "dpgauss.denoise",
    "error_bars": "dpgauss.denoise",
    "graph_wavelet_denoise": "dpgauss.denoise",
    "hard_threshold": "dpgauss.denoise",
    "james_stein": "dpgauss.denoise",
    "posterior_mean": "dpgauss.denoise",
    "soft_threshold": "dpgauss.denoise",
    "trend_filter": "dpgauss.denoise",
    "wavelet_denoise": "dpgauss.denoise",
    "BudgetExceeded": "dpgauss.release",
    "Ledger": "dpgauss.release",
    "ReleaseSpec": "dpgauss.release",
    "bounded_aggregate": "dpgauss.release",
    "load_spec": "dpgauss.release",
    "release_frame": "dpgauss.release",
    "run_release": "dpgauss.release",
}

__all__ = [  # the names above, those of _LAZY included (checked by tests/test_public_api.py)
    "DENOISERS",
    "BudgetExceeded",
    "Denoised",
    "DiscreteGaussianMechanism",
    "ErrorBars",
    "GaussianAccountant",
    "GaussianMechanism",
    "LaplaceMechanism",
    "Ledger",
    "Release",
    "ReleaseSpec",
    "__version__",
    "analytic_gaussian_sigma",
    "as_graph",
    "auto",
    "bounded_aggregate",
    "classical_gaussian_sigma",
    "delta0",
    "discrete_gaussian_delta",
    "discrete_gaussian_sigma",
    "error_bars",
    "gaussian_delta",
    "gaussian_epsilon",
    "gaussian_log_delta",
    "gdp_delta",
    "gdp_epsilon",
    "gdp_log_delta",
    "gdp_mu",
    "graph_wavelet_denoise",
    "hard_threshold",
    "james_stein",
    "laplace_scale",
    "load_spec",
    "plan_queries",
    "posterior_mean",
    "release_frame",
    "run_release",
    "soft_threshold",
    "theorem2_sigma",
    "theorem4_sigma_lower_bound",
    "trend_filter",
    "wavelet_denoise",
]


#: What ``import dpgauss`` loaded before it became lazy: touching one of them loads them all,
#: so ``dpgauss.privacy.accounting.X`` after a bare ``import dpgauss`` keeps working.
_CORE = ("dpgauss.noise", "dpgauss.privacy", "dpgauss.privacy.accounting")


def __getattr__(name: str) -> Any:
    """Load a public name, or the privacy and noise subpackages, on first use (PEP 562)."""
    if name in ("privacy", "noise") or _LAZY.get(name) in _CORE:
        for core in _CORE:
            importlib.import_module(core)
        if name in ("privacy", "noise"):
            return globals()[name]
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'dpgauss' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY))
