"""``dpgauss check`` (:mod:`dpgauss.release.check`): the data owner's confidential look at a
source, never charged, never written — here what it says of the map."""

from __future__ import annotations

import json
from pathlib import Path

from dpgauss.cli import main
from dpgauss.release.check import check_source
from dpgauss.release.spec import ReleaseSpec

from .test_report import _street_release


def test_check_gives_the_maps_components_as_the_report_does(tmp_path: Path, capsys) -> None:
    """40 disjoint streets: the check says 40 components and the un-noded warning, in its
    text and its JSON, before any release is made."""
    raw = _street_release(tmp_path, 40)
    res = check_source(ReleaseSpec.from_dict(raw))
    assert res.components is not None
    assert res.components["count"] == 40 and res.components["fragmented"]
    text = res.text()
    assert "components : 40 connected components; the largest holds 2% of the nodes" in text
    assert "WARNING: the graph falls apart into 40 components" in text
    assert res.as_dict()["components"]["count"] == 40
    spec = tmp_path / "spec.toml"
    lines = ["[source]", f'path = "{raw["source"]["path"]}"', "[unit]", 'column = "uid"']
    lines += ["[domain]", 'kind = "graph"', f'nodes = "{raw["domain"]["nodes"]}"']
    lines += [f'edges = "{raw["domain"]["edges"]}"', 'lat = "lat"', 'lon = "lon"']
    lines += ["[bounds]", "max_records_per_unit = 1"]
    lines += ["[privacy]", "epsilon = 1.0", "delta = 1e-6", 'dataset = "d"']
    spec.write_text("\n".join(lines) + "\n")
    assert main(["check", str(spec), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["components"]["count"] == 40 and out["ok"] is True
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "edges.csv",
        "nodes.csv",
        "s.csv",
        "spec.toml",
    ]


def test_check_of_a_domain_without_a_map_has_no_components(tmp_path: Path) -> None:
    src = tmp_path / "s.csv"
    src.write_text("uid,key\n1,2\n2,3\n")
    spec = {
        "source": {"path": str(src)},
        "unit": {"column": "uid"},
        "domain": {"kind": "values", "column": "key", "values": [2, 3]},
        "bounds": {"max_records_per_unit": 1},
        "privacy": {"epsilon": 1.0, "delta": 1e-6, "dataset": "d"},
    }
    res = check_source(ReleaseSpec.from_dict(spec))
    assert res.components is None and "components" not in res.text()
    assert res.rows.in_domain == 2
