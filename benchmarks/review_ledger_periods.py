"""Review of issue #29 item 2 (finding 6): a charge and ``remaining()`` on a ledger whose
scope-'period' budget has N hourly periods charged.

Run: ``PYTHONPATH=src python3 benchmarks/review_ledger_periods.py [N]`` (default 2000).
"""

from __future__ import annotations

import sqlite3
import sys
import tempfile
import time
from datetime import datetime, timedelta
from pathlib import Path

from dpgauss.release.ledger import Ledger


def main(n: int) -> None:
    path = Path(tempfile.mkdtemp()) / "b.sqlite"
    with Ledger(path) as led:
        led.create_budget("d", 1.0, 1e-6, scope="period", period="1h", column="t")
    t0 = datetime(2013, 1, 1)
    con = sqlite3.connect(path)  # N charges at once (Ledger.charge would take N² time)
    con.executemany(
        "INSERT INTO charges (dataset, time, mu, eta, period, delivery) "
        "VALUES ('d', 'x', 0.1, 0, ?, 'delivered')",
        [((t0 + timedelta(hours=i)).isoformat(sep=" "),) for i in range(n)],
    )
    con.commit()
    con.close()
    with Ledger(path) as led:
        for what, call in (
            ("charge", lambda: led.charge("d", mu=0.1, period=f"{t0 + timedelta(hours=n)}")),
            ("remaining(period)", lambda: led.remaining("d", period=f"{t0}")),
            ("remaining()", lambda: led.remaining("d")),
        ):
            t = time.perf_counter()
            call()
            print(f"{what:<18} {time.perf_counter() - t:.3f} s  ({n} periods)")


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 2000)
