"""The stages at which SGLang fails when a rule is broken: every compat rule names one (COMPAT.md).

The stage says how expensive the mistake is without pdctl: a failure at argument parsing costs a restart; one
at the first transfer costs a whole multi-node launch and shows as a hung request; silent corruption costs
wrong answers that nobody notices.
"""

from __future__ import annotations

STAGES: dict[str, str] = {
    "argument parsing": "SGLang exits while parsing and resolving its command line (argparse, ServerArgs hooks)",
    "model load": "server startup fails: weights, KV pools, attention backend, GPUs, ports",
    "handshake": "the decode server refuses the prefill server's info on first contact (bootstrap)",
    "registration": "a decode rank's KV buffer registration with the prefill fails (transfer backend setup)",
    "first transfer": "the first request's KV transfer fails: an error or a hang, after a full launch",
    "silent corruption": "nothing fails: decode computes on wrong KV and answers are wrong",
    "not rendered": "SGLang runs, but not what the topology says (pdctl cannot render the setting)",
}

ORDER = tuple(STAGES)


def check_stage(stage: str) -> str:
    """STAGE if it is one of STAGES (raises ValueError on a typo in a rule table)."""
    if stage not in STAGES:
        raise ValueError(f"unknown stage {stage!r}; expected one of: {', '.join(STAGES)}")
    return stage
