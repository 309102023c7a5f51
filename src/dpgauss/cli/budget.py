"""``dpgauss budget``: create, inspect and plan privacy budgets (thin over the ledger).

``add_budget_parser(subparsers)`` registers the ``budget`` command and its sub-commands
``init``, ``list``, ``show`` and ``plan`` on the sub-parsers of the ``dpgauss`` parser.  Each one
returns the text to print; errors are ``ValueError``/``TypeError`` (the ledger's errors
are ``ValueError`` too), which ``dpgauss.cli.main`` reports in one line with exit status 2.

The ledger file is ``--ledger FILE`` or, if that is not given, the environment variable
``DPGAUSS_LEDGER``.
"""

from __future__ import annotations

import argparse
import json
import os

from ..noise.mechanisms import GaussianMechanism
from ..privacy import gaussian_epsilon
from ..privacy._rounding import fits_budget
from ..privacy.accounting import GaussianAccountant, QueryPlan, plan_queries
from ..privacy.composition import composed_sigma
from ..release.ledger import BudgetStatus, Ledger, _budget_terms, charge_mu
from ..release.plan import LEDGER_ENV
from ._args import number, whole

__all__ = ["LEDGER_ENV", "add_budget_parser"]


def _ledger_path(args: argparse.Namespace) -> str:
    path = args.ledger or os.environ.get(LEDGER_ENV)
    if not path:
        raise ValueError(f"no ledger file: give --ledger FILE or set {LEDGER_ENV}")
    return path


def _exact(x: float) -> str:
    """A budget's own numbers as stored: the shortest text that reads back to the same
    double (``1.000001``, not ``1``; ``1e-06``), without a trailing ``.0``."""
    text = repr(float(x))
    return text[:-2] if text.endswith(".0") else text


def _status_lines(s: BudgetStatus) -> list[str]:
    eps, dlt = _exact(s.epsilon), _exact(s.delta)
    return [
        f"budget    : epsilon={eps} delta={dlt} (mu={_exact(s.mu_budget)})",
        f"spent     : mu={_exact(s.mu_spent)} in {s.charges} charge(s) "
        f"(epsilon={s.epsilon_spent:.10g} at delta={dlt})",
        f"remaining : mu={_exact(s.mu_remaining)} "
        f"(one more release using all of it: epsilon={s.epsilon_remaining:.10g} "
        f"at delta={dlt})",
    ]


def _list(args: argparse.Namespace) -> str:
    path = _ledger_path(args)
    with Ledger(path, create=False) as ledger:
        statuses = [ledger.remaining(name) for name in ledger.datasets()]
    if args.json:
        return json.dumps(
            {"ledger": os.path.abspath(path), "budgets": [s.as_dict() for s in statuses]}
        )
    if not statuses:
        return f"no budgets in {os.path.abspath(path)} (create one with 'dpgauss budget init')"
    rows = [f"{'dataset':<24} {'epsilon':>12} {'delta':>10} {'charges':>8} {'epsilon left':>13}"]
    for s in statuses:
        rows.append(
            f"{s.dataset:<24} {_exact(s.epsilon):>12} {_exact(s.delta):>10} {s.charges:>8} "
            f"{s.epsilon_remaining:>13.10g}"
        )
    return "\n".join([f"ledger    : {os.path.abspath(path)}", *rows])


def _init(args: argparse.Namespace) -> str:
    path = _ledger_path(args)
    _budget_terms(args.dataset, args.epsilon, args.delta)  # a refusal creates no ledger file
    with Ledger(path) as ledger:
        status = ledger.create_budget(args.dataset, args.epsilon, args.delta)
    if args.json:
        return json.dumps({"ledger": os.path.abspath(path), **status.as_dict()})
    head = f"created the budget of dataset {status.dataset!r} in {os.path.abspath(path)}"
    return "\n".join([head, *_status_lines(status)])


def _show(args: argparse.Namespace) -> str:
    path = _ledger_path(args)
    with Ledger(path, create=False) as ledger:
        status = ledger.remaining(args.dataset)
        entries = ledger.charges(args.dataset)
    if args.json:
        return json.dumps(
            {
                "ledger": os.path.abspath(path),
                **status.as_dict(),
                "entries": [e.as_dict() for e in entries],
            }
        )
    lines = [f"dataset   : {status.dataset}", f"ledger    : {os.path.abspath(path)}"]
    lines += _status_lines(status)
    if entries:
        lines.append("")
        lines.append(
            f"{'id':>5}  {'time (UTC)':<32} {'sigma':>12} {'sensitivity':>12} {'mu':>12}  "
            f"{'delivery':<10} label"
        )
        for e in entries:
            sigma = "-" if e.sigma is None else f"{e.sigma:.6g}"
            sens = "-" if e.sensitivity is None else f"{e.sensitivity:.6g}"
            lines.append(
                f"{e.id:>5}  {e.time:<32} {sigma:>12} {sens:>12} {e.mu:>12.6g}  "
                f"{e.delivery or '-':<10} {e.label or ''}"
            )
        unfinished = [e for e in entries if e.delivery in ("charged", "writing", "failed")]
        for e in unfinished:
            what = {
                "charged": "charged, not yet delivered (still running, or stopped before writing)",
                "writing": "charged; its files were being named (still running, or stopped)",
                "failed": "charged, not delivered",
            }[str(e.delivery)]
            lines.append(f"  #{e.id}: {what}" + (f": {e.note}" if e.note else ""))
    return "\n".join(lines)


def _checked(plan: QueryPlan, keys: int, secure: bool) -> tuple[float, float]:
    """(largest charge, its noise σ) of one planned release of ``keys`` coordinates, for
    both ways of writing the spec (``epsilon = ε_q`` and ``sigma = σ_q``), calibrated as
    the release pipeline calibrates a count: ``GaussianMechanism(ε, δ, Δ).noise_plan``."""
    worst = (0.0, 0.0)
    derived = float(gaussian_epsilon(plan.sigma, plan.delta, plan.sensitivity))
    for eps in (plan.epsilon, derived):
        law = GaussianMechanism(eps, plan.delta, plan.sensitivity).noise_plan(keys, secure=secure)
        worst = max(worst, (charge_mu(law), law.sigma))
    return worst


def _plan(args: argparse.Namespace) -> str:
    k, eps, dlt, sens = args.queries, args.epsilon, args.delta, args.sensitivity
    plan = plan_queries(eps, dlt, k, sens)
    noise = "secure" if args.secure else "continuous"
    acc = GaussianAccountant()
    acc.add_mu(plan.mu, count=k)
    total_eps = float(acc.epsilon(dlt))
    basic = composed_sigma("basic", k, eps, dlt, sens)
    ratio = (basic / plan.sigma) ** 2
    checked: dict[str, object] = {"keys": args.keys}
    if args.keys is not None:
        mu_c, noise_sigma = _checked(plan, args.keys, args.secure)
        checked.update(
            charge_per_query=mu_c,
            noise_sigma=noise_sigma,
            fit=fits_budget([mu_c], plan.mu_budget, count=k),
            next_refused=not fits_budget([mu_c], plan.mu_budget, count=k + 1),
        )
    if args.json:
        return json.dumps(
            {
                "sigma": plan.sigma,
                "epsilon_per_query": plan.epsilon,
                "mu_per_query": plan.mu,
                "mu_total": acc.mu,
                "mu_budget": plan.mu_budget,
                "epsilon_total": total_eps,
                "noise": noise,
                **checked,
                "basic_sigma": basic,
                "variance_ratio": ratio,
                "queries": k,
                "epsilon": eps,
                "delta": dlt,
                "sensitivity": sens,
            }
        )
    kind = (
        "secure lattice discrete Gaussian (the release default): its noise sigma is 0.5-1 % "
        "above sigma per query, the price of the grid (--keys N: exactly)"
        if args.secure
        else "continuous floating-point Gaussian, charged sensitivity/sigma by "
        "Ledger.charge(sigma=, sensitivity=) (dpgauss release never charges secure = false)"
    )
    lines = [
        f"epsilon={eps:g} delta={dlt:g} queries={k} sensitivity={sens:g} noise={noise}",
        f"epsilon per query : {plan.epsilon:.10g} at delta={dlt:g} (spec: [privacy] epsilon)",
        f"sigma per query   : {plan.sigma:.10g} (spec: [privacy] sigma, at this sensitivity)",
        f"noise             : {kind}",
        f"charge per query  : mu<={plan.mu:.10g} for either spec and any number of keys",
        f"together          : mu<={acc.mu:.10g} of the budget mu={plan.mu_budget:.10g}, "
        f"epsilon<={total_eps:.6g} at delta={dlt:g}",
    ]
    if args.keys is not None:
        fit = "fit" if checked["fit"] else "DO NOT fit"
        nxt = "is refused" if checked["next_refused"] else "would still fit"
        lines.append(
            f"checked           : {args.keys} keys: charged mu={checked['charge_per_query']:.10g}"
            f", noise sigma={checked['noise_sigma']:.10g}; {k} releases {fit}, "
            f"release {k + 1} {nxt}"
        )
    lines += [
        f"basic split       : sigma={basic:.10g} (each query at epsilon/k, delta/k)",
        f"variance ratio    : {ratio:.6g} (basic split / exact composition)",
    ]
    return "\n".join(lines)


def add_budget_parser(subparsers: argparse._SubParsersAction) -> argparse.ArgumentParser:
    """Register ``budget`` with its sub-commands ``init``, ``list``, ``show`` and ``plan``.

    ``subparsers`` is the object returned by ``parser.add_subparsers(...)``; every parser
    created here has its class (so a parser whose ``error`` raises keeps doing so).  Each
    sub-command sets ``run`` to a function of the parsed arguments returning the text to
    print.  Returns the ``budget`` parser.
    """
    budget = subparsers.add_parser(
        "budget",
        help="privacy budget ledger: init, list, show, plan",
        description="Create, inspect and plan (epsilon, delta) privacy budgets. The ledger "
        f"file is --ledger FILE or ${LEDGER_ENV}.",
    )
    sub = budget.add_subparsers(
        dest="budget_command",
        metavar="{init,list,show,plan}",
        required=True,
        parser_class=type(budget),
    )

    ledger_help = f"the ledger file (default: ${LEDGER_ENV})"

    init = sub.add_parser("init", help="create the (epsilon, delta) budget of a dataset")
    init.add_argument("dataset", help="dataset id")
    init.add_argument("--epsilon", type=number, required=True, help="epsilon > 0")
    init.add_argument("--delta", type=number, required=True, help="0 < delta < 1")
    init.add_argument("--ledger", metavar="FILE", help=ledger_help + "; created if missing")
    init.add_argument("--json", action="store_true", help="print one JSON object")
    init.set_defaults(run=_init)

    listing = sub.add_parser("list", help="every dataset's budget, one line each")
    listing.add_argument("--ledger", metavar="FILE", help=ledger_help)
    listing.add_argument("--json", action="store_true", help="print one JSON object")
    listing.set_defaults(run=_list)

    show = sub.add_parser("show", help="budget, spent and remaining, and every charge")
    show.add_argument("dataset", help="dataset id")
    show.add_argument("--ledger", metavar="FILE", help=ledger_help)
    show.add_argument("--json", action="store_true", help="print one JSON object")
    show.set_defaults(run=_show)

    plan = sub.add_parser(
        "plan", help="epsilon and sigma per query so that K releases fit (epsilon, delta)"
    )
    plan.add_argument("--epsilon", type=number, required=True, help="total epsilon > 0")
    plan.add_argument("--delta", type=number, required=True, help="total 0 < delta < 1")
    plan.add_argument("--queries", type=whole(1), required=True, metavar="K", help="K >= 1")
    plan.add_argument("--sensitivity", type=number, default=1.0, help="L2 sensitivity > 0")
    plan.add_argument(
        "--secure",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="plan secure lattice noise (the release default) or continuous noise "
        "(--no-secure, [privacy] secure = false)",
    )
    plan.add_argument(
        "--keys",
        type=whole(1),
        metavar="N",
        help="also calibrate one release of N keys as the pipeline does and check that K "
        "fit and K+1 do not",
    )
    plan.add_argument("--json", action="store_true", help="print one JSON object")
    plan.set_defaults(run=_plan)
    return budget
