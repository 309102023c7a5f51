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
import math
import os

from ..noise.mechanisms import GaussianMechanism
from ..noise.release import NoisePlan
from ..privacy import gaussian_epsilon
from ..privacy._rounding import fits_budget
from ..privacy.accounting import GaussianAccountant, QueryPlan, plan_queries
from ..privacy.calibration import gdp_mu
from ..privacy.composition import composed_sigma
from ..privacy.partition_selection import plan_selections
from ..privacy.target_error import decimal_up, denoised_sigma, smallest_epsilon
from ..release.ledger import BudgetStatus, Ledger, _budget_terms, _grid_terms, charge_mu
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
    lines = [
        f"budget    : epsilon={eps} delta={dlt} (mu={_exact(s.mu_budget)})",
        f"spent     : mu={_exact(s.mu_spent)} in {s.charges} charge(s) "
        f"(epsilon={s.epsilon_spent:.10g} at delta={dlt})",
        f"remaining : mu={_exact(s.mu_remaining)} "
        f"(one more release using all of it: epsilon={s.epsilon_remaining:.10g} "
        f"at delta={dlt})",
    ]
    if s.scope == "period":
        lines.insert(
            1,
            f"scope     : a unit within one {s.period} period of {s.column!r} (parallel "
            f"composition: the "
            f"figures are those of the most spent of {s.periods} period(s) charged)",
        )
    if s.eta_spent > 0.0:
        lines.insert(
            2,
            f"outside   : delta={_exact(s.eta_spent)} spent by key selections, outside "
            f"mu-GDP: the mu budget is now {_exact(s.mu_effective or 0.0)} "
            f"(gdp_mu(epsilon, delta - {_exact(s.eta_spent)}))",
        )
    return lines


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
    try:
        _grid_terms(args.scope, args.period, args.origin, args.column)
    except ValueError as exc:
        raise ValueError(f"--scope/--period/--column/--origin: {exc}") from None
    with Ledger(path) as ledger:
        status = ledger.create_budget(
            args.dataset,
            args.epsilon,
            args.delta,
            scope=args.scope,
            period=args.period,
            origin=args.origin,
            column=args.column,
            unit=args.unit,
        )
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
            outside = f" (+ delta {e.eta:.6g} outside mu-GDP)" if e.eta else ""
            period = f" [period {e.period}]" if e.period else ""
            lines.append(
                f"{e.id:>5}  {e.time:<32} {sigma:>12} {sens:>12} {e.mu:>12.6g}  "
                f"{e.delivery or '-':<10} {e.label or ''}{period}{outside}"
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


def _count_law(eps: float, delta: float, sens: float, keys: int, secure: bool) -> NoisePlan:
    """The law of a count of ``keys`` keys as the release pipeline draws it: the exact
    discrete Gaussian at Δ on the integer counts when secure (``integer=True``; at most
    ``keys`` of them change), continuous noise otherwise."""
    mech = GaussianMechanism(eps, delta, sens)
    return mech.noise_plan(keys, secure=secure, integer=secure and sens >= 1.0)


def _checked(plan: QueryPlan, keys: int, secure: bool) -> tuple[float, float]:
    """(largest charge, its noise σ) of one planned release of ``keys`` coordinates, for
    both ways of writing the spec (``epsilon = ε_q`` and ``sigma = σ_q``), calibrated as
    the release pipeline calibrates a count: ``GaussianMechanism(ε, δ, Δ).noise_plan``."""
    worst = (0.0, 0.0)
    derived = float(gaussian_epsilon(plan.sigma, plan.delta, plan.sensitivity))
    for eps in (plan.epsilon, derived):
        law = _count_law(eps, plan.delta, plan.sensitivity, keys, secure)
        worst = max(worst, (charge_mu(law), law.sigma))
    return worst


def _previous_report(path: str) -> tuple[str, float, float, str]:
    """(denoiser, σ₀, denoised per-key RMSE r₀, which estimate) from a release's
    ``<table>.report.json``; ``ValueError`` naming the file and the missing field."""
    try:
        with open(path, encoding="utf-8") as f:
            report = json.load(f)
    except OSError as e:
        raise ValueError(f"--from-report: cannot read {path}: {e.strerror or e}") from None
    except (json.JSONDecodeError, UnicodeDecodeError):
        raise ValueError(f"--from-report: {path} is not a release report (not JSON)") from None
    privacy = report.get("privacy") if isinstance(report, dict) else None
    den = report.get("denoise") if isinstance(report, dict) else None
    sigma0 = privacy.get("sigma") if isinstance(privacy, dict) else None
    if not isinstance(sigma0, int | float) or not sigma0 > 0 or not isinstance(den, dict):
        raise ValueError(
            f"--from-report: {path} has no privacy.sigma and denoise section (write it with "
            "dpgauss release; a release without a denoiser has nothing to extrapolate)"
        )
    for key, which in (("rmse_per_key", "SURE"), ("rmse_per_key_upper95", "its 95 % bound")):
        value = den.get(key)
        if isinstance(value, int | float) and math.isfinite(value) and value > 0:
            return str(den.get("method", "?")), float(sigma0), float(value), which
    raise ValueError(f"--from-report: {path} gives no denoised error (denoise.rmse_per_key)")


def _target_plan(args: argparse.Namespace) -> str:
    """``budget plan --target-rmse R``: the smallest ε whose raw release meets R per key
    (exact), and an estimate of the ε at which a denoised release would
    (:mod:`dpgauss.privacy.target_error`)."""
    r, dlt, sens = args.target_rmse, args.delta, args.sensitivity
    k = 1 if args.queries is None else args.queries
    keys = 1 if args.keys is None else args.keys

    def law(e: float) -> object:
        return _count_law(e, dlt, sens, keys, args.secure)

    def sigma_of(e: float) -> float:
        return float(law(e).sigma)  # type: ignore[attr-defined]

    def per_query(target: float) -> dict[str, float]:
        eps_q = smallest_epsilon(sigma_of, target, dlt, sens)
        plan_law = law(eps_q)
        mu_q = charge_mu(plan_law)
        acc = GaussianAccountant()
        acc.add_mu(mu_q, count=k)
        # one release fits a budget of its own spec's (ε, δ) exactly (the ledger's rule)
        total = eps_q if k == 1 else decimal_up(float(acc.epsilon(dlt)))
        while not fits_budget([mu_q], float(gdp_mu(total, dlt)), count=k):
            total = decimal_up(total * (1.0 + 1e-9))
        return {
            "epsilon_per_query": eps_q,
            "noise_sigma": float(plan_law.sigma),  # type: ignore[attr-defined]
            "mu_per_query": mu_q,
            "epsilon_total": total,
        }

    raw = per_query(r)
    noise = "secure" if args.secure else "continuous"
    out: dict[str, object] = {
        "target_rmse": r,
        "delta": dlt,
        "sensitivity": sens,
        "queries": k,
        "keys": args.keys,
        "noise": noise,
        "raw": raw,
        "denoised_estimate": None,
    }
    den_lines: list[str] = []
    if args.from_report is not None:
        method, sigma0, rmse0, which = _previous_report(args.from_report)
        model = denoised_sigma(r, sigma0, rmse0)
        est = per_query(model.sigma)
        out["denoised_estimate"] = {
            "label": "estimate: extrapolated from a previous release's report "
            "(dpgauss.privacy.target_error), not a guarantee",
            "report": args.from_report,
            "denoiser": method,
            "sigma0": sigma0,
            "rmse0": rmse0,
            "rmse0_from": which,
            "sigma": model.sigma,
            **est,
        }
        den_lines = [
            f"denoised (ESTIMATE): {method} had RMSE {rmse0:.4g} per key ({which}) at sigma "
            f"{sigma0:.4g} in {args.from_report}; expected to meet {r:g} at sigma "
            f"<= {model.sigma:.6g}: epsilon per query {est['epsilon_per_query']:.10g}"
            + (f", {k} together epsilon {est['epsilon_total']:.10g}" if k > 1 else "")
            + " (an extrapolation, not a guarantee: the error after denoising depends on the "
            "data)",
        ]
    if args.json:
        return json.dumps(out)
    keys_note = (
        f"{args.keys} keys"
        if args.keys is not None
        else "1 key; give --keys N: the secure law's sigma depends on the table's size"
        if args.secure
        else "any number of keys"
    )
    lines = [
        f"target            : RMSE per key <= {r:g} for the raw release; delta={dlt:g} "
        f"sensitivity={sens:g} noise={noise} ({keys_note})",
        f"epsilon per query : {raw['epsilon_per_query']:.10g} (spec: [privacy] epsilon), the "
        f"smallest 10-digit decimal whose noise meets the target: sigma="
        f"{raw['noise_sigma']:.10g}",
        f"budget            : {k} such release(s) fit epsilon={raw['epsilon_total']:.10g} at "
        f"delta={dlt:g} (dpgauss budget init ... --epsilon {raw['epsilon_total']:.10g})",
        *den_lines,
    ]
    return "\n".join(lines)


def _plan_discovered(args: argparse.Namespace) -> str:
    """``budget plan --discovered``: K releases of keys not known in advance
    (:func:`dpgauss.privacy.partition_selection.plan_selections`)."""
    if args.keys is not None:
        raise ValueError("--keys does not apply to --discovered (the keys are found in the data)")
    k, eps, dlt = args.queries, args.epsilon, args.delta
    p = plan_selections(eps, dlt, k)
    if args.json:
        return json.dumps({**p, "queries": k, "epsilon": eps, "delta": dlt, "discovered": True})
    return "\n".join(
        [
            f"epsilon={eps:g} delta={dlt:g} queries={k} (keys not known in advance)",
            f"per release       : [privacy] epsilon = {p['epsilon_q']!r}, delta = "
            f"{p['delta_q']!r} (delta/K)",
            f"selection         : eta={p['eta_q']:.10g} per release outside mu-GDP (half its "
            f"delta), {p['eta_total']:.10g} in all",
            f"counts            : mu<={p['mu_q']:.10g} per release; together mu<="
            f"{math.sqrt(k) * p['mu_q']:.10g} of the budget mu={p['mu_budget']:.10g} "
            f"(gdp_mu(epsilon, delta - {p['eta_total']:.6g}))",
        ]
    )


def _plan(args: argparse.Namespace) -> str:
    if args.periods is not None:  # a series of N periods: N releases under one cap
        if args.queries is not None:
            raise ValueError("give --queries K or --periods N, not both")
        args.queries = args.periods
    if (args.epsilon is None) == (args.target_rmse is None):
        raise ValueError("budget plan needs exactly one of --epsilon E and --target-rmse R")
    if args.target_rmse is not None:
        if not (math.isfinite(args.target_rmse) and args.target_rmse > 0):
            raise ValueError(f"--target-rmse must be a number > 0; got {args.target_rmse:g}")
        return _target_plan(args)
    if args.from_report is not None:
        raise ValueError("--from-report goes with --target-rmse")
    if args.queries is None:
        raise ValueError("budget plan --epsilon needs --queries K (K >= 1) or --periods N")
    if args.discovered:
        return _plan_discovered(args)
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
                **({"periods": k} if args.periods is not None else {}),
            }
        )
    kind = (
        "secure discrete Gaussian on the integer counts (the release default): its noise "
        "sigma is within 1e-4 of sigma per query (--keys N: exactly)"
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
    if args.periods is not None:
        lines.append(
            f"series            : {k} periods under [unit] scope = 'all' (a unit protected "
            f"over all of them): each period's release at epsilon {plan.epsilon:.10g}; "
            f"under scope = 'period' (budget init --scope period) each period may use "
            f"the whole epsilon={eps:g} delta={dlt:g}"
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
    init.add_argument(
        "--scope",
        choices=("all", "period"),
        default="all",
        help="whom the budget protects: a unit over every release (all, default) or a unit "
        "within one period of a series (period; needs --period)",
    )
    init.add_argument(
        "--period", metavar="DURATION", help="with --scope period: the series' period (1h, 1d)"
    )
    init.add_argument(
        "--column", metavar="NAME", help="with --scope period: the series' timestamp column"
    )
    init.add_argument(
        "--unit",
        metavar="COLUMN",
        help="the privacy unit's column the budget protects ([unit] column); default: the "
        "first release's",
    )
    init.add_argument(
        "--origin",
        metavar="TIMESTAMP",
        help="with --scope period: where the periods start (default 1970-01-01 00:00)",
    )
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
        "plan",
        help="epsilon and sigma per query so that K releases fit (epsilon, delta); or the "
        "smallest epsilon that meets a target error (--target-rmse)",
    )
    plan.add_argument("--epsilon", type=number, help="total epsilon > 0")
    plan.add_argument(
        "--target-rmse",
        type=number,
        metavar="R",
        help="instead of --epsilon: the per-key RMSE the raw release must meet; prints the "
        "smallest epsilon per query whose noise sigma <= R, and the budget of K of them",
    )
    plan.add_argument("--delta", type=number, required=True, help="total 0 < delta < 1")
    plan.add_argument(
        "--queries", type=whole(1), metavar="K", help="K >= 1 (default 1 with --target-rmse)"
    )
    plan.add_argument(
        "--periods",
        type=whole(1),
        metavar="N",
        help="instead of --queries: a series of N periods, one release each, under one cap",
    )
    plan.add_argument(
        "--from-report",
        metavar="REPORT",
        help="with --target-rmse: a previous release's <table>.report.json; also estimates "
        "the epsilon at which its denoiser is expected to meet R (labelled an estimate)",
    )
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
    plan.add_argument(
        "--discovered",
        action="store_true",
        help="the K releases select keys not known in advance ([domain] kind = "
        "'discovered'): each at delta/K, half of it spent by its selection outside mu-GDP",
    )
    plan.add_argument("--json", action="store_true", help="print one JSON object")
    plan.set_defaults(run=_plan)
    return budget
