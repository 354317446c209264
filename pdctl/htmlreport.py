"""What every `--report PATH` of pdctl shares: one self-contained HTML file with its plots inlined as PNG.

Why one file with no external assets: a report is attached to an issue or a PR and must open anywhere. The
commands build their own HTML and figures (pdctl.parity.report, pdctl.bench.serve.report); this module turns a
matplotlib figure into PNG bytes (Agg backend, imported lazily: no display on servers) and writes the file,
a bad path being bad input (exit 2).
"""

from __future__ import annotations

import base64
import io
from pathlib import Path
from typing import Any

from pdctl.errors import UserError


def pyplot() -> Any:
    """matplotlib.pyplot on the Agg backend."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def figure_png_base64(fig: Any, dpi: int = 90) -> str:
    """FIG as a base64 PNG (for `<img src="data:image/png;base64,...">`); the figure is closed."""
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=dpi)
    pyplot().close(fig)
    return base64.b64encode(buf.getvalue()).decode("ascii")


def write_report(html: str, path: str | Path) -> Path:
    """Write HTML to PATH; an unwritable path is a UserError naming --report."""
    target = Path(path)
    try:
        target.write_text(html, encoding="utf-8")
    except OSError as exc:
        raise UserError(f"cannot write --report {target}: {exc.strerror or exc}") from exc
    return target
