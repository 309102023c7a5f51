"""``dpgauss demo``: one real release end to end, on the data shipped with the package.

The taxi pickup heat map of Balle & Wang (2018, Sec. 6) through the release pipeline:

1. the spec (:func:`demo_spec`): the bundled TaxiVis trips (10,000 real yellow-cab trips
   of January 2013); the public window ``2013-01-13 00:00–12:00`` (the morning of
   Sunday 13 January, where 9,734 of the sample's 10,000 trips are); the 4,091 junctions of the
   Manhattan road graph as the public domain, every pickup's unit mass spread over its
   nearby junctions by a Gaussian kernel (50 m); one driver (``hack_license``) = one
   privacy unit, bounded to 5 trips in the window by uniform sampling, so the L2
   sensitivity is 5;
2. the release: (ε, δ) = (1, 1e-6) with the analytic Gaussian mechanism in secure mode
   (the exact lattice sampler fed by the OS CSPRNG), charged to a budget ledger first;
3. post-processing: ``auto`` picks the denoiser with the smallest unbiased risk estimate
   (James–Stein, soft thresholding, graph wavelets, graph trend filtering).

Outputs, in ``dpgauss-demo/`` (replaced on every run, ledger included: it is a demo):
``release.csv`` (per junction: key, released, denoised, sigma, the 95 % interval lower and
upper, lat, lon), ``release.csv.report.json`` (the pipeline's report), ``release.csv.png``
(the pipeline's own plot), ``heatmap.png`` (maps, each on its own robust colour scale: the
true bounded counts, the release, the denoised release with the junctions that stand out
beyond their intervals marked, and the intervals' ±) and ``budget.sqlite`` (the ledger).

The "true" panel is :func:`dpgauss.release.bounded_aggregate` of the same spec: the exact
bounded counts, which are *not* private — shown because the demo's data are a public sample
and the point is to see what noise and denoising do.  Its sampling of the few drivers with
more than 5 trips in the window is drawn independently of the release's own.
"""

from __future__ import annotations

import math
import shutil
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TextIO

import numpy as np

from . import _optional
from ._optional import install_hint
from .errors import OutputDirError
from .privacy import classical_gaussian_sigma
from .release.ledger import Ledger
from .release.pipeline import ReleaseResult, bounded_aggregate, run_release
from .release.report import rmse_text
from .release.spec import ReleaseSpec

__all__ = ["DEMO_DIR", "DemoResult", "OutputDirError", "demo_spec", "run_demo"]

#: Where ``dpgauss demo`` writes, relative to the current directory.
DEMO_DIR = "dpgauss-demo"
EPSILON, DELTA = 1.0, 1e-6
WINDOW = ("2013-01-13 00:00", "2013-01-13 12:00")
_DATASET = "bundled-trips"
_MARK = ".dpgauss-demo"  # a demo directory holds this file; others are never removed


def demo_spec(out_dir: str | Path = DEMO_DIR) -> ReleaseSpec:
    """The demo's release spec (the same as ``examples/taxi_pickups.toml`` plus a window)."""
    out = Path(out_dir)
    return ReleaseSpec.from_dict(
        {
            "name": f"taxi pickups per junction, {WINDOW[0]} to {WINDOW[1][-5:]}",
            "source": {"bundled": "trips"},
            "unit": {"column": "hack_license"},
            "filter": {"column": "pickup_datetime", "start": WINDOW[0], "stop": WINDOW[1]},
            "domain": {
                "kind": "graph",
                "graph": "manhattan",
                "lat": "pickup_latitude",
                "lon": "pickup_longitude",
                "mapping": "kde",
                "bandwidth": 50.0,
                "cutoff": 150.0,
                "bbox": [40.40, 41.00, -74.30, -73.60],
            },
            "statistic": {"kind": "count"},
            "bounds": {"max_records_per_unit": 5},
            "privacy": {
                "epsilon": EPSILON,
                "delta": DELTA,
                "secure": True,
                "ledger": str(out / "budget.sqlite"),
                "dataset": _DATASET,
                "label": "dpgauss demo",
            },
            "denoise": {"method": "auto"},
            "output": {"path": str(out / "release.csv")},
        }
    )


@dataclass(frozen=True)
class DemoResult:
    """What the demo wrote and measured."""

    out_dir: Path
    release: ReleaseResult
    truth: np.ndarray
    heatmap: Path | None
    summary: str


def _fresh_dir(out: Path) -> None:
    """Empty ``out`` for a new run; refuse a non-empty directory the demo did not create,
    and report one that cannot be created or written as :class:`OutputDirError`."""
    try:
        if out.exists():
            if not out.is_dir():
                raise OutputDirError(f"{out} exists and is not a directory")
            if any(out.iterdir()) and not (out / _MARK).exists():
                raise OutputDirError(
                    f"{out} exists and was not made by dpgauss demo; move it away or "
                    "choose another output directory"
                )
            shutil.rmtree(out)
        out.mkdir(parents=True)
        (out / _MARK).write_text("written by dpgauss demo; replaced on every run\n")
    except OSError as exc:
        reason = exc.strerror or str(exc)
        raise OutputDirError(f"cannot create the output directory {out}: {reason}") from None


def _step(stream: TextIO, text: str, t0: float) -> None:
    stream.write(f"[{time.perf_counter() - t0:5.1f} s] {text}\n")
    stream.flush()


def run_demo(out_dir: str | Path = DEMO_DIR, *, progress: TextIO | None = None) -> DemoResult:
    """Run the demo (module docstring) and return its outputs and six-line summary.

    ``progress`` receives one line per step (default: stderr).
    """
    missing = _optional.missing("duckdb", "matplotlib")
    if missing:  # before anything is written: the demo's own extra, not the engine's
        raise ValueError(f"dpgauss demo needs {' and '.join(missing)}: {install_hint('demo')}")
    stream = sys.stderr if progress is None else progress
    t0 = time.perf_counter()
    out = Path(out_dir)
    _fresh_dir(out)
    spec = demo_spec(out)
    with Ledger(spec.privacy.ledger) as led:  # type: ignore[arg-type]
        led.create_budget(_DATASET, 2.0, 1e-5)
    _step(stream, "release: bounding, kde mapping and counting in DuckDB; secure noise; auto", t0)
    rel = run_release(spec)
    _step(stream, "truth: the bounded counts without noise (not private; demo data)", t0)
    truth = bounded_aggregate(spec).counts

    cols = rel.columns
    released, denoised = cols["released"], cols["denoised"]
    png = out / "heatmap.png"
    heatmap: Path | None = png
    try:
        from .plotting import MapPanel, PlotUnavailableError, draw_graph_panels, stand_out

        den = rel.report["denoise"]
        lo, hi = cols["denoised_lower"], cols["denoised_upper"]
        draw_graph_panels(
            png,
            cols["lat"],
            cols["lon"],
            _edges(),
            [
                ("true (bounded, not private)", truth),
                (f"released (σ = {float(cols['sigma'][0]):.3g})", released),
                MapPanel(
                    f"denoised: auto → {den['method']}",
                    denoised,
                    marks=stand_out(lo, hi, float(np.mean(denoised))),
                ),
                MapPanel(
                    "± of the denoised 95 % interval",
                    (hi - lo) / 2.0,
                    cmap="viridis",
                    label="± pickups per junction",
                ),
            ],
            label="pickups per junction",
            title=f"{spec.name}; (ε, δ) = ({EPSILON:g}, {DELTA:g}), 5 trips per driver",
        )
    except PlotUnavailableError as exc:
        _step(stream, f"heat map skipped: {exc}", t0)
        heatmap = None
    _step(stream, f"done in {time.perf_counter() - t0:.1f} s", t0)
    summary = _summary(rel, truth, out, heatmap)
    return DemoResult(out, rel, truth, heatmap, summary)


def _edges() -> np.ndarray:
    from .datasets import load_manhattan_graph

    return np.asarray(load_manhattan_graph().edges)


def _summary(rel: ReleaseResult, truth: np.ndarray, out: Path, heatmap: Path | None) -> str:
    r = rel.report
    priv, den = r["privacy"], r["denoise"]
    rows = rel.diagnostics["rows"]  # confidential in a real release; the demo data are public
    d = truth.size
    sigma = float(priv["sigma"])
    sens = float(priv["sensitivity"])
    if EPSILON < 1.0:
        classical = classical_gaussian_sigma(EPSILON, DELTA, sens)
        classical_line = (
            f"classical: sigma = {classical:.4g} (Theorem 1), "
            f"{(classical / sigma) ** 2:.2f}x the variance of the analytic mechanism"
        )
    else:  # Theorem 1 holds for epsilon < 1 only: show its limit, flagged
        classical = classical_gaussian_sigma(math.nextafter(1.0, 0.0), DELTA, sens)
        classical_line = (
            f"classical: Theorem 1 needs epsilon < 1; its sigma as epsilon -> 1 is "
            f"{classical:.4g}, {(classical / sigma) ** 2:.2f}x the analytic variance"
        )
    true_raw = math.sqrt(float(np.mean((rel.columns["released"] - truth) ** 2)))
    true_den = math.sqrt(float(np.mean((rel.columns["denoised"] - truth) ** 2)))
    est = rmse_text(den["rmse_per_key"], den["rmse_per_key_upper95"])
    lo, hi = rel.columns["denoised_lower"], rel.columns["denoised_upper"]
    covered = float(np.mean((lo <= truth) & (truth <= hi)))
    iv = den["intervals"]
    files = "release.csv, release.csv.report.json" + (", heatmap.png" if heatmap else "")
    return "\n".join(
        [
            f"data     : {rows['kept']:,} pickups kept ({rows['in_domain']:,} in the window and "
            f"on the map, <= 5 per driver) over {d:,} Manhattan junctions (exact counts: "
            "confidential diagnostics in a real release; shown because the demo data are public)",
            f"privacy  : epsilon = {EPSILON:g}, delta = {DELTA:g}, L2 sensitivity "
            f"{priv['sensitivity']:g}; secure analytic Gaussian sigma = {sigma:.4g}",
            classical_line,
            f"error    : RMSE per junction {den['raw_rmse_per_key']:.3g} released -> "
            f"{est} denoised by {den['method']} (true "
            f"{true_raw:.3g} -> {true_den:.3g})",
            f"intervals: denoised 95 % intervals ({iv['method']}) median width "
            f"{iv['median_width']:.3g} vs {iv['raw_width']:.3g} released; they cover "
            f"{covered:.1%} of the junctions' true counts (the demo knows the truth)",
            f"output   : {out}/ ({files})",
        ]
    )
