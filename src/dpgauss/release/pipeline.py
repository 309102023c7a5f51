"""From a table of records to a finished release: the orchestration of ``dpgauss release``.

:func:`run_release` runs a release in three phases — **plan, then charge, then write** —
so that everything that can fail is checked before the ledger is touched and the outputs
appear all together or not at all:

1. **Plan** (:func:`~dpgauss.release.plan.plan_release`): the spec, the public domain, the
   sensitivity derived from the enforced bounds, the calibration (the noise law is computed
   without drawing noise), the ledger and the room left in the budget, the denoiser and its
   parameters, the source's columns (metadata only), and every output path.  Public
   information only.
2. **Aggregate** in the engine (bounding and aggregation, :mod:`dpgauss.release.engines.base`),
   with a fresh secret salt from ``secrets``.  No record can make this step fail or change
   what follows: rows that cannot be used are dropped and only *counted*, and the counts go
   to the confidential diagnostics.  (Checks that stop on bad records are
   ``dpgauss check``, a separate tool for the data owner: :mod:`dpgauss.release.check`.)
3. **Charge** the ledger (atomic; refused only if another process spent the budget since
   the plan — a fact about the ledger, not the data).
4. **Estimate, then write**: secure noise (the unnoised aggregate never leaves
   :mod:`dpgauss.release.estimate`), post-processing with σ and the domain's public
   structure, the mean's ratios and every interval (:func:`~dpgauss.release.estimate.estimate`);
   then the table, the public report and the plot are staged as unnamed files
   (:mod:`dpgauss.release.writers`) and committed together
   (:class:`~dpgauss.release.outputs.OutputGroup`).  The ledger entry records the delivery:
   ``writing`` (with the files) before the commit, then ``delivered`` — or ``failed`` with
   the reason if anything, a Ctrl-C included, stopped the release after the charge.  The
   charge is never undone.
5. The confidential diagnostics (exact row counters, timings, paths) are written to their
   own ``CONFIDENTIAL-…json`` file beside the ledger, never beside the table.

A ``secure = false`` release (floating-point noise, seedable) is an experiment for public or
synthetic data: it is refused when a ledger is given, is never charged, and says so in the
report, the summary and on stderr.

The table's columns and the mean's estimator are described in :mod:`dpgauss.release.estimate`.
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any, TextIO

import numpy as np

from ..errors import ReleaseDeliveryError, ReleaseInterrupted, interrupted
from .domains.key_domain import resolve_domain
from .engines.base import Aggregate, AggregationPlan, Engine
from .estimate import estimate
from .plan import (
    LEDGER_ENV,
    Calibration,
    ReleasePlan,
    make_engine,
    plan_release,
    value_offset,
)
from .report import NOT_PRIVATE_WARNING, Diagnostics
from .spec import ReleaseSpec
from .writers import public_report, stage_release, write_diagnostics

__all__ = [
    "LEDGER_ENV",
    "ReleaseDeliveryError",
    "ReleaseResult",
    "bounded_aggregate",
    "run_release",
]

#: Test seam (private, never a user option): when set, called with the name of each step as
#: the release reaches it — "planned", "aggregated", "charged", "denoised", "staged",
#: "committed" — so the reliability tests can kill or interrupt the process there.
_at_step: Callable[[str], None] | None = None


def _step(name: str) -> None:
    if _at_step is not None:
        _at_step(name)


# ---------------------------------------------------------------------------- ledger


def _charge(
    path: Path,
    dataset: str,
    cal: Calibration | Any,
    label: str,
    period: str | None = None,
    unit: str | None = None,
) -> Any:
    """Charge the release (a calibration, or a plan's ``event``); returns the ledger entry
    (nothing else happens in between, so an interrupt after this returns is always recorded
    on the entry)."""
    from .ledger import Ledger

    event = cal.event if isinstance(cal, Calibration) else cal
    with Ledger(path, create=False) as led:
        return led.charge_event(dataset, event, label=label, period=period, unit=unit)


def _status(plan: ReleasePlan) -> dict[str, Any] | None:
    """The dataset's budget after the charge (for the diagnostics), or None if unreadable."""
    from .ledger import Ledger

    if plan.ledger is None:
        return None
    try:
        with Ledger(plan.ledger, create=False) as led:
            return led.remaining(plan.spec.privacy.dataset).as_dict()
    except (OSError, ValueError):
        return None


@contextlib.contextmanager
def _signals_deferred(absorb_interrupts: bool = False) -> Iterator[None]:
    """Defer SIGINT/SIGTERM while a failure is being recorded (main thread only), so that a
    second Ctrl-C cannot leave the ledger entry unrecorded.  ``absorb_interrupts`` (the
    failure is itself a Ctrl-C): a Ctrl-C that came meanwhile is dropped, not delivered at
    the end, where it would replace the exception that says what became of the charge."""
    import signal
    import threading

    if threading.current_thread() is not threading.main_thread():
        yield
        return
    blocked = {signal.SIGINT, signal.SIGTERM}
    old = signal.pthread_sigmask(signal.SIG_BLOCK, blocked)
    try:
        yield
    finally:
        if absorb_interrupts and hasattr(signal, "sigtimedwait"):
            while signal.SIGINT in signal.sigpending():
                signal.sigtimedwait({signal.SIGINT}, 0)
        signal.pthread_sigmask(signal.SIG_SETMASK, old)


def _record(path: Path | None, charge_id: int | None, state: str, note: str | None) -> str:
    """Record the delivery state on the ledger entry; '' or why it could not be recorded."""
    if path is None or charge_id is None:
        return ""
    from .ledger import Ledger

    try:
        with Ledger(path, create=False) as led:
            led.record_delivery(charge_id, state, note)
    except (OSError, ValueError) as exc:
        return f" (and its delivery state could not be recorded: {exc})"
    return ""


# ----------------------------------------------------------------------------- result


@dataclass(frozen=True, eq=False)
class ReleaseResult:
    """A finished release: the table that was written, its public report, the confidential
    diagnostics, and where they are.

    ``report`` is the published report (the JSON beside the table); ``diagnostics`` is
    confidential (exact counters, timings, paths: never publish it), also written to
    ``diagnostics_path``.  ``summary`` is the public text ``dpgauss release`` prints.
    """

    columns: dict[str, np.ndarray]
    report: dict[str, Any]
    output_path: str
    report_path: str
    summary: str = field(default="")
    diagnostics: dict[str, Any] = field(default_factory=dict)
    diagnostics_path: str | None = None
    diagnostics_text: str = ""


# ------------------------------------------------------------------------------- run


def run_release(
    spec: ReleaseSpec,
    *,
    engine: str | Engine = "duckdb",
    out: str | os.PathLike[str] | None = None,
    ledger: str | os.PathLike[str] | None = None,
    engine_options: dict[str, Any] | None = None,
    progress: TextIO | None = None,
    spec_path: str | os.PathLike[str] | None = None,
    period: str | datetime | None = None,
) -> ReleaseResult:
    """Run the release described by ``spec`` (module docstring for every step).

    Parameters
    ----------
    spec : the validated release spec.
    engine : ``"duckdb"`` (default), ``"spark"`` (:class:`~.engine_spark.SparkEngine` in a
        local session; pass a ``SparkEngine(spark)`` for a cluster) or an engine object.
    out : the output path; overrides ``[output] path``.
    ledger : the ledger file; overrides ``[privacy] ledger`` (and ``$DPGAUSS_LEDGER``).
    engine_options : keyword arguments for the engine (e.g. ``{"threads": 2}``).
    progress : a text stream (e.g. ``sys.stderr``) for one line per step, and DuckDB's
        None (default) is silent.  The lines name the steps only: no counts, no timings,
        no engine progress bars (their presence and their estimates depend on the data).
    spec_path : the spec's file, which an output may never overwrite.
    period : the start of the period a ``[series]`` spec releases (ISO text or datetime;
        :mod:`dpgauss.release.series`); required with a series, refused without one.

    Raises ``ValueError`` (or ``TypeError``) with a one-line message for every problem found
    while planning — nothing is charged or written then — and :class:`ReleaseDeliveryError` if the
    release fails after its charge (the ledger entry says so).
    """
    t0 = time.perf_counter()
    timing: dict[str, float] = {}

    def say(step: str) -> None:
        if progress is not None:
            progress.write(f"dpgauss: {step}\n")
            progress.flush()

    say("planning: domain, sensitivity, calibration, budget, denoiser, outputs")
    plan = plan_release(
        spec,
        engine=engine,
        out=out,
        ledger=ledger,
        engine_options=engine_options,
        spec_path=spec_path,
        period=period,
    )
    spec = plan.spec  # a series' period: the spec of that period's window
    if not plan.charged and progress is not None:
        progress.write(f"dpgauss: WARNING: {NOT_PRIVATE_WARNING}\n")
    timing["plan_s"] = time.perf_counter() - t0
    _step("planned")

    say(f"reading, bounding and aggregating ({getattr(plan.engine, 'name', 'engine')})")
    t = time.perf_counter()
    agg_plan = AggregationPlan(spec, plan.domain, secrets.randbits(64), plan.value_offset)
    agg = plan.engine.aggregate(agg_plan)
    timing["aggregate_s"] = time.perf_counter() - t
    _step("aggregated")

    keys = "discovered" if plan.domain.kind == "discovered" else plan.domain.size
    label = spec.privacy.label or (
        f"{spec.name or spec.statistic.kind} release of {keys} keys "
        f"(sensitivity {plan.sensitivity.l2:.6g}, {plan.calibration.label})"
    )
    if plan.levels is not None and not spec.privacy.label:
        label += f"; zoom levels {', '.join(lv.name for lv in plan.levels.levels)}, one charge"
    if plan.history is not None and plan.history.used:  # revisions are kept in the ledger
        h = plan.history
        label += (
            f"; denoised with the {h.used} published period(s) from {h.periods[0].start}, "
            f"whose denoised values it revises ({h.revisions.name if h.revisions else ''})"
        )
    entry = None
    if plan.ledger is not None:
        start = plan.period.start if plan.period is not None else None
        entry = _charge(
            plan.ledger, spec.privacy.dataset, plan.event, label, start, spec.unit.column
        )
    charge_id = entry.id if entry is not None else None
    seed = None
    files = ""
    diag = Diagnostics(engine=getattr(plan.engine, "name", type(plan.engine).__name__))
    try:
        diag.rows = agg.rows.as_dict()
        diag.timing = timing
        diag.paths = {
            "source": [str(p) for p in spec.source.paths] or spec.source.table,
            "table": str(plan.table),
            "report": str(plan.report),
            "plot": str(plan.plot) if plan.plot is not None else plan.plot_note,
            "ledger": str(plan.ledger.absolute()) if plan.ledger is not None else None,
        }
        if entry is not None:
            diag.ledger = {"entry": entry.as_dict(), "status": _status(plan)}
        _step("charged")
        say("charged; adding noise and denoising" if entry else "adding noise and denoising")
        t = time.perf_counter()
        if not spec.privacy.secure:
            seed = spec.privacy.seed if spec.privacy.seed is not None else secrets.randbits(128)
        diag.seed = seed
        est = _estimator(plan)(plan, agg, seed, timing)
        columns = est.columns
        timing["noise_denoise_s"] = time.perf_counter() - t
        _step("denoised")

        say("writing the table, the report and the plot")
        t = time.perf_counter()
        public = public_report(plan, entry, est.noise, est.denoise, columns, est.noise_off)
        text = json.dumps(public.as_dict(), indent=2, allow_nan=False) + "\n"
        files = stage_release(
            plan, columns, text, str(est.denoise["method"]), est.revisions, est.levels, est.groups
        )
        _record(plan.ledger, charge_id, "writing", files)
        _step("staged")
        plan.outputs.commit()
        _step("committed")
        timing["write_s"] = time.perf_counter() - t
    except BaseException as exc:
        ctrl_c = interrupted(exc)
        with _signals_deferred(absorb_interrupts=ctrl_c):
            if plan.outputs.named:  # interrupted once every file had its name: delivered
                plan.outputs.release()
                diag.delivery = "delivered (interrupted just after)"
                extra = _record(plan.ledger, charge_id, "delivered", files)
                write_diagnostics(plan, diag, charge_id)
                if ctrl_c and entry is not None:
                    raise ReleaseInterrupted(
                        f"interrupted just after the release was delivered: charge "
                        f"#{entry.id} (mu={entry.mu:.6g}) to dataset "
                        f"{spec.privacy.dataset!r}, the table and its report are written"
                        f"{_ledger_says('delivered', extra)}",
                        entry.id,
                    ) from exc
                raise
            plan.outputs.release()
            reason = _reason(exc)
            diag.delivery = f"failed after the charge: {reason}"
            extra = _record(plan.ledger, charge_id, "failed", reason)
            write_diagnostics(plan, diag, charge_id)
            if ctrl_c and entry is not None:
                # one line, which the command line prints instead of "interrupted"
                raise ReleaseInterrupted(
                    f"interrupted after charge #{entry.id} (mu={entry.mu:.6g}) to dataset "
                    f"{spec.privacy.dataset!r}: the budget is spent and nothing was "
                    f"delivered{_ledger_says('failed', extra)}",
                    entry.id,
                ) from exc
        if ctrl_c:
            raise
        if isinstance(exc, SystemExit):
            if entry is not None:
                sys.stderr.write(
                    f"dpgauss: stopped after charge #{entry.id} (mu={entry.mu:.6g}) to "
                    f"dataset {spec.privacy.dataset!r}: the budget is spent and nothing was "
                    f"delivered{_ledger_says('failed', extra)}\n"
                )
            raise
        if entry is None:
            raise
        raise ReleaseDeliveryError(
            f"the release failed after charge #{entry.id} (mu={entry.mu:.6g}) to dataset "
            f"{spec.privacy.dataset!r}; the budget is spent, nothing was written: {reason}"
            f"{extra}",
            entry.id,
        ) from exc
    plan.outputs.release()
    diag.delivery = "delivered"
    extra = _record(plan.ledger, charge_id, "delivered", files)
    if extra:
        diag.delivery += extra
    timing["total_s"] = time.perf_counter() - t0
    if timing.get("denoise_s") is not None and timing["total_s"] > 0:
        timing["denoise_share"] = timing["denoise_s"] / timing["total_s"]
    diag_path = write_diagnostics(plan, diag, charge_id)
    return ReleaseResult(
        columns,
        public.as_dict(),
        str(plan.table),
        str(plan.report),
        public.text(),
        diag.as_dict(),
        diag_path,
        diag.text(),
    )


def _estimator(plan: ReleasePlan) -> Callable[..., Any]:
    """The estimate of the plan: the selection's for keys not known in advance
    (:mod:`dpgauss.release.selection`), else :func:`~dpgauss.release.estimate.estimate`."""
    if plan.domain.kind == "discovered":
        from .selected import estimate_selection

        return estimate_selection
    return estimate


def _ledger_says(state: str, extra: str) -> str:
    """How the message ends: the ledger entry's record of it, or why there is none."""
    return extra if extra else f" (the ledger entry records it as {state!r})"


def _reason(exc: BaseException) -> str:
    if interrupted(exc):
        return "interrupted (KeyboardInterrupt)"
    text = " ".join(str(exc).split()) or type(exc).__name__
    if not isinstance(exc, ValueError | TypeError | OSError):
        text = f"{type(exc).__name__}: {text}"
    return text if len(text) <= 400 else text[:397] + "..."


def bounded_aggregate(
    spec: ReleaseSpec,
    *,
    salt: int | None = None,
    engine: str | Engine = "duckdb",
    engine_options: dict[str, Any] | None = None,
) -> Aggregate:
    """The bounded, **unnoised** aggregate of ``spec``: NOT private, for evaluation only.

    Runs steps 1 and 4 of :func:`run_release` (domain, bounding, aggregation) and returns
    the exact per-key counts (and sums) with the row counters — no noise, no ledger, no
    output.  It is what experiments compare releases with (the "true" heat map of the
    paper's figures, the MSE of a denoiser) and what a data owner may inspect on data they
    hold; publishing it, or anything computed from it, is not differentially private.
    ``salt`` fixes the sampling of the bounds (default: a fresh secret, as in a release).
    """
    if not isinstance(spec, ReleaseSpec):
        raise TypeError(
            f"spec must be a ReleaseSpec (load_spec reads one from TOML); got {type(spec).__name__}"
        )
    domain = resolve_domain(spec)
    eng = make_engine(engine, engine_options)
    salt = secrets.randbits(64) if salt is None else salt
    plan = AggregationPlan(spec, domain, salt, value_offset(spec))
    return eng.aggregate(plan)
