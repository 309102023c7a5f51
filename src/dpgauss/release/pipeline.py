"""From a table of records to a finished release: the orchestration of ``dpgauss release``.

:func:`run_release` runs the steps in this order; each step uses only what the steps before
it produced, and nothing is written unless every step succeeded:

1. **Validate** the spec (done by :class:`~dpgauss.release.spec.ReleaseSpec`), resolve the
   public domain (:func:`resolve_domain`) and derive the L2 sensitivity from the bounds
   (:mod:`dpgauss.release.sensitivity`).
2. **Calibrate**: a :class:`~dpgauss.noise.mechanisms.GaussianMechanism` for (ε, δ) at that
   sensitivity, and the μ-GDP charge of the release: Δ/σ for floating-point noise, the
   dominating μ of the noise law for the secure lattice sampler (which depends only on public
   quantities: ε, δ, Δ and the number of keys).
3. **Ledger check** — *before any data is read*: if the charge does not fit the dataset's
   remaining budget, :class:`~dpgauss.release.ledger.BudgetExceeded` is raised.  The output
   path is checked too (an existing output is never replaced unless ``overwrite``).
4. **Aggregate** in the engine (bounding and aggregation; :mod:`dpgauss.release.engine`),
   with a fresh secret salt from ``secrets``.  Malformed rows are dropped and counted, or stop
   the release if their column's policy is ``"fail"`` (nothing charged, nothing written).
5. **Charge** the ledger (atomic; refused if another release used the budget meanwhile).
6. **Noise**: the aggregate plus Gaussian noise from the secure sampler (``secure = true``,
   the default).  The unnoised aggregate never leaves this function.
7. **Denoise** (post-processing of the noisy vector with σ and the domain's public structure).
8. **Write** the table and the JSON report, each atomically (a temporary file in the same
   directory, fsynced, then renamed), and return a :class:`ReleaseResult`.

The output table has one row per key of the domain: ``key, released, denoised, sigma,
lower, upper`` (the interval covers the true bounded value with probability ≥ ``level``,
95 % by default, exactly for the noise law); graph domains add ``lat, lon`` of each node, a
``mean`` adds ``sum_released, count_released``.

Means.  A mean is released as a noisy centred sum ``S'`` and a noisy count ``C`` of the same
kept records (one Gaussian mechanism on the normalised pair; see
:mod:`dpgauss.release.sensitivity`), and ``released = clip(m + S'/C, lower, upper)`` where
``C ≥ 1`` (empty otherwise); ``sigma`` is the delta-method standard error
``√(σ_S² + (S'/C)² σ_C²)/C`` (an approximation, stated in the report), and ``[lower, upper]``
is the range of ``m + S/C`` over the two level-``(1+level)/2`` intervals of ``S'`` and ``C``,
clipped to the clamping bounds: it covers the true mean of the kept clamped values with
probability ≥ ``level`` (union bound), or is the whole ``[lower, upper]`` when the count's
interval reaches 0.  ``denoised`` is the same ratio of the denoised sum and count.

Row counters in the report are exact counts of the private data, for the data owner: they are
*not* differentially private and must not be published with the release.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import secrets
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TextIO

import numpy as np

from .. import __version__ as dpgauss_version
from ..denoise import Denoised
from ..noise.mechanisms import GaussianMechanism
from ..noise.release import Release
from ..privacy import classical_gaussian_sigma, gaussian_epsilon
from ..privacy.accounting import GaussianAccountant
from .engine import Aggregate, AggregationPlan, Engine, KeyDomain, get_engine
from .mapping import GraphMapper, load_graph
from .sensitivity import Sensitivity, derive_sensitivity
from .spec import ReleaseSpec

__all__ = [
    "LEDGER_ENV",
    "ReleaseResult",
    "bounded_aggregate",
    "resolve_domain",
    "run_release",
    "sensitivity_of",
]

#: Environment variable naming the ledger file when neither ``--ledger`` nor the spec does.
LEDGER_ENV = "DPGAUSS_LEDGER"

# Test hook (private, never a user option): with it set, "released" is the exact bounded
# aggregate, so tests can compare the whole pipeline's output with a reference exactly.
_NOISE_OFF = False


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


def resolve_domain(spec: ReleaseSpec) -> KeyDomain:
    """The public domain of ``spec``: its keys, their labels and its public structure."""
    d = spec.domain
    if d.kind == "values":
        labels = np.asarray(d.values, dtype=object)
        return KeyDomain("values", len(labels), labels)
    if d.kind == "range":
        start, stop, step = float(d.start), float(d.stop), float(d.step)  # type: ignore[arg-type]
        n = math.ceil((stop - start) / step)
        integral = all(float(x).is_integer() for x in (d.start, d.step)) and all(
            isinstance(x, int) for x in (d.start, d.step)
        )
        labels = (
            int(d.start) + int(d.step) * np.arange(n, dtype=np.int64)  # type: ignore[arg-type]
            if integral
            else start + step * np.arange(n, dtype=np.float64)
        )
        grid = (n,) if n >= 2 else None
        edges = np.stack([np.arange(n - 1), np.arange(1, n)], axis=1) if n >= 2 else None
        return KeyDomain("range", n, labels, edges=edges, grid=grid)
    graph = load_graph(str(d.graph))
    mapper = GraphMapper.from_graph(
        graph,
        mapping=d.mapping,
        cutoff=d.effective_cutoff,
        bandwidth=d.bandwidth,
        neighbors=d.neighbors,
        bbox=d.bbox,
    )
    return KeyDomain(
        "graph",
        graph.n,
        np.arange(graph.n, dtype=np.int64),
        mapper=mapper,
        edges=np.asarray(graph.edges),
        node_lat=np.asarray(graph.lat),
        node_lon=np.asarray(graph.lon),
    )


def sensitivity_of(spec: ReleaseSpec, domain: KeyDomain | None = None) -> Sensitivity:
    """The L2 sensitivity of ``spec``'s release, derived from its bounds."""
    domain = resolve_domain(spec) if domain is None else domain
    b, st = spec.bounds, spec.statistic
    return derive_sensitivity(
        st.kind,
        max_records_per_unit=b.max_records_per_unit,
        max_keys_per_unit=b.max_keys_per_unit,
        max_records_per_key=b.max_records_per_key,
        domain_size=domain.size,
        spread=domain.spread,
        lower=st.lower,
        upper=st.upper,
    )


# ------------------------------------------------------------------------ calibration


@dataclass(frozen=True, eq=False)
class _Calibration:
    mechanism: GaussianMechanism
    dim: int
    mu: float
    probe: Release


def _calibrate(spec: ReleaseSpec, sens: Sensitivity, d: int) -> _Calibration:
    p = spec.privacy
    dim = 2 * d if sens.statistic == "mean" else d
    delta = float(p.delta)  # type: ignore[arg-type]
    if p.epsilon is not None:
        eps = float(p.epsilon)
    else:
        # sigma is the noise on the released values (for a mean: on the count).
        sigma = float(p.sigma)  # type: ignore[arg-type]
        if sens.statistic == "mean":
            sigma /= sens.parts["count"]
        eps = float(gaussian_epsilon(sigma, delta, sens.l2))
    mech = GaussianMechanism(eps, delta, sens.l2)
    zeros = np.zeros(dim)
    probe = mech.release(zeros, rng="secure" if p.secure else np.random.default_rng(0))
    mu = float(GaussianAccountant().add_release(probe))
    return _Calibration(mech, dim, mu, probe)


# ---------------------------------------------------------------------------- ledger


def _ledger_path(spec: ReleaseSpec, ledger: str | os.PathLike[str] | None) -> Path:
    path = ledger if ledger is not None else spec.privacy.ledger
    if path is None:
        path = os.environ.get(LEDGER_ENV) or None
    if path is None:
        raise ValueError(
            f"[privacy] ledger is required: set it in the spec, pass --ledger FILE or set "
            f"${LEDGER_ENV} (create a budget first: dpgauss budget init DATASET --epsilon E "
            f"--delta D --ledger FILE)"
        )
    p = Path(os.fspath(path)).expanduser()
    if not p.exists():
        raise ValueError(
            f"no ledger at {str(p)!r}: create the budget of dataset "
            f"{spec.privacy.dataset!r} first (dpgauss budget init {spec.privacy.dataset} "
            f"--epsilon E --delta D --ledger {p})"
        )
    return p


def _precheck(path: Path, dataset: str, mu: float) -> Any:
    from .ledger import BudgetExceeded, Ledger

    with Ledger(path, create=False) as led:
        status = led.remaining(dataset)
    if mu > status.mu_remaining * (1.0 + 1e-12):
        raise BudgetExceeded(dataset, mu, status)
    return status


def _charge(path: Path, dataset: str, cal: _Calibration, label: str) -> tuple[Any, Any]:
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
        status = led.remaining(dataset)
    return entry, status


# ---------------------------------------------------------------------------- denoise


def _denoise(y: np.ndarray, sigma: float, domain: KeyDomain, spec: ReleaseSpec) -> Denoised:
    from .. import denoise as dn

    method, params = spec.denoise.method, dict(spec.denoise.params)
    if method == "none":
        return Denoised(y.copy(), y.size * sigma * sigma, "none", {})
    graph = None
    if domain.edges is not None:
        graph = dn.as_graph(domain.edges, domain.size)
    calls: dict[str, Callable[[], Denoised]] = {
        "auto": lambda: dn.auto(y, sigma, graph=graph, grid_shape=domain.grid, **params),
        "james_stein": lambda: dn.james_stein(y, sigma, **params),
        "soft_threshold": lambda: dn.soft_threshold(y, sigma, **{"threshold": "sure", **params}),
        "hard_threshold": lambda: dn.hard_threshold(y, sigma, **params),
        "wavelet": lambda: dn.wavelet_denoise(y, sigma, **params),
        "graph_wavelet": lambda: dn.graph_wavelet_denoise(y, sigma, graph, **params),
        "trend_filter": lambda: _trend_filter(y, sigma, graph, params),
    }
    try:
        return calls[method]()
    except (TypeError, ValueError) as exc:
        raise ValueError(f"[denoise] method = {method!r} failed: {exc}") from None


def _trend_filter(y: np.ndarray, sigma: float, graph: Any, params: dict[str, Any]) -> Denoised:
    from ..denoise.trend_filter import trend_filter

    return trend_filter(y, graph, **{"lam": "sure", "sigma": sigma, **params})


# ----------------------------------------------------------------------------- output


def _atomic_write(path: Path, write: Callable[[str], None], overwrite: bool) -> None:
    """Write via ``write(tmp)`` to a temporary file beside ``path``, fsync, then rename."""
    directory = path.parent if str(path.parent) else Path(".")
    tmp = str(directory / f".{path.name}.{secrets.token_hex(6)}.tmp")
    try:
        # Created with mode 0o666 & ~umask, like any new file (mkstemp would force 0o600).
        os.close(os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666))
    except OSError as exc:
        raise ValueError(f"cannot write {path}: {exc.strerror or exc}") from None
    try:
        write(tmp)
        with open(tmp, "rb+") as fh:
            os.fsync(fh.fileno())
        if overwrite:
            os.replace(tmp, path)
        else:
            try:
                os.link(tmp, path)  # atomic, and never replaces an existing file
            except FileExistsError:
                raise
            except OSError:  # no hard links here: rename if the path is still free
                if os.path.lexists(path):
                    raise FileExistsError(str(path)) from None
                os.replace(tmp, path)
            else:
                os.unlink(tmp)
        with contextlib.suppress(OSError):
            dfd = os.open(directory, os.O_RDONLY)
            try:
                os.fsync(dfd)
            finally:
                os.close(dfd)
    except FileExistsError:
        raise ValueError(f"{path} already exists (set [output] overwrite = true)") from None
    except OSError as exc:
        raise ValueError(f"cannot write {path}: {exc.strerror or exc}") from None
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)


def _write_table(path: Path, fmt: str, columns: dict[str, np.ndarray], overwrite: bool) -> None:
    if fmt == "parquet":
        try:
            import pyarrow as pa
            import pyarrow.parquet as pq
        except ImportError:  # pragma: no cover - the data extra is missing
            raise ValueError("Parquet output needs pyarrow: pip install 'dpgauss[data]'") from None

        def arrow(v: np.ndarray) -> Any:
            if v.dtype == object:
                return pa.array(v.tolist())
            return pa.array(v)

        table = pa.table({k: arrow(v) for k, v in columns.items()})
        _atomic_write(path, lambda tmp: pq.write_table(table, tmp), overwrite)
        return

    def text(v: Any) -> str:
        if isinstance(v, float | np.floating):
            return "" if not math.isfinite(v) else repr(float(v))
        if isinstance(v, np.integer):
            return str(int(v))
        return str(v)

    def write(tmp: str) -> None:
        import csv

        names = list(columns)
        with open(tmp, "w", newline="", encoding="utf-8") as fh:
            w = csv.writer(fh)
            w.writerow(names)
            for row in zip(*(columns[n].tolist() for n in names), strict=True):
                w.writerow([text(v) for v in row])

    _atomic_write(path, write, overwrite)


def _plot(
    path: Path, spec: ReleaseSpec, domain: KeyDomain, columns: dict[str, np.ndarray], chosen: str
) -> str:
    """Draw the release beside its table (graph: maps; range: a series); what happened."""
    if not spec.output.plot or domain.kind == "values":
        return "not drawn (values domain)" if spec.output.plot else "not drawn ([output] plot)"
    from ..heatmap import PlotUnavailableError, draw_graph_panels, draw_series, shared_scale

    what = spec.statistic.kind
    released, denoised = columns["released"], columns["denoised"]
    method = (
        spec.denoise.method
        if spec.denoise.method == chosen
        else (f"{spec.denoise.method} → {chosen}")
    )

    def draw(tmp: str) -> None:
        if domain.kind == "graph":
            assert domain.edges is not None
            draw_graph_panels(
                tmp,
                columns["lat"],
                columns["lon"],
                domain.edges,
                [("released", released), (f"denoised ({method})", denoised)],
                vmax=shared_scale([("denoised", denoised)]),  # the noise would swamp it
                label=f"{what} per node",
                title=spec.name,
            )
        else:
            draw_series(
                tmp,
                np.asarray(columns["key"], dtype=np.float64),
                [("released", released), (f"denoised ({method})", denoised)],
                lower=columns["lower"],
                upper=columns["upper"],
                label=what,
                title=spec.name,
            )

    try:
        _atomic_write(path, lambda tmp: draw(tmp), spec.output.overwrite)
    except PlotUnavailableError as exc:
        return f"not drawn: {exc}"
    return str(path)


def _json_ready(value: Any) -> Any:
    if isinstance(value, dict):
        return {str(k): _json_ready(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_json_ready(v) for v in value]
    if isinstance(value, np.ndarray):
        return _json_ready(value.tolist())
    if isinstance(value, np.generic):
        value = value.item()
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


# ----------------------------------------------------------------------------- result


@dataclass(frozen=True, eq=False)
class ReleaseResult:
    """A finished release: the table that was written, its report and where they are."""

    columns: dict[str, np.ndarray]
    report: dict[str, Any]
    output_path: str
    report_path: str
    summary: str = field(default="")


def _num(x: float | None) -> str:
    return "n/a" if x is None else f"{x:.4g}"


def _summary(report: dict[str, Any]) -> str:
    rows, sens, priv = report["rows"], report["sensitivity"], report["privacy"]
    den, led, out = report["denoise"], report["ledger"], report["output"]
    dropped = [
        f"{rows[k]:,} {label}"
        for k, label in (
            ("malformed_lines", "malformed lines"),
            ("outside_filter", "outside the [filter] window"),
            ("null_unit", "without unit"),
            ("invalid_domain", "invalid domain value"),
            ("invalid_value", "invalid value"),
            ("outside_domain", "outside the domain"),
        )
        if rows[k]
    ]
    bounded = ", ".join(f"{v:,} by {k}" for k, v in rows["dropped_by_bounds"].items())
    lines = [
        f"release   : {out['path']} ({out['rows']:,} keys, {out['format']}); report "
        f"{out['report']}" + (f"; plot {out['plot']}" if out["plot"].endswith(".png") else ""),
        f"rows      : {rows['read']:,} read"
        + (f"; dropped {', '.join(dropped)}" if dropped else "")
        + f"; {rows['in_domain']:,} in domain from {rows['units']:,} units; "
        f"{rows['kept']:,} kept" + (f" ({bounded} dropped)" if bounded else ""),
        f"sensitivity: {sens['summary']}",
        f"noise     : sigma={priv['sigma']:.6g} ({priv['mechanism']}); analytic sigma="
        f"{priv['analytic_sigma']:.6g}; classical sigma="
        + (
            f"{priv['classical_sigma']:.6g}"
            if priv["classical_sigma"] is not None
            else "n/a (Theorem 1 needs epsilon < 1)"
        )
        + f"; epsilon={priv['epsilon']:.6g} delta={priv['delta']:g}",
        f"denoise   : {den['method']}; estimated RMSE per key {_num(den['rmse_per_key'])} "
        f"(SURE; approx. 95 % upper bound {_num(den['rmse_per_key_upper95'])}) vs "
        f"{den['raw_rmse_per_key']:.6g} without denoising",
        f"ledger    : dataset {led['dataset']!r} charged mu={led['mu']:.6g}; remaining "
        f"mu={led['status']['mu_remaining']:.6g} (epsilon "
        f"{led['status']['epsilon_remaining']:.4g} at delta={led['status']['delta']:g})",
    ]
    if report.get("noise_off"):
        lines.insert(0, "WARNING: noise OFF (test hook): this output is NOT private")
    if not priv["secure"]:
        lines.append("WARNING: secure = false: floating-point noise, for experiments only")
    return "\n".join(lines)


# ------------------------------------------------------------------------------- run


def _engine(engine: str | Engine, options: dict[str, Any] | None) -> Engine:
    if isinstance(engine, str):
        return get_engine(engine, **(options or {}))
    return engine


def _check_columns(spec: ReleaseSpec, columns: dict[str, str]) -> None:
    names = list(columns)
    wanted = [("[unit] column", spec.unit.column)]
    d = spec.domain
    if d.kind == "graph":
        wanted += [("[domain] lat", d.lat), ("[domain] lon", d.lon)]
    else:
        wanted.append(("[domain] column", d.column))
    if spec.statistic.column is not None:
        wanted.append(("[statistic] column", spec.statistic.column))
    if spec.filter is not None:
        wanted.append(("[filter] column", spec.filter.column))
    for col in spec.bounds.record_columns or ():
        wanted.append(("[bounds] record_columns", col))
    shown = ", ".join(names[:30]) + (", ..." if len(names) > 30 else "")
    for key, col in wanted:
        if col not in columns:
            raise ValueError(f"{key} {col!r} is not a column of the source (columns: {shown})")


def _check_policies(spec: ReleaseSpec, agg: Aggregate) -> None:
    r = agg.rows
    checks = [
        (
            spec.source.on_malformed,
            r.malformed_lines,
            "[source] on_malformed",
            "CSV lines with the wrong number of fields",
        ),
        (
            spec.unit.on_null,
            r.null_unit,
            "[unit] on_null",
            f"rows without a unit id (column {spec.unit.column!r})",
        ),
        (
            spec.domain.on_invalid,
            r.invalid_domain,
            "[domain] on_invalid",
            "rows whose domain value or coordinates are missing, unparseable or out of range",
        ),
        (
            spec.statistic.on_invalid,
            r.invalid_value,
            "[statistic] on_invalid",
            f"rows whose value (column {spec.statistic.column!r}) is missing, unparseable or "
            "not finite",
        ),
    ]
    for policy, count, key, what in checks:
        if policy == "fail" and count:
            raise ValueError(
                f"{count:,} {what}; {key} = 'fail' stops the release (nothing was charged or "
                "written)"
            )


def run_release(
    spec: ReleaseSpec,
    *,
    engine: str | Engine = "duckdb",
    out: str | os.PathLike[str] | None = None,
    ledger: str | os.PathLike[str] | None = None,
    engine_options: dict[str, Any] | None = None,
    progress: TextIO | None = None,
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
    progress : a text stream (e.g. ``sys.stderr``) for one line per step with the elapsed
        time, and DuckDB's progress bar on long scans; None (default) is silent.

    Raises ``ValueError`` (or ``TypeError``) for every expected problem — the budget is
    exceeded (:class:`~dpgauss.release.ledger.BudgetExceeded`), the source cannot be read, a
    policy is ``"fail"`` and malformed rows were found, the output exists — with a one-line
    message; nothing is written then.
    """
    if not isinstance(spec, ReleaseSpec):
        raise TypeError(f"spec must be a ReleaseSpec; got {type(spec).__name__}")
    t0 = time.perf_counter()
    timing: dict[str, float] = {}
    out_path = out if out is not None else spec.output.path
    if out_path is None:
        raise ValueError("[output] path is required (or pass --out PATH)")
    out_p = Path(os.fspath(out_path)).expanduser()
    report_p = out_p.with_name(out_p.name + ".report.json")
    fmt = spec.output.file_format(str(out_p))
    if not out_p.parent.is_dir() and str(out_p.parent):
        raise ValueError(f"the output directory {str(out_p.parent)!r} does not exist")
    plot_p = out_p.with_name(out_p.name + ".png")
    drawn = spec.output.plot and spec.domain.kind != "values"
    if not spec.output.overwrite:
        for p in (out_p, report_p, *([plot_p] if drawn else [])):
            if p.exists():
                raise ValueError(f"{p} already exists (set [output] overwrite = true)")

    if progress is not None and engine == "duckdb":
        engine_options = {"progress": True, **(engine_options or {})}
    eng = _engine(engine, engine_options)

    def say(step: str) -> None:
        if progress is not None:
            progress.write(f"[{time.perf_counter() - t0:6.1f} s] {step}\n")
            progress.flush()

    # 1-2: domain, sensitivity, calibration (public quantities only).
    say("domain, sensitivity and calibration")
    domain = resolve_domain(spec)
    sens = sensitivity_of(spec, domain)
    cal = _calibrate(spec, sens, domain.size)
    timing["prepare_s"] = time.perf_counter() - t0

    # 3: the ledger check, before any data is read.
    ledger_p = _ledger_path(spec, ledger)
    _precheck(ledger_p, spec.privacy.dataset, cal.mu)

    # 4: aggregate in the engine.
    say(f"reading, bounding and aggregating ({getattr(eng, 'name', 'engine')})")
    t = time.perf_counter()
    _check_columns(spec, eng.describe(spec))
    offset = 0.0
    if spec.statistic.kind == "mean":
        offset = (float(spec.statistic.lower) + float(spec.statistic.upper)) / 2.0  # type: ignore[arg-type]
    plan = AggregationPlan(spec, domain, secrets.randbits(64), offset)
    agg = eng.aggregate(plan)
    timing["aggregate_s"] = time.perf_counter() - t
    _check_policies(spec, agg)

    # 5: charge.
    label = spec.privacy.label or (
        f"{spec.name or spec.statistic.kind} release of {domain.size} keys "
        f"(sensitivity {sens.l2:.6g}, {cal.probe.mechanism})"
    )
    entry, status = _charge(ledger_p, spec.privacy.dataset, cal, label)

    # 6-7: noise and denoise.
    say(f"charged; adding noise and denoising ({spec.denoise.method}, {domain.size:,} keys)")
    t = time.perf_counter()
    columns, noise_info, den_info = _noise_and_denoise(spec, sens, cal, domain, agg)
    timing["noise_denoise_s"] = time.perf_counter() - t

    # 8: write.
    report = {
        "dpgauss_version": dpgauss_version,
        "created": datetime.now(UTC).isoformat(),
        "engine": getattr(eng, "name", type(eng).__name__),
        "spec": spec.to_dict(),
        "domain": {"kind": domain.kind, "size": domain.size},
        "sensitivity": {**sens.as_dict(), "summary": sens.summary()},
        "privacy": noise_info,
        "rows": {
            **agg.rows.as_dict(),
            "note": "exact counts of the private data, for the data owner: not differentially "
            "private, do not publish",
        },
        "denoise": den_info,
        "ledger": {
            "path": str(ledger_p.absolute()),
            "dataset": spec.privacy.dataset,
            "charge_id": entry.id,
            "mu": entry.mu,
            "label": entry.label,
            "status": status.as_dict(),
        },
        "output": {
            "path": str(out_p),
            "report": str(report_p),
            "format": fmt,
            "rows": domain.size,
            "columns": list(columns),
        },
        "timing": timing,
    }
    if _NOISE_OFF:
        report["noise_off"] = True
    say("writing the table, the plot and the report")
    _write_table(out_p, fmt, columns, spec.output.overwrite)
    report["output"]["plot"] = _plot(plot_p, spec, domain, columns, str(den_info["method"]))
    text = json.dumps(_json_ready(report), indent=2, allow_nan=False)
    _atomic_write(report_p, lambda tmp: Path(tmp).write_text(text + "\n"), spec.output.overwrite)
    timing["total_s"] = time.perf_counter() - t0
    return ReleaseResult(columns, report, str(out_p), str(report_p), _summary(report))


def _release(cal: _Calibration, y: np.ndarray, spec: ReleaseSpec) -> Release:
    if _NOISE_OFF:
        p = cal.probe
        return Release(y.copy(), p.sigma, p.epsilon, p.delta, p.sensitivity, p.mechanism, p.noise)
    p = spec.privacy
    if p.secure:
        rel = cal.mechanism.release(y, rng="secure")
    else:
        seed = p.seed if p.seed is not None else secrets.randbits(128)
        rel = cal.mechanism.release(y, rng=np.random.default_rng(seed))
    if rel.noise != cal.probe.noise:  # the charged law must be the law used
        raise RuntimeError("internal error: the release's noise law differs from the charged one")
    return rel


def _noise_and_denoise(
    spec: ReleaseSpec, sens: Sensitivity, cal: _Calibration, domain: KeyDomain, agg: Aggregate
) -> tuple[dict[str, np.ndarray], dict[str, Any], dict[str, Any]]:
    level = spec.output.level
    d = domain.size
    stat = sens.statistic
    eps, delta = cal.mechanism.epsilon, cal.mechanism.delta
    classical = classical_gaussian_sigma(eps, delta, sens.l2) if 0.0 < eps < 1.0 else None
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
        rel = _release(cal, y, spec)
        values = np.asarray(rel.values, dtype=np.float64)
        den = _denoise(values, rel.sigma, domain, spec)
        lower, upper = rel.interval(level)
        noise_info["sigma"] = rel.sigma
        noise_info["interval_half_width"] = rel.noise.half_width(level)
        columns = {
            "key": domain.labels,
            "released": values,
            "denoised": np.asarray(den.estimate, dtype=np.float64),
            "sigma": np.full(d, rel.sigma),
            "lower": np.asarray(lower, dtype=np.float64),
            "upper": np.asarray(upper, dtype=np.float64),
        }
        den_info = _den_info(den, rel.sigma, d)
    else:
        columns, den_info = _mean_columns(spec, sens, cal, domain, agg, noise_info)
    if domain.node_lat is not None:
        columns["lat"] = domain.node_lat
        columns["lon"] = domain.node_lon  # type: ignore[assignment]
    return columns, noise_info, den_info


def _den_info(den: Denoised, sigma: float, d: int) -> dict[str, Any]:
    risk = den.risk if den.risk is not None else float("nan")
    params = {k: v for k, v in den.params.items() if k != "candidates"}
    # SURE is unbiased but noisy: for an estimator far from the identity its standard
    # deviation is about σ²√(2d) (that of ‖y − ŷ‖² with ŷ nearly fixed); the identity's SURE
    # dσ² is exact.  The one-sided 95 % bound uses that approximation.
    sd = 0.0 if den.method in ("identity", "none") else sigma * sigma * math.sqrt(2.0 * d)
    info: dict[str, Any] = {
        "method": den.method,
        "estimated_error": risk,
        "estimated_error_sd": sd,
        "rmse_per_key": math.sqrt(max(risk, 0.0) / d) if math.isfinite(risk) and d else None,
        "rmse_per_key_upper95": math.sqrt(max(risk + 1.645 * sd, 0.0) / d)
        if math.isfinite(risk) and d
        else None,
        "raw_error": d * sigma * sigma,
        "raw_rmse_per_key": sigma,
        "params": _json_ready({k: v for k, v in params.items() if not isinstance(v, dict)}),
    }
    if "candidates" in den.params:
        info["candidates"] = _json_ready(
            [{"method": c["method"], "risk": c["risk"]} for c in den.params["candidates"]]
        )
    return info


def _mean_columns(
    spec: ReleaseSpec,
    sens: Sensitivity,
    cal: _Calibration,
    domain: KeyDomain,
    agg: Aggregate,
    noise_info: dict[str, Any],
) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
    d = domain.size
    ds, dc = sens.parts["sum"], sens.parts["count"]
    assert agg.sums is not None
    y = np.concatenate([agg.sums / ds, agg.counts / dc])
    rel = _release(cal, y, spec)
    noisy = np.asarray(rel.values, dtype=np.float64)
    s_rel, c_rel = noisy[:d] * ds, noisy[d:] * dc
    sig_s, sig_c = rel.sigma * ds, rel.sigma * dc
    den_s = _denoise(s_rel, sig_s, domain, spec)
    den_c = _denoise(c_rel, sig_c, domain, spec)
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
    lower, upper = np.full(d, lo_b), np.full(d, hi_b)
    pos = c_rel - wc > 0
    if pos.any():
        corners = np.stack(
            [
                m + (s_rel[pos] + a * ws) / (c_rel[pos] + b * wc)
                for a in (-1.0, 1.0)
                for b in (-1.0, 1.0)
            ]
        )
        lower[pos] = np.clip(corners.min(axis=0), lo_b, hi_b)
        upper[pos] = np.clip(corners.max(axis=0), lo_b, hi_b)
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
        "key": domain.labels,
        "released": released,
        "denoised": denoised,
        "sigma": sigma,
        "lower": lower,
        "upper": upper,
        "sum_released": m * c_rel + s_rel,
        "count_released": c_rel,
    }
    info = {
        "method": f"sum: {den_s.method}, count: {den_c.method}",
        "sum": _den_info(den_s, sig_s, d),
        "count": _den_info(den_c, sig_c, d),
        "rmse_per_key": _den_info(den_c, sig_c, d)["rmse_per_key"],
        "rmse_per_key_upper95": _den_info(den_c, sig_c, d)["rmse_per_key_upper95"],
        "raw_rmse_per_key": sig_c,
        "note": "estimated errors are those of the centred sum and of the count; the mean is "
        "their ratio",
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
    domain = resolve_domain(spec)
    eng = _engine(engine, engine_options)
    offset = 0.0
    if spec.statistic.kind == "mean":
        offset = (float(spec.statistic.lower) + float(spec.statistic.upper)) / 2.0  # type: ignore[arg-type]
    plan = AggregationPlan(spec, domain, secrets.randbits(64) if salt is None else salt, offset)
    return eng.aggregate(plan)
