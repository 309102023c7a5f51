r"""The plan of a zoom-level release: the tree of levels, their sensitivities and their noise.

A spec with ``[[levels]]`` publishes the finest table (``[domain]``) and one table per
coarser level, each *measured* with its own Gaussian noise, the published values then made
consistent by post-processing (:mod:`dpgauss.denoise.levels`).  Everything here is public
and decided before the ledger is touched (:func:`plan_levels`, called by
:func:`~dpgauss.release.plan.plan_release`).

**The tree** (:func:`resolve_levels`).  Every fine key gets exactly one parent per level:

* ``regions``: the region that contains the key's coordinates — a graph node's position, a
  grid cell's centre (``y`` the latitude or northing, ``x`` the longitude or easting, in the
  records' CRS), a fine region's centroid (its point on surface when the centroid lies
  outside it) — by the point-in-polygon rule of :mod:`.domains.regions` (a point on a
  shared border goes to the first region of the file).  A key that falls in **no** region
  goes to the parent ``"__unplaced__"`` (:data:`~dpgauss.release.spec.UNPLACED`), a key of
  the level like the others: nothing is dropped.  Regions that hold no fine key are not
  keys of the level (their value would be a sum of nothing); the report counts them.
* ``map``: a CSV file with the columns ``fine_key,parent``; every key of the domain must
  appear exactly once, written as in the table's ``key`` column; parents are text, in the
  order of their first appearance.
* ``kind = "total"``: one parent, ``"total"``.

Levels must **nest**: all the fine keys of a node of level ℓ have the same parent at level
ℓ + 1 (else the release is refused, naming the node and two of its parents).

**Sensitivity** of level ℓ: :func:`~dpgauss.release.sensitivity.level_count_l2` (the
derivation is in :mod:`dpgauss.release.sensitivity`, *Coarser levels*) from the enforced
bounds and the largest number of fine keys under one parent, times the clamp for a sum.

**Budget** (:func:`calibrate_levels`).  The spec's ``(ε, δ)`` is a μ-GDP budget
``μ = gdp_mu(ε, δ)`` (the same number a ledger budget of that (ε, δ) holds).  Level ℓ gets
the share ``w_ℓ`` (``[privacy] level_weights``, normalised exactly in rationals; default
equal shares, the uniform budget of Hay et al. 2010) of ``μ²``: its noise is that of a
one-level release at ``(ε, δ)`` with sensitivity ``Δ_ℓ/√w_ℓ``, so ``Δ_ℓ/σ_ℓ ≤ √w_ℓ·μ``.
Gaussian measurements compose exactly in μ-GDP (Dong, Roth & Su 2019), so the release is
``√(Σ_ℓ μ_ℓ²)``-GDP, ``≤ μ``, hence ``(ε, δ)``-DP.  Each ``μ_ℓ`` is the charge of the law
actually drawn at the *true* ``Δ_ℓ`` (``Δ_ℓ/σ_ℓ`` rounded up for continuous noise; the
secure lattice law's dominating μ, whose rounding term does not shrink with ``w_ℓ``), the
sum is exact (:func:`~dpgauss.privacy._rounding.sum_squares`) and rounded up; when it
exceeds ``μ`` every effective sensitivity is raised by the ratio (plus 1e-10) and the laws
recomputed, so the composed charge is ``≤ μ`` always and within about 1e-9 of it for
continuous noise (a few parts in a thousand for the secure lattice law of a sum at small
weights; counts, integers at every level, get the secure law without rounding,
:func:`~dpgauss.noise.lattice.integer_lattice_law`, within about 1e-5).  The release is
**one** charge, :class:`~dpgauss.privacy.events.GdpEvent` of the composed μ.
"""

from __future__ import annotations

import csv
import numbers
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

import numpy as np

from ..noise.mechanisms import GaussianMechanism
from ..privacy import gdp_mu
from ..privacy._rounding import mul_up, quotient_up, sqrt_down, sqrt_up, sum_squares
from ..privacy.events import GdpEvent, PrivacyEvent
from .domains.crs import WGS84, parse_crs
from .domains.graph_files import _digest
from .domains.key_domain import KeyDomain
from .sensitivity import Sensitivity, level_count_l2
from .spec import UNPLACED, LevelSpec, ReleaseSpec

__all__ = [
    "Level",
    "LevelNoise",
    "LevelsPlan",
    "calibrate_levels",
    "key_text",
    "plan_levels",
    "resolve_levels",
]

#: The inflation every effective sensitivity starts with: room for the ulps of the rounded
#: charges, so that a release of exactly the budget's (ε, δ) fits it.
_MARGIN = 1e-9


def key_text(v: object) -> str:
    """A key as the table writes it (``outputs.write_csv``): the text ``map`` files match."""
    if isinstance(v, float):
        return repr(float(v))
    if isinstance(v, numbers.Integral):
        return str(int(v))
    return str(v)


@dataclass(frozen=True, eq=False)
class Level:
    """A coarser level: its ``labels`` (the parents, as written), ``of_fine`` (the index in
    this level of every fine key), ``parents`` (the index in this level of every node of
    the level below, the tree :func:`~dpgauss.denoise.levels.consistent_levels` takes),
    ``children`` (fine keys under each node), ``names`` (regions' ``name_property``),
    ``source`` (words for the report), ``empty`` (regions holding no fine key)."""

    spec: LevelSpec
    labels: np.ndarray
    of_fine: np.ndarray
    parents: np.ndarray
    children: np.ndarray
    names: np.ndarray | None
    source: str
    empty: int = 0
    unplaced: int = 0

    @property
    def name(self) -> str:
        return self.spec.name

    @property
    def size(self) -> int:
        return int(self.labels.size)


@dataclass(frozen=True, eq=False)
class LevelNoise:
    """The noise of one level: the Gaussian ``mechanism`` calibrated at the effective
    sensitivity ``Δ_ℓ/√w_ℓ`` (module docstring), the law drawn (``probe``, for ``dim``
    values), the level's true ``sensitivity`` Δ_ℓ, its ``weight`` and ``mu``, the charge
    of that law at Δ_ℓ.  :func:`~dpgauss.release.plan.plan_release` makes each a
    :class:`~dpgauss.release.plan.Calibration` charged at Δ_ℓ."""

    mechanism: GaussianMechanism
    dim: int
    probe: Any
    sensitivity: float
    weight: float
    mu: float
    secure: bool
    #: the secure law's options (``integer=True`` for counts: every level's values are sums
    #: of integer counts, released without rounding), passed on to the release
    options: dict[str, Any] = field(default_factory=dict)

    @property
    def event(self) -> PrivacyEvent:
        """The charge of this level alone: the law's event at Δ_ℓ."""
        return self.probe.noise.event(self.sensitivity)


@dataclass(frozen=True, eq=False)
class LevelsPlan:
    """The checked plan of the levels: ``levels`` (the coarser ones, finest first),
    ``noises`` (every level's, the finest first), ``sensitivities`` (true Δ_ℓ, the finest
    first), ``mu`` (the composed charge) and ``target_mu`` (``gdp_mu(ε, δ)``);
    ``calibrations``: the noises as the plan's calibrations (set by ``plan_release``)."""

    levels: tuple[Level, ...]
    noises: tuple[LevelNoise, ...]
    sensitivities: tuple[float, ...]
    weights: tuple[float, ...]
    mu: float
    target_mu: float
    calibrations: tuple[Any, ...] = ()

    @property
    def event(self) -> GdpEvent:
        """The one charge of the whole release: the composed μ (module docstring)."""
        return GdpEvent(self.mu)

    @property
    def parents(self) -> list[np.ndarray]:
        """The tree, as :func:`~dpgauss.denoise.levels.consistent_levels` takes it."""
        return [lv.parents for lv in self.levels]

    def as_dict(self) -> dict[str, Any]:
        """The report's ``levels`` section (public)."""
        names = ["finest", *(lv.name for lv in self.levels)]
        sizes = [None, *(lv.size for lv in self.levels)]
        out = []
        for i, (name, cal, sens, w) in enumerate(
            zip(names, self.noises, self.sensitivities, self.weights, strict=True)
        ):
            row: dict[str, Any] = {
                "name": name,
                "keys": cal.dim if i == 0 else sizes[i],
                "weight": w,
                "sensitivity": sens,
                "sigma": float(cal.probe.sigma),
                "mu": cal.mu,
            }
            if i > 0:
                lv = self.levels[i - 1]
                row["source"] = lv.source
                row["unplaced_fine_keys"] = lv.unplaced
                row["regions_without_keys"] = lv.empty
            out.append(row)
        return {
            "levels": out,
            "mu": self.mu,
            "target_mu": self.target_mu,
            "charge": "one charge for every level: mu = sqrt(sum of the levels' mu^2) "
            "(mu-GDP composition), at most the mu of the spec's (epsilon, delta)",
        }


# ------------------------------------------------------------------------------- tree


def _fine_points(domain: KeyDomain, crs: Any) -> tuple[np.ndarray, np.ndarray, Any]:
    """The fine keys' coordinates ``(lat, lon)`` and the CRS they are in."""
    kind = domain.kind
    if kind == "graph":
        assert domain.node_lat is not None and domain.node_lon is not None
        return np.asarray(domain.node_lat), np.asarray(domain.node_lon), WGS84
    if kind == "regions":
        from .domains.regions import _shapely

        shapely = _shapely()
        geoms = domain.axes[0].regions.geoms
        pts = shapely.centroid(geoms)
        inside = shapely.contains(geoms, pts)
        pts = np.where(inside, pts, shapely.point_on_surface(geoms))
        xy = shapely.get_coordinates(pts)
        return xy[:, 1].copy(), xy[:, 0].copy(), WGS84
    # a grid: cell centres, y outer (row-major), in the records' CRS
    ay, ax = domain.axes
    cy = np.asarray(ay.labels, dtype=np.float64) + float(ay.spec.step) / 2.0
    cx = np.asarray(ax.labels, dtype=np.float64) + float(ax.spec.step) / 2.0
    return np.repeat(cy, cx.size), np.tile(cx, cy.size), crs


def _regions_level(lv: LevelSpec, domain: KeyDomain, spec: ReleaseSpec) -> tuple[Any, ...]:
    from .domains.regions import RegionMapper, load_public_regions

    records = WGS84 if spec.source.crs is None else parse_crs(spec.source.crs, "[source] crs")
    regions = load_public_regions(lv)
    lat, lon, crs = _fine_points(domain, records)
    mapper = RegionMapper(regions, regions.geoms_in(crs, lv.where), crs.geographic)
    idx = mapper.locate(lat, lon)
    used = np.unique(idx[idx >= 0])
    unplaced = int(np.count_nonzero(idx < 0))
    labels = [key_text(v) for v in regions.ids[used].tolist()]
    names = None if regions.names is None else list(regions.names[used].tolist())
    remap = np.full(regions.n, -1, dtype=np.int64)
    remap[used] = np.arange(used.size)
    of_fine = np.where(idx >= 0, remap[np.maximum(idx, 0)], used.size)
    if unplaced:
        if UNPLACED in labels:  # the level's key column must name one parent (review, 4)
            raise ValueError(
                f"[{lv.where}] a region's id is {UNPLACED!r}, the parent of the fine keys in no "
                f"region ({unplaced} here): the level would hold two keys {UNPLACED!r}; "
                "rename that region"
            )
        labels.append(UNPLACED)
        if names is not None:
            names.append(None)
    source = f"regions: {regions.name}; fine keys placed by their coordinates"
    return (
        np.asarray(labels, dtype=object),
        of_fine.astype(np.int64),
        None if names is None else np.asarray(names, dtype=object),
        source,
        int(regions.n - used.size),
        unplaced,
    )


def _map_level(lv: LevelSpec, domain: KeyDomain) -> tuple[Any, ...]:
    path = str(lv.map)
    where = f"[{lv.where}] map = {path!r}"
    try:
        with open(path, newline="", encoding="utf-8") as fh:
            rows = list(csv.reader(fh))
    except FileNotFoundError:
        raise ValueError(f"{where}: no such file") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ValueError(f"{where}: cannot be read ({exc})") from None
    if not rows or [c.strip() for c in rows[0]] != ["fine_key", "parent"]:
        raise ValueError(f"{where}: the first line must be the header fine_key,parent")
    index = {key_text(v): i for i, v in enumerate(domain.labels.tolist())}
    of_fine = np.full(domain.size, -1, dtype=np.int64)
    labels: dict[str, int] = {}
    for line, row in enumerate(rows[1:], start=2):
        if len(row) != 2 or not row[0] or not row[1].strip():
            raise ValueError(f"{where}: line {line} must be fine_key,parent (two non-empty fields)")
        i = index.get(row[0])
        if i is None:
            raise ValueError(f"{where}: line {line}: {row[0]!r} is not a key of the domain")
        if of_fine[i] >= 0:
            raise ValueError(f"{where}: line {line}: the key {row[0]!r} is given twice")
        of_fine[i] = labels.setdefault(row[1], len(labels))
    missing = np.flatnonzero(of_fine < 0)
    if missing.size:
        first = key_text(domain.labels[missing[0]])
        raise ValueError(
            f"{where}: {missing.size} keys of the domain have no parent (the first: {first!r}); "
            "every fine key needs exactly one"
        )
    source = f"map: CSV file, sha256 {_digest(path)}"  # the report names no local path
    return np.asarray(list(labels), dtype=object), of_fine, None, source, 0, 0


def resolve_levels(spec: ReleaseSpec, domain: KeyDomain) -> tuple[Level, ...]:
    """The coarser levels of ``spec`` over ``domain`` (module docstring: the tree); public
    files only.  Raises ``ValueError`` naming the level for a file or a nesting problem."""
    out: list[Level] = []
    prev_of_fine = np.arange(domain.size, dtype=np.int64)
    prev_labels: np.ndarray | None = None
    for lv in spec.levels:
        if lv.source == "total":
            parts: tuple[Any, ...] = (
                np.asarray(["total"], dtype=object),
                np.zeros(domain.size, dtype=np.int64),
                None,
                "total of every key",
                0,
                0,
            )
        elif lv.source == "map":
            parts = _map_level(lv, domain)
        else:
            parts = _regions_level(lv, domain, spec)
        labels, of_fine, names, source, empty, unplaced = parts
        n_prev = int(prev_of_fine.max()) + 1 if prev_of_fine.size else 0
        parents = np.full(n_prev, -1, dtype=np.int64)
        parents[prev_of_fine] = of_fine
        bad = np.flatnonzero(parents[prev_of_fine] != of_fine)
        if bad.size:
            node = int(prev_of_fine[bad[0]])
            two = (labels[parents[node]], labels[of_fine[bad[0]]])
            below = "fine key" if prev_labels is None else "node"
            what = key_text(domain.labels[node]) if prev_labels is None else prev_labels[node]
            raise ValueError(
                f"[{lv.where}] the levels do not nest: the {below} {what!r} of the level "
                f"below has fine keys under two parents here ({two[0]!r} and {two[1]!r}); each "
                "node needs exactly one parent per level"
            )
        children = np.bincount(of_fine, minlength=labels.size).astype(np.int64)
        out.append(Level(lv, labels, of_fine, parents, children, names, source, empty, unplaced))
        prev_of_fine, prev_labels = of_fine, labels
    return tuple(out)


# ------------------------------------------------------------------------- calibration


def _weights(spec: ReleaseSpec) -> list[Fraction]:
    n = len(spec.levels) + 1
    raw = spec.privacy.level_weights or (1.0,) * n
    fr = [Fraction(float(w)) for w in raw]
    total = sum(fr, Fraction(0))
    return [w / total for w in fr]


def level_sensitivities(
    spec: ReleaseSpec, domain: KeyDomain, sens: Sensitivity, levels: tuple[Level, ...]
) -> list[float]:
    """Δ_ℓ of every level, the finest first (module docstring)."""
    b = spec.bounds
    out = [sens.l2]
    for lv in levels:
        records = level_count_l2(
            max_records_per_unit=b.max_records_per_unit,
            max_keys_per_unit=b.max_keys_per_unit,
            max_records_per_key=b.max_records_per_key,
            domain_size=domain.size,
            max_children=int(lv.children.max()),
            spread=domain.spread,
        )
        out.append(records if sens.statistic == "count" else mul_up(sens.scale, records))
    return out


def calibrate_levels(
    spec: ReleaseSpec, sensitivities: list[float], dims: list[int], *, integer: bool = False
) -> tuple[tuple[LevelNoise, ...], float, float]:
    """Every level's calibration, the composed μ and the target ``gdp_mu(ε, δ)`` (module
    docstring, *Budget*).  ``integer``: the values are integer counts (every level's value
    a sum of them), released by the secure law without rounding
    (:func:`dpgauss.noise.lattice.integer_lattice_law`, calibrated at the effective
    sensitivity; its bound on the changed coordinates, ``min(d, ⌊Δ_eff²⌋)``, holds for the
    true Δ_ℓ ≤ Δ_eff too, so the charge at Δ_ℓ is valid)."""
    p = spec.privacy
    options: dict[str, Any] = {"integer": True} if integer and p.secure else {}
    eps, delta = float(p.epsilon), float(p.delta)  # type: ignore[arg-type]
    target = float(gdp_mu(eps, delta))
    weights = _weights(spec)
    roots = [sqrt_down(w) for w in weights]
    factor = 1.0 + _MARGIN
    for _ in range(50):
        cals = []
        for i, (sens, root, d, w) in enumerate(
            zip(sensitivities, roots, dims, weights, strict=True)
        ):
            eff = mul_up(quotient_up(sens, root), factor)
            mech = GaussianMechanism(eps, delta, eff)
            where = "the finest level" if i == 0 else f"level {spec.levels[i - 1].name!r}"
            try:
                probe = mech.noise_plan(d, secure=bool(p.secure), **options)
                mu = float(probe.noise.event(sens).mu)  # type: ignore[attr-defined]
            except (ValueError, FloatingPointError) as exc:
                raise ValueError(
                    f"[privacy] the secure sampler cannot serve {where} at epsilon = {eps:g}, "
                    f"delta = {delta:g}: {' '.join(str(exc).split())}"
                ) from None
            cals.append(
                LevelNoise(mech, d, probe, sens, float(w), mu, bool(p.secure), dict(options))
            )
        total = sqrt_up(sum_squares(c.mu for c in cals))
        if total <= target:
            return tuple(cals), total, target
        factor = mul_up(factor, total / target * (1.0 + 1e-10))
    raise ValueError(  # pragma: no cover - the ratio step converges in one or two rounds
        "[privacy] the levels' noise could not be calibrated within the budget"
    )


def plan_levels(spec: ReleaseSpec, domain: KeyDomain, sens: Sensitivity) -> LevelsPlan:
    """The levels of ``spec``: tree, sensitivities, calibrations (module docstring)."""
    levels = resolve_levels(spec, domain)
    sensitivities = level_sensitivities(spec, domain, sens, levels)
    dims = [domain.size, *(lv.size for lv in levels)]
    cals, mu, target = calibrate_levels(spec, sensitivities, dims, integer=sens.integer)
    weights = tuple(float(w) for w in _weights(spec))
    return LevelsPlan(levels, cals, tuple(sensitivities), weights, mu, target)
