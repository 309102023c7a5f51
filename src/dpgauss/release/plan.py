"""The plan of a release: everything that can fail, checked before the ledger is touched.

:func:`plan_release` turns a spec into a :class:`ReleasePlan` using public information only
— the spec, the source's schema (never a record), the ledger, the file system and the
installed packages.  After it returns, a release can only fail for reasons that do not
depend on the data (the budget spent meanwhile by another process, a full disk, a kill),
so that *no record can make a release fail, change its shape or its messages* (a release
is a total function of the data).  What it checks, in order:

1. the domain, the sensitivity derived from the bounds (:func:`sensitivity_of`) and the
   calibration of the noise (:func:`calibrate`, a typed :class:`Calibration`), whose law
   and μ-GDP charge are known before any noise is drawn;
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
import math
import os
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from .._optional import install_hint, optional, require
from ..denoise import Denoised, Structure
from ..errors import SettingError
from ..noise.mechanisms import GaussianMechanism
from ..noise.release import NoiseLaw, NoisePlan
from ..privacy import analytic_gaussian_sigma, gaussian_delta, gaussian_epsilon
from ..privacy.accounting import GaussianAccountant
from ..privacy.events import GaussianEvent, GdpEvent, ThresholdEvent
from .domains.key_domain import KeyDomain, resolve_domain
from .engines import Engine, get_engine
from .groups import Groups, read_groups
from .history import History, joint_denoiser, load_history
from .outputs import OutputError, OutputGroup, cell_text, probe_directory
from .report import public_spec
from .selection import Selection, calibrate_selection, selection_sensitivity
from .sensitivity import Sensitivity, derive_sensitivity
from .series import Period, parse_period, period_path, period_spec
from .spec import MAX_EPSILON, ReleaseSpec, duration_us, read_columns

if TYPE_CHECKING:
    from .levels_plan import LevelsPlan

__all__ = [
    "LEDGER_ENV",
    "RELEASE_ROUNDING_COST",
    "SENSITIVITY_RANGE",
    "SIGMA_RANGE",
    "Calibration",
    "Denoiser",
    "ReleasePlan",
    "calibrate",
    "calibrate_discovered",
    "diagnostics_dir",
    "noise_scales",
    "plan_release",
    "sensitivity_of",
    "source_files",
    "value_offset",
]

#: Environment variable naming the ledger file when neither ``--ledger`` nor the spec does.
LEDGER_ENV = "DPGAUSS_LEDGER"

#: ``(y, sigma) -> Denoised``: the planned denoiser, structure and parameters bound.
Denoiser = Callable[[np.ndarray, float], Denoised]

#: A release's sensitivities and noise standard deviations (each in the units of its values)
#: lie in these ranges: there the secure sampler's grid (about Δ/100), the released values and
#: the denoisers' sums of squares over up to 5e7 keys are finite and non-zero.  Outside, the
#: release is refused with a one-line error before anything is charged.
SENSITIVITY_RANGE = (1e-100, 1e100)
SIGMA_RANGE = (1e-100, 1e100)

#: The rounding cost of a secure real-valued release's grid (sums, means): the grid is the
#: largest power of two with γ√n ≤ 2^-10·Δ (n the keys a unit can change), so rounding
#: costs 0.05-0.1 % of σ; values must stay below 2^51·γ (:mod:`dpgauss.noise.lattice`).
RELEASE_ROUNDING_COST = 2.0**-10


# -------------------------------------------------------------------------- sensitivity


def sensitivity_of(spec: ReleaseSpec, domain: KeyDomain | None = None) -> Sensitivity:
    """The L2 sensitivity of ``spec``'s release, derived from its bounds.

    Raises ``ValueError`` naming ``[statistic] lower/upper`` when a part's sensitivity is not
    a finite double or lies outside ``[1e-100, 1e100]`` (see :data:`SENSITIVITY_RANGE`).
    """
    domain = resolve_domain(spec) if domain is None else domain
    if domain.kind == "discovered":  # over the Δ₀ keys a unit can create
        return selection_sensitivity(spec)
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
        keys_per_record=domain.mapper.neighbors if domain.spread else None,  # type: ignore[union-attr]
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


# -------------------------------------------------------------------------- calibration


@dataclass(frozen=True, eq=False)
class Calibration:
    """The noise of a release, calibrated from public quantities only (:func:`calibrate`).

    ``mechanism`` is the Gaussian mechanism (its σ, ε, δ and L2 sensitivity Δ, on the
    normalised pair ``(S/Δ_S, C/Δ_C)`` for a mean), ``dim`` the length of the noised vector
    (``2d`` for a mean), ``secure`` whether the noise is drawn by the secure sampler (else
    seeded floating-point noise, never charged), ``probe`` the noise law and label of the
    release computed without drawing noise, and ``mu`` its μ-GDP charge (at most
    ``gdp_mu(ε, δ)`` for a secure law, exactly Δ/σ for continuous noise).
    """

    mechanism: GaussianMechanism
    dim: int
    mu: float
    probe: NoisePlan
    secure: bool
    #: a zoom level's true sensitivity, when the mechanism is calibrated at a larger,
    #: effective one (:mod:`dpgauss.release.levels_plan`): the charge is at this one
    charged_sensitivity: float | None = None
    #: keys not known in advance (:mod:`dpgauss.release.selection`): the threshold and the
    #: selection's η, charged beside μ; None for a public domain
    selection: Selection | None = None
    #: the secure law's options (``changed``, ``integer``, ``cost``), passed to
    #: ``mechanism.release`` so that the law drawn is the law planned and charged
    options: dict[str, Any] = field(default_factory=dict)

    @property
    def sigma(self) -> float:
        """The noise standard deviation (of the mechanism: on the normalised pair for a mean)."""
        return float(self.mechanism.sigma)

    @property
    def epsilon(self) -> float:
        """The ε of the guarantee (ε = 0 when σ was given above the (0, δ) noise)."""
        return float(self.mechanism.epsilon)

    @property
    def delta(self) -> float:
        """The δ of the guarantee (with a selection: of the counts and the selection)."""
        if self.selection is not None:
            return self.selection.delta_total
        return float(self.mechanism.delta)

    @property
    def sensitivity(self) -> float:
        """The L2 sensitivity Δ the mechanism is calibrated for."""
        return float(self.mechanism.sensitivity)

    @property
    def noise(self) -> NoiseLaw:
        """The exact law of the noise the release adds (the law that is charged)."""
        return self.probe.noise

    @property
    def label(self) -> str:
        """The mechanism's label (e.g. the secure sampler's name), for the report."""
        return str(self.probe.mechanism)

    @property
    def event(self) -> GaussianEvent | GdpEvent | ThresholdEvent:
        """The charge of the release, a typed event (:mod:`dpgauss.privacy.events`) that the
        ledger composes: continuous Gaussian noise is exactly Δ/σ-GDP
        (:class:`~dpgauss.privacy.events.GaussianEvent` of σ and Δ); a secure law is charged
        its dominating μ (:class:`~dpgauss.privacy.events.GdpEvent`, ``mu``); with a
        selection, μ beside its η (:class:`~dpgauss.privacy.events.ThresholdEvent`)."""
        if self.selection is not None:
            return self.selection.event(self.mu)
        if self.noise.name == "gaussian":
            sens = self.charged_sensitivity or self.mechanism.sensitivity
            return GaussianEvent(self.mechanism.sigma, sens)
        return GdpEvent(self.mu)


def calibrate_discovered(spec: ReleaseSpec, sens: Sensitivity) -> Calibration:
    """The calibration of a discovered domain (:mod:`dpgauss.release.selection`): the
    counts' noise and μ, and the selection that the charge's η comes from."""
    mech, mu, probe, sel = calibrate_selection(spec, sens)
    lo, hi = SIGMA_RANGE
    if not lo <= mech.sigma <= hi:
        raise ValueError(
            f"[privacy] epsilon = {mech.epsilon:g}, delta = {sel.delta:g} put noise "
            f"{mech.sigma:.6g} on the counts, outside the supported [{lo:g}, {hi:g}]"
        )
    return Calibration(mech, probe.dim, mu, probe, bool(spec.privacy.secure), selection=sel)


def noise_scales(sens: Sensitivity, sigma: float) -> dict[str, float]:
    """The noise standard deviation on each released part, in that part's units."""
    if sens.statistic != "mean":
        return {sens.statistic: sigma}
    # A mean's mechanism is on the normalised pair (S'/Δ_S, C/Δ_C): σ·Δ on each part.
    return {part: sigma * value for part, value in sens.parts.items()}


def calibrate(spec: ReleaseSpec, sens: Sensitivity, d: int) -> Calibration:
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
        for part, s in noise_scales(sens, sigma).items():
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
    for part, s in noise_scales(sens, mech.sigma).items():
        if not lo <= s <= hi:
            raise ValueError(
                f"[privacy] epsilon = {eps:g}, delta = {delta:g} put noise {s:.6g} on the "
                f"{part} (sensitivity {sens.parts[part]:.6g}), outside the supported "
                f"[{lo:g}, {hi:g}]: use clamping bounds ([statistic] lower/upper) of a moderate "
                "scale, tighter [bounds], or another epsilon"
            )
    # The law and label of the release, without drawing noise; a secure law's charge is
    # at most gdp_mu(eps, delta), so a budget of the spec's own (eps, delta) takes it.
    # Integer counts get the exact discrete Gaussian at Δ (no rounding); real values the
    # lattice over the keys a unit can change, at a rounding cost of RELEASE_ROUNDING_COST.
    options: dict[str, Any] = {}
    if p.secure:
        options = {"changed": sens.changed, "integer": sens.integer, "cost": RELEASE_ROUNDING_COST}
    try:
        probe = mech.noise_plan(dim, secure=bool(p.secure), **options)
        mu = float(GaussianAccountant().add_release(probe))
    except (ValueError, FloatingPointError) as exc:
        # The secure lattice sampler's limits: noise far above the grid (tiny epsilon and
        # delta), or a noise law whose mu-GDP charge cannot be certified (huge epsilon).
        raise ValueError(
            f"[privacy] the secure sampler cannot serve epsilon = {eps:g}, delta = {delta:g} "
            f"(noise sigma = {mech.sigma:.6g} at sensitivity {sens.l2:.6g}): "
            f"{' '.join(str(exc).split())}; use a moderate epsilon and delta"
        ) from None
    return Calibration(mech, dim, mu, probe, bool(p.secure), options=options)


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
    calibration: Calibration
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
    period: Period | None = None
    history: History | None = None
    history_denoiser: Denoiser | None = None
    #: ``[[levels]]``: the coarser levels, their noise and the one composed charge
    #: (:mod:`dpgauss.release.levels_plan`); None for a release of one level
    levels: LevelsPlan | None = None
    #: the path of each coarser level's table, by level name
    level_tables: dict[str, Path] | None = None
    #: ``[output] groups``: the named sums of keys (read and checked here) and their table
    groups: Groups | None = None
    groups_table: Path | None = None

    @property
    def event(self) -> Any:
        """What the release is charged: the calibration's event, or for zoom levels the
        one composed event of every level."""
        return self.levels.event if self.levels is not None else self.calibration.event

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
            why = (
                "[privacy] secure = false is floating-point noise, for experiments on public "
                "or synthetic data only: it is not differentially private and is never "
                "charged to a ledger; remove the ledger ("
            )
            raise SettingError(
                why + "ledger= or [privacy] ledger) or set secure = true",
                cli=why + "--ledger or [privacy] ledger) or set secure = true",
            )
        return None  # $DPGAUSS_LEDGER is not consulted for an experiment
    path = given if given is not None else (os.environ.get(LEDGER_ENV) or None)
    if path is None:
        first = "(create a budget first: dpgauss budget init DATASET --epsilon E --delta D "
        raise SettingError(
            f"[privacy] ledger is required: set it in the spec, give ledger= or set "
            f"${LEDGER_ENV} {first}--ledger FILE)",
            cli=f"[privacy] ledger is required: set it in the spec, pass --ledger FILE or set "
            f"${LEDGER_ENV} {first}--ledger FILE)",
        )
    p = Path(os.fspath(path)).expanduser()
    if not p.exists():
        raise ValueError(
            f"no ledger at {str(p)!r}: create the budget of dataset "
            f"{spec.privacy.dataset!r} first (dpgauss budget init {spec.privacy.dataset} "
            f"--epsilon E --delta D --ledger {p})"
        )
    return p


def _precheck(
    path: Path, spec: ReleaseSpec, mu: float, period: Period | None = None, eta: float = 0.0
) -> None:
    from .ledger import BudgetExceeded, Ledger

    dataset = spec.privacy.dataset
    with Ledger(path, create=False) as led:
        if spec.series is not None:
            _check_scope(spec, led.grid(dataset), str(led.path))
        made, seen = led.units(dataset)
        unit = spec.unit.column
        if (made is not None and made != unit) or (made is None and seen - {unit}):
            what = (
                f"was made for the unit {made!r}"
                if made is not None
                else f"has releases of the unit {', '.join(map(repr, sorted(seen)))}"
            )
            raise ValueError(
                f"[unit] column {unit!r}, but the budget of dataset {dataset!r} {what}: a "
                "budget protects one kind of unit, and a release of another (a trip instead "
                "of a driver) bounds nothing per that unit (use the same column name, e.g. "
                "through a view, or another dataset)"
            )
        status = led.remaining(dataset, None if period is None else period.start)
    room = status.mu_remaining
    if eta:  # a selection's η lowers the μ budget of everything charged (ledger.py)
        from ..privacy.partition_selection import gdp_budget

        budget = gdp_budget(status.epsilon, status.delta, status.eta_spent + eta)
        room = math.sqrt(max(0.0, budget**2 - status.mu_spent**2))
    if mu > room * (1.0 + 1e-12):
        raise BudgetExceeded(dataset, mu, status)


def _check_scope(
    spec: ReleaseSpec, grid: tuple[str, str | None, str | None, str | None], where: str
) -> None:
    """A series spec's ``[unit] scope`` is its dataset budget's scope, and a budget of scope
    ``"period"`` is for the spec's periods (:mod:`dpgauss.release.series`)."""
    series = spec.series
    assert series is not None
    scope, length, origin, column = grid
    dataset = spec.privacy.dataset
    if spec.unit.scope != scope:
        made = (
            f"dpgauss budget init {dataset} --scope period --period {series.period} "
            f"--column {series.column} ..."
            if spec.unit.scope == "period"
            else f"dpgauss budget init {dataset} ..."
        )
        raise ValueError(
            f"[unit] scope = {spec.unit.scope!r}, but the budget of dataset {dataset!r} in "
            f"{where} has scope {scope!r}: a budget protects one kind of unit (a budget for "
            f"this spec is made by `{made}`)"
        )
    mine = (series.column, series.period_us, series.origin)
    if scope == "period" and (column, duration_us(length), origin) != mine:
        raise ValueError(
            f"[series] column {series.column!r}, period = {series.period!r} from "
            f"{series.origin!r}, but the budget of dataset {dataset!r} is for the periods "
            f"of {length!r} from {origin!r} of {column!r}: a budget of scope 'period' "
            "holds for one series' periods"
        )


def _no_denoiser(spec: ReleaseSpec) -> ReleaseSpec:
    """``spec`` with ``[denoise] method = "none"`` (a discovered domain: no structure)."""
    from dataclasses import replace

    from .spec import DenoiseSpec

    return replace(spec, denoise=DenoiseSpec(method="none"))


# ----------------------------------------------------------------------------- denoiser


def plan_denoiser(
    spec: ReleaseSpec, domain: KeyDomain, structure: Structure | None = None
) -> Denoiser:
    """The denoiser of ``spec`` with its parameters checked (module docstring, step 3).

    The denoiser comes from :mod:`dpgauss.denoise.registry`; the release passes it ``y``,
    ``σ`` and the domain's public structure (its graph and grid) itself — or ``structure``,
    the structure of several periods of a series (:mod:`dpgauss.release.history`).
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
    if spec.nonnegative and "nonnegative" in e.params:
        # counts and sums of values >= 0 are never negative ([denoise] nonnegative)
        params["nonnegative"] = True
    if structure is None:
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
    if domain.kind == "discovered":
        return "not drawn (discovered keys: no map, image or series to draw)"
    if domain.other:
        return "not drawn ([domain] other = true: the __other__ key has no place on a plot)"
    if domain.kind == "values":
        return "not drawn (values domain)"
    if len(domain.axes) > 1 and all(a.spec.kind == "values" for a in domain.axes):
        return "not drawn (a product of values parts only: no map, image or series to draw)"
    for a in domain.axes:  # matplotlib's dates are years 1 … 9999, margins included
        if a.spec.is_time and a.size:
            first, last = str(a.labels[0])[:4], str(a.labels[-1])[:4]
            if int(first) < 2 or int(last) > 9997:
                return "not drawn (timestamps within a year of 0001 or 9999: matplotlib's dates)"
    if optional("matplotlib") is None:
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
    period: str | datetime | None = None,
) -> ReleasePlan:
    """Check everything a release of ``spec`` needs (module docstring); nothing is charged.

    ``period``: the start of the period a ``[series]`` spec releases (required with a
    series, refused without one); the plan's ``spec`` is then that period's
    (:func:`~dpgauss.release.series.period_spec`) and its table the period's path.

    Raises ``ValueError``/``TypeError`` with a one-line message naming what is wrong;
    :class:`~dpgauss.release.ledger.BudgetExceeded` if the release does not fit.
    """
    if not isinstance(spec, ReleaseSpec):
        raise TypeError(f"spec must be a ReleaseSpec; got {type(spec).__name__}")
    shown = public_spec(spec.to_dict())  # the spec as written: a series' periods unnamed
    the_period = None
    if spec.series is not None:
        if period is None:
            raise SettingError(
                "[series]: a series release is one period; give period= (its start, e.g. "
                "'2013-01-13T09:00:00')",
                cli="[series]: a series release is one period; pass --period START (e.g. "
                "--period 2013-01-13T09:00:00)",
            )
        the_period = parse_period(spec.series, period)
        spec = period_spec(spec, the_period)
    elif period is not None:
        raise SettingError(
            "period= names one period of a [series]; the spec has no [series] table",
            cli="--period names one period of a [series]; the spec has no [series] table",
        )
    out_path = out if out is not None else spec.output.path
    if out_path is None:
        raise SettingError(
            "[output] path is required (set it in the spec, or give out=)",
            cli="[output] path is required (set it in the spec, or pass --out PATH)",
        )
    template = Path(os.path.abspath(os.path.expanduser(os.fspath(out_path))))
    table = template
    if the_period is not None:
        table = period_path(template, the_period)
    report = table.with_name(table.name + ".report.json")
    fmt = spec.output.file_format(str(table))

    # 1. domain, sensitivity, calibration: public quantities only.
    domain = resolve_domain(spec)
    discovered = domain.kind == "discovered"
    levels = None
    if discovered:  # keys not known in advance: the selection's noise, τ and charge
        sens = selection_sensitivity(spec)
        cal = calibrate_discovered(spec, sens)
    else:
        sens = sensitivity_of(spec, domain)
        cal = calibrate(spec, sens, domain.size)
        levels = _plan_levels(spec, domain, sens)
        if levels is not None:
            cal = levels.calibrations[0]  # the finest level's share of the budget

    # 2. the ledger (before the data is read).
    ledger_p = _ledger_path(spec, ledger)
    if ledger_p is not None:
        eta = cal.selection.eta if cal.selection is not None else 0.0
        _precheck(ledger_p, spec, cal.mu if levels is None else levels.mu, the_period, eta)

    # 3. the denoiser and its error bars, run once on zeros with the planned σ (public
    #    inputs only), so that a parameter value it refuses is refused here, not after the
    #    charge.  A discovered domain has none (no public structure).
    denoiser = plan_denoiser(spec if not discovered else _no_denoiser(spec), domain)
    # a mean denoises its sum and its count, each with its own σ
    parts: tuple[str | None, ...] = ("sum", "count") if sens.statistic == "mean" else (None,)
    if discovered:
        parts = ()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for part in parts:
            sigma = float(cal.probe.sigma) * (sens.parts[part] if part is not None else 1.0)
            denoiser(np.zeros(domain.size), sigma).error_bars(draws=2, rng=0)
    history, hist_den = None, None
    if the_period is not None and spec.series is not None and spec.series.history:
        # the published periods before this one (public files, read here: before the charge)
        history = load_history(
            series=spec.series,
            period=the_period,
            template=template,
            fmt=fmt,
            public_spec=shown,
            sigma=float(cal.probe.sigma),
            d=domain.size,
        )
        if history.used:
            periods = history.used + 1
            hist_den = joint_denoiser(lambda st: plan_denoiser(spec, domain, st), domain, periods)
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                zeros = np.zeros(periods * domain.size)
                hist_den(zeros, float(cal.probe.sigma)).error_bars(draws=2, rng=0)
    if fmt == "parquet":
        require("pyarrow.parquet", "data", "[output] format 'parquet'", error=ValueError)
    groups = _plan_groups(spec, domain, sens.statistic, levels is not None)

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
    if history is not None and history.revisions is not None:
        paths.append(history.revisions)
    level_tables = _level_tables(table, fmt, levels)
    paths += level_tables.values()
    groups_table = None
    if groups is not None:
        groups_table = table.with_name(
            f"{table.name}.groups.{'parquet' if fmt == 'parquet' else 'csv'}"
        )
        paths.append(groups_table)
        protected.append(Path(groups.path))
    diag_dir = diagnostics_dir(ledger_p)
    group = OutputGroup(
        paths,
        overwrite=spec.output.overwrite,
        protected=protected,
        forbidden_dirs=[diag_dir],
        overwrite_how="[output] overwrite = true",
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
        public_spec=shown,  # built here: nothing of it fails later
        period=the_period,
        history=history,
        history_denoiser=hist_den,
        levels=levels,
        level_tables=level_tables or None,
        groups=groups,
        groups_table=groups_table,
    )


def _plan_groups(
    spec: ReleaseSpec, domain: KeyDomain, statistic: str, has_levels: bool
) -> Groups | None:
    """``[output] groups``: the groups file read against the domain's keys as the table
    writes them (:func:`~dpgauss.release.groups.read_groups`), before the charge."""
    path = spec.output.groups
    if path is None:
        return None
    why = None
    if domain.kind == "discovered":
        why = "a discovered domain's keys are not known before the release"
    elif statistic == "mean":
        why = "the means of keys do not add up (release the sum and the count)"
    elif has_levels:
        why = "with [[levels]], name the sums as a level: its table gives them consistently"
    if why is not None:
        raise SettingError(f"[output] groups: not available here: {why}")
    cols = domain.key_columns()
    names = ["key"] if len(domain.axes) <= 1 else [a.name for a in domain.axes]
    keys = [
        tuple(cell_text(v) for v in row)
        for row in zip(*(np.asarray(cols[n]).tolist() for n in names), strict=True)
    ]
    try:
        return read_groups(os.path.expanduser(path), keys, names)
    except ValueError as exc:
        raise ValueError(f"[output] groups: {exc}") from None


def _plan_levels(spec: ReleaseSpec, domain: KeyDomain, sens: Sensitivity) -> LevelsPlan | None:
    """The zoom levels of ``spec`` (:func:`~dpgauss.release.levels_plan.plan_levels`), each
    level's noise a :class:`Calibration` charged at the level's true sensitivity, its σ in
    :data:`SIGMA_RANGE`."""
    if not spec.levels:
        return None
    from dataclasses import replace

    from .levels_plan import plan_levels

    levels = plan_levels(spec, domain, sens)
    lo, hi = SIGMA_RANGE
    cals = []
    for i, n in enumerate(levels.noises):
        if not lo <= n.mechanism.sigma <= hi:
            where = "the finest level" if i == 0 else f"level {spec.levels[i - 1].name!r}"
            raise ValueError(
                f"[privacy] epsilon = {spec.privacy.epsilon}, delta = {spec.privacy.delta} "
                f"put noise {n.mechanism.sigma:.6g} on {where}, outside the supported "
                f"[{lo:g}, {hi:g}]"
            )
        cals.append(
            Calibration(
                n.mechanism, n.dim, n.mu, n.probe, n.secure, n.sensitivity, options=n.options
            )
        )
    return replace(levels, calibrations=tuple(cals))


def _level_tables(table: Path, fmt: str, levels: LevelsPlan | None) -> dict[str, Path]:
    """``<table>.<level>.csv`` (or ``.parquet``) for each coarser level."""
    if levels is None:
        return {}
    ext = "parquet" if fmt == "parquet" else "csv"
    return {lv.name: table.with_name(f"{table.name}.{lv.name}.{ext}") for lv in levels.levels}


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
