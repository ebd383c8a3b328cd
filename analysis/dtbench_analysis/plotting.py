"""Matplotlib on the Agg backend (no display needed) and figure output as PNG or SVG.

Import pyplot from here (``from .plotting import plt``) so the backend is set before pyplot is
first imported. Figures are written atomically (see outputs.py) or returned as PNG bytes for the
HTML report.
"""

from __future__ import annotations

import base64
import io

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from .outputs import write_bytes  # noqa: E402

__all__ = ["plt", "png_bytes", "save_png", "save", "data_uri", "INCOMPLETE_NOTE",
           "legend_below"]

DPI = 110
#: appended to a title or legend entry of an incomplete run
INCOMPLETE_NOTE = " [INCOMPLETE]"


def legend_below(fig, axes, ncol: int = 3, fontsize: float = 7):
    """One legend for ``axes`` (their labelled artists, repeated labels once) under the whole
    figure, outside every axes, so it never covers data. Call it after ``fig.tight_layout()``:
    the legend hangs below the figure's bottom edge and the saved image (bbox_inches="tight")
    grows to hold it. Returns the legend, or None when nothing is labelled."""
    seen = {}
    for ax in axes:
        for handle, text in zip(*ax.get_legend_handles_labels()):
            seen.setdefault(text, handle)
    if not seen:
        return None
    return fig.legend(list(seen.values()), list(seen), loc="upper center",
                      bbox_to_anchor=(0.5, 0.0), ncol=max(1, min(ncol, len(seen))),
                      fontsize=fontsize, frameon=False)


def png_bytes(fig) -> bytes:
    """Render ``fig`` to PNG and close it."""
    buf = io.BytesIO()
    try:
        fig.savefig(buf, format="png", dpi=DPI, bbox_inches="tight")
    finally:
        plt.close(fig)
    return buf.getvalue()


def save_png(fig, path: str) -> None:
    """Write ``fig`` as a PNG file at ``path`` (atomically) and close it."""
    write_bytes(path, png_bytes(fig))


def figure_bytes(fig, fmt: str) -> bytes:
    """Render ``fig`` as ``png`` or ``svg`` and close it."""
    buf = io.BytesIO()
    try:
        fig.savefig(buf, format=fmt, dpi=DPI, bbox_inches="tight",
                    **({"metadata": {"Date": None}} if fmt == "svg" else {}))
    finally:
        plt.close(fig)
    return buf.getvalue()


def save(fig, path: str) -> None:
    """Write ``fig`` to ``path`` as SVG when the name ends in .svg, else PNG (atomically)."""
    fmt = "svg" if path.lower().endswith(".svg") else "png"
    write_bytes(path, figure_bytes(fig, fmt))


def data_uri(png: bytes) -> str:
    """``data:image/png;base64,...`` for an <img src> in a self-contained HTML page."""
    return "data:image/png;base64," + base64.b64encode(png).decode("ascii")
