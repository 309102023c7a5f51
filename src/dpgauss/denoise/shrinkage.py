"""Linear and James–Stein shrinkage of a Gaussian release ``y = θ + N(0, σ²I)``.

Both estimators come with Stein's unbiased risk estimate (SURE) of the total squared
error ``E‖ŷ − θ‖²``.  For an estimator ``ŷ = y + g(y)`` with ``g`` weakly differentiable,
Stein's lemma gives the exact identity

    E‖ŷ − θ‖² = E[ ‖ŷ − y‖² + 2σ² ∇·ŷ(y) − dσ² ],

so ``‖ŷ − y‖² + 2σ² div ŷ − dσ²`` is unbiased; ``d`` is the number of entries of ``y``.
σ is public and exact in a Gaussian release, so this is exact in expectation.
"""

from __future__ import annotations

import functools
from typing import Literal

import numpy as np

from .._validation import NONNEGATIVE, REAL, as_real_array, broadcast_args, check_interval
from ._nonnegative import MARK, check_nonnegative, clipped_sure, positive_part
from .result import Denoised, check_noise

__all__ = ["james_stein", "posterior_mean"]


def posterior_mean(
    y: object,
    sigma: object,
    structure: object = None,
    *,
    prior_variance: object,
    prior_mean: object = 0.0,
) -> Denoised:
    """Bayes estimator for the Gaussian prior ``θ ~ N(m, w²I)``: ``m + w²/(w²+σ²)·(y − m)``.

    With square loss the Bayes estimator is the posterior mean (Balle & Wang 2018,
    Thm 10); for a Gaussian prior it is the linear shrinkage ``c·y`` with
    ``c = w²/(w²+σ²)`` toward the prior mean ``m`` (0 by default).  Its Bayes risk is
    ``d·σ²w²/(σ²+w²) < dσ²``.  ``w²`` must be known; :func:`james_stein` estimates it.

    Parameters
    ----------
    y : array_like of finite reals, any shape (the released vector)
    sigma : float > 0, the public noise standard deviation, or one per key (an array
        broadcastable to ``y``)
    structure : not used; accepted so that every denoiser is called alike
    prior_variance : float or array broadcastable to ``y.shape``, ``w² ≥ 0`` (finite);
        an array gives a different prior variance for every coordinate
    prior_mean : float or array broadcastable to ``y.shape``, ``m`` (default 0)

    With one σ per key (``sigma`` an array), ``cᵢ = w²/(w² + σᵢ²)`` and every σ² below is
    ``σᵢ²`` inside the sums.

    Returns
    -------
    Denoised
        ``risk`` is the exact SURE of this linear smoother ``ŷ = m + S(y − m)``,
        ``S = diag(c)``: ``‖ŷ − y‖² + 2σ² tr(S) − dσ² = Σ (1−cᵢ)²(yᵢ−mᵢ)² + 2σ² Σ cᵢ − dσ²``.
        Its error bars are exact: the posterior standard deviation ``√(cᵢ)·σᵢ``.
        ``params`` holds ``shrinkage`` (the factor ``c``; an array if it varies) and
        ``df = tr(S)``.
    """
    arr, s = check_noise(y, sigma)
    w2 = as_real_array(prior_variance, "prior_variance")
    check_interval(w2, "prior_variance", NONNEGATIVE, "a prior variance w² ≥ 0, finite")
    m = as_real_array(prior_mean, "prior_mean")
    check_interval(m, "prior_mean", REAL)
    yb, w2b, mb = broadcast_args(y=arr, prior_variance=w2, prior_mean=m)
    if yb.shape != arr.shape:
        raise ValueError(
            "prior_variance and prior_mean must broadcast to the shape of y without enlarging "
            f"it: y {arr.shape}, prior_variance {w2.shape}, prior_mean {m.shape}"
        )
    s2 = np.broadcast_to(np.asarray(s) ** 2, arr.shape)
    c = w2b / (w2b + s2)  # σ > 0, so the denominator is positive
    resid = yb - mb
    estimate = mb + c * resid
    df = float(c.sum())
    risk = float(np.sum(((1.0 - c) * resid) ** 2)) + 2.0 * float(np.sum(s2 * c)) - float(s2.sum())
    shrink: float | np.ndarray = (
        float(w2) / (float(w2) + float(s) ** 2) if w2.ndim == 0 and np.ndim(s) == 0 else c
    )
    return Denoised(
        np.array(estimate, dtype=np.float64),
        risk,
        "posterior_mean",
        {"shrinkage": shrink, "df": df, "prior_variance": _summary(w2), "prior_mean": _summary(m)},
        sigma=s,
        scale=np.sqrt(c) * s,  # the posterior standard deviation √(w²σ²/(w²+σ²))
        observed=arr,
    )


def _summary(arr: np.ndarray) -> float | np.ndarray:
    return float(arr) if arr.ndim == 0 else arr


def james_stein(
    y: object,
    sigma: object,
    structure: object = None,
    *,
    target: Literal["zero", "mean"] = "zero",
    nonnegative: bool = False,
) -> Denoised:
    """Positive-part James–Stein shrinkage, toward zero or toward the mean of ``y``.

    Toward zero (``d ≥ 3``)::

        ŷ = (1 − (d−2)σ²/‖y‖²)₊ · y

    Toward the mean (``d ≥ 4``), with ``ȳ`` the average entry and ``r = y − ȳ·1``::

        ŷ = ȳ·1 + (1 − (d−3)σ²/‖r‖²)₊ · r

    Neither needs the prior variance: it is the empirical-Bayes version of
    :func:`posterior_mean` and does almost as well as the Bayes estimator for every
    isotropic Gaussian prior at once (Balle & Wang 2018, Thm 11; James & Stein 1961).
    Without the positive part it already dominates ``ŷ = y`` for ``d ≥ 3`` (``d ≥ 4``
    toward the mean); the positive part dominates it in turn.

    ``risk`` is the exact SURE, piecewise (the estimator is continuous and piecewise
    smooth, hence weakly differentiable, so Stein's lemma applies across the kink):

    * toward zero, ``‖y‖² > (d−2)σ²``: ``dσ² − (d−2)²σ⁴/‖y‖²``
      (divergence ``d − (d−2)²σ²/‖y‖²``); otherwise ``ŷ = 0`` and SURE ``= ‖y‖² − dσ²``;
    * toward the mean, ``‖r‖² > (d−3)σ²``: ``dσ² − (d−3)²σ⁴/‖r‖²`` (divergence
      ``1 + (d−1) − (d−3)²σ²/‖r‖²``: the mean contributes 1, the projection ``r = Py``
      has trace ``d−1`` and ``∇·(Py/‖Py‖²) = (d−3)/‖Py‖²``); otherwise ``ŷ = ȳ·1``,
      divergence 1 and SURE ``= ‖r‖² − (d−2)σ²``.

    With one σ per key the shrinkage is that of the whitened vector ``y/σ`` (so it is
    the classical estimator when all σᵢ are equal): ``Q = Σ (yᵢ − c)²/σᵢ²`` replaces
    ``‖r‖²/σ²``, the centre ``c`` is the precision-weighted mean ``Σ wᵢyᵢ / Σ wᵢ``
    (``wᵢ = 1/σᵢ²``), ``ŷ = c + (1 − k/Q)₊ (y − c)`` with ``k = d−2`` (``d−3``), and SURE
    is ``‖ŷ − y‖² + 2 Σ σᵢ² ∂ŷᵢ/∂yᵢ − Σ σᵢ²`` with
    ``Σ σᵢ² ∂ŷᵢ/∂yᵢ = d/W + f(Σσᵢ² − d/W) + 2k Σ(yᵢ − c)²/Q²`` (``W = Σ wᵢ``; the ``d/W``
    terms only toward the mean; ``f`` the factor), since ``∂Q/∂yᵢ = 2wᵢ(yᵢ − c)``.

    For ``d ≤ 2`` toward zero or ``d ≤ 3`` toward the mean the factor ``d−2`` (``d−3``) is
    not positive and shrinkage cannot help: ``y`` is returned unchanged with risk ``dσ²``
    and ``params["unchanged"]`` explains why.

    Parameters
    ----------
    y : array_like of finite reals, any shape; ``d`` is its number of entries
    sigma : float > 0, the public noise standard deviation, or one per key
    structure : not used; accepted so that every denoiser is called alike
    target : ``"zero"`` (default) or ``"mean"``
    nonnegative : bool, default False.  True returns the positive part ``max(ŷ, 0)``
        (counts and sums of values ≥ 0: :mod:`dpgauss.denoise._nonnegative`), with the
        exact SURE of the clipped estimator, whose divergence keeps the keys with
        ``ŷᵢ > 0`` only: ``Σ_{ŷᵢ>0} σᵢ² ∂ŷᵢ/∂yᵢ`` with
        ``∂ŷᵢ/∂yᵢ = f + 2k wᵢ rᵢ²/Q²`` toward zero and
        ``wᵢ/W + f(1 − wᵢ/W) + 2k wᵢ rᵢ²/Q²`` toward the mean (``wᵢ/W`` alone, or 0 toward
        zero, where the factor ``f`` is 0); ``params["nonnegative"] = True`` and ``df`` is
        ``Σ_{ŷᵢ>0} ∂ŷᵢ/∂yᵢ``.

    Returns
    -------
    Denoised
        ``params``: ``target``, ``shrinkage`` (the factor in ``[0, 1]``), ``df`` (the
        divergence), ``center`` (0 or ``ȳ``).
    """
    clip = check_nonnegative(nonnegative)
    arr, s = check_noise(y, sigma)
    if not isinstance(target, str) or target not in ("zero", "mean"):
        raise ValueError(f"target must be 'zero' or 'mean'; got {target!r}")
    d = arr.size
    s2 = np.broadcast_to(np.asarray(s, dtype=np.float64) ** 2, arr.shape)
    noise = float(s2.sum())  # Σσᵢ², dσ² for one σ
    k = d - 2 if target == "zero" else d - 3
    minimum = 3 if target == "zero" else 4
    refit = functools.partial(james_stein, sigma=s, target=target, nonnegative=clip)
    if k <= 0:
        kept, risk0 = arr.copy(), noise
        extra: dict[str, object] = {}
        if clip:
            kept = positive_part(arr)
            risk0 = clipped_sure(arr, kept, s, float(np.sum(s2[arr > 0])))
            extra = {MARK: True}
        return Denoised(
            kept,
            risk0,
            "james_stein",
            {
                **extra,
                "target": target,
                "shrinkage": 1.0,
                "df": float(d),
                "center": 0.0,
                "unchanged": (
                    f"James–Stein toward the {target} needs d ≥ {minimum} entries "
                    f"(got d = {d}); y is returned unchanged with risk dσ²"
                ),
            },
            sigma=s,
            scale=np.sqrt(s2).copy(),
            observed=arr,
        )
    w = 1.0 / s2
    if target == "mean":
        center = float(arr.mean()) if np.ndim(s) == 0 else float(np.sum(w * arr) / np.sum(w))
    else:
        center = 0.0
    r = arr - center
    q = float(np.sum(w * r * r))  # ‖r‖² in units of the noise
    q1 = float(np.sum(r * r))
    base_div = d / float(np.sum(w)) if target == "mean" else 0.0  # Σσᵢ² ∂ȳ/∂yᵢ
    base_df = 1.0 if target == "mean" else 0.0  # divergence of the centre
    if q > k:
        factor = 1.0 - k / q
        estimate = center + factor * r
        div = base_div + factor * (noise - base_div) + 2.0 * k * q1 / (q * q)
        df = base_df + factor * (d - base_df) + 2.0 * k / q
    else:
        factor = 0.0
        estimate = np.full_like(arr, center)
        div, df = base_div, base_df
    if clip:
        # ∂ŷᵢ/∂yᵢ at every key (the docstring), kept where ŷᵢ > 0
        share = w / float(np.sum(w)) if target == "mean" else np.zeros(arr.shape)
        diag = share + factor * (1.0 - share) + (2.0 * k * w * r * r / (q * q) if q > k else 0.0)
        clipped = positive_part(estimate)
        pos = clipped > 0
        return Denoised(
            clipped,
            clipped_sure(arr, clipped, s, float(np.sum((s2 * diag)[pos]))),
            "james_stein",
            {
                "target": target,
                "shrinkage": float(factor),
                "df": float(np.sum(diag[pos])),
                "center": center,
                MARK: True,
            },
            sigma=s,
            refit=refit,
            observed=arr,
        )
    if np.ndim(s) == 0 and q > k:  # the classical closed form (no cancellation)
        ks2 = k * float(s) * float(s)
        risk = noise - ks2 * (ks2 / q1)  # no σ⁴ formed: finite for every σ allowed
    else:
        risk = float(np.sum((estimate - arr) ** 2)) + 2.0 * div - noise
    return Denoised(
        np.array(estimate, dtype=np.float64),
        float(risk),
        "james_stein",
        {"target": target, "shrinkage": float(factor), "df": float(df), "center": center},
        sigma=s,
        refit=refit,
        observed=arr,
    )
