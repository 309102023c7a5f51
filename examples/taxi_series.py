"""A series: taxi pickups per NYC neighbourhood for three hours, one release per hour.

Usage: ``python3 examples/taxi_series.py`` (writes into the current directory).

Each hour is one release of ``examples/taxi_series.toml``, charged to one budget; the ledger
composes the hours (``[unit] scope = "all"``: a driver is protected over all three).
Each hour is denoised with the hours before it already published (``[series] history``),
whose revised denoised values go to ``taxi_hourly.<hour>.revisions.csv``.
"""

from __future__ import annotations

from pathlib import Path

from dpgauss.release.ledger import Ledger
from dpgauss.release.pipeline import run_release
from dpgauss.release.spec import load_spec

spec = load_spec(Path(__file__).with_name("taxi_series.toml"))
with Ledger("budget.sqlite") as ledger:
    ledger.create_budget("taxi", epsilon=3.0, delta=1e-5)

for hour in ("09", "10", "11"):
    result = run_release(spec, ledger="budget.sqlite", period=f"2013-01-13T{hour}:00:00")
    period = result.report["series"]
    top = result.columns["denoised"].max()
    used = result.report["denoise"]["history"]["used"]
    print(
        f"{period['start']} – {period['stop']}: {result.report['output']['table']}, "
        f"largest denoised count {top:.1f}, denoised with {used} earlier hour(s)"
    )

with Ledger("budget.sqlite", create=False) as ledger:
    status = ledger.remaining("taxi")
print(
    f"spent mu={status.mu_spent:.4f} of {status.mu_budget:.4f} in {status.charges} releases "
    f"(epsilon {status.epsilon_spent:.3f} at delta {status.delta:g})"
)
