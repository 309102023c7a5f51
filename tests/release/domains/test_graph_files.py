"""User graphs: GraphML (as OSMnx writes it) and node/edge tables, read, refused and released.

A synthetic street grid at Helsinki's latitude (60° N), where a projection that ignores the
latitude would be off by a factor of two east–west, is the user's graph: written as GraphML
(a directed multigraph with OSM-style integer ids, both directions of every street, a
self-loop) and as node/edge tables with text ids.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

nx = pytest.importorskip("networkx")
pa = pytest.importorskip("pyarrow")
pq = pytest.importorskip("pyarrow.parquet")
pytest.importorskip("duckdb")

from dpgauss.release.domains.graph_files import read_graph_tables, read_graphml  # noqa: E402
from dpgauss.release.domains.key_domain import resolve_domain  # noqa: E402
from dpgauss.release.domains.mapping import EARTH_RADIUS_M  # noqa: E402
from dpgauss.release.engines.duckdb import DuckDBEngine  # noqa: E402
from dpgauss.release.pipeline import bounded_aggregate, run_release  # noqa: E402
from dpgauss.release.plan import sensitivity_of  # noqa: E402
from dpgauss.release.spec import ReleaseSpec  # noqa: E402

from ..test_pipeline import assert_cli_refuses_uncharged, cli, make_ledger  # noqa: E402
from .test_mapping import haversine  # noqa: E402

ENGINE = DuckDBEngine(threads=2)
LAT0, LON0 = 60.17, 24.94
ROWS, COLS = 6, 7  # a 6 × 7 street grid, 100 m between junctions
STEP_M = 100.0


def grid_nodes() -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(ids, lat, lon) of the junctions; ids like OSM's (large integers)."""
    r, c = np.divmod(np.arange(ROWS * COLS), COLS)
    lat = LAT0 + np.degrees(r * STEP_M / EARTH_RADIUS_M)
    lon = LON0 + np.degrees(c * STEP_M / (EARTH_RADIUS_M * np.cos(np.radians(LAT0))))
    ids = 25_000_000_000 + 7 * np.arange(ROWS * COLS)
    return ids, lat, lon


def grid_edges() -> list[list[int]]:
    out = []
    for i in range(ROWS * COLS):
        r, c = divmod(i, COLS)
        if c + 1 < COLS:
            out.append([i, i + 1])
        if r + 1 < ROWS:
            out.append([i, i + COLS])
    return out


def write_graphml(path: Path, *, isolated: bool = False) -> Path:
    """As OSMnx does: a MultiDiGraph, every attribute a string, both directions of a street."""
    ids, lat, lon = grid_nodes()
    g = nx.MultiDiGraph()
    for i, la, lo in zip(ids, lat, lon, strict=True):
        g.add_node(int(i), y=repr(float(la)), x=repr(float(lo)), street_count="3")
    for a, b in grid_edges():
        g.add_edge(int(ids[a]), int(ids[b]), length="100.0")
        g.add_edge(int(ids[b]), int(ids[a]), length="100.0")
        g.add_edge(int(ids[a]), int(ids[b]), length="101.0")  # a parallel street
    g.add_edge(int(ids[0]), int(ids[0]))  # a self-loop
    if isolated:
        g.add_node(1, y=repr(LAT0 + 0.05), x=repr(LON0 + 0.05))  # far away, no edges
    nx.write_graphml(g, path)
    return path


def write_tables(tmp_path: Path, fmt: str = "csv") -> tuple[Path, Path]:
    ids, lat, lon = grid_nodes()
    text = [f"j{i:03d}" for i in range(ids.size)]
    nodes = pa.table({"node": text, "latitude": lat, "longitude": lon})
    edges = pa.table(
        {"from": [text[a] for a, _ in grid_edges()], "to": [text[b] for _, b in grid_edges()]}
    )
    if fmt == "parquet":
        n, e = tmp_path / "nodes.parquet", tmp_path / "edges.parquet"
        pq.write_table(nodes, n)
        pq.write_table(edges, e)
    else:
        import pyarrow.csv as pcsv

        n, e = tmp_path / "nodes.csv", tmp_path / "edges.csv"
        pcsv.write_csv(nodes, n)
        pcsv.write_csv(edges, e)
    return n, e


# ---------------------------------------------------------------------------- reading


def test_graphml_as_osmnx_writes_it(tmp_path: Path) -> None:
    g = read_graphml(write_graphml(tmp_path / "city.graphml"))
    ids, lat, lon = grid_nodes()
    assert g.ids.dtype == np.int64 and g.ids.tolist() == ids.tolist()
    assert np.array_equal(g.lat, lat) and np.array_equal(g.lon, lon)
    assert g.edges.tolist() == sorted(grid_edges())  # one undirected edge, no self-loop
    assert g.name.startswith("GraphML file, sha256 ") and "city" not in g.name


@pytest.mark.parametrize("fmt", ["csv", "parquet"])
def test_node_and_edge_tables(tmp_path: Path, fmt: str) -> None:
    n, e = write_tables(tmp_path, fmt)
    cols = {"id": "node", "lat": "latitude", "lon": "longitude"}
    g = read_graph_tables(n, e, node_columns=cols, edge_columns={"u": "from", "v": "to"})
    assert g.ids.dtype == object and g.ids[:2].tolist() == ["j000", "j001"]
    assert g.edges.tolist() == sorted(grid_edges())
    g = read_graph_tables(n, None, node_columns=cols)  # no edges: keys without structure
    assert g.edges.shape == (0, 2) and g.n == ROWS * COLS


def test_ids_are_integers_only_when_every_id_is_a_canonical_integer(tmp_path: Path) -> None:
    def ids(texts: list[str]) -> list:
        p = tmp_path / "n.csv"
        p.write_text("id,lat,lon\n" + "".join(f"{t},1,2\n" for t in texts))
        return read_graph_tables(p).ids.tolist()

    assert ids(["1", "-2", "30"]) == [1, -2, 30]
    assert ids(["1", "007"]) == ["1", "007"]  # a leading zero is text: "007" is not 7
    assert ids(["1", "4.0"]) == ["1", "4.0"]
    assert ids(["1", str(2**63)]) == ["1", str(2**63)]  # beyond int64: text


BAD_GRAPHML = {
    "no coordinates": (
        '<node id="a"><data key="y">1</data></node><node id="b"/>',
        "node 'a' has no attribute 'x'",
    ),
    "a duplicate node": ('<node id="a"/><node id="a"/>', "the node id 'a' appears twice"),
    "latitude out of range": (
        '<node id="a"><data key="y">91</data><data key="x">0</data></node>',
        "node 'a' has the lat '91'",
    ),
    "not a number": (
        '<node id="a"><data key="y">north</data><data key="x">0</data></node>',
        "not a number",
    ),
    "empty": ("", "the graph has no nodes"),
}


@pytest.mark.parametrize("case", sorted(BAD_GRAPHML))
def test_bad_graphml_is_refused_naming_the_file(tmp_path: Path, case: str) -> None:
    body, message = BAD_GRAPHML[case]
    p = tmp_path / "bad.graphml"
    p.write_text(
        '<?xml version="1.0"?><graphml xmlns="http://graphml.graphdrawing.org/xmlns">'
        '<key id="y" for="node" attr.name="y" attr.type="string"/>'
        '<key id="x" for="node" attr.name="x" attr.type="string"/>'
        f'<graph edgedefault="undirected">{body}</graph></graphml>'
    )
    message = message.replace("lat", "y")
    with pytest.raises(ValueError, match=str(p).replace(".", r"\.")) as info:
        read_graphml(p)
    assert message in str(info.value) and "\n" not in str(info.value)


NS = ' xmlns="http://graphml.graphdrawing.org/xmlns"'
KEYS = (
    '<key id="y" for="node" attr.name="y" attr.type="string"/>'
    '<key id="x" for="node" attr.name="x" attr.type="string"/>'
)
NODE_A = '<node id="a"><data key="y">60</data><data key="x">24</data></node>'
NODE_B = '<node id="b"><data key="y">60.001</data><data key="x">24</data></node>'
INNER = f'<graph id="inner" edgedefault="undirected">{NODE_B.replace("b", "c")}</graph>'
SEVERAL_GRAPHS = {
    "two top-level graphs": (
        f'<graph edgedefault="undirected">{NODE_A}</graph>'
        f'<graph edgedefault="undirected">{NODE_B}</graph>',
        "has more than one <graph> element",
    ),
    "a graph nested in a node": (
        f'<graph edgedefault="undirected"><node id="a"><data key="y">60</data>'
        f'<data key="x">24</data>{INNER}</node>{NODE_B}</graph>',
        "has a <graph> nested in a <node>",
    ),
    "a graph nested in an edge": (
        f'<graph edgedefault="undirected">{NODE_A}{NODE_B}'
        f'<edge source="a" target="b">{INNER}</edge></graph>',
        "has a <graph> nested in an <edge>",
    ),
}


@pytest.mark.parametrize("namespace", [NS, ""], ids=["namespace", "no namespace"])
@pytest.mark.parametrize("case", sorted(SEVERAL_GRAPHS))
def test_several_or_nested_graphs_are_refused(tmp_path: Path, case: str, namespace: str) -> None:
    """Finding 8 (issue #25): networkx reads only the first graph of a file (and a nested one
    is read or dropped silently); a file with several graphs or a nested graph is refused with
    one line naming the file, of its structure only."""
    body, message = SEVERAL_GRAPHS[case]
    p = tmp_path / "several.graphml"
    p.write_text(f'<?xml version="1.0"?><graphml{namespace}>{KEYS}{body}</graphml>')
    with pytest.raises(ValueError, match=str(p).replace(".", r"\.")) as info:
        read_graphml(p)
    text = str(info.value)
    assert message in text and "\n" not in text
    assert "60.001" not in text and "inner" not in text  # no content dumped


def test_a_prefixed_namespace_and_comments_are_seen_through(tmp_path: Path) -> None:
    """A prefix for the GraphML namespace still names a <graph>; a commented-out graph, or a
    'graph' element of another namespace inside <data>, is not one."""
    p = tmp_path / "g.graphml"
    ns = "http://graphml.graphdrawing.org/xmlns"
    p.write_text(
        f'<g:graphml xmlns:g="{ns}" xmlns:y="urn:other">'
        '<g:key id="y" for="node" attr.name="y" attr.type="string"/>'
        '<g:key id="x" for="node" attr.name="x" attr.type="string"/>'
        '<g:graph edgedefault="undirected"><g:node id="a"><g:data key="y">60</g:data>'
        '<g:data key="x">24</g:data></g:node></g:graph>'
        '<g:graph edgedefault="undirected"/></g:graphml>'
    )
    with pytest.raises(ValueError, match="has more than one <graph> element"):
        read_graphml(p)
    p.write_text(
        f'<graphml xmlns="{ns}" xmlns:y="urn:other">{KEYS}<!-- <graph/> -->'
        '<key id="d0" for="node" attr.name="shape" attr.type="string"/>'
        '<graph edgedefault="undirected"><!-- <graph><node id="z"/></graph> -->'
        '<node id="a"><data key="y">60</data><data key="x">24</data>'
        '<data key="d0">box<y:graph/></data></node>'
        f'{NODE_B}<edge source="a" target="b"/></graph><!-- <graph/> --></graphml>'
    )
    g = read_graphml(p)
    assert g.ids.tolist() == ["a", "b"] and g.edges.tolist() == [[0, 1]]


def test_a_file_without_a_graph_is_refused_in_one_line(tmp_path: Path) -> None:
    for namespace in (NS, ""):
        p = tmp_path / "none.graphml"
        p.write_text(f'<?xml version="1.0"?><graphml{namespace}>{KEYS}<!-- <graph/> --></graphml>')
        with pytest.raises(ValueError, match=r"none\.graphml: has no GraphML <graph> element") as i:
            read_graphml(p)
        assert "\n" not in str(i.value)


def test_a_single_graph_reads_unchanged_with_and_without_namespace(tmp_path: Path) -> None:
    p = tmp_path / "one.graphml"
    for namespace in (NS, ""):
        p.write_text(
            f'<graphml{namespace}>{KEYS}<graph edgedefault="undirected">{NODE_A}{NODE_B}'
            '<edge source="b" target="a"/></graph></graphml>'
        )
        g = read_graphml(p)
        assert g.ids.tolist() == ["a", "b"] and g.edges.tolist() == [[0, 1]]
        assert g.lat.tolist() == [60.0, 60.001] and g.lon.tolist() == [24.0, 24.0]


def test_files_that_are_not_graphs(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="no such file"):
        read_graphml(tmp_path / "missing.graphml")
    p = tmp_path / "x.graphml"
    p.write_text("{not xml")
    with pytest.raises(ValueError, match="is not XML"):
        read_graphml(p)
    p.write_text("<html><body/></html>")
    with pytest.raises(ValueError, match=r"x\.graphml: has no GraphML <graph> element"):
        read_graphml(p)


def test_bad_tables_are_refused(tmp_path: Path) -> None:
    n = tmp_path / "n.csv"
    e = tmp_path / "e.csv"
    n.write_text("id,lat,lon\na,1,2\nb,1,2\n")
    e.write_text("u,v\na,c\n")
    with pytest.raises(ValueError, match=r"e\.csv: edge 1 \('a', 'c'\) names the unknown node 'c'"):
        read_graph_tables(n, e)
    n.write_text("id,lat,lon\na,1,2\na,1,2\n")
    with pytest.raises(ValueError, match="the node id 'a' appears twice"):
        read_graph_tables(n)
    n.write_text("id,lat\na,1\n")
    with pytest.raises(
        ValueError, match=r"has no column 'lon' \(node_columns lon; columns: id, lat"
    ):
        read_graph_tables(n)
    n.write_text("id,lat,lon\na,1,\n")
    with pytest.raises(ValueError, match="node 'a' has no lon"):
        read_graph_tables(n)
    n.write_text("id,lat,lon\n")
    with pytest.raises(ValueError, match="the graph has no nodes"):
        read_graph_tables(n)
    with pytest.raises(ValueError, match="no such nodes file"):
        read_graph_tables(tmp_path / "none.csv")


# ----------------------------------------------------------------------------- releases


def records(tmp_path: Path, units: int = 300, seed: int = 0) -> tuple[Path, np.ndarray]:
    """Pickups within 30 m of a junction (the truth: their junction per record)."""
    rng = np.random.default_rng(seed)
    _, lat, lon = grid_nodes()
    per = rng.integers(1, 4, units)
    uid = np.repeat(np.arange(units), per)
    node = rng.integers(0, lat.size, uid.size)
    dn, de = rng.uniform(-20, 20, (2, uid.size))
    la = lat[node] + np.degrees(dn / EARTH_RADIUS_M)
    lo = lon[node] + np.degrees(de / (EARTH_RADIUS_M * np.cos(np.radians(LAT0))))
    src = tmp_path / "pickups.parquet"
    pq.write_table(pa.table({"uid": uid, "lat": la, "lon": lo}), src)
    return src, np.bincount(node, minlength=lat.size).astype(float)


def graph_spec(src: Path, graph: Path, **domain: object) -> ReleaseSpec:
    return ReleaseSpec.from_dict(
        {
            "source": {"path": str(src)},
            "unit": {"column": "uid"},
            "domain": {"kind": "graph", "graph": str(graph), "lat": "lat", "lon": "lon", **domain},
            "bounds": {"max_records_per_unit": 3},
            "privacy": {"epsilon": 1.0, "delta": 1e-6, "dataset": "d"},
            "denoise": {"method": "auto"},
        }
    )


@pytest.mark.slow
def test_a_graphml_release_keys_are_the_users_node_ids(tmp_path: Path, zero_noise) -> None:
    src, truth = records(tmp_path)
    spec = graph_spec(src, write_graphml(tmp_path / "city.graphml"))
    out = tmp_path / "release.csv"
    with zero_noise():
        res = run_release(spec, out=out, ledger=make_ledger(tmp_path), engine=ENGINE)
    assert res.columns["key"].tolist() == grid_nodes()[0].tolist()
    assert np.array_equal(res.columns["released"], truth)
    lines = out.read_text().splitlines()
    assert lines[0].split(",")[:1] == ["key"] and lines[1].startswith("25000000000,")
    report = json.loads(Path(res.report_path).read_text())
    assert report["domain"]["structure"].startswith("graph of 42 nodes and 71 edges (GraphML")
    assert str(tmp_path) not in Path(res.report_path).read_text()  # no local path published
    assert report["spec"]["domain"]["graph"] == "(local path: not published)"


@pytest.mark.slow
def test_a_disconnected_table_graph_with_text_ids(tmp_path: Path, zero_noise) -> None:
    src, truth = records(tmp_path)
    n, e = write_tables(tmp_path, "csv")
    # cut the grid in two (no edge between columns 2 and 3) and add an isolated node
    cut = [(a, b) for a, b in grid_edges() if not (a % COLS == 2 and b % COLS == 3)]
    e.write_text("from,to\n" + "".join(f"j{a:03d},j{b:03d}\n" for a, b in cut))
    n.write_text(n.read_text() + f'"far",{LAT0 + 1},{LON0 + 1}\n')
    spec = ReleaseSpec.from_dict(
        {
            **graph_spec(src, n).to_dict(),
            "domain": {
                "kind": "graph",
                "nodes": str(n),
                "edges": str(e),
                "node_columns": {"id": "node", "lat": "latitude", "lon": "longitude"},
                "edge_columns": {"u": "from", "v": "to"},
                "lat": "lat",
                "lon": "lon",
            },
            "output": {"path": str(tmp_path / "o.parquet")},
        }
    )
    dom = resolve_domain(spec)
    assert dom.size == ROWS * COLS + 1 and dom.labels[-1] == "far"
    assert len(dom.edges) == len(grid_edges()) - ROWS
    with zero_noise():
        res = run_release(spec, ledger=make_ledger(tmp_path), engine=ENGINE)
    assert np.array_equal(res.columns["released"], [*truth, 0.0])  # the isolated key: 0
    table = pq.read_table(res.output_path)
    assert table.column("key").to_pylist()[:2] == ["j000", "j001"]
    assert np.all(np.isfinite(res.columns["denoised"]))


def test_the_cli_refuses_a_bad_graph_before_the_budget(tmp_path: Path) -> None:
    src, _ = records(tmp_path)
    bad = tmp_path / "bad.graphml"
    bad.write_text("<graphml><graph><node id='a'/></graph></graphml>")
    domain = {"kind": "graph", "graph": str(bad), "lat": "lat", "lon": "lon"}
    message = "bad.graphml: node 'a' has no attribute 'y'"
    assert_cli_refuses_uncharged(tmp_path, src, domain, message, bound=3)


def test_the_cli_refuses_a_graphml_file_of_two_graphs_before_the_budget(tmp_path: Path) -> None:
    src, _ = records(tmp_path)
    two = tmp_path / "two.graphml"
    body = SEVERAL_GRAPHS["two top-level graphs"][0]
    two.write_text(f"<graphml{NS}>{KEYS}{body}</graphml>")
    domain = {"kind": "graph", "graph": str(two), "lat": "lat", "lon": "lon"}
    message = "two.graphml: has more than one <graph> element"
    assert_cli_refuses_uncharged(tmp_path, src, domain, message, bound=3)


@pytest.mark.slow
@pytest.mark.parametrize("mapping", ["nearest", "kde"])
def test_neighbouring_datasets_on_a_user_graph(tmp_path: Path, mapping: str) -> None:
    """One unit added with many records moves the aggregate by at most Δ, and only by its own
    kept records (additivity), for several salts."""
    src, _ = records(tmp_path, units=120, seed=3)
    base = pq.read_table(src)
    rng = np.random.default_rng(9)
    _, lat, lon = grid_nodes()
    m = 40
    pick = rng.integers(0, lat.size, m)
    eve = pa.table(
        {
            "uid": np.full(m, 10_000),
            "lat": lat[pick] + rng.normal(0, 1e-4, m),
            "lon": lon[pick] + rng.normal(0, 1e-4, m),
        }
    )
    with_eve = tmp_path / "with.parquet"
    only_eve = tmp_path / "eve.parquet"
    pq.write_table(pa.concat_tables([base, eve]), with_eve)
    pq.write_table(eve, only_eve)
    graph = write_graphml(tmp_path / "city.graphml")
    extra = {"mapping": "kde", "bandwidth": 40.0} if mapping == "kde" else {}
    bounds = {"max_records_per_unit": 5, "max_keys_per_unit": 3}
    for salt in (1, 2**63 + 5, 77):
        aggs = []
        for s in (src, with_eve, only_eve):
            spec = ReleaseSpec.from_dict(
                {**graph_spec(s, graph, **extra).to_dict(), "bounds": bounds}
            )
            aggs.append(bounded_aggregate(spec, salt=salt, engine=ENGINE).counts)
        d, d_eve, u = aggs
        sens = sensitivity_of(spec)
        assert np.linalg.norm(u) <= sens.l2 * (1 + 1e-12)
        assert np.allclose(d_eve - d, u, atol=1e-9)
        assert 0 < u.sum() <= 5 + 1e-9  # at most b records, on at most k keys
        assert np.count_nonzero(u) <= (3 if mapping == "nearest" else u.size)


def test_distances_are_right_at_sixty_degrees_north(tmp_path: Path) -> None:
    """A record 80 m east of a junction is 80 m away (an unscaled longitude would say 160 m):
    inside a 90 m cutoff, while one 80 m east *and* 50 m north (94 m) is outside."""
    _, lat, lon = grid_nodes()
    east = np.degrees(80.0 / (EARTH_RADIUS_M * np.cos(np.radians(lat[0]))))
    north = np.degrees(50.0 / EARTH_RADIUS_M)
    pts_lat = np.array([lat[0], lat[0] + north])
    pts_lon = np.array([lon[0] - east, lon[0] - east])  # west of the grid's corner
    assert haversine(pts_lat[0], pts_lon[0], lat[0], lon[0]) == pytest.approx(80.0, rel=1e-3)
    src = tmp_path / "p.parquet"
    pq.write_table(pa.table({"uid": [1, 2], "lat": pts_lat, "lon": pts_lon}), src)
    spec = graph_spec(src, write_graphml(tmp_path / "g.graphml"), cutoff=90.0)
    agg = bounded_aggregate(spec, salt=3, engine=ENGINE)
    assert agg.counts[0] == 1.0 and agg.counts.sum() == 1.0
    assert agg.rows.outside_domain == 1


@pytest.mark.slow
def test_the_documented_example_runs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """docs/release.md: examples/user_graph.py, then `dpgauss release user_graph.toml`."""
    import runpy

    root = Path(__file__).resolve().parents[3]
    monkeypatch.chdir(tmp_path)
    runpy.run_path(str(root / "examples" / "user_graph.py"), run_name="example").get("main")()
    make_ledger(tmp_path, dataset="city")
    code, text = cli(["release", "user_graph.toml", "--out", "pickups.csv"])
    assert code == 0, text
    lines = (tmp_path / "pickups.csv").read_text().splitlines()
    assert len(lines) == 4092 and lines[1].startswith("4200000000,")
