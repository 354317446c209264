"""Names vulture (dead code: `make lint`, tests/test_layers.py) cannot see used: a framework calls them by name,
or a library reads them. Each line says who. Anything else it reports is dead: delete it, do not list it here."""

# ruff: noqa
from vulture.whitelist_utils import Whitelist

_ = Whitelist()

# click: the group calls these by name; commands are registered by their decorators
_.format_commands  # pdctl/cli/main.py LazyGroup
init_checkpoint_cmd, serve_cmd  # pdctl/cli/reference.py, subcommands of `pdctl reference`
# argparse reads it
_.exit_on_error  # pdctl/compat/effective.py
# signal handlers and http.server hooks receive these arguments and attributes
signum, fmt  # pdctl/launch/supervisor.py, pdctl/reference/roles/bootstrap.py
daemon_threads, _.daemon_threads, block_on_close, protocol_version, _.close_connection  # socketserver / http.server
_.log_message, _.do_GET, _.do_POST  # http.server.BaseHTTPRequestHandler (pdctl's bootstrap server, test proxies)
# prometheus-client calls a custom collector's collect()
_.collect  # pdctl/metrics/engine.py
# dataclass fields serialised with asdict() into JSON documents
span_s  # pdctl/metrics/alarms.py: status' alarms document
# pytest hooks (pdctl's pytest11 plugin, tests/conftest.py) and module markers
pytest_sessionfinish, pytest_unconfigure, pytest_terminal_summary, pytestmark
# FastAPI routes and exception handlers, registered by their decorators
health_generate, completions, _api_error, _timeout  # pdctl/reference/http/
corrupt_state, corrupt_set  # pdctl/reference/http/admin.py: the KV-corruption TEST HOOK's routes
# loaded by name (pdctl.transfer.registry, "module:Class"): the reference roles of each transfer stack
# (Stack.roles), the transfer backends (Backend.implementation)
DecodeRole, PrefillRole, SGLangDecodeRole, SGLangPrefillRole, MooncakeBackend, NixlBackend
# uvicorn.Server's hook, overridden
_.capture_signals  # pdctl/reference/server.py
# pydantic: model configuration and validators, called by the model
model_config, _._time, _._directives, _._segment, _._job_python, _._setup, _._mounts, _._env_scalars
_._options_form, _._normalise, _._one_source, _._quantity_text, _._quantity_values  # topology/kubernetes.py, cluster.py
# atexit handlers
_release_all  # tests/support/net.py
# SGLang's own code reads these on the objects tests/support/sglang_oracle.py builds with object.__new__, and
# calls the recorders' methods (NIXL's agent: prep_xfer_dlist, make_prepped_xfer, their mem_kind argument)
_.batches, _.prep_xfer_dlist, _.make_prepped_xfer, mem_kind, _.hf_config, _.hf_text_config, _.is_draft_model
_._fixed_overhead_bytes, _._zero_kv_max_tokens
# SGLang's own objects, filled by pdctl.sglang_stack for SGLang's code to read: KVArgs fields (kvargs.py), the
# module-global Mooncake engine SGLang's managers take (runtime.py); the prefill's bootstrap server is kept
# referenced while its side lives (side.py)
_.pp_rank, _.system_dp_rank, _.rust_http_port, _.kv_cache_dtype_str, _.prefill_start_layer, _.prefill_end_layer
_.kv_data_lens, _.kv_item_lens, _.num_draft_entries, _.kv_layer_ids, _.kv_head_num
_.total_kv_head_num, _.aux_data_lens, _.aux_data_ptrs, _.aux_item_lens, _.gpu_id, _.kv_data_mem_kinds
_.state_data_ptrs, _.state_data_lens, _.state_item_lens, _.state_dim_per_tensor, _.state_slice_outer_counts
_.state_layer_ids, _.is_hybrid_mla_backend, _.state_conv_shard_groups, _.swa_kv_cache_layout
_.mla_compression_ratios, _._mooncake_transfer_engine, _.bootstrap_server
# pdctl.sglang_cpu: click's command, the import system's loader protocol (kernel_standin), attributes SGLang,
# tokenizers and transformers read (adaptations, tinymodel)
init_model_cmd, _.create_module, _.exec_module, _.__path__, _.__pdctl_standin__
_.supports_host_tensor_indices, _.pre_tokenizer, _.decoder, _.chat_template, _.torch_dtype
# tests/conftest.py: pytest-xdist's scheduler calls it (the xdist group of a node id)
_._split_scope
