"""``dpgauss release SPEC.toml``: a table of records to a finished release (thin over the pipeline).

``add_release_parser(subparsers)`` registers the ``release`` command on the sub-parsers of the
``dpgauss`` parser.  Its ``run`` returns the text to print (the public release summary, or one
JSON object with ``--json``); every expected problem is a ``ValueError``/``TypeError`` (bad
spec, budget exceeded, unreadable source, an output that cannot be written), which
``dpgauss.cli.main`` reports in one line with exit status 2.  No record of the data can cause
one: the data owner's checks that stop on bad records are ``dpgauss check``.

What is printed is public (σ, ε, δ, the denoiser, the charge).  The exact row counters,
timings and paths are confidential: they go to the ``CONFIDENTIAL-…json`` diagnostics file
and are printed only with ``--diagnostics``, under a CONFIDENTIAL banner.  A ``secure = false``
release is an uncharged experiment and says so on stderr, in the summary and in the JSON.

The ledger file is ``--ledger FILE``, else ``[privacy] ledger`` in the spec, else the
environment variable ``DPGAUSS_LEDGER``.  Progress (one line per step, and
DuckDB's bar on long scans) goes to stderr on a terminal, or wherever ``--progress`` asks
(``--no-progress`` silences it).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys

from ..release.engines import ENGINES
from ..release.pipeline import LEDGER_ENV, run_release
from ..release.report import NOT_PRIVATE_WARNING
from ..release.spec import load_spec

__all__ = ["add_release_parser"]


def _run(args: argparse.Namespace) -> str:
    spec = load_spec(args.spec)
    if args.overwrite:
        spec = dataclasses.replace(spec, output=dataclasses.replace(spec.output, overwrite=True))
    if not spec.privacy.secure:
        sys.stderr.write(f"dpgauss: WARNING: {NOT_PRIVATE_WARNING}\n")
    show = args.progress if args.progress is not None else sys.stderr.isatty() and not args.json
    progress = sys.stderr if show else None
    result = run_release(
        spec,
        engine=args.engine,
        out=args.out,
        ledger=args.ledger,
        progress=progress,
        spec_path=args.spec,
        period=args.period,
    )
    if args.json:
        r = result.report
        out = {
            **({"warning": r["warning"]} if "warning" in r else {}),
            "output": r["output"]["table"],  # names only: local paths are confidential
            "report": r["output"]["report"],
            "sensitivity": r["sensitivity"]["l2"],
            "sigma": r["privacy"]["sigma"],
            "classical_sigma": r["privacy"]["classical_sigma"],
            "mu": r["charge"].get("mu"),
            "charge": r["charge"],
            "denoise": r["denoise"]["method"],
            "estimated_rmse_per_key": r["denoise"]["rmse_per_key"],
            "estimated_rmse_per_key_upper95": r["denoise"]["rmse_per_key_upper95"],
        }
        if "series" in r:
            out["series"] = r["series"]
        if args.diagnostics:
            out["confidential_diagnostics"] = result.diagnostics
            out["confidential_diagnostics_path"] = result.diagnostics_path
        return json.dumps(out)
    text = result.summary
    if args.diagnostics:
        text += "\n" + result.diagnostics_text
        if result.diagnostics_path:
            text += f"\ndiagnostics: {result.diagnostics_path}"
    return text


def add_release_parser(subparsers: argparse._SubParsersAction) -> argparse.ArgumentParser:
    """Register ``release SPEC [--engine duckdb|spark] [--out PATH] [--ledger FILE] [--json]``.

    ``subparsers`` is the object returned by ``parser.add_subparsers(...)``; the parser keeps
    its class (so a parser whose ``error`` raises keeps doing so).  Sets ``run`` to a function
    of the parsed arguments returning the text to print.  Returns the ``release`` parser.
    """
    release = subparsers.add_parser(
        "release",
        help="release a table of records (a TOML spec) with enforced sensitivity",
        description="Bound each privacy unit's contribution, aggregate, add calibrated "
        "Gaussian noise, denoise and write the release and its report, charging the budget "
        f"ledger first. The ledger is --ledger FILE, [privacy] ledger, or ${LEDGER_ENV}.",
    )
    release.add_argument("spec", metavar="SPEC.toml", help="the release spec (TOML)")
    release.add_argument(
        "--engine", choices=ENGINES, default="duckdb", help="where to aggregate (default duckdb)"
    )
    release.add_argument("--out", metavar="PATH", help="output path (overrides [output] path)")
    release.add_argument(
        "--period",
        metavar="START",
        help="a [series] spec: the start of the one period to release "
        "(e.g. 2013-01-13T09:00:00); the table is the output path with the period in its name",
    )
    release.add_argument(
        "--overwrite",
        action="store_true",
        help="replace existing output files (as [output] overwrite = true)",
    )
    release.add_argument(
        "--ledger", metavar="FILE", help="budget ledger (overrides [privacy] ledger)"
    )
    release.add_argument("--json", action="store_true", help="print one JSON object")
    release.add_argument(
        "--progress",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="one line per step on stderr (default: when stderr is a terminal and not --json)",
    )
    release.add_argument(
        "--diagnostics",
        action="store_true",
        help="also print the CONFIDENTIAL diagnostics (exact row counts, timings, paths): for "
        "the data owner only, never publish them",
    )
    release.set_defaults(run=_run)
    return release
