r"""Zoom levels that add up: the consistent estimate of a tree of noisy totals.

A publisher releases the same counts at several levels — junctions, neighbourhoods,
boroughs, the city — each level measured with its own noise.  Summing the finest level
gives one estimate of a neighbourhood, the neighbourhood's own measurement another; the
published tables must agree (a parent equals the sum of its children), and should use both.

The model.  The finest level has ``n₀`` keys with unknown totals ``x``; every node ``v`` of
level ``ℓ ≥ 1`` is the sum of its children at level ``ℓ − 1`` (``parents[ℓ−1][i]`` is the
index of node ``i``'s parent), so its true value is ``(A x)_v``, the sum of the leaves
under it.  Each node is released as ``y_v = (A x)_v + N(0, σ_v²)``, independently
(``σ_v = ∞``: a node not measured).  The generalised least-squares (GLS) estimate

.. math::  \hat x = \arg\min_x \sum_v \frac{((A x)_v − y_v)^2}{σ_v^2}
           = (A^T W A)^{-1} A^T W y,\qquad W = \mathrm{diag}(σ_v^{-2}),

is unbiased and has the least variance of every unbiased estimate linear in ``y``
(Gauss–Markov), and its node values ``A x̂`` are consistent by construction.  Hay, Rastogi,
Miklau & Suciu (2010) give it for equal variances; here the variances are any.

Two passes, ``O(Σ n_ℓ)``.  Bottom-up, ``z_v`` is the best estimate of node ``v`` from the
measurements in its subtree, with variance ``V_v``: ``z = y, V = σ²`` at a leaf, and at a
parent with children's sum ``s = Σ_c z_c`` (variance ``S = Σ_c V_c``) the
inverse-variance combination ``z_v = (y_v/σ_v² + s/S)/(1/σ_v² + 1/S)``,
``V_v = (1/σ_v² + 1/S)^{-1}``.  Top-down, each node's final ``x̂_v`` is shared among its
children in proportion to their variances,

.. math::  \hat x_c = z_c + \frac{V_c}{S}\,(\hat x_v − s),

which sums to ``x̂_v`` exactly.  This is the Rauch–Tung–Striebel smoother on the tree (the
subtree measurements are independent given the subtree's total), so it equals the GLS
solution; ``tests/denoise/test_levels.py`` checks it against the dense normal equations.
The final error variance follows the same backward recursion,
``P_c = V_c + (V_c/S)²·(P_v − S)``, and the variance of any weighted sum of leaves,
``wᵀ(AᵀWA)^{-1}w``, is one more two-pass solve (:meth:`Levels.sum_variance`).  Because the
estimate is linear and unbiased in Gaussian noise, ``x̂_v ± z·√P_v`` is an exact
interval at every node and level, at no privacy cost (post-processing of the releases).

Counts are never negative (:func:`nonnegative_levels`).  The GLS estimate can be, at small
nodes.  It is projected top-down, keeping every parent the sum of its children: the
coarsest level is clipped at 0; then, parent by parent, the children ``c`` of a parent of
(already non-negative) value ``X`` are replaced by the closest non-negative vector summing
to ``X`` in the GLS metric, ``argmin Σ_j (c'_j − c_j)²/V_j`` over ``c' ≥ 0, Σ c' = X``,
whose solution is ``c'_j = max(c_j − τ V_j, 0)`` with the one ``τ`` that makes the sum
``X`` (the projection onto a scaled simplex: sort the breakpoints ``c_j/V_j``).  Finally
every parent is recomputed as the sum of its projected children, bottom-up, so that the
published tables add up to the last rounding.  A node whose GLS value is already
non-negative, under a parent whose children all are, is left as it is.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from scipy import special

from .._validation import UNIT_OPEN, as_real_array, check_scalar

__all__ = ["Levels", "consistent_levels", "nonnegative_levels"]


@dataclass(frozen=True)
class Levels:
    """The consistent GLS estimate of every level (module docstring).

    ``estimate[ℓ]`` and ``variance[ℓ]`` are the estimates and their exact error variances
    at level ``ℓ`` (0: the finest); ``parents`` the tree as given.
    """

    estimate: tuple[np.ndarray, ...]
    variance: tuple[np.ndarray, ...]
    parents: tuple[np.ndarray, ...]
    sigma2: tuple[np.ndarray, ...]

    def interval(self, level: int = 0, confidence: float = 0.95) -> tuple[np.ndarray, np.ndarray]:
        """Exact per-node intervals ``x̂ ± z·√P`` at ``level`` (the estimate is linear and
        unbiased in Gaussian noise)."""
        z = _z(confidence)
        half = z * np.sqrt(self.variance[_level(level, len(self.estimate))])
        est = self.estimate[level]
        return est - half, est + half

    def sum_variance(self, weights: object) -> float:
        """The exact variance of ``Σ wᵢ x̂ᵢ`` over the finest level: ``wᵀ(AᵀWA)^{-1}w``."""
        w = as_real_array(weights, "weights").astype(np.float64).ravel()
        n0 = self.estimate[0].size
        if w.size != n0:
            raise ValueError(f"weights must have one value per finest key ({n0}); got {w.size}")
        # (AᵀWA)^{-1} w is the GLS solution for a release with y = σ₀²·w at the leaves and 0
        # elsewhere (then AᵀWy = w); its inner product with w is the variance.
        ys = [self.sigma2[0] * w] + [np.zeros(s.size) for s in self.sigma2[1:]]
        solved = _solve(ys, list(self.sigma2), list(self.parents))[0][0]
        return float(max(np.dot(w, solved), 0.0))

    def sum_interval(self, weights: object, confidence: float = 0.95) -> tuple[float, float]:
        """The exact interval of ``Σ wᵢ θᵢ`` over the finest level."""
        w = as_real_array(weights, "weights").astype(np.float64).ravel()
        centre = float(np.dot(w, self.estimate[0]))
        half = _z(confidence) * math.sqrt(self.sum_variance(w))
        return centre - half, centre + half


def _z(confidence: float) -> float:
    c = check_scalar(confidence, "confidence", UNIT_OPEN)
    return float(-special.ndtri((1.0 - c) / 2.0))


def _level(level: object, n: int) -> int:
    if isinstance(level, bool) or not isinstance(level, int | np.integer) or not 0 <= level < n:
        raise ValueError(f"level must be an integer in [0, {n - 1}]; got {level!r}")
    return int(level)


def consistent_levels(
    values: Sequence[object], sigmas: Sequence[object], parents: Sequence[object]
) -> Levels:
    """The consistent GLS estimate of a tree of noisy totals (module docstring).

    Parameters
    ----------
    values
        ``L + 1`` released vectors, the finest level first.
    sigmas
        The noise σ of each level: a number or one per node, in ``(0, ∞]`` (∞: a node not
        measured, whose estimate comes from its children alone; the finest level must be
        finite).
    parents
        ``L`` integer vectors: ``parents[ℓ][i] ∈ [0, n_{ℓ+1})`` is the parent of node ``i``
        of level ``ℓ``.  A node of level ``ℓ ≥ 1`` without children is a sum of nothing:
        its estimate is 0, exactly.

    Returns
    -------
    Levels
    """
    ys = [as_real_array(v, f"values[{i}]").astype(np.float64).ravel() for i, v in enumerate(values)]
    if not ys:
        raise ValueError("values must hold at least the finest level")
    if len(sigmas) != len(ys) or len(parents) != len(ys) - 1:
        raise ValueError(
            f"{len(ys)} levels need {len(ys)} sigmas and {len(ys) - 1} parent maps; got "
            f"{len(sigmas)} and {len(parents)}"
        )
    s2: list[np.ndarray] = []
    for i, (y, s) in enumerate(zip(ys, sigmas, strict=True)):
        if not np.all(np.isfinite(y)):
            raise ValueError(f"values[{i}] must be finite")
        sig = np.broadcast_to(as_real_array(s, f"sigmas[{i}]").astype(np.float64), y.shape)
        if (
            not np.all(sig > 0)
            or np.any(np.isnan(sig))
            or (i == 0 and not np.all(np.isfinite(sig)))
        ):
            raise ValueError(
                f"sigmas[{i}] must be in (0, inf]"
                + (" and finite at the finest level" if i == 0 else "")
            )
        s2.append(np.square(sig))
    ps: list[np.ndarray] = []
    for i, p in enumerate(parents):
        arr = np.asarray(p)
        if arr.shape != ys[i].shape or not np.issubdtype(arr.dtype, np.integer):
            raise ValueError(
                f"parents[{i}] must be {ys[i].size} integers (one per node of level {i})"
            )
        if arr.size and (arr.min() < 0 or arr.max() >= ys[i + 1].size):
            raise ValueError(
                f"parents[{i}] must be in [0, {ys[i + 1].size - 1}] (the nodes of level {i + 1})"
            )
        ps.append(arr.astype(np.int64))
    est, var = _solve(ys, s2, ps)
    return Levels(tuple(est), tuple(var), tuple(ps), tuple(s2))


def _solve(
    ys: list[np.ndarray], s2: list[np.ndarray], ps: list[np.ndarray]
) -> tuple[list[np.ndarray], list[np.ndarray]]:
    """The two passes of the module docstring: (estimates, variances) per level."""
    z, v = [ys[0].copy()], [s2[0].copy()]
    sums, svars = [], []
    for lvl in range(1, len(ys)):
        n = ys[lvl].size
        s = np.bincount(ps[lvl - 1], weights=z[-1], minlength=n)
        big_s = np.bincount(ps[lvl - 1], weights=v[-1], minlength=n)
        sums.append(s)
        svars.append(big_s)
        own = np.where(np.isfinite(s2[lvl]), 1.0 / s2[lvl], 0.0)
        empty = big_s == 0.0
        kids = np.where(empty, 0.0, 1.0 / np.where(empty, 1.0, big_s))
        total = own + kids
        zl = np.where(empty, 0.0, (own * ys[lvl] + kids * s) / np.where(empty, 1.0, total))
        vl = np.where(empty, 0.0, 1.0 / np.where(empty, 1.0, total))
        z.append(zl)
        v.append(vl)
    x, p = [z[-1]], [v[-1]]
    for lvl in range(len(ys) - 2, -1, -1):
        par = ps[lvl]
        big_s = svars[lvl][par]
        gain = np.where(big_s > 0, v[lvl] / np.where(big_s > 0, big_s, 1.0), 0.0)
        x.append(z[lvl] + gain * (x[-1][par] - sums[lvl][par]))
        p.append(np.maximum(v[lvl] + gain * gain * (p[-1][par] - big_s), 0.0))
    return x[::-1], p[::-1]


def _project(c: np.ndarray, v: np.ndarray, total: float) -> np.ndarray:
    """``argmin Σ (c' − c)²/v`` over ``c' ≥ 0, Σ c' = total ≥ 0`` (module docstring)."""
    if total <= 0.0:
        return np.zeros_like(c)
    if np.all(c >= 0.0) and math.isclose(float(c.sum()), total, rel_tol=1e-12, abs_tol=0.0):
        return c.copy()
    t = c / v
    order = np.argsort(-t, kind="stable")
    cs, vs = np.cumsum(c[order]), np.cumsum(v[order])
    tau = (cs - total) / vs
    nxt = np.append(t[order][1:], -np.inf)
    k = int(np.flatnonzero(tau >= nxt)[0])
    return np.maximum(c - tau[k] * v, 0.0)


def nonnegative_levels(levels: Levels) -> tuple[np.ndarray, ...]:
    """The non-negative consistent estimates of every level, the finest first (module
    docstring): a top-down projection in the GLS metric, then parents recomputed as the
    sums of their children."""
    est = [e.copy() for e in levels.estimate]
    var = levels.variance
    est[-1] = np.maximum(est[-1], 0.0)
    for lvl in range(len(est) - 2, -1, -1):
        par = levels.parents[lvl]
        order = np.argsort(par, kind="stable")
        bounds = np.searchsorted(par[order], np.arange(est[lvl + 1].size + 1))
        out = np.empty_like(est[lvl])
        # a variance rounded to 0 must not make c/v infinite: floor it relative to the level
        floor = max(1e-12 * float(np.max(var[lvl], initial=0.0)), 1e-300)
        for p in range(est[lvl + 1].size):
            idx = order[bounds[p] : bounds[p + 1]]
            if idx.size:
                out[idx] = _project(
                    est[lvl][idx], np.maximum(var[lvl][idx], floor), float(est[lvl + 1][p])
                )
        est[lvl] = out
    for lvl in range(1, len(est)):
        est[lvl] = np.bincount(
            levels.parents[lvl - 1], weights=est[lvl - 1], minlength=est[lvl].size
        )
    return tuple(est)
