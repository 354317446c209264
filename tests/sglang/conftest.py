"""The SGLang oracle worker for this package's differential tests: one per module, always closed."""

from tests.support.sglang_env import oracle

__all__ = ["oracle"]
