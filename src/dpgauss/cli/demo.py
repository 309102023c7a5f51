"""``dpgauss demo``: the whole flow on bundled data (:func:`dpgauss.demo.run_demo`)."""

from __future__ import annotations

import argparse
from typing import Any

__all__ = ["add_demo_parser"]


def _demo(args: argparse.Namespace) -> str:
    from ..demo import DEMO_DIR, OutputDirError, run_demo

    out = DEMO_DIR if args.out is None else args.out
    try:
        return run_demo(out).summary
    except OutputDirError as exc:
        if args.out is None:
            raise ValueError(f"{exc} (--out DIR)") from None
        raise ValueError(f"--out: {exc}") from None
    except OSError as exc:  # a write after the directory was made (disk full, ...)
        raise ValueError(f"--out: cannot write the demo's outputs to {out}: {exc}") from None


def add_demo_parser(sub: Any) -> None:
    """Register ``demo [--out DIR]``."""
    demo = sub.add_parser(
        "demo",
        help="the main job: a private taxi heat map of Manhattan, released and denoised",
        description="Release the pickups per Manhattan junction of the bundled taxi trips in "
        "one busy window with the secure analytic Gaussian mechanism, denoise with auto, and "
        "write the table, report and heat maps to OUT (default dpgauss-demo/).",
    )
    demo.add_argument(
        "--out", default=None, help="output directory (replaced; default dpgauss-demo)"
    )
    demo.set_defaults(run=_demo)
