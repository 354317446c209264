"""`pdctl suggest` in tests: one AIConfigurator cache for the whole run, and the documented reference inputs.

AIConfigurator's sweeps cost tens of CPU seconds each (docs/suggest.md); their results depend only on their
inputs and AIConfigurator's version, which key the cache. Tests share one cache directory: $PDCTL_SUGGEST_CACHE
when set (CI can keep it between runs), else the checkout's .pdctl/cache/suggest (kept between `make test`
runs). tests/suggest/test_aic.py recomputes from AIConfigurator itself each run and holds the cache to it.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from pdctl.suggest.cache import ENV, Cache
from tests.support.paths import REPO

# the run docs/suggest.md shows: gpt-oss-120b, ISL 8192 / OSL 1024, TTFT 2 s, ITL 30 ms, 8 GPUs
REFERENCE = {"model": "gpt-oss-120b", "gpus": 8, "isl": 8192, "osl": 1024, "ttft_ms": 2000.0, "itl_ms": 30.0}


def cache_dir() -> Path:
    return Path(os.environ.get(ENV) or REPO / ".pdctl" / "cache" / "suggest")


def store() -> Cache:
    return Cache(cache_dir())


def cli_env() -> dict[str, str]:
    """The environment of a `pdctl suggest` subprocess that shares the tests' cache."""
    return {**os.environ, ENV: str(cache_dir())}


def request(**changes: Any) -> Any:
    """A SuggestRequest of the reference inputs on gb300, with CHANGES."""
    from pdctl.suggest.request import SuggestRequest

    return SuggestRequest(**{"system": "gb300", **REFERENCE, **changes})
