"""``dpgauss check``: the data owner's look at a source, kept apart from every release.

A release is a total function of the data: no record can make it fail, and rows that cannot
be used are dropped and only counted (:mod:`dpgauss.release.pipeline`).  Stopping on bad
records is still what a data owner wants *before* releasing — and it is exactly what must
never happen inside a release, where a refusal (or a message with a count) would disclose
something about the records for free.  So the checks live here, in a separate command
that **never charges a budget and never writes a release**: it runs the same bounding and
aggregation as a release (with a fresh salt) and reports the exact row counters, which are
*confidential* (for the data owner only; not differentially private).

The spec's policies are what it checks: ``[source] on_malformed``, ``[unit] on_null``,
``[domain] on_invalid`` and ``[statistic] on_invalid`` = ``"fail"`` make ``dpgauss check``
exit with status 1 when rows of that class exist; ``"drop"`` (the default) only reports
them.  A release always drops, whatever the policy.
"""

from __future__ import annotations

import argparse
import json
import secrets
from dataclasses import dataclass
from typing import Any

from .engine import AggregationPlan, Engine, RowCounts
from .report import CONFIDENTIAL_NOTE, Diagnostics
from .spec import ReleaseSpec, load_spec

__all__ = ["CheckResult", "add_check_parser", "check_source"]


@dataclass(frozen=True)
class CheckResult:
    """The confidential outcome of :func:`check_source`.

    ``rows``: the exact counters; ``violations``: one line per ``"fail"`` policy with rows
    of its class; ``ok`` is true when there are none.
    """

    rows: RowCounts
    violations: tuple[str, ...]
    engine: str

    @property
    def ok(self) -> bool:
        """Whether every ``"fail"`` policy holds."""
        return not self.violations

    def as_dict(self) -> dict[str, Any]:
        """A JSON-ready dict (confidential)."""
        return {
            "confidential": CONFIDENTIAL_NOTE,
            "ok": self.ok,
            "violations": list(self.violations),
            "engine": self.engine,
            "rows": self.rows.as_dict(),
        }

    def text(self) -> str:
        """What ``dpgauss check`` prints."""
        diag = Diagnostics(rows=self.rows.as_dict(), engine=self.engine)
        lines = diag.text().splitlines()  # no delivery: nothing is released
        if self.violations:
            lines += [f"FAIL: {v}" for v in self.violations]
        else:
            lines.append("ok: no policy = 'fail' is violated (nothing was charged or written)")
        return "\n".join(lines)


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
        f"{count:,} {what} ({key} = 'fail')"
        for policy, count, key, what in checks
        if policy == "fail" and count
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
    from .domain import resolve_domain
    from .pipeline import sensitivity_of
    from .plan import _check_columns, make_engine, value_offset

    if not isinstance(spec, ReleaseSpec):
        raise TypeError(f"spec must be a ReleaseSpec; got {type(spec).__name__}")
    domain = resolve_domain(spec)
    sensitivity_of(spec, domain)  # the bounds must give a sensitivity, as for a release
    eng = make_engine(engine, engine_options)
    _check_columns(spec, eng.describe(spec))
    from .engine_duckdb import EngineError

    try:
        agg = eng.aggregate(AggregationPlan(spec, domain, secrets.randbits(64), value_offset(spec)))
    except EngineError as exc:
        if exc.detail is None:
            raise
        raise ValueError(f"CONFIDENTIAL (may quote the data): {exc.detail}") from None
    return CheckResult(
        agg.rows, _violations(spec, agg.rows), getattr(eng, "name", type(eng).__name__)
    )


def _run(args: argparse.Namespace) -> tuple[str, int]:
    spec = load_spec(args.spec)
    result = check_source(spec, engine=args.engine)
    text = json.dumps(result.as_dict()) if args.json else result.text()
    return text, 0 if result.ok else 1


def add_check_parser(subparsers: argparse._SubParsersAction) -> argparse.ArgumentParser:
    """Register ``check SPEC [--engine duckdb|spark] [--json]`` (exit 1 on a violation)."""
    from .engine import ENGINES

    check = subparsers.add_parser(
        "check",
        help="the data owner's CONFIDENTIAL check of a source: exact row counts, policies",
        description="Read, bound and aggregate the spec's source as a release would, print the "
        "exact row counters (CONFIDENTIAL: not differentially private) and exit with status 1 "
        "if a policy = 'fail' finds rows of its class. Never charges a budget, never writes.",
    )
    check.add_argument("spec", metavar="SPEC.toml", help="the release spec (TOML)")
    check.add_argument("--engine", choices=ENGINES, default="duckdb", help="default duckdb")
    check.add_argument("--json", action="store_true", help="print one JSON object")
    check.set_defaults(run=_run)
    return check
