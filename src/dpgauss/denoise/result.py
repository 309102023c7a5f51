"""What every denoiser returns, its error bars, and the validation every denoiser starts with.

Denoisers are post-processing: they see only the released vector ``y``, the public noise
level ``σ`` and public structure (a graph, a grid), never the true data, so they cost no
privacy.  Because σ is public and exact, Stein's unbiased risk estimate (SURE) of the
squared error ``‖ŷ − θ‖²`` is unbiased for the true risk; every estimator that has one
reports it, and :func:`dpgauss.denoise.auto` uses it to choose.

Every result can also say how wrong each of its values may be: :meth:`Denoised.interval`
gives per-key intervals and :meth:`Denoised.error_bars` the per-key error scale and an
upper confidence bound on the total error (below).

Error bars: per-key intervals and a bound on the total error
------------------------------------------------------------

A denoised release ``ŷ = f(y)`` of ``y = θ + N(0, diag σ²)`` is often far more accurate
than ``y``, but its error ``ŷ − θ`` is neither centred nor the same at every key: an
adaptive estimator is biased (it shrinks jumps and hot spots, kills small values) and its
variance is small where it pools many keys and large where it keeps a key alone.  The
intervals target coverage **at the keys a reader looks at** — the hot spots (the top decile
of θ) and the keys next to a jump — as well as on average over keys, and are **never wider
than the raw interval** ``y_i ± z σ_i``.

Linear estimators (the identity, :func:`~dpgauss.denoise.posterior_mean`) carry their exact
error scale: ``σ`` for the identity, the posterior standard deviation ``√(w²σ²/(w²+σ²))``
for the posterior mean (exact coverage under its prior), and normal quantiles.

Every other estimator is handled the same way, from its own output, the released ``y``
(:attr:`Denoised.observed`) and the public σ only (post-processing, no privacy cost):

1. Draw ``B`` simulated releases ``y*_b = ŷ + N(0, diag σ²)`` around the estimate.
2. Re-run the estimator with its tuning frozen (:attr:`Denoised.refit`: the λ, thresholds,
   order chosen on ``y``) and record ``e_b = f(y*_b) − ŷ``.  The per-key mean square
   ``m_i = (1/B) Σ_b e_{b,i}²`` is the estimator's error at key ``i`` when the truth is
   ``ŷ``: its variance there, and the part of its bias that recurs (a fused group's mean is
   pulled by the same ``λ·(boundary)/|group|`` whatever the truth; a kept coefficient is
   shrunk by the same λ).  This gives the *shape*: which keys are uncertain.
3. The *level* comes from Stein's unbiased risk estimate ``R`` (unbiased for the total
   ``E‖ŷ − θ‖²`` because σ is public).  The bootstrap's total ``M = Σ m_i`` misses the bias
   that ``ŷ``, smoother than θ, cannot reproduce; the remainder is spread evenly over the
   keys, as in Nychka's analysis.  ``R`` is noisy — its standard deviation ``sd(R)``, about
   ``σ²√(2d)``, often exceeds the whole error of a good denoiser — so the remainder is taken
   one standard deviation up (:data:`GUARD`), ``sd(R)`` being the spread of the replicates'
   own SURE ``R*_b`` (Efron 2004)::

       s_i² = max(m_i + max(R + GUARD · sd(R) − M, 0) / d,  GUARD · sd(R) / d),
       fit interval  ŷ_i ± t_{B,(1+level)/2} · s_i,

   the floor being SURE's own resolution per key.  The quantile is Student's ``t`` with
   ``B`` degrees of freedom because ``s_i`` is itself estimated from ``B`` draws.  An
   estimator without SURE may name a stand-in level in ``params["risk_proxy"]`` (hard
   thresholding: its naive SURE, biased low); it sets the level only.
4. **Bias-aware widening toward the data, and the raw fallback.**  Steps 1–3 centre on
   ``ŷ``, so where ``ŷ`` is pulled away from θ — a hot spot shrunk, a small count killed, a
   jump rounded off — they describe the wrong point: the bias is local and the evenly
   spread remainder is too thin there (this gave 0.23–0.60 coverage at the hot spots of
   sparse count maps, issue #26).  The bias is not known, but ``y`` is an unbiased pilot
   of θ at every key.  So the interval is the hull of the fit interval and a *core* around
   ``y`` that reaches further on the side where the estimate lies: ``TOWARD·z·σ_i`` there
   (:data:`TOWARD` = 0.84 of the raw half-width ``z σ_i``; at 95 %, ``1.646σ``, the 90 % raw
   half-width) and ``CORE·z·σ_i`` on the other side (:data:`CORE` = 0.654; at 95 %,
   ``1.282σ``, the 80 % one); where ``ŷ_i = y_i`` both sides are ``TOWARD``, and where θ ≥ 0
   is public (``params["nonnegative"]``) and ``ŷ_i = 0``, the upper side is ``TOWARD`` too
   (an estimate at the bound can only be biased down: θ_i ≥ ŷ_i)::

       a_i = TOWARD if ŷ_i ≤ y_i else CORE,
       b_i = TOWARD if ŷ_i ≥ y_i (or θ ≥ 0 is public and ŷ_i = 0) else CORE,
       lower_i = min(ŷ_i − t s_i,  y_i − a_i·z σ_i),
       upper_i = max(ŷ_i + t s_i,  y_i + b_i·z σ_i),

   and where that hull is wider than the raw interval, the interval **is** the raw
   ``y_i ± z σ_i`` (the denoiser cannot do better there; at such a key ``ŷ_i`` may lie
   outside it).  Finally, when θ ≥ 0 is public (``params["nonnegative"]``), lower bounds
   are clipped at 0 (intersecting an interval with a set known to contain θ loses no
   coverage).

   Why the side of the estimate.  A denoiser pulls ``y`` toward its structure, and where it
   does better than ``y`` it pulls toward θ: θ then lies on the estimate's side of ``y``.
   The misses that the symmetric core ``y ± 1.282σ`` left (top decile 0.874–0.899 at
   ε = 2 in 9 of 22 rows of ``bench_coverage.py``; the taxi map's two keys next to a jump
   at ε = 1, 0.875, one of them its busiest junction) were of that kind: a small count
   killed (``ŷ = 0``) whose ``y`` fell more than ``1.282σ`` below it, or a peak pooled to
   its neighbours' level whose ``y`` fell below that level.  Widening only that side costs
   less width than a symmetric core that lifts the top decile as much (below).  For counts
   (θ ≥ 0 public) a key estimated at 0 whose ``y`` is positive may still hide a count above
   ``y + 1.282σ``; its upper side is widened as well (its lower side is clipped at 0
   anyway).

   What is proved, with ``e_i = y_i − θ_i ~ N(0, σ_i²)``.  (i) *Never wider than raw*: by
   construction (``CORE + TOWARD < 2``, so the core itself is narrower than raw).  (ii) *A
   floor at every key, for every θ and every denoiser*: the interval contains
   ``y_i ± CORE·z·σ_i`` (or is ``y_i ± z σ_i``), so ``P(θ_i ∈ I_i) ≥ 2Φ(CORE·z) − 1``,
   0.80 at 95 %, whatever θ is and however biased the estimator — at a hot spot, next to a
   jump, at a killed small count.  The bootstrap interval alone has no such floor (a key
   killed in every draw got a width near 0).  (iii) *0.90 where the fit is no worse than
   the data*:  if ``|ŷ_i − θ_i| ≤ |e_i|`` then ``ŷ_i`` lies between ``y_i`` and the
   reflection of ``y_i`` about θ_i, so θ_i is on the estimate's side of ``y_i`` (or
   ``ŷ_i = y_i``, both sides ``TOWARD``) and is covered whenever ``|e_i| ≤ TOWARD·z σ_i``.
   Hence, for every θ and every denoiser::

       P(θ_i ∉ I_i) ≤ P(|e_i| > TOWARD·z σ_i) + P(|e_i| > CORE·z σ_i and |ŷ_i − θ_i| > |e_i|),

   at most 0.10 plus the chance that the key's estimate is worse than the raw value *and*
   its noise exceeds ``1.282σ`` (at 95 %); and never more than 0.20 (ii).  (iv) *Above
   that*: θ_i is also covered whenever the fit interval reaches it, the common case where
   the estimator is right; the class coverage (top decile, next to a jump, zero truth) is
   measured, not proved: ``benchmarks/bench_coverage.py``, table in ``docs/denoising.md``.

   Measured choices.  The top-decile keys of a sparse count map at ε = 2 are small counts
   at about σ that every denoiser kills: for them only the core counts.  Earlier (``auto``,
   the sparse maps of ``bench_coverage.py``, d = 600, ε = 2, 8 draws): a symmetric core
   ``y ± 1.04σ`` (floor 0.70) gave top-decile coverage 0.863 (planar graph); an
   asymmetric hull the other way round — ``y + 1.282σ`` away from ``ŷ``, ``y − 0.674σ``
   toward it, floor 0.50 — 0.876–0.879 (chain, grid) at width 0.75 of raw.  Now
   (``benchmarks/bench_core.py --draws 24 --size 600 --signals map --skip-taxi --seed
   5000``: every denoiser, the same error bars for every core; lowest top decile at ε = 2,
   lowest next to a jump, mean width over raw at ε = 2 / below): the symmetric
   ``y ± 1.282σ`` 0.877, 0.917, 0.79 / 0.75; ``y ± 1.47σ`` (0.75) 0.903, 0.908, 0.85 / 0.81;
   the toward side at ``TOWARD`` = 0.75, 0.80, 0.84, 0.90: 0.890, 0.897, 0.903, 0.907 at
   widths 0.81–0.84 / 0.77–0.82, next to a jump 0.917–0.933.  Every interval that is not
   the raw one is at least ``(CORE + TOWARD)·z·σ`` wide, 0.75 of the raw width, even
   where the fit is excellent (the fit's own interval was 0.19 of raw on the taxi map at
   ε ≤ 1, and missed its busiest junctions).

   Weak fits.  The toward side rests on the fit being closer to θ than ``y`` at most keys.
   A global shrinker that gains little on a dense signal (James–Stein, soft thresholding of
   a smooth or piecewise-constant map; gain 1.0–1.6) moves *every* key toward 0 whatever θ
   is, so ``ŷ_i < y_i`` says nothing of where θ_i lies, and the hot spots it shrinks the
   most were covered only by the ``CORE`` side (top decile 0.87–0.90, average 0.92–0.93).
   Such error bars are *weak* (:attr:`ErrorBars.weak`): their own total ``Σ s_i²`` is at
   least :data:`WEAK` = ½ of the raw ``Σ σ_i²`` (the denoiser gains less than 2× by its own
   bound; a function of ``y``, σ and the public draws, so post-processing).  A weak fit's
   core reaches ``TOWARD·z·σ_i`` on *both* sides, so its floor is 0.90 at every key whatever
   θ (as in (ii), with ``TOWARD``), at a width close to raw — where the denoiser cannot do
   better, the intervals say so (reports: ``intervals.weak_fit``).  Measured with
   ``nice -n 5 python3 benchmarks/bench_coverage.py --draws 20 --size 600 --skip-taxi``
   before and after (the same draws; 2026-12-05): the 12 rows of James–Stein and soft
   thresholding on smooth and piecewise signals went from top decile 0.867–0.956 and
   average 0.922–0.937 to 0.920–0.949 and 0.936–0.945, at widths 0.86–0.95 → 0.92–0.97 of
   raw; every other row moved by at most 0.02 (the weak rows of wavelets, trend filtering
   and James–Stein on sparse maps at gain 1.3–2); every row of that table now meets the
   targets (top decile and next to a jump ≥ 0.90, average in [0.93, 0.97]).

   Without :attr:`Denoised.observed` (a result built by hand), step 4 is skipped.

Sums of keys
------------

A reader who adds keys up — a neighbourhood's junctions, a district's cells — needs the
error of the sum ``S = Σ_i w_i θ_i``, and the per-key intervals do not give it: a
denoiser's errors are correlated across keys (a fused group moves as one) and a biased
estimator's biases may add up instead of cancelling (thresholding kills every small count
of a region at once).  :meth:`Denoised.sum_interval` (and :func:`error_bars`' ``weights``,
one row of a matrix ``W`` a sum) applies the per-key model to each sum, from the same
draws:

1. *Shape*: the draws' errors projected, ``m_S = (1/B) Σ_b (w·e_b)²``: the estimator's own
   covariance across keys is in it (a sum of the per-key ``m_i`` would drop it).
2. *Level*: the per-key remainder ``spread = max(R + GUARD·sd(R) − M, 0)/d`` is a bias of
   ``√spread`` per key whose signs are unknown.  In the worst case they all push the sum
   one way, ``|Σ w_i b_i| ≤ ‖w‖₁ √spread``, so::

       s_S² = max(m_S + spread · ‖w‖₁²,  floor · ‖w‖₁²),   floor = GUARD · sd(R) / d,

   which for one key's indicator is that key's ``s_i²`` exactly.  (Taking the signs as
   independent, ``spread · ‖w‖₂²``, was measured and rejected: 0.83–0.87 coverage for
   groups of 64–256 keys under thresholding at ε = 2, where the killed small counts of a
   region are all biased down.)
3. *Bias-aware hull and raw fallback*, with the raw sum ``w·y`` as the unbiased pilot (its
   variance ``r² = Σ w_i² σ_i²`` is exact): the hull of ``Ŝ ± t·s_S`` and the core
   around ``w·y`` — ``TOWARD·z·r`` on the side where ``Ŝ`` lies (both where ``Ŝ = w·y``;
   the upper side too for a sum of θ ≥ 0 estimated at 0), ``CORE·z·r`` on the other —
   replaced by the raw ``w·y ± z·r`` where that is wider.  So the per-key guarantees hold
   for every sum: never wider than the raw sum's interval, ``P(S ∈ I) ≥ 2Φ(CORE·z) − 1``
   (0.80 at 95 %) whatever θ and the estimator's bias, and a miss only with probability
   ≤ 0.10 + P(``|Ŝ − S| > |w·y − S| > CORE·z·r``).
4. When θ ≥ 0 is public, a sum whose weights are all ≥ 0 has its bounds clipped at 0.

For an exact scale (the identity, the posterior mean) the per-key errors are independent
(the posterior factorises over keys): ``s_S² = Σ w_i² scale_i²``, normal quantiles, exact.
A positive part ``max(y, 0)`` also carries the raw σ as its scale (auto's identity with
``nonnegative``) but is not linear: its sums are biased up by every clipped key, so its
intervals, per key and of sums, take the hull of step 3 as the bootstrap's do.  Each sum's
variances are computed in its own unit (a power of 2 near its largest ``|w_i|``), so that
``Σ w_i² σ_i²`` neither underflows nor overflows where the sum's deviation is a double.
Coverage by group size, for groups holding a hot spot and for the whole map, is measured
by ``benchmarks/bench_sums.py`` (table in ``docs/denoising.md``).

The total error.  ``R`` is unbiased but noisy; the bootstrap also gives its spread, the
standard deviation of the replicates' own SURE ``R*_b`` (Efron 2004: the bootstrap
estimate of a risk estimate's variability), so :meth:`ErrorBars.risk_upper` is the
one-sided bound ``R + z_level · sd(R*)``, floored at the bootstrap's ``M`` (a risk below the
estimator's own simulated error at ``ŷ`` is not credible).  It is never 0 or negative.
"""

from __future__ import annotations

import hashlib
import math
import numbers
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, NamedTuple

import numpy as np
from scipy import special
from scipy.stats import t as student_t

from .._validation import REAL, UNIT_OPEN, as_real_array, check_int, check_interval, check_scalar
from .._validation import Interval as _Range

__all__ = [
    "CORE",
    "DRAWS",
    "GUARD",
    "INTERVAL_METHOD",
    "TOWARD",
    "Denoised",
    "ErrorBars",
    "Interval",
    "Sums",
    "check_noise",
    "check_observation",
    "error_bars",
    "public_seed",
    "raw_sum_sd",
]


@dataclass(frozen=True)
class Denoised:
    """The output of a denoiser.

    Attributes
    ----------
    estimate
        The denoised vector, same shape as the input ``y``.
    risk
        Stein's unbiased estimate of ``E‖estimate − θ‖²`` (the total squared error, not
        per coordinate), or ``None`` where no such estimate exists.
    method
        The estimator's name, e.g. ``"james_stein"``.
    params
        The parameters chosen or used (threshold, λ, degrees of freedom, …).
    sigma
        The noise standard deviation the estimate was computed with (a number, or one per
        key), or ``None`` where the denoiser was run without it.
    refit
        The same estimator with its tuning frozen (the λ, thresholds, order chosen here):
        a function of a new vector ``y*`` returning its :class:`Denoised`.  The error bars
        re-run it on simulated releases (:func:`error_bars`).
    scale
        For a linear estimator, the exact per-key standard deviation of its error (the
        error bars then need no simulation); ``None`` otherwise.
    observed
        The released vector ``y`` the estimate was computed from (every denoiser of this
        package records it): the intervals are bias-aware around it and never wider than
        the raw ``y ± z·σ`` (module doc).  ``None``: the intervals are the bootstrap's
        ``ŷ ± t·s`` alone.
    """

    estimate: np.ndarray
    risk: float | None
    method: str
    params: dict[str, Any] = field(default_factory=dict)
    sigma: float | np.ndarray | None = field(default=None, repr=False, compare=False)
    refit: Callable[[np.ndarray], Denoised] | None = field(default=None, repr=False, compare=False)
    scale: np.ndarray | None = field(default=None, repr=False, compare=False)
    observed: np.ndarray | None = field(default=None, repr=False, compare=False)
    _bars: dict[int, ErrorBars] = field(default_factory=dict, init=False, repr=False, compare=False)
    _seeds: dict[int, np.random.SeedSequence] = field(
        default_factory=dict, init=False, repr=False, compare=False
    )

    def __post_init__(self) -> None:
        if np.asarray(self.estimate).dtype.kind not in "fiu":
            raise TypeError(
                f"Denoised: estimate must be an array of real numbers; got "
                f"{type(self.estimate).__name__}"
            )
        if self.risk is not None and not isinstance(self.risk, numbers.Real):
            raise TypeError(f"Denoised: risk must be a number or None; got {self.risk!r}")
        if not isinstance(self.method, str):
            raise TypeError(f"Denoised: method must be a name (str); got {self.method!r}")
        if not isinstance(self.params, dict):
            raise TypeError(f"Denoised: params must be a dict; got {type(self.params).__name__}")
        if self.refit is not None and not callable(self.refit):
            raise TypeError("Denoised: refit must be a function of y or None")
        if self.observed is not None and np.size(self.observed) != np.size(self.estimate):
            raise ValueError(
                f"Denoised: observed must have one value per key of the estimate "
                f"({np.size(self.estimate)}); got {np.size(self.observed)}"
            )

    @property
    def mse(self) -> float | None:
        """Estimated mean squared error per coordinate, ``risk / d``."""
        if self.risk is None or self.estimate.size == 0:
            return None
        return self.risk / self.estimate.size

    def error_bars(self, *, draws: int | None = None, rng: object = None) -> ErrorBars:
        """Per-key error scale and a bound on the total error (:func:`error_bars`).

        Without ``rng`` the result is computed once per ``draws`` (from fresh entropy, kept
        with it: :meth:`sum_interval` without ``rng`` uses the same draws) and kept.
        """
        n = DRAWS if draws is None else draws
        if rng is not None:
            return error_bars(self, draws=n, rng=rng)
        if n not in self._bars:
            self._bars[n] = error_bars(self, draws=n, rng=self._kept_seed(n))
        return self._bars[n]

    def _kept_seed(self, draws: object) -> np.random.SeedSequence | None:
        """The fresh entropy of the draws kept for ``draws`` (drawn once per ``draws``), so
        that the per-key intervals and the sums asked for without ``rng`` share their draws."""
        if not isinstance(draws, numbers.Integral) or isinstance(draws, bool):
            return None  # error_bars refuses it by name
        return self._seeds.setdefault(int(draws), np.random.SeedSequence())

    def interval(
        self, level: float = 0.95, *, draws: int | None = None, rng: object = None
    ) -> Interval:
        """Per-key ``(lower, upper)`` arrays at confidence ``level`` (a named tuple).

        See the module doc ("Error bars") for the method and the coverage it targets.
        """
        return self.error_bars(draws=draws, rng=rng).interval(level)

    def sum_interval(
        self,
        weights: object,
        level: float = 0.95,
        *,
        draws: int | None = None,
        rng: object = None,
    ) -> Interval:
        """The interval of ``Σ_i w_i θ_i`` at confidence ``level`` (module doc, "Sums of keys").

        ``weights``: one weight per key (a vector or a boolean mask: the ``(lower, upper)``
        of one sum, as 0-d arrays), a ``(k, d)`` matrix or a scipy.sparse ``(k, d)`` matrix
        (arrays of ``k``).  The sums are bootstrapped with the per-key error bars' draws
        (same ``draws``, same ``rng`` give the same draws): for one key's indicator it is
        that key's :meth:`interval` (without ``rng`` too: both then use the draws kept for
        ``draws``).  A sum of nonnegative weights of θ ≥ 0 (``nonnegative`` estimators) has
        its lower bound clipped at 0.
        """
        n = DRAWS if draws is None else draws
        if rng is None:
            rng = self._kept_seed(n)
        return error_bars(self, draws=n, rng=rng, weights=weights).sum_interval(level)


#: Simulated releases per error bar (the bootstrap's ``B``).  32 keeps the cost at about
#: 32 frozen-tuning refits and the width's own noise near √(1/(2·32)) ≈ 12 %.
#: The name of the intervals' method in reports (module doc, step 4).
INTERVAL_METHOD = "bias-aware bootstrap, never wider than raw"
DRAWS = 32
#: The bias remainder is ``R − M`` taken this many standard deviations of ``R`` up.
GUARD = 1.0
#: Every interval contains ``y ± CORE·z·σ`` (a fraction of the raw half-width ``z·σ``; at
#: 95 %, ``y ± 1.282σ``: the 80 % raw interval), so covers θ with probability ≥ 0.80 at every
#: key whatever the estimator's bias.  Module doc, step 4.
CORE = 0.654
#: On the side of ``y`` where the estimate lies (both sides where they are equal) the core
#: reaches ``TOWARD·z·σ`` (at 95 %, ``1.646σ``: the 90 % raw half-width), so a key where the
#: fit is at least as close to θ as ``y`` is covered with probability ≥ 0.90.  Module doc,
#: step 4.
TOWARD = 0.84
#: A fit is *weak* when its error bars' own total ``Σ s_i²`` is at least this fraction of the
#: raw release's ``Σ σ_i²`` (the denoiser gains less than 2× by its own bound): the side of
#: ``y`` where the estimate lies is then no evidence of θ's, and the core reaches
#: ``TOWARD·z·σ`` on both sides (a floor of 0.90 at every key).  Module doc, step 4.
WEAK = 0.5
#: What reports say of a weak fit's intervals.
WEAK_NOTE = (
    "weak fit (its own error bars are at least half the raw error): the intervals reach "
    f"{TOWARD:.0%} of the raw half-width on both sides of each released value"
)
_MAX_DRAWS = 100_000


class Interval(NamedTuple):
    """Per-key interval bounds, arrays of the estimate's shape."""

    lower: np.ndarray
    upper: np.ndarray


@dataclass(frozen=True)
class Sums:
    """The bootstrap of ``k`` weighted sums of keys, ``S_j = Σ_i W_ji θ_i`` (module doc,
    "Sums of keys"); arrays of one value per sum.

    Each sum's variances are kept in its own ``unit`` (a power of 2 near its largest
    ``|W_ji|``), so that they are finite and not subnormal wherever the sum's standard
    deviation is a normal double (``Σ w²σ²`` itself under- or overflows for ``|w|·σ``
    beyond about 1e±154).

    Attributes
    ----------
    estimate
        ``W ŷ``, the sums of the denoised values.
    mean_square
        ``(1/B) Σ_b (W e_b)² / unit²``, the bootstrap's mean square error of each sum at
        ``ŷ`` (the draws' covariance included); for an exact scale
        ``Σ_i W_ji² scale_i² / unit²``.
    l1
        ``Σ_i |W_ji| / unit``: the per-key remainder and floor enter a sum as if aligned
        with its weights, ``spread · l1²`` (the worst case of a bias that is ``√spread`` per
        key).
    observed
        ``W y``, the sums of the released values, or ``None``.
    raw_var
        ``Σ_i W_ji² σ_i² / unit²``, the exact variance of ``W y`` in ``unit²``, or ``None``.
    nonnegative
        Whether every weight of the sum is ≥ 0 (a sum of θ ≥ 0 is then ≥ 0).
    single
        One weight vector was given: :meth:`ErrorBars.sum_interval` returns 0-d arrays.
    unit
        Each sum's unit (a power of 2; 1 for a sum of zero weights).
    """

    estimate: np.ndarray
    mean_square: np.ndarray
    l1: np.ndarray
    observed: np.ndarray | None
    raw_var: np.ndarray | None
    nonnegative: np.ndarray
    single: bool
    unit: np.ndarray | None = None

    @property
    def units(self) -> np.ndarray:
        """:attr:`unit`, ones where it was not given."""
        return np.ones_like(self.l1) if self.unit is None else np.asarray(self.unit)

    @property
    def raw_sd(self) -> np.ndarray | None:
        """``√(Σ_i W_ji² σ_i²)``, the exact standard deviation of ``W y``, or ``None``."""
        return None if self.raw_var is None else self.units * np.sqrt(self.raw_var)

    def shape_out(self, values: np.ndarray) -> np.ndarray:
        """``values`` as returned: one per sum, or a 0-d array for a single weight vector."""
        return np.asarray(values).reshape(()) if self.single else np.asarray(values)


class _Weights(NamedTuple):
    matrix: Any  # (k, d): a dense ndarray or a scipy.sparse matrix, each row / its unit
    single: bool
    unit: np.ndarray  # (k,): each row's power of 2 (finding 2 of review-sums)


def _row_units(largest: np.ndarray) -> np.ndarray:
    """A power of 2 within a factor 2 of each row's largest ``|w|`` (1 for a zero row):
    dividing by it is exact and brings the row's weights into ``[0.5, 1)``."""
    _, exp = np.frexp(np.where(largest > 0, largest, 1.0))
    return np.ldexp(1.0, np.where(largest > 0, exp, 1) - 1)


def _scaled(mat: Any) -> tuple[Any, np.ndarray]:
    """``(W / unit, unit)`` by rows (:func:`_row_units`), dense or scipy.sparse."""
    from scipy import sparse

    if not mat.shape[1]:
        return mat, np.ones(mat.shape[0])
    if sparse.issparse(mat):
        largest = np.asarray(abs(mat).max(axis=1).todense(), dtype=np.float64).ravel()
        unit = _row_units(largest)
        return sparse.csr_matrix(sparse.diags(1.0 / unit) @ mat), unit
    largest = np.max(np.abs(mat), axis=1)
    unit = _row_units(largest)
    return mat / unit[:, None], unit


def raw_sum_sd(weights: Any, sigma: Any) -> np.ndarray:
    """``√(Σ_i W_ji² σ_i²)``: the exact standard deviation of each sum ``W y`` of released
    values with independent noise of standard deviation ``σ_i``.

    ``weights`` is a ``(k, d)`` matrix (dense or scipy.sparse) and ``sigma`` one value or
    ``d``.  Each row is divided by a power of 2 near its largest ``|W_ji|``, and σ by one
    near its largest, first (both exact), so the result is finite and not subnormal
    wherever the standard deviation itself is a normal double — ``Σ w²σ²`` computed
    directly under- or overflows for ``|w|·σ`` beyond about 1e±154."""
    from scipy import sparse

    scaled, unit = _scaled(weights)
    sq = scaled.multiply(scaled) if sparse.issparse(scaled) else scaled * scaled
    sig = np.broadcast_to(np.asarray(sigma, dtype=np.float64), (weights.shape[1],))
    top = _row_units(np.max(sig, initial=0.0, keepdims=True))  # σ in its own power of 2 too
    var = (sig / top) ** 2
    return unit * top * np.sqrt(np.asarray(sq @ var, dtype=np.float64).ravel())


def _as_weights(weights: object, shape: tuple[int, ...]) -> _Weights:
    """Validate the weights of sums of keys: one vector (the estimate's shape, or flat, or a
    boolean mask), a ``(k, d)`` matrix (``(k, *shape)`` too), or a scipy.sparse ``(k, d)``
    matrix; finite real numbers."""
    from scipy import sparse

    d = int(np.prod(shape))
    if sparse.issparse(weights):
        mat = sparse.csr_matrix(weights, dtype=np.float64)
        if mat.ndim != 2 or mat.shape[1] != d or mat.shape[0] < 1:
            raise ValueError(
                f"weights must be a (k, {d}) matrix, one row per sum over the {d} keys; got a "
                f"sparse matrix of shape {mat.shape}"
            )
        if not np.all(np.isfinite(mat.data)):
            raise ValueError("weights must be finite numbers")
        return _weights(mat, False)
    arr = np.asarray(weights)
    if arr.dtype == bool:
        arr = arr.astype(np.float64)
    arr = as_real_array(arr, "weights").astype(np.float64)
    check_interval(arr, "weights", REAL)
    if arr.shape == shape or arr.shape == (d,):
        return _weights(arr.reshape(1, d), True)
    if arr.ndim >= 2 and arr.shape[0] >= 1 and arr[0].size == d and arr.shape[1:] in (shape, (d,)):
        return _weights(arr.reshape(arr.shape[0], d), False)
    raise ValueError(
        f"weights must have one value per key (shape {shape} or ({d},)), or be a (k, {d}) "
        f"matrix of k sums; got shape {arr.shape}"
    )


def _weights(mat: Any, single: bool) -> _Weights:
    """The rows of ``mat`` in their units (:func:`_scaled`)."""
    scaled, unit = _scaled(mat)
    return _Weights(scaled, single, unit)


def _apply(w: _Weights, v: np.ndarray) -> np.ndarray:
    """``(W / unit) v`` for a flat vector ``v`` (each sum in its unit)."""
    return np.asarray(w.matrix @ v, dtype=np.float64).ravel()


def _sums(
    w: _Weights,
    estimate: np.ndarray,
    mean_square: np.ndarray | None,
    observed: np.ndarray | None,
    sigma: np.ndarray | None,
    scale: np.ndarray | None = None,
) -> Sums:
    """The :class:`Sums` of ``w``: ``mean_square`` from the bootstrap, or (``None``) the exact
    ``Σ W² scale²`` of independent per-key errors of standard deviation ``scale``."""
    from scipy import sparse

    mat = w.matrix
    if sparse.issparse(mat):
        absw, sq = abs(mat), mat.multiply(mat)
        nonneg = np.asarray((mat < 0).sum(axis=1)).ravel() == 0
    else:
        absw, sq = np.abs(mat), mat * mat
        nonneg = np.all(mat >= 0, axis=1)
    l1 = np.asarray(absw.sum(axis=1), dtype=np.float64).ravel()
    squared = _Weights(sq, w.single, w.unit)
    raw_var = None if sigma is None else _apply(squared, sigma.ravel() ** 2)
    if mean_square is None:
        assert scale is not None
        mean_square = _apply(squared, scale.ravel() ** 2)
    obs = None if observed is None else w.unit * _apply(w, observed.ravel())
    est = w.unit * _apply(w, estimate.ravel())
    return Sums(est, mean_square, l1, obs, raw_var, nonneg, w.single, w.unit)


@dataclass(frozen=True)
class ErrorBars:
    """Per-key error scale of a denoised vector and its total error, with their sources.

    Attributes
    ----------
    estimate
        The denoised vector.
    scale
        ``s_i``, the estimated root mean squared error of every key (shape of ``estimate``).
    dof
        Degrees of freedom of the quantile: ``inf`` for an exact scale (normal quantiles),
        ``B`` for the bootstrap (Student's ``t``).
    risk
        SURE of the total squared error, or ``None`` where the estimator has none; for an
        exact scale, the exact risk ``Σ scale²`` (the Bayes risk of a posterior mean).
    risk_sd
        The standard deviation of that estimate (0 where it is exact).
    simulated
        ``M = Σ m_i``, the bootstrap's total squared error at ``ŷ`` (the exact risk for a
        linear estimator).
    draws
        ``B`` (0 for an exact scale).
    source
        ``"exact"`` or ``"bootstrap"``.
    observed
        The released ``y`` (shape of ``estimate``), or ``None``: then :meth:`interval` is
        ``estimate ± quantile · scale`` alone (no bias-aware part, no raw fallback).
    sigma
        The public σ of every key (shape of ``estimate``), or ``None``.
    nonnegative
        θ ≥ 0 is public knowledge (the denoiser's ``params["nonnegative"]``): lower bounds
        are clipped at 0.
    spread, floor
        The bootstrap's per-key variance terms beside ``m_i`` (module doc, step 3): the bias
        remainder spread over the keys, ``max(R + GUARD·sd(R) − M, 0)/d``, and SURE's
        resolution per key, ``GUARD·sd(R)/d``; so ``scale² = max(m + spread, floor)``.
        Both 0 for an exact scale.
    sums
        The bootstrap of weighted sums of keys asked for (:func:`error_bars`' ``weights``),
        or ``None``: :meth:`sum_interval` needs it.
    """

    estimate: np.ndarray
    scale: np.ndarray
    dof: float
    risk: float | None
    risk_sd: float
    simulated: float
    draws: int
    source: str
    observed: np.ndarray | None = field(default=None, repr=False, compare=False)
    sigma: np.ndarray | None = field(default=None, repr=False, compare=False)
    nonnegative: bool = False
    spread: float = 0.0
    floor: float = 0.0
    sums: Sums | None = field(default=None, repr=False, compare=False)

    def __post_init__(self) -> None:
        for name in ("estimate", "scale"):
            if np.asarray(getattr(self, name)).dtype.kind not in "fiu":
                raise TypeError(f"ErrorBars: {name} must be an array of real numbers")
        for name in ("dof", "risk_sd", "simulated"):
            if not isinstance(getattr(self, name), numbers.Real):
                raise TypeError(f"ErrorBars: {name} must be a number; got {getattr(self, name)!r}")
        if self.source not in ("exact", "bootstrap"):
            raise ValueError(
                f"ErrorBars: source must be 'exact' or 'bootstrap'; got {self.source!r}"
            )
        for name in ("spread", "floor"):
            v = getattr(self, name)
            if not isinstance(v, numbers.Real) or not float(v) >= 0.0:
                raise ValueError(f"ErrorBars: {name} must be a number >= 0; got {v!r}")

    @property
    def _hull(self) -> bool:
        """Whether the intervals take the bias-aware hull with the released values (step 4):
        the bootstrap's, and an exact scale's whose estimate is a positive part
        (:attr:`nonnegative`: ``max(y, 0)`` is not linear, its sums are biased up; review-sums
        finding 3)."""
        return self.source == "bootstrap" or self.nonnegative

    @property
    def weak(self) -> bool:
        """Whether the fit is *weak* (module doc, step 4, "Weak fits"): bootstrap error bars
        whose total ``Σ s_i²`` is at least :data:`WEAK` times the raw ``Σ σ_i²``.  The core
        around ``y`` is then ``TOWARD·z·σ`` on both sides."""
        if self.source != "bootstrap" or self.sigma is None:
            return False
        sig = np.ravel(np.asarray(self.sigma, dtype=np.float64))
        top = float(np.max(sig)) if sig.size else 0.0
        if not top > 0.0:
            return False
        s = np.ravel(np.asarray(self.scale, dtype=np.float64)) / top  # scaled: no overflow
        return bool(np.sum(s * s) >= WEAK * np.sum((sig / top) ** 2))

    def quantile(self, level: float = 0.95) -> float:
        """The two-sided quantile multiplying :attr:`scale` at ``level``."""
        p = (1.0 + check_scalar(level, "level", UNIT_OPEN)) / 2.0
        if math.isinf(self.dof):
            return float(-special.ndtri(1.0 - p))
        return float(student_t.ppf(p, self.dof))

    def interval(self, level: float = 0.95) -> Interval:
        """Per-key ``(lower, upper)`` at confidence ``level`` (module doc, step 4).

        The hull of the bootstrap's ``estimate ± quantile(level) · scale`` and the core
        around the released ``y`` (``TOWARD·z·σ`` on the estimate's side, ``CORE·z·σ`` on
        the other), replaced by the raw ``y ± z·σ`` at every key where that is wider; lower
        bounds clipped at 0 when θ ≥ 0 is public (:attr:`nonnegative`).  An exact scale (a
        linear estimator) keeps ``estimate ± z · scale``; a positive part (an exact scale
        with :attr:`nonnegative`) takes the hull too.
        """
        half = self.quantile(level) * self.scale
        lower, upper = self.estimate - half, self.estimate + half
        if self._hull and self.observed is not None and self.sigma is not None:
            lower, upper = _bias_aware(
                lower,
                upper,
                self.estimate,
                self.observed,
                self.sigma,
                level,
                self.nonnegative,
                self.weak,
            )
        if self.nonnegative:
            lower, upper = np.maximum(lower, 0.0), np.maximum(upper, 0.0)
        return Interval(lower, upper)

    def sum_interval(self, level: float = 0.95) -> Interval:
        """The interval of every weighted sum ``Σ_i w_ji θ_i`` these error bars were drawn
        for (:func:`error_bars`' ``weights``), at confidence ``level`` (module doc, "Sums of
        keys").  Arrays of one value per sum (0-d for a single weight vector)."""
        if self.sums is None:
            raise ValueError(
                "these error bars were drawn without weights: call error_bars(result, "
                "weights=...) or Denoised.sum_interval(weights)"
            )
        sm = self.sums
        var = np.maximum(sm.mean_square + self.spread * sm.l1**2, self.floor * sm.l1**2)
        half = self.quantile(level) * (sm.units * np.sqrt(var))
        lower, upper = sm.estimate - half, sm.estimate + half
        raw_sd = sm.raw_sd
        if self._hull and sm.observed is not None and raw_sd is not None:
            at_zero = self.nonnegative & sm.nonnegative  # a sum of θ ≥ 0 is ≥ 0
            lower, upper = _bias_aware(
                lower, upper, sm.estimate, sm.observed, raw_sd, level, at_zero, self.weak
            )
        if self.nonnegative:
            lower = np.where(sm.nonnegative, np.maximum(lower, 0.0), lower)
            upper = np.where(sm.nonnegative, np.maximum(upper, 0.0), upper)
        return Interval(sm.shape_out(lower), sm.shape_out(upper))

    def risk_upper(self, level: float = 0.95) -> float:
        """One-sided upper confidence bound on the total squared error ``E‖ŷ − θ‖²``.

        ``max(R + z_level · risk_sd, M)``; ``M`` alone where there is no SURE.  Positive
        whenever any key is uncertain.
        """
        z = float(-special.ndtri(1.0 - check_scalar(level, "level", UNIT_OPEN)))
        if self.risk is None or not math.isfinite(self.risk):
            return self.simulated
        return max(self.risk + z * self.risk_sd, self.simulated)


def _raw_quantile(level: float) -> float:
    """``z``, the two-sided normal quantile of the raw interval ``y ± z·σ`` at ``level``."""
    p = (1.0 + check_scalar(level, "level", UNIT_OPEN)) / 2.0
    return float(-special.ndtri(1.0 - p))


def _bias_aware(
    lower: np.ndarray,
    upper: np.ndarray,
    estimate: np.ndarray,
    y: np.ndarray,
    sigma: np.ndarray,
    level: float,
    nonnegative: bool | np.ndarray = False,
    weak: bool = False,
) -> tuple[np.ndarray, np.ndarray]:
    """The hull of the fit's interval and the core around ``y`` — ``TOWARD·z·σ`` on the side
    of ``y`` where the estimate lies (both sides where they are equal; the upper side too
    where θ ≥ 0 is public and the estimate is at 0), ``CORE·z·σ`` on the other (``TOWARD``
    too for a ``weak`` fit) — or the raw ``y ± z·σ`` where that hull is wider (module doc,
    step 4)."""
    z = _raw_quantile(level)
    half = z * sigma
    away = TOWARD if weak else CORE  # a weak fit's side says nothing of θ's: both TOWARD
    down = np.where(estimate <= y, TOWARD, away)  # the estimate lies below y (or at it)
    # above y (or at it), or at the bound 0 of a θ ≥ 0: its only bias is upward
    up = np.where((estimate >= y) | (nonnegative & (estimate <= 0.0)), TOWARD, away)
    lower = np.minimum(lower, y - down * half)
    upper = np.maximum(upper, y + up * half)
    raw_lo, raw_hi = y - half, y + half
    wider = (upper - lower) > (raw_hi - raw_lo)
    return np.where(wider, raw_lo, lower), np.where(wider, raw_hi, upper)


def public_seed(y: object, sigma: object) -> np.random.SeedSequence:
    """A seed that is a function of the released values and their σ only.

    Error bars drawn with it are a deterministic function of what is published: anyone who
    re-runs them on the released table gets the same intervals (``dpgauss denoise`` does by
    default), and no secret randomness is needed for post-processing.
    """
    h = hashlib.sha256()
    h.update(np.ascontiguousarray(np.asarray(y, dtype=np.float64)).tobytes())
    h.update(b"|")
    h.update(np.ascontiguousarray(np.asarray(sigma, dtype=np.float64)).tobytes())
    return np.random.SeedSequence(int.from_bytes(h.digest()[:16], "little"))


def error_bars(
    result: Denoised, *, draws: int = DRAWS, rng: object = None, weights: object = None
) -> ErrorBars:
    """The per-key error scale of ``result`` and a bound on its total error (module doc).

    Parameters
    ----------
    result
        A :class:`~dpgauss.denoise.Denoised` from any denoiser of this package (it carries
        its σ and its frozen-tuning ``refit``), or one with an exact ``scale``.
    draws
        ``B``, the simulated releases, an integer in ``[2, 100000]`` (default
        :data:`DRAWS`); ignored for an exact scale.
    rng
        A ``numpy.random.Generator``, a seed, or ``None`` (fresh entropy).  The draws are
        post-processing of public values: they need no secure sampler.
    weights
        Sums of keys to bootstrap with the same draws (module doc, "Sums of keys"): one
        weight per key (a vector, a boolean mask), a ``(k, d)`` matrix of ``k`` sums, or a
        scipy.sparse ``(k, d)`` matrix; ``None``: none.  Their intervals are
        :meth:`ErrorBars.sum_interval`.

    Returns
    -------
    ErrorBars
    """
    if not isinstance(result, Denoised):
        raise TypeError(
            f"result must be a Denoised (what every denoiser returns); got {type(result).__name__}"
        )
    estimate = np.asarray(result.estimate, dtype=np.float64)
    d = estimate.size
    nonnegative = bool(result.params.get("nonnegative", False))
    observed = sig = None
    if result.observed is not None and result.sigma is not None:
        observed = np.reshape(np.asarray(result.observed, dtype=np.float64), estimate.shape)
        sig = np.array(np.broadcast_to(np.asarray(result.sigma, np.float64), estimate.shape))
    w = None if weights is None else _as_weights(weights, estimate.shape)
    if result.scale is not None:
        scale = np.array(np.broadcast_to(np.asarray(result.scale, np.float64), estimate.shape))
        exact = float(np.sum(scale**2))
        sums = None if w is None else _sums(w, estimate, None, observed, sig, scale)
        return ErrorBars(
            estimate,
            scale,
            math.inf,
            exact,
            0.0,
            exact,
            0,
            "exact",
            observed,
            sig,
            nonnegative,
            sums=sums,
        )
    if result.refit is None or result.sigma is None:
        raise ValueError(
            f"a {result.method!r} result without its noise level or refit has no error bars: "
            "run the denoiser with sigma (every denoiser of dpgauss.denoise records both)"
        )
    n = check_int(draws, "draws", 2, _MAX_DRAWS)
    gen = np.random.default_rng(rng)  # type: ignore[arg-type]
    sigma = np.broadcast_to(np.asarray(result.sigma, dtype=np.float64), estimate.shape)
    squares = np.zeros(estimate.shape)
    sum_squares = None if w is None else np.zeros(w.matrix.shape[0])
    risks = np.empty(n)
    for b in range(n):
        sim = estimate + sigma * gen.standard_normal(estimate.shape)
        with warnings.catch_warnings():  # a refit's convergence notes are not the user's
            warnings.simplefilter("ignore")
            fit = result.refit(sim)
        err = np.asarray(fit.estimate, dtype=np.float64).reshape(estimate.shape) - estimate
        squares += err * err
        if w is not None and sum_squares is not None:
            e_sum = _apply(w, err.ravel())
            sum_squares += e_sum * e_sum
        risks[b] = _level_of(fit)
    m = squares / n
    simulated = float(m.sum())
    level = _level_of(result)
    sd = _sd(risks)
    guard = GUARD * sd if math.isfinite(sd) else 0.0
    spread = 0.0
    if math.isfinite(level) and d:
        spread = max(level + guard - simulated, 0.0) / d
    # never narrower than SURE's own resolution per key (GUARD·sd(R)/d): a key the estimator
    # killed in every draw would otherwise get an interval of width 0
    floor = guard / d if d else 0.0
    scale = np.sqrt(np.maximum(m + spread, floor))
    risk = result.risk if result.risk is not None and math.isfinite(result.risk) else None
    sums = None
    if w is not None and sum_squares is not None:
        sums = _sums(w, estimate, sum_squares / n, observed, sig)
    return ErrorBars(
        estimate,
        scale,
        float(n),
        risk,
        sd,
        simulated,
        n,
        "bootstrap",
        observed,
        sig,
        nonnegative,
        spread=spread,
        floor=floor,
        sums=sums,
    )


def _sd(values: np.ndarray) -> float:
    """The sample standard deviation, scaled so that huge risks (σ near 1e100) do not
    overflow when squared; NaN if any value is not finite."""
    if not np.all(np.isfinite(values)):
        return math.nan
    top = float(np.max(np.abs(values)))
    if top == 0.0:
        return 0.0
    return top * float(np.std(values / top, ddof=1))


def _level_of(result: Denoised) -> float:
    """SURE, or the stand-in ``params["risk_proxy"]``, or NaN."""
    if result.risk is not None:
        return float(result.risk)
    return float(result.params.get("risk_proxy", math.nan))


#: σ lies in this range, so that σ², 1/σ² and the denoisers' sums of squares are finite
#: (a release's σ is within (1e-100, 1e100): ``dpgauss.release.plan.SIGMA_RANGE``).
SIGMA_LIMITS = _Range(1e-150, 1e150)

#: The denoisers that accept one σ per key (the others need a single σ).
PER_KEY_SIGMA = (
    "none, posterior_mean, james_stein, soft_threshold, hard_threshold, wavelet, "
    "graph_wavelet, trend_filter (order 0) and auto"
)


def check_observation(y: object, sigma: object) -> tuple[np.ndarray, float]:
    """Validate the released vector and a single public σ (denoisers that need one).

    As :func:`check_noise`, but ``σ`` must be one number (an array of one value repeated is
    that number).  Raises ``TypeError``/``ValueError`` naming the argument.
    """
    s = as_real_array(sigma, "sigma")
    if s.ndim:
        if not (s.size and np.all(s == s.flat[0])):
            raise TypeError(
                f"sigma must be a single number here, not an array of shape {s.shape} (one σ "
                f"per key is accepted by {PER_KEY_SIGMA})"
            )
        s = np.asarray(s.flat[0])  # one σ written once per key
    arr, one = check_noise(y, s)
    assert isinstance(one, float)
    return arr, one


def check_noise(y: object, sigma: object) -> tuple[np.ndarray, float | np.ndarray]:
    """Validate the released vector and its public σ: one number, or one per key.

    ``σ`` may be a finite positive number or an array of them broadcastable to ``y``'s
    shape (returned at that shape; a constant array is returned as its number, so a
    denoiser given σ written once per key does exactly what it does with the number).
    """
    arr = as_real_array(y, "y")
    check_interval(arr, "y", REAL)
    s = as_real_array(sigma, "sigma")
    check_interval(s, "sigma", _Range(0.0, math.inf))
    check_interval(s, "sigma", SIGMA_LIMITS, "so that σ² and 1/σ² are finite")
    if s.ndim == 0:
        return np.array(arr, dtype=np.float64), float(s)
    try:
        full = np.broadcast_to(s, arr.shape)
    except ValueError:
        raise ValueError(
            f"sigma must be one number or one per key: shape {s.shape} does not fit y's shape "
            f"{arr.shape}"
        ) from None
    if full.size and np.all(full == full.flat[0]):
        return np.array(arr, dtype=np.float64), float(full.flat[0])
    return np.array(arr, dtype=np.float64), np.array(full, dtype=np.float64)
