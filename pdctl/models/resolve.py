"""Resolve a topology's `model:` section to a ModelSpec, in the order TOPOLOGY.md fixes.

Order: `model.config` -> `<path>/config.json` when path is a directory -> the Hugging Face cache (read offline;
never a download) -> `model.preset` -> a preset named like the last component of `path`. pdctl must work on a
laptop that never saw the weights, so presets are the fallback; an explicit config wins because it is what
SGLang will load. When nothing resolves, the error lists every place that was tried.
"""

from __future__ import annotations

import difflib
import os
from pathlib import Path
from typing import Any

from pdctl.errors import UserError
from pdctl.models.hf_config import read_config_file, spec_from_config
from pdctl.models.presets import ALIASES, PRESETS, find_preset
from pdctl.models.spec import ModelSpec


def _get(model_cfg: Any, key: str) -> Any:
    if isinstance(model_cfg, dict):
        return model_cfg.get(key)
    return getattr(model_cfg, key, None)


def hf_hub_dir() -> Path:
    """The HF hub cache directory, as huggingface_hub computes it (HF_HUB_CACHE, HF_HOME/hub, ~/.cache/...)."""
    for var in ("HF_HUB_CACHE", "HUGGINGFACE_HUB_CACHE"):
        if os.environ.get(var):
            return Path(os.environ[var]).expanduser()
    if os.environ.get("HF_HOME"):
        return Path(os.environ["HF_HOME"]).expanduser() / "hub"
    xdg = os.environ.get("XDG_CACHE_HOME")
    base = Path(xdg).expanduser() if xdg else Path.home() / ".cache"
    return base / "huggingface" / "hub"


def hf_cached_config(repo_id: str, revision: str | None) -> tuple[Path | None, str]:
    """Find `config.json` of `repo_id` in the HF cache without network; returns (path or None, what was tried)."""
    repo_dir = hf_hub_dir() / ("models--" + repo_id.replace("/", "--"))
    snapshots = repo_dir / "snapshots"
    candidates: list[Path] = []
    ref = repo_dir / "refs" / (revision or "main")  # a branch or tag name -> the commit of its snapshot
    if ref.is_file():
        candidates.append(snapshots / ref.read_text(encoding="utf-8").strip())
    if revision:
        candidates.append(snapshots / revision)  # a commit hash names its snapshot directly
    elif snapshots.is_dir():
        candidates.extend(sorted(p for p in snapshots.iterdir() if p.is_dir()))
    for snap in candidates:
        cfg = snap / "config.json"
        if cfg.is_file():
            return cfg, str(cfg)
    where = f"{snapshots}/{revision or '*'}/config.json"
    return None, f"HF cache {where}"


def resolve_model_spec(model_cfg: Any, *, engine_kind: str = "sglang") -> ModelSpec:
    """The ModelSpec for a topology's `model:` section (object with path/revision/config/preset, or a dict).

    Raises UserError naming everything tried when nothing resolves, or when an explicitly given config or
    preset is unusable (an explicit choice that fails must not silently fall through to a guess).
    """
    path = _get(model_cfg, "path")
    revision = _get(model_cfg, "revision")
    config = _get(model_cfg, "config")
    preset = _get(model_cfg, "preset")
    name = _display_name(path, preset)
    tried: list[str] = []

    if config:
        cfg_path = Path(str(config)).expanduser()
        if not cfg_path.is_file():
            raise UserError(f"model.config: {cfg_path} does not exist (or is not a file)")
        return spec_from_config(read_config_file(cfg_path), name=name, source=str(cfg_path.resolve()))

    if path:
        p = Path(str(path)).expanduser()
        if p.is_dir():
            cfg_path = p / "config.json"
            if cfg_path.is_file():
                return spec_from_config(read_config_file(cfg_path), name=name, source=str(cfg_path.resolve()))
            tried.append(f"{cfg_path} (directory has no config.json)")
        else:
            tried.append(f"{p}/config.json (not a local directory)")
        if _looks_like_repo_id(str(path)):
            found, what = hf_cached_config(str(path), revision)
            if found is not None:
                return spec_from_config(read_config_file(found), name=name, source=str(found))
            tried.append(what)

    if preset:
        spec = find_preset(str(preset))
        if spec is None:
            raise UserError(f"model.preset: unknown preset {preset!r}{_did_you_mean(str(preset))}")
        return spec
    tried.append("model.preset (not set)")

    if path:
        last = str(path).rstrip("/").split("/")[-1]
        spec = find_preset(last)
        if spec is not None:
            return spec
        tried.append(f"preset named {last.lower()!r}{_did_you_mean(last)}")

    if not path and not preset:
        raise UserError("model: set at least one of path, config or preset")
    fix = (f"create the reference engine's checkpoint with `pdctl reference init-checkpoint {path}`, or set "
           "model.preset: reference-tiny" if engine_kind == "reference" and path else
           "set model.config to a config.json, download the model, or set model.preset"
           f" (one of {', '.join(sorted(PRESETS))})")
    raise UserError(
        f"cannot resolve the model spec of {name!r} (engine {engine_kind}); tried: " + "; ".join(tried)
        + f". Fix: {fix}"
    )


def _looks_like_repo_id(path: str) -> bool:
    parts = path.split("/")
    return len(parts) == 2 and all(parts) and not path.startswith((".", "~"))


def _display_name(path: Any, preset: Any) -> str:
    if path:
        return str(path).rstrip("/").split("/")[-1] or str(path)
    return str(preset or "model")


def _did_you_mean(name: str) -> str:
    close = difflib.get_close_matches(name.lower(), list(PRESETS) + list(ALIASES), n=1, cutoff=0.6)
    return f" (did you mean {close[0]!r}?)" if close else ""
