"""Model specs: what PD compatibility needs to know about a model, from config.json, HF cache or presets."""

from pdctl.models.presets import PRESETS, find_preset
from pdctl.models.resolve import resolve_model_spec
from pdctl.models.spec import ModelSpec

__all__ = ["PRESETS", "ModelSpec", "find_preset", "resolve_model_spec"]
