"""``dpgauss calibrate`` and ``dpgauss profile``: the analytic Gaussian mechanism by hand.

``calibrate`` prints the smallest σ for (ε, δ)-DP at an L2 sensitivity
(:func:`dpgauss.privacy.analytic_gaussian_sigma`), with the classical σ of Theorem 1 where it
applies; ``profile`` prints δ(ε) or ε(δ) of a given σ (:func:`dpgauss.privacy.gaussian_delta`,
:func:`dpgauss.privacy.gaussian_epsilon`).
"""

from __future__ import annotations

import argparse
import json
from typing import Any

from ..privacy import (
    analytic_gaussian_sigma,
    classical_gaussian_sigma,
    gaussian_delta,
    gaussian_epsilon,
)
from ._args import number

__all__ = ["add_calibrate_parser", "add_profile_parser"]


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


def add_calibrate_parser(sub: Any) -> None:
    """Register ``calibrate --epsilon E --delta D [--sensitivity S] [--json]``."""
    cal = sub.add_parser(
        "calibrate",
        help="smallest sigma for (epsilon, delta)-DP",
        description="Print the smallest Gaussian noise sigma for which adding N(0, sigma^2) "
        "to a query of the given L2 sensitivity is (epsilon, delta)-DP (the analytic "
        "Gaussian mechanism, exact up to rounding toward more noise), with the classical "
        "sigma of Theorem 1 where it applies (0 < epsilon < 1).",
    )
    cal.add_argument("--epsilon", type=number, required=True, help="epsilon >= 0")
    cal.add_argument("--delta", type=number, required=True, help="0 < delta < 1")
    cal.add_argument("--sensitivity", type=number, default=1.0, help="L2 sensitivity > 0")
    cal.add_argument("--json", action="store_true", help="print one JSON object")
    cal.set_defaults(run=_calibrate)


def add_profile_parser(sub: Any) -> None:
    """Register ``profile --sigma S (--epsilon E | --delta D) [--sensitivity S] [--json]``."""
    prof = sub.add_parser(
        "profile",
        help="delta for an epsilon, or epsilon for a delta",
        description="The exact privacy profile of N(0, sigma^2) noise at the given L2 "
        "sensitivity: with --epsilon, the smallest delta it is (epsilon, delta)-DP for; "
        "with --delta, the smallest epsilon (both rounded up, never understated).",
    )
    prof.add_argument("--sigma", type=number, required=True, help="noise sigma > 0")
    prof.add_argument("--sensitivity", type=number, default=1.0, help="L2 sensitivity > 0")
    which = prof.add_mutually_exclusive_group(required=True)
    which.add_argument("--epsilon", type=number, help="epsilon >= 0: print delta(epsilon)")
    which.add_argument("--delta", type=number, help="0 < delta < 1: print epsilon(delta)")
    prof.add_argument("--json", action="store_true", help="print one JSON object")
    prof.set_defaults(run=_profile)
