"""``dpgauss reproduce``: regenerate the paper's figures (thin over :func:`runner.run`).

``add_reproduce_parser(subparsers)`` registers the command on the sub-parsers of the
``dpgauss`` parser::

    dpgauss reproduce [FIGURE ...] [--quick] [--out DIR] [--seed N] [--jobs N]

It returns the text to print (one headline per figure, the files written, the path of
``summary.md``); progress goes to stderr.  Errors are ``ValueError``/``TypeError``, which
``dpgauss.cli.main`` reports in one line with exit status 2.
"""

from __future__ import annotations

import argparse
from typing import Any

from ..experiments.runner import DEFAULT_OUT, REGISTRY, run
from ._args import whole

__all__ = ["add_reproduce_parser"]


def _reproduce(args: argparse.Namespace) -> str:
    try:
        report = run(
            args.figures or None,
            quick=args.quick,
            out=args.out,
            seed=args.seed,
            jobs=args.jobs,
        )
    except OSError as exc:
        raise ValueError(f"cannot write the results to {args.out!r}: {exc}") from None
    return report.text()


def add_reproduce_parser(subparsers: Any) -> argparse.ArgumentParser:
    """Add the ``reproduce`` sub-command to ``subparsers``; returns its parser."""
    figures = ", ".join(f"{n} = {name}" for n, (name, _) in REGISTRY.items())
    parser = subparsers.add_parser(
        "reproduce",
        help="regenerate the paper's figures (PNG, CSV, summary.md)",
        description=(
            "Regenerate Balle & Wang (ICML 2018)'s experiments: per figure a PNG, a CSV of "
            "every plotted number, and a line in DIR/summary.md with the headline as "
            "measured (and where it disagrees with the paper). Default: the paper's full "
            "settings."
        ),
    )
    parser.add_argument(
        "figures",
        nargs="*",
        metavar="FIGURE",
        help=f"figures to run, by number or name ({figures}); default: every available one",
    )
    parser.add_argument(
        "--quick",
        action="store_true",
        help="fewer repetitions and smaller grids: about 1.5 minutes on 2 cores (85 s measured "
        "on this project's machine under load; the taxi heat maps of figure 4 take most of it)",
    )
    parser.add_argument(
        "--out", default=DEFAULT_OUT, metavar="DIR", help=f"output directory ({DEFAULT_OUT})"
    )
    parser.add_argument(
        "--seed", type=whole(0), default=0, metavar="N", help="random seed >= 0 (0)"
    )
    parser.add_argument(
        "--jobs",
        type=whole(1),
        default=1,
        metavar="N",
        help="worker processes over independent grid points (1); results do not depend on it",
    )
    parser.set_defaults(run=_reproduce)
    return parser
