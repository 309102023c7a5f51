"""Real public data shipped with dpgauss, for tests, examples and experiments.

* :func:`load_manhattan_graph`: the Manhattan road network of TaxiVis as a junction graph
  (4,091 junctions / 7,287 street segments), the public structure of the paper's taxi
  heat-map release (Balle & Wang, ICML 2018, Sec. 6).
* :func:`load_trips`: 10,000 real NYC yellow-cab trips of January 2013.
* :func:`nyc_neighbourhoods_path`: the 260 NYC neighbourhoods of data-polygamy as a GeoJSON
  FeatureCollection (the bundled ``regions = "nyc-neighbourhoods"`` of a release).

The files live in ``dpgauss/datasets/data`` with their licence notices (see the README
there).  Loading needs only numpy and scipy.
"""

from .manhattan import RoadGraph, load_manhattan_graph, snap_to_nodes
from .neighbourhoods import nyc_neighbourhoods_path
from .trips import Trips, load_trips

__all__ = [
    "RoadGraph",
    "Trips",
    "load_manhattan_graph",
    "load_trips",
    "nyc_neighbourhoods_path",
    "snap_to_nodes",
]
