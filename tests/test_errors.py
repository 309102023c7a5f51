"""``dpgauss.errors``: every exception class in one place, re-exported where it was public,
each a ``ValueError`` the command line reports in one line, and two phrasings where the fix
differs between Python and the command line."""

from __future__ import annotations

import ast
import pickle
from pathlib import Path

import pytest

from dpgauss import errors

SRC = Path(__file__).resolve().parents[1] / "src" / "dpgauss"

#: where each class was defined before errors.py, and is still importable from
REEXPORTED = {
    "dpgauss.release.ledger": ["BudgetExceeded", "LedgerError", "LedgerFormatError"],
    "dpgauss.release.engines.base": ["EngineError"],
    "dpgauss.release.engines.csv_format": ["CsvError"],
    "dpgauss.release.outputs": ["OutputError", "OutputExistsError"],
    "dpgauss.release.pipeline": ["ReleaseDeliveryError"],
    "dpgauss.demo": ["OutputDirError"],
    "dpgauss.denoise.trend_filter": ["TrendFilterConvergenceWarning"],
    "dpgauss.cli.app": ["UsageError"],
    "dpgauss.plotting": ["PlotUnavailableError"],
}


def _bases(node: ast.ClassDef) -> list[str]:
    return [ast.unparse(b) for b in node.bases]


def test_no_exception_class_is_defined_outside_errors_py() -> None:
    found = []
    for path in SRC.rglob("*.py"):
        if path.name == "errors.py" and path.parent == SRC:
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ClassDef) and any(
                b.endswith(("Error", "Exception", "Warning", "Exceeded")) for b in _bases(node)
            ):
                found.append(f"{path.relative_to(SRC)}: {node.name}")
    assert found == []


@pytest.mark.parametrize("module", sorted(REEXPORTED))
def test_each_class_is_still_importable_where_it_was(module: str) -> None:
    import importlib

    mod = importlib.import_module(module)
    for name in REEXPORTED[module]:
        assert getattr(mod, name) is getattr(errors, name)


def test_every_error_is_a_value_error_but_the_usage_error_and_the_warnings() -> None:
    for name in errors.__all__:
        obj = getattr(errors, name)
        if not isinstance(obj, type):
            continue
        if issubclass(obj, Warning | KeyboardInterrupt) or obj in (
            errors.UsageError,
            errors.PlotUnavailableError,
        ):
            continue
        assert issubclass(obj, ValueError), name
        assert obj.__doc__, name


def test_two_phrasings() -> None:
    e = errors.SettingError("give out=", cli="pass --out PATH")
    assert str(e) == "give out=" and errors.cli_message(e) == "pass --out PATH"
    assert errors.cli_message(errors.SettingError("same")) == "same"
    o = errors.OutputExistsError(Path("t.csv"), "[output] overwrite = true")
    assert str(o) == "t.csv already exists (to replace it: [output] overwrite = true)"
    assert errors.cli_message(o) == "t.csv already exists (to replace it: --overwrite)"
    assert errors.cli_message(ValueError("plain")) == "plain"


def test_budget_exceeded_survives_pickling() -> None:
    """It crosses process boundaries (Spark, the reliability tests) with its attributes."""
    from dpgauss.release.ledger import BudgetStatus

    status = BudgetStatus(
        dataset="d",
        epsilon=1.0,
        delta=1e-6,
        mu_budget=0.5,
        mu_spent=0.4,
        charges=2,
        mu_remaining=0.3,
        epsilon_spent=0.7,
        epsilon_remaining=0.3,
    )
    exc = errors.BudgetExceeded("d", 0.3, status)
    back = pickle.loads(pickle.dumps(exc))
    assert type(back) is errors.BudgetExceeded and str(back) == str(exc)
    assert back.requested_mu == 0.3 and back.status == status
