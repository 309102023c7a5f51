"""Run the paper's experiments: registry of figures, seeds, parallel grid points, outputs.

A *figure* is a module that defines ``FIGURE = Figure(...)`` (see :class:`Figure`).  The
runner asks it for its grid :class:`Point` s, computes every point (in parallel with
``jobs > 1``), and writes into the output directory, per figure:

* ``<name>.csv`` — every plotted number (one row per row returned by the points);
* ``<name>.png`` — the plot (only when matplotlib is installed: ``pip install 'dpgauss[plot]'``),
  and any further images the figure's ``plot`` writes beside it (it returns their paths);
* ``<name>.json`` — the measured headline, the paper's claims next to the measured
  numbers, and the settings of the run;

and regenerates ``summary.md`` from every ``<name>.json`` present in the directory, one
line per figure stating the headline as measured (so running one figure keeps the lines of
the others from earlier runs; each line names its own settings).

Seeds.  Point ``p`` of figure ``k`` computes from
``numpy.random.SeedSequence(seed, spawn_key=(k, crc32(p.key)))``: its randomness depends
only on ``--seed``, the figure and the point's own key, never on ``--jobs``, the order in
which points finish, or which other figures or points run.

Registry.  :data:`REGISTRY` maps a figure number to its command-line name and module;
the module defines ``FIGURE = Figure(number=<that number>, name=<the module's own name>,
…)``, and its outputs are ``<module name>.csv/.png/.json``.  Figure 4 (the taxi heat
maps) has a slot: once ``dpgauss.experiments.fig4_taxi_heat_maps`` exists and defines
``FIGURE``, ``dpgauss reproduce`` runs it with the others; until then it is listed as not
available and skipped.
"""

from __future__ import annotations

import contextlib
import csv
import importlib
import json
import math
import multiprocessing
import numbers
import os
import shutil
import sys
import time
import zlib
from collections.abc import Callable, Iterator, Mapping, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

import numpy as np

from .._optional import install_hint, missing
from .._validation import check_int

__all__ = [
    "DEFAULT_OUT",
    "REGISTRY",
    "Claim",
    "Figure",
    "FigureResult",
    "Point",
    "ProgressBar",
    "RunReport",
    "Summary",
    "available_figures",
    "load_figure",
    "point_seed",
    "resolve_figures",
    "run",
    "write_csv",
    "write_summary",
]

#: Output directory used when none is given.
DEFAULT_OUT = "dpgauss-results"

Row = dict[str, Any]


@dataclass(frozen=True)
class Point:
    """One independent grid point of a figure.

    ``key`` identifies the point (e.g. ``"d=1000,eps=0.01"``) and, with ``--seed`` and the
    figure number, determines its random numbers.  ``params`` (picklable) is passed to the
    figure's ``run_point``.  ``cost`` is a relative amount of work, used to order the
    points (largest first) and to advance the progress bar.
    """

    key: str
    params: Mapping[str, Any]
    cost: float = 1.0


@dataclass(frozen=True)
class Claim:
    """A statement (of the paper, or a check of dpgauss) next to what this run measured.

    ``verdict`` is ``"agrees"``, ``"partly"`` or ``"disagrees"``, decided from the measured
    numbers by the figure's ``summarize``.  ``source`` is ``"paper"`` for the paper's
    claims and ``"dpgauss"`` for checks of this library's own choices.
    """

    statement: str
    measured: str
    verdict: str
    source: str = "paper"

    def __post_init__(self) -> None:
        if self.verdict not in ("agrees", "partly", "disagrees"):
            raise ValueError(f"verdict must be agrees, partly or disagrees; got {self.verdict!r}")
        if self.source not in ("paper", "dpgauss"):
            raise ValueError(f"source must be 'paper' or 'dpgauss'; got {self.source!r}")


@dataclass(frozen=True)
class Summary:
    """What a figure's rows say: a one-line headline, claims, and named key numbers."""

    headline: str
    claims: tuple[Claim, ...] = ()
    numbers: Mapping[str, float] = field(default_factory=dict)


@dataclass(frozen=True)
class Figure:
    """A reproducible figure: how to enumerate, compute, summarise and plot it.

    Attributes
    ----------
    number : the figure's number in ``dpgauss reproduce`` ("1", "2", …)
    name : file stem of the outputs, e.g. ``"fig1_calibration"``
    title : a short title
    columns : the CSV columns, in order (every row has exactly these keys)
    points : ``points(quick) -> list[Point]``; ``quick`` shrinks repetitions and grids
    run_point : ``run_point(params, seed) -> list[row]``, a module-level function (it is
        sent to worker processes); ``seed`` is a ``numpy.random.SeedSequence``
    summarize : ``summarize(rows) -> Summary``, rows of all points in point order
    plot : ``plot(rows, path)`` writes the PNG (uses :mod:`dpgauss.plotting`);
        it may write further images beside it and return their paths (else None)

    A row's keys that start with ``_`` are a payload for ``summarize`` and ``plot`` (e.g. a
    heat map's node values) and are not written to the CSV.
    """

    number: str
    name: str
    title: str
    columns: tuple[str, ...]
    points: Callable[[bool], list[Point]]
    run_point: Callable[[Mapping[str, Any], np.random.SeedSequence], list[Row]]
    summarize: Callable[[list[Row]], Summary]
    plot: Callable[[list[Row], Path], Sequence[Path] | None]


#: Figure number -> (name used on the command line, module defining ``FIGURE``).
REGISTRY: dict[str, tuple[str, str]] = {
    "1": ("calibration", "dpgauss.experiments.fig1_calibration"),
    "2": ("mean-estimation", "dpgauss.experiments.fig2_mean_estimation"),
    "3": ("sparse-histograms", "dpgauss.experiments.fig3_sparse_histograms"),
    # Slot for the taxi heat maps (paper Fig. 2 and 6): built on the release pipeline.
    "4": ("taxi-heat-maps", "dpgauss.experiments.fig4_taxi_heat_maps"),
}


#: Figure number -> the importable modules it needs beyond the core (and the extra to install).
REQUIRES: dict[str, tuple[tuple[str, ...], str]] = {
    "4": (("duckdb", "pyarrow"), "demo"),  # the release pipeline
}


def missing_requirements(number: str) -> str | None:
    """Why figure ``number`` cannot run here (a missing extra), or None if it can."""
    modules, extra = REQUIRES.get(number, ((), ""))
    absent = missing(*modules)
    if not absent:
        return None
    return (
        f"figure {number} ({REGISTRY[number][0]}) needs {', '.join(absent)}: {install_hint(extra)}"
    )


def load_figure(number: str) -> Figure | None:
    """The :class:`Figure` registered as ``number``, or None while its module does not exist."""
    if number not in REGISTRY:
        raise ValueError(f"no figure {number!r}; known figures: {', '.join(REGISTRY)}")
    module_name = REGISTRY[number][1]
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        if exc.name == module_name:
            return None
        raise
    figure = getattr(module, "FIGURE", None)
    if not isinstance(figure, Figure):
        raise TypeError(f"{module_name} must define FIGURE = Figure(...)")
    stem = module_name.rsplit(".", 1)[1]
    if figure.number != number or figure.name != stem:
        raise TypeError(
            f"{module_name}.FIGURE must have number={number!r} and name={stem!r} (the module's "
            f"name, used for its output files); got {figure.number!r}, {figure.name!r}"
        )
    return figure


def available_figures() -> list[str]:
    """Numbers of the registered figures whose module exists, in registry order."""
    return [number for number in REGISTRY if load_figure(number) is not None]


def resolve_figures(figures: Sequence[str] | None) -> list[Figure]:
    """Figures named by number (``"2"``), ``"fig2"`` or name (``"mean-estimation"``).

    None or empty: every available figure.  Duplicates are dropped, registry order kept.
    Raises ``ValueError`` for an unknown figure or one that is not available yet.
    """
    if not figures:
        found = [load_figure(n) for n in REGISTRY if missing_requirements(n) is None]
        return [fig for fig in found if fig is not None]
    by_name = {name: number for number, (name, _) in REGISTRY.items()}
    wanted: set[str] = set()
    for token in figures:
        text = str(token).strip().lower()
        number: str | None = text.removeprefix("fig")
        if number not in REGISTRY:
            number = by_name.get(text)
        if number is None:
            known = ", ".join(f"{n} ({name})" for n, (name, _) in REGISTRY.items())
            raise ValueError(f"unknown figure {token!r}; known figures: {known}")
        wanted.add(number)
    out = []
    for number in REGISTRY:
        if number in wanted:
            why = missing_requirements(number)
            if why is not None:
                raise ValueError(why)
            fig = load_figure(number)
            if fig is None:
                raise ValueError(
                    f"figure {number} ({REGISTRY[number][0]}) is not available yet: its module "
                    f"{REGISTRY[number][1]} is not part of this installation"
                )
            out.append(fig)
    return out


def point_seed(seed: int, figure_number: str, key: str) -> np.random.SeedSequence:
    """``SeedSequence(seed, spawn_key=(figure, crc32(key)))``: a point's own randomness."""
    return np.random.SeedSequence(seed, spawn_key=(int(figure_number), zlib.crc32(key.encode())))


def _run_task(
    run_point: Callable[[Mapping[str, Any], np.random.SeedSequence], list[Row]],
    params: Mapping[str, Any],
    seed: int,
    figure_number: str,
    key: str,
) -> tuple[list[Row], float]:
    """Compute one point (in a worker process or in-process); returns (rows, seconds)."""
    start = time.perf_counter()
    rows = run_point(params, point_seed(seed, figure_number, key))
    return rows, time.perf_counter() - start


# ------------------------------------------------------------------ progress bar


def _clock(seconds: float) -> str:
    seconds = max(0, round(seconds))
    return f"{seconds // 60}:{seconds % 60:02d}"


class ProgressBar:
    """A small progress bar on a text stream (stderr by default); no dependencies.

    On a terminal it redraws one line (at most 10 times a second); on anything else (a
    log file, a pipe) it writes a line at every 10 % of the work, so logs stay short.
    ``total`` is in arbitrary units of work (the points' costs); the estimate of the time
    left assumes the rest goes at the average rate so far.
    """

    def __init__(
        self, total: float, label: str = "reproduce", stream: TextIO | None = None
    ) -> None:
        self.total = max(float(total), 1e-300)
        self.label = label
        self.stream = sys.stderr if stream is None else stream
        self.tty = bool(getattr(self.stream, "isatty", lambda: False)())
        self.done = 0.0
        self.count = 0
        self.start = time.perf_counter()
        self._last_draw = 0.0
        self._last_decile = -1

    def advance(self, amount: float, note: str = "") -> None:
        """Record ``amount`` units of work done (``note``: what just finished)."""
        self.done = min(self.total, self.done + amount)
        self.count += 1
        frac = self.done / self.total
        now = time.perf_counter()
        elapsed = now - self.start
        left = elapsed * (1.0 - frac) / frac if frac > 0 else math.inf
        eta = f"~{_clock(left)} left" if math.isfinite(left) and frac < 1.0 else ""
        if self.tty:
            if now - self._last_draw < 0.1 and frac < 1.0:
                return
            self._last_draw = now
            width = 28
            filled = round(width * frac)
            bar = "#" * filled + "-" * (width - filled)
            line = f"{self.label} [{bar}] {100 * frac:3.0f}% {_clock(elapsed)} {eta} {note}"
            columns = shutil.get_terminal_size((100, 20)).columns
            self.stream.write("\r" + line[: columns - 1].ljust(columns - 1))
        else:
            decile = math.floor(10 * frac + 1e-9)
            if decile <= self._last_decile:
                return
            self._last_decile = decile
            self.stream.write(
                f"{self.label}: {100 * frac:3.0f}% ({self.count} points, "
                f"{_clock(elapsed)} elapsed{', ' + eta if eta else ''})\n"
            )
        self.stream.flush()

    def close(self) -> None:
        """End the bar's line on a terminal."""
        if self.tty:
            self.stream.write("\n")
            self.stream.flush()


# ------------------------------------------------------------------ outputs


def _cell(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, bool | np.bool_):
        return str(bool(value)).lower()
    if isinstance(value, numbers.Integral):
        return str(int(value))
    if isinstance(value, numbers.Real):
        x = float(value)
        return repr(x) if math.isfinite(x) else ("" if math.isnan(x) else repr(x))
    return str(value)


def write_csv(path: Path, columns: Sequence[str], rows: Sequence[Mapping[str, Any]]) -> None:
    """Write ``rows`` with exactly ``columns``; floats in shortest round-trip form, NaN empty.

    Keys starting with ``_`` (payloads for the plot) are not written.
    """
    with open(path, "w", newline="", encoding="utf-8") as fh:
        writer = csv.writer(fh, lineterminator="\n")
        writer.writerow(columns)
        for i, row in enumerate(rows):
            keys = {k for k in row if not k.startswith("_")}
            if keys != set(columns):
                extra = sorted(keys - set(columns))
                missing = sorted(set(columns) - keys)
                raise ValueError(f"row {i} of {path.name}: extra keys {extra}, missing {missing}")
            writer.writerow([_cell(row[c]) for c in columns])


def _jsonable(value: Any) -> Any:
    if isinstance(value, Mapping):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_jsonable(v) for v in value]
    if isinstance(value, np.generic):
        value = value.item()
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


_VERDICT = {"agrees": "agrees", "partly": "agrees only partly", "disagrees": "**disagrees**"}


def _summary_lines(number: str, data: Mapping[str, Any]) -> list[str]:
    """The lines of one figure in ``summary.md``, from its ``<name>.json``."""
    mode = "quick settings" if data["quick"] else "full settings"
    lines = [
        f"- **Figure {number}: {data['title']}** ({mode}, seed {data['seed']}): {data['headline']}"
    ]
    for claim in data["claims"]:
        verdict = _VERDICT.get(claim["verdict"], claim["verdict"])
        source = "Paper" if claim.get("source", "paper") == "paper" else "dpgauss check"
        statement = claim.get("statement", claim.get("paper", ""))
        lines.append(f"  - {source}: {statement} Measured: {claim['measured']} Verdict: {verdict}.")
    files = ", ".join(f"`{name}`" for name in data["files"])
    lines.append(f"  - Files: {files}. Command: `{data['command']}`.")
    return lines


def write_summary(out: Path) -> Path:
    """Regenerate ``out/summary.md`` from the ``<name>.json`` of every registered figure."""
    lines = [
        "# dpgauss reproduce: measured results",
        "",
        "Balle & Wang (ICML 2018), regenerated by `dpgauss reproduce`. Every number here was "
        "measured by the run named on its line; where a measurement disagrees with the "
        "paper, the line says so.",
        "",
    ]
    for number, (_, module) in REGISTRY.items():
        stem = module.rsplit(".", 1)[1]
        path = out / f"{stem}.json"
        if path.exists():
            try:
                lines.extend(_summary_lines(number, json.loads(path.read_text(encoding="utf-8"))))
            except (ValueError, KeyError, TypeError, AttributeError) as exc:
                lines.append(f"- **Figure {number}**: could not read `{path.name}` ({exc!r}).")
    summary = out / "summary.md"
    summary.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return summary


# ------------------------------------------------------------------ running


@dataclass(frozen=True)
class FigureResult:
    """One figure's rows, measured summary, files written and compute time (seconds)."""

    figure: Figure
    rows: list[Row]
    summary: Summary
    files: tuple[Path, ...]
    seconds: float


@dataclass(frozen=True)
class RunReport:
    """Everything a :func:`run` did: per-figure results, summary path, notes, wall time."""

    results: tuple[FigureResult, ...]
    summary_path: Path
    notes: tuple[str, ...]
    seconds: float

    def text(self) -> str:
        """A short report for the terminal: one headline per figure and the files."""
        lines = []
        for res in self.results:
            lines.append(f"figure {res.figure.number} ({res.figure.title}): {res.summary.headline}")
            lines.append("  wrote " + ", ".join(str(p) for p in res.files))
        lines.extend(self.notes)
        lines.append(f"summary: {self.summary_path} ({self.seconds:.1f} s)")
        return "\n".join(lines)


def _command(figures: Sequence[Figure], quick: bool, out: Path, seed: int, jobs: int) -> str:
    parts = ["dpgauss reproduce", *(f.number for f in figures)]
    if quick:
        parts.append("--quick")
    parts += [f"--out {out}", f"--seed {seed}", f"--jobs {jobs}"]
    return " ".join(parts)


#: Environment variables that cap the threads of BLAS/OpenMP libraries.
_THREAD_VARIABLES = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")


@contextlib.contextmanager
def _single_threaded_children() -> Iterator[None]:
    """Workers started inside run their BLAS single-threaded (unless the user set a value).

    The workers are the parallelism: ``jobs`` workers each running a multi-threaded BLAS
    oversubscribe the cores, and idle BLAS threads spin (measured on the taxi heat maps with
    2 workers on 2 cores: 10× the CPU time).  BLAS reads these variables when it is loaded,
    so the workers are started with ``spawn`` (a fresh interpreter) while they are set.
    """
    saved = {name: os.environ.get(name) for name in _THREAD_VARIABLES}
    for name, value in saved.items():
        if value is None:
            os.environ[name] = "1"
    try:
        yield
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)


def _execute(
    tasks: list[tuple[Figure, Point]], seed: int, jobs: int, bar: ProgressBar | None
) -> list[tuple[list[Row], float]]:
    """Compute every task, largest cost first; results in task order."""
    results: list[tuple[list[Row], float] | None] = [None] * len(tasks)
    order = sorted(range(len(tasks)), key=lambda i: -tasks[i][1].cost)

    def finished(i: int, result: tuple[list[Row], float]) -> None:
        results[i] = result
        if bar is not None:
            fig, point = tasks[i]
            bar.advance(point.cost, f"fig{fig.number} {point.key}")

    if jobs == 1:
        for i in order:
            fig, point = tasks[i]
            finished(i, _run_task(fig.run_point, point.params, seed, fig.number, point.key))
    else:
        with (
            _single_threaded_children(),
            ProcessPoolExecutor(
                max_workers=jobs, mp_context=multiprocessing.get_context("spawn")
            ) as pool,
        ):
            pending: dict[Future[tuple[list[Row], float]], int] = {}
            for i in order:
                fig, point = tasks[i]
                future = pool.submit(
                    _run_task, fig.run_point, point.params, seed, fig.number, point.key
                )
                pending[future] = i
            try:
                while pending:
                    done, _ = wait(pending, return_when=FIRST_COMPLETED)
                    for future in done:
                        finished(pending.pop(future), future.result())
            except BaseException:
                pool.shutdown(wait=True, cancel_futures=True)
                raise
    return [r for r in results if r is not None]


def run(
    figures: Sequence[str] | None = None,
    *,
    quick: bool = False,
    out: str | os.PathLike[str] = DEFAULT_OUT,
    seed: int = 0,
    jobs: int = 1,
    progress: bool | None = None,
    plots: bool | None = None,
) -> RunReport:
    """Reproduce ``figures`` (numbers or names; None = every available figure) into ``out``.

    Parameters
    ----------
    figures : figure numbers ("1", "2", "3") or names ("calibration", …); None for all
    quick : shrink repetitions and grids (seconds instead of minutes); default: the
        paper's full settings
    out : output directory (created if needed)
    seed : integer ≥ 0; every point's randomness derives from it (see the module docs)
    jobs : worker processes (≥ 1) over independent grid points; results do not depend on it
    progress : progress on stderr (True/False; None: on, as a bar on a terminal)
    plots : write PNGs (True: required, raises ``PlotUnavailableError`` without
        matplotlib; False: skip; None: write them if matplotlib is installed)

    Returns
    -------
    RunReport
    """
    from .. import plotting

    selected = resolve_figures(figures)
    seed = check_int(seed, "seed", 0)
    jobs = check_int(jobs, "jobs", 1)
    if plots:
        plotting.require_matplotlib()
    make_plots = plotting.have_matplotlib() if plots is None else bool(plots)
    notes: list[str] = []
    if not figures:
        missing = [n for n in REGISTRY if n not in {f.number for f in selected}]
        for number in missing:
            why = missing_requirements(number)
            notes.append(
                f"{why}: skipped"
                if why
                else f"figure {number} ({REGISTRY[number][0]}) is not available yet: skipped"
            )
    if not make_plots:
        notes.append(
            f"PNGs skipped: matplotlib is not installed ({install_hint('plot')})"
            if plots is None
            else "PNGs skipped (plots=False)"
        )
    out_dir = Path(out)
    out_dir.mkdir(parents=True, exist_ok=True)

    wall = time.perf_counter()
    tasks: list[tuple[Figure, Point]] = []
    for fig in selected:
        pts = fig.points(quick)
        keys = [p.key for p in pts]
        if len(set(keys)) != len(keys) or len({zlib.crc32(k.encode()) for k in keys}) != len(keys):
            raise ValueError(f"figure {fig.number}: point keys (and their crc32) must be unique")
        tasks.extend((fig, p) for p in pts)
    bar = None
    if progress or progress is None:
        bar = ProgressBar(sum(p.cost for _, p in tasks))
    try:
        computed = _execute(tasks, seed, jobs, bar)
    finally:
        if bar is not None:
            bar.close()

    command = _command(selected, quick, out_dir, seed, jobs)
    results = []
    for fig in selected:
        rows: list[Row] = []
        seconds = 0.0
        for (task_fig, _), (point_rows, secs) in zip(tasks, computed, strict=True):
            if task_fig is fig:
                rows.extend(point_rows)
                seconds += secs
        summary = fig.summarize(rows)
        csv_path = out_dir / f"{fig.name}.csv"
        write_csv(csv_path, fig.columns, rows)
        files = [csv_path]
        if make_plots:
            png_path = out_dir / f"{fig.name}.png"
            more = fig.plot(rows, png_path)
            files.append(png_path)
            files.extend(Path(p) for p in more or ())
        json_path = out_dir / f"{fig.name}.json"
        files.append(json_path)
        record = {
            "figure": fig.number,
            "title": fig.title,
            "quick": quick,
            "seed": seed,
            "command": command,
            "headline": summary.headline,
            "claims": [vars(c) for c in summary.claims],
            "numbers": dict(summary.numbers),
            "compute_seconds": round(seconds, 3),
            "files": [p.name for p in files],
        }
        json_path.write_text(
            json.dumps(_jsonable(record), indent=2, ensure_ascii=False) + "\n", encoding="utf-8"
        )
        results.append(FigureResult(fig, rows, summary, tuple(files), seconds))
    summary_path = write_summary(out_dir)
    return RunReport(tuple(results), summary_path, tuple(notes), time.perf_counter() - wall)
