"""The paper's experiments: one module per figure and a shared runner (the figures
are drawn with :mod:`dpgauss.plotting`).

``dpgauss reproduce`` (or :func:`run`) regenerates Balle & Wang (ICML 2018)'s figures:

1. calibration: analytic vs classical σ, their variance ratio, δ₀(ε) and Theorem 4
   (:mod:`.fig1_calibration`);
2. private mean estimation with denoising (:mod:`.fig2_mean_estimation`);
3. sparse histograms (:mod:`.fig3_sparse_histograms`);
4. taxi heat maps: a registry slot (:data:`.runner.REGISTRY`) for a later module.

Experiments use only the public API (mechanisms and denoisers); they define none of their
own.  Importing this package does not import matplotlib.
"""

from .runner import (
    DEFAULT_OUT,
    REGISTRY,
    Claim,
    Figure,
    FigureResult,
    Point,
    RunReport,
    Summary,
    available_figures,
    load_figure,
    run,
)

__all__ = [
    "DEFAULT_OUT",
    "REGISTRY",
    "Claim",
    "Figure",
    "FigureResult",
    "Point",
    "RunReport",
    "Summary",
    "available_figures",
    "load_figure",
    "run",
]
