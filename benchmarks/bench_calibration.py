"""Speed and accuracy of analytic Gaussian calibration: dpgauss against other libraries.

Run from the repository root (competitors come from the ``bench`` extra)::

    python benchmarks/bench_calibration.py           # full run
    python benchmarks/bench_calibration.py --quick   # short run

What is measured
----------------
1. Vectorised speed: one ``analytic_gaussian_sigma(eps_array, delta_array)`` call on
   ``--n`` pairs (eps log-uniform in [1e-3, 1e2], delta log-uniform in [1e-12, 1e-2], fixed
   seed), reported as a RATIO to one ``scipy.special.log_ndtr`` pass over the same number of
   points measured in the same run (median of interleaved repeats; the goal of issue #15 is <= 10x).
   The ratio is printed from wall-clock time and from the process's CPU time
   (``time.process_time``), which other jobs on a shared machine disturb less.
2. Scalar speed: microseconds per call of dpgauss and of every importable competitor.
3. Accuracy on a fixed (eps, delta) grid against an mpmath reference (working precision
   >= 60 digits) of the exact privacy profile (Balle & Wang 2018, Thm 8) with Delta = 1,
   mu = 1/sigma:

       delta(mu, eps) = Phi(mu/2 - eps/mu) - e^eps Phi(-mu/2 - eps/mu).

   The optimum sigma* is the root of delta(1/sigma, eps) = delta_target found with a
   bracketed mpmath root finder. A returned sigma is "accurate" when
   |sigma - sigma*| <= 1e-9 sigma*, and "unsafe" when the true delta at sigma exceeds
   the requested delta.
4. The same reference on a random sample of the vectorised call's outputs.
5. Vectorised ``gaussian_epsilon(sigma_array, delta_array)`` (Delta = 1) on ``--n`` pairs:
   sigma log-uniform in [1e-2, 1e3] (mu = 1/sigma from 1e-3 to 100, so epsilon from 0 --
   the release is already (0, delta)-DP -- to about 5e3) and delta log-uniform in
   [1e-12, 1e-2], fixed seed; CPU-time RATIO to the same ``log_ndtr`` pass as item 1, median
   of interleaved repeats (the goal of issue #31 item 7 is <= 15x).  A random sample of the
   outputs is judged with mpmath: "safe" means the exact profile at the returned epsilon
   (mu = 1/sigma exactly) is at most delta, "tight" that at epsilon (1 - 1e-9) - 1e-12 it
   is above delta (or that epsilon = 0 is returned exactly when it suffices).

Absolute times depend on the machine and its load; only the ratios measured in one run
should be compared.
"""

from __future__ import annotations

import argparse
import datetime
import functools
import importlib.metadata
import math
import os
import platform
import signal
import statistics
import subprocess
import time
import timeit
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from types import FrameType

import mpmath
import numpy as np
import scipy.special

SEED = 20180710
REFERENCE_DPS = 60
ACCURATE_RTOL = 1e-9
ISSUE_POINT = (20.0, 1e-9)
GRID_DELTAS = (1e-2, 1e-4, 1e-6, 1e-8, 1e-10, 1e-12, 1e-20, 1e-50)

ScalarCalibrator = Callable[[float, float], float]


# --------------------------------------------------------------------------------------
# High-precision reference
# --------------------------------------------------------------------------------------


def reference_delta(mu: mpmath.mpf, eps: mpmath.mpf, dps: int = REFERENCE_DPS) -> mpmath.mpf:
    """Exact profile delta(mu, eps); precision rises until >= dps digits survive cancellation."""
    work = dps
    while True:
        with mpmath.workdps(work):
            mu_, eps_ = mpmath.mpf(mu), mpmath.mpf(eps)
            first = mpmath.ncdf(mu_ / 2 - eps_ / mu_)
            second = mpmath.exp(eps_) * mpmath.ncdf(-mu_ / 2 - eps_ / mu_)
            value = first - second
            if value > 0:
                lost = int(mpmath.ceil(mpmath.log10(first / value)))
                if lost + dps <= work:
                    return +value
        work *= 2


@functools.cache
def optimal_sigma(eps: float, delta: float) -> mpmath.mpf:
    """Smallest sigma with delta(1/sigma, eps) <= delta, to ~REFERENCE_DPS digits (Delta = 1).

    All arithmetic, including the bracket search, runs at REFERENCE_DPS digits.
    """
    with mpmath.workdps(REFERENCE_DPS):
        eps_ = mpmath.mpf(eps)
        log_target = mpmath.log(mpmath.mpf(delta))

        def gap(log_mu: mpmath.mpf) -> mpmath.mpf:
            return mpmath.log(reference_delta(mpmath.exp(log_mu), eps_)) - log_target

        lower, upper = _bracket(gap)
        log_mu = mpmath.findroot(gap, (lower, upper), solver="anderson")
        return 1 / mpmath.exp(log_mu)


def _bracket(gap: Callable[[mpmath.mpf], mpmath.mpf]) -> tuple[mpmath.mpf, mpmath.mpf]:
    """An interval of log(mu) on which the increasing function ``gap`` changes sign."""
    lower, upper, step = mpmath.mpf(-1), mpmath.mpf(1), mpmath.mpf(1)
    while gap(lower) > 0:
        lower, upper, step = lower - step, lower, 2 * step
    while gap(upper) < 0:
        lower, upper, step = upper, upper + step, 2 * step
    return lower, upper


@dataclass(frozen=True)
class Verdict:
    """A returned sigma judged against the reference."""

    rel_error: float  # (sigma - sigma*) / sigma*
    delta_excess: float  # true delta at sigma / requested delta - 1, computed in mpmath

    @property
    def accurate(self) -> bool:
        return abs(self.rel_error) <= ACCURATE_RTOL

    @property
    def unsafe(self) -> bool:
        return self.delta_excess > 0.0


def judge(sigma: float, eps: float, delta: float, sigma_opt: mpmath.mpf) -> Verdict:
    """Relative error of ``sigma`` and the ratio true delta / requested delta."""
    with mpmath.workdps(REFERENCE_DPS):
        sigma_ = mpmath.mpf(sigma)
        rel_error = (sigma_ - sigma_opt) / sigma_opt
        true_delta = reference_delta(1 / sigma_, mpmath.mpf(eps))
        return Verdict(float(rel_error), float(true_delta / mpmath.mpf(delta) - 1))


# --------------------------------------------------------------------------------------
# Calibrators under test
# --------------------------------------------------------------------------------------


@dataclass
class Contender:
    """One library's scalar calibration routine, or the reason it could not be loaded."""

    name: str
    routine: str
    calibrate: ScalarCalibrator | None = None
    skipped: str | None = None


def _load_dpgauss() -> ScalarCalibrator:
    from dpgauss.privacy import analytic_gaussian_sigma

    return lambda eps, delta: analytic_gaussian_sigma(eps, delta)


def _load_diffprivlib() -> ScalarCalibrator:
    from diffprivlib.mechanisms import GaussianAnalytic

    return lambda eps, delta: GaussianAnalytic(epsilon=eps, delta=delta, sensitivity=1.0)._scale


def _load_autodp() -> ScalarCalibrator:
    # autodp.privacy_calibrator and autodp.rdp_acct import each other: rdp_acct must go first.
    from autodp import rdp_acct  # noqa: F401
    from autodp.privacy_calibrator import ana_gaussian_mech

    return lambda eps, delta: ana_gaussian_mech(eps, delta)["sigma"]


def _load_dp_accounting() -> ScalarCalibrator:
    from dp_accounting import get_sigma_gaussian

    return lambda eps, delta: get_sigma_gaussian(eps, delta)


def _load_pydp() -> ScalarCalibrator:
    from pydp.algorithms.numerical_mechanisms import GaussianMechanism

    return lambda eps, delta: GaussianMechanism(eps, delta, 1.0).std


CONTENDERS: tuple[tuple[str, str, str, Callable[[], ScalarCalibrator]], ...] = (
    ("dpgauss", "dpgauss", "analytic_gaussian_sigma", _load_dpgauss),
    ("diffprivlib", "diffprivlib", "GaussianAnalytic(...)._scale", _load_diffprivlib),
    ("autodp", "autodp", "privacy_calibrator.ana_gaussian_mech", _load_autodp),
    ("dp_accounting", "dp-accounting", "get_sigma_gaussian", _load_dp_accounting),
    ("PyDP", "python-dp", "GaussianMechanism(...).std (C++)", _load_pydp),
)


def load_contenders() -> list[Contender]:
    """Import every calibrator; a failed import is recorded, never fatal."""
    contenders = []
    for name, dist, routine, loader in CONTENDERS:
        label = f"{name} {_version(dist)}"
        try:
            contenders.append(Contender(label, routine, calibrate=loader()))
        except Exception as exc:  # any import-time failure of a third-party package
            contenders.append(Contender(label, routine, skipped=f"{type(exc).__name__}: {exc}"))
    return contenders


def _version(dist: str) -> str:
    try:
        return importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        return "(not installed)"


# --------------------------------------------------------------------------------------
# Timing helpers
# --------------------------------------------------------------------------------------


class CallTimeoutError(Exception):
    """A calibrator call ran past its time limit."""


def _raise_timeout(signum: int, frame: FrameType | None) -> None:
    raise CallTimeoutError


@dataclass
class CallResult:
    sigma: float | None
    seconds: float
    error: str | None = None


def timed_call(fn: ScalarCalibrator, eps: float, delta: float, limit: float) -> CallResult:
    """One call of ``fn`` under a wall-clock limit (SIGALRM); errors are captured."""
    previous = signal.signal(signal.SIGALRM, _raise_timeout)
    signal.setitimer(signal.ITIMER_REAL, limit)
    start = time.perf_counter()
    try:
        sigma = float(fn(eps, delta))
        error = None if math.isfinite(sigma) and sigma > 0 else f"returned {sigma!r}"
    except CallTimeoutError:
        sigma, error = None, f"timeout > {limit:g} s"
    except Exception as exc:  # a competitor may raise anything
        sigma, error = None, f"{type(exc).__name__}: {exc}"
    finally:
        elapsed = time.perf_counter() - start
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
    return CallResult(sigma if error is None else None, elapsed, error)


def median_seconds(fn: Callable[[], object], repeats: int, number: int = 1) -> float:
    """Median over ``repeats`` of the time of ``number`` calls, per call."""
    return statistics.median(timeit.repeat(fn, number=number, repeat=repeats)) / number


# --------------------------------------------------------------------------------------
# 1. Vectorised speed
# --------------------------------------------------------------------------------------


def random_pairs(n: int, seed: int = SEED) -> tuple[np.ndarray, np.ndarray]:
    """eps log-uniform in [1e-3, 1e2], delta log-uniform in [1e-12, 1e-2]."""
    rng = np.random.default_rng(seed)
    return 10.0 ** rng.uniform(-3.0, 2.0, n), 10.0 ** rng.uniform(-12.0, -2.0, n)


@dataclass
class VectorTiming:
    n: int
    repeats: int
    calibrate_s: float
    log_ndtr_s: float
    ratios: list[float] = field(default_factory=list)
    cpu_calibrate_s: float = math.nan
    cpu_log_ndtr_s: float = math.nan

    @property
    def cpu_ratio(self) -> float:
        return self.cpu_calibrate_s / self.cpu_log_ndtr_s

    @property
    def ratio(self) -> float:
        return self.calibrate_s / self.log_ndtr_s

    @property
    def median_paired_ratio(self) -> float:
        return statistics.median(self.ratios)


def baseline_argument(eps: np.ndarray) -> np.ndarray:
    """The log_ndtr baseline's argument: the second Phi's at sigma = Delta/sqrt(2 eps)."""
    return -np.sqrt(2.0 * eps)


def time_vectorised(
    calibrate: Callable[[np.ndarray, np.ndarray], np.ndarray],
    eps: np.ndarray,
    delta: np.ndarray,
    repeats: int,
    baseline: np.ndarray | None = None,
) -> VectorTiming:
    """Interleave repeats of the calibration and of the log_ndtr baseline; take medians.

    ``calibrate(eps, delta)`` is timed (any vectorised function of two arrays); the
    baseline is one ``log_ndtr`` pass over ``baseline`` (default: item 1's argument)."""
    x = baseline_argument(eps) if baseline is None else baseline
    calibrate(eps, delta)  # warm-up
    scipy.special.log_ndtr(x)
    cal, base, cpu_cal, cpu_base = [], [], [], []
    for _ in range(repeats):
        base.append(timeit.timeit(lambda: scipy.special.log_ndtr(x), number=1))
        cal.append(timeit.timeit(lambda: calibrate(eps, delta), number=1))
        cpu_base.append(_cpu_seconds(lambda: scipy.special.log_ndtr(x)))
        cpu_cal.append(_cpu_seconds(lambda: calibrate(eps, delta)))
    ratios = [c / b for c, b in zip(cal, base, strict=True)]
    return VectorTiming(
        eps.size,
        repeats,
        statistics.median(cal),
        statistics.median(base),
        ratios,
        statistics.median(cpu_cal),
        statistics.median(cpu_base),
    )


def _cpu_seconds(fn: Callable[[], object]) -> float:
    start = time.process_time()
    fn()
    return time.process_time() - start


# --------------------------------------------------------------------------------------
# 2-3. Scalar speed and accuracy on the grid
# --------------------------------------------------------------------------------------


def eps_grid(per_decade: int) -> np.ndarray:
    """eps on a log grid over [1e-3, 1e2] with ``per_decade`` points per decade."""
    return np.logspace(-3.0, 2.0, 5 * per_decade + 1)


def grid_points(per_decade: int) -> list[tuple[float, float]]:
    return [(float(e), d) for d in GRID_DELTAS for e in eps_grid(per_decade)]


@dataclass
class GridReport:
    name: str
    routine: str
    n_points: int
    median_us: float = math.nan
    max_us: float = math.nan
    accurate: int = 0
    unsafe: int = 0
    unsafe_1pct: int = 0
    failed: int = 0
    worst_excess: float = -1.0
    worst_excess_at: tuple[float, float] | None = None
    worst_rel_error: float = 0.0
    worst_rel_error_at: tuple[float, float] | None = None
    unsafe_points: list[tuple[float, float, float]] = field(
        default_factory=list
    )  # eps, delta, excess
    failures: list[tuple[float, float, str]] = field(default_factory=list)
    issue_point: Verdict | None = None
    issue_sigma: float | None = None

    def add(self, eps: float, delta: float, verdict: Verdict) -> None:
        self.accurate += verdict.accurate
        if verdict.unsafe:
            self.unsafe += 1
            self.unsafe_1pct += verdict.delta_excess > 0.01
            self.unsafe_points.append((eps, delta, verdict.delta_excess))
        if verdict.delta_excess > self.worst_excess:
            self.worst_excess, self.worst_excess_at = verdict.delta_excess, (eps, delta)
        if abs(verdict.rel_error) > abs(self.worst_rel_error):
            self.worst_rel_error, self.worst_rel_error_at = verdict.rel_error, (eps, delta)


def reference_table(points: Sequence[tuple[float, float]]) -> dict[tuple[float, float], mpmath.mpf]:
    return {point: optimal_sigma(*point) for point in points}


def run_grid(
    contender: Contender,
    points: Sequence[tuple[float, float]],
    optimum: dict[tuple[float, float], mpmath.mpf],
    repeats: int,
    limit: float,
) -> GridReport:
    """Call the calibrator at every grid point: time (median of repeats) and judge it."""
    assert contender.calibrate is not None
    report = GridReport(contender.name, contender.routine, len(points))
    per_call = []
    for eps, delta in points:
        results = [timed_call(contender.calibrate, eps, delta, limit)]
        while results[-1].error is None and len(results) < repeats:
            results.append(timed_call(contender.calibrate, eps, delta, limit))
        first = results[0]
        if first.error is not None:
            report.failed += 1
            report.failures.append((eps, delta, first.error))
            continue
        per_call.append(statistics.median(r.seconds for r in results))
        report.add(eps, delta, judge(first.sigma, eps, delta, optimum[eps, delta]))
    if per_call:
        report.median_us, report.max_us = 1e6 * statistics.median(per_call), 1e6 * max(per_call)
    return report


def run_array_grid(
    calibrate: Callable[[np.ndarray, np.ndarray], np.ndarray],
    points: Sequence[tuple[float, float]],
    optimum: dict[tuple[float, float], mpmath.mpf],
    repeats: int,
) -> GridReport:
    """dpgauss's array path on the same grid: one call for all points."""
    eps = np.array([p[0] for p in points])
    delta = np.array([p[1] for p in points])
    sigma = calibrate(eps, delta)
    report = GridReport("dpgauss (one array call)", "analytic_gaussian_sigma", len(points))
    report.median_us = 1e6 * median_seconds(lambda: calibrate(eps, delta), repeats) / len(points)
    report.max_us = math.nan
    for (e, d), s in zip(points, sigma, strict=True):
        report.add(e, d, judge(float(s), e, d, optimum[e, d]))
    return report


def issue_point_check(report: GridReport, contender: Contender, limit: float) -> None:
    """The (eps, delta) point quoted in the issue, judged for one calibrator."""
    assert contender.calibrate is not None
    result = timed_call(contender.calibrate, *ISSUE_POINT, limit)
    if result.sigma is not None:
        report.issue_sigma = result.sigma
        report.issue_point = judge(result.sigma, *ISSUE_POINT, optimal_sigma(*ISSUE_POINT))


# --------------------------------------------------------------------------------------
# 4. Random sample of the vectorised outputs
# --------------------------------------------------------------------------------------


def sample_check(
    eps: np.ndarray, delta: np.ndarray, sigma: np.ndarray, size: int, seed: int = SEED + 1
) -> GridReport:
    """Judge ``size`` random entries of one vectorised calibration against the reference."""
    rng = np.random.default_rng(seed)
    index = rng.choice(eps.size, size=size, replace=False)
    report = GridReport("dpgauss (random sample)", "analytic_gaussian_sigma", size)
    for i in index:
        e, d = float(eps[i]), float(delta[i])
        report.add(e, d, judge(float(sigma[i]), e, d, optimal_sigma(e, d)))
    return report


# --------------------------------------------------------------------------------------
# 5. Vectorised gaussian_epsilon
# --------------------------------------------------------------------------------------


def random_sigma_delta(n: int, seed: int = SEED + 2) -> tuple[np.ndarray, np.ndarray]:
    """sigma log-uniform in [1e-2, 1e3] (Delta = 1), delta log-uniform in [1e-12, 1e-2]."""
    rng = np.random.default_rng(seed)
    return 10.0 ** rng.uniform(-2.0, 3.0, n), 10.0 ** rng.uniform(-12.0, -2.0, n)


@dataclass
class EpsilonSample:
    size: int
    zeros: int = 0
    safe: int = 0
    tight: int = 0
    failures: list[str] = field(default_factory=list)


def epsilon_sample_check(
    sigma: np.ndarray, delta: np.ndarray, eps: np.ndarray, size: int, seed: int = SEED + 3
) -> EpsilonSample:
    """Judge ``size`` random entries of one gaussian_epsilon call with mpmath (item 5)."""
    rng = np.random.default_rng(seed)
    report = EpsilonSample(size)
    for i in rng.choice(sigma.size, size=size, replace=False):
        s, d, e = float(sigma[i]), float(delta[i]), float(eps[i])
        with mpmath.workdps(REFERENCE_DPS):
            mu = 1 / mpmath.mpf(s)
            safe = reference_delta(mu, mpmath.mpf(e)) <= d
            if e == 0.0:
                report.zeros += 1
                tight = True
            else:
                below = max(e * (1 - 1e-9) - 1e-12, 0.0)
                tight = reference_delta(mu, mpmath.mpf(below)) > d
        report.safe += safe
        report.tight += tight
        if not (safe and tight):
            report.failures.append(f"sigma={s!r}, delta={d!r}: eps={e!r} safe={safe} tight={tight}")
    return report


def epsilon_section(n: int, repeats: int, sample: int) -> str:
    """[5]: gaussian_epsilon on n random (sigma, delta) pairs against a log_ndtr pass."""
    from dpgauss.privacy import gaussian_epsilon

    sigma, delta = random_sigma_delta(n)
    baseline = baseline_argument(random_pairs(n)[0])
    vec = time_vectorised(gaussian_epsilon, sigma, delta, repeats, baseline)
    lines = [
        f"\n[5] vectorised: gaussian_epsilon on {n:,} random (sigma, delta) pairs "
        "(sigma in [1e-2, 1e3], delta in [1e-12, 1e-2], log-uniform)",
        f"    median of {vec.repeats} interleaved repeats: gaussian_epsilon "
        f"{1e3 * vec.calibrate_s:.1f} ms, log_ndtr {1e3 * vec.log_ndtr_s:.2f} ms, "
        f"RATIO {vec.ratio:.1f}x (per-repeat median {vec.median_paired_ratio:.1f})",
        f"    CPU time (median of {vec.repeats}): gaussian_epsilon "
        f"{1e3 * vec.cpu_calibrate_s:.1f} ms, log_ndtr {1e3 * vec.cpu_log_ndtr_s:.2f} ms, "
        f"RATIO {vec.cpu_ratio:.1f}x  (goal <= 15x)",
    ]
    if sample:
        eps = np.asarray(gaussian_epsilon(sigma, delta))
        check = epsilon_sample_check(sigma, delta, eps, min(sample, n))
        lines.append(
            f"    {check.size} random entries judged with mpmath: {check.safe} safe, "
            f"{check.tight} tight ({check.zeros} of them epsilon = 0); "
            f"{int(np.count_nonzero(eps == 0.0)):,} of the {n:,} are epsilon = 0"
        )
        lines += [f"    FAILED: {f}" for f in check.failures[:8]]
    return "\n".join(lines)


# --------------------------------------------------------------------------------------
# Output
# --------------------------------------------------------------------------------------


def format_table(headers: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    widths = [max(len(str(c)) for c in col) for col in zip(headers, *rows, strict=True)]
    line = "  ".join("-" * w for w in widths)
    out = ["  ".join(h.ljust(w) for h, w in zip(headers, widths, strict=True)), line]
    out += ["  ".join(str(c).ljust(w) for c, w in zip(r, widths, strict=True)) for r in rows]
    return "\n".join(out)


def _fmt_us(us: float) -> str:
    return "-" if math.isnan(us) else f"{us:,.1f}" if us < 1000 else f"{us:,.0f}"


def _fmt_ratio(excess: float) -> str:
    """true/requested delta; near 1 shown as 1 plus or minus the (high-precision) excess."""
    return f"1{excess:+.1e}" if abs(excess) < 1e-3 else f"{1.0 + excess:.4g}"


def _fmt_point(point: tuple[float, float] | None) -> str:
    return "-" if point is None else f"eps={point[0]:.6g}, delta={point[1]:.6g}"


def grid_table(reports: Sequence[GridReport]) -> str:
    headers = [
        "calibrator",
        "us/call (median)",
        "us/call (max)",
        "accurate <=1e-9",
        "unsafe",
        "unsafe >1%",
        "failed",
        "max true/req delta",
        "max |rel err|",
    ]
    rows = [
        [
            r.name,
            _fmt_us(r.median_us),
            _fmt_us(r.max_us),
            f"{r.accurate}/{r.n_points}",
            str(r.unsafe),
            str(r.unsafe_1pct),
            str(r.failed),
            _fmt_ratio(r.worst_excess),
            f"{abs(r.worst_rel_error):.2g}",
        ]
        for r in reports
    ]
    return format_table(headers, rows)


def issue_table(reports: Sequence[GridReport]) -> str:
    headers = ["calibrator", "sigma", "rel err vs optimum", "true delta / requested"]
    rows = [
        [
            r.name,
            f"{r.issue_sigma:.12g}",
            f"{r.issue_point.rel_error:+.3e}",
            _fmt_ratio(r.issue_point.delta_excess),
        ]
        for r in reports
        if r.issue_point is not None and r.issue_sigma is not None
    ]
    return format_table(headers, rows)


def details(report: GridReport, limit: int = 8) -> list[str]:
    """Worst points and the first unsafe and failed inputs of one calibrator."""
    lines = [
        f"  {report.name}: worst true/requested delta {_fmt_ratio(report.worst_excess)} at "
        f"{_fmt_point(report.worst_excess_at)}; worst rel err {report.worst_rel_error:+.3e} at "
        f"{_fmt_point(report.worst_rel_error_at)}"
    ]
    for eps, delta, excess in report.unsafe_points[:limit]:
        lines.append(
            f"    unsafe: eps={eps!r}, delta={delta!r}: true/requested = {_fmt_ratio(excess)}"
        )
    if len(report.unsafe_points) > limit:
        lines.append(f"    ... {len(report.unsafe_points) - limit} more unsafe points")
    for eps, delta, error in report.failures[:limit]:
        lines.append(f"    failed: eps={eps!r}, delta={delta!r}: {error[:120]}")
    if len(report.failures) > limit:
        lines.append(f"    ... {len(report.failures) - limit} more failures")
    return lines


def git_state() -> str:
    """Short commit of the working tree and whether the calibration code has uncommitted changes."""
    try:
        commit = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, check=True
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "status", "--porcelain", "--untracked-files=no", "--", "src"],
            capture_output=True,
            text=True,
        ).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "git: unknown"
    return f"git {commit}" + (" + uncommitted changes to tracked files in src/" if dirty else "")


def header_lines(args: argparse.Namespace) -> list[str]:
    versions = ", ".join(f"{d} {_version(d)}" for d in ("numpy", "scipy", "mpmath"))
    return [
        "dpgauss calibration benchmark" + (" (--quick)" if args.quick else ""),
        f"date: {datetime.datetime.now().astimezone().isoformat(timespec='seconds')}",
        f"python {platform.python_version()} on {platform.machine()}, {os.cpu_count()} cpus; "
        f"{versions}; dpgauss {_version('dpgauss')} ({git_state()})",
    ]


# --------------------------------------------------------------------------------------
# Main
# --------------------------------------------------------------------------------------


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="short run (fewer points, repeats)")
    parser.add_argument("--n", type=int, help="points in the vectorised call (default 10^6)")
    parser.add_argument("--repeats", type=int, help="timing repeats (median is reported)")
    parser.add_argument("--per-decade", type=int, help="eps grid points per decade")
    parser.add_argument("--sample", type=int, help="vectorised outputs checked with mpmath")
    parser.add_argument("--timeout", type=float, default=2.0, help="seconds per scalar call")
    parser.add_argument(
        "--only-epsilon", action="store_true", help="run item 5 (gaussian_epsilon) alone"
    )
    args = parser.parse_args(argv)
    quick = args.quick
    args.n = args.n or (10**5 if quick else 10**6)
    args.repeats = args.repeats or (5 if quick else 15)
    args.per_decade = args.per_decade or (2 if quick else 4)
    args.sample = args.sample if args.sample is not None else (100 if quick else 1000)
    return args


def main(argv: Sequence[str] | None = None) -> None:
    args = parse_args(argv)
    print("\n".join(header_lines(args)))
    contenders = load_contenders()
    dpgauss = contenders[0]
    if dpgauss.calibrate is None:
        raise SystemExit(f"cannot import dpgauss: {dpgauss.skipped}")
    from dpgauss.privacy import analytic_gaussian_sigma

    if args.only_epsilon:
        print(epsilon_section(args.n, args.repeats, args.sample))
        return

    print(f"\n[1] vectorised: analytic_gaussian_sigma on {args.n:,} random (eps, delta) pairs")
    eps, delta = random_pairs(args.n)
    vec = time_vectorised(analytic_gaussian_sigma, eps, delta, args.repeats)
    print(
        f"    median of {vec.repeats} interleaved repeats: "
        f"calibration {1e3 * vec.calibrate_s:.1f} ms, log_ndtr {1e3 * vec.log_ndtr_s:.2f} ms\n"
        f"    RATIO calibration / log_ndtr = {vec.ratio:.1f}x  (goal <= 10x)\n"
        f"    per-repeat ratios: median {vec.median_paired_ratio:.1f}, "
        f"min {min(vec.ratios):.1f}, max {max(vec.ratios):.1f}\n"
        f"    CPU time (median of {vec.repeats}): calibration {1e3 * vec.cpu_calibrate_s:.1f} ms, "
        f"log_ndtr {1e3 * vec.cpu_log_ndtr_s:.2f} ms, RATIO {vec.cpu_ratio:.1f}x"
    )

    print(scalar_section(contenders, args.repeats))

    points = grid_points(args.per_decade)
    n_eps = len(points) // len(GRID_DELTAS)
    print(
        f"\n[3] grid: {n_eps} eps (log grid over [1e-3, 1e2]) x delta in "
        f"{{{', '.join(f'{d:.0e}' for d in GRID_DELTAS)}}} = {len(points)} points; "
        f"mpmath reference at {REFERENCE_DPS} digits"
    )
    optimum = reference_table(points)
    reports = [run_array_grid(analytic_gaussian_sigma, points, optimum, args.repeats)]
    for contender in contenders:
        if contender.calibrate is None:
            print(f"    SKIPPED {contender.name}: {contender.skipped}")
            continue
        report = run_grid(contender, points, optimum, min(args.repeats, 3), args.timeout)
        issue_point_check(report, contender, args.timeout)
        reports.append(report)
    print(
        "    us/call: median over grid points of the median of 3 timed calls "
        "(array row: one call / points)"
    )
    print(
        "    accurate: |sigma/sigma* - 1| <= 1e-9; unsafe: true delta at sigma > requested delta "
        "(>1%: by more than 1%)"
    )
    print(grid_table(reports))
    print("\n".join(line for r in reports for line in details(r)))

    eps_i, delta_i = ISSUE_POINT
    print(
        f"\n[3b] the issue's point eps={eps_i:g}, delta={delta_i:g} "
        f"(optimum sigma* = {mpmath.nstr(optimal_sigma(*ISSUE_POINT), 15)})"
    )
    print(issue_table(reports))

    if args.sample:
        print(f"\n[4] {args.sample} random entries of the [1] call judged with mpmath")
        sigma = analytic_gaussian_sigma(eps, delta)
        sample = sample_check(eps, delta, sigma, args.sample)
        print(grid_table([sample]))
        print("\n".join(details(sample)))

    print(epsilon_section(args.n, args.repeats, args.sample))


def scalar_section(contenders: Sequence[Contender], repeats: int) -> str:
    """[2]: one scalar calibration at (1, 1e-5) by every contender, timed interleaved
    (repeat r of each library runs back to back), as µs/call and as a ratio to dpgauss."""
    from dpgauss.noise.mechanisms import GaussianMechanism
    from dpgauss.privacy import analytic_gaussian_sigma, gaussian_delta, gaussian_epsilon

    calls: list[tuple[str, Callable[[], object]]] = [
        ("dpgauss analytic_gaussian_sigma", lambda: analytic_gaussian_sigma(1.0, 1e-5)),
        ("dpgauss GaussianMechanism(1, 1e-5, 1)", lambda: GaussianMechanism(1.0, 1e-5, 1.0)),
        ("dpgauss gaussian_delta(3.73, 1)", lambda: gaussian_delta(3.73, 1.0)),
        ("dpgauss gaussian_epsilon(3.73, 1e-5)", lambda: gaussian_epsilon(3.73, 1e-5)),
    ]
    for c in contenders:
        if c.calibrate is not None and not c.name.startswith("dpgauss"):
            fn = c.calibrate
            calls.append((f"{c.name} {c.routine}", lambda fn=fn: fn(1.0, 1e-5)))
    times: dict[str, list[float]] = {name: [] for name, _ in calls}
    for _ in range(max(repeats, 5)):
        for name, fn in calls:
            times[name].append(timeit.timeit(fn, number=200) / 200)
    base = statistics.median(times[calls[0][0]])
    lines = [
        "\n[2] scalar calls at (eps, delta) = (1, 1e-5), interleaved, median of "
        f"{max(repeats, 5)} x 200 calls (goal: dpgauss <= 10 us)"
    ]
    for name, _ in calls:
        t = statistics.median(times[name])
        lines.append(f"    {name:58s} {1e6 * t:9.1f} us   {t / base:6.2f}x dpgauss")
    return "\n".join(lines)


if __name__ == "__main__":
    main()
