"""Install hints for optional dependencies: the wheel form always, the clone form only
where dpgauss runs from a clone."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

import dpgauss
from dpgauss import _optional
from dpgauss._optional import install_hint, require


def test_the_hint_names_the_package_for_a_wheel_install(monkeypatch):
    monkeypatch.setattr(_optional, "_checkout", lambda: None)
    assert install_hint("regions") == "pip install 'dpgauss[regions]'"


def test_the_hint_adds_the_clone_form_when_run_from_a_clone(monkeypatch, tmp_path):
    monkeypatch.setattr(_optional, "_checkout", lambda: tmp_path)
    hint = install_hint("regions")
    assert hint.startswith("pip install 'dpgauss[regions]'")
    assert f"pip install -e '.[regions]' in {tmp_path}" in hint
    assert "\n" not in hint


def test_require_names_purpose_module_and_extra(monkeypatch):
    monkeypatch.setattr(_optional, "_checkout", lambda: None)
    with pytest.raises(
        ValueError, match=r"^GeoJSON needs no_such_xyz: pip install 'dpgauss\[regions\]'$"
    ):
        require("no_such_xyz.sub", "regions", "GeoJSON", error=ValueError)


def test_the_clone_is_detected_from_the_package_location():
    root = Path(dpgauss.__file__).resolve().parents[2]
    expected = root if (root / "pyproject.toml").is_file() else None
    assert _optional._checkout() == expected


def test_no_module_hints_an_install_from_the_current_directory():
    src = Path(dpgauss.__file__).resolve().parent
    bad = []
    for path in src.rglob("*.py"):
        if path.name == "_optional.py":
            continue
        for n, line in enumerate(path.read_text().splitlines(), 1):
            if re.search(r"pip install '\.\[|pip install numba", line):
                bad.append(f"{path.relative_to(src)}:{n}: {line.strip()}")
    assert bad == []
