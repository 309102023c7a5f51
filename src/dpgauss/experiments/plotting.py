"""Shared plotting for the experiments; matplotlib is imported only when a plot is drawn.

matplotlib is the ``plot`` extra (``pip install 'dpgauss[plot]'``).  Figures are drawn with
matplotlib's object-oriented API (``matplotlib.figure.Figure``, saved through the Agg
canvas), so nothing here touches pyplot's global state or the user's backend.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from .._optional import install_hint

__all__ = [
    "METHOD_STYLES",
    "MatplotlibMissingError",
    "have_matplotlib",
    "method_curves",
    "new_figure",
    "require_matplotlib",
    "save",
]

_HINT = install_hint("plot")


class MatplotlibMissingError(ImportError):
    """matplotlib is needed to draw the figures' PNGs and is not installed."""


def have_matplotlib() -> bool:
    """Whether matplotlib can be imported."""
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        return False
    return True


def require_matplotlib() -> None:
    """Raise :class:`MatplotlibMissingError` with the install hint if matplotlib is missing."""
    if not have_matplotlib():
        raise MatplotlibMissingError(
            f"matplotlib is needed to draw the figures' PNGs; install it with: {_HINT} "
            "(the CSVs and summary.md are written without it)"
        )


def new_figure(ncols: int, *, panel_width: float = 4.8, height: float = 4.0) -> tuple[Any, list]:
    """A ``matplotlib.figure.Figure`` with ``ncols`` panels side by side, and the axes."""
    require_matplotlib()
    from matplotlib.figure import Figure

    fig = Figure(figsize=(panel_width * ncols, height), layout="constrained")
    axes = fig.subplots(1, ncols, squeeze=False)[0]
    return fig, list(axes)


def save(fig: Any, path: Path) -> None:
    """Write ``fig`` as a PNG at 150 dpi."""
    fig.savefig(path, dpi=150)


#: Label and line style of every method compared in figures 2, 3 and 4.
METHOD_STYLES: dict[str, dict[str, Any]] = {
    "laplace": {"label": "Laplace", "color": "tab:gray", "marker": "s", "linestyle": "-"},
    "classical": {
        "label": "classical Gaussian (cGM)",
        "color": "tab:red",
        "marker": "v",
        "linestyle": "--",
    },
    "analytic": {
        "label": "analytic Gaussian (aGM)",
        "color": "tab:blue",
        "marker": "o",
        "linestyle": "-",
    },
    "analytic+js": {
        "label": "aGM + James–Stein",
        "color": "tab:green",
        "marker": "^",
        "linestyle": "-",
    },
    "analytic+soft": {
        "label": "aGM + soft threshold",
        "color": "tab:orange",
        "marker": "D",
        "linestyle": "-",
    },
    "analytic+graph_wavelet": {
        "label": "aGM + tree wavelets",
        "color": "tab:brown",
        "marker": "P",
        "linestyle": "-",
    },
    "analytic+tf0": {
        "label": "aGM + trend filter k=0",
        "color": "tab:cyan",
        "marker": "<",
        "linestyle": "-",
    },
    "analytic+tf1": {
        "label": "aGM + trend filter k=1",
        "color": "tab:olive",
        "marker": ">",
        "linestyle": "-",
    },
    "analytic+auto": {
        "label": "aGM + auto (SURE)",
        "color": "tab:purple",
        "marker": "x",
        "linestyle": ":",
    },
}


def method_curves(
    ax: Any,
    rows: Iterable[Mapping[str, Any]],
    x: str,
    *,
    y: str = "mse",
    se: str | None = "mse_se",
    methods: Sequence[str] = tuple(METHOD_STYLES),
) -> None:
    """Plot ``y`` against ``x`` for every method (log-log), with a ±2 SE band if ``se``."""
    rows = list(rows)
    for method in methods:
        pts = sorted(
            (float(r[x]), float(r[y]), float(r[se]) if se else 0.0)
            for r in rows
            if r["method"] == method and math.isfinite(float(r[y]))
        )
        if not pts:
            continue
        xs = [p[0] for p in pts]
        ys = [p[1] for p in pts]
        style = METHOD_STYLES[method]
        ax.plot(xs, ys, markersize=4, linewidth=1.4, **style)
        if se:
            lo = [max(p[1] - 2 * p[2], p[1] * 1e-3) for p in pts]
            hi = [p[1] + 2 * p[2] for p in pts]
            ax.fill_between(xs, lo, hi, color=style["color"], alpha=0.15, linewidth=0)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.grid(True, which="major", alpha=0.3)
