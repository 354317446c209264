"""Chunked prefill, SGLang's way: where a step's prefill of a prompt ends, and what its segment asks for.

Why chunks: a prompt longer than `--chunked-prefill-size` would make one huge step and stall every running
request's next token; SGLang cuts it into chunks that end on page boundaries, one chunk per step, interleaved
with decode steps. Pure functions over a request, so the page arithmetic is unit-tested on its own.
"""

from __future__ import annotations

import torch

from pdctl.reference.ranks import Segment
from pdctl.reference.request import GenRequest
from pdctl.reference.sampling import top_logprobs


def chunk_end(start: int, total: int, budget: int, page_size: int, *, allow_chunk: bool) -> int | None:
    """Where this step's prefill of tokens [START, TOTAL) ends: TOTAL when the rest fits BUDGET, else the last
    page boundary within the budget (when ALLOW_CHUNK: one chunked prompt at a time), else None (not now)."""
    if total - start <= budget:
        return total
    end = (start + budget) // page_size * page_size
    return end if allow_chunk and end > start else None


def prefill_segment(req: GenRequest, start: int, end: int) -> Segment:
    """The forward segment of REQ's fill tokens [START, END), asking only for the logits rows it needs: from
    the first prompt position whose logprob was asked for (else only the last position's, for sampling).
    A retracted request's recompute needs none."""
    assert req.seq is not None
    if req.retracted:
        return Segment(req.seq, req.fill_ids[start:end], start, end - start)
    first_row = req.logprob_start if req.logprob_start < req.prompt_len else req.prompt_len - 1
    return Segment(req.seq, req.input_ids[start:end], start, min(end - start, max(0, first_row - start)))


def collect_input_logprobs(req: GenRequest, first_pos: int, rows: torch.Tensor) -> None:
    """Append REQ's input logprobs from ROWS, where row j is the distribution after position FIRST_POS + j (the
    logprob of the prompt token that follows it)."""
    lp = torch.log_softmax(rows, dim=-1)
    for j in range(rows.shape[0]):
        p = first_pos + j + 1
        if req.logprob_start < p < req.prompt_len:
            req.input_logprobs.append(float(lp[j][req.input_ids[p]]))
            req.input_top.append(top_logprobs(lp[j], req.top_logprobs_num) if req.top_logprobs_num else None)
