r"""The privacy budget ledger: an SQLite file that is the security boundary of every release.

A :class:`Ledger` holds, per dataset id, a total (ε, δ) budget and every release charged
against it (time, label, σ, sensitivity Δ, μ).  It composes the charges *exactly*: a Gaussian
release with ``μ = Δ/σ`` is μ-GDP, k of them are ``√(Σ μᵢ²)``-GDP (Dong, Roth & Su 2019,
Cor. 3.3; :mod:`dpgauss.privacy.accounting`), and the budget (ε, δ) is the GDP budget
``μ_B = gdp_mu(ε, δ)``: the largest μ whose exact privacy profile stays within (ε, δ).  So a
charge ``μ_c`` fits if and only if

.. math::  \sum_i μ_i^2 + μ_c^2 \le μ_B^2,

and ε's are never added.  The comparison is done in exact rational arithmetic on the stored
doubles (``fractions.Fraction``), with ``μ_c`` the smallest double ≥ Δ/σ and ``μ_B`` rounded
down, so it is on the safe side and exactly reproducible: the same charges are accepted in
any order, by any process.

Reliability
-----------
* A charge is one ``BEGIN IMMEDIATE`` transaction: read the budget and the charges, check,
  insert, commit.  Concurrent processes serialise on the write lock (WAL journal, busy
  timeout), so a budget that fits n releases accepts exactly n, however many processes race.
* A process killed in the middle of a charge leaves no trace of it: SQLite rolls the
  uncommitted transaction back (``synchronous=FULL``, so a committed charge survives a power
  cut too).
* A file that is not a ledger (not SQLite, another application's SQLite file, a corrupted
  ledger) is refused with :class:`LedgerFormatError` before anything is written to it.  A new
  ledger is built in a temporary file and linked into place atomically, so a ledger path never
  holds a half-initialised file and an existing file is never overwritten.

Protocol for a release: charge first, then compute and write the output.  If writing fails
the charge stays — spent budget is never returned (``docs/ledger.md`` says why).
"""

from __future__ import annotations

import math
import os
import sqlite3
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass, replace
from datetime import UTC, datetime
from fractions import Fraction
from pathlib import Path

import numpy as np

from .._validation import POSITIVE, UNIT_OPEN, Interval, as_real_array, check_interval
from ..errors import BudgetExceeded, LedgerError, LedgerFormatError, UnknownDatasetError
from ..privacy import gdp_epsilon, gdp_mu
from ..privacy._rounding import fits_budget, mu_up_exact, sqrt_down, sub_down, sum_squares, sum_up
from ..privacy.accounting import GaussianAccountant
from ..privacy.events import GaussianEvent, PrivacyEvent, ThresholdEvent, event_of

__all__ = [
    "APPLICATION_ID",
    "SCHEMA_VERSION",
    "BudgetExceeded",
    "BudgetStatus",
    "Ledger",
    "LedgerEntry",
    "LedgerError",
    "LedgerFormatError",
    "UnknownDatasetError",
    "charge_mu",
    "event_mu",
]

#: ``PRAGMA application_id`` of a dpgauss ledger: the bytes ``"DPGL"``.
APPLICATION_ID = 0x4450474C
#: ``PRAGMA user_version``: the version of the schema below.
SCHEMA_VERSION = 4
_APPLICATION_NAME = "dpgauss-ledger"
_SQLITE_MAGIC = b"SQLite format 3\x00"

_SCHEMA = (
    """CREATE TABLE meta (
        key TEXT PRIMARY KEY NOT NULL,
        value TEXT NOT NULL
    )""",
    """CREATE TABLE budgets (
        dataset TEXT PRIMARY KEY NOT NULL CHECK (length(dataset) > 0),
        epsilon REAL NOT NULL CHECK (epsilon > 0),
        delta REAL NOT NULL CHECK (delta > 0 AND delta < 1),
        mu REAL NOT NULL CHECK (mu > 0),
        created TEXT NOT NULL,
        scope TEXT NOT NULL DEFAULT 'all' CHECK (scope IN ('all', 'period')),
        period TEXT,
        origin TEXT,
        series_column TEXT
    )""",
    """CREATE TABLE charges (
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        dataset TEXT NOT NULL REFERENCES budgets (dataset),
        time TEXT NOT NULL,
        label TEXT,
        sigma REAL CHECK (sigma IS NULL OR sigma > 0),
        sensitivity REAL CHECK (sensitivity IS NULL OR sensitivity > 0),
        mu REAL NOT NULL CHECK (mu > 0),
        delivery TEXT,
        note TEXT,
        eta REAL NOT NULL DEFAULT 0 CHECK (eta >= 0 AND eta < 1),
        period TEXT,
        CHECK ((sigma IS NULL) = (sensitivity IS NULL))
    )""",
    "CREATE INDEX charges_by_dataset ON charges (dataset, id)",
)
_TABLES = {"meta", "budgets", "charges"}
_ADD_ETA = "ALTER TABLE charges ADD COLUMN eta REAL NOT NULL DEFAULT 0 CHECK (eta >= 0 AND eta < 1)"
#: Version 4's series: a budget's scope and its periods, a charge's period (none before).
_ADD_SCOPE = (
    "ALTER TABLE budgets ADD COLUMN scope TEXT NOT NULL DEFAULT 'all' "
    "CHECK (scope IN ('all', 'period'))",
    "ALTER TABLE budgets ADD COLUMN period TEXT",
    "ALTER TABLE budgets ADD COLUMN origin TEXT",
    "ALTER TABLE budgets ADD COLUMN series_column TEXT",
    "ALTER TABLE charges ADD COLUMN period TEXT",
)
#: Schema version 1 lacked the delivery state of a charge, versions 1 and 2 the δ a
#: charge spends outside μ-GDP (``eta``, 0 for every charge they hold), and versions 1–3
#: the scope of a budget (``'all'`` for every budget they hold) and a charge's period; all
#: are upgraded in place.
_UPGRADES = {
    1: (
        "ALTER TABLE charges ADD COLUMN delivery TEXT",
        "ALTER TABLE charges ADD COLUMN note TEXT",
        _ADD_ETA,
        *_ADD_SCOPE,
    ),
    2: (_ADD_ETA, *_ADD_SCOPE),
    3: _ADD_SCOPE,
}
#: The delivery states of a charge (``LedgerEntry.delivery``): charged and not yet written;
#: writing its files (``note`` lists them); delivered; failed after the charge (``note`` says
#: why).  None for charges recorded by schema version 1, which did not track delivery.
DELIVERY_STATES = ("charged", "writing", "delivered", "failed")

#: Test seam: when set, called inside the charge transaction right after the INSERT and
#: before the COMMIT (the reliability tests kill the process there).  Always None otherwise.
_before_commit: Callable[[], None] | None = None


@dataclass(frozen=True)
class BudgetStatus:
    """The budget of one dataset and what is left of it.

    ``mu_budget = gdp_mu(epsilon, delta)`` (rounded down); ``mu_spent = √(Σ μᵢ²)`` over the
    charges (rounded up, by :class:`~dpgauss.privacy.accounting.GaussianAccountant`);
    ``mu_remaining = √(mu_budget² − Σ μᵢ²)`` (exact, rounded down): any further set of
    releases whose μ's compose to at most ``mu_remaining`` fits.  ``epsilon_spent`` is the ε
    of everything charged so far at the budget's δ; ``epsilon_remaining`` is the ε, at the
    budget's δ, of one release that would use all of ``mu_remaining``.  ε's do not add:
    ``epsilon_spent + epsilon_remaining`` is in general more than ``epsilon``.

    ``scope`` is whom the budget protects: ``"all"`` (a unit over every release) or
    ``"period"`` (a unit within one ``period`` of the series of the timestamp ``column``,
    ``"1h"`` say; ``periods`` is the number of periods charged).  For a budget of scope
    ``"period"`` the figures are those of its most spent period: the releases that are
    not a period's, with that period's (parallel composition,
    :mod:`dpgauss.release.series`), and ``mu_remaining`` is what every period still has
    room for.

    ``eta_spent = Σ ηᵢ`` is the δ spent outside μ-GDP (selections of keys not known in
    advance, :class:`~dpgauss.privacy.events.ThresholdEvent`; 0 without them).  Everything
    charged is ``(ε, δ_{mu_spent}(ε) + eta_spent)``-DP, so once ``eta_spent > 0`` the μ
    budget is ``gdp_mu(epsilon, delta − eta_spent)`` (``mu_effective``), below ``mu_budget``.
    """

    dataset: str
    epsilon: float
    delta: float
    mu_budget: float
    mu_spent: float
    mu_remaining: float
    epsilon_spent: float
    epsilon_remaining: float
    charges: int
    eta_spent: float = 0.0
    mu_effective: float | None = None
    scope: str = "all"
    period: str | None = None
    periods: int = 0
    column: str | None = None

    def as_dict(self) -> dict[str, object]:
        """A JSON-ready dict of the fields."""
        return asdict(self)


@dataclass(frozen=True)
class LedgerEntry:
    """One committed charge.  ``sigma`` and ``sensitivity`` are None for a charge by μ.

    ``eta`` is the δ the charge spends outside μ-GDP (0 for a Gaussian release).
    ``period`` is the start of the series period the release is of (None for a release
    that is not one period's).
    ``delivery`` is the state of the release it paid for (:data:`DELIVERY_STATES`; None for
    a charge made before the ledger tracked it) and ``note`` the detail: the files being
    written, or why the release failed after it was charged.  The budget stays spent
    whatever the state.
    """

    id: int
    dataset: str
    time: str
    label: str | None
    sigma: float | None
    sensitivity: float | None
    mu: float
    delivery: str | None = None
    note: str | None = None
    eta: float = 0.0
    period: str | None = None

    def as_dict(self) -> dict[str, object]:
        """A JSON-ready dict of the fields."""
        return asdict(self)


# --------------------------------------------------------------------------- validation


def _scalar(value: object, name: str, allowed: object = POSITIVE) -> float:
    arr = as_real_array(value, name)
    if arr.ndim:
        raise TypeError(f"{name} must be a single real number; got an array of shape {arr.shape}")
    check_interval(arr, name, allowed)  # type: ignore[arg-type]
    return float(arr)


def _dataset(dataset: object) -> str:
    if not isinstance(dataset, str):
        raise TypeError(f"dataset must be a non-empty string; got {type(dataset).__name__}")
    if not dataset.strip() or "\x00" in dataset:
        raise ValueError(f"dataset must be a non-empty string without NUL; got {dataset!r}")
    return dataset


def _budget_terms(
    dataset: object, epsilon: object, delta: object
) -> tuple[str, float, float, float]:
    """The checked ``(dataset, ε, δ, μ_B)`` of :meth:`Ledger.create_budget`, which raises
    here on a bad argument — callable before a ledger is opened (or created)."""
    name = _dataset(dataset)
    eps = _scalar(epsilon, "epsilon", POSITIVE)
    dlt = _scalar(delta, "delta", UNIT_OPEN)
    mu_budget = float(gdp_mu(eps, dlt))
    if not (math.isfinite(mu_budget) and mu_budget > 0.0):
        raise ValueError(f"epsilon={eps!r}, delta={dlt!r} give no usable budget")
    return name, eps, dlt, mu_budget


#: ``eta`` ∈ [0, 1): the δ a charge spends outside μ-GDP.
_ETA_RANGE = Interval(0.0, 1.0, low_closed=True)


def _effective_budget(budget: tuple[float, float, float], etas: list[float]) -> float:
    """The μ budget once ``Σ etas`` is spent outside μ-GDP: the frozen ``μ_B`` with none,
    else ``min(μ_B, gdp_mu(ε, δ − Ση))`` (0 once Ση ≥ δ)."""
    eps, dlt, mu_budget = budget
    eta = sum_up(etas)
    if eta == 0.0:
        return mu_budget
    rest = sub_down(dlt, eta)
    return min(mu_budget, float(gdp_mu(eps, rest))) if rest > 0 else 0.0


#: A budget's (scope, period, origin, series column); a charge's (μ, η, period or None).
_Grid = tuple[str, str | None, str | None, str | None]
_Row = tuple[float, float, str | None]


def _grid_terms(scope: object, period: object, origin: object, column: object = None) -> _Grid:
    """The checked ``(scope, period, origin, column)`` of :meth:`Ledger.create_budget`."""
    from .spec import SCOPES, SeriesSpec

    if scope not in SCOPES:
        raise ValueError(f"scope must be one of {', '.join(map(repr, SCOPES))}; got {scope!r}")
    if scope == "all":
        if period is not None or origin is not None or column is not None:
            raise ValueError("period, origin and column go with scope = 'period' only")
        return "all", None, None, None
    if period is None:
        raise ValueError("scope = 'period' needs the series' period (a duration: '1h', '1d')")
    if column is None:
        raise ValueError(
            "scope = 'period' needs the series' column: the periods of another timestamp "
            "column (dropoff instead of pickup) would not hold a unit-period's records"
        )
    try:
        grid = SeriesSpec(
            column=column,  # type: ignore[arg-type]  # SeriesSpec checks the types
            period=period,  # type: ignore[arg-type]
            origin=origin or "1970-01-01 00:00:00",
        )
    except (TypeError, ValueError) as exc:
        raise ValueError(str(exc).replace("[series] ", "")) from None
    return "period", grid.period, grid.origin, grid.column


def _period_start(period: object, grid: _Grid) -> str | None:
    """A charge's period as the ledger stores it: its start as canonical ISO text, on the
    budget's grid when the budget's scope is ``"period"`` (so that one period is one group,
    however its start was written)."""
    if period is None:
        return None
    from .series import parse_period
    from .spec import SeriesSpec

    if not isinstance(period, str):
        raise TypeError(f"period must be ISO text or None; got {type(period).__name__}")
    scope, length, origin, _ = grid
    if scope == "period":
        assert length is not None and origin is not None
        series = SeriesSpec(column="-", period=length, origin=origin)
        return parse_period(series, period).start
    try:
        return datetime.fromisoformat(period.strip()).isoformat(sep=" ")
    except ValueError:
        raise ValueError(
            f"period must be a timestamp ('2013-01-13 09:00'); got {period!r}"
        ) from None


def _groups(rows: list[_Row], scope: str) -> list[tuple[list[float], list[float]]]:
    """The sets of charges that compose (:mod:`dpgauss.release.series`): every charge for
    scope ``"all"``; for ``"period"``, the charges that are no period's together with each
    period's in turn (the charges of different periods touch disjoint records)."""
    if scope == "all":
        return [([r[0] for r in rows], [r[1] for r in rows])]
    common = [r for r in rows if r[2] is None]
    by: dict[str, list[_Row]] = {}
    for r in rows:
        if r[2] is not None:
            by.setdefault(r[2], []).append(r)
    sets = [common + by[p] for p in sorted(by)] or [common]
    return [([r[0] for r in g], [r[1] for r in g]) for g in sets]


def _grouped_status(
    name: str, budget: tuple[float, float, float], grid: _Grid, rows: list[_Row]
) -> BudgetStatus:
    """The budget's status: that of its most spent set of charges (:func:`_groups`)."""
    statuses = [Ledger._status(name, budget, m, e) for m, e in _groups(rows, grid[0])]
    worst = min(statuses, key=lambda s: (s.mu_remaining, -s.mu_spent))
    periods = len({r[2] for r in rows if r[2] is not None})
    return replace(
        worst, charges=len(rows), scope=grid[0], period=grid[1], periods=periods, column=grid[3]
    )


def _label(label: object) -> str | None:
    if label is None or isinstance(label, str):
        return label
    raise TypeError(f"label must be a string or None; got {type(label).__name__}")


# ---------------------------------------------------------------------- exact arithmetic


def event_mu(event: PrivacyEvent) -> float:
    """The μ that :meth:`Ledger.charge_event` records for one release of ``event``.

    A :class:`~dpgauss.privacy.events.GaussianEvent` (charged with ``sigma=`` and
    ``sensitivity=``): the smallest double ≥ Δ/σ (:func:`~dpgauss.privacy._rounding.mu_up_exact`,
    at most one ulp below the accountant's ``Δ/σ`` rounded up).  Any other μ-GDP event
    (charged with ``mu=``): its μ, as the accountant charges it.  A Laplace event raises
    ``TypeError`` (like ``GaussianAccountant.add_event``).
    """
    if isinstance(event, GaussianEvent):
        return mu_up_exact(event.sensitivity, event.sigma)
    return float(GaussianAccountant().add_event(event))  # raises the accountant's error


def charge_mu(release: object) -> float:
    """The μ that :meth:`Ledger.charge` records for a release or a
    :class:`~dpgauss.noise.release.NoisePlan` with Gaussian noise: :func:`event_mu` of its
    event (:func:`dpgauss.privacy.events.event_of`).

    Continuous noise (``GaussianNoise(σ)``, charged with ``sigma=`` and ``sensitivity=``):
    the smallest double ≥ Δ/σ.  Discrete noise (charged with ``mu=``): its
    ``dominating_mu(Δ)``.  Anything else raises ``TypeError`` (like
    ``GaussianAccountant.add_release``).
    """
    return event_mu(event_of(release))


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="microseconds")


# --------------------------------------------------------------------------- the file


def _read_header(path: Path) -> bytes:
    if path.is_dir():
        raise LedgerFormatError(f"{path} is a directory, not a ledger file")
    if path.exists() and not path.is_file():
        raise LedgerFormatError(f"{path} is not a regular file, not a ledger; refusing to use it")
    try:
        with open(path, "rb") as fh:
            return fh.read(100)
    except OSError as exc:
        raise LedgerError(f"cannot read ledger {path}: {exc.strerror or exc}") from None


def _check_header(path: Path, header: bytes) -> None:
    """Refuse anything but a dpgauss ledger from its first 100 bytes, without opening it."""
    if not header:
        raise LedgerFormatError(
            f"{path} is an empty file, not a dpgauss ledger; refusing to use it "
            "(a new ledger is created only where no file exists)"
        )
    if len(header) < 100 or not header.startswith(_SQLITE_MAGIC):
        raise LedgerFormatError(
            f"{path} is not a dpgauss ledger (not an SQLite database); refusing to use it"
        )
    app_id = int.from_bytes(header[68:72], "big")
    version = int.from_bytes(header[60:64], "big")
    if app_id != APPLICATION_ID:
        raise LedgerFormatError(
            f"{path} is an SQLite database of another application "
            f"(application_id={app_id:#010x}, a dpgauss ledger has {APPLICATION_ID:#010x}); "
            "refusing to use it"
        )
    if version != SCHEMA_VERSION and version not in _UPGRADES:
        raise LedgerFormatError(
            f"{path} is a dpgauss ledger of schema version {version}; this version of dpgauss "
            f"reads version {SCHEMA_VERSION} (and upgrades {', '.join(map(str, _UPGRADES))}) "
            "only; refusing to use it"
        )


def _configure(conn: sqlite3.Connection) -> None:
    conn.execute("PRAGMA foreign_keys = ON")
    conn.execute("PRAGMA synchronous = FULL")
    conn.execute("PRAGMA trusted_schema = OFF")


def _initialise(conn: sqlite3.Connection) -> None:
    conn.execute(f"PRAGMA application_id = {APPLICATION_ID}")
    conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
    conn.execute("BEGIN IMMEDIATE")
    for statement in _SCHEMA:
        conn.execute(statement)
    conn.executemany(
        "INSERT INTO meta (key, value) VALUES (?, ?)",
        [
            ("application", _APPLICATION_NAME),
            ("schema_version", str(SCHEMA_VERSION)),
            ("created", _now()),
        ],
    )
    conn.execute("COMMIT")
    mode = conn.execute("PRAGMA journal_mode = WAL").fetchone()[0]
    if str(mode).lower() != "wal":
        raise LedgerError(f"the file system does not support SQLite's WAL journal (got {mode!r})")


def _fsync_dir(directory: Path) -> None:
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:  # pragma: no cover - platforms without directory handles
        return
    try:
        os.fsync(fd)
    except OSError:  # pragma: no cover
        pass
    finally:
        os.close(fd)


def _create(path: Path) -> bool:
    """Build a new ledger next to ``path`` and link it into place if nothing is there yet.

    Returns False if another file appeared at ``path`` first (that file is left alone).
    """
    directory = path.parent
    if not directory.is_dir():
        raise LedgerError(f"cannot create ledger {path}: directory {directory} does not exist")
    try:
        fd, tmp_name = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".new", dir=directory)
    except OSError as exc:
        raise LedgerError(f"cannot create ledger {path}: {exc.strerror or exc}") from None
    os.close(fd)
    tmp = Path(tmp_name)
    try:
        try:
            conn = sqlite3.connect(tmp, isolation_level=None)
            try:
                _configure(conn)
                _initialise(conn)
                conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
            finally:
                conn.close()
        except sqlite3.Error as exc:
            raise LedgerError(f"cannot create ledger {path}: {exc}") from None
        wal = Path(tmp_name + "-wal")
        if wal.exists() and wal.stat().st_size:  # its content would not follow the link
            raise LedgerError(f"cannot create ledger {path}: SQLite left a non-empty WAL")
        fd = os.open(tmp, os.O_RDONLY)
        try:
            os.fsync(fd)  # the whole file is on disk before its name appears
        finally:
            os.close(fd)
        try:
            os.link(tmp, path)  # atomic, and never replaces an existing file
        except FileExistsError:
            return False
        except OSError as exc:
            raise LedgerError(
                f"cannot create ledger {path}: {exc.strerror or exc} "
                "(the ledger needs a local file system with hard links)"
            ) from None
        _fsync_dir(directory)
        return True
    finally:
        for name in (tmp_name, tmp_name + "-wal", tmp_name + "-shm"):
            try:
                os.unlink(name)
            except FileNotFoundError:
                pass


# ------------------------------------------------------------------------------ Ledger


class Ledger:
    """A privacy budget ledger stored in the SQLite file ``path``.

    Parameters
    ----------
    path : str or os.PathLike
        The ledger file.  If no file exists there and ``create`` is true, a new empty ledger
        is created; an existing file is used only if it is a dpgauss ledger, and is never
        overwritten.
    create : bool, default True
        Whether to create the ledger when ``path`` does not exist (else
        :class:`LedgerError`).
    timeout : float, default 60
        Seconds to wait for another process's write lock before giving up.

    One ``Ledger`` per process (and thread); any number of processes may share the file.
    It is a context manager that closes the connection.

    Examples
    --------
    >>> import tempfile, os
    >>> path = os.path.join(tempfile.mkdtemp(), "budget.sqlite")
    >>> with Ledger(path) as ledger:
    ...     status = ledger.create_budget("taxi", epsilon=1.0, delta=1e-6)
    ...     entry = ledger.charge("taxi", sigma=10.0, sensitivity=1.0, label="counts")
    ...     ledger.remaining("taxi").charges
    1
    """

    def __init__(
        self, path: str | os.PathLike[str], *, create: bool = True, timeout: float = 60.0
    ) -> None:
        if isinstance(path, bytes) or not isinstance(path, str | os.PathLike):
            raise TypeError(f"path must be a str or os.PathLike; got {type(path).__name__}")
        self.path = Path(os.fspath(path)).expanduser().absolute()
        if isinstance(timeout, bool) or not isinstance(timeout, int | float) or timeout < 0:
            raise ValueError(f"timeout must be a number of seconds >= 0; got {timeout!r}")
        self._timeout = float(timeout)
        if not self.path.exists():
            if not create:
                raise LedgerError(
                    f"no ledger at {self.path} (`dpgauss budget init` or Ledger(path) creates one)"
                )
            _create(self.path)  # False: another process won the race; its file is checked
        _check_header(self.path, _read_header(self.path))
        self._conn: sqlite3.Connection | None = self._open()

    # ----------------------------------------------------------------- connection

    def _open(self) -> sqlite3.Connection:
        uri = self.path.as_uri() + "?mode=rw"  # never creates a file
        try:
            conn = sqlite3.connect(uri, uri=True, timeout=self._timeout, isolation_level=None)
        except sqlite3.Error as exc:
            raise LedgerError(f"cannot open ledger {self.path}: {exc}") from None
        try:
            self._verify(conn)
            _configure(conn)
            self._upgrade(conn)
            mode = conn.execute("PRAGMA journal_mode = WAL").fetchone()[0]
            if str(mode).lower() != "wal":
                raise LedgerError(f"cannot put ledger {self.path} in WAL mode (got {mode!r})")
        except sqlite3.OperationalError as exc:  # locked, read-only, I/O: not the format
            conn.close()
            raise LedgerError(f"cannot use ledger {self.path}: {exc}") from None
        except sqlite3.DatabaseError as exc:
            conn.close()
            raise LedgerFormatError(
                f"{self.path} is corrupted or not a dpgauss ledger ({exc}); refusing to use it"
            ) from None
        except BaseException:
            conn.close()
            raise
        return conn

    def _verify(self, conn: sqlite3.Connection) -> None:
        """Read-only checks: identity, schema and SQLite's quick_check."""
        app_id = conn.execute("PRAGMA application_id").fetchone()[0]
        version = conn.execute("PRAGMA user_version").fetchone()[0]
        if app_id != APPLICATION_ID or (version != SCHEMA_VERSION and version not in _UPGRADES):
            raise LedgerFormatError(
                f"{self.path} is not a dpgauss ledger of schema version {SCHEMA_VERSION} "
                f"(application_id={app_id:#010x}, user_version={version}); refusing to use it"
            )
        tables = {
            row[0] for row in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")
        }
        meta = dict(conn.execute("SELECT key, value FROM meta")) if "meta" in tables else {}
        if not _TABLES <= tables or meta.get("application") != _APPLICATION_NAME:
            raise LedgerFormatError(
                f"{self.path} claims to be a dpgauss ledger but lacks its tables; "
                "refusing to use it"
            )
        problems = [row[0] for row in conn.execute("PRAGMA quick_check")]
        if problems != ["ok"]:
            raise LedgerFormatError(
                f"{self.path} is a corrupted dpgauss ledger (quick_check: "
                f"{'; '.join(map(str, problems[:3]))}); refusing to use it"
            )

    def _upgrade(self, conn: sqlite3.Connection) -> None:
        """Bring a ledger of an older schema version to :data:`SCHEMA_VERSION`, atomically."""
        version = conn.execute("PRAGMA user_version").fetchone()[0]
        if version == SCHEMA_VERSION:
            return
        conn.execute("BEGIN IMMEDIATE")
        try:
            if conn.execute("PRAGMA user_version").fetchone()[0] in _UPGRADES:  # not raced
                for stmt in _UPGRADES[version]:
                    conn.execute(stmt)
                conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
            conn.execute("COMMIT")
        except BaseException:
            if conn.in_transaction:
                conn.execute("ROLLBACK")
            raise

    @contextmanager
    def _transaction(self, kind: str) -> Iterator[sqlite3.Connection]:
        conn = self._connection()
        try:
            conn.execute(f"BEGIN {kind}")
        except sqlite3.OperationalError as exc:
            raise LedgerError(f"ledger {self.path} is busy or unavailable: {exc}") from None
        try:
            yield conn
            conn.execute("COMMIT")
        except BaseException as exc:
            if conn.in_transaction:
                try:
                    conn.execute("ROLLBACK")
                except sqlite3.Error:  # the connection is broken; SQLite rolls back anyway
                    pass
            if isinstance(exc, sqlite3.DatabaseError):
                raise LedgerError(f"ledger {self.path}: {exc}") from exc
            raise

    def _connection(self) -> sqlite3.Connection:
        conn = getattr(self, "_conn", None)
        if conn is None:
            raise LedgerError(f"ledger {self.path} is closed")
        return conn

    def close(self) -> None:
        """Close the connection (idempotent)."""
        conn = getattr(self, "_conn", None)
        if conn is not None:
            self._conn = None
            conn.close()

    def __enter__(self) -> Ledger:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"Ledger({str(self.path)!r})"

    # -------------------------------------------------------------------- budgets

    def create_budget(
        self,
        dataset: str,
        epsilon: float,
        delta: float,
        *,
        scope: str = "all",
        period: str | None = None,
        origin: str | None = None,
        column: str | None = None,
    ) -> BudgetStatus:
        """Define the total (ε, δ) budget of ``dataset``; an existing budget is never redefined.

        ε > 0, 0 < δ < 1.  The budget is stored as ε, δ and its GDP form
        ``μ_B = gdp_mu(ε, δ)``, which is frozen at creation.  ``scope = "all"`` (default)
        protects a unit over every release charged; ``scope = "period"`` a unit within one
        ``period`` (a duration, ``"1h"``) of the series of the timestamp ``column`` whose
        periods start at ``origin`` (default 1970-01-01 00:00) + k·period: the budget then
        holds for each period (:mod:`dpgauss.release.series`).  Raises
        :class:`LedgerError` if the dataset already has a budget.
        """
        name, eps, dlt, mu_budget = _budget_terms(dataset, epsilon, delta)
        grid = _grid_terms(scope, period, origin, column)
        with self._transaction("IMMEDIATE") as conn:
            row = conn.execute(
                "SELECT epsilon, delta FROM budgets WHERE dataset = ?", (name,)
            ).fetchone()
            if row is not None:
                raise LedgerError(
                    f"dataset {name!r} already has a budget (epsilon={row[0]:g}, "
                    f"delta={row[1]:g}) in {self.path}; budgets cannot be redefined"
                )
            conn.execute(
                "INSERT INTO budgets (dataset, epsilon, delta, mu, created, scope, period, "
                "origin, series_column) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (name, eps, dlt, mu_budget, _now(), *grid),
            )
        return self.remaining(name)

    def datasets(self) -> list[str]:
        """The dataset ids that have a budget, sorted."""
        with self._transaction("DEFERRED") as conn:
            return [r[0] for r in conn.execute("SELECT dataset FROM budgets ORDER BY dataset")]

    def remaining(self, dataset: str, period: str | None = None) -> BudgetStatus:
        """The budget of ``dataset``, what has been spent and what remains.

        For a budget of scope ``"period"``, the status of its most spent period, or with
        ``period`` (a period's start) the status of that period: what a release of it has
        room for."""
        name = _dataset(dataset)
        with self._transaction("DEFERRED") as conn:
            budget, grid, rows = self._load(conn, name)
            start = _period_start(period, grid)
        if start is not None and grid[0] == "period":
            mine = [r for r in rows if r[2] is None or r[2] == start]
            status = _grouped_status(name, budget, grid, mine)
            return replace(status, charges=len(rows), periods=len({r[2] for r in rows} - {None}))
        return _grouped_status(name, budget, grid, rows)

    def grid(self, dataset: str) -> tuple[str, str | None, str | None, str | None]:
        """``(scope, period, origin, column)`` of ``dataset``'s budget
        (:meth:`create_budget`)."""
        name = _dataset(dataset)
        with self._transaction("DEFERRED") as conn:
            return self._load(conn, name)[1]

    def charges(self, dataset: str) -> list[LedgerEntry]:
        """Every charge against ``dataset``, oldest first."""
        name = _dataset(dataset)
        with self._transaction("DEFERRED") as conn:
            self._budget_row(conn, name)
            rows = conn.execute(
                "SELECT id, dataset, time, label, sigma, sensitivity, mu, delivery, note, eta, "
                "period FROM charges WHERE dataset = ? ORDER BY id",
                (name,),
            ).fetchall()
        return [LedgerEntry(*row) for row in rows]

    def charge(
        self,
        dataset: str,
        sigma: float | None = None,
        sensitivity: float | None = None,
        label: str | None = None,
        *,
        mu: float | None = None,
        eta: float = 0.0,
        period: str | None = None,
    ) -> LedgerEntry:
        """Charge one release against ``dataset``'s budget, atomically, or refuse it.

        Give either ``sigma`` and ``sensitivity`` (a Gaussian release, ``μ = Δ/σ`` rounded
        up) or ``mu`` alone (any μ-GDP mechanism, e.g. a discrete Gaussian release charged by
        its dominating μ).  ``eta`` ∈ [0, 1) is δ the release spends outside μ-GDP (a
        selection of keys not known in advance; :meth:`charge_event` of a
        :class:`~dpgauss.privacy.events.ThresholdEvent` passes it).  ``period``: the start
        of the series period the release is of (ISO text; on the budget's grid when its
        scope is ``"period"``); None for a release that is not one period's.  Inside one
        ``BEGIN IMMEDIATE`` transaction the charge is checked — ``Σ μᵢ² + μ² ≤ μ_B²``
        exactly, with ``μ_B = gdp_mu(ε, δ − Σηᵢ − η)`` once any η is spent, over every
        charge (scope ``"all"``) or, for a budget of scope ``"period"``, over the charges
        that are no period's and those of each period in turn — and recorded; otherwise
        :class:`BudgetExceeded` is raised and nothing is recorded.

        Write the release's output only after this returns; the charge is never undone.
        """
        name = _dataset(dataset)
        text = _label(label)
        if mu is not None:
            if sigma is not None or sensitivity is not None:
                raise TypeError("give either sigma and sensitivity, or mu, not both")
            mu_c = _scalar(mu, "mu", POSITIVE)
            sig = sens = None
        else:
            if sigma is None or sensitivity is None:
                raise TypeError("charge needs both sigma and sensitivity (or mu alone)")
            sig = _scalar(sigma, "sigma", POSITIVE)
            sens = _scalar(sensitivity, "sensitivity", POSITIVE)
            mu_c = mu_up_exact(sens, sig)
        eta_c = _scalar(eta, "eta", _ETA_RANGE) if eta else 0.0
        with self._transaction("IMMEDIATE") as conn:
            budget, grid, rows = self._load(conn, name)
            start = _period_start(period, grid)
            after = [*rows, (mu_c, eta_c, start)]
            for g_mus, g_etas in _groups(after, grid[0]):
                if not fits_budget(g_mus, _effective_budget(budget, g_etas)):
                    status = _grouped_status(name, budget, grid, rows)
                    raise BudgetExceeded(name, mu_c, status)
            when = _now()
            cur = conn.execute(
                "INSERT INTO charges (dataset, time, label, sigma, sensitivity, mu, delivery, "
                "eta, period) VALUES (?, ?, ?, ?, ?, ?, 'charged', ?, ?)",
                (name, when, text, sig, sens, mu_c, eta_c, start),
            )
            entry = LedgerEntry(
                int(cur.lastrowid or 0),
                name,
                when,
                text,
                sig,
                sens,
                mu_c,
                "charged",
                None,
                eta_c,
                start,
            )
            if _before_commit is not None:
                _before_commit()
        return entry

    def charge_event(
        self,
        dataset: str,
        event: PrivacyEvent,
        label: str | None = None,
        *,
        period: str | None = None,
    ) -> LedgerEntry:
        """Charge one release of a typed ``event`` (:mod:`dpgauss.privacy.events`), as
        :meth:`charge`: a Gaussian event with its ``sigma`` and ``sensitivity``, any other
        μ-GDP event with its μ (:func:`event_mu`).  The ledger records one release per
        charge, so ``event.count`` must be 1; a Laplace event raises ``TypeError``.
        ``period`` as in :meth:`charge`."""
        if getattr(event, "count", 1) != 1:
            raise ValueError(
                f"the ledger charges one release at a time; event.count must be 1, "
                f"got {event.count!r}"
            )
        if isinstance(event, GaussianEvent):
            return self.charge(dataset, event.sigma, event.sensitivity, label, period=period)
        if isinstance(event, ThresholdEvent):
            return self.charge(
                dataset, label=label, mu=event_mu(event), eta=event.eta, period=period
            )
        return self.charge(dataset, label=label, mu=event_mu(event), period=period)

    def record_delivery(self, charge_id: int, state: str, note: str | None = None) -> None:
        """Record the delivery ``state`` (:data:`DELIVERY_STATES`) of charge ``charge_id``.

        Only the state moves; the charge and its μ never change (spent budget is never
        returned).  ``note``: the files being written, or why the release failed.
        """
        if state not in DELIVERY_STATES:
            raise ValueError(f"state must be one of {', '.join(DELIVERY_STATES)}; got {state!r}")
        if isinstance(charge_id, bool) or not isinstance(charge_id, int):
            raise TypeError(f"charge_id must be an int; got {type(charge_id).__name__}")
        with self._transaction("IMMEDIATE") as conn:
            cur = conn.execute(
                "UPDATE charges SET delivery = ?, note = ? WHERE id = ?",
                (state, None if note is None else str(note)[:4000], charge_id),
            )
            if cur.rowcount != 1:
                raise LedgerError(f"no charge #{charge_id} in {self.path}")

    def check(self) -> None:
        """Run SQLite's full ``integrity_check`` and the ledger's own invariants.

        Raises :class:`LedgerFormatError` on any problem: a corrupted file, a charge without
        a budget, or a dataset whose charges exceed its budget.
        """
        with self._transaction("DEFERRED") as conn:
            problems = [row[0] for row in conn.execute("PRAGMA integrity_check")]
            if problems != ["ok"]:
                raise LedgerFormatError(
                    f"{self.path} fails integrity_check: {'; '.join(map(str, problems[:5]))}"
                )
            orphans = conn.execute("PRAGMA foreign_key_check").fetchall()
            if orphans:
                raise LedgerFormatError(f"{self.path} has charges without a budget: {orphans[:3]}")
            budgets = [r[0] for r in conn.execute("SELECT dataset FROM budgets")]
            for name in budgets:
                budget, grid, rows = self._load(conn, name)
                for g_mus, g_etas in _groups(rows, grid[0]):
                    if not fits_budget(g_mus, _effective_budget(budget, g_etas)):
                        raise LedgerFormatError(
                            f"{self.path}: the charges of dataset {name!r} exceed its budget"
                        )

    # ------------------------------------------------------------------ internals

    def _budget_row(self, conn: sqlite3.Connection, name: str) -> tuple[float, float, float]:
        row = conn.execute(
            "SELECT epsilon, delta, mu FROM budgets WHERE dataset = ?", (name,)
        ).fetchone()
        if row is None:
            raise UnknownDatasetError(
                f"no budget for dataset {name!r} in {self.path}; create one first "
                "(Ledger.create_budget or `dpgauss budget init`)"
            )
        return float(row[0]), float(row[1]), float(row[2])

    def _load(
        self, conn: sqlite3.Connection, name: str
    ) -> tuple[tuple[float, float, float], _Grid, list[_Row]]:
        budget = self._budget_row(conn, name)
        scope, period, origin, column = conn.execute(
            "SELECT scope, period, origin, series_column FROM budgets WHERE dataset = ?", (name,)
        ).fetchone()
        rows = conn.execute(
            "SELECT mu, eta, period FROM charges WHERE dataset = ? ORDER BY id", (name,)
        ).fetchall()
        grid = (str(scope), period, origin, column)
        return budget, grid, [(float(r[0]), float(r[1]), r[2]) for r in rows]

    @staticmethod
    def _status(
        name: str,
        budget: tuple[float, float, float],
        mus: list[float],
        etas: list[float] | None = None,
    ) -> BudgetStatus:
        eps, dlt, mu_frozen = budget
        etas = etas or []
        eta_spent = sum_up(etas)
        mu_budget = _effective_budget(budget, etas)
        left = Fraction(mu_budget) ** 2 - sum_squares(mus)
        mu_remaining = sqrt_down(left) if left > 0 else 0.0
        rest = sub_down(dlt, eta_spent)
        if mus:
            acc = GaussianAccountant()
            acc.add_mu(np.asarray(mus, dtype=np.float64))
            mu_spent = float(acc.mu)
            eps_spent = float(gdp_epsilon(mu_spent, rest)) if rest > 0 else math.inf
        else:
            mu_spent = eps_spent = 0.0
        eps_remaining = (
            float(gdp_epsilon(mu_remaining, rest)) if mu_remaining > 0.0 and rest > 0 else 0.0
        )
        return BudgetStatus(
            dataset=name,
            epsilon=eps,
            delta=dlt,
            mu_budget=mu_frozen,
            mu_spent=mu_spent,
            mu_remaining=mu_remaining,
            epsilon_spent=eps_spent,
            epsilon_remaining=eps_remaining,
            charges=len(mus),
            eta_spent=eta_spent,
            mu_effective=None if eta_spent == 0.0 else mu_budget,
        )
