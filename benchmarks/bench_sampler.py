"""Throughput of the exact discrete Gaussian sampler, seeded and secure.

Run from the repository root::

    python benchmarks/bench_sampler.py            # n = 10^6 samples per measurement
    python benchmarks/bench_sampler.py --n 200000 --repeats 3

For σ in {1, 10, 1e3, 1e6} and each randomness source (a seeded PCG64 ``Generator`` and
``"secure"`` = ``os.urandom``), one call ``discrete_gaussian(σ, n, rng)`` is timed (best
of ``--repeats``) and reported as samples/second and as a RATIO to
``numpy.random.Generator.normal(0, σ, n)`` (the inexact, non-private floating-point
baseline) measured in the same run.  The target is >= 200,000 samples/s on one core.
Absolute numbers depend on the machine and its load; compare ratios within one run.

``--release`` (issue #31 item 7) measures instead the CPU time (``time.process_time``, which
other jobs on a shared machine disturb less than the wall clock) of a whole secure release
of ``--dim`` values (default 4,000), median of ``--repeats`` interleaved repeats, as a RATIO
to one float-noise draw ``Generator.normal(0, σ, dim)`` measured in the same run (target
<= 10x)::

    python benchmarks/bench_sampler.py --release
    python benchmarks/bench_sampler.py --release --dim 4000 --repeats 301

* counts: ``GaussianMechanism(ε, δ, Δ).release(counts, rng="secure", integer=True)``, the
  exact discrete Gaussian on the integer lattice (what a release of counts uses);
* sum: ``GaussianMechanism(ε, δ, Δ).release(sums, rng="secure")``, floats rounded to the
  default 2^-k grid plus exact discrete Gaussian noise;
* and each law's sampler alone: ``discrete_gaussian(σ_L, dim, "secure")``.
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import time
from collections.abc import Callable

import numpy as np

from dpgauss.noise.discrete_sampler import discrete_gaussian

SIGMAS = (1.0, 10.0, 1e3, 1e6)
TARGET = 200_000


def best_time(fn: Callable[[], object], repeats: int) -> float:
    fn()  # warm-up (caches, first-call imports)
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return min(times)


def cpu_seconds(fn: Callable[[], object]) -> float:
    start = time.process_time()
    fn()
    return time.process_time() - start


def release_section(dim: int, repeats: int, epsilon: float, delta: float, sens: float) -> None:
    """CPU time of secure releases of ``dim`` values against one float-noise draw."""
    from dpgauss.noise.mechanisms import GaussianMechanism

    mech = GaussianMechanism(epsilon, delta, sens)
    data = np.random.default_rng(3)
    counts = data.integers(0, 1000, dim)
    sums = data.uniform(0.0, 100.0, dim)
    law_counts = mech.noise_plan(dim, integer=True).noise
    law_sum = mech.noise_plan(dim).noise
    gen = np.random.default_rng(0)
    calls: list[tuple[str, Callable[[], object]]] = [
        (
            f"float noise: Generator.normal(0, sigma, {dim})",
            lambda: gen.normal(0.0, mech.sigma, dim),
        ),
        (
            f"secure release, counts (integer lattice, sigma_L = {law_counts.sigma_lattice:.6g})",
            lambda: mech.release(counts, rng="secure", integer=True),
        ),
        (
            f"secure release, sum (grid {law_sum.grid:g}, sigma_L = {law_sum.sigma_lattice:.6g})",
            lambda: mech.release(sums, rng="secure"),
        ),
        (
            "  sampler alone: discrete_gaussian(counts' sigma_L)",
            lambda: discrete_gaussian(law_counts.sigma_lattice, dim, "secure"),
        ),
        (
            "  sampler alone: discrete_gaussian(sum's sigma_L)",
            lambda: discrete_gaussian(law_sum.sigma_lattice, dim, "secure"),
        ),
    ]
    times: dict[str, list[float]] = {name: [] for name, _ in calls}
    for _, fn in calls:  # warm-up: imports, caches of the laws and of the sampler's constants
        fn()
    for _ in range(repeats):
        for name, fn in calls:
            times[name].append(cpu_seconds(fn))
    base = statistics.median(times[calls[0][0]])
    print(
        f"secure release of {dim:,} values, GaussianMechanism({epsilon:g}, {delta:g}, {sens:g}) "
        f"(sigma = {mech.sigma:.6g}); CPU time, median of {repeats} interleaved repeats"
    )
    for name, _ in calls:
        t = statistics.median(times[name])
        print(f"  {name:66s} {1e6 * t:9.1f} us  {t / base:6.1f}x")
    print("  (target: a secure release <= 10x the float-noise draw)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=1_000_000, help="samples per call")
    parser.add_argument("--repeats", type=int, help="timed calls per cell (5; --release: 301)")
    parser.add_argument("--release", action="store_true", help="time secure releases instead")
    parser.add_argument("--dim", type=int, default=4000, help="values per release (--release)")
    parser.add_argument("--epsilon", type=float, default=1.0, help="--release's epsilon")
    parser.add_argument("--delta", type=float, default=1e-6, help="--release's delta")
    parser.add_argument("--sensitivity", type=float, default=1.0, help="--release's L2 Delta")
    args = parser.parse_args()
    print(
        f"python {platform.python_version()}, numpy {np.__version__}, "
        f"{platform.machine()}, {os.cpu_count()} cpus"
    )
    if args.release:
        release_section(args.dim, args.repeats or 301, args.epsilon, args.delta, args.sensitivity)
        return
    n, repeats = args.n, args.repeats or 5

    print(f"n = {n:,}, best of {repeats}")
    gen = np.random.default_rng(0)
    t_normal = best_time(lambda: gen.normal(0.0, 1.0, n), repeats)
    print(f"baseline Generator.normal: {n / t_normal:,.0f} samples/s\n")
    header = f"{'sigma':>8} {'rng':>7} {'samples/s':>12} {'x normal':>9} {'>= 200k/s':>9}"
    print(header)
    print("-" * len(header))
    for sigma in SIGMAS:
        for label, rng in (("seeded", np.random.default_rng(1)), ("secure", "secure")):
            t = best_time(lambda s=sigma, r=rng: discrete_gaussian(s, n, r), repeats)
            rate = n / t
            print(
                f"{sigma:>8g} {label:>7} {rate:>12,.0f} {t / t_normal:>8.1f}x "
                f"{'yes' if rate >= TARGET else 'NO':>9}"
            )


if __name__ == "__main__":
    main()
