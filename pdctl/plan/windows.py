"""Which pages of one request SGLang transfers: all pages for full-attention layers, a window for SWA layers.

SGLang's prefill (`_swa_payload` in disaggregation/prefill.py) sends only the tokens a sliding-window layer can
still attend to: `[max(prefix, len - window), len)`, the start rounded down to a page boundary. Counting pages
here, not tokens, is what makes pdctl's descriptor and byte counts match the real transfer.
"""

from __future__ import annotations


def _ceil_div(a: int, b: int) -> int:
    return -(-a // b)


def _check(prompt_len: int, prefix_len: int, page_size: int) -> None:
    if page_size < 1:
        raise ValueError(f"page_size must be positive, got {page_size}")
    if prompt_len < 0 or prefix_len < 0:
        raise ValueError(f"lengths must be non-negative, got prompt_len={prompt_len}, prefix_len={prefix_len}")


def full_pages(prompt_len: int, prefix_len: int, page_size: int) -> range:
    """Request-relative pages of a full-attention layer that go over the wire (prefix pages already there)."""
    _check(prompt_len, prefix_len, page_size)
    return range(min(prefix_len, prompt_len) // page_size, _ceil_div(prompt_len, page_size))


def swa_window_pages(prompt_len: int, prefix_len: int, window: int, page_size: int) -> range:
    """Request-relative pages SGLang sends for SWA layers: from page-aligned `max(prefix, len - window)` to the end."""
    _check(prompt_len, prefix_len, page_size)
    if window < 1:
        raise ValueError(f"window must be positive, got {window}")
    start = min(max(prefix_len, prompt_len - window), prompt_len)
    return range(start // page_size, _ceil_div(prompt_len, page_size))


def send_chunks(prompt_len: int, prefix_len: int, page_size: int, chunk_tokens: int | None) -> list[range]:
    """The pages of each send SGLang makes for one request: chunked prefill sends, after each chunk of
    `chunk_tokens` tokens (counted from the prefix), the pages completed so far (full pages only; the last send
    takes the rest). `chunk_tokens` None or <= 0 (chunked prefill off): one send. Empty sends are skipped."""
    _check(prompt_len, prefix_len, page_size)
    pages = full_pages(prompt_len, prefix_len, page_size)
    if not chunk_tokens or chunk_tokens <= 0:
        return [pages] if len(pages) else []
    out: list[range] = []
    start = pages.start
    boundary = min(prefix_len, prompt_len) + chunk_tokens
    while boundary < prompt_len:
        end = boundary // page_size
        if end > start:
            out.append(range(start, end))
            start = end
        boundary += chunk_tokens
    if pages.stop > start:
        out.append(range(start, pages.stop))
    return out
