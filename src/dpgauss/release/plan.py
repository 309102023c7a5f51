"""The plan of a release: everything that can fail, checked before the ledger is touched.

:func:`plan_release` turns a spec into a :class:`ReleasePlan` using public information only
— the spec, the source's schema (never a record), the ledger, the file system and the
installed packages.  After it returns, a release can only fail for reasons that do not
depend on the data (the budget spent meanwhile by another process, a full disk, a kill),
so that *no record can make a release fail, change its shape or its messages* (a release
is a total function of the data).  What it checks, in order:

1. the domain, the sensitivity derived from the bounds and the calibration of the noise,
   whose law is known before any noise is drawn;
2. the ledger: a secure release needs one, holding the dataset's budget, with room for
   this release's μ; a floating-point (``secure = false``) release is an experiment for
   public or synthetic data and is refused when a ledger is given — it is never charged;
3. the denoiser: its keyword arguments (``[denoise] params``) bind to its signature and
   its optional packages import;
4. the source's columns (the engine's ``describe``: metadata or the CSV header only);
5. the outputs (:class:`~dpgauss.release.outputs.OutputGroup`): the table, the report and the
   plot (drawn if asked for, the domain has structure to draw and matplotlib imports — all
   decided here, so the set of files never depends on the data), and the confidential
   diagnostics file; none may be a link, an existing file without ``overwrite``, the
   source, the ledger or the spec.
"""

from __future__ import annotations

import glob
import os
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from .._optional import install_hint
from ..denoise import Denoised
from .domain import KeyDomain
from .engines import Engine, get_engine
from .outputs import OutputError, OutputGroup, probe_directory
from .report import public_spec
from .sensitivity import Sensitivity
from .spec import ReleaseSpec, read_columns

__all__ = [
    "LEDGER_ENV",
    "Denoiser",
    "ReleasePlan",
    "diagnostics_dir",
    "plan_release",
    "source_files",
    "value_offset",
]

#: Environment variable naming the ledger file when neither ``--ledger`` nor the spec does.
LEDGER_ENV = "DPGAUSS_LEDGER"

#: ``(y, sigma) -> Denoised``: the planned denoiser, structure and parameters bound.
Denoiser = Callable[[np.ndarray, float], Denoised]


@dataclass(frozen=True, eq=False)
class ReleasePlan:
    """A checked release (module docstring): what :func:`~.pipeline.run_release` executes.

    ``ledger`` is None for an uncharged floating-point experiment.  ``plot`` is None when no
    plot is drawn, and ``plot_note`` says why.  ``diagnostics_dir`` is where the
    confidential diagnostics file goes.
    """

    spec: ReleaseSpec
    domain: KeyDomain
    sensitivity: Sensitivity
    calibration: Any
    engine: Engine
    ledger: Path | None
    outputs: OutputGroup
    table: Path
    report: Path
    plot: Path | None
    plot_note: str
    file_format: str
    diagnostics_dir: Path
    denoiser: Denoiser
    value_offset: float
    public_spec: dict[str, Any]

    @property
    def charged(self) -> bool:
        """Whether the release is charged to a ledger (every secure release is)."""
        return self.ledger is not None


def source_files(spec: ReleaseSpec) -> list[Path]:
    """The local files the source reads (globs expanded), for the output checks."""
    src = spec.source
    files: list[Path] = []
    for pattern in src.paths:
        matches = glob.glob(os.path.expanduser(pattern), recursive=True)
        files += [Path(m) for m in (matches or [pattern]) if os.path.exists(m)]
    if src.database is not None and os.path.exists(src.database):
        files.append(Path(src.database))
    return files


def _ledger_path(spec: ReleaseSpec, ledger: str | os.PathLike[str] | None) -> Path | None:
    given = ledger if ledger is not None else spec.privacy.ledger
    if not spec.privacy.secure:
        if given is not None:
            raise ValueError(
                "[privacy] secure = false is floating-point noise, for experiments on public "
                "or synthetic data only: it is not differentially private and is never "
                "charged to a ledger; remove the ledger (--ledger or [privacy] ledger) or "
                "set secure = true"
            )
        return None  # $DPGAUSS_LEDGER is not consulted for an experiment
    path = given if given is not None else (os.environ.get(LEDGER_ENV) or None)
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


def _precheck(path: Path, dataset: str, mu: float) -> None:
    from .ledger import BudgetExceeded, Ledger

    with Ledger(path, create=False) as led:
        status = led.remaining(dataset)
    if mu > status.mu_remaining * (1.0 + 1e-12):
        raise BudgetExceeded(dataset, mu, status)


# ----------------------------------------------------------------------------- denoiser


def plan_denoiser(spec: ReleaseSpec, domain: KeyDomain) -> Denoiser:
    """The denoiser of ``spec`` with its parameters checked (module docstring, step 3).

    The denoiser comes from :mod:`dpgauss.denoise.registry`; the release passes it ``y``,
    ``σ`` and the domain's public structure (its graph and grid) itself.
    """
    from .. import denoise as dn
    from ..denoise import registry

    method, params = spec.denoise.method, dict(spec.denoise.params)
    e = registry.entry(method)
    try:
        fn = e.load()
    except ImportError as exc:
        raise ValueError(
            f"[denoise] method = {method!r}: {exc} (from a clone of dpgauss)"
        ) from None
    params = {**registry.RELEASE_DEFAULTS.get(method, {}), **params}
    taken = sorted(set(params) & {*registry.OWN, "graph", "grid_shape"})
    if taken:
        raise ValueError(
            f"[denoise] params may not set {', '.join(taken)}: the release passes them itself"
        )
    bad = sorted(set(params) - set(e.params))
    if bad:
        raise ValueError(
            f"[denoise] params of method = {method!r} has unknown keys {', '.join(map(repr, bad))} "
            f"(allowed: {', '.join(e.params) or 'none'})"
        )
    graph = dn.as_graph(domain.edges, domain.size) if domain.edges is not None else None
    structure = dn.Structure(graph=graph, grid=domain.grid)

    def run(y: np.ndarray, sigma: float) -> Denoised:
        try:
            return fn(y, sigma, structure, **params)
        except (TypeError, ValueError) as exc:
            raise ValueError(f"[denoise] method = {method!r} failed: {exc}") from None

    return run


# -------------------------------------------------------------------------------- plan


def _check_columns(spec: ReleaseSpec, columns: dict[str, str]) -> None:
    names = list(columns)
    wanted = read_columns(spec)
    shown = ", ".join(names[:30]) + (", ..." if len(names) > 30 else "")
    for key, col in wanted:
        if col not in columns:
            raise ValueError(f"{key} {col!r} is not a column of the source (columns: {shown})")


def _plot_decision(spec: ReleaseSpec, domain: KeyDomain) -> str | None:
    """None if the plot is drawn, else why not (public facts only)."""
    if not spec.output.plot:
        return "not drawn ([output] plot = false)"
    if domain.kind == "values":
        return "not drawn (values domain)"
    if len(domain.axes) > 1 and not (domain.grid is not None and len(domain.grid) == 2):
        return "not drawn (a product of several axes: no one picture of it is built yet)"
    for a in domain.axes:  # matplotlib's dates are years 1 … 9999, margins included
        if a.spec.is_time and a.size:
            first, last = str(a.labels[0])[:4], str(a.labels[-1])[:4]
            if int(first) < 2 or int(last) > 9997:
                return "not drawn (timestamps within a year of 0001 or 9999: matplotlib's dates)"
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        return f"not drawn: matplotlib is not installed ({install_hint('plot')})"
    return None


def value_offset(spec: ReleaseSpec) -> float:
    """What the engine subtracts from every clamped value: the centre of ``[lower, upper]``
    for a mean (the sum is released centred), 0 otherwise."""
    if spec.statistic.kind != "mean":
        return 0.0
    return (float(spec.statistic.lower) + float(spec.statistic.upper)) / 2.0  # type: ignore[arg-type]


def make_engine(engine: str | Engine, options: dict[str, Any] | None) -> Engine:
    """The engine object for ``engine`` (a name or an engine already built)."""
    if isinstance(engine, str):
        return get_engine(engine, **(options or {}))
    return engine


def plan_release(
    spec: ReleaseSpec,
    *,
    engine: str | Engine = "duckdb",
    out: str | os.PathLike[str] | None = None,
    ledger: str | os.PathLike[str] | None = None,
    engine_options: dict[str, Any] | None = None,
    spec_path: str | os.PathLike[str] | None = None,
) -> ReleasePlan:
    """Check everything a release of ``spec`` needs (module docstring); nothing is charged.

    Raises ``ValueError``/``TypeError`` with a one-line message naming what is wrong;
    :class:`~dpgauss.release.ledger.BudgetExceeded` if the release does not fit.
    """
    from .domain import resolve_domain
    from .pipeline import _calibrate, sensitivity_of

    if not isinstance(spec, ReleaseSpec):
        raise TypeError(f"spec must be a ReleaseSpec; got {type(spec).__name__}")
    out_path = out if out is not None else spec.output.path
    if out_path is None:
        raise ValueError("[output] path is required (or pass --out PATH)")
    table = Path(os.path.abspath(os.path.expanduser(os.fspath(out_path))))
    report = table.with_name(table.name + ".report.json")
    fmt = spec.output.file_format(str(table))

    # 1. domain, sensitivity, calibration: public quantities only.
    domain = resolve_domain(spec)
    sens = sensitivity_of(spec, domain)
    cal = _calibrate(spec, sens, domain.size)

    # 2. the ledger (before the data is read).
    ledger_p = _ledger_path(spec, ledger)
    if ledger_p is not None:
        _precheck(ledger_p, spec.privacy.dataset, cal.mu)

    # 3. the denoiser and its error bars, run once on zeros with the planned σ (public
    #    inputs only), so that a parameter value it refuses is refused here, not after the
    #    charge.
    denoiser = plan_denoiser(spec, domain)
    # a mean denoises its sum and its count, each with its own σ
    parts = ("sum", "count") if sens.statistic == "mean" else (None,)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for part in parts:
            sigma = float(cal.probe.sigma) * (sens.parts[part] if part is not None else 1.0)
            denoiser(np.zeros(domain.size), sigma).error_bars(draws=2, rng=0)
    if fmt == "parquet":
        try:
            import pyarrow.parquet  # noqa: F401
        except ImportError:
            raise ValueError(
                "[output] format 'parquet' needs pyarrow: " + install_hint("data")
            ) from None

    # 4. the source's columns.
    eng = make_engine(engine, engine_options)
    _check_columns(spec, eng.describe(spec))

    # 5. the outputs.
    note = _plot_decision(spec, domain)
    plot = None if note is not None else table.with_name(table.name + ".png")
    protected = source_files(spec)
    if ledger_p is not None:
        protected += [ledger_p, Path(f"{ledger_p}-wal"), Path(f"{ledger_p}-shm")]
    if spec_path is not None:
        protected.append(Path(os.fspath(spec_path)))
    paths = [table, report, *([plot] if plot is not None else [])]
    diag_dir = diagnostics_dir(ledger_p)
    group = OutputGroup(
        paths, overwrite=spec.output.overwrite, protected=protected, forbidden_dirs=[diag_dir]
    )
    _check_diagnostics_dir(diag_dir)
    group.check()
    return ReleasePlan(
        spec=spec,
        domain=domain,
        sensitivity=sens,
        calibration=cal,
        engine=eng,
        ledger=ledger_p,
        outputs=group,
        table=table,
        report=report,
        plot=plot,
        plot_note=note or "",
        file_format=fmt,
        diagnostics_dir=diag_dir,
        denoiser=denoiser,
        value_offset=value_offset(spec),
        public_spec=public_spec(spec.to_dict()),  # built here: nothing of it fails later
    )


def diagnostics_dir(ledger: Path | None) -> Path:
    """Where the confidential diagnostics of a release go: ``<ledger>.diagnostics/`` beside
    the ledger (the data owner's side), or, for an uncharged experiment,
    ``$XDG_STATE_HOME/dpgauss/diagnostics`` (default ``~/.local/state/dpgauss/diagnostics``)
    — never the directory of the published files."""
    if ledger is not None:
        return ledger.absolute().with_name(ledger.name + ".diagnostics")
    state = os.environ.get("XDG_STATE_HOME") or os.path.join(
        os.path.expanduser("~"), ".local", "state"
    )
    return Path(state).absolute() / "dpgauss" / "diagnostics"


def _check_diagnostics_dir(directory: Path) -> None:
    if os.path.islink(directory):
        raise OutputError(f"the diagnostics directory {directory} is a symbolic link; refusing")
    if os.path.lexists(directory) and not directory.is_dir():
        raise OutputError(f"the diagnostics directory {directory} exists and is not a directory")
    try:
        directory.mkdir(mode=0o700, parents=True, exist_ok=True)
    except OSError as exc:
        raise OutputError(
            f"cannot create the diagnostics directory {directory}: {exc.strerror or exc}"
        ) from None
    probe_directory(directory)
