"""Privacy auditing: a statistically valid lower bound on the ε of a mechanism, from samples.

A mechanism that claims (ε, δ)-differential privacy promises, for every pair of
neighbouring inputs x, x′ and *every* event S,

    P[M(x′) ∈ S] ≤ e^ε · P[M(x) ∈ S] + δ,   and the same with x and x′ exchanged.

So any event S whose two probabilities can be estimated gives a lower bound on the ε the
mechanism really has: ε ≥ log((P[M(x′) ∈ S] − δ) / P[M(x) ∈ S]).  Replacing the two
probabilities by one-sided Clopper–Pearson confidence limits (Clopper & Pearson 1934),
the lower one for the numerator and the upper one for the denominator, turns this into a
lower *confidence* bound: with probability at least ``confidence``,

    ε_true ≥ ε_lb = log((p₁_lower − δ) / p₂_upper).

This is the auditing method of Jagielski, Ullman & Oprea, "Auditing Differentially
Private Machine Learning: How Private is Private SGD?" (NeurIPS 2020) and Nasr, Song,
Thakurta, Papernot & Carlini, "Adversary Instantiation: Lower Bounds for Differentially
Private Machine Learning" (IEEE S&P 2021); see also Ding, Wang, Wang, Zhang & Kifer,
"Detecting Violations of Differential Privacy" (CCS 2018).  An ε_lb above the claimed ε
(at a δ at least the claimed δ) is evidence, at the stated confidence, that the claim is
false: the test *can fail*, unlike a test that only checks a formula against itself.

The events.  For additive noise with a log-concave density — Gaussian, Laplace, discrete
Gaussian — the likelihood ratio of M(x′) to M(x) is a monotone function of the
projection of the output on x′ − x when the noise is spherical Gaussian, and of the output
itself in one dimension; by Neyman–Pearson the optimal events are then half-lines of

    t(y) = ⟨y − x, u⟩,   u = (x′ − x) / ‖x′ − x‖₂,

i.e. ``S = {t > τ}`` (evidence for x′) or ``S = {t ≤ τ}`` (evidence for x, which bounds
ε in the other direction).  For other noise (e.g. Laplace in several dimensions) these
events are still valid, just not optimal; pass your own ``statistic`` to do better.

Choosing τ without cheating.  Scanning many thresholds on the same samples and reporting
the best one would overstate ε (multiple testing).  The samples are therefore split: the
first ``selection_fraction`` of the draws from each input pick τ and the direction (the
one maximising the Clopper–Pearson bound these draws would give at the size of the other
part, scored at the stricter level α/m for m candidates so that thresholds resting on a
handful of lucky tail counts are not chosen), and the remaining draws, independent of that
choice, are the only ones that enter the reported bound.  The two one-sided limits are
each taken at level 1 − α/2 (α = 1 − confidence), so by the union bound both hold with
probability ≥ 1 − α.

Randomness.  Like every sampler in dpgauss, the audit takes its randomness through
``rng=`` (see :func:`dpgauss.noise.randomness.resolve_rng`) and passes the resolved source
to the mechanism.  Audits are experiments: a seeded :class:`numpy.random.Generator` (or an
``int`` seed) makes them reproducible, and the validity statement above holds for a seed
chosen independently of the outcome.  Fixing a seed *after* looking at results (seed
hunting) voids it.  ``rng="secure"`` audits the secure release path at OS-randomness speed.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal, Protocol, runtime_checkable

import numpy as np
from scipy.special import betaincinv

from ._validation import (
    Interval,
    as_real_array,
    check_int,
    check_integral,
    check_interval,
    check_scalar,
)
from .noise.randomness import resolve_rng

__all__ = [
    "AuditResult",
    "Mechanism",
    "clopper_pearson_interval",
    "estimate_epsilon_lower_bound",
]

_UNIT_OPEN = Interval(0.0, 1.0)
_DELTA_RANGE = Interval(0.0, 1.0, low_closed=True)
_REAL = Interval()
_BATCH_ELEMENTS = 1 << 22  # values per call to the mechanism in batched mode (32 MiB of float64)

Event = Literal["above", "at_or_below"]
Alternative = Literal["two-sided", "less", "greater"]


@runtime_checkable
class Mechanism(Protocol):
    """What the audit needs of a mechanism: ``release(values, rng=...)``.

    The returned object must expose the noisy output as ``.values`` (a
    :class:`dpgauss.noise.release.Release` does) or be array-like itself.  If it also has
    ``.epsilon`` and ``.delta`` (a ``Release`` has), those are the claim being audited.
    """

    def release(self, values: Any, rng: Any = ...) -> Any:
        """Return a noisy version of ``values`` drawn with randomness from ``rng``."""
        ...


# --------------------------------------------------------------------------- Clopper–Pearson


def _cp_lower(k: np.ndarray | float, n: np.ndarray | float, alpha: float) -> np.ndarray:
    """One-sided lower limit at level 1 − α: the p with P[Bin(n, p) ≥ k] = α; 0 if k = 0.

    Equal to the α-quantile of Beta(k, n − k + 1).  Accepts non-integer k (used for
    scaled counts when choosing a threshold).
    """
    k, n = np.broadcast_arrays(np.asarray(k, dtype=np.float64), np.asarray(n, dtype=np.float64))
    out = np.zeros(k.shape)
    pos = k > 0
    out[pos] = betaincinv(k[pos], n[pos] - k[pos] + 1.0, alpha)
    return out


def _cp_upper(k: np.ndarray | float, n: np.ndarray | float, alpha: float) -> np.ndarray:
    """One-sided upper limit at level 1 − α: the p with P[Bin(n, p) ≤ k] = α; 1 if k = n.

    Equal to the (1 − α)-quantile of Beta(k + 1, n − k).
    """
    k, n = np.broadcast_arrays(np.asarray(k, dtype=np.float64), np.asarray(n, dtype=np.float64))
    out = np.ones(k.shape)
    below = k < n
    out[below] = betaincinv(k[below] + 1.0, n[below] - k[below], 1.0 - alpha)
    return out


def _count_array(value: object, name: str, minimum: int) -> np.ndarray:
    arr = as_real_array(value, name)
    check_interval(arr, name, Interval(minimum, math.inf, low_closed=True))
    check_integral(arr, name, rule="an integer (a count)")
    return arr


def clopper_pearson_interval(
    k: object,
    n: object,
    confidence: float = 0.95,
    alternative: Alternative = "two-sided",
) -> tuple[float | np.ndarray, float | np.ndarray]:
    """Exact (Clopper–Pearson 1934) confidence interval for a binomial proportion.

    For k successes in n trials, with α = 1 − ``confidence``:

    * ``"two-sided"``: ``(B(α/2; k, n−k+1), B(1−α/2; k+1, n−k))``;
    * ``"greater"`` (a lower bound): ``(B(α; k, n−k+1), 1)``;
    * ``"less"`` (an upper bound): ``(0, B(1−α; k+1, n−k))``;

    where ``B(q; a, b)`` is the q-quantile of the Beta(a, b) law, the lower limit is 0 when
    k = 0 and the upper limit is 1 when k = n.  Equivalently, the lower limit solves
    ``P[Bin(n, p) ≥ k] = α`` and the upper one ``P[Bin(n, p) ≤ k] = α``.  Coverage is at
    least ``confidence`` for every true p.  These are the intervals of
    ``scipy.stats.binomtest(k, n, alternative=...).proportion_ci(confidence, "exact")``,
    vectorised: ``k`` and ``n`` broadcast against each other.

    Parameters
    ----------
    k : int or array of ints, 0 ≤ k ≤ n
    n : int or array of ints, n ≥ 1
    confidence : float in (0, 1)
    alternative : ``"two-sided"``, ``"less"`` or ``"greater"`` (as in ``binomtest``)

    Returns
    -------
    (lower, upper), Python floats for scalar input, float64 arrays otherwise.
    """
    if alternative not in ("two-sided", "less", "greater"):
        raise ValueError(
            f"alternative must be 'two-sided', 'less' or 'greater'; got {alternative!r}"
        )
    level = check_scalar(confidence, "confidence", _UNIT_OPEN)
    k_arr = _count_array(k, "k", 0)
    n_arr = _count_array(n, "n", 1)
    try:
        k_arr, n_arr = np.broadcast_arrays(k_arr, n_arr)
    except ValueError:
        raise ValueError(
            f"argument shapes do not broadcast: k {k_arr.shape}, n {n_arr.shape}"
        ) from None
    if np.any(k_arr > n_arr):
        raise ValueError("k must be at most n (successes cannot exceed trials)")
    alpha = 1.0 - level
    if alternative == "two-sided":
        lower, upper = _cp_lower(k_arr, n_arr, alpha / 2), _cp_upper(k_arr, n_arr, alpha / 2)
    elif alternative == "greater":
        lower, upper = _cp_lower(k_arr, n_arr, alpha), np.ones(k_arr.shape)
    else:
        lower, upper = np.zeros(k_arr.shape), _cp_upper(k_arr, n_arr, alpha)
    if k_arr.ndim == 0:
        return float(lower), float(upper)
    return lower, upper


# --------------------------------------------------------------------------- the audit


@dataclass(frozen=True)
class AuditResult:
    """The outcome of :func:`estimate_epsilon_lower_bound`.

    Attributes
    ----------
    epsilon_lower_bound
        ε_lb = max(0, log((p_numerator_lower − δ) / p_denominator_upper)): with
        probability ≥ ``confidence`` the mechanism is not (ε, δ)-DP for any ε < ε_lb.
    epsilon_point_estimate
        log((p̂_numerator − δ) / p̂_denominator) from the evaluation counts (no confidence
        correction; ±inf at empty counts).  For orientation only.
    threshold, event
        The test: ``event="above"`` is S = {t > threshold}, comparing
        P[M(x′) ∈ S] (numerator) with P[M(x) ∈ S]; ``"at_or_below"`` is S = {t ≤ threshold},
        comparing P[M(x) ∈ S] (numerator) with P[M(x′) ∈ S].  t is the statistic (by
        default the projection ⟨y − x, u⟩ on the unit vector u from x to x′).
    count_numerator, count_denominator
        How many of the ``n_evaluation`` evaluation draws of each input fell in S.
    p_numerator_lower, p_denominator_upper
        The one-sided Clopper–Pearson limits (each at level 1 − (1 − confidence)/2).
    n_samples, n_selection, n_evaluation
        Draws per input; of which used to choose the test / to evaluate it.
    delta, confidence
        The δ the bound is computed at and its confidence level.
    claimed_epsilon, claimed_delta
        The guarantee the mechanism claims (from its release or its attributes), if any.
    """

    epsilon_lower_bound: float
    epsilon_point_estimate: float
    threshold: float
    event: Event
    count_numerator: int
    count_denominator: int
    p_numerator_lower: float
    p_denominator_upper: float
    n_samples: int
    n_selection: int
    n_evaluation: int
    delta: float
    confidence: float
    claimed_epsilon: float | None = None
    claimed_delta: float | None = None

    @property
    def violation(self) -> bool | None:
        """True if the audit refutes the claim: ε_lb > claimed ε at a δ ≥ the claimed δ.

        ``None`` when the mechanism makes no claim.  (A bound at a δ below the claimed one
        cannot refute the claim: ε(δ) decreases in δ.)
        """
        if self.claimed_epsilon is None:
            return None
        claimed_delta = 0.0 if self.claimed_delta is None else self.claimed_delta
        return self.delta >= claimed_delta and self.epsilon_lower_bound > self.claimed_epsilon


ReleaseFunction = Callable[[Any, Any], Any]


def _release_function(mechanism: object) -> ReleaseFunction:
    release = getattr(mechanism, "release", None)
    if callable(release):
        return lambda values, source: release(values, rng=source)
    if callable(mechanism):
        return lambda values, source: mechanism(values, rng=source)
    raise TypeError(
        "mechanism must have a release(values, rng=...) method or be a callable "
        f"f(values, rng=...); got {type(mechanism).__name__}"
    )


def _output_array(out: object) -> np.ndarray:
    values = getattr(out, "values", out)
    if hasattr(values, "to_numpy"):  # a pandas Series keeps its index in a Release
        values = values.to_numpy()
    arr = as_real_array(values, "the mechanism's output")
    return arr


def _claim(mechanism: object, out: object) -> tuple[float | None, float | None]:
    """The (ε, δ) the release says it satisfies, else the mechanism's attributes."""
    for source in (out, mechanism):
        eps = getattr(source, "epsilon", None)
        if isinstance(eps, numbers.Real) and not isinstance(eps, bool):
            delta = getattr(source, "delta", None)
            if isinstance(delta, numbers.Real) and not isinstance(delta, bool):
                return float(eps), float(delta)
            return float(eps), None
    return None, None


def _draw_statistics(
    release: ReleaseFunction,
    x: np.ndarray,
    n: int,
    source: object,
    stat: Callable[[np.ndarray], np.ndarray],
    *,
    batched: bool,
    batch_size: int,
) -> tuple[np.ndarray, object]:
    """n values of the statistic on independent releases of x, and the first release."""
    out = np.empty(n, dtype=np.float64)
    first: object = None
    shape = x.shape
    if batched:
        start = 0
        while start < n:
            m = min(batch_size, n - start)
            rel = release(np.broadcast_to(x, (m, *shape)).copy(), source)
            if first is None:
                first = rel
            y = _output_array(rel)
            if y.shape != (m, *shape):
                raise ValueError(
                    f"batched=True: releasing a stack of {m} copies of the input (shape "
                    f"{(m, *shape)}) returned shape {y.shape}; use batched=False for "
                    "mechanisms that do not act on each row independently"
                )
            out[start : start + m] = stat(y.reshape(m, -1))
            start += m
    else:
        rows = np.empty((n, x.size), dtype=np.float64)
        for i in range(n):
            rel = release(x.copy() if shape else x[()], source)
            if first is None:
                first = rel
            y = _output_array(rel)
            if y.shape != shape:
                raise ValueError(
                    f"the mechanism returned shape {y.shape} for an input of shape {shape}"
                )
            rows[i] = y.ravel()
        out[:] = stat(rows)
    if not np.all(np.isfinite(out)):
        raise ValueError("the mechanism returned non-finite values (or the statistic did)")
    return out, first


def _scores(
    num: np.ndarray, den: np.ndarray, n_sel: int, n_eval: int, delta: float, alpha: float
) -> np.ndarray:
    """The bound each candidate test would give on ``n_eval`` draws with these rates."""
    # Counts rescaled to n_eval trials; (k · n_eval) / n_sel is exact at k = n_sel.
    lo = _cp_lower(num * n_eval / n_sel, n_eval, alpha / 2)
    up = _cp_upper(den * n_eval / n_sel, n_eval, alpha / 2)
    with np.errstate(divide="ignore"):
        return np.where(lo > delta, np.log(np.maximum(lo - delta, 1e-300) / up), -np.inf)


def _candidate_thresholds(s0: np.ndarray, s1: np.ndarray, n_thresholds: int) -> np.ndarray:
    """Thresholds at pooled quantiles, geometrically dense towards both tails."""
    pooled = np.sort(np.concatenate([s0, s1]))
    size = pooled.size
    if size <= n_thresholds:
        return np.unique(pooled)
    tail = np.geomspace(1.0 / size, 0.5, max(n_thresholds // 2, 1))
    idx = np.floor(tail * size).astype(np.int64)
    idx = np.clip(np.concatenate([idx, size - 1 - idx]), 0, size - 1)
    return np.unique(pooled[idx])


def _tail_counts(sorted_stats: np.ndarray, tau: np.ndarray) -> np.ndarray:
    """#{t > τ} for each τ."""
    return sorted_stats.size - np.searchsorted(sorted_stats, tau, side="right")


def estimate_epsilon_lower_bound(
    mechanism: Mechanism | Callable[..., Any],
    x: object,
    x_prime: object,
    n_samples: int,
    delta: float,
    *,
    rng: object,
    confidence: float = 0.95,
    selection_fraction: float = 0.5,
    n_thresholds: int = 1000,
    statistic: Callable[[np.ndarray], np.ndarray] | None = None,
    batched: bool = True,
    batch_size: int | None = None,
) -> AuditResult:
    """A lower confidence bound on the ε of ``mechanism`` at ``delta``, from samples.

    Draws ``n_samples`` releases of M(x) and of M(x′), picks a threshold test on the
    statistic t (by default t(y) = ⟨y − x, (x′ − x)/‖x′ − x‖⟩, likelihood-ratio optimal
    for additive Gaussian noise and for 1-d Laplace / discrete Gaussian noise) using the
    first ``selection_fraction`` of the draws, and evaluates it on the rest:

        ε_lb = log((p₁_lower − δ) / p₂_upper),

    with one-sided Clopper–Pearson limits at level 1 − α/2 each, α = 1 − confidence
    (Jagielski et al. 2020; Nasr et al. 2021; Clopper & Pearson 1934).  Both directions
    (evidence for x′ and evidence for x) are considered.  The module docstring has the
    argument why, if M is (ε, δ)-DP and x, x′ are neighbours, P[ε_lb > ε] ≤ 1 − confidence.

    Parameters
    ----------
    mechanism
        An object with ``release(values, rng=...)`` (see :class:`Mechanism`) or a callable
        ``f(values, rng=...)``; the result is an object with ``.values`` or an array.
    x, x_prime
        Neighbouring inputs of the same shape (scalars or arrays, finite reals; integer
        dtypes are passed through unchanged), whose difference has the sensitivity the
        mechanism claims.  The audit takes their being neighbours on trust.
    n_samples
        Draws from each of M(x) and M(x′), ≥ 2.
    delta
        The δ in [0, 1) at which ε is bounded (the claimed δ, to test a claim).
    rng
        Source of randomness (an int seed or a :class:`numpy.random.Generator` for a
        reproducible audit; ``"secure"``), passed on to the mechanism.
    confidence
        Level of the bound, in (0, 1).
    selection_fraction
        Fraction of the draws used to choose the test, in (0, 1).
    n_thresholds
        Candidate thresholds scanned on the selection draws (at pooled quantiles, dense in
        both tails).
    statistic
        Optional map from the outputs, an array of shape ``(m, size of x)``, to m reals;
        replaces the projection.
    batched
        If True (default), release a stack of ``batch_size`` copies of the input in one
        call and treat the rows as independent releases.  Correct for mechanisms that add
        independent noise to every coordinate (all dpgauss output-perturbation
        mechanisms); use False, one call per draw, for anything else.
    batch_size
        Rows per call in batched mode (default: about 4 million values per call).

    Returns
    -------
    AuditResult
        The bound, the chosen test, the counts and the claimed (ε, δ) if any.

    Examples
    --------
    >>> from dpgauss.noise.mechanisms import LaplaceMechanism
    >>> res = estimate_epsilon_lower_bound(
    ...     LaplaceMechanism(1.0, l1_sensitivity=1.0), 0.0, 1.0, 200_000, 0.0, rng=0)
    >>> 0.8 < res.epsilon_lower_bound <= 1.0, res.violation
    (True, False)
    """
    release = _release_function(mechanism)
    xf = as_real_array(x, "x")
    xpf = as_real_array(x_prime, "x_prime")
    check_interval(xf, "x", _REAL)
    check_interval(xpf, "x_prime", _REAL)
    if xf.shape != xpf.shape:
        raise ValueError(f"x and x_prime must have the same shape; got {xf.shape} and {xpf.shape}")
    diff = (xpf - xf).ravel()
    norm = float(np.linalg.norm(diff))
    if statistic is None and not norm > 0.0:
        raise ValueError("x and x_prime must differ (they are the neighbouring inputs)")
    n = check_int(n_samples, "n_samples", 2)
    dlt = check_scalar(delta, "delta", _DELTA_RANGE)
    level = check_scalar(confidence, "confidence", _UNIT_OPEN)
    frac = check_scalar(selection_fraction, "selection_fraction", _UNIT_OPEN)
    n_sel = min(max(int(n * frac), 1), n - 1)
    n_eval = n - n_sel
    n_thresholds = check_int(n_thresholds, "n_thresholds", 1)
    per_row = max(xf.size, 1)
    if batch_size is None:
        rows = max(1, _BATCH_ELEMENTS // per_row)
    else:
        rows = check_int(batch_size, "batch_size", 1)
    source = resolve_rng(rng)

    if statistic is None:
        u = diff / norm
        offset = float(xf.ravel() @ u)

        def stat(y: np.ndarray) -> np.ndarray:
            return y @ u - offset
    else:

        def stat(y: np.ndarray) -> np.ndarray:
            t = np.asarray(statistic(y), dtype=np.float64)
            if t.shape != (y.shape[0],):
                raise ValueError(
                    f"statistic must map outputs of shape {y.shape} to shape "
                    f"({y.shape[0]},); got {t.shape}"
                )
            return t

    # Keep the inputs' own dtype (integers for discrete mechanisms).
    x_in, xp_in = np.asarray(x), np.asarray(x_prime)
    t0, first = _draw_statistics(release, x_in, n, source, stat, batched=batched, batch_size=rows)
    t1, _ = _draw_statistics(release, xp_in, n, source, stat, batched=batched, batch_size=rows)
    claimed_epsilon, claimed_delta = _claim(mechanism, first)
    alpha = 1.0 - level

    # Selection: choose threshold and direction on the first n_sel draws of each.
    s0, s1 = np.sort(t0[:n_sel]), np.sort(t1[:n_sel])
    tau = _candidate_thresholds(s0, s1, int(n_thresholds))
    above0, above1 = _tail_counts(s0, tau), _tail_counts(s1, tau)
    # Scored at the Bonferroni level α/(number of candidates): among many candidates the
    # best-looking one is flattered by chance (winner's curse), and the stricter level
    # favours thresholds whose evidence rests on enough counts to survive evaluation.
    # Only the power depends on this choice; validity comes from the split.
    alpha_sel = alpha / tau.size
    score_above = _scores(above1, above0, n_sel, n_eval, dlt, alpha_sel)
    score_below = _scores(n_sel - above0, n_sel - above1, n_sel, n_eval, dlt, alpha_sel)
    i_above, i_below = int(np.argmax(score_above)), int(np.argmax(score_below))
    event: Event
    if score_below[i_below] > score_above[i_above]:
        event, threshold = "at_or_below", float(tau[i_below])
    else:
        event, threshold = "above", float(tau[i_above])

    # Evaluation: only the remaining, independent draws enter the bound.
    e0, e1 = t0[n_sel:], t1[n_sel:]
    if event == "above":
        k_num, k_den = int(np.count_nonzero(e1 > threshold)), int(np.count_nonzero(e0 > threshold))
    else:
        k_num = int(np.count_nonzero(e0 <= threshold))
        k_den = int(np.count_nonzero(e1 <= threshold))
    p_lo = float(_cp_lower(np.float64(k_num), np.float64(n_eval), alpha / 2))
    p_up = float(_cp_upper(np.float64(k_den), np.float64(n_eval), alpha / 2))
    bound = math.log((p_lo - dlt) / p_up) if p_lo > dlt else 0.0
    p_num, p_den = k_num / n_eval, k_den / n_eval
    if p_num <= dlt:
        point = -math.inf
    elif k_den == 0:
        point = math.inf
    else:
        point = math.log((p_num - dlt) / p_den)
    return AuditResult(
        epsilon_lower_bound=max(0.0, bound),
        epsilon_point_estimate=point,
        threshold=threshold,
        event=event,
        count_numerator=k_num,
        count_denominator=k_den,
        p_numerator_lower=p_lo,
        p_denominator_upper=p_up,
        n_samples=n,
        n_selection=n_sel,
        n_evaluation=n_eval,
        delta=dlt,
        confidence=level,
        claimed_epsilon=claimed_epsilon,
        claimed_delta=claimed_delta,
    )
