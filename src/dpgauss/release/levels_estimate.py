r"""The estimates of a zoom-level release: every level measured, then made to add up.

Called by :func:`~dpgauss.release.estimate.estimate` after the finest level is released and
denoised as in a one-level release (same denoiser, σ and structure).  Then, post-processing
of released values, public σ and the public tree only:

1. **Measure** each coarser level: its true values are the exact sums of the finest bounded
   aggregate over each parent (no second pass over the records), and its noise is drawn
   by the same seam as the finest level's (:func:`~dpgauss.release.estimate.add_noise`),
   with the level's own calibration (:mod:`dpgauss.release.levels_plan`).
2. **Combine** by generalised least squares on the tree
   (:func:`~dpgauss.denoise.levels.consistent_levels`): the inputs are the *denoised*
   finest values, each with the standard error ``h_i/z`` where ``h_i`` is the larger side
   of its denoised interval's half-width (the identity's: exactly σ), and every coarser
   level's released values with their σ.  The result is consistent: a parent is the sum
   of its children.
3. **Never negative** (``[denoise] nonnegative``, the default for counts):
   :func:`~dpgauss.denoise.levels.nonnegative_levels`, a projection top-down that keeps
   every parent the sum of its children.
4. **Intervals** at every level: ``x̂ ± z·√P`` from the GLS variances ``P`` (Levels'
   exact two-pass variances), the lower bound clipped at 0 for non-negative statistics, and
   widened, if needed, to hold the published (projected) value.  What they mean: with
   ``[denoise] method = "none"`` the GLS estimate is linear and unbiased, so the interval is
   **exact** for Gaussian noise (the secure lattice law: to within its grid); with a
   denoiser, the denoised finest values are biased and their errors correlated, so the
   interval is exact only under the model of step 2 (independent errors of the stated
   size) — an **approximation**, whose coverage per level is measured in
   ``benchmarks/bench_levels.py``, not proved.

The finest table gets one column per coarser level naming each key's parent, and its
``denoised`` columns become the consistent values; each coarser level's table has ``key``
(``name`` for regions with ``name_property``), ``children`` (its fine keys), ``released``,
``denoised``, ``sigma``, ``released_lower``, ``released_upper``, ``denoised_lower``,
``denoised_upper`` and a column per level above it naming its parent.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
from scipy import special

from ..denoise.levels import consistent_levels, nonnegative_levels
from .plan import ReleasePlan

__all__ = ["estimate_levels", "level_seed"]


def level_seed(seed: int, level: int) -> int:
    """The seed of a coarser level's floating-point noise (an uncharged experiment): its
    own stream, derived from the release's seed and the level's number."""
    return int(np.random.SeedSequence([seed, level]).generate_state(2, np.uint64)[0])


def _up_to(levels: Any, start: int, stop: int, index: np.ndarray) -> np.ndarray:
    """The index at level ``stop`` of nodes ``index`` of level ``start`` (0: the finest)."""
    for k in range(start, stop):
        index = levels[k].parents[index]
    return index


def estimate_levels(
    plan: ReleasePlan,
    y_true: np.ndarray,
    seed: int | None,
    columns: dict[str, np.ndarray],
    noise_info: dict[str, Any],
    den_info: dict[str, Any],
    add_noise: Callable[[Any, np.ndarray, int | None], Any],
) -> tuple[dict[str, np.ndarray], dict[str, dict[str, np.ndarray]]]:
    """The finest table's columns and each coarser level's table (module docstring);
    ``noise_info`` and ``den_info`` get their ``levels`` sections.  ``add_noise`` is
    :func:`~dpgauss.release.estimate.add_noise` (the seam, as the finest level used it)."""
    lp = plan.levels
    assert lp is not None
    spec = plan.spec
    conf = spec.output.level
    z = float(-special.ndtri((1.0 - conf) / 2.0))
    nonneg = spec.nonnegative
    fine = np.asarray(columns["denoised"], dtype=np.float64)
    half = np.maximum(columns["denoised_upper"] - fine, fine - columns["denoised_lower"])
    sigma0 = float(lp.calibrations[0].probe.sigma)
    s_fine = np.maximum(half / z, 1e-9 * sigma0)

    rels = []
    for i, (lv, cal) in enumerate(zip(lp.levels, lp.calibrations[1:], strict=True), start=1):
        true_l = np.bincount(lv.of_fine, weights=y_true, minlength=lv.size)
        rels.append(add_noise(cal, true_l, None if seed is None else level_seed(seed, i)))
    values = [fine] + [np.asarray(r.values, dtype=np.float64) for r in rels]
    sigmas = [s_fine] + [float(r.sigma) for r in rels]
    gls = consistent_levels(values, sigmas, lp.parents)
    final = nonnegative_levels(gls) if nonneg else gls.estimate

    def interval(k: int) -> tuple[np.ndarray, np.ndarray]:
        w = z * np.sqrt(gls.variance[k])
        lo, hi = gls.estimate[k] - w, gls.estimate[k] + w
        if nonneg:
            lo = np.maximum(lo, 0.0)
        return np.minimum(lo, final[k]), np.maximum(hi, final[k])

    # the finest table: parents after the key columns, the consistent values
    keys = plan.domain.key_columns()
    out = {k: columns[k] for k in keys}
    for lv in lp.levels:
        out[lv.name] = lv.labels[lv.of_fine]
    lo0, hi0 = interval(0)
    for k, v in columns.items():
        if k not in out:
            out[k] = v
    out["denoised"], out["denoised_lower"], out["denoised_upper"] = final[0], lo0, hi0

    tables: dict[str, dict[str, np.ndarray]] = {}
    widths = [float(np.median(hi0 - lo0))]
    for i, (lv, rel) in enumerate(zip(lp.levels, rels, strict=True), start=1):
        lo, hi = interval(i)
        r_lo, r_hi = rel.interval(conf)
        table: dict[str, np.ndarray] = {"key": lv.labels}
        if lv.names is not None:
            table["name"] = lv.names
        table.update(
            {
                "children": lv.children,
                "released": values[i],
                "denoised": final[i],
                "sigma": np.full(lv.size, sigmas[i]),
                "released_lower": np.asarray(r_lo, dtype=np.float64),
                "released_upper": np.asarray(r_hi, dtype=np.float64),
                "denoised_lower": lo,
                "denoised_upper": hi,
            }
        )
        nodes = np.arange(lv.size)
        for j in range(i, len(lp.levels)):
            up = lp.levels[j]
            table[up.name] = up.labels[_up_to(lp.levels, i, j + 1, nodes)]
        tables[lv.name] = table
        widths.append(float(np.median(hi - lo)))

    exact = spec.denoise.method == "none"
    noise_info["levels"] = lp.as_dict()
    noise_info["mu"] = lp.mu
    den_info["levels"] = {
        "method": "generalised least squares on the tree of levels (the denoised finest "
        "values and every coarser level's released values), then "
        + ("a projection onto non-negative values that add up" if nonneg else "no projection"),
        "consistent": "every parent's denoised value is the sum of its children's",
        "nonnegative": nonneg,
        "intervals": {
            "level": conf,
            "method": "GLS estimate +- z sqrt(GLS variance)"
            + (", lower bounds clipped at 0" if nonneg else ""),
            "meaning": (
                "exact for Gaussian noise: the GLS estimate of raw measurements is linear "
                "and unbiased"
                if exact
                else "approximate: exact if the denoised finest values were unbiased with "
                "independent errors of standard error (interval half-width)/z; coverage per "
                "level is measured in benchmarks/bench_levels.py"
            ),
            "median_width": dict(
                zip(["finest", *(lv.name for lv in lp.levels)], widths, strict=True)
            ),
        },
    }
    return out, tables
