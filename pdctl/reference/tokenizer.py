"""Byte-level tokenizer: ids 0..255 are bytes, 256 is BOS, 257 is EOS (vocab 258); nothing to download."""

from __future__ import annotations

BOS_ID = 256
EOS_ID = 257
VOCAB_SIZE = 258
_SPECIAL_TEXT = {BOS_ID: "<s>", EOS_ID: "</s>"}


class ByteTokenizer:
    """Encode text as UTF-8 bytes (with BOS), decode ids back, skipping special tokens.

    A byte tokenizer keeps the reference engine self-contained and makes every token's text well defined,
    which the logprob responses (`[logprob, token_id, text]`) need.
    """

    bos_token_id = BOS_ID
    eos_token_id = EOS_ID
    vocab_size = VOCAB_SIZE

    def encode(self, text: str, add_bos: bool = True) -> list[int]:
        """Token ids of TEXT; BOS first when ADD_BOS (prompts given as text always get it, as HF does)."""
        ids = list(text.encode("utf-8"))
        return [BOS_ID, *ids] if add_bos else ids

    def decode(self, ids: list[int]) -> str:
        """Text of IDS; special tokens are skipped and invalid UTF-8 becomes U+FFFD (never raises)."""
        return bytes(i for i in ids if 0 <= i < 256).decode("utf-8", errors="replace")

    def token_text(self, token_id: int) -> str:
        """Text of one token for logprob entries: its byte (decoded leniently) or a special marker."""
        if token_id in _SPECIAL_TEXT:
            return _SPECIAL_TEXT[token_id]
        return bytes([token_id]).decode("utf-8", errors="replace")

    def is_valid_id(self, token_id: int) -> bool:
        """Whether TOKEN_ID is inside the vocabulary (used to reject bad `input_ids` with a 400)."""
        return 0 <= token_id < VOCAB_SIZE
