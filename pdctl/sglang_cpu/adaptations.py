"""The adaptations SGLang's real server needs on a CPU without AMX, each answering one line of SGLang.

Read and measured on SGLang 0.5.23 (pdctl.sglang_cpu.CHECKED_RELEASE; docs/sglang-on-cpu.md has the costs).
Each adaptation holds the SGLang code it answers as text (`Expect`): before anything is changed, every
expectation of every adaptation the server needs is looked up in SGLang's installed source, and a release
where one is not found as expected is refused (exit 2, naming the adaptation, the file and what is missing)
instead of being patched blindly. The line numbers in `answers` are 0.5.23's; the check finds the text
wherever it moved.

1. `sgl_kernel`: an inert stand-in (kernel_standin), because the CPU engine imports SGLang's kernel package
   at import time and PyPI has only CUDA builds of it. Always on.
2. `nixl-host-memory` (transfer backend nixl): SGLang labels KV buffers without a stated kind "VRAM"
   (`_normalize_kv_mem_kinds`) and registers its state buffers and several descriptor lists as "VRAM"
   unconditionally; UCX refuses host memory labelled VRAM. The KV buffers are labelled DRAM (what they
   are), so SGLang's own host-memory path runs — including its refusal of heterogeneous TP into host memory,
   which this adaptation must leave in place (it checks the guard is there) — and the NIXL agent class
   registers and addresses the hard-coded "VRAM" lists as DRAM.
3. `mooncake-host-indices` (transfer backend mooncake): `MooncakeKVSender.supports_host_tensor_indices =
   True` makes the prefill copy page indices into pinned memory and record a `torch.cuda.Event()`; False
   takes SGLang's other branch (`kv_to_page_indices`), as its other senders do.
4. `gpt-oss-sinks-ignored` (gpt-oss models only): SGLang asserts a GPU attention backend for gpt-oss and
   its torch-native backend takes no attention sinks. The assertion accepts torch_native and the `sinks=`
   argument is dropped: SGLang's real hybrid SWA pool and KV transfer run, but **the numerics are not
   gpt-oss's** (the server logs NUMERICS_NOTE; pdctl's render notes say it).
"""

from __future__ import annotations

import functools
import importlib.util
import json
import logging
import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pdctl.sglang_cpu import CHECKED_RELEASE, NUMERICS_NOTE
from pdctl.sglang_cpu.kernel_standin import install as install_kernel_standin

log = logging.getLogger("pdctl.sglang_cpu")

GPT_OSS_ARCH = "GptOssForCausalLM"


class AdaptationMismatch(RuntimeError):
    """SGLang's code is not what an adaptation answers: the release is refused, nothing is patched."""


@dataclass(frozen=True)
class Expect:
    """TEXT must occur in SGLang's MODULE (COUNT times when given, else at least once)."""

    module: str
    text: str
    count: int | None = None


@dataclass(frozen=True)
class Adaptation:
    name: str
    answers: str  # SGLang file:line on CHECKED_RELEASE
    expects: tuple[Expect, ...]
    apply: Callable[[], None]


@dataclass(frozen=True)
class ServerView:
    """What decides which adaptations a server needs, read from its argv."""

    backend: str | None  # --disaggregation-transfer-backend (None: a plain server)
    model_arch: str | None


def source_of(module: str) -> tuple[str, str]:
    """(path, text) of SGLang module MODULE, read without importing it."""
    spec = importlib.util.find_spec(module)
    if spec is None or not spec.origin:
        raise AdaptationMismatch(f"{module} is not in this SGLang")
    return spec.origin, Path(spec.origin).read_text(encoding="utf-8")


def verify(adaptation: Adaptation) -> list[str]:
    """Where ADAPTATION's expectations hold: 'file:line' for each; AdaptationMismatch when one does not."""
    found = []
    for exp in adaptation.expects:
        path, text = source_of(exp.module)
        seen = text.count(exp.text)
        if seen == 0 or (exp.count is not None and seen != exp.count):
            want = f"{exp.count} time(s)" if exp.count is not None else "at least once"
            raise AdaptationMismatch(
                f"pdctl's CPU adaptation {adaptation.name!r} (answers {adaptation.answers} of SGLang "
                f"{CHECKED_RELEASE}) no longer matches this SGLang: {path} holds {exp.text!r} {seen} time(s), "
                f"expected {want}; the adaptation must be re-measured for this release (docs/sglang-on-cpu.md)")
        line = text[: text.index(exp.text)].count("\n") + 1
        found.append(f"{Path(path).name}:{line}")
    return found


# --- 2. NIXL on host memory ---------------------------------------------------------------------------------

_NIXL_CONN = "sglang.srt.disaggregation.nixl.conn"
# conn.py:1590-1594, the refusal check-compat predicts for a CPU topology (pdctl.sglang.messages)
_NIXL_GUARD = ('if dst_mem_kind != "VRAM":\n                raise NotImplementedError(\n'
               '                    "NIXL heterogeneous-TP direct-to-host KV transfer is not "')


def _apply_nixl_host_memory() -> None:
    import nixl._api as api
    from sglang.srt.disaggregation.nixl import conn

    normalize = conn._normalize_kv_mem_kinds

    @functools.wraps(normalize)
    def host_kinds(kinds: Any, expected_len: int) -> Any:
        # None (prefill: SGLang's default "VRAM") and decode's explicit ["VRAM"] * n (disaggregation/decode.py:629,
        # whose kinds travel to prefill in the registration and decide its guard) are host memory here alike
        return normalize(["DRAM"] * expected_len if kinds is None else [_dram(str(k)) for k in kinds], expected_len)

    conn._normalize_kv_mem_kinds = host_kinds
    base = api.nixl_agent
    if getattr(base, "_pdctl_host_memory", False):
        return

    class HostMemoryAgent(base):  # type: ignore[misc,valid-type]
        """SGLang's hard-coded "VRAM" lists, registered and addressed as the host memory they are."""

        _pdctl_host_memory = True

        def register_memory(self, reg_list: Any, mem_type: Any = None, *a: Any, **k: Any) -> Any:
            return super().register_memory(reg_list, _dram(mem_type), *a, **k)

        def get_reg_descs(self, descs: Any, mem_type: Any = None, *a: Any, **k: Any) -> Any:
            return super().get_reg_descs(descs, _dram(mem_type), *a, **k)

        def get_xfer_descs(self, descs: Any, mem_type: Any = None, *a: Any, **k: Any) -> Any:
            return super().get_xfer_descs(descs, _dram(mem_type), *a, **k)

        def prep_xfer_dlist(self, agent_name: Any, xfer_list: Any, mem_type: Any = None, *a: Any, **k: Any) -> Any:
            return super().prep_xfer_dlist(agent_name, xfer_list, _dram(mem_type), *a, **k)

    api.nixl_agent = HostMemoryAgent


def _dram(mem_type: Any) -> Any:
    return "DRAM" if mem_type == "VRAM" else mem_type


# --- 3. Mooncake page indices without pinned memory ----------------------------------------------------------

def _apply_mooncake_host_indices() -> None:
    from sglang.srt.disaggregation.mooncake.conn import MooncakeKVSender

    MooncakeKVSender.supports_host_tensor_indices = False


# --- 4. gpt-oss: attention sinks ignored -------------------------------------------------------------------

_MODEL_HOOK = "sglang.srt.arg_groups.model_hook"
_TORCH_NATIVE = "sglang.srt.layers.attention.torch_native_backend"


def _apply_gpt_oss_sinks_ignored() -> None:
    from sglang.srt.arg_groups import model_hook
    from sglang.srt.layers.attention.torch_native_backend import TorchNativeAttnBackend

    hook = model_hook.handle_model_specific_adjustments
    backends_of = model_hook.attention_backends_of

    def accepting_torch_native(view: Any) -> Any:
        # only gpt-oss's assertion calls it while the hook runs for a gpt-oss model (the other call site is
        # Gemma 4's branch of the same if/elif)
        return tuple("triton" if b == "torch_native" else b for b in backends_of(view))

    @functools.wraps(hook)
    def adjusted(server_args: Any) -> Any:
        model_hook.attention_backends_of = accepting_torch_native
        try:
            return hook(server_args)
        finally:
            model_hook.attention_backends_of = backends_of

    model_hook.handle_model_specific_adjustments = adjusted
    for name in ("forward_extend", "forward_decode"):
        setattr(TorchNativeAttnBackend, name, _without_sinks(getattr(TorchNativeAttnBackend, name)))
    log.warning(NUMERICS_NOTE)


def _without_sinks(method: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(method)
    def call(self: Any, *args: Any, **kwargs: Any) -> Any:
        kwargs.pop("sinks", None)
        return method(self, *args, **kwargs)

    return call


NIXL_HOST_MEMORY = Adaptation(
    "nixl-host-memory", "srt/disaggregation/nixl/conn.py:204 (_normalize_kv_mem_kinds), :2023 (state buffers), "
    "decode.py:629 (decode's KV kinds)",
    (Expect(_NIXL_CONN, 'if kinds is None:\n        return ["VRAM"] * expected_len'),
     Expect(_NIXL_CONN, 'self.state_descs = self.agent.register_memory(state_addrs, "VRAM")'),
     Expect(_NIXL_CONN, "from nixl._api import nixl_agent"),
     # decode states its KV's kinds: "VRAM" for every buffer (they reach prefill's guard in the registration)
     Expect("sglang.srt.disaggregation.decode", 'else ["VRAM"] * len(kv_data_ptrs)'),
     # SGLang's own refusal of heterogeneous TP into host memory must stay reachable (check-compat predicts it)
     Expect(_NIXL_CONN, _NIXL_GUARD)),
    _apply_nixl_host_memory)
MOONCAKE_HOST_INDICES = Adaptation(
    "mooncake-host-indices", "srt/disaggregation/prefill.py:1746-1761, srt/disaggregation/mooncake/conn.py:3312",
    (Expect("sglang.srt.disaggregation.mooncake.conn",
            "class MooncakeKVSender(CommonKVSender):\n    supports_host_tensor_indices = True", 1),
     Expect("sglang.srt.disaggregation.prefill", 'getattr(sender, "supports_host_tensor_indices", False)', 1),
     Expect("sglang.srt.disaggregation.prefill", "indices_event = torch.cuda.Event()", 1)),
    _apply_mooncake_host_indices)
GPT_OSS_SINKS_IGNORED = Adaptation(
    "gpt-oss-sinks-ignored", "srt/arg_groups/model_hook.py:538, srt/layers/attention/torch_native_backend.py:279",
    (Expect(_MODEL_HOOK, "GptOssForCausalLM requires one of {supported_backends} attention backend", 1),
     Expect(_MODEL_HOOK, "= attention_backends_of(", 2),
     Expect(_MODEL_HOOK, "def handle_model_specific_adjustments(server_args: Any):", 1),
     Expect(_TORCH_NATIVE, "        forward_batch: ForwardBatch,\n        save_kv_cache=True,\n    ):", 2),
     Expect("sglang.srt.models.gpt_oss", "sinks=self.sinks,", 1)),
    _apply_gpt_oss_sinks_ignored)
KERNEL_STANDIN = Adaptation(
    "sgl-kernel-standin", "srt/utils/common.py:357 (_is_intel_amx_backend_available)",
    (Expect("sglang.srt.utils.common", 'return hasattr(torch.ops.sgl_kernel, "convert_weight_packed")', 1),),
    lambda: None)  # installed first of all (importing SGLang's modules needs it): apply_all


def needed(view: ServerView) -> list[Adaptation]:
    """The adaptations a server with VIEW needs, in the order they are applied."""
    out = [KERNEL_STANDIN]
    if view.backend == "nixl":
        out.append(NIXL_HOST_MEMORY)
    if view.backend == "mooncake":
        out.append(MOONCAKE_HOST_INDICES)
    if view.model_arch == GPT_OSS_ARCH:
        out.append(GPT_OSS_SINKS_IGNORED)
    return out


def view_of(argv: list[str]) -> ServerView:
    """The transfer backend and the model architecture of the server ARGV starts (SGLang's own parser later
    judges the whole argv; this reads two values the way it does: `--flag value` or `--flag=value`)."""
    def value(flag: str) -> str | None:
        for i, arg in enumerate(argv):
            if arg == flag and i + 1 < len(argv):
                return argv[i + 1]
            if arg.startswith(flag + "="):
                return arg.split("=", 1)[1]
        return None

    mode = value("--disaggregation-mode")
    backend = value("--disaggregation-transfer-backend") if mode in ("prefill", "decode") else None
    if backend == "mooncake_tcp":
        backend = "mooncake"
    return ServerView(backend, _model_arch(value("--model-path")))


def _model_arch(path: str | None) -> str | None:
    config = Path(path or "") / "config.json"
    try:
        archs = json.loads(config.read_text()).get("architectures") or [None]
    except (OSError, ValueError):
        return None  # SGLang itself says what is wrong with the model path
    return archs[0]


def apply_all(view: ServerView) -> list[str]:
    """Install the kernel stand-in, verify every adaptation VIEW needs, then apply them; the applied
    adaptations as 'name (file:line, ...)'. Raises AdaptationMismatch before patching anything."""
    install_kernel_standin()
    chosen = needed(view)
    where = {a.name: verify(a) for a in chosen}
    for adaptation in chosen:
        adaptation.apply()
    os.environ.setdefault("PDCTL_SGLANG_CPU_ADAPTATIONS", ",".join(a.name for a in chosen))
    return [f"{name} ({', '.join(lines)})" for name, lines in where.items()]
