"""Order 0 on a chain or on the chain fibres of a product: the public call's direct route.

On a fibre layout (:mod:`._fibres`: a chain, or a product whose one axis is a chain and
whose others carry no structure) order-0 trend filtering with one σ is 1-D TV denoising of
each fibre, and :func:`chain_trend_filter` computes what the general route of
:func:`~dpgauss.denoise.trend_filter.trend_filter` computes there — the same λ_max (exact
running sums, :func:`._fibres.lam_max`), the same λ path (:func:`._path._sure_path`), the
same exact solution (:func:`._tv1d.tv1d_rows`: per fibre the kernels of
:func:`._tv1d.tv1d`), the same zero rows (``|Dx| ≤ 10⁻⁹ max|y|``, as
:meth:`._admm._Solver.zero_rows`) and so the same df (fibres + jumps) and SURE — without
its machinery: no operator, no Laplacian solve for the least-norm dual, no image labelling
for df, and the duality gap, the jumps and ``Σ|Dx|`` in one compiled pass
(:func:`._fibres.certificate`).  Along the SURE path only the best fit so far is kept
(two solution buffers, reused), not every λ's.

On one chain the estimate, df, λ_max, the λ grid and so the chosen λ are bit-for-bit
those of the general route; SURE, the objective and the gap agree to rounding (their sums
are vectorised in the compiled pass, where the general route calls BLAS and numpy).  On a
product the general route runs the minimum cuts (or ADMM without numba), whose solution
agrees to rounding.
A λ whose gap is not certified within ``tol`` (none seen) returns None: the caller then
runs the general route, which hands such a λ to ADMM.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from ...errors import UncertifiedError
from ..result import Denoised
from ..structure import Structure
from ._fibres import Layout, certificate, lam_max, scan
from ._operators import _center
from ._path import _LAM_MIN_RATIO, _sure_path
from ._tv1d import tv1d_rows

__all__ = ["ALGORITHM", "chain_trend_filter"]

#: ``params["algorithm"]`` on a chain (that of the general route there).
ALGORITHM = "direct 1-D TV (Condat 2013)"


@dataclass
class _ChainFit:
    lam: float
    df: int
    rss: float
    objective: float
    gap: float  # relative, as _Fit's
    risk: float | None
    rows: np.ndarray | None = None  # the solution, fibres × length (None once dropped)
    beta: np.ndarray | None = None  # or in node order (λ = 0, λ ≥ λ_max)


class _FibrePath:
    """Solves λ after λ on the fibres, keeping the solution of the best fit by SURE only."""

    def __init__(
        self, y: np.ndarray, layout: Layout, tol: float, sigma: float | None, eager: bool = True
    ) -> None:
        self.y = y
        self.layout = layout
        self.rows = layout.rows(y)
        self.tol = tol
        self.sigma = sigma
        self.means, scale = scan(self.rows)
        # λ_max now (a path needs it first), or with the first solve (one λ: its pass fused
        # with the certificate's, :func:`._fibres.certificate`)
        self.lam_max: float | None = lam_max(self.rows, self.means) if eager else None
        self.atol = 1e-9 * scale  # the zero rows of _admm._Solver.zero_rows for order 0
        self.best: _ChainFit | None = None
        self.spare: np.ndarray | None = None

    def projection(self, lam: float) -> _ChainFit:
        """λ ≥ λ_max: the null-space projection (_path._projection_fit)."""
        y = self.y
        beta = y - _center(y, self.layout.labels())
        r = y - beta
        rss = float(r @ r)
        df = self.layout.fibres
        return self.keep(_ChainFit(lam, df, rss, 0.5 * rss, 0.0, self.risk(rss, df), beta=beta))

    def risk(self, rss: float, df: int) -> float | None:
        s = self.sigma
        if s is None:
            return None
        return rss - self.y.size * s**2 + 2.0 * s**2 * df

    def keep(self, fit: _ChainFit) -> _ChainFit:
        """Keep ``fit``'s solution if it is the best so far (the first of equal risks, as
        ``np.argmin`` picks), else recycle its buffer."""
        best = self.best
        if best is None or (
            fit.risk is not None and best.risk is not None and fit.risk < best.risk
        ):
            if best is not None:
                if best.rows is not None:
                    self.spare = best.rows
                best.rows = best.beta = None
            self.best = fit
        else:
            if fit.rows is not None:
                self.spare = fit.rows
            fit.rows = fit.beta = None
        return fit

    def solve(self, lam: float) -> _ChainFit:
        y = self.y
        if lam == 0.0:  # β̂ = y (_path._identity_fit)
            if self.lam_max is None:
                self.lam_max = lam_max(self.rows, self.means)
            return self.keep(_ChainFit(0.0, y.size, 0.0, 0.0, 0.0, self.risk(0.0, y.size), beta=y))
        if self.lam_max is not None and lam >= self.lam_max:
            return self.projection(lam)
        x = self.spare if self.spare is not None else np.empty(self.rows.shape)
        self.spare = None
        tv1d_rows(self.rows, lam, x)
        fused = self.means if self.lam_max is None else None
        rss, tv, dot, dd, jumps, top = certificate(self.rows, x, lam, self.atol, fused)
        if self.lam_max is None:
            self.lam_max = top
            if lam >= top:  # decided as the general route decides it, before solving
                self.spare = x
                return self.projection(lam)
        p = 0.5 * rss + lam * tv
        # P(β) − D(u) without cancellation, as _path._Path.solve_exact
        gap = lam * tv - dot + 0.5 * dd
        if not gap <= self.tol * max(p, 1e-300):
            raise UncertifiedError
        df = self.layout.fibres + jumps
        fit = _ChainFit(lam, df, rss, p, max(gap, 0.0) / max(p, 1e-300), self.risk(rss, df), x)
        return self.keep(fit)

    def beta(self, fit: _ChainFit) -> np.ndarray:
        if fit.beta is not None:
            return fit.beta if fit.beta is not self.y else self.y.copy()
        assert fit.rows is not None  # the best fit keeps its solution
        return self.layout.nodes(fit.rows)


def chain_trend_filter(
    arr: np.ndarray,
    sigma: float | None,
    known: Structure,
    layout: Layout,
    lam_spec: float | np.ndarray | None,
    n_lambdas: int,
    lam_min_ratio: float | None,
    tol: float,
    refit: Callable[..., Denoised],
    solver: str,
) -> Denoised | None:
    """``trend_filter(arr, sigma, known, order=0, lam=…)`` on the fibre layout ``layout``
    (module doc); None if a λ is not certified (the general route then runs).  ``refit``
    is ``trend_filter`` with the other arguments bound (the error bars' refit)."""
    yv = arr.reshape(-1)
    path = _FibrePath(yv, layout, tol, sigma, eager=not isinstance(lam_spec, float))
    try:
        if isinstance(lam_spec, float):
            fits = [path.solve(lam_spec)]
        elif lam_spec is not None:
            fits = [path.solve(float(v)) for v in np.sort(lam_spec)[::-1]]
        elif path.lam_max == 0.0:  # y is in the null space: β̂ = y for every λ
            fits = [path.solve(0.0)]
        else:
            ratio = _LAM_MIN_RATIO[0] if lam_min_ratio is None else lam_min_ratio

            def risk(fit: _ChainFit) -> float | None:
                return fit.risk

            assert path.lam_max is not None
            fits = _sure_path(path.solve, risk, path.lam_max, ratio, n_lambdas)
    except UncertifiedError:
        return None
    lam_max_ = path.lam_max
    risks = [f.risk for f in fits]
    best = 0 if len(fits) == 1 else int(np.argmin(np.asarray(risks, dtype=np.float64)))
    fit = fits[best]
    assert fit is path.best or len(fits) == 1
    algorithm = ALGORITHM
    if layout.fibres > 1:
        algorithm += f", on each of the {layout.fibres:,} chains of the product"
    params: dict[str, Any] = {
        "order": 0,
        "lam": fit.lam,
        "df": fit.df,
        "iterations": 0,
        "gap": fit.gap,
        "converged": True,
        "lam_max": lam_max_,
        "solver": solver,
        "algorithm": algorithm,
        "rounds": 0,
    }
    if len(fits) > 1:
        params["path"] = {
            "lam": np.array([f.lam for f in fits]),
            "df": np.array([f.df for f in fits]),
            "sure": np.array(risks, dtype=np.float64),
            "rss": np.array([f.rss for f in fits]),
            "objective": np.array([f.objective for f in fits]),
            "iterations": np.zeros(len(fits), dtype=np.int64),
            "gap": np.array([f.gap for f in fits]),
        }
    return Denoised(
        estimate=path.beta(fit).reshape(arr.shape),
        risk=risks[best],
        method="trend_filter",
        params=params,
        sigma=sigma,
        refit=functools.partial(refit, lam=fit.lam) if sigma is not None else None,
        observed=arr,
    )
