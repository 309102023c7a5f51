"""Argument types shared by the sub-commands: one message for the same mistake everywhere.

argparse turns an :class:`argparse.ArgumentTypeError` into ``dpgauss: error: argument
--name: <message>`` (exit status 2, :func:`dpgauss.cli.main.main`).
"""

from __future__ import annotations

import argparse
from collections.abc import Callable

__all__ = ["number", "whole"]


def number(text: str) -> float:
    """A real number (``float``'s syntax); finiteness is checked by ``main`` for the flags
    that need it."""
    try:
        return float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None


def whole(low: int) -> Callable[[str], int]:
    """A parser of whole numbers ``>= low``."""

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"not a whole number: {text!r}") from None
        if value < low:
            raise argparse.ArgumentTypeError(f"must be at least {low}; got {value}")
        return value

    return parse
