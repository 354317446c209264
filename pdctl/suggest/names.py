"""pdctl's names for models and GPUs, next to AIConfigurator's, and which AIConfigurator is installed.

Why a table: a topology says `gpu: gb300` and `model: {path: openai/gpt-oss-120b, preset: gpt-oss-120b}`;
AIConfigurator says `gb300` / `h100_sxm` and `openai/gpt-oss-120b`. `pdctl suggest` accepts pdctl's names (and
the Hugging Face ids of the same models) and refuses others with the list of choices (exit 2).
"""

from __future__ import annotations

from dataclasses import dataclass

from pdctl.models.presets import ALIASES

# pdctl GPU kind -> (AIConfigurator system, GPUs per node on its reference system, nominal per-GPU RDMA NIC GB/s)
# GB300 NVL72 trays carry 4 GPUs and a ConnectX-8 (800 Gb/s) per GPU; GB200 trays 4 GPUs and ConnectX-7
# (400 Gb/s); DGX B200 / H200 / H100: 8 GPUs and one ConnectX-7 400 Gb/s NIC per GPU. AIConfigurator's system
# files say the same GPUs per node (aiconfigurator_core/systems/*.yaml: node.num_gpus_per_node).
SYSTEMS: dict[str, tuple[str, int, float]] = {
    "gb300": ("gb300", 4, 100.0),
    "gb200": ("gb200", 4, 50.0),
    "b200": ("b200_sxm", 8, 50.0),
    "h200": ("h200_sxm", 8, 50.0),
    "h100": ("h100_sxm", 8, 50.0),
}


@dataclass(frozen=True)
class ModelName:
    """A model pdctl can suggest for: its preset (pdctl's KV shape) and AIConfigurator's id."""

    preset: str
    aic: str
    hf: str  # the path a written topology uses


MODELS: dict[str, ModelName] = {
    "gpt-oss-120b": ModelName("gpt-oss-120b", "openai/gpt-oss-120b", "openai/gpt-oss-120b"),
    "gpt-oss-20b": ModelName("gpt-oss-20b", "openai/gpt-oss-20b", "openai/gpt-oss-20b"),
    "llama-3.1-8b": ModelName("llama-3.1-8b", "meta-llama/Meta-Llama-3.1-8B", "meta-llama/Llama-3.1-8B-Instruct"),
    "deepseek-v3": ModelName("deepseek-v3", "deepseek-ai/DeepSeek-V3", "deepseek-ai/DeepSeek-V3"),
}


def find_model(name: str) -> ModelName | None:
    """MODELS entry for a preset name, an alias pdctl knows, or a Hugging Face id (case-insensitive)."""
    key = name.strip().lower()
    for model in MODELS.values():
        if key in (model.aic.lower(), model.hf.lower()):
            return model
    key = key.rsplit("/", 1)[-1]
    key = ALIASES.get(key, key)
    return MODELS.get(key)


def aic_version() -> str | None:
    """The installed AIConfigurator's version (None: the `suggest` extra is not installed); no import of it."""
    from importlib import metadata

    try:
        return metadata.version("aiconfigurator")
    except metadata.PackageNotFoundError:
        return None
