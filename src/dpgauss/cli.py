"""The ``dpgauss`` command: a thin layer over the library.

Every sub-command parses its arguments, calls one library function and prints the result.
Bad arguments end in a one-line message on stderr and exit status 2, never a traceback.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import sys
from collections.abc import Callable, Sequence

from .experiments.reproduce_cli import add_reproduce_parser
from .privacy import (
    analytic_gaussian_sigma,
    classical_gaussian_sigma,
    gaussian_delta,
    gaussian_epsilon,
)
from .release.budget_cli import add_budget_parser
from .release.check import add_check_parser
from .release.denoise_cli import add_denoise_parser
from .release.release_cli import add_release_parser

__all__ = ["main"]


class UsageError(Exception):
    """A bad command line: reported in one line, exit status 2."""


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # type: ignore[override]
        raise UsageError(message)


def _number(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    return value


def _classical_or_none(epsilon: float, delta: float, sensitivity: float) -> float | None:
    if not 0.0 < epsilon < 1.0:
        return None
    return float(classical_gaussian_sigma(epsilon, delta, sensitivity))


def _calibrate(args: argparse.Namespace) -> str:
    sigma = analytic_gaussian_sigma(args.epsilon, args.delta, args.sensitivity)
    classical = _classical_or_none(args.epsilon, args.delta, args.sensitivity)
    ratio = None if classical is None else (classical / sigma) ** 2
    if args.json:
        return json.dumps(
            {
                "sigma": sigma,
                "classical_sigma": classical,
                "variance_ratio": ratio,
                "epsilon": args.epsilon,
                "delta": args.delta,
                "sensitivity": args.sensitivity,
            }
        )
    lines = [
        f"epsilon={args.epsilon:g} delta={args.delta:g} sensitivity={args.sensitivity:g}",
        f"analytic sigma  : {sigma:.10g}",
    ]
    if classical is None:
        lines.append("classical sigma : not valid (Theorem 1 needs 0 < epsilon < 1)")
    else:
        lines.append(f"classical sigma : {classical:.10g}")
        lines.append(f"variance ratio  : {ratio:.6g} (classical / analytic)")
    return "\n".join(lines)


def _profile(args: argparse.Namespace) -> str:
    if args.epsilon is not None:
        value = gaussian_delta(args.sigma, args.epsilon, args.sensitivity)
        key, given_key, given = "delta", "epsilon", args.epsilon
    else:
        value = gaussian_epsilon(args.sigma, args.delta, args.sensitivity)
        key, given_key, given = "epsilon", "delta", args.delta
    if args.json:
        return json.dumps(
            {"sigma": args.sigma, "sensitivity": args.sensitivity, given_key: given, key: value}
        )
    return (
        f"sigma={args.sigma:g} sensitivity={args.sensitivity:g} {given_key}={given:g}\n"
        f"{key} = {value:.10g}"
    )


def _demo(args: argparse.Namespace) -> str:
    from .demo import DEMO_DIR, OutputDirError, run_demo

    out = DEMO_DIR if args.out is None else args.out
    try:
        return run_demo(out).summary
    except OutputDirError as exc:
        if args.out is None:
            raise ValueError(f"{exc} (--out DIR)") from None
        raise ValueError(f"--out: {exc}") from None
    except OSError as exc:  # a write after the directory was made (disk full, ...)
        raise ValueError(f"--out: cannot write the demo's outputs to {out}: {exc}") from None


def _build_parser() -> _Parser:
    from . import __version__

    parser = _Parser(
        prog="dpgauss",
        description="Differentially private releases with exactly calibrated Gaussian noise.",
        epilog="Run 'dpgauss COMMAND --help' for a command's options; 'dpgauss demo' shows "
        "the whole flow on bundled data.",
    )
    parser.add_argument("--version", action="version", version=f"dpgauss {__version__}")
    sub = parser.add_subparsers(
        dest="command", required=True, parser_class=_Parser, metavar="COMMAND"
    )

    cal = sub.add_parser(
        "calibrate",
        help="smallest sigma for (epsilon, delta)-DP",
        description="Print the smallest Gaussian noise sigma for which adding N(0, sigma^2) "
        "to a query of the given L2 sensitivity is (epsilon, delta)-DP (the analytic "
        "Gaussian mechanism, exact up to rounding toward more noise), with the classical "
        "sigma of Theorem 1 where it applies (0 < epsilon < 1).",
    )
    cal.add_argument("--epsilon", type=_number, required=True, help="epsilon >= 0")
    cal.add_argument("--delta", type=_number, required=True, help="0 < delta < 1")
    cal.add_argument("--sensitivity", type=_number, default=1.0, help="L2 sensitivity > 0")
    cal.add_argument("--json", action="store_true", help="print one JSON object")
    cal.set_defaults(run=_calibrate)

    prof = sub.add_parser(
        "profile",
        help="delta for an epsilon, or epsilon for a delta",
        description="The exact privacy profile of N(0, sigma^2) noise at the given L2 "
        "sensitivity: with --epsilon, the smallest delta it is (epsilon, delta)-DP for; "
        "with --delta, the smallest epsilon (both rounded up, never understated).",
    )
    prof.add_argument("--sigma", type=_number, required=True, help="noise sigma > 0")
    prof.add_argument("--sensitivity", type=_number, default=1.0, help="L2 sensitivity > 0")
    which = prof.add_mutually_exclusive_group(required=True)
    which.add_argument("--epsilon", type=_number, help="epsilon >= 0: print delta(epsilon)")
    which.add_argument("--delta", type=_number, help="0 < delta < 1: print epsilon(delta)")
    prof.add_argument("--json", action="store_true", help="print one JSON object")
    prof.set_defaults(run=_profile)

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

    add_budget_parser(sub)
    add_release_parser(sub)
    add_check_parser(sub)
    add_denoise_parser(sub)
    add_reproduce_parser(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``dpgauss`` console script; returns the exit status."""
    parser = _build_parser()
    argv = sys.argv[1:] if argv is None else list(argv)
    if not argv:  # a bare `dpgauss`: what it can do, not just "a command is required"
        print(parser.format_help(), end="", file=sys.stderr)
        return 2
    try:
        args = parser.parse_args(argv)
        run: Callable[[argparse.Namespace], str | tuple[str, int]] = args.run
        for name in ("epsilon", "delta", "sigma", "sensitivity"):
            value = getattr(args, name, None)
            if value is not None and not math.isfinite(value):
                raise UsageError(f"--{name} must be finite; got {value}")
        result = run(args)
        text, status = result if isinstance(result, tuple) else (result, 0)
        print(text)
        if status:
            return status
    except UsageError as exc:
        print(f"dpgauss: error: {exc}", file=sys.stderr)
        return 2
    except (ValueError, TypeError) as exc:
        print(f"dpgauss: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("dpgauss: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        # The reader went away (`| head`): stop quietly, and keep Python from complaining
        # again when it flushes stdout at exit.
        import os

        with contextlib.suppress(OSError):
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, sys.stdout.fileno())
        return 141
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
