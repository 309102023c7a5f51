"""Denoise a Gaussian release made by any system: a table in, the table with denoised values
and their intervals out.

A release of OpenDP, Tumult, PipelineDP, a statistics office's noisy tables or
``dpgauss release`` is a table with one noisy value per key and its noise standard
deviation (one number, or one per row).  :func:`denoise_table` reads it (CSV, or Parquet
with pyarrow), runs a denoiser of :mod:`dpgauss.denoise.registry` with the public structure
the user names — a graph (GraphML, the bundled Manhattan graph, or an edge table of key
pairs), a grid, a chain, or none — and writes the same table with ``denoised``,
``denoised_lower`` and ``denoised_upper`` (replacing columns of those names) and a JSON
report beside it.  It is post-processing of published values: it costs no privacy, touches
no ledger and says so in the report.

The denoisers model Gaussian noise: SURE and the intervals rely on it.  A table whose noise
is not Gaussian (``noise = "laplace"`` or anything else) is refused unless the caller asks
to treat it as Gaussian (``assume_gaussian``), which the report then records.

Unlike a release, this tool reads public data and may stop on it: a value that is not a
finite number, a σ that is not positive, a key missing from the graph are refused in one
line naming the row and the column, before anything is written.  Both files appear
together or not at all (:class:`~dpgauss.release.outputs.OutputGroup`).
"""

from __future__ import annotations

import csv
import json
import math
import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from .._optional import require
from ..denoise import Denoised, Structure, as_graph
from ..denoise.registry import entry
from ..denoise.result import DRAWS, INTERVAL_METHOD, WEAK_NOTE, error_bars, public_seed
from ..denoise.structure import lattice_graph
from .groups import group_table, median_widths, read_groups
from .outputs import OutputGroup, cell_text, write_csv
from .report import candidates_table, json_ready

__all__ = ["NOISE_LAWS", "DenoisedTable", "denoise_table"]

#: Noise laws a table may declare; only ``gaussian`` is modelled.
NOISE_LAWS = ("gaussian", "laplace", "other")
OUTPUT_COLUMNS = ("denoised", "denoised_lower", "denoised_upper")
#: |values| and σ up to this: squares and sums of squares stay finite.
VALUE_LIMIT = 1e150


@dataclass(frozen=True)
class DenoisedTable:
    """What :func:`denoise_table` wrote: the result, the output and report paths."""

    result: Denoised
    lower: np.ndarray
    upper: np.ndarray
    output: str
    report_path: str
    report: dict[str, Any]

    @property
    def summary(self) -> str:
        """The lines ``dpgauss denoise`` prints."""
        from .report import rmse_text

        r = self.report
        iv = r["intervals"]
        n = r["rows"]
        rmse, up = r["rmse_per_key"], r["rmse_per_key_upper95"]
        return "\n".join(
            [
                f"denoised   : {n:,} rows of {r['value_column']!r} with "
                f"{r['method']} ({r['structure']}); no privacy spent (post-processing)",
                f"error      : estimated RMSE per key {rmse_text(rmse, up)} vs "
                f"{r['raw_rmse_per_key']:.4g} without denoising",
                f"intervals  : {iv['level']:.0%} ({iv['method']}) median width "
                f"{iv['median_width']:.4g} vs {iv['raw_width']:.4g} for the values given"
                + (f"; {WEAK_NOTE}" if iv.get("weak_fit") else ""),
                f"output     : {self.output}; report {self.report_path}",
            ]
            + (
                [
                    f"groups     : {r['groups']['groups']:,} sums of keys, median interval "
                    f"width {r['groups']['median_width']:.4g} vs {r['groups']['raw_width']:.4g} "
                    f"for the sums of the values given; {r['groups']['output']}"
                ]
                if "groups" in r
                else []
            )
        )


def _errors(risk: float | None, sd: float | None, upper: float, n: int) -> dict[str, Any]:
    """The report's error fields (:func:`dpgauss.release.report.error_fields`: never a
    zero or negative error)."""
    from .report import error_fields

    err = error_fields(risk, upper, n)
    out = {
        "estimated_error": err["estimated_error"],
        "estimated_error_sd": sd,
        "estimated_error_upper95": upper,
    }
    if "estimated_error_note" in err:
        out["estimated_error_note"] = err["estimated_error_note"]
    return out | {k: err[k] for k in ("sure", "rmse_per_key", "rmse_per_key_upper95")}


def _read(path: str) -> dict[str, list[Any]]:
    """The table's columns (CSV text, or Parquet values), in file order."""
    if path.lower().endswith((".parquet", ".pq")):
        pq = require("pyarrow.parquet", "data", "reading a Parquet table", error=ValueError)
        try:
            table = pq.read_table(path)
        except Exception as exc:  # pyarrow raises many types for a bad file
            raise ValueError(f"{path}: not a readable Parquet file ({exc})") from None
        return {name: table.column(name).to_pylist() for name in table.column_names}
    try:
        with open(path, newline="", encoding="utf-8") as fh:
            rows = list(csv.reader(fh))
    except (OSError, UnicodeDecodeError) as exc:
        raise ValueError(f"{path}: cannot be read as a UTF-8 CSV file ({exc})") from None
    if not rows:
        raise ValueError(f"{path}: the table is empty (no header)")
    header = rows[0]
    if len(set(header)) != len(header):
        raise ValueError(f"{path}: the header repeats a column name")
    for i, row in enumerate(rows[1:], start=2):
        if len(row) != len(header):
            raise ValueError(
                f"{path}: line {i} has {len(row)} fields; the header has {len(header)}"
            )
    return {name: [row[j] for row in rows[1:]] for j, name in enumerate(header)}


def _numbers(path: str, columns: dict[str, list[Any]], name: str, what: str) -> np.ndarray:
    if name not in columns:
        shown = ", ".join(list(columns)[:20])
        raise ValueError(f"{path}: no column {name!r} for {what} (columns: {shown})")
    out = np.empty(len(columns[name]))
    for i, v in enumerate(columns[name]):
        try:
            x = float(v)  # CSV text, or a Parquet number
        except (TypeError, ValueError):
            x = math.nan
        if not math.isfinite(x):
            raise ValueError(
                f"{path}: row {i + 1} of column {name!r} ({what}) is {v!r}, not a finite number"
            )
        out[i] = x
    return out


def _structure(
    path: str,
    columns: dict[str, list[Any]],
    n: int,
    *,
    key: str,
    graph: str | None,
    edges: str | None,
    grid: Sequence[int] | None,
    chain: bool,
) -> tuple[Structure, str]:
    given = [graph is not None, edges is not None, grid is not None, chain]
    if sum(given) > 1:
        raise ValueError("give at most one structure: --graph, --edges, --grid or --chain")
    if chain:
        if n < 2:
            raise ValueError(f"--chain needs at least 2 rows; the table has {n}")
        return Structure(graph=lattice_graph((n,)), grid=(n,)), f"chain of {n}"
    if grid is not None:
        shape = tuple(int(g) for g in grid)
        if len(shape) != 2 or min(shape) < 2 or math.prod(shape) != n:
            raise ValueError(
                f"--grid ROWS COLS needs ROWS, COLS ≥ 2 with ROWS × COLS = {n} (the rows, in "
                f"row-major order); got {' x '.join(map(str, shape))}"
            )
        return (
            Structure(graph=lattice_graph(shape), grid=shape),
            f"{shape[0]} x {shape[1]} grid",
        )
    if graph is None and edges is None:
        return Structure(), "no structure"
    if key not in columns:
        raise ValueError(f"{path}: no key column {key!r} to match the graph's nodes (--key)")
    keys = [str(v) for v in columns[key]]
    index = {k: i for i, k in enumerate(keys)}
    if len(index) != n:
        raise ValueError(f"{path}: the key column {key!r} repeats a key")
    if edges is not None:
        from .domains.graph_files import read_edge_pairs

        pairs = read_edge_pairs(edges, set(keys))
        ends = np.array([[index[a], index[b]] for a, b in pairs], dtype=np.int64).reshape(-1, 2)
        return Structure(graph=as_graph(ends, n)), f"edge table, {len(pairs):,} edges"
    from .domains.graph_files import BUNDLED_GRAPHS, read_graphml

    assert graph is not None
    if graph in BUNDLED_GRAPHS:
        from ..datasets import load_manhattan_graph

        g = load_manhattan_graph(prune_dead_ends=graph == "manhattan-pruned")
        ids = [str(i) for i in range(g.n)]
        node_edges = np.asarray(g.edges, dtype=np.int64)
        name = graph
    else:
        pg = read_graphml(graph)
        ids = [str(i) for i in pg.ids.tolist()]
        node_edges = pg.edges
        name = pg.name
    missing = [i for i in ids if i not in index]
    extra = sorted(set(keys) - set(ids))
    if missing or extra:
        raise ValueError(
            f"the keys of {path} (column {key!r}) must be the graph's node ids, one row each: "
            + (f"{len(missing):,} nodes have no row (e.g. {missing[0]!r})" if missing else "")
            + ("; " if missing and extra else "")
            + (f"{len(extra):,} keys are not nodes (e.g. {extra[0]!r})" if extra else "")
        )
    rows = np.array([index[i] for i in ids], dtype=np.int64)  # node j is row rows[j]
    return Structure(graph=as_graph(rows[node_edges], n)), f"graph {name}"


def denoise_table(
    table: str | os.PathLike[str],
    *,
    value: str = "released",
    sigma: float | str | None = None,
    out: str | os.PathLike[str],
    method: str = "auto",
    params: dict[str, Any] | None = None,
    key: str | Sequence[str] = "key",
    graph: str | None = None,
    edges: str | None = None,
    grid: Sequence[int] | None = None,
    chain: bool = False,
    level: float = 0.95,
    draws: int | None = None,
    seed: int | None = None,
    noise: str = "gaussian",
    assume_gaussian: bool = False,
    overwrite: bool = False,
    nonnegative: bool | None = None,
    groups: str | os.PathLike[str] | None = None,
) -> DenoisedTable:
    """Denoise column ``value`` of ``table`` and write it with intervals (module docstring).

    ``sigma`` is a number or the name of a column of per-row σ (default: the column
    ``sigma`` if the table has one, as a ``dpgauss release`` table does).
    ``nonnegative`` (``--nonnegative``) publishes the positive part of the estimate and
    lower bounds ≥ 0, for counts and sums of values ≥ 0.  ``None`` (default): as the table's
    own ``dpgauss release`` report says (``<table>.report.json`` beside it, whose denoiser
    ran with ``nonnegative``; a release decides it from its statistic), else off — a table
    alone does not say what its statistic is.  ``True`` is refused for ``method = "none"``
    (the raw values are written as they are).

    ``groups`` (``--groups``) names sums of keys (:mod:`dpgauss.release.groups`: a table of
    ``group``, the key column — or the columns ``key`` names, e.g. a product's axes — and an
    optional ``weight``): their sums of released and
    denoised values and their intervals, from the per-key intervals' draws, are written to
    ``<out>.groups.csv`` (``.groups.parquet`` beside a Parquet output).
    """
    src = os.fspath(table)
    dst = os.fspath(out)
    if noise not in NOISE_LAWS:
        raise ValueError(f"noise must be one of {', '.join(NOISE_LAWS)}; got {noise!r}")
    if noise != "gaussian" and not assume_gaussian:
        raise ValueError(
            f"the table's noise is {noise}, not Gaussian: dpgauss's denoisers, SURE and the "
            "intervals model Gaussian noise only. Pass --assume-gaussian to treat its σ as a "
            "Gaussian's anyway (the estimated errors and the intervals' coverage are then not "
            "guaranteed; the report records it)"
        )
    e = entry(method)
    fn = e.load()
    params = dict(params or {})
    bad = sorted(set(params) - set(e.params))
    if bad:
        raise ValueError(
            f"--params of method {method!r} has unknown keys {', '.join(map(repr, bad))} "
            f"(allowed: {', '.join(e.params) or 'none'})"
        )
    if nonnegative is None:
        nonnegative = _release_says_nonnegative(src) and "nonnegative" in e.params
    if not isinstance(nonnegative, bool):
        raise TypeError(f"nonnegative must be True, False or None; got {nonnegative!r}")
    if nonnegative:
        if "nonnegative" not in e.params:
            raise ValueError(
                f"--nonnegative does not apply to method {method!r} (the raw values are "
                "written as they are)"
            )
        if "nonnegative" in params:
            raise ValueError("give --nonnegative or --params '{\"nonnegative\": ...}', not both")
        params["nonnegative"] = True
    if not 0.0 < float(level) < 1.0:
        raise ValueError(f"--level must be in (0, 1); got {level}")
    columns = _read(src)
    y = _numbers(src, columns, value, "the noisy values")
    if y.size and np.max(np.abs(y)) > VALUE_LIMIT:
        i = int(np.argmax(np.abs(y) > VALUE_LIMIT))
        raise ValueError(
            f"{src}: row {i + 1} of column {value!r} is {float(y[i])!r}; values must be within "
            f"±{VALUE_LIMIT:g} (so that the denoisers' sums of squares are finite)"
        )
    n = y.size
    if n == 0:
        raise ValueError(f"{src}: the table has no rows")
    if sigma is None:
        if "sigma" not in columns:
            raise ValueError(
                f"{src}: give --sigma (a number, or the column of each row's σ); the table "
                "has no 'sigma' column"
            )
        sigma = "sigma"
    if isinstance(sigma, str):
        s_arr = _numbers(src, columns, sigma, "the noise σ")
        if np.any(s_arr <= 0):
            i = int(np.argmax(s_arr <= 0))
            raise ValueError(
                f"{src}: row {i + 1} of column {sigma!r} is {s_arr[i]!r}; σ must be > 0"
            )
        s: float | np.ndarray = float(s_arr[0]) if np.all(s_arr == s_arr[0]) else s_arr
        sigma_text = f"column {sigma!r}"
    else:
        s = float(sigma)
        if not (math.isfinite(s) and s > 0):
            raise ValueError(f"--sigma must be a finite number > 0; got {sigma}")
        sigma_text = f"{s:g}"
    names = [key] if isinstance(key, str) else list(key)
    if not names or not all(isinstance(k, str) and k for k in names):
        raise ValueError(f"--key must name one column or several; got {key!r}")
    if len(names) > 1 and (graph is not None or edges is not None):
        raise ValueError(
            "--graph and --edges match one key column (--key NAME); several key columns "
            "(a product's axes) are for --groups"
        )
    structure, described = _structure(
        src, columns, n, key=names[0], graph=graph, edges=edges, grid=grid, chain=chain
    )
    sums = None
    if groups is not None:
        missing = [k for k in names if k not in columns]
        if missing:
            raise ValueError(
                f"{src}: no key column {missing[0]!r} to match the groups' keys (--key)"
            )
        keys = [
            tuple(cell_text(v) for v in row)
            for row in zip(*(columns[k] for k in names), strict=True)
        ]
        if len(set(keys)) != n:
            raise ValueError(f"{src}: the key column(s) {', '.join(names)} repeat a key")
        sums = read_groups(groups, keys, names)
    report_path = dst + ".report.json"
    parquet = dst.lower().endswith((".parquet", ".pq"))
    groups_path = dst + (".groups.parquet" if parquet else ".groups.csv")
    paths = [Path(dst), Path(report_path)] + ([Path(groups_path)] if sums is not None else [])
    inputs = [Path(src)] + [
        Path(p) for p in (graph, edges, groups) if p is not None and os.path.exists(p)
    ]
    group = OutputGroup(paths, overwrite=overwrite, protected=inputs)
    group.check()
    try:
        res = fn(y, s, structure, **params)
        gen = np.random.default_rng(seed if seed is not None else public_seed(y, s))
        bars = error_bars(
            res,
            draws=DRAWS if draws is None else draws,
            rng=gen,
            weights=None if sums is None else sums.matrix,
        )
        lo, hi = bars.interval(level)
        for name, arr in (("denoised", res.estimate), ("its interval", np.concatenate([lo, hi]))):
            if not np.all(np.isfinite(arr)):
                raise ValueError(
                    f"{method}: the {name} is not finite for these values and σ (values or σ "
                    "too large for the denoiser's sums of squares); nothing was written"
                )
        from scipy import special

        z = float(-special.ndtri((1.0 - level) / 2.0))
        sig_all = np.broadcast_to(np.asarray(s, dtype=np.float64), y.shape)
        risk = bars.risk if bars.risk is not None and math.isfinite(bars.risk) else None
        report = {
            "denoised_by": "dpgauss denoise",
            "privacy": "post-processing of released values: costs no privacy, no budget was "
            "charged",
            "noise": noise
            + ("" if noise == "gaussian" else " (treated as Gaussian: --assume-gaussian)"),
            "rows": n,
            "value_column": value,
            "sigma": sigma_text,
            "structure": described,
            "method": res.method,
            "asked": method,
            "nonnegative": bool(res.params.get("nonnegative", False)),
            "params": {k: v for k, v in res.params.items() if not isinstance(v, dict | list)}
            | (
                {
                    "candidates": candidates_table(
                        res.params["candidates"], res.params.get("selected")
                    )
                }
                if "candidates" in res.params
                else {}
            )
            | ({"skipped": res.params["skipped"]} if "skipped" in res.params else {}),
            **_errors(risk, bars.risk_sd, bars.risk_upper(0.95), n),
            "raw_error": float(np.sum(sig_all**2)),
            "raw_rmse_per_key": float(math.sqrt(np.mean(sig_all**2))),
            "intervals": {
                "level": level,
                "method": "exact" if bars.source == "exact" else INTERVAL_METHOD,
                "draws": bars.draws,
                "weak_fit": bars.weak,
                "median_width": float(np.median(hi - lo)),
                "raw_width": float(np.median(2.0 * z * sig_all)),
                "target": "coverage at hot spots, next to jumps, on average (docs/denoising.md)",
            },
        }
        sum_rows = None
        if sums is not None:
            sum_rows = group_table(sums, y, sig_all, bars, level)
            report["groups"] = {
                "file": os.path.basename(sums.path),
                "groups": len(sums.names),
                "output": groups_path,
                **median_widths(sum_rows),
                "method": "sums of keys from the per-key error model (docs/denoising.md)",
            }
        report = json_ready(report)
        new: dict[str, list[Any]] = {}
        if not isinstance(sigma, str):
            # σ given as a number: the table carries the σ its intervals were computed with
            # (replacing a column 'sigma' in place, as the denoised columns do)
            new["sigma"] = [s] * n
        new |= {
            "denoised": np.ravel(res.estimate).tolist(),
            "denoised_lower": np.ravel(lo).tolist(),
            "denoised_upper": np.ravel(hi).tolist(),
        }
        # the input's columns in their order, a column of the same name replaced in place
        out_cols: dict[str, list[Any]] = {k: new.get(k, v) for k, v in columns.items()}
        out_cols.update({k: v for k, v in new.items() if k not in out_cols})
        text = json.dumps(report, indent=2, allow_nan=False) + "\n"
        group.stage(Path(dst), lambda p: _write(p, out_cols, parquet))
        if sum_rows is not None:
            rows = sum_rows
            group.stage(Path(groups_path), lambda p: _write(p, rows, parquet))
        group.stage(Path(report_path), lambda p: Path(p).write_text(text, encoding="utf-8"))
        group.commit()
    finally:
        group.release()
    return DenoisedTable(res, np.asarray(lo), np.asarray(hi), dst, report_path, report)


def _release_says_nonnegative(table: str) -> bool:
    """Whether ``<table>.report.json`` is a ``dpgauss release`` report whose denoiser ran
    with ``nonnegative`` (its ``denoise.params``); False if there is none or it says not."""
    path = Path(table + ".report.json")
    if not path.is_file():
        return False
    try:
        report = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    den = report.get("denoise") if isinstance(report, dict) else None
    params = den.get("params") if isinstance(den, dict) else None
    return isinstance(params, dict) and params.get("nonnegative") is True


def _write(path: str, columns: dict[str, list[Any]], parquet: bool) -> None:
    """The table: the input's columns as read (CSV text stays that text), then the three new."""
    if parquet:
        pa = require("pyarrow", "data", "writing a Parquet table", error=ValueError)
        import pyarrow.parquet as pq

        pq.write_table(pa.table({k: pa.array(_typed(v)) for k, v in columns.items()}), path)
        return

    write_csv(path, columns)


def _typed(values: list[Any]) -> list[Any]:
    """A CSV column of numbers as numbers (integers when every one is), else as read."""
    if not values or not all(isinstance(v, str) for v in values):
        return values
    try:
        if all(v.strip().lstrip("+-").isdigit() for v in values):
            return [int(v) for v in values]
        return [float(v) for v in values]
    except ValueError:
        return values
