"""GSM8K accuracy of a deployment, with SGLang's few_shot_gsm8k methodology (`pdctl eval gsm8k`).

Modules: `data` (GSM8K items from `datasets` or a JSONL file, few-shot examples), `prompt` (prompt text and
stop strings), `scoring` (SGLang's rule plus lm-eval's strict / flexible extraction), `client` (one request
over /generate, /v1/completions or /v1/chat/completions, with retries), `results` (the per-item JSONL and
resume), `runner` (the asyncio loop with P requests in flight), `summary` (the verdict document), `defaults`
(the topology's eval block for a run).
"""
