"""Domains at scale: nearest-node mapping, ``auto`` on large product graphs, and a whole
hour × junction release.

Run from the repository root (needs the ``data`` extra)::

    python benchmarks/bench_domains.py                       # 10^6 points, 10^5 nodes
    python benchmarks/bench_domains.py --points 10000000     # the issue's 10^7 points
    python benchmarks/bench_domains.py --skip-release

1. **Nearest node.**  ``GraphMapper.nearest`` (points on the sphere, a 3-D k-d tree, the
   validity checks) on ``--points`` random points around a synthetic city of ``--nodes``
   junctions at 60° N, against the baseline a user would write by hand in the same run:
   ``cKDTree.query`` on coordinates already projected to a plane (no checks, no sphere;
   both on every core, ``workers=-1``).
   Reports points per second and the ratio (the target is ≥ 2 M points/s).
2. **Point in polygon.**  ``RegionMapper.locate`` on ``--points`` random points over the 260
   bundled NYC neighbourhoods, against an STR-tree query of point geometries
   (``shapely.STRtree.query(points, predicate="intersects")``, the textbook Shapely way) in the
   same run; the target is ≥ 1 M points/s.
3. **``auto`` on product graphs.**  Order-1 graph trend filtering's SURE path against order 0
   on hours × the Manhattan graph (1, 2 and 4 hours): the sizes behind
   :data:`dpgauss.denoise.auto.TF1_MAX_SIZE`.
4. **Whole releases**, with the pipeline's own timings (plan, aggregate, noise + denoise,
   write): the bundled trips per hour × junction (24 × 4,091 keys) and ``--graph-nodes``
   random pickups per node of a ``--graph-nodes``-node user graph written as GraphML (a
   jittered lattice at 60° N), both ``auto`` with secure noise.  The target is under 60 s.

Absolute numbers depend on the machine and its load; compare the ratios of one run.
"""

from __future__ import annotations

import argparse
import math
import os
import tempfile
import time
from pathlib import Path

import numpy as np


def best(fn, repeats: int) -> float:
    times = []
    for _ in range(repeats):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return min(times)


def nearest(points: int, nodes: int, repeats: int) -> None:
    from scipy.spatial import cKDTree

    from dpgauss.release.domains.mapping import EARTH_RADIUS_M, GraphMapper

    rng = np.random.default_rng(1)
    side = math.sqrt(nodes) * 80.0 / EARTH_RADIUS_M  # 80 m apart on average
    lat0, lon0 = 60.17, 24.94
    nlat = lat0 + np.degrees(rng.uniform(0, side, nodes))
    nlon = lon0 + np.degrees(rng.uniform(0, side, nodes) / math.cos(math.radians(lat0)))
    plat = lat0 + np.degrees(rng.uniform(0, side, points))
    plon = lon0 + np.degrees(rng.uniform(0, side, points) / math.cos(math.radians(lat0)))
    m = GraphMapper(nlat, nlon, cutoff=150.0)
    scale = EARTH_RADIUS_M * math.cos(math.radians(lat0))

    def plane(la: np.ndarray, lo: np.ndarray) -> np.ndarray:
        return np.stack([scale * np.radians(lo), EARTH_RADIUS_M * np.radians(la)], axis=1)

    tree = cKDTree(plane(nlat, nlon))
    t_ours = best(lambda: m.nearest(plat, plon), repeats)
    t_base = best(
        lambda: tree.query(plane(plat, plon), k=1, distance_upper_bound=150.0, workers=-1),
        repeats,
    )
    dist, idx = tree.query(plane(plat, plon), k=1, distance_upper_bound=150.0)
    agree = np.mean(m.nearest(plat, plon) == np.where(np.isfinite(dist), idx, -1))
    print(f"nearest node: {points:,} points, {nodes:,} nodes (60° N)")
    print(f"  dpgauss GraphMapper.nearest : {points / t_ours / 1e6:7.2f} M points/s")
    print(f"  plane cKDTree (baseline)    : {points / t_base / 1e6:7.2f} M points/s")
    print(f"  ratio dpgauss / baseline    : {t_base / t_ours:7.2f}   (same node: {agree:.4%})")


def regions(points: int, repeats: int) -> None:
    import shapely

    from dpgauss.release.domains.regions import RegionMapper, load_public_regions

    class Bundled:
        regions = "nyc-neighbourhoods"
        id_property = "id"

    r = load_public_regions(Bundled)
    m = RegionMapper(r)
    rng = np.random.default_rng(2)
    lat = rng.uniform(40.49, 40.92, points)
    lon = rng.uniform(-74.26, -73.69, points)
    tree = shapely.STRtree(r.geoms)

    def baseline() -> np.ndarray:
        p, g = tree.query(shapely.points(lon, lat), predicate="intersects")
        out = np.full(points, r.n)
        np.minimum.at(out, p, g)
        return out

    t_ours = best(lambda: m.locate(lat, lon), repeats)
    t_base = best(baseline, repeats)
    same = np.array_equal(np.where(m.locate(lat, lon) < 0, r.n, m.locate(lat, lon)), baseline())
    print(f"point in polygon: {points:,} points, {r.n} NYC neighbourhoods")
    print(f"  dpgauss RegionMapper.locate : {points / t_ours / 1e6:7.2f} M points/s")
    print(f"  STRtree query (baseline)    : {points / t_base / 1e6:7.2f} M points/s")
    print(f"  ratio dpgauss / baseline    : {t_base / t_ours:7.2f}   (same regions: {same})")


def auto_sizes() -> None:
    from dpgauss.datasets import load_manhattan_graph
    from dpgauss.denoise import as_graph
    from dpgauss.denoise.trend_filter import trend_filter
    from dpgauss.release.domains.axes import product_edges

    g = load_manhattan_graph()
    print("graph trend filtering, SURE path, hours × Manhattan (4,091 junctions)")
    for hours in (1, 2, 4):
        chain = np.stack([np.arange(hours - 1), np.arange(1, hours)], 1) if hours > 1 else None
        n = hours * g.n
        graph = as_graph(product_edges([hours, g.n], [chain, np.asarray(g.edges)]), n)
        y = np.random.default_rng(0).normal(0, 21.0, n)
        t0 = best(lambda y=y, g=graph: trend_filter(y, 21.0, g, order=0, lam="sure"), 1)
        t1 = best(lambda y=y, g=graph: trend_filter(y, 21.0, g, order=1, lam="sure"), 1)
        print(f"  d = {n:7,}: order 0 {t0:7.2f} s, order 1 {t1:7.2f} s ({t1 / t0:5.1f} x)")


SPEC = """
[source]
bundled = "trips"
[unit]
column = "hack_license"
[domain]
kind = "product"
[[domain.parts]]
kind = "range"
column = "pickup_datetime"
start = "2013-01-13 00:00"
stop = "2013-01-14 00:00"
step = "1h"
name = "hour"
[[domain.parts]]
kind = "graph"
graph = "manhattan"
lat = "pickup_latitude"
lon = "pickup_longitude"
[bounds]
max_records_per_unit = 5
[privacy]
epsilon = 1.0
delta = 1e-6
dataset = "bench"
[denoise]
method = "auto"
[output]
plot = false
"""


GRAPH_SPEC = """
[source]
path = "{src}"
[unit]
column = "uid"
[domain]
kind = "graph"
graph = "{graph}"
lat = "lat"
lon = "lon"
[bounds]
max_records_per_unit = 5
[privacy]
epsilon = 1.0
delta = 1e-6
dataset = "bench"
[denoise]
method = "auto"
[output]
plot = false
"""


def _run(text: str, tmp: str, what: str) -> None:
    from dpgauss.release.ledger import Ledger
    from dpgauss.release.pipeline import run_release
    from dpgauss.release.spec import load_spec

    spec_path = Path(tmp) / "s.toml"
    spec_path.write_text(text)
    spec = load_spec(spec_path)
    ledger = Path(tmp) / "b.sqlite"
    if not ledger.exists():
        with Ledger(ledger) as led:
            led.create_budget("bench", 10.0, 1e-5)
    t = time.perf_counter()
    res = run_release(spec, out=Path(tmp) / "out.csv", ledger=ledger, progress=None)
    total = time.perf_counter() - t
    for f in Path(tmp).glob("out.csv*"):
        f.unlink()
    timing = res.diagnostics["timing"]
    parts = ", ".join(f"{k} {v:.2f} s" for k, v in timing.items() if k != "total_s")
    print(f"release: {what}, auto, secure noise")
    print(f"  total {total:.1f} s ({parts}); chose {res.report['denoise']['method']}")


def release(graph_nodes: int) -> None:
    import networkx as nx
    import pyarrow as pa
    import pyarrow.parquet as pq

    from dpgauss.release.domains.mapping import EARTH_RADIUS_M

    with tempfile.TemporaryDirectory() as tmp:
        _run(SPEC, tmp, "bundled trips, 24 hours × 4,091 junctions")
        side = int(math.sqrt(graph_nodes))
        rng = np.random.default_rng(4)
        step = 80.0 / EARTH_RADIUS_M
        r, c = np.divmod(np.arange(side * side), side)
        lat = 60.17 + np.degrees(r * step + rng.normal(0, step / 10, r.size))
        lon = 24.94 + np.degrees((c * step + rng.normal(0, step / 10, r.size)) / math.cos(1.05))
        g = nx.Graph()
        for i in range(r.size):
            g.add_node(i, y=repr(float(lat[i])), x=repr(float(lon[i])))
        right = np.flatnonzero(c + 1 < side)
        up = np.flatnonzero(r + 1 < side)
        g.add_edges_from(zip(right.tolist(), (right + 1).tolist(), strict=True))
        g.add_edges_from(zip(up.tolist(), (up + side).tolist(), strict=True))
        graph = Path(tmp) / "city.graphml"
        nx.write_graphml(g, graph)
        n = graph_nodes
        pick = rng.integers(0, r.size, n)
        pq.write_table(
            pa.table(
                {
                    "uid": rng.integers(0, n // 3, n),
                    "lat": lat[pick] + rng.normal(0, 1e-4, n),
                    "lon": lon[pick] + rng.normal(0, 1e-4, n),
                }
            ),
            Path(tmp) / "p.parquet",
        )
        spec = GRAPH_SPEC.format(src=Path(tmp) / "p.parquet", graph=graph)
        _run(spec, tmp, f"{n:,} pickups on a {r.size:,}-node GraphML graph")


def main() -> None:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--points", type=int, default=1_000_000)
    ap.add_argument("--nodes", type=int, default=100_000)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--graph-nodes", type=int, default=100_000)
    ap.add_argument("--skip-release", action="store_true")
    ap.add_argument("--skip-auto", action="store_true")
    args = ap.parse_args()
    print(f"cpus: {os.cpu_count()}")
    nearest(args.points, args.nodes, args.repeats)
    regions(args.points, args.repeats)
    if not args.skip_auto:
        auto_sizes()
    if not args.skip_release:
        release(args.graph_nodes)


if __name__ == "__main__":
    main()
