"""What a release publishes, and what stays with the data owner: two objects, two files.

* :class:`PublicReport` — written beside the table as ``<table>.report.json`` and meant to
  be published with it: the public spec (without local paths or a seed), the domain's kind
  and size, the sensitivity, ε, δ, σ and the mechanism, the μ charged, the denoiser, its
  parameters and its estimated error (computed from the released values and the public σ
  only, so post-processing), and the table's columns.  Nothing in it is an exact function
  of the private data.
* :class:`Diagnostics` — **confidential**: the exact row counters (rows read, units, kept,
  dropped by each bound — each moves with a single record), the timings (they depend on the
  data), the local paths, the ledger's state and, for a seeded experiment, the seed.  It is
  written to its own file whose name starts with ``CONFIDENTIAL-``, away from the table (in
  ``<ledger>.diagnostics/``), and printed only with ``dpgauss release --diagnostics``.

Every text here is built from the fields of these two objects, so a message can never
carry more than its object holds.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..denoise.result import WEAK_NOTE
from .domains.graph_files import BUNDLED_GRAPHS
from .domains.regions import BUNDLED_REGIONS

__all__ = [
    "CONFIDENTIAL_NOTE",
    "FRAGMENTED_LARGEST_SHARE",
    "FRAGMENTED_SMALL_COMPONENTS",
    "NOT_PRIVATE_WARNING",
    "SMALL_COMPONENT_SHARE",
    "Diagnostics",
    "PublicReport",
    "candidate_label",
    "candidates_table",
    "components_fields",
    "constant_fields",
    "json_ready",
    "public_spec",
    "rmse_text",
]

CONFIDENTIAL_NOTE = (
    "CONFIDENTIAL: exact counts of the private data, timings and local paths, for the data "
    "owner only; they are not differentially private: never publish them"
)
NOT_PRIVATE_WARNING = (
    "NOT PRIVATE: secure = false adds floating-point noise from a seedable generator; the "
    "release is not differentially private (its low-order bits, and the seed, reveal the "
    "data) and was not charged to any ledger. Use it on public or synthetic data only."
)


def json_ready(value: Any) -> Any:
    """``value`` with numpy scalars/arrays as Python values and non-finite floats as None."""
    if isinstance(value, dict):
        return {str(k): json_ready(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [json_ready(v) for v in value]
    if isinstance(value, np.ndarray):
        return json_ready(value.tolist())
    if isinstance(value, np.generic):
        value = value.item()
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


def public_spec(spec_dict: dict[str, Any]) -> dict[str, Any]:
    """The spec without what is local or secret: source paths, database, ledger, output path,
    the paths of a user's graph files, seed (each replaced by a note that it was removed)."""
    out = json.loads(json.dumps(spec_dict))
    removed = "(local path: not published)"
    src = out.get("source", {})
    for key in ("path", "database"):
        if src.get(key) is not None:
            src[key] = removed
    for section, key in (("privacy", "ledger"), ("output", "path"), ("output", "groups")):
        part = out.get(section, {})
        if part.get(key) is not None:
            part[key] = removed
    _strip_domain(out.get("domain", {}), removed)
    for level in out.get("levels") or ():  # [[levels]]: their map and region files
        if isinstance(level, dict):
            if level.get("map") is not None:
                level["map"] = removed
            if level.get("regions") is not None and level["regions"] not in BUNDLED_REGIONS:
                level["regions"] = removed
    priv = out.get("privacy", {})
    if priv.get("seed") is not None:
        priv["seed"] = "(secret: not published)"
    return out


def _strip_domain(dom: dict[str, Any], removed: str) -> None:
    """A domain table (and its parts) without the paths of the user's graph and region files
    (the report names those files by their digest); bundled names stay."""
    if not isinstance(dom, dict):
        return
    for key in ("nodes", "edges", "values_from"):
        if dom.get(key) is not None:
            dom[key] = removed
    if dom.get("graph") is not None and dom["graph"] not in BUNDLED_GRAPHS:
        dom["graph"] = removed
    if dom.get("regions") is not None and dom["regions"] not in BUNDLED_REGIONS:
        dom["regions"] = removed
    for part in [dom.get("x"), dom.get("y"), *(dom.get("parts") or ())]:
        if isinstance(part, dict):
            _strip_domain(part, removed)


#: How the summary says whom a series' guarantee protects (``[unit] scope``).
_SCOPE_TEXT = {"all": "over every period", "period": "within this period"}


@dataclass
class PublicReport:
    """The report published with the table (module docstring).  ``as_dict`` is its JSON."""

    version: str
    spec: dict[str, Any]
    domain: dict[str, Any]
    sensitivity: dict[str, Any]
    privacy: dict[str, Any]
    denoise: dict[str, Any]
    charge: dict[str, Any]
    output: dict[str, Any]
    warning: str | None = None
    noise_off: bool = False
    series: dict[str, Any] | None = None

    def as_dict(self) -> dict[str, Any]:
        """The JSON-ready dict written to ``<table>.report.json``."""
        out: dict[str, Any] = {}
        if self.warning:
            out["warning"] = self.warning
        out.update(
            {
                "dpgauss_version": self.version,
                "published": "this report and its table may be published: every value in them "
                "is differentially private or public",
                "spec": self.spec,
                "domain": self.domain,
                "sensitivity": self.sensitivity,
                "privacy": self.privacy,
                "denoise": self.denoise,
                "charge": self.charge,
                "output": self.output,
            }
        )
        if self.series is not None:
            out["series"] = self.series
        if self.noise_off:
            out["noise_off"] = True
        return json_ready(out)

    def text(self) -> str:
        """The lines ``dpgauss release`` prints (public facts only)."""
        sens, priv, den, out, ch = (
            self.sensitivity,
            self.privacy,
            self.denoise,
            self.output,
            self.charge,
        )
        lines = [
            f"release    : {out['table']} ({out['rows']:,} keys, {out['format']}); report "
            f"{out['report']}" + (f"; plot {out['plot']}" if out.get("plot") else ""),
            f"domain     : {self.domain['size']:,} keys; structure: {self.domain['structure']}",
            *(
                [
                    f"period     : [{self.series['start']}, {self.series['stop']}) of "
                    f"{self.series['column']!r} (a {self.series['period']} series; the "
                    f"guarantee protects a unit {_SCOPE_TEXT[self.series['scope']]})"
                ]
                if self.series is not None
                else []
            ),
            f"sensitivity: {sens['summary']}",
            f"noise      : sigma={priv['sigma']:.6g} ({priv['mechanism']}); analytic sigma="
            f"{priv['analytic_sigma']:.6g}; classical sigma="
            + (
                f"{priv['classical_sigma']:.6g}"
                if priv["classical_sigma"] is not None
                else "n/a (Theorem 1 needs epsilon < 1)"
            )
            + f"; epsilon={priv['epsilon']:.6g} delta={priv['delta']:g}",
            f"denoise    : {den['method']}; estimated RMSE per key "
            f"{rmse_text(den.get('rmse_per_key'), den.get('rmse_per_key_upper95'))} vs "
            + (
                f"{raw:.6g}"
                if isinstance(raw := den.get("raw_rmse_per_key"), float) and math.isfinite(raw)
                else "n/a"
            )
            + " without denoising",
        ]
        sel = priv.get("selection")
        if sel:  # keys not known in advance (dpgauss.release.selection)
            split = sel["delta_split"]
            lines.insert(
                2,
                f"selection  : {sel['released_keys']:,} keys released, those whose noisy count "
                f"> threshold {sel['threshold']:.6g}; selection delta (eta) {sel['eta']:g}; "
                f"delta {split['delta']:g} split as {split['selection']:g} (selection) + "
                f"{split['counts']:g} (counts), charged once",
            )
        iv = den.get("intervals")
        if iv and iv.get("median_width") is not None and iv.get("raw_width") is not None:
            how = "sum and count" if "count" in den else iv["method"]
            lines.append(
                f"intervals  : denoised {iv['level']:.0%} intervals ({how}) median "
                f"width {iv['median_width']:.4g} vs {iv['raw_width']:.4g} for the released "
                "values" + (f"; {WEAK_NOTE}" if iv.get("weak_fit") else "")
            )
        grp = den.get("groups")
        if isinstance(grp, dict):
            lines.append(
                f"groups     : {grp['groups']:,} sums of keys in {grp['table']}; median interval "
                f"width {grp['median_width']:.4g} (denoised sums) vs {grp['raw_width']:.4g} "
                "(released sums)"
            )
        hist = den.get("history")
        if isinstance(hist, dict) and hist.get("used"):
            lines.append(
                f"history    : denoised with the {hist['used']} published period(s) before it "
                f"(from {hist['periods'][0]}), on {hist.get('structure')} (by SURE); their "
                f"revised denoised values: {hist['revisions']}"
            )
        elif isinstance(hist, dict):
            lines.append(f"history    : none used ({hist.get('note') or 'no earlier period'})")
        const = den.get("constant")
        if const:
            lines.append(
                f"constant   : the denoised values are constant ({const['value']:.6g}): "
                f"{const['why']}"
            )
        lines.extend(_candidate_lines(den.get("candidates") or []))
        for part in ("sum", "count"):  # a mean: each part denoised on its own
            if isinstance(den.get(part), dict):
                lines.extend(
                    _candidate_lines(den[part].get("candidates") or [], f" for the {part}")
                )
        levels = priv.get("levels")
        if isinstance(levels, dict):  # zoom levels: one line each, then the one charge
            for row in levels["levels"]:
                lines.append(
                    f"level      : {row['name']} ({row['keys']:,} keys): weight "
                    f"{row['weight']:.4g}, sensitivity {row['sensitivity']:.6g}, sigma="
                    f"{row['sigma']:.6g}, mu={row['mu']:.6g}"
                )
            lines.append(
                f"levels     : consistent (parents = sums of children); composed mu="
                f"{levels['mu']:.6g} <= {levels['target_mu']:.6g} of (epsilon, delta), one charge"
            )
        comp = self.domain.get("components")
        if comp:
            lines.append(f"components : {components_text(comp)}")
        if not out.get("plot") and out.get("plot_note"):
            lines.append(f"plot       : {out['plot_note']}")
        if ch.get("charged"):
            lines.append(f"charge     : dataset {ch['dataset']!r}, mu={ch['mu']:.6g}")
        else:
            lines.append("charge     : none (not charged to any ledger)")
        if self.noise_off:
            lines.insert(0, "WARNING: noise OFF (test hook): this output is NOT private")
        if self.warning:
            lines.insert(0, f"WARNING: {self.warning}")
        return "\n".join(lines)


#: Why a report gives no point estimate of the error (``estimated_error_note``).
BELOW_RESOLUTION = (
    "SURE is below its own resolution (at most 1 % of its 95 % upper bound, or negative): "
    "no point estimate; the error is at most estimated_error_upper95"
)


def error_fields(risk: float | None, upper: float | None, d: int) -> dict[str, Any]:
    """The report's error estimate: ``estimated_error`` (SURE) and ``rmse_per_key``, never
    zero or negative.

    SURE is unbiased but noisy (its standard deviation is about ``σ²√(2d)``), so it can be
    negative, or 0, for a good estimate of a flat map: published as the error, it would
    claim a release better than perfect (issue #26: ``rmse_per_key: 0.0`` beside
    ``estimated_error: -18006``).  Where SURE is at most 1 % of its one-sided 95 % bound
    ``upper`` (an RMSE below a tenth of the bound's), or not finite, both are ``None`` with
    ``estimated_error_note`` saying why, and the bound is the answer; SURE itself stays in
    ``sure``.  ``d`` is the number of keys."""
    ok = risk is not None and math.isfinite(risk)
    up_ok = upper is not None and math.isfinite(upper)
    out: dict[str, Any] = {
        "sure": risk if ok else None,
        "estimated_error": None,
        "rmse_per_key": None,
        # up_ok and ok say that upper and risk are floats, which mypy does not follow
        "rmse_per_key_upper95": math.sqrt(max(upper, 0.0) / d) if up_ok and d else None,  # type: ignore[type-var, operator]
    }
    if ok and d and risk > 0.0 and (not up_ok or risk > 0.01 * upper):  # type: ignore[operator]
        out["estimated_error"] = risk
        out["rmse_per_key"] = math.sqrt(risk / d)  # type: ignore[operator]
    else:
        out["estimated_error_note"] = BELOW_RESOLUTION if ok else "no SURE for this estimator"
    return out


def rmse_text(rmse: float | None, upper: float | None) -> str:
    """SURE's RMSE with its one-sided 95 % bound; "≤ bound" when SURE is below its own
    resolution (an estimate of 0 would claim a perfect release: :func:`error_fields`)."""
    if upper is None:
        return "n/a"
    if rmse is None or rmse <= 0.0 or rmse < 0.1 * upper:
        return f"<= {upper:.4g} (95 % upper bound; SURE below its resolution)"
    return f"{rmse:.4g} (SURE; 95 % upper bound {upper:.4g})"


#: A graph "falls apart" (``components.fragmented`` in the report, a WARNING in the
#: summary) when it has more than one connected component and either its largest holds
#: less than this share of the nodes ...
FRAGMENTED_LARGEST_SHARE = 0.9
#: ... or at least this many components are small: each holding at most
#: :data:`SMALL_COMPONENT_SHARE` of the nodes (a single node on a graph of under 200).
FRAGMENTED_SMALL_COMPONENTS = 10
SMALL_COMPONENT_SHARE = 0.01


def components_fields(n: int, edges: Any, kind: str = "graph") -> dict[str, Any]:
    """The connected components of a public graph of ``n`` nodes (or the adjacency of
    ``n`` regions, ``kind = "regions"``): ``count``, ``largest`` (nodes), ``largest_share``,
    ``small`` (components of at most :data:`SMALL_COMPONENT_SHARE` of the nodes, at least
    one node) and ``fragmented`` — the public rule: more than one component, and the
    largest holds less than :data:`FRAGMENTED_LARGEST_SHARE` (90 %) of the nodes or at
    least :data:`FRAGMENTED_SMALL_COMPONENTS` (10) components are small.  A fragmented map
    gets a ``note`` saying what that usually means (for a street network: lines that cross
    without a shared node, an un-noded export) and what it costs: every denoiser treats
    each component on its own, so a small component is barely denoised.  Public: a
    function of the public domain only."""
    from ..denoise.graph import Graph

    e = np.zeros((0, 2), np.int64) if edges is None else np.asarray(edges, np.int64)
    labels = Graph(int(n), e).components if n else np.zeros(0, np.int64)
    sizes = np.bincount(labels) if n else np.zeros(0, np.int64)
    count = int(sizes.size)
    largest = int(sizes.max()) if count else 0
    share = largest / n if n else 1.0
    small_max = max(1, math.floor(SMALL_COMPONENT_SHARE * n))
    small = int(np.sum(sizes <= small_max))
    fragmented = count > 1 and (
        share < FRAGMENTED_LARGEST_SHARE or small >= FRAGMENTED_SMALL_COMPONENTS
    )
    out: dict[str, Any] = {
        "count": count,
        "largest": largest,
        "largest_share": share,
        "small": small,
        "small_max_nodes": small_max,
        "fragmented": fragmented,
        "rule": (
            f"fragmented: more than one component and the largest holds less than "
            f"{FRAGMENTED_LARGEST_SHARE:.0%} of the nodes or at least "
            f"{FRAGMENTED_SMALL_COMPONENTS} components hold at most "
            f"{SMALL_COMPONENT_SHARE:.0%} of the nodes each"
        ),
    }
    if fragmented:
        what = (
            "regions that share no border with the rest (islands, or an adjacency that "
            "misses touching borders)"
            if kind == "regions"
            else "typical of an un-noded street network: lines that cross without a shared "
            "node (node the lines at their crossings before building the graph)"
        )
        out["note"] = (
            f"the {'adjacency of the regions' if kind == 'regions' else 'graph'} falls apart "
            f"into {count:,} components ({small:,} small); {what}. Each component is denoised "
            "on its own: a small one gets little from its neighbours"
        )
    return out


def map_components(domain: Any) -> dict[str, Any] | None:
    """:func:`components_fields` of a domain's map: its first graph or regions part (a
    product's too); None without one."""
    drawn = [a for a in domain.axes if a.spec.kind in ("graph", "regions")]
    if not drawn:
        return None
    return components_fields(drawn[0].size, drawn[0].edges, drawn[0].spec.kind)


def components_text(comp: dict[str, Any]) -> str:
    """The summary's ``components`` line."""
    text = (
        f"{comp['count']:,} connected component{'s' if comp['count'] != 1 else ''}; the "
        f"largest holds {comp['largest_share']:.0%} of the nodes"
    )
    if comp.get("small"):
        text += f"; {comp['small']:,} small (at most {comp['small_max_nodes']:,} nodes)"
    if comp.get("fragmented"):
        text += f"\nWARNING: {comp['note']}"
    return text


def candidate_label(method: str, params: dict[str, Any]) -> str:
    """A candidate of ``auto`` in words, with the parameters that make it what it is:
    ``james_stein (target zero, shrinkage 0.93)``, ``trend_filter (order 0, λ 6.69 of
    λ_max 123, df 9)``, ``soft_threshold (λ 0.362 by SURE)``."""
    p = params or {}
    bits: list[str] = []

    def num(key: str, label: str, fmt: str = ".3g") -> None:
        v = p.get(key)
        if isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(v):
            bits.append(f"{label} {v:{fmt}}")

    if method == "james_stein":
        if p.get("target") is not None:
            bits.append(f"target {p['target']}")
        num("shrinkage", "shrinkage", ".3g")
    elif method == "trend_filter":
        if p.get("order") is not None:
            bits.append(f"order {p['order']}")
        lam, top = p.get("lam"), p.get("lam_max")
        if isinstance(lam, int | float) and isinstance(top, int | float):
            bits.append(f"λ {lam:.3g} of λ_max {top:.3g}")
        else:
            num("lam", "λ")
        num("df", "df", ".4g")
    elif method in ("soft_threshold", "hard_threshold", "graph_wavelet"):
        num("lambda", "λ")
        if p.get("threshold") == "sure":
            bits.append("by SURE")
        num("n_nonzero", "kept")
    elif method == "wavelet":
        if p.get("wavelet"):
            bits.append(str(p["wavelet"]))
        num("level", "levels", "d")
        if p.get("threshold") == "sure":
            bits.append("SURE thresholds")
    else:
        bits.extend(f"{k} {v}" for k, v in p.items() if isinstance(v, str | int) and k != "df")
    return method + (f" ({', '.join(bits)})" if bits else "")


def candidates_table(
    candidates: list[dict[str, Any]], selected: int | None
) -> list[dict[str, Any]]:
    """``auto``'s candidates as the report lists them: ``label`` (:func:`candidate_label`),
    ``method``, ``risk`` (SURE), ``params`` (their scalar parameters: order, target, λ or
    threshold, df), ``selected`` (the chosen one) and, for a challenger of the baselines
    (the identity and James–Stein), ``bar``: the SURE it had to go below to be chosen."""
    return [
        json_ready(
            {
                "label": candidate_label(c["method"], c.get("params") or {}),
                "method": c["method"],
                "risk": c["risk"],
                "params": c.get("params") or {},
                "selected": i == selected,
                **({"bar": c["bar"]} if c.get("bar") is not None else {}),
            }
        )
        for i, c in enumerate(candidates)
    ]


def _candidate_lines(cands: list[dict[str, Any]], part: str = "") -> list[str]:
    if not cands:
        return []
    width = min(max(len(c.get("label", c["method"])) for c in cands), 64)
    lines = [f"candidates : SURE of each candidate auto tried{part} (* the one chosen)"]
    chosen = [c.get("risk") for c in cands if c.get("selected")]
    won = chosen[0] if chosen and isinstance(chosen[0], int | float) else None
    guarded = False
    for c in cands:
        risk = c.get("risk")
        sure = f"{risk:.4g}" if isinstance(risk, int | float) else "n/a"
        mark = "*" if c.get("selected") else " "
        line = f"  {mark} {c.get('label', c['method']):<{width}}  SURE {sure}"
        bar = c.get("bar")
        if (
            won is not None  # the chosen one has risk == won: never flagged
            and isinstance(risk, int | float)
            and isinstance(bar, int | float)
            and risk < won
            and risk >= bar
        ):
            line += f", not below its bar {bar:.4g}"
            guarded = True
        lines.append(line)
    if guarded:
        lines.append(
            "             a smaller SURE lost: a challenger of the identity and James–Stein "
            "must beat them by SURE's own noise (about σ²√(2d); less for trend filtering), "
            "or a lucky SURE would be chosen"
        )
    return lines


#: Why a denoised map is constant, by the denoiser that made it.
_CONSTANT_WHY = {
    "james_stein": "James–Stein found no signal above the noise (the released values' spread "
    "is within what the noise alone gives: shrinkage 0)",
    "trend_filter": "the trend filter fused everything (no jump stood out of the noise at "
    "the λ SURE chose)",
    "soft_threshold": "soft thresholding set every value to 0 (its λ is above every released "
    "value)",
    "hard_threshold": "thresholding set every value to 0 (its λ is above every released value)",
    "wavelet": "every wavelet coefficient but the mean was thresholded away (none stood out "
    "of the noise)",
    "graph_wavelet": "every graph wavelet coefficient but each component's mean was "
    "thresholded away (none stood out of the noise)",
    "none": "the released values themselves are constant",
}


def constant_fields(values: Any, denoise: dict[str, Any]) -> dict[str, Any]:
    """``{"constant": {"value": c, "why": ...}}`` when every finite denoised value is the
    same (within ``1e-9`` relative), else ``{}``.  ``why`` names what made it so, from the
    public ``denoise`` section (its method and, for a mean, its sum's and count's)."""
    v = np.asarray(values, dtype=np.float64).ravel()
    v = v[np.isfinite(v)]
    if v.size < 2:
        return {}
    lo, hi = float(v.min()), float(v.max())
    if hi - lo > 1e-9 * max(1.0, abs(lo), abs(hi)):
        return {}
    parts = (
        [("", denoise)]
        if "sum" not in denoise
        else [
            ("the sum: ", denoise["sum"]),
            ("the count: ", denoise["count"]),
        ]
    )
    whys = []
    for prefix, part in parts:
        method = str(part.get("method", ""))
        why = _CONSTANT_WHY.get(method, f"{method} found no structure above the noise")
        if method == "james_stein":
            target = (part.get("params") or {}).get("target")
            why += "; every value shrunk to " + ("0" if target == "zero" else "their mean")
        whys.append(prefix + why)
    return {"constant": {"value": float(np.median(v)), "why": "; ".join(whys)}}


#: The stages of a release's confidential timing, in their order, as ``--diagnostics`` says
#: them (``denoise_s`` and ``denoise_share`` go at the end, with the total).
_STAGES = {
    "plan_s": "plan",
    "aggregate_s": "read and aggregate",
    "noise_denoise_s": "noise and denoise",
    "write_s": "write",
}
_CANDIDATE = re.compile(r"denoise (.+)_s")


def _timing_lines(timing: dict[str, float]) -> list[str]:
    """``timing`` as ``--diagnostics`` prints it: one line of stages, each with its unit
    (``timing     : plan 0.12 s, read and aggregate 0.40 s, ...; total 0.90 s (denoising
    0.25 s, 28 % of it)``), and ``auto``'s seconds per candidate on a line of their own
    (candidate names hold commas: ``;`` between them)."""
    if not timing:
        return []
    stages = [f"{label} {timing[k]:.2f} s" for k, label in _STAGES.items() if k in timing]
    candidates = []
    for key, value in timing.items():
        match = _CANDIDATE.fullmatch(key)
        if match:
            candidates.append(f"{match[1]} {value:.2f} s")
        elif key not in _STAGES and key not in ("total_s", "denoise_s", "denoise_share"):
            stages.append(f"{key.removesuffix('_s').replace('_', ' ')} {value:.2f} s")
    line = "timing     : " + ", ".join(stages)
    if "total_s" in timing:
        line += ("; " if stages else "") + f"total {timing['total_s']:.2f} s"
    if "denoise_s" in timing:
        share = timing.get("denoise_share")
        of_it = f", {100 * share:.0f} % of it" if share is not None else ""
        line += f" (denoising {timing['denoise_s']:.2f} s{of_it})"
    lines = [line]
    if candidates:
        lines.append("candidates : " + "; ".join(candidates))
    return lines


@dataclass
class Diagnostics:
    """The confidential side of a release (module docstring).  Never published."""

    rows: dict[str, Any] = field(default_factory=dict)
    timing: dict[str, float] = field(default_factory=dict)
    paths: dict[str, Any] = field(default_factory=dict)
    ledger: dict[str, Any] = field(default_factory=dict)
    engine: str = ""
    delivery: str = ""
    seed: int | None = None

    def as_dict(self) -> dict[str, Any]:
        """The JSON-ready dict of the ``CONFIDENTIAL-…json`` file."""
        out: dict[str, Any] = {
            "confidential": CONFIDENTIAL_NOTE,
            "delivery": self.delivery,
            "engine": self.engine,
            "rows": self.rows,
            "timing": self.timing,
            "paths": self.paths,
            "ledger": self.ledger,
        }
        if self.seed is not None:
            out["seed"] = self.seed
        return json_ready(out)

    def text(self) -> str:
        """The lines ``dpgauss release --diagnostics`` prints, under a CONFIDENTIAL banner."""
        lines = [f"== {CONFIDENTIAL_NOTE} =="]
        r = self.rows
        if r:
            dropped = [
                f"{r[k]:,} {label}"
                for k, label in (
                    ("malformed_lines", "malformed lines"),
                    ("outside_filter", "outside the [filter] window"),
                    ("null_unit", "without unit"),
                    ("invalid_domain", "invalid domain value"),
                    ("invalid_value", "invalid value"),
                    ("outside_domain", "outside the domain"),
                )
                if r.get(k)
            ]
            bounded = ", ".join(f"{v:,} by {k}" for k, v in r.get("dropped_by_bounds", {}).items())
            lines.append(
                f"rows       : {r['read']:,} read"
                + (f"; dropped {', '.join(dropped)}" if dropped else "")
                + f"; {r['in_domain']:,} in domain from {r['units']:,} units; "
                f"{r['kept']:,} kept" + (f" ({bounded} dropped)" if bounded else "")
            )
            if r.get("candidate_keys") is not None:  # a discovered domain, before selection
                lines.append(f"keys found : {r['candidate_keys']:,} (before the selection)")
        lines.extend(_timing_lines(self.timing))
        for key, value in self.paths.items():
            lines.append(f"{key:<11}: {value}")
        entry = self.ledger.get("entry")
        if entry:
            lines.append(f"ledger     : charge #{entry['id']}")
        status = self.ledger.get("status")
        if status:
            lines.append(
                f"budget     : remaining mu={status['mu_remaining']:.6g} (epsilon "
                f"{status['epsilon_remaining']:.4g} at delta={status['delta']:g})"
            )
        if self.seed is not None:
            lines.append(f"seed       : {self.seed}")
        if self.delivery:
            lines.append(f"delivery   : {self.delivery}")
        return "\n".join(lines)
