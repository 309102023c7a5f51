r"""Denoising across time: a series period denoised with the periods already published.

With ``[series] history = K``, the release of period ``k`` denoises its released vector
``y_k`` together with the released vectors of the ``m ≤ K`` periods ``k−m, …, k−1`` that are
already published (their tables and reports, beside this period's), on the product of the
time chain ``0 — 1 — … — m`` and the domain's own structure: key ``i`` of period ``t`` is node
``t·d + i``, joined to the same key in the next period and, within a period, as the domain
says (a range's chain becomes the ``(m+1) × d`` lattice) — or on time alone, each key's
own chain through the periods, whichever fits with the smaller SURE
(:func:`joint_denoiser`).  So a hot spot that persists from hour to hour is told from noise
by its past as well as by its neighbours.

**Post-processing only.**  The denoiser sees the released vectors — this period's and the
published ones — the public σ and the public structure; the earlier tables are public
releases, read back from their files, never their records.  So the guarantee of every
release is unchanged: nothing more is charged.

**Which periods.**  The earlier periods are used newest first while they are consecutive
and each has a report and a table that are a release of *this* spec (the report's spec,
as published, equals this release's), of the same σ and the same number of keys; the first
period that is missing, or is of another spec or σ, ends the history (the report says why).
A history file that exists but cannot be read is refused before the charge, naming it.

**Revisions.**  The joint fit also revises the denoised values of the earlier periods.
They are written beside the table, ``<table>.revisions<suffix>`` (one row per earlier period
and key: ``period``, the key columns, ``denoised``, ``denoised_lower``, ``denoised_upper``),
the report lists the periods revised, and the ledger's charge label says so: the published
earlier tables themselves are never changed (their released values stand; a reader takes
the newest revision of a period's denoised values).
"""

from __future__ import annotations

import csv
import json
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np

from .._optional import require
from ..denoise import Denoised, Structure, as_graph
from .domains.key_domain import KeyDomain
from .series import Period, parse_period, period_path

__all__ = [
    "STRUCTURES",
    "History",
    "joint_denoiser",
    "load_history",
    "product_structure",
    "time_structure",
]


@dataclass(frozen=True, eq=False)
class History:
    """The earlier periods a release denoises with (module docstring): ``periods`` oldest
    first, their ``released`` vectors ``(m, d)``, how many were ``asked`` for, why fewer
    were used (``note``, '' if none was missing) and the ``revisions`` table's path (None
    when no earlier period is used)."""

    periods: tuple[Period, ...]
    released: np.ndarray
    asked: int
    note: str
    revisions: Path | None

    @property
    def used(self) -> int:
        """How many earlier periods are denoised with this one."""
        return len(self.periods)

    def as_dict(self) -> dict[str, Any]:
        """The report's ``denoise.history``: public facts only (the periods' starts)."""
        return {
            "asked": self.asked,
            "used": self.used,
            "periods": [p.start for p in self.periods],
            "note": self.note or None,
            "revisions": self.revisions.name if self.revisions is not None else None,
        }


def _spec_text(spec: object) -> str:
    return json.dumps(spec, sort_keys=True, allow_nan=False)


def _released(table: Path, fmt: str, d: int) -> np.ndarray:
    """The ``released`` column of a published table; ``ValueError`` naming the file."""
    try:
        if fmt == "parquet":
            pq = require("pyarrow.parquet", "data", "reading a Parquet table", error=ValueError)
            values = pq.read_table(table, columns=["released"]).column(0).to_pylist()
        else:
            with open(table, newline="", encoding="utf-8") as fh:
                values = [row.get("released") for row in csv.DictReader(fh)]
        out = np.array([np.nan if v in (None, "") else float(v) for v in values])
    except (OSError, ValueError, KeyError, TypeError, UnicodeDecodeError) as exc:
        raise ValueError(
            f"[series] history: cannot read the released values of {table}: {exc}"
        ) from None
    except Exception as exc:  # pyarrow's own errors
        raise ValueError(f"[series] history: cannot read {table}: {exc}") from None
    if out.shape != (d,) or not np.all(np.isfinite(out)):
        raise ValueError(
            f"[series] history: {table} is not a release of this domain ({out.size} rows, "
            f"{d} keys, every released value finite)"
        )
    return out


def load_history(
    *,
    series: Any,
    period: Period,
    template: Path,
    fmt: str,
    public_spec: dict[str, Any],
    sigma: float,
    d: int,
) -> History:
    """The published periods before ``period`` that its release denoises with.

    ``template`` is the output path as the spec (or ``--out``) gives it, before the period
    is put in its name (:func:`~dpgauss.release.series.period_path`); ``public_spec`` and
    ``sigma`` are this release's.  Raises ``ValueError`` for a history file that exists
    but cannot be read.
    """
    asked = int(series.history)
    want = _spec_text(public_spec)
    found: list[tuple[Period, np.ndarray]] = []
    note = ""
    for back in range(1, asked + 1):
        start = period.index - back
        p = parse_period(series, _start_of(series, start))
        table = period_path(template, p)
        report = table.with_name(table.name + ".report.json")
        if not table.exists() or not report.exists():
            note = f"period {p.start} is not published beside this one ({table.name})"
            break
        try:
            published = json.loads(report.read_text(encoding="utf-8"))
        except (OSError, ValueError, UnicodeDecodeError) as exc:
            raise ValueError(f"[series] history: cannot read the report {report}: {exc}") from None
        if not isinstance(published, dict) or _spec_text(published.get("spec")) != want:
            note = f"period {p.start} was released with another spec"
            break
        their = (published.get("privacy") or {}).get("sigma")
        if not isinstance(their, int | float) or float(their) != sigma:
            note = f"period {p.start} was released with another sigma ({their!r})"
            break
        found.append((p, _released(table, fmt, d)))
    if len(found) == asked:
        note = ""
    found.reverse()  # oldest first
    if not found:
        return History((), np.zeros((0, d)), asked, note, None)
    current = period_path(template, period)
    revisions = current.with_name(current.stem + ".revisions" + current.suffix)
    if not current.suffix:
        revisions = current.with_name(current.name + ".revisions")
    return History(
        tuple(p for p, _ in found),
        np.vstack([v for _, v in found]),
        asked,
        note,
        revisions,
    )


def _start_of(series: Any, index: int) -> str:
    """The start of period ``index`` of ``series`` (ISO text)."""
    from datetime import datetime, timedelta

    us = series.origin_us + index * series.period_us
    return (datetime(1970, 1, 1) + timedelta(microseconds=us)).isoformat(sep=" ")


def product_structure(domain: KeyDomain, periods: int) -> Structure:
    """The structure of ``periods`` consecutive periods of ``domain`` (module docstring):
    the time chain times the domain's graph, or the ``(periods, d)`` lattice for a range."""
    d = domain.size
    n = periods * d
    if domain.edges is None and domain.grid is not None and len(domain.grid) == 1:
        return Structure(grid=(periods, d))
    base = Structure(
        graph=as_graph(domain.edges, d) if domain.edges is not None else None, grid=domain.grid
    ).lattice()
    parts = []
    if base is not None and base.m:
        offsets = (np.arange(periods, dtype=np.int64) * d)[:, None, None]
        parts.append((base.edges[None, :, :] + offsets).reshape(-1, 2))
    if periods > 1:
        k = np.arange((periods - 1) * d, dtype=np.int64)
        parts.append(np.stack([k, k + d], axis=1))
    if not parts:
        return Structure()
    return Structure(graph=as_graph(np.concatenate(parts), n))


def time_structure(domain: KeyDomain, periods: int) -> Structure:
    """Each key's own chain through the periods, and no edge within a period: for maps
    whose hot spots persist in time but do not spread in space."""
    d = domain.size
    k = np.arange((periods - 1) * d, dtype=np.int64)
    if not k.size:
        return Structure()
    return Structure(graph=as_graph(np.stack([k, k + d], axis=1), periods * d))


#: The structures a period and its history are denoised on, by name (the report's words).
STRUCTURES = {"time × the domain's structure": product_structure, "time only": time_structure}


def joint_denoiser(
    make: Callable[[Structure], Callable[[np.ndarray, float], Denoised]],
    domain: KeyDomain,
    periods: int,
) -> Callable[[np.ndarray, float], Denoised]:
    """The denoiser of ``periods`` stacked periods: the spec's denoiser (``make`` builds it
    for a structure) on each of :data:`STRUCTURES`, and the fit of smallest SURE.

    A map of isolated hot spots that persist from period to period gains nothing from its
    spatial edges, whose jumps keep one λ small, and much from its temporal ones; a map
    whose blobs drift gains from both.  Choosing by SURE between the two is post-processing
    like every choice ``auto`` makes, with the same caveat: the error bars refit the chosen
    estimator with its tuning frozen, not the choice itself.  A domain without structure of
    its own has one candidate (its product is time only).
    """
    fns = {name: make(build(domain, periods)) for name, build in STRUCTURES.items()}
    if domain.edges is None and domain.grid is None:
        fns = {"time only": fns["time only"]}

    def run(y: np.ndarray, sigma: float) -> Denoised:
        best: Denoised | None = None
        tried: dict[str, float | None] = {}
        for name, fn in fns.items():
            fit = fn(y, sigma)
            tried[name] = fit.risk
            if best is None or (
                fit.risk is not None and (best.risk is None or fit.risk < best.risk)
            ):
                best, chosen = fit, name
        assert best is not None
        params = {**best.params, "history_structure": chosen, "history_sure": tried}
        return replace(best, params=params)

    return run
