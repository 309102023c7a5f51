"""What fitting the secure noise to its own (ε, δ) budget costs, and what calibration costs.

    PYTHONPATH=src python3 benchmarks/bench_gdp_fit.py                 # the tables below
    PYTHONPATH=src python3 benchmarks/bench_gdp_fit.py --epsilon 0.5 --delta 1e-9
    PYTHONPATH=src python3 benchmarks/bench_gdp_fit.py --calibrate-only   # item 3 alone
    PYTHONPATH=/path/to/main/src python3 benchmarks/bench_gdp_fit.py --calibrate-only

1. For the secure lattice release of ``GaussianMechanism`` (Δ = 1 and 5; d = 1, 100, 10⁴,
   10⁶) and for ``DiscreteGaussianMechanism`` (Δ₂ = 1, 2, 5; d = 1, 100, 10⁴): the lattice
   σ certified at ε alone (``discrete_gaussian_vector_sigma``, the calibration before the
   fit), its μ-GDP charge relative to the budget ``gdp_mu(ε, δ)``, the fitted σ
   (``discrete_gaussian_gdp_sigma``) and its relative increase, and whether the fitted
   charge fits (≤ the budget μ, the ledger's comparison of the two doubles).
2. The time of ``noise_plan`` (the law without sampling) against a release of zeros (what the
   pipeline used to do to learn the law), at 10⁶ keys, both cold (first call) and warm.
3. The time of the release plan's own ``calibrate`` for a secure count of 10⁶ keys
   (Δ = 5): first call and the best of two more.  This part uses only APIs that existed
   before, so it also runs against an older checkout (``--calibrate-only``).

Run from the repository root.  Every number is computed in the run; nothing is cached
across runs.
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from dpgauss.noise.lattice import choose_grid, lattice_sensitivity
from dpgauss.noise.mechanisms import GaussianMechanism
from dpgauss.noise.release import DiscreteGaussianNoise
from dpgauss.privacy import analytic_gaussian_sigma, gdp_mu


def _row(label: str, eps: float, delta: float, sens_l: float, d: int, scale: float) -> str:
    from dpgauss.privacy.discrete_multivariate import (
        discrete_gaussian_gdp_sigma,
        discrete_gaussian_vector_mu,
        discrete_gaussian_vector_sigma,
    )

    mu_b = float(gdp_mu(eps, delta))
    old = float(discrete_gaussian_vector_sigma(eps, delta, sens_l, d))
    new = float(discrete_gaussian_gdp_sigma(eps, delta, sens_l, d))
    mu_old = float(discrete_gaussian_vector_mu(old, sens_l, d))
    mu_new = float(discrete_gaussian_vector_mu(new, sens_l, d))

    def verdict(mu: float) -> str:
        return "fits" if mu <= mu_b else "refused"

    return (
        f"| {label} | {old * scale:.10g} | {mu_old / mu_b - 1:+.2e} ({verdict(mu_old)}) | "
        f"{new * scale:.10g} | {new / old - 1:.2e} | {mu_new / mu_b - 1:+.2e} "
        f"({verdict(mu_new)}) |"
    )


def cost_tables(eps: float, delta: float) -> None:
    head = (
        "| {} | σ before | charge μ/μ_B − 1 before | σ fitted | σ increase | "
        "charge μ/μ_B − 1 fitted |\n| --- | ---: | ---: | ---: | ---: | ---: |"
    )
    print(f"Secure GaussianMechanism (lattice) at (ε, δ) = ({eps:g}, {delta:g}); σ = γ·σ_L:\n")
    print(head.format("Δ, d"))
    for sens in (1.0, 5.0):
        for d in (1, 100, 10**4, 10**6):
            grid = choose_grid(analytic_gaussian_sigma(eps, delta, sens), d, sens)
            sens_l = lattice_sensitivity(sens, grid, d)
            print(_row(f"Δ = {sens:g}, d = {d:,}", eps, delta, sens_l, d, grid))
    print(f"\nDiscreteGaussianMechanism (integer query, σ in counts) at ({eps:g}, {delta:g}):\n")
    print(head.format("Δ₂, d"))
    for sens in (1.0, 2.0, 5.0):
        for d in (1, 100, 10**4):
            sens_l = DiscreteGaussianNoise(1.0, dim=d).lattice_sensitivity(sens)
            print(_row(f"Δ₂ = {sens:g}, d = {d:,}", eps, delta, sens_l, d, 1.0))


def _clear_caches() -> None:
    from dpgauss.privacy import discrete_multivariate as dm

    for f in (dm._sigma_scalar, dm._mu_scalar, dm._gdp_sigma_scalar):
        f.cache_clear()


def timing(eps: float, delta: float, d: int) -> None:
    from dpgauss.privacy.accounting import GaussianAccountant

    mech = GaussianMechanism(eps, delta, 5.0)
    zeros = np.zeros(d)

    def old() -> float:  # the pipeline's _calibrate before: a secure release of zeros
        return float(GaussianAccountant().add_release(mech.release(zeros, rng="secure")))

    def new() -> float:  # now: the law without sampling
        return float(GaussianAccountant().add_release(mech.noise_plan(d, secure=True)))

    print(f"\nCalibration of a secure release of {d:,} keys (Δ = 5, ({eps:g}, {delta:g})):\n")
    print("| what | cold (first call) | warm (cached laws) |\n| --- | ---: | ---: |")
    for name, fn in (("release of zeros, then charge", old), ("noise_plan, then charge", new)):
        _clear_caches()
        t = time.perf_counter()
        fn()
        cold = time.perf_counter() - t
        warm = min(_timed(fn) for _ in range(3))
        print(f"| {name} | {cold:.3f} s | {warm:.3f} s |")


def _timed(fn) -> float:  # type: ignore[no-untyped-def]
    t = time.perf_counter()
    fn()
    return time.perf_counter() - t


def calibrate_timing(eps: float, delta: float, d: int) -> None:
    from dpgauss.release import plan
    from dpgauss.release.spec import ReleaseSpec

    spec = ReleaseSpec.from_dict(
        {
            "source": {"path": "unused.parquet"},
            "unit": {"column": "uid"},
            "domain": {"kind": "range", "column": "key", "start": 0, "stop": d},
            "statistic": {"kind": "count"},
            "bounds": {"max_records_per_unit": 5},
            "privacy": {"epsilon": eps, "delta": delta, "dataset": "d"},
            "denoise": {"method": "none"},
        }
    )
    domain = plan.resolve_domain(spec)
    sens = plan.sensitivity_of(spec, domain)
    try:
        _clear_caches()  # cold, even after the tables above
    except AttributeError:  # an older checkout: nothing of this is cached there
        pass
    times, mu = [], 0.0
    for _ in range(3):
        t = time.perf_counter()
        mu = plan.calibrate(spec, sens, domain.size).mu
        times.append(time.perf_counter() - t)
    print(
        f"\nplan.calibrate, secure count of {d:,} keys (Δ = 5, ({eps:g}, {delta:g})): "
        f"first {times[0]:.3f} s, then {min(times[1:]):.3f} s; charge mu = {mu!r}, "
        f"budget mu = {float(gdp_mu(eps, delta))!r}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--epsilon", type=float, default=1.0)
    parser.add_argument("--delta", type=float, default=1e-6)
    parser.add_argument("--keys", type=int, default=10**6, help="d for the timing")
    parser.add_argument("--calibrate-only", action="store_true", help="only time plan.calibrate")
    args = parser.parse_args()
    if not args.calibrate_only:
        cost_tables(args.epsilon, args.delta)
        timing(args.epsilon, args.delta, args.keys)
    calibrate_timing(args.epsilon, args.delta, args.keys)


if __name__ == "__main__":
    main()
