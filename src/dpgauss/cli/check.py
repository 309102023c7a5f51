"""``dpgauss check SPEC``: the data owner's confidential look at a source.

Thin over :func:`dpgauss.release.check.check_source` (which holds the contract: it never
charges a budget and never writes a release).  Exit status 1 when a policy ``"check_fails"`` finds
rows of its class, 0 otherwise.
"""

from __future__ import annotations

import argparse
import json

from ..release.check import check_source
from ..release.spec import load_spec

__all__ = ["add_check_parser"]


def _run(args: argparse.Namespace) -> tuple[str, int]:
    spec = load_spec(args.spec)
    result = check_source(spec, engine=args.engine)
    text = json.dumps(result.as_dict()) if args.json else result.text()
    return text, 0 if result.ok else 1


def add_check_parser(subparsers: argparse._SubParsersAction) -> argparse.ArgumentParser:
    """Register ``check SPEC [--engine duckdb|spark] [--json]`` (exit 1 on a violation)."""
    from ..release.engine import ENGINES

    check = subparsers.add_parser(
        "check",
        help="the data owner's CONFIDENTIAL check of a source: exact row counts, policies",
        description="Read, bound and aggregate the spec's source as a release would, print the "
        "exact row counters (CONFIDENTIAL: not differentially private) and exit with status 1 "
        "if a policy = 'check_fails' finds rows of its class. Never charges a budget, never "
        "writes.",
    )
    check.add_argument("spec", metavar="SPEC.toml", help="the release spec (TOML)")
    check.add_argument("--engine", choices=ENGINES, default="duckdb", help="default duckdb")
    check.add_argument("--json", action="store_true", help="print one JSON object")
    check.set_defaults(run=_run)
    return check
