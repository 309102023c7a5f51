"""From a table of records to a finished release: the orchestration of ``dpgauss release``.

:func:`run_release` runs a release in three phases — **plan, then charge, then write** —
so that everything that can fail is checked before the ledger is touched and the outputs
appear all together or not at all:

1. **Plan** (:func:`~dpgauss.release.plan.plan_release`): the spec, the public domain, the
   sensitivity derived from the enforced bounds, the calibration (the noise law is computed
   without drawing noise), the ledger and the room left in the budget, the denoiser and its
   parameters, the source's columns (metadata only), and every output path.  Public
   information only.
2. **Aggregate** in the engine (bounding and aggregation, :mod:`dpgauss.release.engine`),
   with a fresh secret salt from ``secrets``.  No record can make this step fail or change
   what follows: rows that cannot be used are dropped and only *counted*, and the counts go
   to the confidential diagnostics.  (Checks that stop on bad records are
   ``dpgauss check``, a separate tool for the data owner: :mod:`dpgauss.release.check`.)
3. **Charge** the ledger (atomic; refused only if another process spent the budget since
   the plan — a fact about the ledger, not the data).
4. **Noise, denoise, write**: secure noise (the unnoised aggregate never leaves this
   module), post-processing with σ and the domain's public structure, then the table, the
   public report and the plot are staged as unnamed files and committed together
   (:class:`~dpgauss.release.outputs.OutputGroup`).  The ledger entry records the delivery:
   ``writing`` (with the files) before the commit, then ``delivered`` — or ``failed`` with
   the reason if anything, a Ctrl-C included, stopped the release after the charge.  The
   charge is never undone.
5. The confidential diagnostics (exact row counters, timings, paths) are written to their
   own ``CONFIDENTIAL-…json`` file beside the ledger, never beside the table.

A ``secure = false`` release (floating-point noise, seedable) is an experiment for public or
synthetic data: it is refused when a ledger is given, is never charged, and says so in the
report, the summary and on stderr.

The output table has one row per key of the domain: ``key, released, denoised, sigma,
lower, upper, denoised_lower, denoised_upper`` (``[lower, upper]`` covers the true bounded
value with probability ≥ ``level``, 95 % by default, exactly for the noise law;
``[denoised_lower, denoised_upper]`` is the denoised value's interval at the same level,
which targets average coverage over keys: :mod:`dpgauss.denoise.intervals`); graph domains
add ``lat, lon`` of each node, a ``mean`` adds ``sum_released, count_released``.

Means.  A mean is released as a noisy centred sum ``S'`` and a noisy count ``C`` of the same
kept records (one Gaussian mechanism on the normalised pair; see
:mod:`dpgauss.release.sensitivity`), and ``released = clip(m + S'/C, lower, upper)`` where
``C ≥ 1`` (empty otherwise); ``sigma`` is the delta-method standard error
``√(σ_S² + (S'/C)² σ_C²)/C`` (an approximation, stated in the report), and ``[lower, upper]``
is the range of ``m + S/C`` over the two level-``(1+level)/2`` intervals of ``S'`` and ``C``,
clipped to the clamping bounds: it covers the true mean of the kept clamped values with
probability ≥ ``level`` (union bound), or is the whole ``[lower, upper]`` when the count's
interval reaches 0.  ``denoised`` is the same ratio of the denoised sum and count, and
``[denoised_lower, denoised_upper]`` the same range over the denoised sum's and count's
level-``(1+level)/2`` intervals.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import secrets
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TextIO

import numpy as np
from scipy import special

from .. import __version__ as dpgauss_version
from ..denoise import Denoised, ErrorBars
from ..denoise.intervals import public_seed
from ..noise.mechanisms import GaussianMechanism
from ..noise.release import NoisePlan, Release
from ..privacy import (
    analytic_gaussian_sigma,
    classical_gaussian_sigma,
    gaussian_delta,
    gaussian_epsilon,
)
from ..privacy.accounting import GaussianAccountant
from .domain import KeyDomain, resolve_domain
from .engines.base import Aggregate, AggregationPlan, Engine
from .keymap import key_array
from .outputs import OutputGroup, write_csv
from .plan import LEDGER_ENV, ReleasePlan, make_engine, plan_release, value_offset
from .report import NOT_PRIVATE_WARNING, Diagnostics, PublicReport, error_fields, json_ready
from .sensitivity import Sensitivity, derive_sensitivity
from .spec import MAX_EPSILON, ReleaseSpec

__all__ = [
    "LEDGER_ENV",
    "ReleaseDeliveryError",
    "ReleaseResult",
    "bounded_aggregate",
    "run_release",
    "sensitivity_of",
]

#: A release's sensitivities and noise standard deviations (each in the units of its values)
#: lie in these ranges: there the secure sampler's grid (about Δ/100), the released values and
#: the denoisers' sums of squares over up to 5e7 keys are finite and non-zero.  Outside, the
#: release is refused with a one-line error before anything is charged.
SENSITIVITY_RANGE = (1e-100, 1e100)
SIGMA_RANGE = (1e-100, 1e100)

# Test hook (private, never a user option): with it set, "released" is the exact bounded
# aggregate, so tests can compare the whole pipeline's output with a reference exactly.
_NOISE_OFF = False


#: Test seam (private, never a user option): when set, called with the name of each step as
#: the release reaches it — "planned", "aggregated", "charged", "denoised", "staged",
#: "committed" — so the reliability tests can kill or interrupt the process there.
_at_step: Callable[[str], None] | None = None


def _step(name: str) -> None:
    if _at_step is not None:
        _at_step(name)


@contextlib.contextmanager
def _noise_off() -> Iterator[None]:
    """Tests only: run releases without noise (the report says so)."""
    global _NOISE_OFF
    old, _NOISE_OFF = _NOISE_OFF, True
    try:
        yield
    finally:
        _NOISE_OFF = old


# ----------------------------------------------------------------------------- domain


def sensitivity_of(spec: ReleaseSpec, domain: KeyDomain | None = None) -> Sensitivity:
    """The L2 sensitivity of ``spec``'s release, derived from its bounds.

    Raises ``ValueError`` naming ``[statistic] lower/upper`` when a part's sensitivity is not
    a finite double or lies outside ``[1e-100, 1e100]`` (see :data:`SENSITIVITY_RANGE`).
    """
    domain = resolve_domain(spec) if domain is None else domain
    b, st = spec.bounds, spec.statistic
    sens = derive_sensitivity(
        st.kind,
        max_records_per_unit=b.max_records_per_unit,
        max_keys_per_unit=b.max_keys_per_unit,
        max_records_per_key=b.max_records_per_key,
        domain_size=domain.size,
        spread=domain.spread,
        lower=st.lower,
        upper=st.upper,
    )
    lo, hi = SENSITIVITY_RANGE
    for part, value in sens.parts.items():
        if not lo <= value <= hi:  # inf (overflow) and 0 (underflow) included
            what = (
                "max(|lower|, |upper|)" if st.kind == "sum" else "(upper - lower)/2"
            ) + f" = {sens.scale:.6g} times the records bound {sens.records_l2:.6g}"
            raise ValueError(
                f"[statistic] lower/upper: the {part}'s sensitivity ({what}) is "
                f"{value:.6g}, outside the supported [{lo:g}, {hi:g}]; choose clamping bounds "
                f"of a moderate scale (lower={st.lower!r}, upper={st.upper!r})"
            )
    return sens


# ------------------------------------------------------------------------ calibration


@dataclass(frozen=True, eq=False)
class _Calibration:
    mechanism: GaussianMechanism
    dim: int
    mu: float
    probe: NoisePlan


def _noise_scales(sens: Sensitivity, sigma: float) -> dict[str, float]:
    """The noise standard deviation on each released part, in that part's units."""
    if sens.statistic != "mean":
        return {sens.statistic: sigma}
    # A mean's mechanism is on the normalised pair (S'/Δ_S, C/Δ_C): σ·Δ on each part.
    return {part: sigma * value for part, value in sens.parts.items()}


def _calibrate(spec: ReleaseSpec, sens: Sensitivity, d: int) -> _Calibration:
    """The mechanism, its noise law and μ-GDP charge (public quantities only).

    Every noise standard deviation, in the units of the values it is added to, must lie in
    :data:`SIGMA_RANGE` — where the secure sampler's grid, the released values and the
    denoisers' sums of squares are finite and non-zero; else ``ValueError`` naming the keys.
    ``sigma`` given: the release uses exactly that noise (rounded up), with the guarantee
    (ε, δ) it has — ε = 0 and a smaller δ when σ is above the (0, δ) noise.
    """
    p = spec.privacy
    dim = 2 * d if sens.statistic == "mean" else d
    delta = float(p.delta)  # type: ignore[arg-type]
    lo, hi = SIGMA_RANGE
    if p.epsilon is not None:
        eps = float(p.epsilon)
    else:
        # sigma is the noise on the released values (for a mean: on the count).
        sigma = float(p.sigma)  # type: ignore[arg-type]
        if sens.statistic == "mean":
            sigma /= sens.parts["count"]
        for part, s in _noise_scales(sens, sigma).items():
            if not lo <= s <= hi:
                raise ValueError(
                    f"[privacy] sigma = {p.sigma!r} puts noise {s:.6g} on the {part}, outside "
                    f"the supported [{lo:g}, {hi:g}]"
                )
        least = float(analytic_gaussian_sigma(MAX_EPSILON, delta, sens.l2))
        if sigma < least:
            raise ValueError(
                f"[privacy] sigma = {p.sigma!r} is below the least noise a release supports "
                f"here ({least * (sens.parts['count'] if sens.statistic == 'mean' else 1.0):.6g}"
                f", the noise for epsilon = {MAX_EPSILON:g} at delta = {delta:g}); use a larger "
                "sigma"
            )
        eps = float(gaussian_epsilon(sigma, delta, sens.l2))
        if eps == 0.0 and sigma > float(analytic_gaussian_sigma(0.0, delta, sens.l2)):
            # More noise than (0, δ) needs: keep sigma, state the (0, δ') it gives.
            delta = min(delta, float(gaussian_delta(sigma, 0.0, sens.l2)))
    mech = GaussianMechanism(eps, delta, sens.l2)
    for part, s in _noise_scales(sens, mech.sigma).items():
        if not lo <= s <= hi:
            raise ValueError(
                f"[privacy] epsilon = {eps:g}, delta = {delta:g} put noise {s:.6g} on the "
                f"{part} (sensitivity {sens.parts[part]:.6g}), outside the supported "
                f"[{lo:g}, {hi:g}]: use clamping bounds ([statistic] lower/upper) of a moderate "
                "scale, tighter [bounds], or another epsilon"
            )
    # The law and label of the release, without drawing noise; a secure law's charge is
    # at most gdp_mu(eps, delta), so a budget of the spec's own (eps, delta) takes it.
    try:
        probe = mech.noise_plan(dim, secure=bool(p.secure))
        mu = float(GaussianAccountant().add_release(probe))
    except (ValueError, FloatingPointError) as exc:
        # The secure lattice sampler's limits: noise far above the grid (tiny epsilon and
        # delta), or a noise law whose mu-GDP charge cannot be certified (huge epsilon).
        raise ValueError(
            f"[privacy] the secure sampler cannot serve epsilon = {eps:g}, delta = {delta:g} "
            f"(noise sigma = {mech.sigma:.6g} at sensitivity {sens.l2:.6g}): "
            f"{' '.join(str(exc).split())}; use a moderate epsilon and delta"
        ) from None
    return _Calibration(mech, dim, mu, probe)


# ---------------------------------------------------------------------------- ledger


def _charge(path: Path, dataset: str, cal: _Calibration, label: str) -> Any:
    """Charge the release; returns the ledger entry (nothing else happens in between, so an
    interrupt after this returns is always recorded on the entry)."""
    from .ledger import Ledger

    with Ledger(path, create=False) as led:
        if cal.probe.noise.name == "gaussian":  # continuous noise: exactly Δ/σ-GDP
            entry = led.charge(
                dataset,
                sigma=cal.mechanism.sigma,
                sensitivity=cal.mechanism.sensitivity,
                label=label,
            )
        else:
            entry = led.charge(dataset, mu=cal.mu, label=label)
    return entry


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
def _signals_deferred() -> Iterator[None]:
    """Defer SIGINT/SIGTERM while a failure is being recorded (main thread only), so that a
    second Ctrl-C cannot leave the ledger entry unrecorded."""
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


# ----------------------------------------------------------------------------- output


def _write_table(path: str, fmt: str, columns: dict[str, np.ndarray]) -> None:
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


def _draw(path: str, plan: ReleasePlan, columns: dict[str, np.ndarray], chosen: str) -> None:
    """Draw the release (graph: maps; a lattice: images; range: a series) into ``path`` (a
    staged file)."""
    from ..heatmap import (
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
            lower=columns["lower"],
            upper=columns["upper"],
            denoised_lower=columns["denoised_lower"],
            denoised_upper=columns["denoised_upper"],
            label=what,
            title=spec.name,
        )


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


class ReleaseDeliveryError(ValueError):
    """A release failed *after* its charge: the budget is spent, nothing was written.

    ``charge_id`` is the ledger entry, whose delivery state says ``failed`` and why.
    """

    def __init__(self, message: str, charge_id: int | None) -> None:
        super().__init__(message)
        self.charge_id = charge_id


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
    )
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

    label = spec.privacy.label or (
        f"{spec.name or spec.statistic.kind} release of {plan.domain.size} keys "
        f"(sensitivity {plan.sensitivity.l2:.6g}, {plan.calibration.probe.mechanism})"
    )
    entry = None
    if plan.ledger is not None:
        entry = _charge(plan.ledger, spec.privacy.dataset, plan.calibration, label)
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
        columns, noise_info, den_info = _noise_and_denoise(plan, agg, seed, timing)
        timing["noise_denoise_s"] = time.perf_counter() - t
        _step("denoised")

        say("writing the table, the report and the plot")
        t = time.perf_counter()
        public = _public_report(plan, entry, noise_info, den_info, columns)
        text = json.dumps(public.as_dict(), indent=2, allow_nan=False) + "\n"
        group = plan.outputs
        group.stage(plan.table, lambda p: _write_table(p, plan.file_format, columns))
        group.stage(plan.report, lambda p: Path(p).write_text(text, encoding="utf-8"))
        if plan.plot is not None:
            chosen = str(den_info["method"])
            group.stage(plan.plot, lambda p: _draw(p, plan, columns, chosen))
        files = ", ".join(str(p) for p in group.staged)
        _record(plan.ledger, charge_id, "writing", files)
        _step("staged")
        group.commit()
        _step("committed")
        timing["write_s"] = time.perf_counter() - t
    except BaseException as exc:
        with _signals_deferred():
            if plan.outputs.named:  # interrupted once every file had its name: delivered
                plan.outputs.release()
                diag.delivery = "delivered (interrupted just after)"
                _record(plan.ledger, charge_id, "delivered", files)
                _write_diagnostics(plan, diag, charge_id)
                raise
            plan.outputs.release()
            reason = _reason(exc)
            diag.delivery = f"failed after the charge: {reason}"
            extra = _record(plan.ledger, charge_id, "failed", reason)
            _write_diagnostics(plan, diag, charge_id)
        if isinstance(exc, KeyboardInterrupt | SystemExit):
            if entry is not None:
                sys.stderr.write(
                    f"dpgauss: interrupted after charge #{entry.id} (mu={entry.mu:.6g}) to "
                    f"dataset {spec.privacy.dataset!r}: the budget is spent, nothing was "
                    f"written; the ledger entry says so{extra}\n"
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
    diag_path = _write_diagnostics(plan, diag, charge_id)
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


def _reason(exc: BaseException) -> str:
    if isinstance(exc, KeyboardInterrupt):
        return "interrupted (KeyboardInterrupt)"
    text = " ".join(str(exc).split()) or type(exc).__name__
    if not isinstance(exc, ValueError | TypeError | OSError):
        text = f"{type(exc).__name__}: {text}"
    return text if len(text) <= 400 else text[:397] + "..."


def _write_diagnostics(plan: ReleasePlan, diag: Diagnostics, charge_id: int | None) -> str | None:
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


def _public_report(
    plan: ReleasePlan,
    entry: Any,
    noise_info: dict[str, Any],
    den_info: dict[str, Any],
    columns: dict[str, np.ndarray],
) -> PublicReport:
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
        noise_off=_NOISE_OFF,
    )


def _release(cal: _Calibration, y: np.ndarray, spec: ReleaseSpec, seed: int | None) -> Release:
    if _NOISE_OFF:
        p = cal.probe
        return Release(y.copy(), p.sigma, p.epsilon, p.delta, p.sensitivity, p.mechanism, p.noise)
    p = spec.privacy
    if p.secure:
        rel = cal.mechanism.release(y, rng="secure")
    else:
        rel = cal.mechanism.release(y, rng=np.random.default_rng(seed))
    if rel.noise != cal.probe.noise:  # the charged law must be the law used
        raise RuntimeError("internal error: the release's noise law differs from the charged one")
    return rel


def _noise_and_denoise(
    plan: ReleasePlan, agg: Aggregate, seed: int | None, timing: dict[str, float] | None = None
) -> tuple[dict[str, np.ndarray], dict[str, Any], dict[str, Any]]:
    """The noisy release, its denoising and their columns.  ``timing`` (confidential: the
    diagnostics) gets ``denoise_s``, the seconds in the denoiser and its error bars, and
    ``auto`` candidates' own seconds (``denoise <candidate>_s``)."""
    timing = {} if timing is None else timing
    spec, sens, cal, domain = plan.spec, plan.sensitivity, plan.calibration, plan.domain
    level = spec.output.level
    d = domain.size
    stat = sens.statistic
    eps, delta = cal.mechanism.epsilon, cal.mechanism.delta
    classical = None
    if 0.0 < eps < 1.0:
        with np.errstate(over="ignore", divide="ignore"):  # a subnormal epsilon: no finite σ
            classical = classical_gaussian_sigma(eps, delta, sens.l2)
        classical = classical if math.isfinite(classical) else None
    noise_info: dict[str, Any] = {
        "epsilon": eps,
        "delta": delta,
        "secure": spec.privacy.secure,
        "mechanism": cal.probe.mechanism,
        "sensitivity": sens.l2,
        "analytic_sigma": cal.mechanism.sigma,
        "classical_sigma": classical,
        "classical_note": "the classical mechanism (Theorem 1) for comparison; valid for "
        "epsilon < 1 only",
        "mu": cal.mu,
        "level": level,
    }
    if stat != "mean":
        y = agg.counts if stat == "count" else agg.sums
        assert y is not None
        rel = _release(cal, y, spec, seed)
        values = np.asarray(rel.values, dtype=np.float64)
        t = time.perf_counter()
        den = plan.denoiser(values, rel.sigma)
        bars = den.error_bars(rng=_post_rng((values, rel.sigma)))
        timing["denoise_s"] = time.perf_counter() - t
        _candidate_timing(timing, den)
        den_lower, den_upper = bars.interval(level)
        lower, upper = rel.interval(level)
        noise_info["sigma"] = rel.sigma
        noise_info["interval_half_width"] = rel.noise.half_width(level)
        columns = {
            **domain.key_columns(),
            "released": values,
            "denoised": np.asarray(den.estimate, dtype=np.float64),
            "sigma": np.full(d, rel.sigma),
            "lower": np.asarray(lower, dtype=np.float64),
            "upper": np.asarray(upper, dtype=np.float64),
            "denoised_lower": np.asarray(den_lower, dtype=np.float64),
            "denoised_upper": np.asarray(den_upper, dtype=np.float64),
        }
        den_info = _den_info(den, bars, rel.sigma, d, level)
    else:
        columns, den_info = _mean_columns(plan, agg, noise_info, seed, timing)
    columns.update(domain.place_columns())
    return columns, noise_info, den_info


def _candidate_timing(timing: dict[str, float], *results: Denoised) -> None:
    """``auto``'s seconds per candidate (its ``params["timing"]``) into the confidential
    timing, summed over the denoised parts."""
    for res in results:
        own = res.params.get("timing")
        if isinstance(own, dict):
            for name, seconds in own.items():
                key = f"denoise {name}_s"
                timing[key] = timing.get(key, 0.0) + float(seconds)


def _post_rng(*released: tuple[np.ndarray, float]) -> np.random.Generator:
    """The error bars' simulation stream: post-processing of public values, so not the
    secure sampler; seeded by the released values and their σ (``public_seed``), so that the
    published intervals can be recomputed from the published table."""
    values = np.concatenate([np.ravel(v) for v, _ in released])
    return np.random.default_rng(public_seed(values, [s for _, s in released]))


def _den_info(den: Denoised, bars: ErrorBars, sigma: float, d: int, level: float) -> dict[str, Any]:
    risk = bars.risk if bars.risk is not None else float("nan")
    # timings are confidential (the diagnostics): never in the public report
    params = {k: v for k, v in den.params.items() if k not in ("candidates", "timing")}
    # SURE is unbiased but noisy; its standard deviation is that of the bootstrap
    # replicates' own SURE (dpgauss.denoise.intervals), 0 for an exact (linear) estimator.
    upper = bars.risk_upper(0.95)
    lo, hi = bars.interval(level)
    err = error_fields(risk, upper, d)  # never a zero or negative error
    info: dict[str, Any] = {
        "method": den.method,
        "estimated_error": err["estimated_error"],
        "estimated_error_sd": bars.risk_sd,
        "estimated_error_upper95": upper,
        **(
            {"estimated_error_note": err["estimated_error_note"]}
            if "estimated_error_note" in err
            else {}
        ),
        "sure": err["sure"],
        "rmse_per_key": err["rmse_per_key"],
        "rmse_per_key_upper95": err["rmse_per_key_upper95"],
        "raw_error": d * sigma * sigma,
        "raw_rmse_per_key": sigma,
        "intervals": {
            "level": level,
            "method": "exact" if bars.source == "exact" else "calibrated parametric bootstrap",
            "draws": bars.draws,
            "median_width": float(np.median(hi - lo)) if d else None,
            "raw_width": 2.0 * float(-special.ndtri((1.0 - level) / 2.0)) * sigma,
            "target": "average coverage over keys (docs/denoising.md)",
        },
        "params": json_ready({k: v for k, v in params.items() if not isinstance(v, dict)}),
    }
    if "candidates" in den.params:
        info["candidates"] = json_ready(
            [{"method": c["method"], "risk": c["risk"]} for c in den.params["candidates"]]
        )
    return info


def _mean_columns(
    plan: ReleasePlan,
    agg: Aggregate,
    noise_info: dict[str, Any],
    seed: int | None,
    timing: dict[str, float],
) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
    spec, sens, cal, domain = plan.spec, plan.sensitivity, plan.calibration, plan.domain
    d = domain.size
    ds, dc = sens.parts["sum"], sens.parts["count"]
    assert agg.sums is not None
    y = np.concatenate([agg.sums / ds, agg.counts / dc])
    rel = _release(cal, y, spec, seed)
    noisy = np.asarray(rel.values, dtype=np.float64)
    s_rel, c_rel = noisy[:d] * ds, noisy[d:] * dc
    sig_s, sig_c = rel.sigma * ds, rel.sigma * dc
    t = time.perf_counter()
    den_s = plan.denoiser(s_rel, sig_s)
    den_c = plan.denoiser(c_rel, sig_c)
    post = _post_rng((s_rel, sig_s), (c_rel, sig_c))
    bars_s, bars_c = den_s.error_bars(rng=post), den_c.error_bars(rng=post)
    timing["denoise_s"] = time.perf_counter() - t
    _candidate_timing(timing, den_s, den_c)
    joint = (1.0 + spec.output.level) / 2.0  # each part at (1+level)/2: a union bound
    lo_b, hi_b = float(spec.statistic.lower), float(spec.statistic.upper)  # type: ignore[arg-type]
    m = (lo_b + hi_b) / 2.0
    half = rel.noise.half_width((1.0 + spec.output.level) / 2.0)
    ws, wc = half * ds, half * dc

    def ratio(s: np.ndarray, c: np.ndarray) -> np.ndarray:
        ok = c >= 1.0
        out = np.full(d, np.nan)
        out[ok] = np.clip(m + s[ok] / c[ok], lo_b, hi_b)
        return out

    released = ratio(s_rel, c_rel)
    denoised = ratio(np.asarray(den_s.estimate), np.asarray(den_c.estimate))
    ok = c_rel >= 1.0
    sigma = np.full(d, np.nan)
    sigma[ok] = np.sqrt(sig_s**2 + (s_rel[ok] / c_rel[ok]) ** 2 * sig_c**2) / c_rel[ok]

    def ratio_range(
        s: np.ndarray, c: np.ndarray, ws: np.ndarray | float, wc: np.ndarray | float
    ) -> tuple[np.ndarray, np.ndarray]:
        """The range of m + S/C over S ∈ s ± ws, C ∈ c ± wc (all of [lo, hi] if C may be
        ≤ 0)."""
        lower, upper = np.full(d, lo_b), np.full(d, hi_b)
        ws_a, wc_a = np.broadcast_to(ws, (d,)), np.broadcast_to(wc, (d,))
        pos = c - wc_a > 0
        if pos.any():
            corners = np.stack(
                [
                    m + (s[pos] + a * ws_a[pos]) / (c[pos] + b * wc_a[pos])
                    for a in (-1.0, 1.0)
                    for b in (-1.0, 1.0)
                ]
            )
            lower[pos] = np.clip(corners.min(axis=0), lo_b, hi_b)
            upper[pos] = np.clip(corners.max(axis=0), lo_b, hi_b)
        return lower, upper

    lower, upper = ratio_range(s_rel, c_rel, ws, wc)
    est_s, est_c = np.asarray(den_s.estimate), np.asarray(den_c.estimate)
    den_lower, den_upper = ratio_range(
        est_s,
        est_c,
        bars_s.quantile(joint) * bars_s.scale,
        bars_c.quantile(joint) * bars_c.scale,
    )
    noise_info.update(
        {
            "sigma": rel.sigma,
            "sigma_note": "noise on the normalised pair (sum/Delta_sum, count/Delta_count); "
            "the column 'sigma' is the delta-method standard error of each mean",
            "sigma_sum": sig_s,
            "sigma_count": sig_c,
        }
    )
    columns = {
        **domain.key_columns(),
        "released": released,
        "denoised": denoised,
        "sigma": sigma,
        "lower": lower,
        "upper": upper,
        "denoised_lower": den_lower,
        "denoised_upper": den_upper,
        "sum_released": m * c_rel + s_rel,
        "count_released": c_rel,
    }
    # The mean's own error, by the delta method from the two parts' error scales, over the
    # keys whose denoised count is at least 1 (where a ratio is written).
    shown = est_c >= 1.0
    ratio_sq = np.zeros(d)
    ratio_sq[shown] = (est_s[shown] / est_c[shown]) ** 2

    def mean_rmse(scale_s: np.ndarray, scale_c: np.ndarray) -> float | None:
        if not shown.any():
            return None
        se2 = (scale_s[shown] ** 2 + ratio_sq[shown] * scale_c[shown] ** 2) / est_c[shown] ** 2
        return float(math.sqrt(np.mean(se2)))

    def inflate(bars: ErrorBars) -> np.ndarray:
        total = float(np.sum(bars.scale**2))
        return bars.scale * math.sqrt(bars.risk_upper(0.95) / total) if total > 0 else bars.scale

    raw = sigma[np.isfinite(sigma)]
    widths = (den_upper - den_lower)[ok]
    info = {
        "method": f"sum: {den_s.method}, count: {den_c.method}",
        "sum": _den_info(den_s, bars_s, sig_s, d, joint),
        "count": _den_info(den_c, bars_c, sig_c, d, joint),
        "rmse_per_key": mean_rmse(bars_s.scale, bars_c.scale),
        "rmse_per_key_upper95": mean_rmse(inflate(bars_s), inflate(bars_c)),
        "raw_rmse_per_key": float(math.sqrt(np.mean(raw**2))) if raw.size else None,
        "intervals": {
            "level": spec.output.level,
            "method": "the range of the ratio over the sum's and the count's intervals at "
            "(1+level)/2 (a union bound)",
            "draws": bars_c.draws,
            "median_width": float(np.median(widths)) if widths.size else None,
            "raw_width": float(np.median((upper - lower)[ok])) if ok.any() else None,
            "target": "average coverage over keys (docs/denoising.md)",
        },
        "note": "the mean's estimated error is the delta method on the denoised sum and count "
        "(their own estimates are under 'sum' and 'count'); the raw error is the RMS of the "
        "column 'sigma'",
    }
    return columns, info


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
