"""Choose a denoiser from the data alone by Stein's unbiased risk estimate.

σ is public and exact in a Gaussian release, so every candidate's SURE is an unbiased
estimate of its total squared error ``E‖ŷ − θ‖²`` and candidates can be compared without
knowing θ (Balle & Wang 2018, Section 4: adaptive estimation; Stein 1981; Donoho &
Johnstone 1995).  :func:`auto` computes the candidates, keeps the one with the smallest
SURE, and reports every candidate in ``params["candidates"]``.
"""

from __future__ import annotations

import dataclasses
import functools
import math
import numbers
import warnings
from collections.abc import Callable
from typing import Any

import numpy as np

from . import _graph_tv
from .result import Denoised, check_noise
from .shrinkage import james_stein
from .structure import as_structure
from .thresholding import soft_threshold
from .tree_wavelets import graph_wavelet_denoise
from .trend_filter import trend_filter

__all__ = ["auto"]

_SCALAR_TYPES = (str, bool, int, float, type(None))


def _summary(params: dict[str, Any]) -> dict[str, Any]:
    """The scalar entries of a candidate's params (arrays and tables left out)."""
    out: dict[str, Any] = {}
    for key, value in params.items():
        if isinstance(value, np.generic):
            value = value.item()
        if isinstance(value, _SCALAR_TYPES):
            out[key] = value
    return out


#: Order-1 graph trend filtering is a candidate up to this many keys: its SURE path is
#: superlinear (on this project's 2-core machines, hours × the Manhattan graph: 4.8 s at
#: 4,091 keys, 25 s at 8,182, 37 s at 16,364 — `python benchmarks/bench_domains.py`; a
#: whole ``auto`` over 24 × 4,091 keys took 12 minutes with it); beyond, ``auto`` records it
#: in ``skipped`` (order 0 and the graph wavelets stay).
TF1_MAX_SIZE = 20_000


def auto(
    y: object,
    sigma: object,
    structure: object = None,
    *,
    margin: float = 1.0,
) -> Denoised:
    """The candidate denoiser with the smallest SURE, behind a guard against selection bias.

    Candidates (each with an exact SURE of the total squared error):

    * ``none`` (the identity): ``ŷ = y``, risk ``dσ²``;
    * :func:`~dpgauss.denoise.james_stein` toward zero and toward the mean;
    * :func:`~dpgauss.denoise.soft_threshold` with the SURE-chosen λ;
    * with a grid shape: :func:`~dpgauss.denoise.wavelet_denoise` (Haar, SURE thresholds)
      of ``y`` reshaped (C order) to the grid, and for a 1-D grid (an ordered histogram, a
      series) also order-0 trend filtering on the chain of its cells, tuned by SURE
      (exact, by the direct 1-D algorithm);
    * with a graph: the graph Haar wavelets of a spanning tree and graph trend filtering
      of orders 0 and 1 (order 1 up to :data:`TF1_MAX_SIZE` keys), both tuned by SURE
      (``dpgauss.denoise.tree_wavelets`` and ``dpgauss.denoise.trend_filter``); coordinate
      ``i`` of ``y`` (flattened in C order) is node ``i``.

    Selection.  Minimising SURE over candidates is nearly unbiased but not exactly: a
    candidate whose SURE happens to fall low is favoured.  SURE's standard deviation is
    about ``σ²√(2d)``.  James–Stein dominates the identity outright, so the identity is
    never preferred to it; every other candidate must beat the best of the identity and
    the James–Stein estimators by ``margin · σ²√(2d)`` to be chosen (default
    ``margin = 1``; 0 is plain minimum-SURE selection) — except trend filtering, whose
    estimate is a projection with locally constant degrees of freedom: the noise of the
    difference of its SURE and the baseline's is of order ``2σ‖β̂ − b̂‖ + 2σ²√(2·df)``
    (``b̂`` the baseline's estimate), often far below ``σ²√(2d)`` when both are smooth, so
    its guard is the smaller of the two.  Without this, a weak smooth signal (all of θ's
    variation below ``σ²√(2d)``) kept a flat James–Stein estimate with 3 × the error
    (``test_a_weak_smooth_signal_on_a_graph_is_found``; on the taxi data at ε = 1 the
    trend filter's SURE was half James–Stein's and was still refused).  The guard keeps
    the loss of the choice within a few percent of ``dσ²`` when nothing can help (e.g. dense, large,
    rough θ, Balle & Wang's remark that soft thresholding does worse than no denoising for
    ε > 5), at the price of ignoring gains smaller than about ``√(2/d)`` relative.  It
    matters: in Monte Carlo at ``d = 1000`` on a 25 × 40 grid with θ small, dense and
    positive, plain selection (``margin=0``) lost 1.6 × the best candidate's error (the
    per-level SURE of the wavelets is the noisiest), the default lost nothing
    (``tests/denoise/test_auto.py``).

    Parameters
    ----------
    y : array_like of finite reals, any shape
    sigma : float > 0, the public noise standard deviation, or one per key (then order-0
        trend filtering is fitted with weights ``1/σᵢ²`` and the grid wavelets threshold
        each coefficient in units of its own noise; order-1 trend filtering, which takes
        one σ, is skipped and says so in ``skipped``; the guard's ``σ²√(2d)`` becomes
        ``√(2 Σ σᵢ⁴)``)
    structure : optional: a public graph on the ``y.size`` coordinates (see
        :func:`~dpgauss.denoise.as_graph`), a grid shape (a tuple of 1 or 2 integers ≥ 2
        whose product is ``y.size``) or a :class:`~dpgauss.denoise.structure.Structure`
        with both (:mod:`dpgauss.denoise.structure`)
    margin : float ≥ 0, the guard above in units of ``σ²√(2d)``

    Returns
    -------
    Denoised
        The chosen candidate (its ``method`` and ``risk``; the risk is the SURE of the
        chosen candidate, slightly optimistic because it was chosen for being small) with
        its own params plus ``candidates`` (a list of dicts ``method``, ``risk``,
        ``params`` for every candidate, in the order computed), ``selected`` (the index of
        the chosen one in that list) and ``margin``; and ``skipped``, the candidates not
        computed and why: a missing optional dependency (with a :class:`UserWarning`; the
        grid wavelets need PyWavelets: ``pip install '.[wavelets]'``) or a size beyond
        :data:`TF1_MAX_SIZE`.
    """
    arr, s = check_noise(y, sigma)
    per_key = np.ndim(s) > 0
    if isinstance(margin, bool) or not isinstance(margin, numbers.Real):
        raise TypeError(f"margin must be a real number ≥ 0; got {type(margin).__name__}")
    if not (math.isfinite(margin) and margin >= 0):
        raise ValueError(f"margin must be a finite number ≥ 0; got {margin!r}")
    d = arr.size
    known = as_structure(structure, d)
    shape, graph = known.grid, known.graph
    flat = arr.ravel()

    # Baselines that never lose to y: the identity and James–Stein (which dominates it).
    baselines = [
        Denoised(
            arr.copy(),
            float(np.sum(np.broadcast_to(np.asarray(s) ** 2, arr.shape))),
            "none",
            {},
            sigma=s,
            scale=np.array(np.broadcast_to(s, arr.shape), dtype=np.float64),
        ),
        james_stein(arr, s, target="zero"),
        james_stein(arr, s, target="mean"),
    ]
    challengers = [soft_threshold(arr, s, threshold="sure")]
    skipped: list[str] = []
    if shape is not None:
        from .wavelets import wavelet_denoise

        try:
            res = wavelet_denoise(flat, s, shape, wavelet="haar", threshold="sure")
        except ImportError as exc:  # PyWavelets is optional: compare the others
            skipped.append(f"wavelet_denoise ({exc})")
            warnings.warn(
                f"auto: the wavelet candidate is skipped: {exc}", UserWarning, stacklevel=2
            )
        else:
            challengers.append(_reshaped(res, arr.shape))
    if shape is not None and len(shape) == 1 and graph is None:
        # an ordered 1-D grid is a chain: order-0 trend filtering there is exact and takes
        # about one pass per λ (the direct 1-D algorithm, with or without numba; weighted by
        # 1/σᵢ² when σ differs per key)
        chain = np.stack([np.arange(d - 1), np.arange(1, d)], axis=1)
        res = trend_filter(flat, s, chain, order=0, lam="sure")
        challengers.append(_reshaped(res, arr.shape))
    if graph is not None:
        g = graph
        challengers.append(
            _reshaped(graph_wavelet_denoise(flat, s, g, threshold="sure"), arr.shape)
        )
        for order in (0, 1):
            if per_key and order == 1:
                skipped.append(
                    "trend_filter order 1 (it takes one σ; sigma differs per key: order 0 "
                    "is fitted with weights 1/σᵢ²)"
                )
                continue
            if per_key and not _graph_tv.available():
                skipped.append(
                    "trend_filter order 0 (one σ per key is solved by the compiled minimum "
                    "cut: pip install '.[fast]')"
                )
                continue
            if order == 1 and d > TF1_MAX_SIZE:
                skipped.append(
                    f"trend_filter order 1 (d = {d:,} > {TF1_MAX_SIZE:,}: its SURE path takes "
                    "minutes there; ask for it with method = 'trend_filter', "
                    "params = { order = 1 })"
                )
                continue
            res = trend_filter(flat, s, g, order=order, lam="sure")
            challengers.append(_reshaped(res, arr.shape))

    candidates = baselines + challengers
    base_risks = [float(c.risk) for c in baselines]  # type: ignore[arg-type]
    chosen = int(np.argmin(base_risks))
    best = base_risks[chosen]
    base, base_risk = np.ravel(candidates[chosen].estimate), best
    # the standard deviation of ‖noise‖²: σ²√(2d), √(2 Σ σᵢ⁴) with one σ per key
    full = math.sqrt(2.0 * float(np.sum(np.broadcast_to(np.asarray(s) ** 4, arr.shape))))
    for i, cand in enumerate(challengers, start=len(baselines)):
        risk = cand.risk
        if risk is None or not math.isfinite(risk):
            continue
        guard = full
        df = cand.params.get("df")
        if cand.method == "trend_filter" and df is not None and math.isfinite(float(df)):
            # with one σ per key: the first term's variance is 4 Σ σᵢ² (β̂ᵢ − b̂ᵢ)², the
            # second is taken at the root mean σ⁴
            var = np.broadcast_to(np.asarray(s) ** 2, arr.shape).ravel()
            diff = np.ravel(cand.estimate) - base
            first = 2.0 * math.sqrt(float(np.sum(var * diff * diff)))
            second = 2.0 * math.sqrt(float(np.mean(var * var))) * math.sqrt(2.0 * float(df))
            guard = min(full, first + second)
        if risk < base_risk - margin * guard and risk < best:
            chosen, best = i, risk
    winner = candidates[chosen]
    table = [{"method": c.method, "risk": c.risk, "params": _summary(c.params)} for c in candidates]
    params = dict(winner.params)
    params.update({"candidates": table, "selected": chosen, "margin": margin})
    if skipped:
        params["skipped"] = skipped
    return dataclasses.replace(winner, params=params)


def _reshaped(res: Denoised, shape: tuple[int, ...]) -> Denoised:
    """``res`` for ``y`` of ``shape``; its refit takes and returns that shape too."""
    inner = np.shape(res.estimate)
    refit = res.refit
    if refit is not None:
        refit = functools.partial(_refit_reshaped, refit, inner, shape)
    return dataclasses.replace(res, estimate=np.reshape(res.estimate, shape), refit=refit)


def _refit_reshaped(
    refit: Callable[[np.ndarray], Denoised],
    inner: tuple[int, ...],
    shape: tuple[int, ...],
    y: np.ndarray,
) -> Denoised:
    return _reshaped(refit(np.reshape(y, inner)), shape)
