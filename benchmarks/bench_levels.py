"""Coverage of the zoom-level intervals, per level and denoiser, on the bundled taxi trips.

Run from the repository root (small settings; it runs releases through the real code)::

    nice -n 10 python benchmarks/bench_levels.py --draws 20 --methods none soft_threshold
    nice -n 10 python benchmarks/bench_levels.py --draws 10 --methods trend_filter --eps 0.5 2

The truth is the bounded aggregate of ``examples/zoom_levels.toml`` (junction →
neighbourhood → total on the bundled Manhattan graph and NYC neighbourhoods: 4,091
junctions, 40 neighbourhoods holding junctions, one total), computed once
(:func:`~dpgauss.release.pipeline.bounded_aggregate`; the coarse truths are its exact
sums).  The release is planned once per ε (floating-point noise, ``secure = false``, no
ledger) and, for each of ``--draws`` seeds, :func:`~dpgauss.release.estimate.estimate`
runs what ``dpgauss release`` runs after the charge: noise at every level, the denoiser on
the finest level, GLS on the tree, the non-negative projection and the intervals.  The
table gives, per level: coverage (the mean over draws of the fraction of nodes whose true
value lies in its interval, at 95 %), the worst draw, and the median interval width over
the raw interval's width at that level (the level's own ``released`` interval).
Results are printed as Markdown and written to ``--out`` (default
``docs/results/bench_levels.json``).
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
import warnings
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np

from dpgauss.release.estimate import estimate
from dpgauss.release.pipeline import bounded_aggregate
from dpgauss.release.plan import plan_release
from dpgauss.release.spec import DenoiseSpec, load_spec

ROOT = Path(__file__).resolve().parents[1]


def _spec(eps: float, method: str, out: Path) -> Any:
    spec = load_spec(ROOT / "examples" / "zoom_levels.toml")
    privacy = replace(spec.privacy, epsilon=eps, secure=False, ledger=None, seed=0)
    output = replace(spec.output, path=str(out), overwrite=True, plot=False)
    return replace(spec, privacy=privacy, denoise=DenoiseSpec(method=method), output=output)


def run(eps: float, method: str, draws: int, agg: Any, tmp: Path) -> dict[str, Any]:
    spec = _spec(eps, method, tmp / "out.csv")
    plan = plan_release(spec)
    plan.outputs.release()
    lp = plan.levels
    assert lp is not None
    fine = np.asarray(agg.counts, dtype=np.float64)
    truths = [fine] + [np.bincount(lv.of_fine, weights=fine, minlength=lv.size) for lv in lp.levels]
    names = ["junction", *(lv.name for lv in lp.levels)]
    cover: list[list[float]] = [[] for _ in names]
    ratio: list[list[float]] = [[] for _ in names]
    t0 = time.perf_counter()
    for seed in range(draws):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            est = estimate(plan, agg, 1000 + seed)
        tables = [est.columns] + [est.levels[lv.name] for lv in lp.levels]
        for k, (tab, truth) in enumerate(zip(tables, truths, strict=True)):
            lo, hi = tab["denoised_lower"], tab["denoised_upper"]
            cover[k].append(float(np.mean((lo <= truth) & (truth <= hi))))
            raw = np.median(tab["released_upper"] - tab["released_lower"])
            ratio[k].append(float(np.median(hi - lo) / raw))
    seconds = (time.perf_counter() - t0) / draws
    rows = []
    for k, name in enumerate(names):
        rows.append(
            {
                "eps": eps,
                "method": method,
                "level": name,
                "nodes": int(truths[k].size),
                "sigma": float(lp.calibrations[k].probe.sigma),
                "coverage": float(np.mean(cover[k])),
                "worst": float(np.min(cover[k])),
                "width_over_raw": float(np.mean(ratio[k])),
            }
        )
    return {"rows": rows, "seconds_per_draw": seconds}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--draws", type=int, default=20)
    ap.add_argument("--eps", type=float, nargs="+", default=[1.0])
    ap.add_argument("--methods", nargs="+", default=["none", "soft_threshold"])
    ap.add_argument("--out", type=Path, default=ROOT / "docs" / "results" / "bench_levels.json")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        spec = _spec(1.0, "none", Path(tmp) / "out.csv")
        agg = bounded_aggregate(spec, salt=7)
        results = []
        print("| eps | method | level | nodes | sigma | coverage | worst | width/raw |")
        print("|---|---|---|---|---|---|---|---|")
        for eps in args.eps:
            for method in args.methods:
                res = run(eps, method, args.draws, agg, Path(tmp))
                results.append(res)
                for r in res["rows"]:
                    print(
                        f"| {r['eps']:g} | {r['method']} | {r['level']} | {r['nodes']} | "
                        f"{r['sigma']:.4g} | {r['coverage']:.3f} | {r['worst']:.3f} | "
                        f"{r['width_over_raw']:.3f} |"
                    )
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(
        json.dumps({"draws": args.draws, "level": 0.95, "results": results}, indent=2) + "\n"
    )
    print(f"written {args.out}")


if __name__ == "__main__":
    main()
