"""What denoising a series period with the published periods before it gains (issue #29 item 2).

Run from the repository root::

    python benchmarks/bench_history.py                   # 20 draws, m = 0, 1, 3, 6
    python benchmarks/bench_history.py --draws 4          # a quick look

Setting: the bundled 260 NYC neighbourhoods (queen adjacency) as the domain of an hourly
series.  Each neighbourhood has a base intensity (sparse: 25 % of them hot, counts 5–40,
the rest 0–2) that drifts slowly from hour to hour (each period multiplies it by a factor in
[0.85, 1.15]); ``m + 1`` consecutive periods are released with ``N(0, σ²)`` noise, σ ∈
``--sigmas``.  The current period is denoised by ``auto`` (with ``nonnegative=True``, as the
release does for counts) alone (``m = 0``) and together with the ``m`` earlier periods on
time × the map (:func:`dpgauss.release.history.product_structure`), and the table reports,
for the current period only:

* ``rmse``: the root mean squared error per key, and ``gain`` = RMSE(m = 0) / RMSE(m);
* ``coverage``: the 95 % intervals' average coverage, and at the top-decile keys;
* ``width``: their median width over the raw interval's (2 · 1.96 σ).

Results are printed as a Markdown table and written to ``--json`` if given.
"""

from __future__ import annotations

import argparse
import json
import math

import numpy as np

from dpgauss.denoise import as_graph, auto
from dpgauss.denoise.structure import Structure
from dpgauss.release.domains.key_domain import KeyDomain, resolve_domain
from dpgauss.release.history import product_structure
from dpgauss.release.spec import ReleaseSpec


def neighbourhood_domain() -> KeyDomain:
    """The bundled neighbourhoods as the release resolves them (queen adjacency)."""
    spec = ReleaseSpec.from_dict(
        {
            "source": {"bundled": "trips"},
            "unit": {"column": "hack_license"},
            "domain": {
                "kind": "regions",
                "regions": "nyc-neighbourhoods",
                "lat": "pickup_latitude",
                "lon": "pickup_longitude",
            },
            "bounds": {"max_records_per_unit": 5},
            "privacy": {"epsilon": 1.0, "delta": 1e-6, "dataset": "bench"},
        }
    )
    return resolve_domain(spec)


def series(d: int, periods: int, rng: np.random.Generator) -> np.ndarray:
    """``(periods, d)`` true counts: sparse hot spots drifting slowly over time."""
    hot = rng.random(d) < 0.25
    base = np.where(hot, rng.uniform(5, 40, d), rng.uniform(0, 2, d))
    out = np.empty((periods, d))
    level = base
    for t in range(periods):
        out[t] = np.round(level)
        level = level * rng.uniform(0.85, 1.15, d)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--draws", type=int, default=20)
    ap.add_argument("--history", type=int, nargs="+", default=[0, 1, 3, 6])
    ap.add_argument("--sigmas", type=float, nargs="+", default=[4.0, 8.0, 18.8])
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--json")
    args = ap.parse_args()

    domain = neighbourhood_domain()
    d = domain.size
    mmax = max(args.history)
    rows = []
    for sigma in args.sigmas:
        acc: dict[int, dict[str, list[float]]] = {m: {} for m in args.history}
        for draw in range(args.draws):
            rng = np.random.default_rng([args.seed, draw, int(sigma * 100)])
            theta = series(d, mmax + 1, rng)
            y = theta + rng.normal(0.0, sigma, theta.shape)
            truth = theta[-1]
            top = truth >= np.quantile(truth, 0.9)
            for m in args.history:
                stacked = y[mmax - m :].ravel()
                structure = (
                    Structure(graph=as_graph(domain.edges, d))
                    if m == 0
                    else product_structure(domain, m + 1)
                )
                fit = auto(stacked, sigma, structure, nonnegative=True)
                lo, hi = fit.error_bars(rng=np.random.default_rng(draw)).interval(0.95)
                est, lo, hi = fit.estimate[m * d :], lo[m * d :], hi[m * d :]
                cover = (lo <= truth) & (truth <= hi)
                a = acc[m]
                a.setdefault("mse", []).append(float(np.mean((est - truth) ** 2)))
                a.setdefault("cov", []).append(float(np.mean(cover)))
                a.setdefault("cov_top", []).append(float(np.mean(cover[top])))
                a.setdefault("width", []).append(float(np.median(hi - lo) / (2 * 1.96 * sigma)))
        base = math.sqrt(np.mean(acc[args.history[0]]["mse"]))
        for m in args.history:
            a = acc[m]
            rmse = math.sqrt(np.mean(a["mse"]))
            rows.append(
                {
                    "sigma": sigma,
                    "history": m,
                    "rmse": rmse,
                    "gain": base / rmse,
                    "coverage": float(np.mean(a["cov"])),
                    "coverage_top_decile": float(np.mean(a["cov_top"])),
                    "width_over_raw": float(np.mean(a["width"])),
                }
            )
    print(f"| σ | m | rmse | gain | coverage | top decile | width/raw |  ({args.draws} draws)")
    print("|---|---|---|---|---|---|---|")
    for r in rows:
        print(
            f"| {r['sigma']:g} | {r['history']} | {r['rmse']:.3f} | {r['gain']:.2f} | "
            f"{r['coverage']:.3f} | {r['coverage_top_decile']:.3f} | {r['width_over_raw']:.2f} |"
        )
    if args.json:
        with open(args.json, "w", encoding="utf-8") as fh:
            json.dump(rows, fh, indent=2)


if __name__ == "__main__":
    main()
