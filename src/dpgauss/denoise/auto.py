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
import time
import warnings
from collections.abc import Callable
from typing import Any

import numpy as np
import scipy.sparse as sp
from scipy.sparse.csgraph import connected_components

from .._optional import install_hint
from .._validation import NONNEGATIVE, check_scalar
from ._nonnegative import MARK, check_nonnegative, clipped_sure, positive_part
from .graph import Graph
from .result import Denoised, check_noise
from .shrinkage import james_stein
from .structure import as_structure
from .thresholding import soft_threshold
from .tree_wavelets import graph_wavelet_denoise
from .trend_filter import (
    _LAM_MIN_RATIO,
    TrendFilterConvergenceWarning,
    _graph_tv,
    _lattice_shape,
    _path_grid,
    _top_fit,
    _warm_solver,
    trend_filter,
)

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


#: Order-0 trend filtering on a 2-D grid (the 4-neighbour lattice, when no graph is given) is
#: a candidate up to this many cells; beyond, ``auto`` records it in ``skipped``.  With it, a
#: whole ``auto`` on a 300 × 300 grid took 1.6 s on this project's shared 2-core machines
#: (2026-12-02; 24–60 s with the first lattice solver), against 0.04 s without it (``python
#: benchmarks/bench_auto.py --cases grid300``); there it chose the trend filter.
LATTICE_TF_MAX_SIZE = 250_000

#: Screening of the trend-filter candidates (``auto``'s docstring, "Screening"): at most
#: SCREEN_ROUNDS rounds of at most SCREEN_PROBES solved λ each.  These numbers bound the cost
#: of screening only; they never change a choice.
SCREEN_PROBES = 3
SCREEN_ROUNDS = 1
#: A probe is solved with at most this many ADMM iterations per λ (``trend_filter``'s
#: ``max_iter``); one that does not converge ends the screening (the full path is computed):
#: cold solves at small λ that need ADMM cost many times the warm-started path.
SCREEN_MAX_ITER = 300
#: Order 1 is probed only at λ whose df lower bound is at most this: a cold solve there takes
#: many active-set steps from the least-norm dual, which on a 4,000-bin chain at df ≈ 3,000
#: cost several times the whole warm-started path.
SCREEN_MAX_DF = 1_000
#: The descent screen of order 1 on a chain (``auto``'s docstring, "Screening") solves at
#: most this many λ of the path before it gives up (the full path is then computed).
SCREEN_DESCENT_SOLVES = 24
#: The default SURE path of ``trend_filter`` (its ``n_lambdas``); ``auto`` passes it.
_N_LAMBDAS = 20
_HUGE_LAM = 1e300


def auto(
    y: object,
    sigma: object,
    structure: object = None,
    *,
    margin: float = 1.0,
    screen: bool = True,
    nonnegative: bool = False,
) -> Denoised:
    """The candidate denoiser with the smallest SURE, behind a guard against selection bias.

    Candidates (each with an exact SURE of the total squared error):

    * ``none`` (the identity): ``ŷ = y``, risk ``dσ²``;
    * :func:`~dpgauss.denoise.james_stein` toward zero and toward the mean;
    * :func:`~dpgauss.denoise.soft_threshold` with the SURE-chosen λ;
    * with a grid shape: :func:`~dpgauss.denoise.wavelet_denoise` (Haar, SURE thresholds)
      of ``y`` reshaped (C order) to the grid, and for a 1-D grid (an ordered histogram, a
      series) also order-0 trend filtering on the chain of its cells, tuned by SURE
      (exact, by the direct 1-D algorithm), and for a 2-D grid order-0 trend filtering on
      its 4-neighbour lattice (up to :data:`LATTICE_TF_MAX_SIZE` cells; screened, below);
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

    Screening.  A trend-filter SURE path (order 1 on any graph, order 0 on a graph that is
    not a chain and on a 2-D lattice) can cost minutes, and is often computed only to be
    rejected.  With ``screen=True`` (default; one σ only) ``auto`` first asks whether the
    candidate *can* be chosen at all, from bounds that hold for every λ its path can visit,
    and computes the path only if they do not exclude it.  The path visits only the grid
    ``λ_j = λ_max · r^{j/(n−1)}``, ``j < 2n`` (``n = 20`` values down to ``r · λ_max``,
    ``r = 10⁻³``, and at most ``n`` more while SURE still falls), and its result is the
    fit of smallest SURE among those visited.  At ``λ_j`` the candidate would be chosen only
    if ``SURE(λ_j) < T_j = min(best, b − margin · min(σ²√(2d), 2σ²√(2 df_j)))``, where
    ``b`` is the best baseline's SURE, ``best`` the smallest SURE of the challengers
    computed before it that pass their guard (the selection rule below, applied in the same
    order), and ``min(σ²√(2d), 2σ²√(2 df))`` is a lower bound on its guard.  Lower bounds,
    exact for the exact solution of ``min ½‖y − β‖² + λ‖Δβ‖₁``:

    * ``RSS(λ) = ‖y − β̂_λ‖²`` is nondecreasing in λ (the two optimality inequalities of
      λ < λ' added), so ``RSS(λ_j) ≥ RSS(λ_i)`` for any solved ``λ_i ≤ λ_j`` (``0`` if
      none; a solve certified to a relative duality gap ``g`` at objective ``P`` is within
      ``√(2gP)`` of the exact ``β̂`` in norm, which the bound subtracts);
    * ``y − β̂ = Δᵀû`` with ``‖û‖∞ ≤ λ`` (stationarity), so a row with ``(Δβ̂)_r = 0`` has
      ``|(Δy)_r| ≤ λ κ_r``, ``κ_r = Σ_k |(ΔΔᵀ)_rk|``: the rows with ``|(Δy)_r| > λ κ_r`` are
      nonzero, so ``df ≥`` their count for order 1 (``df = |A| + c_Z``) and ``≥`` the number
      of components of the graph without those edges for order 0 (always ``≥`` the number
      of components of the graph);
    * hence ``SURE(λ_j) ≥ RSS_lower(λ_j) + 2σ² df_lower(λ_j) − dσ²``.

    If every ``λ_j`` has its bound (or, where solved, its SURE) at or above ``T_j``, the
    candidate cannot be chosen and is left out, recorded in ``screened``.  Otherwise up to
    :data:`SCREEN_ROUNDS` rounds solve up to :data:`SCREEN_PROBES` of the λ still open (the
    smallest: their RSS bounds every larger λ), each only if it could close every λ at best
    (every probed RSS at its upper bound ``min(RSS(λ_max), ‖Δ‖² m λ²)``, from
    ``‖Δᵀû‖ ≤ ‖Δ‖‖û‖``), and for order 1 only if their df bound is at most
    :data:`SCREEN_MAX_DF`, each with at most :data:`SCREEN_MAX_ITER` ADMM iterations; if the
    bounds still leave some λ open, a probe does not converge, or a solved SURE is below its
    threshold, the full path is computed as without screening.

    Order 1 on a chain (a 1-D grid or a path labelled in order) is screened by a *descent*
    instead of those probes: the path's own solver (the dual active set, warm-started from
    the last λ solved, in any order) solves some λ of the grid exactly, each solve's SURE
    bounded below from its certified gap.  The path stops after the first ``j ≥ n − 1``
    whose SURE is not the smallest so far, so once a solved ``λ_k`` (``k ≥ n − 1``) has a
    solved ``λ_j``, ``j < k``, whose SURE is at most ``λ_k``'s (both certified), the path
    visits no λ past ``λ_k``; the candidate is left out when every λ up to there is closed
    (its SURE bound, or its exact SURE, at or above ``T_j``).  Which λ it solves (cost
    only): a bisection for the last λ whose RSS closes every λ before it (first probe
    ``λ_{n−1}``), then λ after λ down the path until the stop is shown; at most
    :data:`SCREEN_DESCENT_SOLVES` solves.  On a 4,000-bin chain of flat steps it solves 8 λ
    where the path solves 36 (``docs/benchmarks.md``); on graphs that are not chains the
    same descent cost as much as the path (each solve costs more active-set steps there),
    so they keep the probes above.  Guarantee: **the choice is
    the one ``screen=False`` makes** (the same candidate, λ and estimate; the selection rule
    is unchanged and a screened candidate could not have passed it), up to the solver's
    certified tolerance (``tol = 10⁻⁶`` relative duality gap) in the SURE values compared;
    the budgets above bound the cost of screening only.  So ``auto``'s SURE is still within
    ``margin · σ²√(2d)`` of the smallest SURE of all candidates, screened ones included.
    What it does not do: the bounds are loose where the fit is far from ``y`` in df but
    close in RSS, so a candidate whose path comes near the winner (e.g. order 1 on a flat,
    rough histogram, where James–Stein wins by a few guards) is computed in full.  No
    decision depends on a timing: they are functions of ``y``, ``σ`` and the structure.

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
    screen : bool, screen the trend-filter candidates first (above; default True); False
        computes every candidate in full
    nonnegative : bool, default False.  True (counts and sums of values ≥ 0) runs every
        candidate with ``nonnegative=True``: each publishes the positive part of its
        estimate, and its SURE is that of the clipped estimator
        (:mod:`dpgauss.denoise._nonnegative`), so the choice is made between the clipped
        candidates; the identity becomes ``max(y, 0)`` with SURE
        ``Σ_{yᵢ≤0} (yᵢ² − σᵢ²) + Σ_{yᵢ>0} σᵢ²`` (its error bars stay the raw ``σ``).  The
        screening bounds hold for the unclipped fits only, so with ``nonnegative=True`` the
        trend filters are computed in full (``params["screen"]`` is then False and
        ``params["screen_off"]`` says why).  The result has ``params["nonnegative"] = True``.

    Returns
    -------
    Denoised
        The chosen candidate (its ``method`` and ``risk``; the risk is the SURE of the
        chosen candidate, slightly optimistic because it was chosen for being small) with
        its own params plus ``candidates`` (a list of dicts ``method``, ``risk``,
        ``params`` for every candidate, in the order computed; a challenger's also has
        ``bar``, the SURE it had to go below to pass its guard), ``selected`` (the index of
        the chosen one in that list) and ``margin``; and ``skipped``, the candidates not
        computed and why: a missing optional dependency (with a :class:`UserWarning`; the
        grid wavelets need PyWavelets: ``pip install 'dpgauss[wavelets]'``) or a size beyond
        :data:`TF1_MAX_SIZE` or :data:`LATTICE_TF_MAX_SIZE`; ``screen``; ``screened``, the
        candidates left out by screening (dicts ``name``, ``method``, ``order``,
        ``threshold`` (``best`` above), ``lower_bound`` (the smallest bound over the path),
        ``probes`` (λ solved) and ``reason``), only if any was; and ``timing``, the seconds
        spent on each candidate (screening separately).  The timings depend on the machine
        and its load: in a release they belong to the confidential diagnostics, never to
        the published report (:mod:`dpgauss.release.report`).
    """
    arr, s = check_noise(y, sigma)
    per_key = np.ndim(s) > 0
    margin = check_scalar(margin, "margin", NONNEGATIVE)
    if not isinstance(screen, bool):
        raise TypeError(f"screen must be True or False; got {screen!r}")
    clip = check_nonnegative(nonnegative)
    screen_off = None
    if clip and screen:
        screen, screen_off = (
            False,
            (
                "nonnegative: the screening bounds hold for unclipped fits only; every candidate "
                "is computed in full"
            ),
        )
    d = arr.size
    known = as_structure(structure, d)
    shape, graph = known.grid, known.graph
    flat = arr.ravel()
    # one σ per key goes with the flattened y (a 2-D y with a 2-D σ)
    s_flat = np.ravel(s) if per_key else s
    timing: dict[str, float] = {}
    clock = time.perf_counter()

    def lap(name: str) -> None:
        nonlocal clock
        now = time.perf_counter()
        timing[name] = timing.get(name, 0.0) + now - clock
        clock = now

    # Baselines that never lose to y: the identity and James–Stein (which dominates it).
    s2_keys = np.broadcast_to(np.asarray(s, dtype=np.float64) ** 2, arr.shape)
    raw_scale = np.array(np.broadcast_to(s, arr.shape), dtype=np.float64)
    if clip:  # max(y, 0): SURE with divergence Σ_{yᵢ>0} σᵢ²; the raw σ as its error scale
        kept = positive_part(arr)
        identity = Denoised(
            kept,
            clipped_sure(arr, kept, s, float(np.sum(s2_keys[arr > 0]))),
            "none",
            {MARK: True},
            sigma=s,
            scale=raw_scale,
            observed=arr,  # review-sums finding 3: the hull of its intervals needs y
        )
    else:
        identity = Denoised(
            arr.copy(), float(np.sum(s2_keys)), "none", {}, sigma=s, scale=raw_scale, observed=arr
        )
    baselines = [
        identity,
        james_stein(arr, s, target="zero", nonnegative=clip),
        james_stein(arr, s, target="mean", nonnegative=clip),
    ]
    base_risks = [float(c.risk) for c in baselines]  # type: ignore[arg-type]
    first_choice = int(np.argmin(base_risks))
    base, base_risk = np.ravel(baselines[first_choice].estimate), base_risks[first_choice]
    # the standard deviation of ‖noise‖²: σ²√(2d), √(2 Σ σᵢ⁴) with one σ per key
    # √(2 Σ σᵢ⁴), scaled by the largest σ² so that σ near 1e100 does not overflow
    s2 = np.broadcast_to(np.asarray(s, dtype=np.float64) ** 2, arr.shape)
    top = float(np.max(s2)) if s2.size else 0.0
    full = top * math.sqrt(2.0 * float(np.sum((s2 / top) ** 2))) if top > 0 else 0.0
    var = np.broadcast_to(np.asarray(s) ** 2, arr.shape).ravel()
    lap("none, james_stein")

    challengers: list[Denoised] = []
    bars: list[float] = []  # each challenger's bar (_bar), computed once
    skipped: list[str] = []
    screened: list[dict[str, Any]] = []
    # the SURE a later challenger must go below to be chosen: the baseline's, or that of an
    # earlier challenger that passes its guard (the selection rule below)
    best = base_risk

    def add(res: Denoised, name: str) -> None:
        nonlocal best
        challengers.append(res)
        bars.append(_bar(res, base, base_risk, full, margin, var))
        if _below(res.risk, min(bars[-1], best)):
            best = float(res.risk)  # type: ignore[arg-type]
        lap(name)

    def trend(structure_: object, order: int, name: str, screenable: bool) -> None:
        if screen and screenable and not per_key:
            assert isinstance(s, float)
            g_ = structure_ if isinstance(structure_, Graph) else known.lattice()
            assert g_ is not None
            out, record = _screen_trend_filter(flat, s, g_, order, best, base_risk, margin, full)
            record["name"] = name
            lap(f"{name} (screening)")
            if out:
                screened.append(record)
                return
        res = trend_filter(
            flat,
            s_flat,
            structure_,
            order=order,
            lam="sure",
            n_lambdas=_N_LAMBDAS,
            nonnegative=clip,
        )
        add(_reshaped(res, arr.shape), name)

    add(soft_threshold(arr, s, threshold="sure", nonnegative=clip), "soft_threshold")
    if shape is not None:
        from .wavelets import wavelet_denoise

        try:
            res = wavelet_denoise(
                flat, s_flat, shape, wavelet="haar", threshold="sure", nonnegative=clip
            )
        except ImportError as exc:  # PyWavelets is optional: compare the others
            skipped.append(f"wavelet_denoise ({exc})")
            warnings.warn(
                f"auto: the wavelet candidate is skipped: {exc}", UserWarning, stacklevel=2
            )
            lap("wavelet")
        else:
            add(_reshaped(res, arr.shape), "wavelet")
    if shape is not None and len(shape) == 1 and graph is None:
        # an ordered 1-D grid is a chain: order-0 trend filtering there is exact and takes
        # about one pass per λ (the direct 1-D algorithm, with or without numba; weighted by
        # 1/σᵢ² when σ differs per key); cheaper than screening it
        # (the grid shape: trend_filter's direct route, no edge list built)
        trend((d,), 0, "trend_filter order 0", screenable=False)
    if shape is not None and len(shape) == 2 and graph is None:
        # the 4-neighbour lattice of the grid: order 0, screened
        if d > LATTICE_TF_MAX_SIZE:
            skipped.append(
                f"trend_filter order 0 on the lattice (d = {d:,} > {LATTICE_TF_MAX_SIZE:,}; ask "
                "for it with method = 'trend_filter')"
            )
        elif per_key and not _graph_tv.available():
            skipped.append(
                "trend_filter order 0 on the lattice (one σ per key is solved by the compiled "
                f"minimum cut: {install_hint('fast')})"
            )
        else:
            trend(shape, 0, "trend_filter order 0 (lattice)", screenable=True)
    if graph is not None:
        g = graph
        add(
            _reshaped(
                graph_wavelet_denoise(flat, s_flat, g, threshold="sure", nonnegative=clip),
                arr.shape,
            ),
            "graph_wavelet",
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
                    f"cut: {install_hint('fast')})"
                )
                continue
            if order == 1 and d > TF1_MAX_SIZE:
                skipped.append(
                    f"trend_filter order 1 (d = {d:,} > {TF1_MAX_SIZE:,}: its SURE path takes "
                    "minutes there; ask for it with method = 'trend_filter', "
                    "params = { order = 1 })"
                )
                continue
            # order 0 on a chain is the direct 1-D algorithm: cheaper than screening it
            trend(g, order, f"trend_filter order {order}", order == 1 or not _is_chain(g))

    candidates = baselines + challengers
    chosen, best = first_choice, base_risk
    for i, (cand, bar) in enumerate(zip(challengers, bars, strict=True), start=len(baselines)):
        if _below(cand.risk, min(bar, best)):
            chosen, best = i, float(cand.risk)  # type: ignore[arg-type]
    winner = candidates[chosen]
    table: list[dict[str, Any]] = [
        {"method": c.method, "risk": c.risk, "params": _summary(c.params)} for c in candidates
    ]
    for entry, bar in zip(table[len(baselines) :], bars, strict=True):
        entry["bar"] = bar
    params = dict(winner.params)
    params.update({"candidates": table, "selected": chosen, "margin": margin, "screen": screen})
    if screen_off is not None:
        params["screen_off"] = screen_off
    if clip:
        params[MARK] = True
    if screened:
        params["screened"] = screened
    if skipped:
        params["skipped"] = skipped
    params["timing"] = timing
    return dataclasses.replace(winner, params=params)


def _below(risk: float | None, bar: float) -> bool:
    """Whether a candidate's SURE ``risk`` passes its guard: finite and below its ``bar``."""
    return risk is not None and math.isfinite(risk) and risk < bar


def _bar(
    cand: Denoised,
    base: np.ndarray,
    base_risk: float,
    full: float,
    margin: float,
    var: np.ndarray,
) -> float:
    """The SURE a challenger must go below to be chosen over the baselines: the best
    baseline's SURE less ``margin`` times its guard (``auto``'s docstring, "Selection")."""
    guard = full
    df = cand.params.get("df")
    if cand.method == "trend_filter" and df is not None and math.isfinite(float(df)):
        # with one σ per key: the first term's variance is 4 Σ σᵢ² (β̂ᵢ − b̂ᵢ)², the
        # second is taken at the root mean σ⁴
        # (scaled by the largest σ², so that σ near 1e100 does not overflow)
        top = float(np.max(var))
        if top > 0:
            v = var / top
            diff = (np.ravel(cand.estimate) - base) / math.sqrt(top)
            first = 2.0 * top * math.sqrt(float(np.sum(v * diff * diff)))
            second = 2.0 * top * math.sqrt(float(np.mean(v * v))) * math.sqrt(2.0 * float(df))
            guard = min(full, first + second)
    return base_risk - margin * guard


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


def _is_chain(g: Graph) -> bool:
    """``g`` is the path ``0 − 1 − … − (n−1)`` as trend filtering sees it (a one-row
    lattice: order 0 there is the direct 1-D algorithm)."""
    shape = _lattice_shape(g)
    return shape is not None and shape[0] == 1


class _DfLowerBound:
    """A lower bound on the df of ``trend_filter(y, ·, g, order)`` at any λ, without solving.

    With ``Δ`` the operator (``D`` for order 0, ``L`` for order 1) the solution satisfies
    ``y − β̂ = Δᵀû`` with ``‖û‖∞ ≤ λ``, so a row with ``(Δβ̂)_r = 0`` has
    ``|(Δy)_r| = |(ΔΔᵀû)_r| ≤ λ κ_r``, ``κ_r = Σ_j |(ΔΔᵀ)_rj|``: every row with
    ``|(Δy)_r| > λ κ_r`` is nonzero at the solution.  Order 1: ``df = |A| + c_Z ≥`` that
    count (and ≥ the number of components).  Order 0: ``df`` is the number of components of
    the graph of the fused edges, at least that of the graph without those rows.
    """

    def __init__(self, y: np.ndarray, g: Graph, order: int) -> None:
        delta = g.incidence if order == 0 else g.laplacian
        delta = sp.csr_matrix(delta)
        self.dy = np.abs(delta @ y)
        self.kappa = np.asarray(abs(delta @ delta.T).sum(axis=1)).ravel()
        self.g, self.order = g, order
        self.c = g.n_components
        self.m = delta.shape[0]
        # ‖Δ‖₂² ≤ the largest row sum of |ΔΔᵀ| (Gershgorin on the PSD ΔΔᵀ)
        self.norm2 = float(self.kappa.max()) if self.kappa.size else 0.0

    def __call__(self, lam: float) -> int:
        active = self.dy > self.kappa * lam
        if self.order == 1:
            return max(int(np.count_nonzero(active)), self.c)
        fused = self.g.edges[~active]
        n = self.g.n
        adj = sp.coo_matrix((np.ones(len(fused)), (fused[:, 0], fused[:, 1])), shape=(n, n))
        return int(connected_components(adj, directed=False)[0])


def _screen_trend_filter(
    y: np.ndarray,
    sigma: float,
    g: Graph,
    order: int,
    best: float,
    base_risk: float,
    margin: float,
    full: float,
) -> tuple[bool, dict[str, Any]]:
    """Whether order-``order`` trend filtering on ``g`` can be left out because it cannot be
    chosen (``auto``'s docstring, "Screening"), and the record of why."""
    d, s2 = y.size, sigma * sigma
    record: dict[str, Any] = {"method": "trend_filter", "order": order, "threshold": best}
    n = _N_LAMBDAS
    solve: Callable[[float], Any] | None = None
    if order >= 1:
        if _is_chain(g):
            # the path's own solver, warm-started from λ to λ in any order (the descent)
            lam_max, solve = _warm_solver(y, g, order, max_iter=SCREEN_MAX_ITER)
            top_fit = solve(lam_max)  # the null-space projection, exactly
        else:
            # the probes below are separate solves: no solver is built for λ_max (on the
            # 4,091-junction Manhattan graph its set-up was 15 ms of the screen's 20)
            lam_max, top_fit = _top_fit(y, g, order)
        r = y - top_fit.beta
        top_risk, top_df = float(r @ r) - d * s2 + 2.0 * s2 * top_fit.df, float(top_fit.df)
    else:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", TrendFilterConvergenceWarning)
            top = trend_filter(y, sigma, g, order=order, lam=_HUGE_LAM)
        lam_max = float(top.params["lam_max"])
        top_risk, top_df = float(top.risk), float(top.params["df"])  # type: ignore[arg-type]
    if not (lam_max > 0.0 and math.isfinite(lam_max)):
        record["reason"] = "y is in the null space (one solve): computed in full"
        return False, record
    # the λ the path can visit, bit for bit its own (λ = 0, SURE dσ², is never chosen: its
    # SURE is the identity's, at least the baseline's)
    grid = _path_grid(lam_max, _LAM_MIN_RATIO[order], n)
    size = grid.size
    df_bound = _DfLowerBound(y, g, order)
    df_lb = np.array([df_bound(float(v)) for v in grid], dtype=np.float64)

    def threshold(df: np.ndarray) -> np.ndarray:
        # chosen at a λ of df ⇒ SURE < min(best, base − margin·guard), guard ≥ min(full, 2σ²√(2df))
        guard = np.minimum(full, 2.0 * s2 * np.sqrt(2.0 * df))
        return np.minimum(best, base_risk - margin * guard)

    sure = np.full(size, np.nan)  # SURE where solved
    rss_lb = np.full(size, np.nan)  # a lower bound on the exact solution's RSS there
    df_at = df_lb.copy()
    # λ_max (the path's first point) is the projection on the null space, solved exactly
    sure[0] = top_risk
    df_at[0] = top_df
    rss_lb[0] = sure[0] + d * s2 - 2.0 * s2 * df_at[0]
    probes = 0
    for rnd in range(SCREEN_ROUNDS + 1):
        solved = ~np.isnan(sure)
        thr = threshold(df_at)
        if np.any(solved & (sure < thr)):
            record.update(reason="leader: its SURE at a probed λ is below the threshold")
            record["probes"] = probes
            return False, record
        # RSS(λ) is nondecreasing in λ: at λ_j it is at least the RSS of any solved λ ≤ λ_j
        floor = np.where(solved, rss_lb, 0.0)
        floor = np.maximum.accumulate(floor[::-1])[::-1]
        bound = np.where(solved, sure, floor + 2.0 * s2 * df_lb - d * s2)
        open_ = np.flatnonzero(~solved & (bound < thr))
        record["lower_bound"] = float(np.min(bound))
        record["probes"] = probes
        if open_.size == 0:
            record["reason"] = (
                f"cannot be chosen: SURE bounded above the threshold at all {size} λ of its "
                f"path ({probes} solved)"
            )
            return True, record
        if solve is not None and rnd == 0:
            # order 1 on a chain: the descent (its solves cost about one path step each)
            return _descend(solve, grid, n, y, s2, df_lb, threshold, sure, rss_lb, df_at, record)
        # Cost only (never a choice): the probes below help only if, even with every probed
        # RSS at its largest possible value min(RSS(λ_max), ‖Δ‖² m λ²) (‖y − β̂‖ = ‖Δᵀû‖ ≤
        # ‖Δ‖ ‖û‖) and every probed SURE above its threshold, the rounds left could close
        # every λ; if not, the full path is computed now.
        hope = np.minimum(rss_lb[0], df_bound.norm2 * df_bound.m * grid**2)
        if rnd == SCREEN_ROUNDS or not _can_close(
            solved, rss_lb, hope, df_lb, thr, d * s2, 2.0 * s2, SCREEN_ROUNDS - rnd
        ):
            record["reason"] = (
                f"the bounds leave {open_.size} λ of its path open after {probes} solved: "
                "computed in full"
            )
            return False, record
        pick = open_[-SCREEN_PROBES:]  # the smallest λ: their RSS bounds every larger λ
        if order > 0 and float(df_lb[pick].max()) > SCREEN_MAX_DF:
            # a cold order-1 solve with a support this large costs more than the warm path
            record["reason"] = (
                f"its probes would have df ≥ {int(df_lb[pick].max())} > {SCREEN_MAX_DF}: "
                "computed in full"
            )
            return False, record
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", TrendFilterConvergenceWarning)
            res = trend_filter(
                y,
                sigma,
                g,
                order=order,
                lam=np.concatenate([[lam_max], grid[pick]]).tolist(),
                max_iter=SCREEN_MAX_ITER,
            )
        probes += pick.size
        path = res.params["path"]
        # the path table is in decreasing λ: λ_max first, then pick in increasing index
        gap = np.asarray(path["gap"][1:], dtype=np.float64)
        if not np.all(gap <= 1e-6):
            record["reason"] = "a probe did not converge: computed in full"
            record["probes"] = probes
            return False, record
        objective = np.asarray(path["objective"][1:], dtype=np.float64)
        rss = np.asarray(path["rss"][1:], dtype=np.float64)
        slack = np.sqrt(2.0 * np.maximum(gap * objective, 0.0))
        sure[pick] = np.asarray(path["sure"][1:], dtype=np.float64)
        df_at[pick] = np.asarray(path["df"][1:], dtype=np.float64)
        rss_lb[pick] = np.maximum(np.sqrt(rss) - slack, 0.0) ** 2
    raise AssertionError("unreachable")  # pragma: no cover


def _descend(
    solve: Callable[[float], Any],
    grid: np.ndarray,
    n: int,
    y: np.ndarray,
    s2: float,
    df_lb: np.ndarray,
    threshold: Callable[[np.ndarray], np.ndarray],
    sure: np.ndarray,
    rss_lb: np.ndarray,
    df_at: np.ndarray,
    record: dict[str, Any],
) -> tuple[bool, dict[str, Any]]:
    """The descent screen (``auto``'s docstring, "Screening"): whether the candidate whose
    path solves the λ of ``grid`` (``solve``, warm-started in any order) can be left out,
    solving some of them exactly; ``sure``, ``rss_lb`` and ``df_at`` hold what is known
    (λ_max solved) and are filled in.

    ``[0, k]`` is *closed* when every λ_j there has a lower bound on its SURE at or above
    its threshold: its exact SURE's if solved (the RSS of the exact solution is within
    ``√(2·gap)`` of the solve's, in norm), else the RSS floor of the solved λ below it
    plus ``2σ² df_lower − dσ²``.  The path stops after the first ``k ≥ n − 1`` whose SURE is
    not the smallest so far, so it visits no λ past a solved ``k ≥ n − 1`` with a solved
    ``j < k`` whose SURE is at most ``k``'s (both bounds certified).  The candidate is out
    once the closed prefix reaches such a ``k`` (or the last λ).  Order of the solves (cost
    only): a bisection for the last λ whose RSS closes every λ before it (the first probe
    at ``λ_{n−1}``), then λ after λ down the path until the stop is shown.  Any solve below
    its threshold, not certified, or past :data:`SCREEN_DESCENT_SOLVES` ends the screening
    (the full path is computed)."""
    d, size = y.size, grid.size
    sure_lb = np.where(np.isnan(sure), np.nan, sure)  # certified bounds on the exact SURE
    sure_ub = sure_lb.copy()
    solves = 0

    def run(j: int) -> bool:
        nonlocal solves
        if solves >= SCREEN_DESCENT_SOLVES:
            record["reason"] = f"the descent solved {solves} λ without deciding: computed in full"
            return False
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", TrendFilterConvergenceWarning)
            fit = solve(float(grid[j]))
        solves += 1
        record["probes"] = solves
        if not (fit.converged and fit.gap <= 1e-6):
            record["reason"] = "a probe did not converge: computed in full"
            return False
        r = y - fit.beta
        rss = float(r @ r)
        slack = math.sqrt(2.0 * max(fit.gap * fit.objective, 0.0))
        low, high = max(math.sqrt(rss) - slack, 0.0) ** 2, (math.sqrt(rss) + slack) ** 2
        extra = 2.0 * s2 * fit.df - d * s2
        sure[j], df_at[j], rss_lb[j] = rss + extra, float(fit.df), low
        sure_lb[j], sure_ub[j] = low + extra, high + extra
        if not sure_lb[j] >= float(threshold(df_at[j : j + 1])[0]):
            record["reason"] = "leader: its SURE at a probed λ is below the threshold"
            return False
        return True

    def prefix() -> int:
        """The largest ``k`` with ``[0, k]`` closed (−1 if none)."""
        solved = ~np.isnan(sure)
        floor = np.maximum.accumulate(np.where(solved, rss_lb, 0.0)[::-1])[::-1]
        bound = np.where(solved, sure_lb, floor + 2.0 * s2 * df_lb - d * s2)
        bound = np.where(np.isnan(bound), -np.inf, bound)
        bad = np.flatnonzero(~(bound >= threshold(df_at)))
        record["lower_bound"] = float(np.min(bound))
        return size - 1 if bad.size == 0 else int(bad[0]) - 1

    def out() -> bool:
        """The closed prefix reaches the path's last possible λ."""
        last = prefix()
        stop = size - 1
        best_ub = np.fmin.accumulate(np.where(np.isnan(sure_ub), np.inf, sure_ub))
        for k in range(max(n - 1, 1), min(last, size - 2) + 1):
            if not np.isnan(sure[k]) and best_ub[k - 1] <= sure_lb[k]:
                stop = k  # the path stops at k at the latest
                break
        if last < stop:
            return False
        # the smallest bound over the λ the path can visit
        solved = ~np.isnan(sure)
        floor = np.maximum.accumulate(np.where(solved, rss_lb, 0.0)[::-1])[::-1]
        bound = np.where(solved, sure_lb, floor + 2.0 * s2 * df_lb - d * s2)
        record["lower_bound"] = float(np.min(bound[: stop + 1]))
        return True

    def excluded() -> tuple[bool, dict[str, Any]]:
        record["reason"] = (
            f"cannot be chosen: the descent bounded its SURE above the threshold at every λ "
            f"its path can visit ({solves} solved)"
        )
        return True, record

    lo, hi, m = prefix(), size, n - 1
    while hi - lo > 1:  # bisection: lo closed, hi solved and not closing what is before it
        if not lo < m < hi:
            m = (lo + hi) // 2
        if not run(m):
            return False, record
        if out():
            return excluded()
        last = prefix()
        if last >= m:
            lo = last
        else:
            lo, hi = max(lo, last), m
        m = (lo + hi) // 2
    while True:  # down the path, λ after λ, until the stop is shown
        j = prefix() + 1
        if j >= size:
            return excluded()
        if not np.isnan(sure[j]):  # pragma: no cover - a solved λ is closed or ended it
            record["reason"] = "the descent could not close a solved λ: computed in full"
            return False, record
        if not run(j):
            return False, record
        if out():
            return excluded()


def _can_close(
    solved: np.ndarray,
    rss_lb: np.ndarray,
    hope: np.ndarray,
    df_lb: np.ndarray,
    thr: np.ndarray,
    noise: float,
    two_s2: float,
    rounds: int,
) -> bool:
    """Whether ``rounds`` rounds of probes could exclude every λ at best: each probe's RSS at
    its upper bound ``hope`` and its SURE above its threshold (``_screen_trend_filter``)."""
    solved, rss = solved.copy(), np.where(solved, rss_lb, 0.0)
    for _ in range(rounds):
        floor = np.maximum.accumulate(rss[::-1])[::-1]
        open_ = np.flatnonzero(~solved & (floor + two_s2 * df_lb - noise < thr))
        if open_.size == 0:
            return True
        pick = open_[-SCREEN_PROBES:]
        solved[pick] = True
        rss[pick] = hope[pick]
    floor = np.maximum.accumulate(rss[::-1])[::-1]
    return not np.any(~solved & (floor + two_s2 * df_lb - noise < thr))
