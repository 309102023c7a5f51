"""``[[levels]]`` and ``[privacy] level_weights`` in the spec (issue #29 item 1)."""

from __future__ import annotations

from typing import Any

import pytest

from dpgauss.release.spec import LevelSpec, ReleaseSpec, load_spec


def _base(**privacy: Any) -> dict[str, Any]:
    return {
        "source": {"bundled": "trips"},
        "unit": {"column": "hack_license"},
        "domain": {
            "kind": "graph",
            "graph": "manhattan",
            "lat": "pickup_latitude",
            "lon": "pickup_longitude",
        },
        "bounds": {"max_records_per_unit": 5},
        "privacy": {"epsilon": 1.0, "delta": 1e-6, "dataset": "trips", **privacy},
    }


LEVELS = [
    {"name": "neighbourhood", "regions": "nyc-neighbourhoods"},
    {"name": "total", "kind": "total"},
]


def test_levels_parse_in_order_and_round_trip() -> None:
    spec = ReleaseSpec.from_dict({**_base(level_weights=[2, 1, 1]), "levels": LEVELS})
    assert [lv.name for lv in spec.levels] == ["neighbourhood", "total"]
    assert [lv.source for lv in spec.levels] == ["regions", "total"]
    assert spec.privacy.level_weights == (2.0, 1.0, 1.0)
    again = ReleaseSpec.from_dict(spec.to_dict())
    assert again.levels == spec.levels
    assert again.privacy.level_weights == (2.0, 1.0, 1.0)


def test_no_levels_is_one_level() -> None:
    spec = ReleaseSpec.from_dict(_base())
    assert spec.levels == ()
    assert "levels" not in spec.to_dict()


def test_toml(tmp_path: Any) -> None:
    p = tmp_path / "s.toml"
    p.write_text(
        '[source]\nbundled = "trips"\n[unit]\ncolumn = "hack_license"\n'
        '[domain]\nkind = "graph"\ngraph = "manhattan"\nlat = "pickup_latitude"\n'
        'lon = "pickup_longitude"\n'
        '[[levels]]\nname = "neighbourhood"\nregions = "nyc-neighbourhoods"\n'
        '[[levels]]\nname = "total"\nkind = "total"\n'
        "[bounds]\nmax_records_per_unit = 5\n"
        '[privacy]\nepsilon = 1.0\ndelta = 1e-6\ndataset = "trips"\n'
        "level_weights = [0.5, 0.25, 0.25]\n"
    )
    spec = load_spec(p)
    assert [lv.name for lv in spec.levels] == ["neighbourhood", "total"]


@pytest.mark.parametrize(
    ("levels", "message"),
    [
        ([{"name": "n"}], r"\[levels #1\] give exactly one of regions"),
        ([{"name": "n", "kind": "total", "map": "m.csv"}], r"exactly one of .*got map, kind"),
        ([{"kind": "total"}], r"\[levels #1\] name is required"),
        ([{"name": "a b", "kind": "total"}], r"\[levels #1\] name must be a word"),
        ([{"name": "../x", "kind": "total"}], r"name must be a word"),
        ([{"name": "_x", "kind": "total"}], r"a letter first"),
        ([{"name": "denoised", "kind": "total"}], r"is a column of the finest table"),
        (
            [{"name": "t", "kind": "total"}, {"name": "t", "kind": "total"}],
            r"\[levels #2\] name 't' is already",
        ),
        ([{"name": "t", "kind": "sum"}], r"\[levels #1\] kind must be one of 'total'"),
        (
            [{"name": "t", "kind": "total", "colour": 1}],
            r"unknown key 'colour' \(allowed: name, regions",
        ),
        (
            [{"name": "t", "kind": "total", "id_property": "x"}],
            r"id_property applies to a regions level",
        ),
        ("total", r"\[\[levels\]\] must be a list of tables"),
        ([3], r"\[levels #1\] must be a table"),
    ],
)
def test_bad_levels_are_refused_naming_the_table(levels: Any, message: str) -> None:
    with pytest.raises((ValueError, TypeError), match=message):
        ReleaseSpec.from_dict({**_base(), "levels": levels})


@pytest.mark.parametrize(
    ("weights", "message"),
    [
        ([1, 1], r"level_weights must have 3 numbers, one per level, the finest"),
        ([1, 0, 1], r"\[privacy\] level_weights must be a number > 0; got 0"),
        ([1, -1, 1], r"a number > 0"),
        ([], r"level_weights must be a list of positive numbers"),
        ("1,1,1", r"level_weights must be a list of positive numbers"),
        ([1, float("inf"), 1], r"a finite number"),
    ],
)
def test_bad_weights(weights: Any, message: str) -> None:
    with pytest.raises((ValueError, TypeError), match=message):
        ReleaseSpec.from_dict({**_base(level_weights=weights), "levels": LEVELS})


def test_weights_without_levels() -> None:
    with pytest.raises(ValueError, match=r"level_weights applies to a release with \[\[levels\]\]"):
        ReleaseSpec.from_dict(_base(level_weights=[1.0]))


def test_regions_level_needs_coordinates() -> None:
    data = _base()
    data["domain"] = {"kind": "values", "column": "zone", "values": [1, 2, 3]}
    with pytest.raises(
        ValueError, match=r"\[levels #1\] regions places the fine keys .* \(got 'values'\)"
    ):
        ReleaseSpec.from_dict({**data, "levels": LEVELS})
    ok = ReleaseSpec.from_dict({**data, "levels": [{"name": "z", "map": "m.csv"}, LEVELS[1]]})
    assert ok.levels[0].source == "map"


def test_mean_and_sigma_are_refused() -> None:
    data = _base()
    data["statistic"] = {"kind": "mean", "column": "fare_amount", "lower": 0, "upper": 50}
    with pytest.raises(ValueError, match=r"\[\[levels\]\] apply to a count or a sum"):
        ReleaseSpec.from_dict({**data, "levels": LEVELS})
    data = _base()
    data["privacy"] = {"sigma": 3.0, "delta": 1e-6, "dataset": "trips"}
    with pytest.raises(ValueError, match=r"need \[privacy\] epsilon"):
        ReleaseSpec.from_dict({**data, "levels": LEVELS})


def test_level_spec_direct() -> None:
    lv = LevelSpec(name="city", kind="total")
    assert lv.source == "total"
    spec = ReleaseSpec.from_dict(_base())
    from dataclasses import replace

    assert replace(spec, levels=(lv,)).levels == (lv,)
