"""Headless Chromium for tests that look at a page as a person would: its DOM, and a screenshot that must not
be blank. The `chromium` fixture (tests/conftest.py) skips before anything is launched when Chromium is missing;
in CI it is installed (scripts/system-deps.sh) and a skip fails the run."""

from __future__ import annotations

import shutil
import subprocess
import tempfile
from pathlib import Path

CANDIDATES = ("chromium", "chromium-browser", "google-chrome")
FLAGS = ("--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync")


def find_chromium() -> str | None:
    """The path of a Chromium binary on PATH (or /usr/bin), or None."""
    for name in CANDIDATES:
        path = shutil.which(name) or (f"/usr/bin/{name}" if Path(f"/usr/bin/{name}").exists() else None)
        if path:
            return path
    return None


class Chromium:
    """One headless Chromium binary; each call runs a fresh browser with its own throwaway profile."""

    def __init__(self, binary: str) -> None:
        self.binary = binary

    def _run(self, *args: str, timeout: float = 120) -> subprocess.CompletedProcess:
        with tempfile.TemporaryDirectory(prefix="pdctl-chromium-") as profile:
            return subprocess.run([self.binary, *FLAGS, f"--user-data-dir={profile}", *args], check=False,
                                  capture_output=True, text=True, timeout=timeout, start_new_session=True)

    def dump_dom(self, page: Path) -> str:
        """The page's DOM after load (scripts run)."""
        done = self._run("--dump-dom", page.resolve().as_uri())
        assert done.stdout.strip(), f"chromium printed no DOM: {done.stderr[-2000:]}"
        return done.stdout

    def screenshot(self, page: Path, out: Path, size: str = "1200,900") -> Path:
        """A PNG screenshot of the page at SIZE (width,height)."""
        done = self._run(f"--screenshot={out}", f"--window-size={size}", page.resolve().as_uri())
        assert out.exists(), f"chromium wrote no screenshot: {done.stderr[-2000:]}"
        return out

    @staticmethod
    def assert_not_blank(png: Path, min_width: int = 1100, min_height: int = 800) -> None:
        """The screenshot has the asked size, many distinct colours and a visible share of non-white pixels."""
        import numpy as np
        from matplotlib.image import imread

        pixels = imread(str(png))
        assert pixels.shape[0] >= min_height and pixels.shape[1] >= min_width, pixels.shape
        flat = (pixels[..., :3] * 255).astype("uint8").reshape(-1, 3)
        assert len(np.unique(flat, axis=0)) > 50, "screenshot has almost no distinct colours (blank page?)"
        assert (flat.min(axis=1) < 200).mean() > 0.01, "screenshot is (almost) all white"
