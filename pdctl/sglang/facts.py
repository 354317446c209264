"""Behaviour that changed between SGLang releases, with the release that changed it (version-gated rules).

Each fact was read off the released wheels (pip download sglang==X --no-deps; grep the disaggregation code),
not taken from changelogs; the comment says what to grep. Flag spellings are not here: those come from the
flag tables (a flag exists in a release iff its table has it).
"""

from __future__ import annotations

# Head-sliced transfer of sliding-window (SWA) KV with different attention TP sizes: `_get_mha_head_slice_blocks`
# in common/conn.py. Before it, mooncake/nixl `maybe_send_extra` raised "PD Disaggregation does NOT support PD
# different TP sizes for non-MLA SWA hybrid models yet." at the first transfer.
SWA_HETERO_TP_SINCE = "0.5.22"

# Replicated GQA heads (decode attention TP > KV heads, sglang#23746): the head map needs
# `dst_replication = max(1, dst_attn_tp_size // total_kv_heads)`; without it decode ranks read the wrong head
# (silent corruption). Present in mooncake/conn.py and staging_buffer.py from 0.5.16, nixl/conn.py from 0.5.17.
GQA_REPLICATED_HEADS_SINCE = {"mooncake": "0.5.16", "nixl": "0.5.17"}

# Decode with speculative decoding against a prefill without it (sglang PR #17212): the draft-model KV case in
# get_mha_kv_ptrs_with_pp ("Decode has draft model KV while Prefill ..."), first in 0.5.8; SGLang 0.5.3-0.5.7
# wrote decode's V cache at the wrong entries and answered wrongly.
SPEC_DECODE_ONLY_SINCE = "0.5.8"

# No version gate for the NIXL manager's prepared dlists of unequal TP (`_init_hetero_tp_prep_handle`, num_groups
# = 0 when decode TP > prefill TP > KV heads): 0.5.22+ asserts, 0.5.17-0.5.21 build an empty source dlist; both
# fail at registration (compat rule nixl-tp-over-heads).

# The PD timeouts' environment variables are read with EnvInt / EnvFloat (environ.py) since 0.5.8: a value they
# cannot parse gives a warning and the default. 0.5.0-0.5.7 read them in mooncake/conn.py with
# get_int_env_var (the default, silently) and float(os.getenv(...)) for the heartbeat interval (ValueError).
# Same names and defaults in every release from 0.5.0.
ENV_WARNS_SINCE = "0.5.8"

# The PD transfer of per-request state components (hybrid linear attention's mamba state, DSA's indexer keys),
# read off the wheels' disaggregation/{nixl,mooncake}/conn.py:
# - NIXL before 0.5.9 has no state transfer at all: NixlKVSender.send() takes `state_indices` and drops them
#   (no maybe_send_extra, no state registration), so decode runs on state it never received. 0.5.9 added
#   maybe_send_extra (mamba with equal attention TP; "nsa"/"swa" pages).
# - Mamba state with unequal attention TP: Mooncake slices it per rank from 0.5.9 (`_send_mamba_state_slice`,
#   sglang PR #16056; before, the generic "non-MLA hybrid" refusal), NIXL from 0.5.11 (sglang PR #22240; 0.5.9
#   and 0.5.10 refuse it at the first transfer).
STATE_TRANSFER_NIXL_SINCE = "0.5.9"
MAMBA_HETERO_TP_SINCE = {"mooncake": "0.5.9", "nixl": "0.5.11"}
MAMBA_HETERO_TP_PR = {"mooncake": "https://github.com/sgl-project/sglang/pull/16056",
                      "nixl": "https://github.com/sgl-project/sglang/pull/22240"}

# NIXL and --disaggregation-ib-device (sglang PR #28737, read off the wheels): before 0.5.23 nixl/conn.py never
# reads kv_args.ib_device — UCX picks devices from UCX_NET_DEVICES alone (unset: every device); from 0.5.23 it
# maps the flag's HCAs to UCX's device_list per GPU, unless UCX_NET_DEVICES is set (then the flag is ignored,
# with a warning).
NIXL_IB_DEVICE_SINCE = "0.5.23"
NIXL_IB_DEVICE_PR = "https://github.com/sgl-project/sglang/pull/28737"

# DSA models (SGLang's is_deepseek_dsa: DeepseekV32ForCausalLM, DeepseekV3ForCausalLM with index_topk, GLM-5,
# ...) on CUDA: SGLang overrides --page-size with 64 in every release read (0.5.5-0.5.23: "Setting page size to 64
# for DeepSeek NSA/DSA."), with 64 x config.index_kpool from 0.5.22 (model_overrides/deepseek_v2.py:171-173).
# pdctl knows these by config.json model_type (it keeps no architectures): deepseek_v32, and deepseek_v3 with
# index_topk (the spec's DSA fields).
DSA_PAGE = 64
DSA_PAGE_KPOOL_SINCE = "0.5.22"
DSA_MODEL_TYPES = frozenset({"deepseek_v32", "deepseek_v3"})


# SGLang's /health (and /health_generate) runs a one-token generate through the scheduler and answers 200 once the
# detokenizer says anything, polling once a second, or 503 after SGLANG_HEALTH_CHECK_TIMEOUT seconds (20 by
# default; entrypoints/http_server.py, `HEALTH_CHECK_TIMEOUT` and `health_generate`, 0.5.23): a busy or loaded
# server answers late but answers. A probe that gives up sooner calls a slow server silent.
HEALTH_CHECK_TIMEOUT_ENV, HEALTH_CHECK_TIMEOUT_S = "SGLANG_HEALTH_CHECK_TIMEOUT", 20


def health_answers_within(env: dict[str, str]) -> float:
    """Seconds within which a running SGLang server with ENV answers GET /health (200 or 503): its own health
    check's timeout, one poll interval and a margin for the HTTP round trip on a loaded machine."""
    try:
        timeout = float(env.get(HEALTH_CHECK_TIMEOUT_ENV, HEALTH_CHECK_TIMEOUT_S))
    except ValueError:
        timeout = HEALTH_CHECK_TIMEOUT_S
    return timeout + 5.0
