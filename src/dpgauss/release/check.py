"""``dpgauss check``: the data owner's look at a source, kept apart from every release.

A release is a total function of the data: no record can make it fail, and rows that cannot
be used are dropped and only counted (:mod:`dpgauss.release.pipeline`).  Stopping on bad
records is still what a data owner wants *before* releasing — and it is exactly what must
never happen inside a release, where a refusal (or a message with a count) would disclose
something about the records for free.  So the checks live here, in a separate command
that **never charges a budget and never writes a release**: it runs the same bounding and
aggregation as a release (with a fresh salt) and reports the exact row counters, which are
*confidential* (for the data owner only; not differentially private).

**Records outside the map.**  When the domain places records by their coordinates (a graph,
regions by ``lat``/``lon``) and more than half of the records that reach the domain test
(:data:`OUTSIDE_WARNING`) fall outside it — farther than the cutoff from every node, in no
region, or with coordinates out of range — the check warns: the map and the records are
most likely not in the same CRS (``[source] crs``, ``[domain] crs``:
:mod:`dpgauss.release.domains.crs`), or ``lat`` and ``lon`` are swapped.  A release cannot say
this (the count is the records'); the check, which is confidential, can.  A warning does not
change the exit status.

The spec's policies are what it checks: ``[source] on_malformed``, ``[unit] on_null``,
``[domain] on_invalid`` and ``[statistic] on_invalid`` = ``"check_fails"`` make ``dpgauss check``
exit with status 1 when rows of that class exist; ``"drop"`` (the default) only reports
them.  A release always drops, whatever the policy.

For a CSV source of local files it also reports what the bytes say about the writer that made
them (:class:`~dpgauss.release.engines.csv_format.CsvShape`): how many records span lines (under
``rfc4180``) and how many lines hold an odd number of quotes.  ``[source] csv = "rfc4180"``
(the default) is the data owner's assertion that the writer quotes as RFC 4180 says; a
writer that does not escape quotes leaves stray quotes, and under ``rfc4180`` each one makes
its record swallow the following lines (:mod:`dpgauss.release.engines.csv_format`).  These counts
are how the owner sees which writer it was: an RFC-4180 file has two odd lines per quoted
field with line breaks and never ends inside a quote.
"""

from __future__ import annotations

import secrets
from dataclasses import dataclass
from typing import Any

from .engines import csv_format
from .engines.base import AggregationPlan, Engine, RowCounts
from .engines.csv_format import CsvShape
from .report import CONFIDENTIAL_NOTE, Diagnostics, components_text, map_components
from .spec import ReleaseSpec

__all__ = ["OUTSIDE_WARNING", "CheckResult", "check_source"]

#: ``dpgauss check`` warns when more than this share of the records that reach the domain
#: test fall outside a map (module docstring).
OUTSIDE_WARNING = 0.5


@dataclass(frozen=True)
class CheckResult:
    """The confidential outcome of :func:`check_source`.

    ``rows``: the exact counters; ``violations``: one line per ``"check_fails"`` policy with rows
    of its class; ``ok`` is true when there are none.  ``csv``: the shape of a CSV source's
    local files (None for other sources, or files on another file system) and ``csv_mode``
    its ``[source] csv``.  ``warnings``: what looks wrong without being a policy's (most
    records outside the map).  ``components``: the map's connected components, as the
    release's report gives them (:func:`~dpgauss.release.report.map_components`; public),
    None without a graph or regions part.
    """

    rows: RowCounts
    violations: tuple[str, ...]
    engine: str
    csv: CsvShape | None = None
    csv_mode: str | None = None
    warnings: tuple[str, ...] = ()
    components: dict[str, Any] | None = None

    @property
    def ok(self) -> bool:
        """Whether every ``"check_fails"`` policy holds."""
        return not self.violations

    def as_dict(self) -> dict[str, Any]:
        """A JSON-ready dict (confidential)."""
        return {
            "confidential": CONFIDENTIAL_NOTE,
            "ok": self.ok,
            "violations": list(self.violations),
            "warnings": list(self.warnings),
            "engine": self.engine,
            "rows": self.rows.as_dict(),
            "csv": None if self.csv is None else {"mode": self.csv_mode, **self.csv.as_dict()},
            "components": self.components,
        }

    def text(self) -> str:
        """What ``dpgauss check`` prints."""
        diag = Diagnostics(rows=self.rows.as_dict(), engine=self.engine)
        lines = diag.text().splitlines()  # no delivery: nothing is released
        lines += self._csv_text()
        if self.components is not None:
            lines.append(f"components : {components_text(self.components)}")
        lines += [f"warning: {w}" for w in self.warnings]
        if self.violations:
            lines += [f"FAIL: {v}" for v in self.violations]
        else:
            lines.append(
                "ok: no policy = 'check_fails' is violated (nothing was charged or written)"
            )
        return "\n".join(lines)

    def _csv_text(self) -> list[str]:
        """The writer's evidence, and what it suggests for ``[source] csv``."""
        c = self.csv
        if c is None:
            return []
        lines = [
            f"csv        : [source] csv = {self.csv_mode!r}; {c.files:,} files, {c.lines:,} "
            f"lines, {c.records:,} RFC 4180 records",
            f"             {c.spanning_records:,} records span lines ({c.spanning_lines:,} "
            f"lines); {c.odd_quote_lines:,} lines have an odd number of quotes; "
            f"{c.unterminated_files:,} files end inside a quote",
        ]
        if self.csv_mode == "rfc4180" and c.unterminated_files:
            lines.append(
                "             a quote never closes: the rest of such a file is one malformed "
                "record. A writer that does not escape quotes? Then csv = 'lines'"
            )
        elif self.csv_mode == "rfc4180" and c.spanning_records:
            lines.append(
                "             records of several lines: quoted line breaks of an RFC 4180 "
                "writer, or stray quotes of one that does not escape them (csv = 'lines')"
            )
        elif self.csv_mode == "lines" and c.spanning_records:
            lines.append(
                "             runs of lines whose quotes balance only together: quoted line "
                "breaks of an RFC 4180 writer? Then csv = 'rfc4180' reads them as records"
            )
        return lines


def _csv_shape(spec: ReleaseSpec) -> CsvShape | None:
    """The shape of a CSV source of local files (None for other sources, and for paths the
    engine read from another file system: Spark's default one, say)."""
    src = spec.source
    if src.file_format != "csv" or any(csv_format.is_remote(p) for p in src.paths):
        return None
    try:
        return csv_format.csv_shape(csv_format.expand_paths(src.paths))
    except csv_format.CsvError:  # the engine read them, so they are not local files
        return None


def _violations(spec: ReleaseSpec, r: RowCounts) -> tuple[str, ...]:
    checks = [
        (spec.source.on_malformed, r.malformed_lines, "[source] on_malformed", "malformed lines"),
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
    return tuple(
        f"{count:,} {what} ({key} = 'check_fails')"
        for policy, count, key, what in checks
        if policy == "check_fails" and count
    )


def _map_warnings(spec: ReleaseSpec, domain: Any, r: RowCounts) -> tuple[str, ...]:
    """The warning of a map most records miss (module docstring), if it applies."""
    maps = [a.spec for a in domain.axes if a.spec.locates]
    reached = r.invalid_domain + r.outside_domain + r.in_domain
    missed = r.invalid_domain + r.outside_domain
    if not maps or not reached or missed <= OUTSIDE_WARNING * reached:
        return ()
    alone = len(domain.axes) == 1
    where = "the map" if alone else "the domain (the map or another part)"
    crs = spec.source.crs or "WGS84 lon/lat degrees (no [source] crs)"
    part = maps[0]
    near = (
        f"farther than {part.effective_cutoff:g} m from every node"
        if part.kind == "graph"
        else "in no region"
    )
    return (
        f"{missed / reached:.0%} of the records that reach the domain ({missed:,} of "
        f"{reached:,}) fall outside {where} ({near}, or coordinates out of range). Are the "
        f"records and the map in the same CRS? The records' is {crs}; the map's is "
        f"[{part.where}] crs, or its file's (docs/release.md, 'Coordinates'). Are "
        f"[{part.where}] lat and lon the right way round? Does the map cover the records' area?",
    )


def check_source(
    spec: ReleaseSpec,
    *,
    engine: str | Engine = "duckdb",
    engine_options: dict[str, Any] | None = None,
) -> CheckResult:
    """Aggregate ``spec``'s source as a release would and check its policies (module doc).

    Never charges, never writes.  Raises ``ValueError`` for a spec or a source that cannot
    be read at all (as planning a release would).
    """
    from .domains.key_domain import resolve_domain
    from .plan import _check_columns, make_engine, sensitivity_of, value_offset

    if not isinstance(spec, ReleaseSpec):
        raise TypeError(f"spec must be a ReleaseSpec; got {type(spec).__name__}")
    domain = resolve_domain(spec)
    sensitivity_of(spec, domain)  # the bounds must give a sensitivity, as for a release
    eng = make_engine(engine, engine_options)
    _check_columns(spec, eng.describe(spec))
    from .engines.base import EngineError

    try:
        agg = eng.aggregate(AggregationPlan(spec, domain, secrets.randbits(64), value_offset(spec)))
    except EngineError as exc:
        if exc.detail is None:
            raise
        raise ValueError(f"CONFIDENTIAL (may quote the data): {exc.detail}") from None
    shape = _csv_shape(spec)
    components = map_components(domain)
    return CheckResult(
        agg.rows,
        _violations(spec, agg.rows),
        getattr(eng, "name", type(eng).__name__),
        shape,
        spec.source.csv if shape is not None else None,
        _map_warnings(spec, domain, agg.rows),
        components,
    )
