"""The prompts parity sends: a default suite whose lengths sit on the edges that break KV transfers.

Why these lengths: a PD transfer bug rarely shows on one arbitrary prompt. It shows where the page
arithmetic changes (one token short of a page, exactly a page, one past it, exact multiples), where the
sliding-window pool starts dropping pages (just past the window), where prefill is split into chunks (just
past the chunked-prefill size), and on long prompts that move many pages. The suite is computed from the
deployment's own numbers (page size, window, chunk size, context length, vocabulary) so that it probes the
edges of *this* deployment, and it is deterministic so that two runs send the same token ids.

Where the numbers come from (`facts_from_info`): the server's `/server_info` (SGLang: `page_size`,
`chunked_prefill_size`, `context_length`, `max_req_input_len`, `max_total_num_tokens`) and `/model_info`
(`vocab_size`, `sliding_window`, or an embedded `hf_config`), then a model spec when one is given (the
sliding window and vocabulary of the model), then explicit overrides from the command line.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from pdctl.errors import UserError
from pdctl.jsonfiles import iter_jsonl

# Token ids the suite draws from when the vocabulary is large: SGLang's parity kit uses 100..1099, which is
# plain text in every BPE vocabulary we know and far from the special tokens at the top.
_KIT_ID_RANGE = (100, 1100)
# Without a known context length the longest prompt stays near the old fixed target (4096 + 2 pages).
LONG_TARGET = 4096
LADDER = 8  # long-context prompts: 4 windows + a page + 1, then x8, x64, ... below the context
DEFAULT_SEED = 0


@dataclass(frozen=True)
class Prompt:
    """One prompt: token ids (the normal case) or text (from a --prompts file), and why it is in the suite."""

    name: str
    input_ids: list[int] | None = None
    text: str | None = None

    @property
    def num_tokens(self) -> int | None:
        """Length in tokens when known before sending (text prompts learn it from the server's reply)."""
        return len(self.input_ids) if self.input_ids is not None else None

    def payload(self) -> dict[str, Any]:
        """The prompt part of a /generate body."""
        if self.input_ids is not None:
            return {"input_ids": list(self.input_ids)}
        return {"text": self.text}


@dataclass(frozen=True)
class SuiteFacts:
    """The deployment numbers the default suite is computed from, and where each came from."""

    page_size: int = 1
    vocab_size: int | None = None
    sliding_window: int | None = None
    chunked_prefill_size: int | None = None
    context_length: int | None = None
    sources: dict[str, str] = field(default_factory=dict)

    def with_overrides(self, source: str, **values: int | None) -> SuiteFacts:
        """A copy where every non-None value replaces ours, remembering SOURCE as its origin."""
        changes = {k: v for k, v in values.items() if v is not None}
        sources = dict(self.sources)
        sources.update({k: source for k in changes})
        return replace(self, sources=sources, **changes)

    def describe(self) -> str:
        """One line for the human output: what the suite was computed from."""
        parts = []
        for key in ("page_size", "sliding_window", "chunked_prefill_size", "context_length", "vocab_size"):
            value = getattr(self, key)
            origin = self.sources.get(key, "default")
            parts.append(f"{key}={value} ({origin})")
        return ", ".join(parts)


def _positive_int(value: Any) -> int | None:
    if isinstance(value, bool) or value is None:
        return None
    try:
        number = int(value)
    except (TypeError, ValueError):
        return None
    return number if number > 0 else None


def first_info(info: dict[str, Any]) -> dict[str, Any]:
    """A router's /server_info wraps workers' documents ({"prefill": [...], "decode": [...]}): take prefill's."""
    for key in ("prefill", "decode"):
        workers = info.get(key)
        if isinstance(workers, list) and workers and isinstance(workers[0], dict):
            return workers[0]
    return info


def facts_from_info(server_info: dict[str, Any] | None, model_info: dict[str, Any] | None) -> SuiteFacts:
    """Read page size, chunk size, context length, window and vocabulary from a server's info documents."""
    facts = SuiteFacts()
    server = first_info(server_info or {})
    model = first_info(model_info or {})
    hf = model.get("hf_config") if isinstance(model.get("hf_config"), dict) else {}
    cfg = server.get("model_config") if isinstance(server.get("model_config"), dict) else {}

    def pick(key: str, *docs: tuple[str, dict[str, Any]]) -> tuple[int | None, str | None]:
        for name, doc in docs:
            value = _positive_int(doc.get(key))
            if value is not None:
                return value, name
        return None, None

    found: dict[str, tuple[int | None, str | None]] = {
        "page_size": pick("page_size", ("/server_info", server)),
        "chunked_prefill_size": pick("chunked_prefill_size", ("/server_info", server)),
        "context_length": pick(
            "context_length", ("/server_info", server), ("/model_info", model), ("/model_info", hf)
        ),
        "vocab_size": pick(
            "vocab_size", ("/model_info", model), ("/model_info", hf), ("/server_info", server),
            ("/server_info", cfg),
        ),
        "sliding_window": pick(
            "sliding_window", ("/model_info", model), ("/model_info", hf), ("/server_info", server),
            ("/server_info", cfg),
        ),
    }
    if found["context_length"][0] is None:
        # SGLang reports the usable input length when context_length was left to the model's default.
        found["context_length"] = pick(
            "max_req_input_len", ("/server_info", server), ("/server_info", _first_internal(server))
        )
    for key, (value, origin) in found.items():
        if value is not None:
            facts = facts.with_overrides(origin or "server", **{key: value})
    return facts


def _first_internal(server: dict[str, Any]) -> dict[str, Any]:
    states = server.get("internal_states")
    if isinstance(states, list) and states and isinstance(states[0], dict):
        return states[0]
    return {}


def token_range(vocab_size: int | None) -> tuple[int, int]:
    """The [lo, hi) range suite token ids are drawn from, valid for VOCAB_SIZE (the kit's range if unknown).

    Small vocabularies are byte-level (256 bytes + specials, like the reference engine's 258): draw printable
    bytes there so that no special token (BOS/EOS, usually at the top) lands inside a prompt.
    """
    if vocab_size is None or vocab_size >= _KIT_ID_RANGE[1]:
        return _KIT_ID_RANGE
    if vocab_size >= 258:
        return (32, 127)
    if vocab_size < 8:
        raise UserError(f"vocabulary of {vocab_size} tokens is too small for a parity suite")
    return (1, vocab_size - 1)


def random_ids(length: int, *, vocab_size: int | None, seed: int) -> list[int]:
    """LENGTH deterministic token ids for SEED (same seed, same ids — on every machine and run)."""
    lo, hi = token_range(vocab_size)
    rng = random.Random(seed)
    return [rng.randrange(lo, hi) for _ in range(length)]


def suite_lengths(facts: SuiteFacts, *, max_new_tokens: int, max_prompt_tokens: int | None = None) -> dict[str, int]:
    """Name -> prompt length on each transfer edge, then long-context prompts up to the context, deduplicated,
    capped by the context (prompt + output must fit) and by an optional cap."""
    page = max(1, facts.page_size)
    if facts.context_length is not None:
        limit = facts.context_length - max_new_tokens - 1
    else:
        limit = LONG_TARGET + 2 * page  # context unknown: as long as the old fixed "long" prompt
    if max_prompt_tokens is not None:
        limit = min(limit, max_prompt_tokens)
    if limit < 2:
        raise UserError(
            f"no room for a prompt: context length {facts.context_length} with --max-new-tokens {max_new_tokens}"
        )
    wanted: list[tuple[str, int]] = [
        ("below_page", page - 1),
        ("one_page", page),
        ("above_page", page + 1),
        ("two_pages", 2 * page),
        ("three_pages_plus_1", 3 * page + 1),
        ("four_pages", 4 * page),
    ]
    if facts.sliding_window:
        w = facts.sliding_window
        wanted += [("window", w), ("past_window", w + 1), ("past_window_plus_page", w + page + 1)]
    if facts.chunked_prefill_size:
        c = facts.chunked_prefill_size
        wanted += [("chunk", c), ("past_chunk", c + 1)]
    wanted += long_context_lengths(facts, limit)
    lengths: dict[str, int] = {}
    seen: set[int] = set()
    for name, length in wanted:
        length = max(length, 2)
        if length > limit:
            if name != "long":
                continue
            length = limit  # "long" = as long as the context allows
        if length in seen:
            continue
        seen.add(length)
        lengths[name] = length
    return lengths


def long_context_lengths(facts: SuiteFacts, limit: int) -> list[tuple[str, int]]:
    """Past four sliding windows (or 256 tokens without one), then x LADDER steps, then the longest prompt the
    context allows: faults that need many pages, many windows or many chunks show there."""
    page = max(1, facts.page_size)
    base = 4 * facts.sliding_window + page + 1 if facts.sliding_window else 256 + page // 2 + 1
    out = [("past_4_windows" if facts.sliding_window else "past_256", base)]
    n, k = base * LADDER, LADDER
    while n < limit:
        out.append((f"long_{k}x", n))
        n, k = n * LADDER, k * LADDER
    return out + [("long", limit)]


def default_suite(
    facts: SuiteFacts,
    *,
    max_new_tokens: int,
    max_prompt_tokens: int | None = None,
    seed: int = DEFAULT_SEED,
) -> list[Prompt]:
    """The default parity suite for a deployment with FACTS, shortest prompt first."""
    lengths = suite_lengths(facts, max_new_tokens=max_new_tokens, max_prompt_tokens=max_prompt_tokens)
    prompts = [
        Prompt(name=f"{name}:{length}", input_ids=random_ids(length, vocab_size=facts.vocab_size, seed=seed + length))
        for name, length in lengths.items()
    ]
    return sorted(prompts, key=lambda p: p.num_tokens or 0)


def shared_prefix_variant(prompt: Prompt, *, page_size: int, vocab_size: int | None, seed: int = DEFAULT_SEED) -> Prompt | None:
    """PROMPT's page-aligned prefix followed by a different tail: prefill must reuse the prefix from its cache.

    None when the prompt has no full page to share (or is text: its token boundaries are not ours to cut).
    """
    if prompt.input_ids is None:
        if prompt.text is None or len(prompt.text) < 2:
            return None
        return Prompt(name=f"{prompt.name}+prefix", text=prompt.text + " And then, in another direction:")
    page = max(1, page_size)
    n = len(prompt.input_ids)
    shared = ((n - 1) // page) * page
    if shared <= 0:
        return None
    tail_len = max(2, n - shared)
    tail = random_ids(tail_len, vocab_size=vocab_size, seed=seed + 7919 * n + 1)
    if tail[0] == prompt.input_ids[shared]:  # the tail must differ from its first token on
        lo, hi = token_range(vocab_size)
        tail[0] = lo + ((tail[0] - lo + 1) % (hi - lo))
    return Prompt(name=f"{prompt.name}+prefix{shared}", input_ids=list(prompt.input_ids[:shared]) + tail)


def load_prompts_file(path: str | Path, *, vocab_size: int | None = None) -> list[Prompt]:
    """Prompts from a JSONL file of {"text": ...} or {"input_ids": [...]} lines (optional "name")."""
    file = Path(path)
    prompts: list[Prompt] = []
    for lineno, doc in iter_jsonl(file, "--prompts file"):
        where = f"{file}:{lineno}"
        if not isinstance(doc, dict):
            raise UserError(f'{where}: expected an object with "text" or "input_ids"')
        name = str(doc.get("name") or f"line{lineno}")
        if "input_ids" in doc:
            ids = doc["input_ids"]
            if (
                not isinstance(ids, list)
                or not ids
                or not all(isinstance(t, int) and not isinstance(t, bool) and t >= 0 for t in ids)
            ):
                raise UserError(f"{where}: input_ids must be a non-empty list of non-negative integers")
            if vocab_size is not None and max(ids) >= vocab_size:
                raise UserError(f"{where}: token id {max(ids)} is outside the model's vocabulary of {vocab_size}")
            prompts.append(Prompt(name=name, input_ids=list(ids)))
        elif isinstance(doc.get("text"), str) and doc["text"]:
            prompts.append(Prompt(name=name, text=doc["text"]))
        else:
            raise UserError(f'{where}: expected a non-empty "text" string or an "input_ids" list')
    if not prompts:
        raise UserError(f"--prompts file {file} has no prompts")
    return prompts
