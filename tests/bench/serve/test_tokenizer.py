"""The Hugging Face tokenizer pdctl writes for the reference engine counts exactly as the engine does, loaded the
way the load generator loads it (transformers' AutoTokenizer, in SGLang's environment)."""

from __future__ import annotations

import json
import subprocess

from pdctl.bench.serve.tokenizer import write_byte_tokenizer
from pdctl.reference.tokenizer import ByteTokenizer

TEXTS = ["", "hello", "Janet’s ducks lay 16 eggs", "ünïcödé ✓ 漢字", " leading and trailing ", "a\nb\tc\r\n"]

PROBE = """
import json, sys
from transformers import AutoTokenizer
tok = AutoTokenizer.from_pretrained(sys.argv[1])
texts = json.loads(sys.argv[2])
print(json.dumps({"encoded": [tok.encode(t) for t in texts],
                  "decoded": [tok.decode(tok.encode(t), skip_special_tokens=True) for t in texts],
                  "bos": tok.bos_token_id, "eos": tok.eos_token_id, "special": tok.num_special_tokens_to_add(),
                  "vocab": tok.vocab_size, "ids": [tok.decode([i]) for i in (65, 10, 256, 257)]}))
"""


def test_hf_tokenizer_encodes_and_decodes_like_the_engine(tmp_path, sglang_python: str) -> None:
    path = write_byte_tokenizer(tmp_path / "tok")
    done = subprocess.run([sglang_python, "-c", PROBE, str(path), json.dumps(TEXTS)], capture_output=True,
                          text=True, timeout=300, check=True, env={"HF_HUB_OFFLINE": "1", "PATH": "/usr/bin"})
    got = json.loads(done.stdout.strip().splitlines()[-1])
    engine = ByteTokenizer()
    assert got["encoded"] == [engine.encode(t) for t in TEXTS]
    assert got["decoded"] == TEXTS
    assert (got["bos"], got["eos"], got["special"], got["vocab"]) == (256, 257, 1, 258)
    assert got["ids"] == ["A", "\n", "<s>", "</s>"]
