"""Tiny random-weight models SGLang's real server loads on a CPU, made offline (no Hub, no download).

`python -m pdctl.sglang_cpu.tinymodel DIR SHAPE SEED` in SGLang's interpreter (transformers, tokenizers and
torch are SGLang's own dependencies there); `pdctl sglang-cpu init-model` runs it. Two shapes:

- `llama`: LlamaForCausalLM, hidden 128, 2 layers, 4 heads, 2 KV heads (head dim 32), float32.
- `gpt-oss`: GptOssForCausalLM, layers [sliding_attention, full_attention] with window 16, 4 experts top-2,
  bfloat16 weights (not mxfp4): SGLang's hybrid SWA KV pool; served on CPU with the sinks-ignored adaptation.

The tokenizer is a byte-level BPE (the `tokenizers` library) trained on the GSM8K questions pdctl ships
(pdctl/bench/serve/data), wrapped as a PreTrainedTokenizerFast with BOS/EOS/PAD and a trivial chat template:
there is no tokenizer offline here, and a byte-level BPE encodes any text. Same SEED, same weights.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

SHAPES = ("llama", "gpt-oss")
TEXT = Path(__file__).resolve().parents[1] / "bench" / "serve" / "data" / "gsm8k_test_50.jsonl"
VOCAB = 1024
SPECIAL = {"bos_token": "<s>", "eos_token": "</s>", "pad_token": "<pad>"}
CHAT_TEMPLATE = ("{% for m in messages %}{{ m['role'] }}: {{ m['content'] }}\n{% endfor %}"
                 "{% if add_generation_prompt %}assistant: {% endif %}")


def corpus() -> list[str]:
    lines = []
    for row in TEXT.read_text(encoding="utf-8").splitlines():
        doc = json.loads(row)
        lines += [str(doc.get("question", "")), str(doc.get("answer", ""))]
    return lines


def tokenizer() -> Any:
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=VOCAB, special_tokens=list(SPECIAL.values()),
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)
    tok.train_from_iterator(corpus(), trainer=trainer)
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, **SPECIAL)
    fast.chat_template = CHAT_TEMPLATE
    return fast


def config(shape: str, vocab: int, ids: dict[str, int]) -> Any:
    common: dict[str, Any] = {"vocab_size": vocab, "hidden_size": 128, "num_hidden_layers": 2,
                              "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 32,
                              "max_position_embeddings": 4096, "tie_word_embeddings": False, **ids}
    if shape == "llama":
        from transformers import LlamaConfig

        return LlamaConfig(intermediate_size=256, **common)
    from transformers import GptOssConfig

    return GptOssConfig(intermediate_size=128, num_local_experts=4, num_experts_per_tok=2, sliding_window=16,
                        layer_types=["sliding_attention", "full_attention"], **common)


def make(directory: str, shape: str, seed: int) -> dict[str, Any]:
    import torch
    from transformers import AutoModelForCausalLM

    if shape not in SHAPES:
        raise ValueError(f"unknown shape {shape!r}: expected one of {', '.join(SHAPES)}")
    out = Path(directory)
    out.mkdir(parents=True, exist_ok=True)
    tok = tokenizer()
    ids = {"bos_token_id": tok.bos_token_id, "eos_token_id": tok.eos_token_id, "pad_token_id": tok.pad_token_id}
    cfg = config(shape, len(tok), ids)
    torch.manual_seed(seed)
    model = AutoModelForCausalLM.from_config(cfg)
    model = model.to(torch.bfloat16 if shape == "gpt-oss" else torch.float32)
    model.config.torch_dtype = "bfloat16" if shape == "gpt-oss" else "float32"
    model.save_pretrained(out, safe_serialization=True)
    tok.save_pretrained(out)
    return {"path": str(out.resolve()), "shape": shape, "seed": seed,
            "architecture": cfg.architectures[0] if cfg.architectures else type(model).__name__,
            "vocab_size": len(tok)}


if __name__ == "__main__":
    print(json.dumps(make(sys.argv[1], sys.argv[2], int(sys.argv[3]))))
