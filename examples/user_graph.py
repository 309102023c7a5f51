"""Write a user's street graph as GraphML (as OSMnx does) and a release spec that uses it.

The bundled Manhattan graph stands in for "your city": its junctions get OSM-style ids and
are written to ``city.graphml`` with the node attributes ``y`` (latitude) and ``x``
(longitude), every street in both directions, as ``osmnx.save_graphml`` writes a
``MultiDiGraph``.  ``user_graph.toml`` releases the bundled trips' pickups per junction of
that file::

    python examples/user_graph.py            # writes city.graphml and user_graph.toml here
    dpgauss budget init city --epsilon 10 --delta 1e-5 --ledger budget.sqlite
    dpgauss release user_graph.toml --out pickups_per_junction.csv

The output's ``key`` column holds the GraphML node ids.  Needs networkx
(``pip install '.[graphs]'``).
"""

from __future__ import annotations

import sys
from pathlib import Path

import networkx as nx

from dpgauss.datasets import load_manhattan_graph

SPEC = """\
name = "pickups per junction of a user's graph"

[source]
bundled = "trips"

[unit]
column = "hack_license"

[domain]
kind = "graph"
graph = "{graph}"
lat = "pickup_latitude"
lon = "pickup_longitude"
mapping = "nearest"
cutoff = 150.0

[bounds]
max_records_per_unit = 5

[privacy]
epsilon = 1.0
delta = 1e-6
dataset = "city"
ledger = "budget.sqlite"

[denoise]
method = "auto"
"""


def main(where: str = ".") -> None:
    out = Path(where)
    g = load_manhattan_graph()
    city = nx.MultiDiGraph(crs="epsg:4326")  # the graph attribute OSMnx writes: its CRS
    osm_id = [4_200_000_000 + 17 * i for i in range(g.n)]
    for i in range(g.n):
        city.add_node(osm_id[i], y=repr(float(g.lat[i])), x=repr(float(g.lon[i])))
    for a, b in g.edges.tolist():
        city.add_edge(osm_id[a], osm_id[b])
        city.add_edge(osm_id[b], osm_id[a])
    nx.write_graphml(city, out / "city.graphml")
    (out / "user_graph.toml").write_text(SPEC.format(graph="city.graphml"))
    print(f"wrote {out / 'city.graphml'} ({g.n} nodes) and {out / 'user_graph.toml'}")


if __name__ == "__main__":
    main(*sys.argv[1:])
