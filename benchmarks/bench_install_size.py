"""Installed size of each extra of dpgauss, beyond the core: its distributions and all
their dependencies, summed from ``importlib.metadata`` file lists in the current environment.

Run from the repository root, in an environment with the extras installed::

    python benchmarks/bench_install_size.py

The README's table of extras quotes its output.
"""

from __future__ import annotations

import importlib.metadata as md
import os
import re
import tomllib

from packaging.requirements import Requirement


def _key(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def dist_size(dist: md.Distribution) -> int:
    """Bytes of the files a distribution installed."""
    total = 0
    for f in dist.files or []:
        try:
            total += os.path.getsize(dist.locate_file(f))
        except OSError:
            pass
    return total


def closure(names: list[str]) -> dict[str, md.Distribution]:
    """The installed distributions ``names`` need, dependencies included (no extras)."""
    seen: dict[str, md.Distribution | None] = {}
    todo = list(names)
    while todo:
        name = todo.pop()
        if _key(name) in seen:
            continue
        try:
            dist = md.distribution(name)
        except md.PackageNotFoundError:
            seen[_key(name)] = None
            continue
        seen[_key(name)] = dist
        for text in dist.requires or []:
            req = Requirement(text)
            if req.marker is None or req.marker.evaluate({"extra": ""}):
                todo.append(req.name)
    return {k: v for k, v in seen.items() if v is not None}


def main() -> None:
    with open("pyproject.toml", "rb") as f:
        project = tomllib.load(f)["project"]
    core = closure([Requirement(r).name for r in project["dependencies"]])
    print(f"{'(core)':10s} {sum(dist_size(d) for d in core.values()) / 1e6:7.0f} MB")
    for extra, reqs in project["optional-dependencies"].items():
        names = [Requirement(r).name for r in reqs]
        found = closure(names)
        beyond = sum(dist_size(d) for k, d in found.items() if k not in core) / 1e6
        absent = [n for n in names if _key(n) not in found]
        note = f"  (not installed here: {', '.join(absent)})" if absent else ""
        print(f"{extra:10s} {beyond:7.0f} MB beyond the core{note}")


if __name__ == "__main__":
    main()
