"""`pdctl diagnose`: from a run's logs to the cause and the fix.

signature.py (what a signature is), kb_sglang.py / kb_transfer.py / kb_platform.py (the knowledge base, as
data), match.py (pure: the first failure of one process's lines), explain.py (pure: ordering failures across
processes, root cause first), collect.py (reading every process's log and state through its executor, as
`pdctl logs` and `pdctl status` do).
"""

from __future__ import annotations

from pdctl.diagnose import kb_platform, kb_sglang, kb_transfer
from pdctl.diagnose.signature import Signature

CATALOGUE: tuple[Signature, ...] = (*kb_sglang.SIGNATURES, *kb_transfer.SIGNATURES, *kb_platform.SIGNATURES)
