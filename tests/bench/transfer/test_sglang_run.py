"""Which interpreter bench-transfer --stack sglang asks for SGLang's stack (pure: no SGLang is started)."""

from __future__ import annotations

from pdctl.bench.transfer.sglang_run import named_python
from tests.support.topo_factory import make


def test_only_a_named_engine_python_is_used():
    assert named_python(make()[0]) is None  # the bare default: look for SGLang's side environment
    assert named_python(make(engine={"python": "/opt/sglang/bin/python"})[0]) == "/opt/sglang/bin/python"
