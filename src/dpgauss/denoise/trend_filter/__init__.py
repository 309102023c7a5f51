"""Graph trend filtering with λ chosen by Stein's unbiased risk estimate.

Graph trend filtering of order ``k`` (Wang, Sharpnack, Smola & Tibshirani, "Trend
filtering on graphs", JMLR 17(105), 2016) estimates the mean of ``y = θ + N(0, σ²I)``
observed on the nodes of a graph by

    β̂ = argmin_β ½‖y − β‖² + λ‖Δ⁽ᵏ⁺¹⁾β‖₁,

with the graph difference operators ``Δ⁽¹⁾ = D`` (the oriented ``m × n`` edge incidence
matrix), ``Δ⁽²⁾ = DᵀD = L`` (the Laplacian) and in general

    Δ⁽ᵏ⁺¹⁾ = D L^{k/2}        for even k   (rows ↔ edges),
    Δ⁽ᵏ⁺¹⁾ = L^{(k+1)/2}      for odd k    (rows ↔ nodes).

Order 0 is the graph fused lasso (piecewise constant fits), order 1 gives piecewise
"linear" (harmonic) fits, order 2 piecewise "quadratic" ones.  The null space of every
``Δ⁽ᵏ⁺¹⁾`` is that of ``L``: one constant per connected component, so components are never
smoothed toward each other and ``λ ≥ λ_max`` gives the per-component means.

Solver
------
ADMM (Boyd, Parikh, Chu, Peleato & Eckstein 2011, §3 and §6.4.1 generalised lasso) on
``min ½‖y − β‖² + λ‖z‖₁  s.t.  Δβ = z`` with over-relaxation ``α`` (§3.4.3)::

    β ← (I + ρΔᵀΔ)⁻¹ (y + Δᵀ(ρz − w))          (ΔᵀΔ = L^{k+1}; cached factorisation)
    x ← αΔβ + (1 − α)z + w/ρ
    z ← S_{λ/ρ}(x),   w ← ρ (x − z) = ρ·clip(x, ±λ/ρ)

The factorisation of ``I + ρΔᵀΔ`` is a sparse LU (SuperLU) computed once per ρ and
cached; its pattern does not depend on ρ, so the minimum-degree ordering of the first
factorisation is kept and later ones skip it (``_sparse_spd.ReorderedSPD``).  On a 1-D
chain or 2-D lattice graph (detected from the edge list) the system is instead
diagonalised by the orthonormal DCT-II, since the Neumann lattice Laplacian has the DCT
basis as eigenvectors.  ρ is a power of two and adapts by residual balancing (Boyd et al.
§3.4.1, on relative residuals), so only a few factorisations are ever made.  For order 0 the
update runs in place, in cache-sized chunks (on a 10⁶-node lattice the two DCTs and a few
passes over memory are all an iteration costs), and the fused groups of a lattice are
found by labelling an image.  For orders ≥ 1 the iteration is Anderson-accelerated
(Walker & Ni 2011; Zhang, Peng, Rao & Deng 2019).

Once the iterate's support ``A = {r : z_r ≠ 0}`` and signs ``s`` have (nearly) settled
they are *polished* into the exact solution for that support (as OSQP does, Stellato et
al. 2020): the minimiser of ``½‖y − β‖² + λ sᵀΔ_Aβ`` subject to ``Δ_Zβ = 0`` (``Z`` the
other rows),

    β_A,s = Π_{null(Δ_Z)} (y − λ Δ_Aᵀ s),

which for order 0 is the mean of ``y − λDᵀs`` over each fused group (connected component
of the graph restricted to the fused edges ``Z``), and for higher orders the solution of
a sparse saddle-point system ``[I Cᵀ; C 0][β; v] = [y − λΔ_Aᵀs; 0]`` with ``C`` a row
basis of ``Δ_Z``.  For odd orders the multipliers ``v`` are unique, so ``u = (λs, v)`` is
an exact dual point, and the support is repaired by the primal-dual active set method
(Hintermüller, Ito & Kunisch 2002), which on a path warm-started from the previous λ's
support usually finishes without any ADMM iteration.  For order 1 the faces of all
active-set steps are solved by :class:`._order1.FaceSolver` (conjugate gradients on the
face's normal equations, preconditioned by a cached sparse factorisation of a nearby face,
one fill-reducing ordering for all of them; see below); a step adds only the violators
that are the largest within two hops (neighbouring multipliers leave the box together, but
one kink suffices), and on cycling changes only the worst violator.

Orders 1 and 2 with ``solver="auto"``: the box-constrained dual (:mod:`._dual_newton`),
warm-started from the last λ's dual point.  An active-set phase with the local-maximum
entering rule above solves faces; a face (the free rows ``R`` of the dual) is solved

* on a chain by banded Cholesky of the normal equations (refined on the face residual),
  else banded LU of the augmented system;
* for order 1 on any other graph by :class:`._order1.FaceSolver`: the normal equations
  ``(L²)_RR d = (Lβ)_R`` by conjugate gradients, preconditioned by a sparse factorisation
  (SuperLU, no pivoting) of ``(L²)_{R₀R₀}`` for an earlier face ``R₀``, refactorised at the
  current face when more than a few nodes moved or CG stalls.  Every ``(L²)_RR`` is a
  principal submatrix of ``L²``, so one minimum-degree ordering of ``L²`` (computed once)
  serves all of them without ordering cost, and the preconditioned matrix is the identity
  plus a matrix of rank about twice the number of moved nodes; at large λ (few active
  nodes) CG is preconditioned instead by an exact solve of ``(L²)_RR`` through one
  factorisation of the grounded ``L²`` per path and the capacitance matrix of the active
  nodes (:mod:`._capacitance`), so that a face costs no factorisation;
* otherwise (order 2 on forests, or when CG does not reach rounding) by sparse LU of the
  augmented system.

Order 2 first locates the support by a primal-dual interior-point method (Mehrotra's
predictor-corrector, :mod:`._dual_ipm`; each step one banded LU of the augmented system
``[I Δᵀ; Δ −J]`` on a chain, ``O(n)``, which stays well conditioned where the normal
equations ``ΔΔᵀ + J``, of condition ``n⁶``, do not; a sparse LU elsewhere), and the active
set then finishes it in a step or two; order 1 starts with the active set, which usually
finishes at once from the last support, and calls the interior-point method only when it
cycles.  Projected Newton (Bertsekas 1982) is the last resort.  For order 2 on a chain the
fit is finally replaced by a nearby point of its face that floating point represents
exactly (:mod:`._exact_face`), so that the certified gap is not rounding near ``λ_max``
(where ``λ`` is 10¹⁰ on 4,000 nodes) and the zero rows, hence df, are exact.  No dense
factorisation of a face is made on these paths (only the capacitance route's Cholesky
factor of at most 400 active nodes, built by bordering).  Its fits report ``rounds``
(active-set, interior-point or Newton steps) and ``iterations = 0``; a λ it cannot certify
within ``tol`` goes to ADMM as above.

Order 0 exactly.  With numba installed (``solver="auto"`` or ``"exact"``), order 0 is not
solved by ADMM but exactly, by divide and conquer on minimum cuts (:mod:`._graph_tv`, cuts
from the compiled push-relabel of :mod:`._maxflow`), warm-started along the path from the
previous λ's jumps and flow; its flow certifies the solution to rounding and its fused
groups give the exact df.  On a chain (a path graph labelled in order) order 0 is 1-D TV
denoising, solved by the direct algorithm of :mod:`._tv1d` with or without numba; with one
σ (and ``nonnegative=False``, ``solver`` ``"auto"`` or ``"exact"``) a chain, or a product
whose one axis is a chain and whose other axes carry no structure (its chains solved one by
one: :mod:`._fibres`), takes a direct route (:mod:`._chain`) that skips the operator, the
least-norm dual's Laplacian solve and the image labelling for df: the same λ_max (exact
running sums, also on the general route), λ path, solution, df and SURE (to rounding),
at about the cost of the 1-D kernel per λ.  On an
``H × W`` lattice (``H, W ≥ 2``) ``solver="auto"`` solves order 0 by accelerated
alternating exact 1-D TV solves over the rows and the columns (:mod:`._tv2d`, compiled),
whose flows certify the gap to ``tol`` and whose polished solution gives the fused groups;
a λ it does not certify within its iteration budget goes to the minimum cuts, warm-started
from its jumps and flow.  A λ that cannot be certified within ``tol`` goes to ADMM.

Stopping rule: a certified duality gap.  ADMM's ``w`` always satisfies ``‖w‖∞ ≤ λ``, so
it is dual feasible (as are the clipped multipliers above), and

    P(β) = ½‖y − β‖² + λ‖Δβ‖₁ ≥ P* ≥ D(u) = ½‖y‖² − ½‖y − Δᵀu‖²;

stop when ``min P − max D ≤ tol · min P`` over all primal and dual candidates.  The
returned estimate is then within ``tol`` relative objective of the optimum.  ADMM's
primal and dual residuals drive the ρ adaptation.

Path and λ_max.  The least-norm dual solution at the null-space projection is
``u = (Δᵀ)⁺(y − Πy) = Δx`` with ``L^{k+1}x = y − Πy`` (solved with a grounded Laplacian,
or the DCT on lattices); it is dual feasible for every ``λ ≥ λ_max = ‖u‖∞``, where the
solution is therefore exactly ``Πy`` (the per-component means), and it warm-starts the
path.

Degrees of freedom and SURE
---------------------------
For the generalised lasso the divergence of ``y ↦ β̂`` is, almost surely, the nullity of
``Δ`` restricted to the rows that are zero at the solution (Tibshirani & Taylor, "Degrees
of freedom in lasso problems", Ann. Statist. 2012; Wang et al. 2016, §3).  Writing
``Z = {r : (Δβ̂)_r = 0}``, this nullity is combinatorial for graph operators, because
``L^q`` is injective on ``range(L)`` and so ``rank(R_Z D L^q) = rank(D_Z)`` and
``rank(R_Z L^q) = rank(L_Z)``:

* even k: ``df`` = number of connected components of the graph ``(V, Z)`` (for order 0:
  the number of fused groups);
* odd k: ``df = |A| + c_Z``, with ``A`` the nodes where ``L^{(k+1)/2}β̂ ≠ 0`` and ``c_Z``
  the number of connected components of the graph containing no such node (a proper
  principal submatrix of a connected component's Laplacian is positive definite).

Since σ is public and exact, SURE (Stein 1981)

    SURE(λ) = ‖y − β̂_λ‖² − dσ² + 2σ² df(λ)

is an unbiased estimate of the total squared error ``E‖β̂_λ − θ‖²``.  ``lam="sure"`` solves
a warm-started geometric path from ``λ_max`` (where the solution is the projection onto
the null space) down and returns the λ with the smallest SURE.
"""

from __future__ import annotations

import functools
import numbers
import warnings
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from ..._optional import install_hint
from ..._validation import REAL, UNIT_OPEN, as_real_array, check_int, check_interval, check_scalar
from ...errors import TrendFilterConvergenceWarning
from .._nonnegative import MARK, check_nonnegative, positive_part
from ..graph import Graph
from ..result import Denoised, check_noise
from ..structure import as_structure, graph_of
from . import _graph_tv, _tv2d
from ._admm import _Fit, _Solver
from ._chain import chain_trend_filter
from ._clip import positive_divergence, positive_groups
from ._dual_newton import DualNewton
from ._fibres import layout_of_structure

# "x as x": private names that auto, the tests and the benchmarks import from here
from ._operators import _degrees_of_freedom as _degrees_of_freedom
from ._operators import _lattice_shape as _lattice_shape
from ._operators import _LatticeDifference, _make_operator, _Operator
from ._operators import _n_components as _n_components
from ._operators import _SparseDifference as _SparseDifference
from ._path import (
    _LAM_MIN_RATIO,
    _dual_newton,
    _identity_fit,
    _least_norm_dual,
    _Path,
    _path_table,
    _projection_fit,
    _sure_path,
)
from ._path import _null_projection as _null_projection
from ._path import _path_grid as _path_grid
from ._weighted import WeightedPath

__all__ = ["TrendFilterConvergenceWarning", "trend_filter"]

ORDERS = (0, 1, 2)

# Order 0 on a lattice (_tv2d): at most LATTICE_MAX_ITER accelerated alternating iterations
# per λ (each two passes of 1-D TV over the image) before the minimum cuts take over.
_LATTICE_MAX_ITER = 2_000


_LATTICE_ALGORITHM = "accelerated alternating 1-D TV over rows and columns (Chambolle & Pock 2015)"


#: ``params["algorithm"]`` of orders 1 and 2 solved on the dual (:mod:`._dual_newton`).
_DUAL_ALGORITHM = "active set on the dual, after an interior-point start where needed"


# --------------------------------------------------------------------------------------
# Public function
# --------------------------------------------------------------------------------------


def _check_order(order: object) -> int:
    if isinstance(order, bool) or not isinstance(order, numbers.Integral):
        raise TypeError(f"order must be an integer in {ORDERS}; got {type(order).__name__}")
    if int(order) not in ORDERS:
        raise ValueError(f"order must be one of {ORDERS}; got {order!r}")
    return int(order)


_SOLVERS = ("auto", "exact", "admm")


def _check_solver(solver: object, order: int, chain: bool) -> bool:
    """Validate ``solver``; True when order 0 is solved exactly (min-cuts, or the direct
    1-D algorithm on a chain, which needs no numba)."""
    if not isinstance(solver, str) or solver not in _SOLVERS:
        raise ValueError(f"solver must be one of {_SOLVERS}; got {solver!r}")
    if solver == "exact":
        if order != 0:
            raise ValueError(f"solver='exact' solves order 0 only; got order={order}")
        if not chain and not _graph_tv.available():
            raise ImportError(
                "solver='exact' needs numba for its compiled minimum cut (except on a chain): "
                f"{install_hint('fast')} (or use solver='auto' or 'admm')"
            )
        return True
    return solver == "auto" and order == 0 and (chain or _graph_tv.available())


def _check_lam(lam: object) -> float | np.ndarray | None:
    """``None`` for "sure", a float for one λ, a 1-D array for a user grid."""
    if isinstance(lam, str):
        if lam != "sure":
            raise ValueError(
                f'lam must be a number >= 0, a sequence of them or "sure"; got {lam!r}'
            )
        return None
    arr = as_real_array(lam, "lam")
    if arr.ndim > 1 or arr.size == 0:
        raise ValueError(f"lam must be a number or a non-empty 1-D sequence; got shape {arr.shape}")
    check_interval(arr, "lam", REAL)
    if np.any(arr < 0):
        raise ValueError(f"lam must be >= 0; got {float(arr[arr < 0][0])!r}")
    return float(arr) if arr.ndim == 0 else np.array(arr, dtype=np.float64)


def trend_filter(
    y: object,
    sigma: object = None,
    structure: object = None,
    *,
    order: int = 0,
    lam: float | Sequence[float] | str = "sure",
    n_lambdas: int = 20,
    lam_min_ratio: float | None = None,
    tol: float = 1e-6,
    max_iter: int = 20_000,
    solver: str = "auto",
    nonnegative: bool = False,
) -> Denoised:
    """Graph trend filtering ``argmin_β ½‖y − β‖² + λ‖Δ⁽ᵏ⁺¹⁾β‖₁`` (Wang et al. 2016).

    Parameters
    ----------
    y
        The released vector, one value per node (any shape; flattened in C order, so an
        ``H × W`` image goes with a row-major ``H × W`` grid graph).
    sigma
        The public noise standard deviation.  Required for ``"sure"`` and for candidate
        sequences; with a single λ it may be ``None`` and, if given, the returned ``risk`` is
        SURE at that λ.  One σ per key (an array of ``y``'s shape) fits order 0 with the
        weighted fidelity ``½ Σ (y_i − β_i)² / σ_i²`` instead, exactly (the direct 1-D
        algorithm on a chain, else the minimum cuts, which need numba), with the
        heteroscedastic SURE ``‖y − β̂‖² − Σσ_i² + 2 Σ_G |G| / Σ_{i∈G} σ_i⁻²`` over the
        fused groups ``G`` (:mod:`dpgauss.denoise.trend_filter._weighted`); λ is then in units of
        ``y/σ²`` and ``params`` adds ``divergence`` (the last sum).
    structure
        The public graph: a ``networkx.Graph``, a sparse adjacency matrix, an ``(m, 2)``
        edge array or a :class:`~dpgauss.denoise.graph.Graph` (see :func:`as_graph`), or a
        grid shape (its lattice; :mod:`dpgauss.denoise.structure`).  Required.
        Self-loops are ignored; disconnected graphs are fitted per component.
    order
        ``k`` ∈ {0, 1, 2}: ``Δ⁽¹⁾ = D``, ``Δ⁽²⁾ = L``, ``Δ⁽³⁾ = DL`` (piecewise constant,
        linear, quadratic fits).
    lam
        The penalty λ ≥ 0; or ``"sure"`` (needs ``sigma``) for the λ minimising
        ``SURE = ‖y − β̂‖² − dσ² + 2σ² df`` over ``n_lambdas`` geometric values from
        ``λ_max`` (the smallest λ whose solution is the per-component mean) down to
        ``lam_min_ratio · λ_max``, continued further down while SURE still decreases at
        the end (at most ``n_lambdas`` more values), and ``λ = 0`` (``β̂ = y``, the raw
        release: so the choice is never worse than it by SURE); or a sequence of
        candidate λ.
    n_lambdas, lam_min_ratio
        The default SURE path; ``lam_min_ratio`` defaults to 1e-3 for orders 0 and 1 and
        1e-4 for order 2.
    tol
        Stop when the certified relative duality gap ``(P(β) − D(u)) / P(β) ≤ tol``; the
        returned objective is then within ``tol`` (relative) of the optimum.
    max_iter
        ADMM iterations per λ; reaching it warns with
        :class:`TrendFilterConvergenceWarning` and returns the best iterate.
    solver
        ``"auto"`` (default): order 0 exactly — on a chain (a path graph labelled in
        order) by the direct 1-D algorithm, on any other graph by the minimum-cut
        decomposition when numba is installed (the ``fast`` extra); certified gap at
        rounding level, exact fused groups and so exact df — except on an ``H × W``
        lattice (``H, W ≥ 2``, a grid shape or its row-major lattice graph) with numba,
        where order 0 is solved by accelerated alternating exact 1-D TV over the rows and
        the columns (:mod:`._tv2d`) to a certified gap ``≤ tol``, its df from the fused
        groups of the polished solution (the minimum cuts finish a λ it does not certify);
        otherwise ADMM with polishing.  Orders 1 and 2 on the box-constrained dual
        (:mod:`._dual_newton`; order 2 on forests only, other graphs up to 50,000 nodes
        unless banded): an interior-point method to locate the support (first for order 2,
        where the active set cycles for order 1), the active set to finish it, projected
        Newton as a last resort; each face by banded factorisations on chains, for order 1
        on other graphs by conjugate gradients preconditioned with cached sparse
        factorisations (:mod:`._order1`), else by a sparse LU; ending on the exact
        solution of its support — for order 2 on a chain a fit exactly on its face in
        floating point, so that the gap is certified near ``λ_max`` too — else ADMM with
        polishing.  ``"exact"`` insists on the exact solver (order 0; numba required
        except on a chain; minimum cuts on lattices too); ``"admm"`` always uses ADMM.  A
        λ whose exact solution is not certified within ``tol`` is handed to ADMM (for
        orders 1 and 2 this happens when the dual multipliers are so much larger than
        ``y`` that rounding alone exceeds ``tol``: order 2 near λ_max on chains of tens of
        thousands of nodes).
    nonnegative
        False (default) or True: publish the positive part ``max(β̂, 0)`` (counts and sums of
        values ≥ 0).  For order 0 it is the exact solution of the problem constrained to
        ``β ≥ 0`` (also with per-key weights): with ``β̂ = y − λDᵀu``, ``u ∈ ∂‖Dβ̂‖₁``,
        clipping keeps every edge's order or fuses it at 0, so ``u`` is still a subgradient
        at ``β* = max(β̂, 0)``, and ``y − β* − λDᵀu = β̂ − β* = −max(−β̂, 0)`` lies in the
        normal cone of ``β ≥ 0`` at ``β*`` (nonpositive, zero where ``β* > 0``): the KKT
        conditions hold.  Its df is the number of fused groups with a positive value.  For
        orders 1 and 2 it is a projection of the fit, whose SURE divergence
        ``Σ_{β̂ᵢ>0} ∂β̂ᵢ/∂yᵢ`` is summed from the face's projection (:mod:`._clip`: exact
        up to a hundred or so keys on the smaller side, else a public-seeded Monte Carlo).
        With ``"sure"`` λ minimises the SURE of the clipped fit
        ``‖max(β̂, 0) − y‖² − dσ² + 2σ² df₊``; ``params["df"]`` is ``df₊``, ``params["df_fit"]``
        the unclipped fit's, and ``params["nonnegative"] = True``.

    Returns
    -------
    Denoised
        ``estimate`` (shape of ``y``), ``risk`` = SURE of the total squared error (``None``
        when σ is not given), ``method="trend_filter"`` and ``params`` with ``order``,
        ``lam``, ``df``, ``iterations``, ``gap``, ``converged``, ``lam_max``, ``solver``
        and, when λ is chosen by SURE, ``path`` (arrays ``lam``, ``df``, ``sure``,
        ``rss``, ``objective``, ``iterations``, ``gap``, one entry per λ).
    """
    k = _check_order(order)
    lam_spec = _check_lam(lam)
    if sigma is None:
        if not isinstance(lam_spec, float):
            raise ValueError(
                "sigma is required when lam is 'sure' or a sequence (SURE needs the noise level)"
            )
        arr = as_real_array(y, "y")
        check_interval(arr, "y", REAL)
        arr = np.array(arr, dtype=np.float64)
        s: float | np.ndarray | None = None
    else:
        arr, s = check_noise(y, sigma)
    n_lambdas = check_int(n_lambdas, "n_lambdas", 1)
    if lam_min_ratio is not None:
        lam_min_ratio = check_scalar(lam_min_ratio, "lam_min_ratio", UNIT_OPEN)
    tol = check_scalar(tol, "tol", UNIT_OPEN)
    max_iter = check_int(max_iter, "max_iter", 1)
    clip = check_nonnegative(nonnegative)

    shape = arr.shape
    yv = arr.ravel()
    known = as_structure(structure, yv.size)
    if k == 0 and not clip and not isinstance(s, np.ndarray) and solver in ("auto", "exact"):
        # a chain, or the chains of a product: the direct route (_chain), same results
        layout = layout_of_structure(known)
        if layout is not None:
            res = chain_trend_filter(
                arr,
                s,
                known,
                layout,
                lam_spec,
                n_lambdas,
                lam_min_ratio,
                tol,
                functools.partial(
                    trend_filter,
                    sigma=s,
                    structure=known,
                    order=0,
                    tol=tol,
                    max_iter=max_iter,
                    solver=solver,
                ),
                solver,
            )
            if res is not None:
                return res
    g = graph_of(known, yv.size, "trend_filter")
    op = _make_operator(g, k)
    chain = isinstance(op, _LatticeDifference) and op.shape[0] == 1
    exact = _check_solver(solver, k, chain)
    grid = (
        solver == "auto"
        and exact
        and not chain
        and isinstance(op, _LatticeDifference)
        and _tv2d.available()
    )
    if isinstance(s, np.ndarray):
        _check_weighted(k, solver, chain)
        return _weighted_trend_filter(
            yv.reshape(shape),
            s.ravel(),
            g,
            op,
            lam_spec,
            n_lambdas,
            lam_min_ratio,
            tol,
            max_iter,
            solver,
            chain,
            clip,
        )

    # id(fit) -> (fit, df of its positive part): computed once per fit (the fit is kept, so
    # its id is not reused)
    clipped_df: dict[int, tuple[_Fit, float]] = {}

    def positive_df(fit: _Fit) -> float:
        key = id(fit)
        if key not in clipped_df:
            seed_sigma = 1.0 if s is None else s  # the probes' public seed only
            df_pos = positive_divergence(op, fit.beta, fit.zero, fit.df, yv, seed_sigma)
            clipped_df[key] = (fit, df_pos)
        return clipped_df[key][1]

    def sure(fit: _Fit) -> float | None:
        if s is None:
            return None
        if clip:
            r = yv - positive_part(fit.beta)
            return float(r @ r) - yv.size * s**2 + 2.0 * s**2 * positive_df(fit)
        r = yv - fit.beta
        return float(r @ r) - yv.size * s**2 + 2.0 * s**2 * fit.df

    newton: DualNewton | None = None
    if g.m == 0 or yv.size == 0:  # no differences: β̂ = y
        fits = [_identity_fit(op, yv, lam_spec if isinstance(lam_spec, float) else 0.0)]
        lam_max = 0.0
    else:
        u_ls = _least_norm_dual(op, yv)
        lam_max = float(np.max(np.abs(u_ls))) if u_ls.size else 0.0

        def new_path() -> _Path:
            admm = _Solver(yv, op, tol, max_iter)
            lattice = None
            if grid and isinstance(op, _LatticeDifference):
                lattice = _tv2d.LatticeTV(yv, op.shape, tol, min(max_iter, _LATTICE_MAX_ITER))
            return _Path(
                admm,
                lam_max,
                u_ls,
                exact=exact,
                chain=chain,
                lattice=lattice,
                newton=newton,
            )

        newton = _dual_newton(op, yv) if solver == "auto" and k > 0 else None
        path = new_path()
        if isinstance(lam_spec, float):
            fits = [path.solve(lam_spec)]
        elif lam_spec is not None:
            fits = [path.solve(float(v)) for v in np.sort(lam_spec)[::-1]]
        elif lam_max == 0.0:  # y is in the null space: β̂ = y for every λ
            fits = [path.solve(0.0)]
        else:
            ratio = _LAM_MIN_RATIO[k] if lam_min_ratio is None else lam_min_ratio
            fits = _sure_path(path.solve, sure, lam_max, ratio, n_lambdas)

    risks = [sure(f) for f in fits]
    if len(fits) == 1:
        best = 0
    else:
        best = int(np.argmin(np.asarray(risks, dtype=np.float64)))
        if grid and fits[best].lam > 0:
            # The lattice solver is exact only up to its certified gap, and along the path
            # it is warm-started: the chosen λ is solved again as a single λ is (a fresh
            # start), so that the refit with λ frozen (the error bars) gives this very fit.
            fits[best] = new_path().solve(fits[best].lam)
            risks[best] = sure(fits[best])
    fit = fits[best]
    if not all(f.converged for f in fits):
        bad = [f.lam for f in fits if not f.converged]
        warnings.warn(
            f"trend_filter: ADMM reached max_iter={max_iter} before the relative duality gap "
            f"fell below tol={tol:g} at lam = {', '.join(f'{b:.4g}' for b in bad)}; "
            "returning the best iterate (see params['gap'])",
            TrendFilterConvergenceWarning,
            stacklevel=2,
        )
    params: dict[str, Any] = {
        "order": k,
        "lam": fit.lam,
        "df": fit.df,
        "iterations": int(sum(f.iterations for f in fits)),
        "gap": fit.gap,
        "converged": fit.converged,
        "lam_max": lam_max,
        "solver": solver,
        "algorithm": f"ADMM + polishing ({op.kind})",
    }
    rounds = int(sum(f.rounds for f in fits))
    if k > 0 and solver == "auto" and any(f.rounds > 0 for f in fits):
        if newton is not None and newton.banded:
            kind = "banded"
        elif newton is not None and newton.faces is not None:
            kind = "CG on cached sparse factorisations"
        else:
            kind = "sparse LU"
        params["algorithm"] = f"{_DUAL_ALGORITHM} ({kind})"
        params["rounds"] = rounds
        if any(f.iterations > 0 for f in fits):
            params["algorithm"] += f"; ADMM + polishing ({op.kind}) where not certified"
    if exact and grid:
        params["algorithm"] = _LATTICE_ALGORITHM
        params["rounds"] = rounds
        if rounds:
            params["algorithm"] += "; minimum-cut decomposition where not certified"
        if any(f.admm for f in fits):
            params["algorithm"] += f"; ADMM + polishing ({op.kind}) where not certified"
    elif exact:
        params["algorithm"] = (
            "direct 1-D TV (Condat 2013)" if chain else "minimum-cut decomposition (push-relabel)"
        )
        params["rounds"] = rounds
        if any(f.iterations > 0 for f in fits):
            params["algorithm"] += f"; ADMM + polishing ({op.kind}) where not certified"
    if len(fits) > 1:
        params["path"] = _path_table(fits, risks, yv)
    beta = fit.beta
    if clip:
        params["df_fit"] = fit.df
        params["df"] = positive_df(fit)
        params[MARK] = True
        beta = positive_part(beta)
    refit = functools.partial(
        trend_filter,
        sigma=s,
        structure=g,
        order=k,
        lam=fit.lam,
        tol=tol,
        max_iter=max_iter,
        solver=solver,
        nonnegative=clip,
    )
    return Denoised(
        estimate=beta.reshape(shape),
        risk=risks[best],
        method="trend_filter",
        params=params,
        sigma=s,
        refit=refit if s is not None else None,
        observed=arr,
    )


def _top_fit(y: np.ndarray, g: Graph, order: int) -> tuple[float, _Fit]:
    """``λ_max`` and the fit at ``λ_max`` (the null-space projection, exact) of
    ``trend_filter(y, σ, g, order=order)``, without building a solver: the numbers
    ``_warm_solver(y, g, order)`` and its solve at ``λ_max`` give, bit for bit (the same
    ``_least_norm_dual`` and ``_projection_fit``), for a screen that solves no other λ."""
    yv = np.asarray(y, dtype=np.float64).ravel()
    op = _make_operator(g, order)
    if g.m == 0 or yv.size == 0:
        return 0.0, _identity_fit(op, yv, 0.0)
    u_ls = _least_norm_dual(op, yv)
    lam_max = float(np.max(np.abs(u_ls))) if u_ls.size else 0.0
    if lam_max == 0.0:  # as _Path.solve(0.0)
        return 0.0, _identity_fit(op, yv, 0.0)
    return lam_max, _projection_fit(op, yv, lam_max)


def _warm_solver(
    y: np.ndarray, g: Graph, order: int, tol: float = 1e-6, max_iter: int = 20_000
) -> tuple[float, Callable[[float], _Fit]]:
    """``λ_max`` and a solve of ``trend_filter(y, σ, g, order=order, lam=λ)`` for order 1 or 2
    (``solver="auto"``, one σ) that warm-starts each λ from the last one solved, in any
    order of λ: the solver of the SURE path (:class:`._path._Path`, the dual active set of
    :mod:`._dual_newton` where it applies), for a screen that solves the path's λ out of
    order (``dpgauss.denoise.auto``).  A fit is certified when ``fit.converged`` and
    ``fit.gap <= tol``."""
    if order not in (1, 2):
        raise ValueError(f"order must be 1 or 2 for a warm solver; got {order!r}")
    yv = np.asarray(y, dtype=np.float64).ravel()
    op = _make_operator(g, order)
    if g.m == 0 or yv.size == 0:
        return 0.0, functools.partial(_identity_fit, op, yv)
    u_ls = _least_norm_dual(op, yv)
    lam_max = float(np.max(np.abs(u_ls))) if u_ls.size else 0.0
    path = _Path(_Solver(yv, op, tol, max_iter), lam_max, u_ls, newton=_dual_newton(op, yv))
    return lam_max, path.solve


def _check_weighted(order: int, solver: str, chain: bool) -> None:
    """Per-key σ (the weighted fidelity of :mod:`._weighted`) is solved exactly, for
    order 0 only: its SURE needs the divergence ``Σ σ_i² ∂β̂_i/∂y_i``, which is a sum over
    fused groups for order 0 but the trace of a weighted projection for higher orders."""
    if order != 0:
        raise ValueError(
            f"trend_filter with one sigma per key solves order 0 only; got order={order} "
            "(pass one sigma, or use order=0)"
        )
    if solver == "admm":
        raise ValueError(
            "trend_filter with one sigma per key is solved exactly (solver='auto' or "
            "'exact'), not by ADMM; got solver='admm'"
        )
    if not chain and not _graph_tv.available():
        raise ImportError(
            "trend_filter with one sigma per key needs numba for its compiled minimum cut "
            f"(except on a chain): {install_hint('fast')}"
        )


def _weighted_trend_filter(
    y: np.ndarray,
    sigma: np.ndarray,
    graph: Graph,
    op: _Operator,
    lam_spec: float | np.ndarray | None,
    n_lambdas: int,
    lam_min_ratio: float | None,
    tol: float,
    max_iter: int,
    solver: str,
    chain: bool,
    clip: bool = False,
) -> Denoised:
    """Order 0 with fidelity weights ``1/σ_i²`` (:mod:`._weighted`), λ by SURE; with
    ``clip`` the positive part (the exact constrained solution) and its SURE."""
    yv = y.ravel()
    path = WeightedPath(yv, sigma, op, tol, chain)
    lam_max = path.lam_max

    def divergence(fit: Any) -> float:
        if not clip:
            return float(fit.divergence)
        return positive_groups(op, fit.beta, fit.zero, path.w)

    def sure(fit: Any) -> float:
        r = yv - (positive_part(fit.beta) if clip else fit.beta)
        return float(r @ r) - float(path.var.sum()) + 2.0 * divergence(fit)

    if isinstance(lam_spec, float):
        fits = [path.solve(lam_spec)]
    elif lam_spec is not None:
        fits = [path.solve(float(v)) for v in np.sort(lam_spec)[::-1]]
    elif lam_max == 0.0 or graph.m == 0:
        fits = [path.solve(0.0)]
    else:
        ratio = _LAM_MIN_RATIO[0] if lam_min_ratio is None else lam_min_ratio
        fits = _sure_path(path.solve, sure, lam_max, ratio, n_lambdas)
    risks = [sure(f) for f in fits]
    best = int(np.argmin(risks)) if len(fits) > 1 else 0
    fit = fits[best]
    if not all(f.converged for f in fits):
        bad = [f.lam for f in fits if not f.converged]
        warnings.warn(
            "trend_filter: the weighted exact solver's relative duality gap exceeded "
            f"tol={tol:g} at lam = {', '.join(f'{b:.4g}' for b in bad)} (see params['gap'])",
            TrendFilterConvergenceWarning,
            stacklevel=3,
        )
    params: dict[str, Any] = {
        "order": 0,
        "lam": fit.lam,
        "df": fit.df,
        "iterations": 0,
        "gap": fit.gap,
        "converged": fit.converged,
        "lam_max": lam_max,
        "solver": solver,
        "algorithm": (
            "weighted direct 1-D TV"
            if chain
            else "weighted minimum-cut decomposition (push-relabel)"
        ),
        "rounds": int(sum(f.rounds for f in fits)),
        "divergence": divergence(fit),
    }
    if len(fits) > 1:
        params["path"] = _path_table(fits, risks, yv)
    beta = fit.beta
    if clip:
        params["df_fit"] = fit.df
        params["df"] = positive_groups(op, beta, fit.zero)
        params[MARK] = True
        beta = positive_part(beta)
    refit = functools.partial(
        trend_filter,
        sigma=sigma.reshape(y.shape),
        structure=graph,
        order=0,
        lam=fit.lam,
        tol=tol,
        max_iter=max_iter,
        solver=solver,
        nonnegative=clip,
    )
    return Denoised(
        estimate=beta.reshape(y.shape),
        risk=risks[best],
        method="trend_filter",
        params=params,
        sigma=sigma.reshape(y.shape),
        refit=refit,
        observed=y,
    )
