"""The Monte Carlo of ``tests/denoise/test_auto.py``, printed: auto's error and its choices.

Run from the repository root::

    python benchmarks/bench_auto_monte_carlo.py                 # every case, 100 draws each
    python benchmarks/bench_auto_monte_carlo.py --reps 20 --cases smooth
    python benchmarks/bench_auto_monte_carlo.py --compare-screen  # also auto(screen=False)

For each case of the tests (the same signals, grids, seeds and draws), the mean realised
squared error ``‖ŷ − θ‖²`` of ``auto`` and of every fixed candidate of the tests
(``_fixed_candidates``: identity, both James–Stein, SURE soft thresholding, the Haar
wavelets on a grid, order-0 trend filtering on a 1-D grid's chain or a 2-D grid's lattice),
reported as ``auto / dσ²`` and ``auto / best fixed candidate``, with how often ``auto``
chose each method.  ``--compare-screen`` counts the draws on which screening
(``screen=True``, the default) chose the same candidate as ``screen=False``.  These are the
figures of the Monte Carlo table in ``docs/denoising.md``; CPU time is ``auto``'s only.
"""

from __future__ import annotations

import argparse
import collections
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.denoise import test_auto as cases_of

from dpgauss.denoise import auto

CASES = [
    ("dense rough", cases_of._dense_rough, None, 1),
    ("sparse", cases_of._sparse, None, 2),
    ("smooth 32x32", cases_of._smooth_grid, (32, 32), 2),
    ("small offset 25x40", cases_of._small_offset, (25, 40), 2),
    ("dense rough 25x40", cases_of._dense_rough, (25, 40), 1),
    ("dense rough 1-D", cases_of._dense_rough, (1000,), 1),
    ("steps 1-D", cases_of._steps_1d, (1000,), 2),
]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reps", type=int, default=100, help="draws per case (tests: 100)")
    parser.add_argument("--cases", nargs="*", default=[], help="substrings of case names")
    parser.add_argument("--compare-screen", action="store_true")
    args = parser.parse_args()
    sigma = cases_of.SIGMA
    print(f"{'case':20s} {'auto/dσ²':>9s} {'auto/best':>9s}  best fixed            choices")
    for name, theta_fn, grid, seed in CASES:
        if args.cases and not any(c in name for c in args.cases):
            continue
        rng = np.random.default_rng(seed)
        losses: dict[str, list[float]] = collections.defaultdict(list)
        choices: collections.Counter[str] = collections.Counter()
        same, cpu = 0, 0.0
        for _ in range(args.reps):
            theta = theta_fn(rng)
            y = theta + sigma * rng.standard_normal(theta.size)
            for method, est in cases_of._fixed_candidates(y, grid).items():
                losses[method].append(float(np.sum((est - theta) ** 2)))
            start = time.process_time()
            res = auto(y, sigma, grid)
            cpu += time.process_time() - start
            losses["auto"].append(float(np.sum((res.estimate - theta) ** 2)))
            choices[res.method] += 1
            if args.compare_screen:
                slow = auto(y, sigma, grid, screen=False)
                same += slow.params["selected"] == res.params["selected"]
        mse = {k: float(np.mean(v)) for k, v in losses.items()}
        fixed = {k: v for k, v in mse.items() if k != "auto"}
        best = min(fixed, key=fixed.__getitem__)
        d = theta.size
        line = (
            f"{name:20s} {mse['auto'] / (d * sigma**2):9.3f} {mse['auto'] / fixed[best]:9.3f}  "
            f"{best:20s}  {dict(choices)}  (auto CPU {cpu:.1f} s)"
        )
        if args.compare_screen:
            line += f"  screen = no screen on {same}/{args.reps}"
        print(line, flush=True)


if __name__ == "__main__":
    main()
