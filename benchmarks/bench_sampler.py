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
"""

from __future__ import annotations

import argparse
import os
import platform
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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=1_000_000, help="samples per call")
    parser.add_argument("--repeats", type=int, default=5, help="timed calls per cell")
    args = parser.parse_args()
    n, repeats = args.n, args.repeats

    print(
        f"python {platform.python_version()}, numpy {np.__version__}, "
        f"{platform.machine()}, {os.cpu_count()} cpus; n = {n:,}, best of {repeats}"
    )
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
