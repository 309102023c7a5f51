"""The public domain of a release, in one place: its keys, axes and public structure.

A domain is resolved from the spec's ``[domain]`` table before any record is read, from
public files only.  The modules, from the whole to its parts:

* :mod:`.key_domain` — :class:`~.key_domain.KeyDomain` (the keys in their fixed order, the
  output's key columns, the structure the denoisers may use) and
  :func:`~.key_domain.resolve_domain`;
* :mod:`.axes` — :class:`~.axes.Axis`, one factor of a domain (``values``, ``range``,
  ``graph``, ``regions``), and :func:`~.axes.product_edges`, the structure of a product;
* :mod:`.keys` — exact keys: :class:`~.keys.RangeBins` (bins in rationals) and the exact
  SQL that maps a value to its bin, written once for every engine's dialect;
* :mod:`.graph_files` — public graphs: bundled, GraphML, node and edge tables;
* :mod:`.regions` — public regions: GeoJSON polygons, adjacency, point-in-polygon;
* :mod:`.key_files` — a ``values`` domain's keys read from a file;
* :mod:`.mapping` — a record's coordinates to graph nodes (nearest node, kde).

Nothing is imported here, so that :mod:`dpgauss.release.spec` may use :mod:`.keys` and
:mod:`.graph_files` while :mod:`.key_domain` reads the spec's classes: no import cycle.
"""
