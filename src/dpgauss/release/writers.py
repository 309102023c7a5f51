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
from .report import NOT_PRIVATE_WARNING, Diagnostics, PublicReport

__all__ = ["draw", "public_report", "stage_release", "write_diagnostics", "write_table"]


def stage_release(
    plan: ReleasePlan, columns: dict[str, np.ndarray], report_text: str, chosen: str
) -> str:
    """Stage the table, the report (``report_text``) and the planned plot (``chosen``: the
    denoiser that ran, for its title) into ``plan.outputs``; the staged files, comma-separated
    (what the ledger entry records before the commit)."""
    group = plan.outputs
    group.stage(plan.table, lambda p: write_table(p, plan.file_format, columns))
    group.stage(plan.report, lambda p: Path(p).write_text(report_text, encoding="utf-8"))
    if plan.plot is not None:
        group.stage(plan.plot, lambda p: draw(p, plan, columns, chosen))
    return ", ".join(str(p) for p in group.staged)


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


def draw(path: str, plan: ReleasePlan, columns: dict[str, np.ndarray], chosen: str) -> None:
    """Draw the release (graph: maps; a lattice: images; range: a series) into ``path`` (a
    staged file)."""
    from ..plotting import (
        draw_graph_panels,
        draw_grid_panels,
        draw_region_panels,
        draw_series,
        shared_scale,
    )

    spec, domain = plan.spec, plan.domain
    what = spec.statistic.kind
    released, denoised = columns["released"], columns["denoised"]
    pm = (columns["denoised_upper"] - columns["denoised_lower"]) / 2.0
    pm_name = f"± of the denoised {spec.output.level:.0%} interval"
    method = (
        spec.denoise.method
        if spec.denoise.method == chosen
        else (f"{spec.denoise.method} → {chosen}")
    )
    if domain.kind == "graph":
        assert domain.edges is not None
        draw_graph_panels(
            path,
            columns["lat"],
            columns["lon"],
            domain.edges,
            [("released", released), (f"denoised ({method})", denoised), (pm_name, pm)],
            vmax=shared_scale([("denoised", denoised)]),  # the noise would swamp it
            label=f"{what} per node",
            title=spec.name,
        )
    elif domain.kind == "regions":
        draw_region_panels(
            path,
            list(domain.axes[0].regions.geoms),
            [("released", released), (f"denoised ({method})", denoised), (pm_name, pm)],
            vmax=shared_scale([("denoised", denoised)]),
            label=f"{what} per region",
            title=spec.name,
        )
    elif domain.grid is not None and len(domain.grid) == 2:
        ya, xa = domain.axes
        draw_grid_panels(
            path,
            [
                ("released", released.reshape(domain.grid)),
                (f"denoised ({method})", denoised.reshape(domain.grid)),
                (pm_name, pm.reshape(domain.grid)),
            ],
            x_edges=_plot_keys(xa.labels),
            y_edges=_plot_keys(ya.labels),
            x_label=xa.name,
            y_label=ya.name,
            vmax=shared_scale([("denoised", denoised)]),
            label=what,
            title=spec.name,
        )
    else:
        draw_series(
            path,
            _plot_keys(columns["key"]),
            [("released", released), (f"denoised ({method})", denoised)],
            lower=columns["released_lower"],
            upper=columns["released_upper"],
            denoised_lower=columns["denoised_lower"],
            denoised_upper=columns["denoised_upper"],
            label=what,
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
    return PublicReport(
        version=dpgauss_version,
        spec=plan.public_spec,
        domain={
            "kind": plan.domain.kind,
            "size": plan.domain.size,
            "structure": plan.domain.structure,
        },
        sensitivity={**sens.as_dict(), "summary": sens.summary()},
        privacy=noise_info,
        denoise=den_info,
        charge=charge,
        output={
            "table": plan.table.name,
            "report": plan.report.name,
            "plot": plan.plot.name if plan.plot is not None else None,
            "plot_note": plan.plot_note or None,
            "format": plan.file_format,
            "rows": plan.domain.size,
            "columns": list(columns),
            "created": datetime.now(UTC).date().isoformat(),
        },
        warning=None if spec.privacy.secure else NOT_PRIVATE_WARNING,
        noise_off=noise_off,
    )


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
