"""A generation request as the engine tracks it: inputs, options, progress, results."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from pdctl.reference.kvcache import SeqPages
from pdctl.reference.sampling import SamplingParams


@dataclass
class GenRequest:
    """One /generate item. The engine thread mutates it; `on_done(req)` is called once when finished, and
    `on_progress(req)` (streaming) after every output token it gained (both from the engine thread)."""

    rid: str
    input_ids: list[int]
    sampling: SamplingParams
    return_logprob: bool = False
    logprob_start_len: int = -1
    top_logprobs_num: int = 0
    return_text_in_logprobs: bool = False
    bootstrap_host: str | None = None
    bootstrap_port: int | None = None
    bootstrap_room: int | None = None
    on_done: Callable[[GenRequest], None] | None = None
    on_progress: Callable[[GenRequest], None] | None = None
    created: float = field(default_factory=time.monotonic)
    token_at: float = 0.0  # when the last output token came (monotonic; inter-token latency)
    # progress
    state: str = "waiting"  # waiting | prefilling | transferring | running | finished
    prefilled: int = 0  # tokens of fill_ids whose KV is computed (chunked prefill progress)
    retracted: bool = False  # pages taken back under memory pressure: its KV is recomputed on re-admission
    seq: SeqPages | None = None
    cached_tokens: int = 0
    output_ids: list[int] = field(default_factory=list)
    output_logprobs: list[float] = field(default_factory=list)
    output_top: list[list[tuple[float, int]]] = field(default_factory=list)
    input_logprobs: list[float | None] = field(default_factory=list)  # for input_ids[logprob_start:]
    input_top: list[list[tuple[float, int]] | None] = field(default_factory=list)
    finish: dict[str, Any] | None = None
    stop_text_index: int | None = None  # cut the output text here (a stop string matched)
    error: str | None = None
    abort_message: str | None = None  # set when a client went away while a role moved the request's KV
    error_status: int = 500
    generator: Any = None

    @property
    def prompt_len(self) -> int:
        """Number of prompt tokens."""
        return len(self.input_ids)

    @property
    def fill_ids(self) -> list[int]:
        """Tokens whose KV a prefill computes: the prompt, or after a retraction the prompt plus every output
        token but the last (which the next decode step feeds)."""
        return self.input_ids + self.output_ids[:-1] if self.retracted else self.input_ids

    @property
    def logprob_start(self) -> int:
        """First prompt position with an input logprob entry (SGLang: -1 -> none, only output logprobs)."""
        if not self.return_logprob or self.logprob_start_len < 0:
            return self.prompt_len
        return min(self.logprob_start_len, self.prompt_len)

    @property
    def seq_len(self) -> int:
        """Tokens whose KV is (or is being) in the cache: prompt plus generated tokens already fed back."""
        return self.prompt_len + max(0, len(self.output_ids) - 1)

    def fail(self, message: str, status: int = 500) -> None:
        """Mark finished with an error message (the HTTP layer turns it into an error response)."""
        self.error = message
        self.error_status = status
        self.finish = {"type": "abort", "message": message}
        self.state = "finished"
