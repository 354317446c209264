"""A Hugging Face tokenizer directory equal to the reference engine's byte tokenizer, for load generators.

Why: every serving benchmark of the field (SGLang's bench_serving, aiperf, guidellm, ...) counts prompt and
output tokens with a Hugging Face tokenizer loaded from a directory. pdctl's reference engine tokenizes
text as UTF-8 bytes with BOS (pdctl.reference.tokenizer: ids 0..255 = bytes, 256 = <s>, 257 = </s>) and has no
tokenizer files, and tests download nothing. This writes a `tokenizer.json` that encodes exactly as the engine
does: byte-level BPE with the 256 byte symbols at their byte ids and no merges, BOS prepended.
"""

from __future__ import annotations

import json
from pathlib import Path

BOS_ID, EOS_ID = 256, 257  # pdctl.reference.tokenizer (not imported: it sits in the engine package)
MARKER = "pdctl-byte-tokenizer"


def _bytes_to_unicode() -> dict[int, str]:
    """GPT-2's byte -> printable character map, which the ByteLevel pre-tokenizer and decoder use."""
    printable = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + \
        list(range(ord("®"), ord("ÿ") + 1))
    chars, extra = list(printable), 0
    for b in range(256):
        if b not in printable:
            printable.append(b)
            chars.append(256 + extra)
            extra += 1
    return dict(zip(printable, (chr(c) for c in chars)))


def tokenizer_json() -> dict:
    """The tokenizers-library document of the byte tokenizer."""
    vocab = {ch: b for b, ch in _bytes_to_unicode().items()}
    vocab.update({"<s>": BOS_ID, "</s>": EOS_ID})
    special = [{"id": i, "content": t, "single_word": False, "lstrip": False, "rstrip": False, "normalized": False,
                "special": True} for i, t in ((BOS_ID, "<s>"), (EOS_ID, "</s>"))]
    return {
        "version": "1.0", "truncation": None, "padding": None, "added_tokens": special, "normalizer": None,
        "pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": False, "use_regex": False},
        "post_processor": {"type": "TemplateProcessing",
                           "single": [{"SpecialToken": {"id": "<s>", "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}}],
                           "pair": [{"SpecialToken": {"id": "<s>", "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}},
                                    {"Sequence": {"id": "B", "type_id": 0}}],
                           "special_tokens": {"<s>": {"id": "<s>", "ids": [BOS_ID], "tokens": ["<s>"]}}},
        "decoder": {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": False, "use_regex": False},
        "model": {"type": "BPE", "dropout": None, "unk_token": None, "continuing_subword_prefix": None,
                  "end_of_word_suffix": None, "fuse_unk": False, "byte_fallback": False, "ignore_merges": False,
                  "vocab": vocab, "merges": []},
    }


def write_byte_tokenizer(directory: str | Path) -> Path:
    """Write (or refresh) the tokenizer files into DIRECTORY and return it; AutoTokenizer loads it offline."""
    path = Path(directory)
    path.mkdir(parents=True, exist_ok=True)
    (path / "tokenizer.json").write_text(json.dumps(tokenizer_json()), encoding="utf-8")
    config = {"tokenizer_class": "PreTrainedTokenizerFast", "bos_token": "<s>", "eos_token": "</s>",
              "add_bos_token": True, "model_max_length": 1 << 20, "clean_up_tokenization_spaces": False,
              "chat_template": "{% for m in messages %}{{ m['content'] }}{% endfor %}", "name_or_path": MARKER}
    (path / "tokenizer_config.json").write_text(json.dumps(config), encoding="utf-8")
    (path / "special_tokens_map.json").write_text(json.dumps({"bos_token": "<s>", "eos_token": "</s>"}),
                                                  encoding="utf-8")
    return path
