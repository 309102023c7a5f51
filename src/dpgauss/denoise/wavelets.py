"""Wavelet shrinkage of a released signal or grid (SureShrink with orthonormal wavelets).

An orthonormal transform ``W`` keeps white noise white: if ``y = θ + N(0, σ²I)`` then
``Wy = Wθ + N(0, σ²I)``, and a piecewise-smooth ``θ`` has few large wavelet coefficients.
Soft thresholding the detail coefficients and transforming back is therefore nearly
minimax over Besov balls (Donoho & Johnstone 1994, 1995) and, as a post-processing of a
Gaussian release, costs no privacy (Balle & Wang 2018, Section 4 and the NYC-taxi heat
maps of Section 5.3; the coordinatewise guarantee is their Thm 12).

Implementation (PyWavelets, an optional extra: ``pip install 'dpgauss[wavelets]'``):

* ``mode="periodization"``: for an orthogonal wavelet and a length divisible by
  ``2**level`` along every axis this is an exactly orthonormal transform (Parseval).  The
  wavelet is checked to be orthonormal (biorthogonal wavelets and the FIR-approximate
  discrete Meyer ``"dmey"`` are refused).
* Lengths not divisible by ``2**level`` are padded, along each axis, to the next multiple
  by a straight line from the last sample back to the first (so that the periodic
  extension has no jump), transformed, thresholded, transformed back and cropped.
  Padding is linear in ``y``, so the estimator stays weakly differentiable and SURE stays
  exact; the divergence then weighs each kept coefficient ``j`` by ``⟨w_j, PCw_j⟩``
  (``P`` the padding, ``C`` the crop, ``w_j`` the basis vector) instead of 1, computed per
  axis from translates of one prototype per level with FFTs.
* Approximation (scaling) coefficients are never thresholded.
* ``threshold="sure"`` picks one λ per level (all orientations of a 2-D level share it)
  by minimising soft thresholding's SURE over that level's coefficients (SureShrink,
  Donoho & Johnstone 1995); with padding the coefficient noise is slightly coloured near
  the boundary, which affects only this choice, not the validity of the reported SURE.
* One σ per key (``σᵢ`` differing): coefficient ``j`` then has noise variance
  ``v_j = Σᵢ σᵢ² (Pᵀw_j)ᵢ²`` (``Pᵀw_j`` the basis vector folded back onto the kept samples
  by the padding's adjoint) and is soft-thresholded at ``t·√v_j``, with one ``t`` per level
  chosen by the weighted SURE rule of :func:`~dpgauss.denoise.thresholding.weighted_sure_threshold`
  (or ``t = √(2 ln N)``, or given).  The estimate's exact SURE is
  ``‖ŷ − y‖² − Σσᵢ² + 2 Σ_{kept or approximation j} Σᵢ σᵢ² (Cw_j)ᵢ (Pᵀw_j)ᵢ``.  Both sums
  are sparse matrix products over the translates of one prototype per level and axis
  (``_axis_matrix``), with no cancellation (the variances are sums of squares), so σ may
  range over many decades.
"""

from __future__ import annotations

import functools
import math
import numbers
import warnings
from types import ModuleType
from typing import Any

import numpy as np
import scipy.sparse as sp

from .._optional import require
from .._validation import NONNEGATIVE, as_real_array, check_interval
from ._nonnegative import MARK, check_nonnegative, clipped_sure, positive_part
from .result import Denoised, check_noise
from .structure import as_structure
from .thresholding import (
    _threshold_arg,
    sure_threshold,
    universal_threshold,
    weighted_sure_threshold,
)

__all__ = ["wavelet_denoise"]

_MODE = "periodization"
_ORTHONORMAL_TOL = 1e-10


def _import_pywt() -> ModuleType:
    return require("pywt", "wavelets", "wavelet denoising (PyWavelets)")


def orthonormal_wavelet(wavelet: object) -> Any:
    """Return ``pywt.Wavelet(wavelet)`` after checking that its filter bank is orthonormal.

    The filters must satisfy ``Σ h[k]h[k+2m] = δ_m`` (low and high pass), be orthogonal to
    each other at even shifts, and reconstruct with the time-reversed analysis filters.
    """
    pywt = _import_pywt()
    if isinstance(wavelet, str):
        try:
            wav = pywt.Wavelet(wavelet)
        except ValueError:
            raise ValueError(
                "wavelet must name a discrete orthogonal wavelet known to PyWavelets "
                f"(e.g. 'haar', 'db4', 'sym8', 'coif2'); got {wavelet!r}"
            ) from None
    elif isinstance(wavelet, pywt.Wavelet):
        wav = wavelet
    else:
        raise TypeError(
            f"wavelet must be a wavelet name or a pywt.Wavelet; got {type(wavelet).__name__}"
        )
    lo, hi = np.asarray(wav.dec_lo, float), np.asarray(wav.dec_hi, float)
    rec_lo, rec_hi = np.asarray(wav.rec_lo, float), np.asarray(wav.rec_hi, float)
    length = lo.size
    lags = np.arange(-(length - 1), length)
    even = lags % 2 == 0
    delta = (lags == 0).astype(float)
    err = max(
        np.abs(np.correlate(lo, lo, "full") - delta)[even].max(),
        np.abs(np.correlate(hi, hi, "full") - delta)[even].max(),
        np.abs(np.correlate(lo, hi, "full"))[even].max(),
        np.abs(rec_lo - lo[::-1]).max() if rec_lo.size == length else math.inf,
        np.abs(rec_hi - hi[::-1]).max() if rec_hi.size == length else math.inf,
    )
    if not (wav.orthogonal and err <= _ORTHONORMAL_TOL):
        raise ValueError(
            f"wavelet must be orthonormal so that the coefficient noise stays white with the "
            f"same σ; {wav.name!r} is not (filter orthonormality error {err:.2g}). Use an "
            "orthogonal family such as 'haar', 'db<N>', 'sym<N>' or 'coif<N>'"
        )
    return wav


def _level(level: object, shape: tuple[int, ...], wav: Any) -> int:
    pywt = _import_pywt()
    top = math.floor(math.log2(min(shape)))
    if level is None:
        auto = min(pywt.dwt_max_level(n, wav.dec_len) for n in shape)
        return max(1, min(auto, top))
    if isinstance(level, bool) or not isinstance(level, numbers.Integral):
        raise TypeError(f"level must be an integer or None; got {type(level).__name__}")
    if not 1 <= int(level) <= top:
        raise ValueError(
            f"level must be in [1, {top}] for y of shape {shape} (2**level may not exceed the "
            f"shortest axis); got {int(level)}"
        )
    return int(level)


def _bridge(n: int, n_pad: int) -> np.ndarray:
    """Weights ``t`` of the padding ``x[n + q] = (1 − t_q)·x[n−1] + t_q·x[0]``."""
    p = n_pad - n
    return np.arange(1, p + 1, dtype=np.float64) / (p + 1)


def _pad(x: np.ndarray, padded_shape: tuple[int, ...]) -> np.ndarray:
    """Pad every axis with the straight line from its last sample back to its first."""
    for axis, (n, n_pad) in enumerate(zip(x.shape, padded_shape, strict=True)):
        if n_pad == n:
            continue
        t = _bridge(n, n_pad)
        first = np.take(x, [0], axis=axis)
        last = np.take(x, [n - 1], axis=axis)
        shape = [1] * x.ndim
        shape[axis] = t.size
        t = t.reshape(shape)
        x = np.concatenate([x, (1.0 - t) * last + t * first], axis=axis)
    return x


def _correlate(kernel_fft: np.ndarray, f: np.ndarray) -> np.ndarray:
    """``c(s) = Σᵢ K(i)·f((i − s) mod N)`` for every shift ``s``, by FFT."""
    return np.fft.irfft(kernel_fft * np.conj(np.fft.rfft(f)), n=f.size)


_FilterBank = tuple[tuple[float, ...], ...]


def _filter_bank(wav: Any) -> _FilterBank:
    return tuple(tuple(float(v) for v in f) for f in wav.filter_bank)


@functools.lru_cache(maxsize=256)
def _axis_weights(bank: _FilterBank, n: int, n_pad: int, kind: str, level: int) -> np.ndarray:
    """``⟨w, PCw⟩`` for every level-``level`` basis vector of one axis (see module doc).

    At level ``l`` the periodized basis vectors are the translates by ``2**l·k`` of one
    prototype (``φ_l`` for ``kind="a"``, approximation; ``ψ_l`` for ``"d"``, detail).
    With ``K`` the indicator of the kept samples ``[0, n)`` and ``A``/``B`` the padding
    weights on ``x[n−1]``/``x[0]``,
    ``⟨w_s, PCw_s⟩ = Σ K·w_s² + w_s(n−1)·Σ A·w_s + w_s(0)·Σ B·w_s``: one circular
    correlation each, for all translates at once.  Cached: it depends only on the
    filters, the lengths and the level.
    """
    pywt = _import_pywt()
    wav = pywt.Wavelet("cached", filter_bank=bank)
    t = _bridge(n, n_pad)
    kept = np.zeros(n_pad)
    kept[:n] = 1.0
    on_last = np.zeros(n_pad)
    on_last[n:] = 1.0 - t
    on_first = np.zeros(n_pad)
    on_first[n:] = t
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="Level value", category=UserWarning)
        coeffs = pywt.wavedec(np.zeros(n_pad), wav, mode=_MODE, level=level)
        coeffs[0 if kind == "a" else 1][0] = 1.0
        proto = pywt.waverec(coeffs, wav, mode=_MODE)
    shifts = np.arange(0, n_pad, 2**level)
    energy = _correlate(np.fft.rfft(kept), proto * proto)[shifts]
    to_last = _correlate(np.fft.rfft(on_last), proto)[shifts]
    to_first = _correlate(np.fft.rfft(on_first), proto)[shifts]
    at_last = proto[(n - 1 - shifts) % n_pad]  # w_s(n − 1)
    at_first = proto[-shifts % n_pad]  # w_s(0)
    out = energy + at_last * to_last + at_first * to_first
    out.setflags(write=False)
    return out


def _band_weights(
    bank: _FilterBank, sizes: list[tuple[int, int]], key: str, level: int
) -> np.ndarray | None:
    """Outer product over axes of the per-axis weights of a band; None when all are 1.

    ``key`` has one letter per axis, 'a' (scaling function) or 'd' (wavelet), as in
    ``pywt.wavedecn``; ``sizes`` holds ``(n, n_pad)`` per axis.
    """
    if all(n == n_pad for n, n_pad in sizes):
        return None
    out = np.ones(())
    for (n, n_pad), kind in zip(sizes, key, strict=True):
        if n == n_pad:
            vec = np.ones(n_pad >> level)
        else:
            vec = _axis_weights(bank, n, n_pad, kind, level)
        out = np.multiply.outer(out, vec)
    return out


@functools.lru_cache(maxsize=256)
def _axis_matrices(
    bank: _FilterBank, n: int, n_pad: int, kind: str, level: int
) -> tuple[sp.csr_matrix, sp.csr_matrix]:
    """``(V, G)`` for one axis: row ``k`` of ``V`` is ``(Pᵀw_k)²`` and of ``G`` is
    ``(Cw_k)·(Pᵀw_k)`` (elementwise, on the ``n`` kept samples), ``w_k`` the level-``level``
    basis vector (``kind`` ``"a"`` scaling, ``"d"`` wavelet) translated by ``2**level·k``;
    ``P`` the padding and ``C`` the crop of this axis (module doc).  ``V σ²`` are the
    coefficients' noise variances, ``G σ²`` their terms of SURE's weighted divergence."""
    pywt = _import_pywt()
    wav = pywt.Wavelet("cached", filter_bank=bank)
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="Level value", category=UserWarning)
        coeffs = pywt.wavedec(np.zeros(n_pad), wav, mode=_MODE, level=level)
        coeffs[0 if kind == "a" else 1][0] = 1.0
        proto = pywt.waverec(coeffs, wav, mode=_MODE)  # periodized: already wrapped
    support = np.flatnonzero(proto)
    shifts = np.arange(0, n_pad, 2**level)
    rows = np.repeat(np.arange(shifts.size), support.size)
    cols = (shifts[:, None] + support[None, :]).ravel() % n_pad
    vals = np.tile(proto[support], shifts.size)
    inside = cols < n
    crop = sp.csr_matrix((vals[inside], (rows[inside], cols[inside])), shape=(shifts.size, n))
    # the padding's adjoint folds x[n + q] = (1 − t_q)·x[n−1] + t_q·x[0] back
    q = cols[~inside] - n
    t = _bridge(n, n_pad)[q] if q.size else np.zeros(0)
    r_out, v_out = rows[~inside], vals[~inside]
    folded = sp.csr_matrix(
        (
            np.concatenate([vals[inside], (1.0 - t) * v_out, t * v_out]),
            (
                np.concatenate([rows[inside], r_out, r_out]),
                np.concatenate([cols[inside], np.full(q.size, n - 1), np.zeros(q.size, int)]),
            ),
        ),
        shape=(shifts.size, n),
    )  # duplicates (the folded entries) are summed
    return sp.csr_matrix(folded.multiply(folded)), sp.csr_matrix(crop.multiply(folded))


def _band_sums(
    bank: _FilterBank, sizes: list[tuple[int, int]], key: str, level: int, var: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """``(v, g)`` for one band: per coefficient, its noise variance and its term of SURE's
    weighted divergence, ``M₁ σ² M₂ᵀ`` with the per-axis matrices of :func:`_axis_matrices`
    (the basis is a tensor product, so the sums are separable)."""
    out_v, out_g = var, var
    for axis, ((n, n_pad), kind) in enumerate(zip(sizes, key, strict=True)):
        v_mat, g_mat = _axis_matrices(bank, n, n_pad, kind, level)
        out_v = _apply(v_mat, out_v, axis)
        out_g = _apply(g_mat, out_g, axis)
    return out_v, out_g


def _apply(mat: sp.csr_matrix, x: np.ndarray, axis: int) -> np.ndarray:
    """``mat`` applied along ``axis`` of ``x``."""
    moved = np.moveaxis(x, axis, 0)
    flat = moved.reshape(moved.shape[0], -1)
    res = np.asarray(mat @ flat).reshape((mat.shape[0], *moved.shape[1:]))
    return np.moveaxis(res, 0, axis)


def wavelet_denoise(
    y: object,
    sigma: object,
    structure: object = None,
    *,
    wavelet: object = "haar",
    level: int | None = None,
    threshold: object = "sure",
    nonnegative: bool = False,
) -> Denoised:
    """Soft-threshold the detail coefficients of an orthonormal wavelet transform of ``y``.

    ``ŷ = C Wᵀ η_λ(W P y)`` with ``W`` the periodized orthonormal DWT (PyWavelets,
    ``mode="periodization"``), ``η_λ`` soft thresholding applied to detail coefficients
    only (approximation coefficients pass unchanged), ``P`` the padding and ``C`` the crop
    described in the module doc (both the identity when every length is divisible by
    ``2**level``).  Donoho & Johnstone (1994, 1995); Balle & Wang (2018), Section 4 and
    Thm 12 (soft thresholding), Section 5.3 (wavelet denoising of private heat maps).

    Parameters
    ----------
    y : array_like of finite reals, 1-D (a signal) or 2-D (a grid), at least 2 entries
        along every axis
    sigma : float > 0, the public noise standard deviation, or one per key (an array of
        ``y``'s shape): coefficient ``j`` is then thresholded at ``t·√v_j``, ``v_j`` its
        exact noise variance, and every threshold below is such a multiplier ``t`` (the
        universal one is ``√(2 ln N)``; module doc)
    structure : ``None`` (``y`` is shaped as its signal or grid) or a grid shape (or a
        :class:`~dpgauss.denoise.structure.Structure` with one): ``y`` is read as that grid
        in C order and the estimate returned in ``y``'s own shape
    wavelet : a name (``"haar"`` default, ``"db4"``, ``"sym8"``, …) or a ``pywt.Wavelet``;
        must be orthonormal (checked)
    level : number of decomposition levels, ``1 ≤ level ≤ log2(shortest axis)``; default
        ``pywt.dwt_max_level`` of the shortest axis (at least 1)
    threshold : ``"sure"`` (default: one λ per level minimising SURE), ``"universal"``
        (``σ√(2 ln N)``, ``N = y.size``, at every level), a number ``λ ≥ 0`` (every
        level) or a sequence of ``level`` numbers, finest level first (what
        ``params["thresholds"]`` reports, so a fit can be repeated exactly)
    nonnegative : bool, default False.  True returns the positive part ``max(ŷ, 0)``
        (counts and sums of values ≥ 0) with its exact SURE
        ``‖max(ŷ, 0) − y‖² + 2 Σ_{ŷᵢ>0} σᵢ² Jᵢᵢ − Σσᵢ²``, ``Jᵢᵢ = Σ_{kept or approximation j}
        (Cw_j)ᵢ (Pᵀw_j)ᵢ`` the diagonal of the Jacobian ``C Wᵀ D W P`` (sparse products
        over the translates of one prototype per level and axis, as for SURE itself;
        ``df`` is ``Σ_{ŷᵢ>0} Jᵢᵢ``).  The thresholds are still chosen by the unclipped SURE.
        ``params["nonnegative"] = True``.

    Returns
    -------
    Denoised
        ``risk`` is the exact SURE ``‖ŷ − y‖² + 2σ²·div ŷ − Nσ²`` with
        ``div ŷ = Σ_{kept or approximation j} ⟨w_j, PCw_j⟩``, which is
        ``#approximation + #{|z_j| > λ}`` without padding, where it equals the
        coefficient-domain SURE ``Σ min(z_j², λ²) + 2σ²·div − Nσ²`` by Parseval.  It is
        unbiased for a fixed or universal threshold; with ``threshold="sure"`` it is SURE at
        the minimising thresholds, which is optimistic (one minimisation per level: by
        about 3–5 % of ``Nσ²`` in Monte Carlo at ``N ≈ 1000``).  ``params``: ``wavelet``,
        ``level``, ``threshold`` (the rule), ``thresholds`` (λ per level, finest level
        first), ``df`` (the divergence), ``padded_shape``.
    """
    arr, s = check_noise(y, sigma)
    clip = check_nonnegative(nonnegative)
    given_shape = arr.shape
    known = as_structure(structure, arr.size)
    if known.grid is not None:
        arr = arr.reshape(known.grid)
        if isinstance(s, np.ndarray):
            s = s.reshape(known.grid)
    elif known.graph is not None:
        raise ValueError(
            "wavelet_denoise needs a grid shape as structure (a tuple of 1 or 2 integers), "
            "not a graph; graph_wavelet_denoise works on graphs"
        )
    if arr.ndim not in (1, 2):
        raise ValueError(f"y must be 1-D (a signal) or 2-D (a grid); got shape {arr.shape}")
    if min(arr.shape) < 2:
        raise ValueError(f"y must have at least 2 entries along every axis; got shape {arr.shape}")
    wav = orthonormal_wavelet(wavelet)
    levels = _level(level, arr.shape, wav)
    per_level = _per_level(threshold, levels)
    rule = "fixed" if per_level is not None else _threshold_arg(threshold, ("sure", "universal"))
    pywt = _import_pywt()
    block = 2**levels
    padded_shape = tuple(-(-n // block) * block for n in arr.shape)
    x = _pad(arr, padded_shape)
    with warnings.catch_warnings():
        # The transform stays orthonormal when the filter is longer than a coarse level.
        warnings.filterwarnings("ignore", message="Level value", category=UserWarning)
        coeffs = pywt.wavedecn(x, wav, mode=_MODE, level=levels)
    bank = _filter_bank(wav)
    sizes = list(zip(arr.shape, padded_shape, strict=True))
    approx_key = "a" * arr.ndim
    if isinstance(s, np.ndarray):
        return _per_key(
            arr,
            s,
            coeffs,
            wav,
            bank,
            sizes,
            levels,
            per_level,
            rule,
            padded_shape,
            given_shape,
            known.grid is not None,
            clip,
        )
    w_approx = _band_weights(bank, sizes, approx_key, levels)
    df = float(coeffs[0].size if w_approx is None else w_approx.sum())
    thresholds: list[float] = [0.0] * levels
    shrunk: list[Any] = [coeffs[0]]
    masks: list[tuple[str, int, np.ndarray]] = [(approx_key, levels, np.ones(coeffs[0].shape))]
    for i, bands in enumerate(coeffs[1:]):
        lev = levels - i  # coeffs[1] is the coarsest detail level
        if per_level is not None:
            lam = per_level[lev - 1]
        elif rule == "sure":
            z = np.concatenate([b.ravel() for b in bands.values()])
            lam = sure_threshold(np.abs(z), s)[0]
        elif rule == "universal":
            lam = universal_threshold(s, arr.size)
        else:
            lam = float(rule)
        thresholds[lev - 1] = lam
        new = {}
        for key, band in bands.items():
            kept = np.abs(band) > lam
            masks.append((key, lev, kept.astype(np.float64)))
            new[key] = np.where(kept, band - np.sign(band) * lam, 0.0)
            weights = _band_weights(bank, sizes, key, lev)
            df += float(np.count_nonzero(kept) if weights is None else weights[kept].sum())
        shrunk.append(new)
    estimate = _reconstruct(shrunk, wav, arr.shape)
    grid_shape = arr.shape
    d = arr.size
    risk = float(np.sum((estimate - arr) ** 2)) + 2.0 * s * s * df - d * s * s
    params: dict[str, Any] = {
        "wavelet": wav.name,
        "level": levels,
        "threshold": rule if isinstance(rule, str) and rule != "fixed" else thresholds,
        "thresholds": thresholds,
        "df": df,
        "padded_shape": padded_shape,
    }
    if clip:
        diag = _jacobian_diagonal(bank, sizes, masks)
        estimate = positive_part(estimate)
        pos = estimate > 0
        risk = clipped_sure(arr, estimate, s, s * s * float(diag[pos].sum()))
        params["df"] = float(diag[pos].sum())
        params[MARK] = True
    return Denoised(
        estimate.reshape(given_shape),
        risk,
        "wavelet",
        params,
        sigma=s,
        refit=functools.partial(
            wavelet_denoise,
            sigma=s,
            structure=grid_shape if known.grid is not None else None,
            wavelet=wav,
            level=levels,
            threshold=tuple(thresholds),
            nonnegative=clip,
        ),
        observed=arr.reshape(given_shape),
    )


def _jacobian_diagonal(
    bank: _FilterBank, sizes: list[tuple[int, int]], masks: list[tuple[str, int, np.ndarray]]
) -> np.ndarray:
    """``Jᵢᵢ = Σ_j D_j (Cw_j)ᵢ (Pᵀw_j)ᵢ`` for every key: the diagonal of the Jacobian
    ``C Wᵀ D W P`` of the wavelet estimate, ``D`` the kept coefficients (``masks``: per
    band its key, level and 0/1 array).  The basis is a tensor product, so per band it is
    ``G₁ᵀ D G₂`` with the per-axis matrices ``G`` of :func:`_axis_matrices`."""
    out = np.zeros(tuple(n for n, _ in sizes))
    for key, lev, mask in masks:
        part = mask
        for axis, ((n, n_pad), kind) in enumerate(zip(sizes, key, strict=True)):
            g_mat = _axis_matrices(bank, n, n_pad, kind, lev)[1]
            part = _apply(sp.csr_matrix(g_mat.T), part, axis)
        out += part
    return out


def _reconstruct(coeffs: list[Any], wav: Any, shape: tuple[int, ...]) -> np.ndarray:
    """The inverse transform of ``coeffs``, cropped to ``shape`` (``C Wᵀ``)."""
    pywt = _import_pywt()
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="Level value", category=UserWarning)
        full = pywt.waverecn(coeffs, wav, mode=_MODE)
    return np.ascontiguousarray(full[tuple(slice(0, n) for n in shape)])


def _per_key(
    arr: np.ndarray,
    s: np.ndarray,
    coeffs: list[Any],
    wav: Any,
    bank: _FilterBank,
    sizes: list[tuple[int, int]],
    levels: int,
    per_level: list[float] | None,
    rule: str | float,
    padded_shape: tuple[int, ...],
    given_shape: tuple[int, ...],
    on_grid: bool,
    clip: bool = False,
) -> Denoised:
    """:func:`wavelet_denoise` with one σ per key: coefficient ``j`` is thresholded at
    ``t·√v_j`` (module doc), ``t`` one number per level."""
    var = s * s
    ones = np.ones(arr.shape)
    approx_key = "a" * arr.ndim
    divergence = float(_band_sums(bank, sizes, approx_key, levels, var)[1].sum())
    df = float(_band_sums(bank, sizes, approx_key, levels, ones)[1].sum())
    thresholds: list[float] = [0.0] * levels
    shrunk: list[Any] = [coeffs[0]]
    masks: list[tuple[str, int, np.ndarray]] = [(approx_key, levels, np.ones(coeffs[0].shape))]
    for i, bands in enumerate(coeffs[1:]):
        lev = levels - i  # coeffs[1] is the coarsest detail level
        noise = {key: _band_sums(bank, sizes, key, lev, var) for key in bands}
        # |z_j| / √v_j (a coefficient with v_j = 0 is noise- and signal-free: ratio 0)
        ratio = {
            key: np.divide(
                np.abs(band),
                np.sqrt(noise[key][0]),
                out=np.zeros(band.shape),
                where=noise[key][0] > 0,
            )
            for key, band in bands.items()
        }
        if per_level is not None:
            t = per_level[lev - 1]
        elif rule == "sure":
            t = weighted_sure_threshold(
                np.concatenate([r.ravel() for r in ratio.values()]),
                np.concatenate([noise[key][0].ravel() for key in bands]),
            )[0]
        elif rule == "universal":
            t = universal_threshold(1.0, arr.size)
        else:
            t = float(rule)
        thresholds[lev - 1] = t
        new = {}
        for key, band in bands.items():
            kept = ratio[key] > t  # decided in units of √v_j, as the rule chose t
            masks.append((key, lev, kept.astype(np.float64)))
            new[key] = np.where(kept, band - np.sign(band) * t * np.sqrt(noise[key][0]), 0.0)
            divergence += float(noise[key][1][kept].sum())
            df += float(_band_sums(bank, sizes, key, lev, ones)[1][kept].sum())
        shrunk.append(new)
    estimate = _reconstruct(shrunk, wav, arr.shape)
    risk = float(np.sum((estimate - arr) ** 2)) + 2.0 * divergence - float(var.sum())
    params: dict[str, Any] = {
        "wavelet": wav.name,
        "level": levels,
        "threshold": rule if isinstance(rule, str) and rule != "fixed" else thresholds,
        "thresholds": thresholds,
        "threshold_units": "noise sd of each coefficient",
        "df": df,
        "divergence": divergence,
        "padded_shape": padded_shape,
    }
    if clip:
        diag = _jacobian_diagonal(bank, sizes, masks)
        estimate = positive_part(estimate)
        pos = estimate > 0
        params["divergence"] = float((var * diag)[pos].sum())
        params["df"] = float(diag[pos].sum())
        params[MARK] = True
        risk = clipped_sure(arr, estimate, s, params["divergence"])
    return Denoised(
        estimate.reshape(given_shape),
        risk,
        "wavelet",
        params,
        sigma=s.reshape(given_shape),
        refit=functools.partial(
            wavelet_denoise,
            sigma=s.reshape(given_shape),
            structure=arr.shape if on_grid else None,
            wavelet=wav,
            level=levels,
            threshold=tuple(thresholds),
            nonnegative=clip,
        ),
        observed=arr.reshape(given_shape),
    )


def _per_level(threshold: object, levels: int) -> list[float] | None:
    """A sequence of one λ ≥ 0 per level (finest first), or None for a rule or one λ."""
    if isinstance(threshold, str) or np.ndim(threshold) == 0:  # type: ignore[arg-type]
        return None
    arr = as_real_array(threshold, "threshold")
    if arr.shape != (levels,):
        raise ValueError(
            f"threshold as a sequence needs one λ per level, finest first ({levels} for "
            f"level = {levels}); got shape {arr.shape}"
        )
    check_interval(arr, "threshold", NONNEGATIVE, "thresholds λ ≥ 0, finite")
    return [float(v) for v in arr]
