"""The least noise (issue #31 item 1): the σ a secure release delivers over the analytic σ.

    PYTHONPATH=src python3 benchmarks/bench_least_noise.py            # the tables of docs
    PYTHONPATH=src python3 benchmarks/bench_least_noise.py --quick    # d = 4091 only

For every setting of the issue — ε ∈ {0.1, 0.5, 1, 2}, δ ∈ {1e-6, 1e-9}, Δ ∈ {1, 2, 5, 10,
30} (``max_records_per_unit = Δ``, so the count's and the sum's L2 sensitivity is Δ), d ∈ {1,
4091, 10⁵} — a release spec is planned exactly as ``dpgauss release`` plans it
(:func:`dpgauss.release.plan.calibrate`, nothing drawn) for a ``count``, a ``sum`` of values
in [0, 1] and a ``mean`` of values in [0, 10], and the delivered σ (``probe.sigma``: the
standard deviation of the law drawn, in the values' units; for a mean on the normalised
pair) is divided by the continuous analytic σ of Balle & Wang at the same (ε, δ, Δ)
(``calibration.sigma``), the baseline, computed in the same run.  The "before" column is
what the release drew until this change: the rounded lattice over all d coordinates at a
1 % rounding cost (``GaussianMechanism(ε, δ, Δ).noise_plan(d)``, the call the plan made).
Each planned law's μ-GDP charge is checked against ``gdp_mu(ε, δ)`` (it must fit a budget
of its own (ε, δ)); a row that does not fit would print REFUSED.

Output: one line per (ε, δ, Δ) with the ratios − 1 for each d, then the worst case of each
statistic, and the seconds spent planning.
"""

from __future__ import annotations

import argparse
import time

from dpgauss.noise.mechanisms import GaussianMechanism
from dpgauss.privacy import gdp_mu
from dpgauss.release.domains.key_domain import resolve_domain
from dpgauss.release.plan import calibrate, sensitivity_of
from dpgauss.release.spec import ReleaseSpec

EPS = (0.1, 0.5, 1.0, 2.0)
DELTAS = (1e-6, 1e-9)
SENS = (1, 2, 5, 10, 30)
DIMS = (1, 4091, 100_000)


def _spec(kind: str, eps: float, delta: float, b: int, d: int) -> ReleaseSpec:
    stat: dict[str, object] = {"kind": kind}
    if kind == "sum":
        stat.update(column="x", lower=0.0, upper=1.0)
    if kind == "mean":
        stat.update(column="x", lower=0.0, upper=10.0)
    return ReleaseSpec.from_dict(
        {
            "source": {"path": "/nonexistent/records.parquet"},
            "unit": {"column": "uid"},
            "domain": {"kind": "range", "column": "key", "start": 0, "stop": d},
            "statistic": stat,
            "bounds": {"max_records_per_unit": b},
            "privacy": {"dataset": "d", "epsilon": eps, "delta": delta},
            "denoise": {"method": "none"},
        }
    )


def ratio(kind: str, eps: float, delta: float, b: int, d: int) -> tuple[float, float, str]:
    """(delivered/analytic − 1, before/analytic − 1, the label of the law) of one setting."""
    s = _spec(kind, eps, delta, b, d)
    domain = resolve_domain(s)
    sens = sensitivity_of(s, domain)
    cal = calibrate(s, sens, domain.size)
    if not cal.mu <= float(gdp_mu(eps, delta)):
        return float("nan"), float("nan"), "REFUSED"
    before = GaussianMechanism(eps, delta, sens.l2).noise_plan(cal.dim).sigma
    return cal.probe.sigma / cal.sigma - 1.0, before / cal.sigma - 1.0, cal.label


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true", help="d = 4091 only")
    ap.add_argument("--kinds", default="count,sum,mean")
    args = ap.parse_args()
    dims = (4091,) if args.quick else DIMS
    worst: dict[str, tuple[float, str]] = {}
    worst_before: dict[str, float] = {}
    t0 = time.process_time()
    for kind in args.kinds.split(","):
        print(f"\n{kind}: delivered sigma / analytic sigma - 1 (before: the 1 % lattice over d)")
        print("| eps | delta | Delta | " + " | ".join(f"d = {d}" for d in dims) + " |")
        print("| ---: | ---: | ---: | " + " | ".join("---:" for _ in dims) + " |")
        for eps in EPS:
            for delta in DELTAS:
                for b in SENS:
                    cells = []
                    for d in dims:
                        r, before, label = ratio(kind, eps, delta, b, d)
                        cells.append(f"{r:+.2e} (before {before:+.2e})")
                        if not abs(r) <= abs(worst.get(kind, (0.0, ""))[0]):
                            worst[kind] = (r, f"eps={eps} delta={delta} Delta={b} d={d}: {label}")
                        worst_before[kind] = max(worst_before.get(kind, 0.0), before)
                    print(f"| {eps} | {delta:g} | {b} | " + " | ".join(cells) + " |", flush=True)
    print("\nworst |delivered/analytic - 1| per statistic (before: the largest excess)")
    for kind, (r, where) in worst.items():
        print(f"  {kind:5s} {r:+.3e}  at {where}   (before {worst_before[kind]:+.3e})")
    print(f"\nplanning CPU time: {time.process_time() - t0:.1f} s")


if __name__ == "__main__":
    main()
