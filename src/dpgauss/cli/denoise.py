"""``dpgauss denoise TABLE``: denoise a Gaussian release made by any system (thin over
:func:`dpgauss.release.denoise_table.denoise_table`).

Post-processing of published values: no privacy is spent and no ledger is read.  Bad
arguments and unreadable tables end in one line on stderr with exit status 2.
"""

from __future__ import annotations

import argparse
import json
from typing import Any

from ..denoise.registry import DENOISERS
from ..release.denoise_table import NOISE_LAWS, denoise_table

__all__ = ["add_denoise_parser"]


def _sigma(text: str) -> float | str:
    try:
        return float(text)
    except ValueError:
        return text  # a column name


def _params(text: str) -> dict[str, Any]:
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ValueError(
            f"--params must be a JSON object, e.g. '{{\"order\": 1}}': {exc}"
        ) from None
    if not isinstance(value, dict):
        raise ValueError("--params must be a JSON object, e.g. '{\"order\": 1}'")
    return value


def _run(args: argparse.Namespace) -> str:
    result = denoise_table(
        args.table,
        value=args.value,
        sigma=args.sigma_arg,
        out=args.out,
        method=args.method,
        params=_params(args.params) if args.params else None,
        key=args.key,
        graph=args.graph,
        edges=args.edges,
        grid=args.grid,
        chain=args.chain,
        level=args.level,
        draws=args.draws,
        seed=args.seed,
        noise=args.noise,
        assume_gaussian=args.assume_gaussian,
        overwrite=args.overwrite,
        nonnegative=args.nonnegative,
        groups=args.groups,
    )
    if args.json:
        return json.dumps(result.report)
    return result.summary


def add_denoise_parser(sub: Any) -> None:
    """Register ``dpgauss denoise`` on the sub-parsers of the ``dpgauss`` parser."""
    p = sub.add_parser(
        "denoise",
        help="denoise any Gaussian release (a CSV/Parquet table) with error bars; no privacy spent",
        description="Denoise the noisy column of a released table (from dpgauss release, "
        "OpenDP, Tumult, PipelineDP or a statistics office) and write it with denoised values "
        "and their intervals, and a JSON report. Post-processing: it costs no privacy.",
    )
    p.add_argument("table", help="the released table, CSV or Parquet")
    p.add_argument("--out", required=True, help="the output table (.csv or .parquet)")
    p.add_argument("--value", default="released", help="the noisy column (default released)")
    p.add_argument(
        "--sigma",
        dest="sigma_arg",
        type=_sigma,
        default=None,
        help="the noise standard deviation: a number, or the column of each row's σ "
        "(default: the column 'sigma')",
    )
    where = p.add_mutually_exclusive_group()
    where.add_argument(
        "--graph",
        help="a GraphML file (node ids = the --key column) or a bundled graph "
        "(manhattan, manhattan-pruned)",
    )
    where.add_argument("--edges", help="a CSV/Parquet edge table (columns u, v) of keys")
    where.add_argument(
        "--grid", nargs=2, type=int, metavar=("ROWS", "COLS"), help="the rows are a grid"
    )
    where.add_argument("--chain", action="store_true", help="the rows, in order, are a chain")
    p.add_argument("--key", default="key", help="the key column (with --graph/--edges)")
    p.add_argument(
        "--method", default="auto", choices=list(DENOISERS), help="the denoiser (default auto)"
    )
    p.add_argument("--params", help="the denoiser's parameters, a JSON object")
    p.add_argument(
        "--nonnegative",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="the values are counts or sums of values >= 0: denoised values and lower bounds "
        "are never negative (default: as the table's dpgauss release report "
        "<table>.report.json says, else off: a table alone does not say what it counts)",
    )
    p.add_argument(
        "--groups",
        help="a CSV/Parquet table of named sums of keys (columns group, the --key column, "
        "optional weight): their sums and intervals go to <out>.groups.csv",
    )
    p.add_argument("--level", type=float, default=0.95, help="interval level (default 0.95)")
    p.add_argument("--draws", type=int, default=None, help="bootstrap draws (default 32)")
    p.add_argument(
        "--seed",
        type=int,
        default=None,
        help="seed of the intervals' draws (default: derived from the values and σ, as a "
        "release does, so a release's intervals are reproduced)",
    )
    p.add_argument(
        "--noise",
        default="gaussian",
        choices=NOISE_LAWS,
        help="the table's noise law (only gaussian is modelled)",
    )
    p.add_argument(
        "--assume-gaussian",
        action="store_true",
        help="denoise non-Gaussian noise as if Gaussian (errors and coverage not guaranteed)",
    )
    p.add_argument("--overwrite", action="store_true", help="replace existing output files")
    p.add_argument("--json", action="store_true", help="print the report as one JSON object")
    p.set_defaults(run=_run)
