"""The ``dpgauss`` command: a thin layer over the library.

Every sub-command parses its arguments, calls one library function and prints the result.
Bad arguments end in a one-line message on stderr and exit status 2, never a traceback.

Ctrl-C ends in one line and exit status 130 wherever it lands, the start-up included: this
module imports nothing heavy, so the sub-commands (and NumPy, SciPy, DuckDB behind them) are
imported inside :func:`main`'s handlers.  A process started with SIGINT *ignored* keeps it
ignored, as POSIX programs do (a non-interactive shell starts ``cmd &`` that way, and so do
``nohup`` and some job runners): Python then installs no handler, and Ctrl-C cannot reach
it.  That is the caller's choice, not a lost signal (issue #28, item 1).
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import math
import sys
import warnings
from collections.abc import Callable, Sequence
from typing import TextIO

from ..errors import ReleaseInterrupted, UsageError, cli_message, interrupted

__all__ = ["main"]


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # type: ignore[override]
        raise UsageError(message)


def _build_parser() -> _Parser:
    """The whole parser; imports every sub-command (the heavy part of the start-up)."""
    from .. import __version__
    from .budget import add_budget_parser
    from .calibrate import add_calibrate_parser, add_profile_parser
    from .check import add_check_parser
    from .demo import add_demo_parser
    from .denoise import add_denoise_parser
    from .release import add_release_parser
    from .reproduce import add_reproduce_parser

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

    add_calibrate_parser(sub)
    add_profile_parser(sub)
    add_demo_parser(sub)
    add_budget_parser(sub)
    add_release_parser(sub)
    add_check_parser(sub)
    add_denoise_parser(sub)
    add_reproduce_parser(sub)
    return parser


def _show_warning(
    previous: Callable[..., None],
    message: Warning | str,
    category: type[Warning],
    filename: str,
    lineno: int,
    file: TextIO | None = None,
    line: str | None = None,
) -> None:
    """dpgauss's own warnings (``dpgauss.errors``: an assumed CRS, a trend filter that did not
    converge) as one ``dpgauss: warning: ...`` line on stderr, as errors are; any other
    library's warning to ``previous``, the way of showing them that was in place."""
    if category.__module__.startswith("dpgauss"):
        print(f"dpgauss: warning: {' '.join(str(message).split())}", file=file or sys.stderr)
        return
    previous(message, category, filename, lineno, file, line)


def _interrupted(exc: BaseException, process: bool) -> int:
    """Ctrl-C: one line on stderr (what became of a charge, if a release had charged), exit
    status 130.  When ``main`` is the process's command (``process``: called without
    ``argv``), the process ends here, so a second Ctrl-C (a user pressing again) is ignored
    from now on: it must not end in a traceback."""
    if process:
        import signal

        with contextlib.suppress(ValueError):  # not the main thread
            signal.signal(signal.SIGINT, signal.SIG_IGN)
    charged = isinstance(exc, ReleaseInterrupted) and str(exc)
    print(f"dpgauss: {charged}" if charged else "dpgauss: interrupted", file=sys.stderr)
    return 130


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``dpgauss`` console script; returns the exit status."""
    process = argv is None
    argv = sys.argv[1:] if argv is None else list(argv)
    try:
        parser = _build_parser()  # inside: a Ctrl-C during the imports is one line too
        if not argv:  # a bare `dpgauss`: what it can do, not just "a command is required"
            print(parser.format_help(), end="", file=sys.stderr)
            return 2
        args = parser.parse_args(argv)
        run: Callable[[argparse.Namespace], str | tuple[str, int]] = args.run
        for name in ("epsilon", "delta", "sigma", "sensitivity"):
            value = getattr(args, name, None)
            if value is not None and not math.isfinite(value):
                raise UsageError(f"--{name} must be finite; got {value}")
        with warnings.catch_warnings():
            previous = warnings.showwarning
            warnings.showwarning = functools.partial(_show_warning, previous)
            result = run(args)
        text, status = result if isinstance(result, tuple) else (result, 0)
        print(text)
        if status:
            return status
    except UsageError as exc:
        print(f"dpgauss: error: {exc}", file=sys.stderr)
        return 2
    except (ValueError, TypeError) as exc:
        print(f"dpgauss: error: {cli_message(exc)}", file=sys.stderr)
        return 2
    except KeyboardInterrupt as exc:
        return _interrupted(exc, process)
    except SystemError as exc:  # Ctrl-C inside a compiled (numba) function
        if not interrupted(exc):
            raise
        return _interrupted(exc, process)
    except BrokenPipeError:
        # The reader went away (`| head`): stop quietly, and keep Python from complaining
        # again when it flushes stdout at exit.
        import os

        with contextlib.suppress(OSError):
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, sys.stdout.fileno())
        return 141
    return 0
