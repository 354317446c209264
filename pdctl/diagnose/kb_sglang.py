"""SGLang's own words on the PD path (0.5.23 source, quoted; releases read off the wheels).

The release ranges come from grepping each released wheel (`pip download --no-deps sglang==X`, X in 0.4.10,
0.5.1, 0.5.2, 0.5.3, 0.5.5, 0.5.6, 0.5.7, 0.5.9, 0.5.10, 0.5.12 ... 0.5.15, 0.5.20, 0.5.23) for the message:
`first` is the first release read that prints it, `fixed` the first that no longer does.
"""

from __future__ import annotations

from pdctl.diagnose.signature import Signature, words_pattern
from pdctl.sglang.messages import (
    HYBRID_HETERO_TP_CHECK_SINCE,
    KV_DTYPE_CHECK_SINCE,
    PAGE_SIZE_CHECK_SINCE,
    kv_dtype_mismatch,
    page_size_mismatch,
)

GH = "https://github.com/sgl-project/sglang"
CONN = "sglang/srt/disaggregation/common/conn.py"
SERVER = "SGLang server"
PD = "SGLang PD transfer"

SIGNATURES = (
    # decode: prefill never said the KV is written (a stopped, dead or wedged prefill; or a transfer that hangs)
    Signature(
        "sglang-waiting-timeout", PD,
        r"timed out after [\d.]+s in KVPoll\.WaitingForInput|fail to receive KV Cache transfer done signal",
        "decode gave up on a request whose KV prefill never finished sending within "
        "SGLANG_DISAGGREGATION_WAITING_TIMEOUT (300 s by default): prefill is stopped, dead or stuck",
        "diagnose the prefill named before this (its failure is the cause); only when prefill is merely slow "
        "raise SGLANG_DISAGGREGATION_WAITING_TIMEOUT (engine.env)",
        CONN + " (CommonKVReceiver._check_waiting_timeout)", f"{GH}/issues/11648", blames="prefill"),
    # prefill: decode never sent the KV indices of the room
    Signature(
        "sglang-bootstrap-timeout", PD,
        r"timed out after [\d.]+s in KVPoll\.Bootstrapping|Some requests timed out when bootstrapping",
        "prefill gave up on a request because decode never sent it the room's KV indices within "
        "SGLANG_DISAGGREGATION_BOOTSTRAP_TIMEOUT (300 s): decode is stopped, dead or out of KV pages",
        "diagnose the decode named before this; only when decode is merely slow raise "
        "SGLANG_DISAGGREGATION_BOOTSTRAP_TIMEOUT (engine.env)",
        CONN + " (CommonKVSender._check_bootstrap_timeout)", f"{GH}/issues/10110", blames="decode"),
    Signature(
        "sglang-prefill-gone", PD,
        r"Lost connection with prefill instance|is healthy before, but now it is down"
        r"|Failed to get kvcache from prefill instance, it might be dead",
        "decode lost its prefill mid-request: the prefill process died or its bootstrap server stopped answering",
        "find why the prefill died (its own failure, listed first); `pdctl restart prefill:N` brings it back",
        CONN + " (heartbeat checker, CommonKVReceiver)", f"{GH}/issues/10560", first="0.5.3", blames="prefill"),
    Signature(
        "sglang-aborted-by-abortreq", PD, r"KVTransferError\(bootstrap_room=\d+\): Aborted by AbortReq",
        "the request was aborted (the client or the router gave up on it, e.g. a router circuit breaker that "
        "dispatched only to decode): the transfer is the victim, not the cause",
        "look at the router's log and the client's timeouts before the transfer; see sglang-router breaker",
        CONN + " (abort)", f"{GH}/issues/31206", blames="worker"),
    Signature(
        "sglang-kv-transfer-error", PD,
        r"(Decode|Prefill) transfer failed for request.*KVTransferError|KVTransferError\(bootstrap_room=",
        "SGLang's KV transfer of a request failed (the reason follows KVTransferError in the line)",
        "read the reason in the line; with 'unknown reason from another rank' look at the other TP ranks' and the "
        "peer role's logs (diagnose lists them); `pdctl bench-transfer` exercises the path alone",
        "sglang/srt/disaggregation/decode.py, prefill.py (KVTransferError)", f"{GH}/issues/30609"),
    Signature(
        "sglang-hetero-tp-hybrid", PD, r"does NOT support PD different TP sizes",
        "SGLang's PD transfer cannot reslice this model's state (non-MLA hybrid/SWA) between different prefill "
        "and decode attention TP sizes",
        "give prefill and decode the same TP (topology prefill.tp = decode.tp); `pdctl check-compat` rejects it "
        "before launch", "sglang/srt/disaggregation/{nixl,mooncake}/conn.py (maybe_send_extra)",
        "https://github.com/llm-d/llm-d/issues/2433", first=HYBRID_HETERO_TP_CHECK_SINCE),
    # decode, at its first request to a prefill (CommonKVReceiver.try_ensure_parallel_info): the scheduler raises
    Signature(
        "sglang-page-size-mismatch", PD, words_pattern(page_size_mismatch, 2),
        "prefill and decode page the KV cache differently (--page-size); decode refuses the pair at its first "
        "request to that prefill",
        "set one page_size for both roles (server.page_size, no per-role override); `pdctl check-compat` rejects "
        "it before launch (rule page-size-match)", CONN + " (try_ensure_parallel_info)",
        first=PAGE_SIZE_CHECK_SINCE),
    Signature(
        "sglang-kv-dtype-mismatch", PD, words_pattern(kv_dtype_mismatch, 2),
        "prefill and decode were given different --kv-cache-dtype strings (auto and bf16 count as different); "
        "decode refuses the pair at its first request to that prefill",
        "set one kv_cache_dtype for both roles (server.kv_cache_dtype), spelled the same; `pdctl check-compat` "
        "rejects it before launch (rule kv-dtype-match)", CONN + " (try_ensure_parallel_info)",
        first=KV_DTYPE_CHECK_SINCE),
    Signature(
        "sglang-nixl-hetero-tp-host", PD, r"NIXL heterogeneous-TP direct-to-host KV transfer is not",
        "NIXL was asked to write KV between different prefill/decode TP sizes into host memory (DRAM), which "
        "SGLang refuses (NotImplementedError)",
        "use the same TP on both roles, or keep the KV pool in GPU memory (VRAM); on host-memory stacks use "
        "transfer.backend mooncake", "sglang/srt/disaggregation/nixl/conn.py (NixlKVManager, heterogeneous TP)",
        first="0.5.15"),
    # the scheduler's catch-all (managers/scheduler.py, run_scheduler_process): it logs the traceback and sends
    # SIGQUIT to the server, which kills its process tree; listed after every specific SGLang signature
    Signature(
        "sglang-scheduler-exception", SERVER, r"Scheduler hit an exception: Traceback",
        "SGLang's scheduler raised an exception it does not handle, and SGLang ended the whole server (SIGQUIT "
        "to its parent); the exception is the traceback's last line, shown with the finding",
        "read the exception (`pdctl logs ROLE-N`); a flag or model it names is the fix; else it is SGLang's own "
        "failure: report it with the traceback and the release, and `pdctl restart ROLE:N` meanwhile",
        "sglang/srt/managers/scheduler.py (run_scheduler_process)", catch_all=True),
    Signature(
        "sglang-pool-leak", SERVER, r"memory leak detected!",
        "SGLang's idle check found KV or request-slot pages neither free nor held by a request: a request's "
        "pages were not given back (often after a failed or aborted PD transfer)",
        "note the requests that failed before it (diagnose lists them); restart the role (`pdctl restart "
        "ROLE:N`); report with the log to SGLang",
        "sglang/srt/managers/scheduler_components/invariant_checker.py (check_memory)", f"{GH}/pull/31800"),
    Signature(
        "sglang-no-space-one-request", SERVER, r"No space left for only one request",
        "the KV pool could not hold even one running request after retracting all others",
        "raise --mem-fraction-static or --max-total-tokens, lower --context-length, or add decode TP",
        "sglang/srt/managers/schedule_batch.py (retract_decode)", fixed="0.5.7"),
    Signature(
        "sglang-oom-after-retract", SERVER,
        r"Out of memory even after retracting all other requests|Decode out of memory\. Try to lower your batch size",
        "the decode KV pool is too small for the requests it holds (one request's KV alone does not fit)",
        "raise --mem-fraction-static or --max-total-tokens on decode, lower --context-length or max_new_tokens",
        "sglang/srt/managers/schedule_batch.py, sglang/srt/mem_cache/allocation.py"),
    Signature(
        "sglang-retract", SERVER, r"KV cache pool is full\. Retract requests",
        "decode ran out of KV pages and retracted requests (they are recomputed): throughput drops, no error",
        "raise decode's --mem-fraction-static / --max-total-tokens or lower --max-running-requests",
        "sglang/srt/managers/scheduler.py (update_running_batch)", severity="warning"),
    Signature(
        "sglang-not-enough-memory", SERVER,
        r"Not enough memory\. Please try to increase --mem-fraction-static|Loaded weights leave no GPU memory for the KV",
        "the weights leave no room for a KV pool under --mem-fraction-static",
        "raise --mem-fraction-static, add TP, or use a smaller model / quantization",
        "sglang/srt/model_executor/pool_configurator.py, mem_cache/kv_cache_configurator.py",
        f"{GH}/issues/7691"),
    Signature(
        "sglang-port-in-use", SERVER, r"\w+ at \d+ is not available|Port is already in use\.",
        "a port SGLang needs (HTTP, bootstrap, NCCL, scheduler) is taken by another process",
        "free the port (`ss -ltnp`), `pdctl down` a previous run, or give the role other ports in the topology",
        "sglang/srt/utils/network.py (wait_port_available), sglang/srt/server_args.py"),
    Signature(
        "sglang-bad-flag", SERVER,
        r"(sglang serve|launch_server\.py): error: (unrecognized arguments|argument --|the following arguments)",
        "SGLang's argument parser refused the command line: a misspelled flag, or a value the flag does not take",
        "fix the flag in the topology's server.args (the line names it); `pdctl check-compat` parses the "
        "commands with SGLang's own parser before launch",
        "sglang/srt/server_args.py (prepare_server_args: argparse, prog \"sglang serve\" in 0.5.23)"),
    Signature(
        "sglang-bad-model-path", SERVER,
        r"is not a local folder and is not a valid model identifier|HFValidationError|Repo id must be in the form"
        r"|Can't load the configuration of",
        "the model path is neither a local directory with a config.json nor a Hugging Face model id",
        "fix model.path in the topology (it must exist on every node); `pdctl preflight` checks it",
        "transformers / huggingface_hub (AutoConfig.from_pretrained)"),
)

