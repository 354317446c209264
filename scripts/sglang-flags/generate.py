"""Regenerate pdctl's SGLang flag tables (pdctl/sglang/flags/sglang-X.json) from the released wheels.

    make sglang-env                                   # the side venv with SGLang's CPU-importable deps
    .venv/bin/python scripts/sglang-flags/generate.py [VERSION ...]   # default: VERSIONS (0.5.0rc2 ... 0.5.23)

No GPU and no CUDA wheels: the side venv (.venv-sglang, or $PDCTL_SGLANG_PYTHON) already holds CPU torch and
SGLang's pure-Python needs for the release it was built with. For each release this script makes an overlay
directory (.pdctl/sglang-flags/<version>/) with `pip install --no-deps --target`: that release's wheel, the
versions of transformers / tokenizers / openai / xgrammar the wheel pins in its METADATA, the
huggingface-hub and tokenizers ranges that transformers asks for, and the few pure-Python modules older
releases import
(partial-json-parser, httpx, ...). Then it runs dump.py with PYTHONPATH=<overlay> in the side venv, so each
release's own `ServerArgs.add_cli_args` builds the parser that is dumped. A module still missing is installed
into the overlay by its import name and the dump retried (at most MAX_RETRIES times).
A pin the side venv already holds at a version the spec accepts is not installed again: the overlay is first on
PYTHONPATH, so the side venv's copy is the one imported either way. Installs go through scripts/pip-install.sh
(uv when $PDCTL_UV names it, as the Makefile does: each wheel unpacked once, the overlays' shared pins linked
from its cache) and OVERLAY_WORKERS releases are built at once (installs wait on the network and the disk;
the dumps are SGLang imports, CPU). docs/testing.md has the times on a fresh clone.
Measured on the 2-core dev machine (shared, warm pip cache, pip, one at a time): 4 min for the eight releases
0.5.16-0.5.23; the 28 releases from 0.5.0rc2 took ~45 min with a cold cache (most of it pip downloads).
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import zipfile
from concurrent.futures import ThreadPoolExecutor
from functools import cache
from pathlib import Path

from packaging.requirements import InvalidRequirement, Requirement

REPO = Path(__file__).resolve().parents[2]
OUT = REPO / "pdctl" / "sglang" / "flags"
CACHE = REPO / ".pdctl" / "sglang-flags"
# Every 0.5 release users run: each minor 0.5.0-0.5.23 (0.5.0 only exists on PyPI as release candidates: its
# last one), and the post-releases NVIDIA's srt-slurm recipes run in their containers (0.5.5.post2, 0.5.6.post2,
# 0.5.8.post1, 0.5.13.post1).
VERSIONS = ["0.5.0rc2", "0.5.1", "0.5.2", "0.5.3", "0.5.4", "0.5.5", "0.5.5.post2", "0.5.6", "0.5.6.post2", "0.5.7",
            "0.5.8", "0.5.8.post1", "0.5.9", "0.5.10", "0.5.11", "0.5.12", "0.5.13", "0.5.13.post1", "0.5.14",
            "0.5.15", "0.5.16", "0.5.17", "0.5.18", "0.5.19", "0.5.20", "0.5.21", "0.5.22", "0.5.23"]
PINNED_FROM_WHEEL = ("transformers", "tokenizers", "openai", "xgrammar")
EXTRAS = ("partial-json-parser", "httpx<1", "httpcore<2", "distro", "jiter", "sniffio")
# A missing module's import name -> what to install for it: a distribution of another name, or a version of
# the release's time (fastapi >= 0.116 imports opentelemetry and dropped what SGLang <= 0.5.x imports).
IMPORT_SPECS = {"opentelemetry": "opentelemetry-api", "fastapi": "fastapi==0.115.12", "starlette": "starlette==0.46.2"}
MAX_RETRIES = 16
COMPLETE = ".pdctl-complete"
OVERLAY_WORKERS = int(os.environ.get("PDCTL_OVERLAY_WORKERS", "3"))
PIP_INSTALL = REPO / "scripts" / "pip-install.sh"


def side_python() -> str:
    path = os.environ.get("PDCTL_SGLANG_PYTHON") or str(REPO / ".venv-sglang" / "bin" / "python")
    if not Path(path).exists():
        sys.exit(f"no SGLang side venv at {path}: run `make sglang-env` first")
    return path


def pip(python: str, target: Path, *specs: str) -> None:
    if specs:
        subprocess.run(["bash", str(PIP_INSTALL), python, "-q", "--no-deps", "--upgrade", "--target", str(target),
                        *specs], check=True, env={**os.environ, "PIP_DISABLE_PIP_VERSION_CHECK": "1"})


@cache
def side_versions(python: str) -> dict[str, str]:
    """The distributions the side venv PYTHON holds: normalized name -> version."""
    code = "import importlib.metadata as m, json; print(json.dumps({d.metadata['Name']: d.version for d in m.distributions()}))"
    import json

    done = subprocess.run([python, "-c", code], capture_output=True, text=True, check=True)
    return {re.sub(r"[-_.]+", "-", k).lower(): v for k, v in json.loads(done.stdout).items() if k}


def missing(python: str, specs: list[str]) -> list[str]:
    """SPECS less those the side venv already satisfies (the overlay would only shadow the same thing)."""
    have = side_versions(python)
    out = []
    for spec in specs:
        try:
            req = Requirement(spec)
        except InvalidRequirement:
            out.append(spec)
            continue
        got = have.get(re.sub(r"[-_.]+", "-", req.name).lower())
        if got is None or req.extras or not req.specifier.contains(got, prereleases=True):
            out.append(spec)
    return out


def requires(dist_info: Path | zipfile.Path) -> list[str]:
    """The unconditional Requires-Dist lines of a METADATA file."""
    text = dist_info.read_text(encoding="utf-8")
    return [line.split(":", 1)[1].strip() for line in text.splitlines()
            if line.startswith("Requires-Dist:") and "extra ==" not in line]


def metadata(target: Path, name: str) -> Path | None:
    norm = name.replace("-", "_").lower()
    for d in target.glob("*.dist-info"):
        if d.name.lower().startswith(norm + "-"):
            return d / "METADATA"
    return None


def spec_for(reqs: list[str], name: str) -> str | None:
    for req in reqs:
        base = re.split(r"[\s;<>=!~\[]", req, maxsplit=1)[0]
        if base.lower().replace("_", "-") == name:
            return req.split(";")[0].replace(" ", "")
    return None


def overlay(python: str, version: str) -> Path:
    """The overlay directory with VERSION's wheel and the pure-Python pins it needs to import."""
    target = CACHE / version
    stamp = target / ".pdctl-overlay"
    if stamp.exists():
        return target
    target.mkdir(parents=True, exist_ok=True)
    pip(python, target, f"sglang=={version}")
    reqs = requires(metadata(target, "sglang"))  # type: ignore[arg-type]
    pip(python, target, *missing(python, [s for s in (spec_for(reqs, n) for n in PINNED_FROM_WHEEL) if s] + [*EXTRAS]))
    tf = metadata(target, "transformers")
    tf_specs = [spec_for(requires(tf), n) for n in ("huggingface-hub", "tokenizers")] if tf else []
    pip(python, target, *missing(python, [s for s in tf_specs if s]))
    stamp.touch()
    return target


def dump(python: str, version: str, out: Path = OUT) -> None:
    """VERSION's table into OUT (pdctl/sglang/flags), installing modules the import still misses."""
    target = overlay(python, version)
    env = {**os.environ, "PYTHONPATH": str(target)}
    for _ in range(MAX_RETRIES):
        done = subprocess.run([python, str(Path(__file__).with_name("dump.py")), str(out)], env=env,
                              capture_output=True, text=True, check=False)
        if done.returncode == 0:
            print(done.stdout.strip().splitlines()[-1])
            (target / COMPLETE).touch()  # the release's parser imports from this overlay
            return
        missing = re.findall(r"No module named '([^']+)'", done.stderr)
        if not missing:
            sys.exit(f"SGLang {version}: dump failed:\n{done.stderr[-3000:]}")
        module = missing[-1].split(".")[0]
        print(f"SGLang {version}: installing {module} into the overlay")
        pip(python, target, IMPORT_SPECS.get(module, module.replace("_", "-")))
    sys.exit(f"SGLang {version}: still failing after {MAX_RETRIES} installs")


def main(args: list[str]) -> None:
    """generate.py [--overlays-only] [VERSION ...]: dump the tables, or only build the overlays (the
    differential tests run each release's own parser from its overlay: `make sglang-overlays`)."""
    py = side_python()
    only = "--overlays-only" in args
    versions = [a for a in args if a != "--overlays-only"] or VERSIONS

    def one(v: str) -> None:
        if only and (CACHE / v / COMPLETE).exists():
            print(f"SGLang {v}: overlay {CACHE / v} (built)")
        elif only:
            dump_env_check(py, v)
        else:
            dump(py, v)

    with ThreadPoolExecutor(max_workers=max(1, OVERLAY_WORKERS)) as pool:
        failed = [f.exception() for f in [pool.submit(one, v) for v in versions] if f.exception() is not None]
    if failed:
        sys.exit("\n".join(str(e) for e in failed))


def dump_env_check(python: str, version: str) -> None:
    """The overlay imports the release's parser (installing what it still misses, as `dump` does)."""
    dump(python, version, out=CACHE / version / ".table")


if __name__ == "__main__":
    main(sys.argv[1:])
