"""Log lines for every signature of the knowledge base: public reports' real lines (their link first), else the
line the released code prints, built from its format string (the source named), else pdctl's own status line.

Each entry: (signature id, where the line comes from, the line)."""

from __future__ import annotations

SGL = "https://github.com/sgl-project/sglang"

LINES: list[tuple[str, str, str]] = [
    ("sglang-waiting-timeout", f"{SGL}/issues/11648",
     ("[2025-10-15 11:03:35 DP6 TP6 EP6] Decode transfer failed for request rank=6 decode_req.req.rid='cd00baf7d2fc4dcf"
     "8535c3a25f0288a3' decode_req.req.bootstrap_room=8360203925601259718 with exception KVTransferError(bootstrap_room"
     "=8360203925601259718): Request 8360203925601259718 timed out after 600.0s in KVPoll.WaitingForInput")),
    ("sglang-waiting-timeout", f"{SGL}/issues/9926",
     ("[2025-08-31 07:32:08 TP6 EP6] Some requests fail to receive KV Cache transfer done signal after bootstrapping. "
     "If a greater mean TTFT is acceptable, you can 'export SGLANG_DISAGGREGATION_WAITING_TIMEOUT=600' (10 minutes) "
     "to relax the timeout condition. ")),
    ("sglang-bootstrap-timeout", f"{SGL}/issues/10110",
     ("Prefill bootstrap failed for request rank=2 req.rid='d3fd6575d3b24b598367fcbdf1bdd21a' req.bootstrap_room="
     "5975098084415727586 with exception KVTransferError(bootstrap_room=5975098084415727586): Request "
     "5975098084415727586 timed out after 300.0s in KVPoll.Bootstrapping")),
    ("sglang-prefill-gone", f"{SGL}/issues/10560 (the failure reason decode records)",
     ("[2025-09-17 16:23:13 TP0] Decode transfer failed for request rank=0 decode_req.req.rid='3ce8' decode_req.req."
     "bootstrap_room=1655955501905217457 with exception KVTransferError(bootstrap_room=1655955501905217457): Failed to "
     "get kvcache from prefill instance, it might be dead")),
    ("sglang-prefill-gone", "sglang 0.5.23 disaggregation/common/conn.py (record_failure f-string)",
     ("[2026-12-03 10:40:02 TP0] Lost connection with prefill instance (bootstrap_addr: 127.0.0.1:8998), affected "
     "rooms: [123]")),
    ("sglang-aborted-by-abortreq", f"{SGL}/issues/9266",
     ("[2025-08-31 07:26:45 TP0 EP0] Prefill bootstrap failed for request rank=0 req.rid='60d582b2010846a8b337cf8896311"
     "6e7' req.bootstrap_room=7561186998443553199 with exception KVTransferError(bootstrap_room=7561186998443553199): "
     "Aborted by AbortReq.")),
    ("sglang-kv-transfer-error", f"{SGL}/issues/10560",
     ("[2025-09-17 16:23:13 TP1] Decode transfer failed for request rank=1 decode_req.req.rid='3ce84ffb82764f45b028dd8e"
     "6c4beed1' decode_req.req.bootstrap_room=1655955501905217457 with exception KVTransferError(bootstrap_room="
     "1655955501905217457): Failed due to an unknown reason from another rank")),
    ("sglang-hetero-tp-hybrid", "https://github.com/llm-d/llm-d/issues/2433 (the 0.5.23 wording)",
     "RuntimeError: PD Disaggregation does NOT support PD different TP sizes for non-MLA SWA hybrid models yet."),
    ("sglang-page-size-mismatch", "sglang 0.5.23 on this machine's CPU: decode-0's log, decode page_size 32",
     ("RuntimeError: Page size mismatch: prefill server has page_size=16, but decode server has page_size=32. Both "
      "servers must use the same --page-size value.")),
    ("sglang-kv-dtype-mismatch", "sglang 0.5.23 disaggregation/common/conn.py (try_ensure_parallel_info)",
     ("RuntimeError: KV cache dtype mismatch: prefill server has kv_cache_dtype=auto, but decode server has "
      "kv_cache_dtype=bf16. Both servers must use the same --kv-cache-dtype value.")),
    ("sglang-nixl-hetero-tp-host", "sglang 0.5.23 disaggregation/nixl/conn.py (NotImplementedError)",
     "NotImplementedError: NIXL heterogeneous-TP direct-to-host KV transfer is not implemented safely yet"),
    ("sglang-pool-leak", "sglang 0.5.23 managers/scheduler_components/invariant_checker.py (_report_leak)",
     "ValueError: token_to_kv_pool_allocator memory leak detected! self.max_total_num_tokens=1000, available_size=900"),
    ("sglang-no-space-one-request", "sglang 0.5.5 managers/schedule_batch.py (retract_decode)",
     "ValueError: Failed to retract any request. No space left for only one request."),
    ("sglang-oom-after-retract", "sglang 0.5.23 mem_cache/allocation.py",
     "RuntimeError: Decode out of memory. Try to lower your batch size."),
    ("sglang-retract", "sglang 0.5.23 managers/scheduler.py",
     "[2026-12-03 10:40:02] KV cache pool is full. Retract requests. #retracted_reqs: 1, #new_tokens_gained: 64"),
    ("sglang-not-enough-memory", "sglang model_executor/pool_configurator.py (MemoryPoolConfig)",
     "RuntimeError: Not enough memory. Please try to increase --mem-fraction-static."),
    ("sglang-port-in-use", "sglang 0.5.23 utils/network.py (wait_port_available)",
     "ValueError: port at 30000 is not available"),
    ("sglang-bad-flag", "argparse (sglang.launch_server's parser)",
     "launch_server.py: error: unrecognized arguments: --mem-fracton-static 0.8"),
    ("sglang-bad-flag", "argparse (sglang.launch_server's parser)",
     "sglang serve: error: argument --mem-fraction-static: invalid float value: 'lots'"),
    ("sglang-bad-model-path", "transformers (AutoConfig.from_pretrained on a missing path)",
     ("OSError: /models/nope is not a local folder and is not a valid model identifier listed on "
     "'https://huggingface.co/models'")),
    ("nixl-vram-registration", "nixl_cu12 1.5.1 libplugin_UCX.so",
     ("E1203 10:40:02.000000 1234 ucx_backend.cpp:100] VRAM memory is detected as host by UCX. UCX is likely not "
     "configured with CUDA/ROCm support. VRAM registration cannot proceed.")),
    ("nixl-err-backend", "https://github.com/ai-dynamo/nixl/issues/177",
     "nixl._bindings.nixlBackendError: NIXL_ERR_BACKEND"),
    ("nixl-err-other", "nixl (nixl_status_t names)", "nixl._bindings.nixlNotFoundError: NIXL_ERR_NOT_FOUND"),
    ("ucx-error", "https://github.com/ai-dynamo/nixl/pull/2123 (UCX's error line)",
     "[1744331142.028115] [ccw-gpu-51:2802608:3]   ucp_device.c:248  UCX  ERROR invalid memh for md_index=7"),
    ("mooncake-transfer-timeout", "https://github.com/kvcache-ai/Mooncake/issues/1088",
     ("E1120 11:10:27.133715 203020 transfer_task.cpp:305] Failed to complete transfers after 60 seconds for batch "
     "2586731328")),
    ("mooncake-handshake", "https://github.com/kvcache-ai/Mooncake/issues/292",
     "E0423 16:34:48.929325 217299 tcp_transport.cpp:393] TcpTransport: ASIO exception: connect: Connection refused"),
    ("mooncake-register-memory", "https://github.com/kvcache-ai/Mooncake/issues/281",
     "E0421 17:40:01.000000 1234 rdma_context.cpp:137] Failed to register memory 0x7f0000000000: Bad address [14]"),
    ("router-breaker-open", f"{SGL}/issues/31206 (the router's transition line)",
     ("2026-07-14 10:00:00  WARN sglang_router_rs::core::circuit_breaker: Circuit breaker state transition: closed "
     "-> open")),
    ("router-no-prefill", f"{SGL}/issues/12355",
     ("2025-10-29 21:49:19 ERROR http_request{method=POST uri=/generate version=HTTP/1.1 request_id=\"gnt-T1Dk\"}: "
     "sglang_router_rs::routers::http::pd_router: src/routers/http/pd_router.rs:142: Failed to select PD pair error="
     "No available prefill workers (all circuits open or unhealthy)")),
    ("router-no-decode", "sglang_router_rs 0.3.2 (src/routers/http/pd_router.rs)",
     ("2026-12-03 10:40:02 ERROR sglang_router_rs::routers::http::pd_router: No decode workers available. Please "
     "check if decode servers are configured and healthy.")),
    ("nccl-watchdog", "https://github.com/sgl-project/sglang/issues/1693",
     ("  what():  [PG 3 Rank 5] Process group watchdog thread terminated with exception: [Rank 5] Watchdog caught "
     "collective operation timeout: WorkNCCL(SeqNum=9141, OpType=_ALLGATHER_BASE, NumelIn=19008, NumelOut=152064, "
     "Timeout(ms)=600000) ran for 600020 milliseconds before timing out.")),
    ("cuda-oom", "torch (CUDACachingAllocator)",
     "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity of 79.10 GiB"),
    ("address-in-use", "uvicorn (bind)",
     "ERROR:    [Errno 98] error while attempting to bind on address ('127.0.0.1', 30000): address already in use"),
    ("oom-killed", "pdctl (the executor's exit status)", "[pdctl] the process exited with code -9 (SIGKILL)"),
    ("killed-by-signal", "pdctl (the executor's exit status)", "[pdctl] the process exited with code -6 (SIGABRT)"),
    ("exited-silently", "pdctl (the executor: the process is gone)", "[pdctl] the process exited with code unknown"),
    ("stopped", "pdctl (the executor's process state)",
     "[pdctl] the process is stopped (state T): it runs no code and answers nothing"),
    ("hung", "pdctl (liveness)", "[pdctl] the process runs but has not answered its health check for 12 s"),
    ("slurm-time-limit", "slurmstepd",
     "slurmstepd: error: *** JOB 1234 ON gb200-01 CANCELLED AT 2026-01-01T10:00:00 DUE TO TIME LIMIT ***"),
    ("slurm-node-fail", "slurmstepd",
     "slurmstepd: error: *** STEP 1234.0 ON gb200-01 CANCELLED AT 2026-01-01T10:00:00 DUE TO NODE FAILURE ***"),
    ("slurm-oom", "slurmstepd (task/cgroup)",
     "slurmstepd: error: Detected 1 oom_kill event in StepId=1234.0. Some of the step tasks have been OOM Killed."),
    ("pyxis-import", "https://github.com/NVIDIA/pyxis/issues/168",
     "slurmstepd: error: pyxis: failed to import docker image"),
    ("pyxis-start", "https://github.com/NVIDIA/pyxis/issues/61",
     "slurmstepd: error: pyxis: container start failed with error code: 1"),
    ("kube-image-pull", "kubelet (pdctl's pod status line)", ("[pdctl] pod pd-prefill-0: ErrImagePull rpc error: "
     "code = NotFound desc = failed to pull and unpack image \"lmsysorg/sglang:nope\"")),
    ("kube-oomkilled", "kubelet (pdctl's pod status line)", "[pdctl] pod pd-decode-0: OOMKilled"),
    ("kube-crashloop", "kubelet (pdctl's pod status line)",
     "[pdctl] pod pd-decode-0: CrashLoopBackOff back-off 40s restarting failed container=decode"),
    ("ref-transfer-timeout", "pdctl/reference/roles/decode.py",
     ("KV transfer for bootstrap_room 42 timed out after 30s without progress (got 0 of 2 parts from prefill "
     "127.0.0.1:9001)")),
    ("ref-peer-gone", "pdctl/reference/roles/bootstrap.py",
     "prefill bootstrap server 127.0.0.1:9001 did not answer /room within 30s"),
    ("ref-kv-oom", "pdctl/reference/kvcache.py",
     "KV cache out of memory in the full pool: need 9 pages of 16 tokens, 3 of 4 free (raise --max-total-tokens)"),
    ("ref-bad-model-path", "pdctl/reference/config.py", ("error: /nope/config.json: no config.json (create one with "
     "`pdctl reference init-checkpoint DIR`)")),
    ("ref-bad-flag", "argparse (python -m pdctl.reference serve)",
     "python -m pdctl.reference: error: argument --max-total-tokens: invalid int value: 'many'"),
    ("ref-bind", "pdctl/reference/server.py",
     "error: cannot bind the HTTP server on 127.0.0.1:30000: [Errno 98] Address already in use"),
]
