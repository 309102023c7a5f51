"""What a release writes: the table, the public report and the plot, staged into the
release's output group, and the confidential diagnostics file apart.

The atomic mechanics (unnamed staged files committed together, refused paths) are
:class:`~dpgauss.release.outputs.OutputGroup`'s; this module only says what goes into each
file.  :func:`stage_release` stages the published files of a release (the table, the report
and, if the plan draws one, the plot) and :func:`~dpgauss.release.pipeline.run_release`
commits them; :func:`write_diagnostics` writes the confidential diagnostics (exact row
counters, timings, paths) into the plan's diagnostics directory, beside the ledger and never
beside the table.
"""

from __future__ import annotations

import json
import math
import os
import secrets
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np

from .. import __version__ as dpgauss_version
from .domains.keys import key_array
from .outputs import OutputGroup, write_csv
from .plan import ReleasePlan
from .report import (
    NOT_PRIVATE_WARNING,
    Diagnostics,
    PublicReport,
    constant_fields,
    map_components,
)

__all__ = ["draw", "public_report", "stage_release", "write_diagnostics", "write_table"]


def stage_release(
    plan: ReleasePlan,
    columns: dict[str, np.ndarray],
    report_text: str,
    chosen: str,
    revisions: dict[str, np.ndarray] | None = None,
    levels: dict[str, dict[str, np.ndarray]] | None = None,
    groups: dict[str, list[Any]] | None = None,
) -> str:
    """Stage the table, the report (``report_text``), the planned plot (``chosen``: the
    denoiser that ran, for its title), a series period's ``revisions`` of the earlier
    periods and each coarser level's table (``levels``, by level name:
    ``<table>.<name>.csv``) into ``plan.outputs``; the staged files, comma-separated (what
    the ledger entry records before the commit)."""
    group = plan.outputs
    group.stage(plan.table, lambda p: write_table(p, plan.file_format, columns))
    hist = plan.history
    if hist is not None and hist.revisions is not None:
        assert revisions is not None  # planned: the estimate makes them
        group.stage(hist.revisions, lambda p: write_table(p, plan.file_format, revisions))
    if plan.groups_table is not None:
        assert groups is not None  # planned: the estimate makes them
        rows = {k: np.asarray(v) for k, v in groups.items()}
        group.stage(plan.groups_table, lambda p: write_table(p, plan.file_format, rows))
    for name, path in (plan.level_tables or {}).items():
        # planned: every level's table is written, or none
        group.stage(path, _table_writer(plan.file_format, (levels or {})[name]))
    group.stage(plan.report, lambda p: Path(p).write_text(report_text, encoding="utf-8"))
    if plan.plot is not None:
        group.stage(plan.plot, lambda p: draw(p, plan, columns, chosen))
    return ", ".join(str(p) for p in group.staged)


def _table_writer(fmt: str, columns: dict[str, np.ndarray]) -> Any:
    """A writer of ``columns`` for :meth:`OutputGroup.stage`."""
    return lambda p: write_table(p, fmt, columns)


def write_table(path: str, fmt: str, columns: dict[str, np.ndarray]) -> None:
    """Write the table to ``path`` (a staged file of the release's OutputGroup)."""
    if fmt == "parquet":
        import pyarrow as pa
        import pyarrow.parquet as pq

        def arrow(v: np.ndarray) -> Any:
            if v.dtype == object:  # the keys of a values domain, or integers beyond int64
                return key_array(v.tolist())
            return pa.array(v)

        pq.write_table(pa.table({k: arrow(v) for k, v in columns.items()}), path)
        return

    write_csv(path, {name: values.tolist() for name, values in columns.items()})


def _plot_keys(labels: np.ndarray) -> np.ndarray:
    """A range's keys for an axis: numbers, or timestamps (datetime64) for a time range."""
    if labels.dtype == object and labels.size and isinstance(labels[0], str):
        return np.array(labels.tolist(), dtype="datetime64[us]")
    return np.asarray(labels, dtype=np.float64)


def _map_part(kinds: list[str]) -> tuple[int, ...] | None:
    """Which parts of a product make each small multiple's map: the first graph or regions
    part; else the last two ranges (an image, the outer one as y); else the last range (a
    series); None for values parts only (no picture: ``plan._plot_decision``)."""
    for i, k in enumerate(kinds):
        if k in ("graph", "regions"):
            return (i,)
    ranges = [i for i, k in enumerate(kinds) if k == "range"]
    return tuple(ranges[-2:]) if ranges else None


def _geometry(axes: list[Any], keys_label: str) -> Any:
    """The plotting geometry of one or two axes (a graph, regions, a lattice, a series)."""
    from ..plotting import GraphGeometry, GridGeometry, RegionGeometry, SeriesGeometry

    if len(axes) == 2:
        ya, xa = axes
        return GridGeometry(_plot_keys(xa.labels), _plot_keys(ya.labels), xa.name, ya.name)
    (a,) = axes
    if a.spec.kind == "graph":
        edges = a.edges if a.edges is not None else np.zeros((0, 2), np.int64)
        return GraphGeometry(a.node_lat, a.node_lon, edges)
    if a.spec.kind == "regions":
        return RegionGeometry(list(a.regions.geoms))
    return SeriesGeometry(_plot_keys(a.labels), keys_label)


def draw(path: str, plan: ReleasePlan, columns: dict[str, np.ndarray], chosen: str) -> None:
    """Draw the release into ``path`` (a staged file): a graph, regions or a lattice as maps
    (released, denoised with the keys that stand out beyond their intervals marked, and the
    intervals' ± on its own scale); a range as a series; a product as small multiples of
    the denoised map, one per value of its other parts (``plotting.draw_small_multiples``)."""
    from ..plotting import (
        MAX_MULTIPLES,
        MapPanel,
        draw_maps,
        draw_series,
        draw_small_multiples,
        pick_multiples,
        stand_out,
    )

    spec, domain = plan.spec, plan.domain
    what = spec.statistic.kind
    released, denoised = columns["released"], columns["denoised"]
    lower, upper = columns["denoised_lower"], columns["denoised_upper"]
    pm = (upper - lower) / 2.0
    finite_pm = pm[np.isfinite(pm)]
    # a denoised map whose values span less than this is flat within its error bars
    resolution = float(np.median(finite_pm)) if finite_pm.size else None
    shown = denoised[np.isfinite(denoised)]
    centre = float(np.mean(shown)) if shown.size else 0.0
    marks = stand_out(lower, upper, centre)  # the interval excludes the map's mean
    # the marks are per-key tests: were every key at the mean, up to 1 − level of them would
    # be marked by chance alone (issue #26: shrunk noise must not read as hot spots)
    chance = (
        f"by chance alone about {1.0 - spec.output.level:.0%} of the {denoised.size:,} keys "
        "would be marked"
    )
    pm_name = f"± of the denoised {spec.output.level:.0%} interval (its half-width)"
    method = (
        spec.denoise.method
        if spec.denoise.method == chosen
        else (f"{spec.denoise.method} → {chosen}")
    )
    top = f", max {float(shown.max()):.4g}" if shown.size else ""
    den_name = f"denoised ({method}); mean {centre:.4g}{top}"
    axes = list(domain.axes)
    if len(axes) > 1 and domain.kind != "grid":
        part = _map_part([a.spec.kind for a in axes])
        assert part is not None  # plan._plot_decision: a product of values is not drawn
        others = [i for i in range(len(axes)) if i not in part]
        sizes = [a.size for a in axes]
        order = others + list(part)
        n_other = math.prod(sizes[i] for i in others)

        def per_multiple(v: np.ndarray) -> np.ndarray:
            return np.transpose(np.asarray(v).reshape(sizes), order).reshape(n_other, -1)

        geo = _geometry([axes[i] for i in part], what)
        den_m, marks_m = per_multiple(denoised), per_multiple(marks)
        lo_m, hi_m = per_multiple(lower), per_multiple(upper)
        picks = pick_multiples(n_other, MAX_MULTIPLES)
        maps = []
        for k in picks:
            at = np.unravel_index(int(k), [sizes[i] for i in others])
            name = ", ".join(
                f"{axes[i].name} = {axes[i].labels[j]}" for i, j in zip(others, at, strict=True)
            )
            band = (
                (lo_m[k], hi_m[k])
                if len(part) == 1 and axes[part[0]].spec.kind == "range"
                else None
            )
            maps.append(
                MapPanel(name, den_m[k], marks=marks_m[k], band=band, resolution=resolution)
            )
        draw_small_multiples(
            path,
            geo,
            maps,
            total=n_other,
            what=f"values of {' × '.join(axes[i].name for i in others)}",
            label=(
                f"denoised {what} ({method}); marked: interval excludes the mean "
                f"{centre:.4g}\n({chance})"
            ),
            title=spec.name,
        )
        return
    if domain.kind == "range" or (len(axes) == 1 and axes[0].spec.kind == "range"):
        draw_series(
            path,
            _plot_keys(columns["key"]),
            [("released", released), (den_name, denoised)],
            lower=columns["released_lower"],
            upper=columns["released_upper"],
            denoised_lower=lower,
            denoised_upper=upper,
            marks=marks,
            label=what,
            title=spec.name,
        )
        return
    geo = _geometry(axes, what)
    per = {"graph": "per node", "regions": "per region"}.get(domain.kind, "")
    label = f"{what} {per}".strip()
    draw_maps(
        path,
        geo,
        [
            MapPanel("released", released),
            MapPanel(
                den_name,
                denoised,
                marks=marks,
                label=f"{label}\n(marked: interval excludes the mean;\n{chance})",
                resolution=resolution,
            ),
            MapPanel(pm_name, pm, cmap="viridis", label=f"± {what}"),
        ],
        label=label,
        title=spec.name,
    )


def public_report(
    plan: ReleasePlan,
    entry: Any,
    noise_info: dict[str, Any],
    den_info: dict[str, Any],
    columns: dict[str, np.ndarray],
    noise_off: bool = False,
) -> PublicReport:
    """The public report of a release (what ``<table>.report.json`` holds; ``noise_off``:
    the noise seam was replaced, a test's release, NOT private)."""
    spec, sens = plan.spec, plan.sensitivity
    charge: dict[str, Any] = {"charged": entry is not None}
    if entry is not None:
        # The entry's number is ledger state (how many charges came before): confidential,
        # it goes to the diagnostics only (Diagnostics.ledger).
        charge.update({"dataset": spec.privacy.dataset, "mu": entry.mu})
    rows = len(columns["released"])  # a discovered domain: the released keys (public)
    domain: dict[str, Any] = {
        "kind": plan.domain.kind,
        "size": plan.domain.size if plan.domain.kind != "discovered" else rows,
        "structure": plan.domain.structure,
    }
    components = map_components(plan.domain)  # the map's (a product's first graph or regions)
    if components is not None:
        domain["components"] = components
    return PublicReport(
        version=dpgauss_version,
        spec=plan.public_spec,
        domain=domain,
        sensitivity={**sens.as_dict(), "summary": sens.summary()},
        privacy=noise_info,
        denoise={**den_info, **constant_fields(columns["denoised"], den_info)},
        charge=charge,
        output={
            "table": plan.table.name,
            "report": plan.report.name,
            "plot": plan.plot.name if plan.plot is not None else None,
            "plot_note": plan.plot_note or None,
            "format": plan.file_format,
            "rows": rows,
            "columns": list(columns),
            **(
                {"levels": {k: v.name for k, v in plan.level_tables.items()}}
                if plan.level_tables
                else {}
            ),
            "created": datetime.now(UTC).date().isoformat(),
        },
        warning=None if spec.privacy.secure else NOT_PRIVATE_WARNING,
        noise_off=noise_off,
        series=_series(plan),
    )


def _series(plan: ReleasePlan) -> dict[str, Any] | None:
    """The report's ``series``: the period released and whom the guarantee protects."""
    series, period = plan.spec.series, plan.period
    if series is None or period is None:
        return None
    return {
        "column": series.column,
        "period": series.period,
        "origin": series.origin,
        **period.as_dict(),
        "scope": plan.spec.unit.scope,
    }


def write_diagnostics(plan: ReleasePlan, diag: Diagnostics, charge_id: int | None) -> str | None:
    """Write the confidential diagnostics file (staged unnamed, like the release's files);
    its path, or None if it could not be written (then said on stderr: the release stands)."""
    if charge_id is not None:
        name = f"CONFIDENTIAL-{_safe(plan.spec.privacy.dataset)}-charge-{charge_id}.json"
    else:
        stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%S")
        name = f"CONFIDENTIAL-{_safe(plan.table.name)}-{stamp}-{secrets.token_hex(3)}.json"
    path = plan.diagnostics_dir / name
    text = json.dumps(diag.as_dict(), indent=2, allow_nan=False) + "\n"
    group = OutputGroup([path], overwrite=True)
    try:
        group.stage(path, lambda p: Path(p).write_text(text, encoding="utf-8"))
        group.commit()
        os.chmod(path, 0o600)
    except (OSError, ValueError) as exc:
        group.release()
        sys.stderr.write(
            f"dpgauss: warning: cannot write the confidential diagnostics {path}: {exc}\n"
        )
        return None
    return str(path)


def _safe(name: str) -> str:
    return "".join(c if c.isalnum() or c in "-_." else "_" for c in name)[:80] or "dataset"
