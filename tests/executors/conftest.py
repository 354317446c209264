"""Executor tests run in a temporary directory (tests/support/workdir.py); the Kubernetes e2e test reads the
pods' commands with SGLang's own parser (the oracle)."""

from tests.support.sglang_env import oracle
from tests.support.workdir import in_tmp_dir

__all__ = ["in_tmp_dir", "oracle"]
