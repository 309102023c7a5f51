"""Release taxi pickups per Manhattan junction with Gaussian noise, then denoise on the graph.

    python examples/manhattan_denoise.py manhattan.png [--epsilon 1] [--delta 1e-6] [--seed 0]

The flow of dpgauss on real data shipped with the package:

1. the public structure: the Manhattan road graph contracted to its 4,091 junctions
   (``dpgauss.datasets.load_manhattan_graph``);
2. the data: 10,000 real January-2013 yellow-cab trips (``load_trips``); each valid
   pickup is assigned to the nearest junction within ``--max-distance`` metres;
3. the release: the vector of pickup counts per junction plus ``N(0, σ²I)``, σ calibrated
   exactly for (ε, δ) (Balle & Wang 2018, Thm 8).  By default the unit of privacy is one
   *trip* (adding or removing a trip changes one count by 1: L2 sensitivity Δ = 1).
   Protecting a whole driver needs their trips bounded first; the paper assumes at most 5
   per hour and uses Δ = 5 (``--sensitivity 5``);
4. post-processing, free of privacy cost: spanning-tree Haar wavelet shrinkage on the
   graph, threshold chosen by SURE, which also estimates the error of the release.

The noise here comes from a seeded ``numpy`` generator (an experiment whose truth we know,
so the true error can be printed next to SURE); a real release would use
``dpgauss.noise``'s secure sampler.

The figure (three maps: the true counts, the noisy release, the denoised release; every
street segment coloured by the mean of its two junctions) needs matplotlib
(``pip install '.[plot]'``).  Without it the numbers are printed and the figure is
skipped with a message.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

import numpy as np

from dpgauss import GaussianMechanism
from dpgauss.datasets import RoadGraph, load_manhattan_graph, load_trips, snap_to_nodes
from dpgauss.denoise import as_graph
from dpgauss.denoise.tree_wavelets import graph_wavelet_denoise
from dpgauss.heatmap import PlotUnavailableError, draw_graph_panels


def pickups_per_junction(graph: RoadGraph, max_distance_m: float) -> np.ndarray:
    """Count the valid pickups whose nearest junction lies within ``max_distance_m``."""
    trips = load_trips()
    ok = trips.pickup_valid
    node, _ = snap_to_nodes(graph, trips.pickup_lat[ok], trips.pickup_lon[ok], max_distance_m)
    return np.bincount(node[node >= 0], minlength=graph.n).astype(np.float64)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("output", help="where to write the PNG figure")
    parser.add_argument("--epsilon", type=float, default=1.0, help="ε (default 1)")
    parser.add_argument("--delta", type=float, default=1e-6, help="δ (default 1e-6)")
    parser.add_argument(
        "--sensitivity", type=float, default=1.0, help="L2 sensitivity Δ (default 1: one trip)"
    )
    parser.add_argument("--seed", type=int, default=0, help="noise seed (default 0)")
    parser.add_argument(
        "--threshold", default="sure", help="'sure' (default), 'universal' or a number"
    )
    parser.add_argument(
        "--max-distance",
        type=float,
        default=150.0,
        help="metres from a pickup to its junction (default 150)",
    )
    args = parser.parse_args(argv)
    try:
        threshold: str | float = float(args.threshold)
    except ValueError:
        threshold = args.threshold

    graph = load_manhattan_graph()
    try:
        counts = pickups_per_junction(graph, args.max_distance)
        mechanism = GaussianMechanism(args.epsilon, args.delta, args.sensitivity)
        # A seeded experiment: floating-point noise, reproducible (not for publishing).
        release = mechanism.release(counts, rng=args.seed)
        released, sigma = release.values, release.sigma
        g = as_graph(graph.edges, graph.n)
        result = graph_wavelet_denoise(released, sigma, g, threshold=threshold)
    except (TypeError, ValueError) as exc:
        parser.error(str(exc))

    noisy_error = float(np.sum((released - counts) ** 2))
    true_error = float(np.sum((result.estimate - counts) ** 2))
    print(f"graph: {graph.n} junctions, {graph.m} street segments")
    print(f"pickups snapped to a junction: {int(counts.sum())}")
    print(
        f"(ε, δ) = ({args.epsilon:g}, {args.delta:g}), Δ = {args.sensitivity:g}"
        f"  ->  σ = {sigma:.4f}"
    )
    print(
        f"squared error of the noisy release: {noisy_error:12.1f}  (expected nσ² = "
        f"{graph.n * sigma**2:.1f})"
    )
    print(
        f"squared error after denoising:      {true_error:12.1f}  (SURE estimate "
        f"{result.risk:.1f}, λ = {result.params['lambda']:.3f}, "
        f"{result.params['n_nonzero']} of {graph.n} coefficients kept)"
    )

    vmax = float(np.percentile(counts[counts > 0], 95)) if np.any(counts > 0) else 1.0
    panels = [
        ("true pickups per junction", counts),
        (f"released, σ = {sigma:.2f} (ε = {args.epsilon:g})", released),
        ("tree-wavelet denoised (SURE)", result.estimate),
    ]
    try:
        draw_graph_panels(
            args.output,
            graph.lat,
            graph.lon,
            graph.edges,
            panels,
            vmax=vmax,
            label="pickups per junction",
        )
    except PlotUnavailableError as exc:
        print(f"{exc}; no figure was drawn", file=sys.stderr)
        return 0
    print(f"figure written to {args.output}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
