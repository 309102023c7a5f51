"""Speed of exact μ-GDP composition: 10^5 Gaussian releases, then ε(δ).

    python3 benchmarks/bench_accounting.py            # dpgauss alone
    /tmp/benchvenv/bin/python benchmarks/bench_accounting.py   # with dp-accounting (bench extra)

Times, in the same run: dpgauss's GaussianAccountant (10^5 individual σ's, vectorised, the
same as one call with count=10^5, and as 10^5 calls of ``add(σ)`` one at a time), and,
when dp-accounting is installed, its RDP and privacy-loss-distribution (PLD) accountants
on the same composition.  Reports each time and its ratio to dpgauss's.
"""

from __future__ import annotations

import time
from collections.abc import Callable

import numpy as np

from dpgauss.privacy.accounting import GaussianAccountant

K = 100_000
SIGMA = 300.0
DELTA = 1e-6


def _best(fn: Callable[[], float], repeats: int) -> tuple[float, float]:
    best, value = float("inf"), float("nan")
    for _ in range(repeats):
        start = time.perf_counter()
        value = fn()
        best = min(best, time.perf_counter() - start)
    return best, value


def _dpgauss_array() -> float:
    acc = GaussianAccountant()
    acc.add(np.full(K, SIGMA))
    return float(acc.epsilon(DELTA))


def _dpgauss_count() -> float:
    acc = GaussianAccountant()
    acc.add(SIGMA, count=K)
    return float(acc.epsilon(DELTA))


def _dpgauss_one_at_a_time() -> float:
    acc = GaussianAccountant()
    for _ in range(K):
        acc.add(SIGMA)
    return float(acc.epsilon(DELTA))


def _competitors() -> dict[str, Callable[[], float]]:
    try:
        import dp_accounting
        from dp_accounting import pld, rdp
    except ImportError as exc:
        print(f"SKIPPED dp-accounting: {exc}")
        return {}
    event = dp_accounting.SelfComposedDpEvent(dp_accounting.GaussianDpEvent(SIGMA), K)

    def rdp_eps() -> float:
        return float(rdp.RdpAccountant().compose(event).get_epsilon(DELTA))

    def pld_eps() -> float:
        acc = pld.PLDAccountant(value_discretization_interval=1e-3)
        return float(acc.compose(event).get_epsilon(DELTA))

    return {"dp-accounting RDP": rdp_eps, "dp-accounting PLD": pld_eps}


def main() -> None:
    rows = [("dpgauss, 10^5 sigmas", *_best(_dpgauss_array, 20))]
    rows.append(("dpgauss, count=10^5", *_best(_dpgauss_count, 20)))
    rows.append(("dpgauss, 10^5 single adds", *_best(_dpgauss_one_at_a_time, 3)))
    for name, fn in _competitors().items():
        rows.append((name, *_best(fn, 3)))
    base = rows[0][1]
    print(f"compose {K} Gaussian releases (sigma={SIGMA}, sensitivity=1), then epsilon at {DELTA}")
    print(f"{'accountant':<24} {'time':>12} {'x dpgauss':>10} {'epsilon':>12}")
    for name, t, eps in rows:
        print(f"{name:<24} {t * 1e3:>10.2f}ms {t / base:>10.1f} {eps:>12.6f}")


if __name__ == "__main__":
    main()
