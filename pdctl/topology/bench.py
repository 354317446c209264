"""The topology's `bench:` section: defaults for `pdctl bench serve` against this deployment.

Why in the topology: the sweep that matters for a deployment (its concurrencies, its prompt and answer lengths,
the metrics a CI gate holds it to) belongs with the deployment, like `eval:` holds the accuracy floor. Every key
is optional; command-line options win over it.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field


class _Section(BaseModel):
    """As pdctl.topology.sections._Section (which imports this module): unknown keys are errors, no coercion."""

    model_config = ConfigDict(extra="forbid", strict=True, allow_inf_nan=False, validate_default=False)


class BenchServe(_Section):
    """Defaults for `pdctl bench serve`."""

    concurrency: list[int] = Field([1, 8], min_length=1, description="Concurrency levels of the sweep.")
    isl: list[int] = Field([256], min_length=1, description="Input (prompt) lengths in tokens.")
    osl: list[int] = Field([64], min_length=1, description="Output lengths in tokens (EOS ignored).")
    dataset: str = Field("random", description="random (random token ids), gsm8k (the shipped GSM8K prompts' "
                         "tokens cut or repeated to each length) or a path to a ShareGPT-style JSONL file.")
    num_prompts: int | None = Field(None, ge=1, description="Requests per point (default: 4 x concurrency, "
                                    "at least 8).")
    warmup: int = Field(2, ge=0, description="Warm-up requests before each point (not measured).")
    seed: int = Field(1, description="Seed of the prompts and of the request order.")
    max_regression: float | None = Field(None, ge=0, description="Gate: worst allowed regression vs the "
                                         "control, in percent (e.g. 5).")
    gate_metrics: list[str] = Field(["output_tok_s", "ttft_ms.p50", "itl_ms.p50"], min_length=1,
                                    description="Metrics the gate holds (see docs/bench-serve.md).")
    gpus: int | None = Field(None, ge=1, description="GPUs of the deployment, for per-GPU throughput "
                             "(default: sum of tp x pp x replicas of its roles).")


class BenchTargets(_Section):
    """The latency targets a prediction was made for."""

    ttft_ms: float = Field(gt=0, description="Time-to-first-token target, ms.")
    itl_ms: float = Field(gt=0, description="Inter-token latency target, ms.")


class BenchPredicted(_Section):
    """What a model (`pdctl suggest`) predicted for this deployment at one point; `pdctl bench serve` shows the
    measurement of that point next to it."""

    source: str = Field(description="What made the prediction (tool, versions, link).")
    concurrency: int = Field(ge=1, description="Concurrent requests of the predicted point.")
    isl: int = Field(ge=1, description="Input length of the predicted point, tokens.")
    osl: int = Field(ge=1, description="Output length of the predicted point, tokens.")
    ttft_ms: float = Field(ge=0, description="Predicted time to first token, ms.")
    itl_ms: float = Field(ge=0, description="Predicted inter-token latency, ms.")
    output_tok_s: float = Field(ge=0, description="Predicted output tokens per second of the whole deployment.")
    tokens_per_s_per_gpu: float | None = Field(None, ge=0, description="Predicted output tokens/s per GPU given.")
    request_rate: float | None = Field(None, ge=0, description="Predicted requests per second.")
    kv_transfer_ms: float | None = Field(None, ge=0, description="Predicted KV transfer time of one request, ms.")
    gpus: int | None = Field(None, ge=1, description="GPUs the prediction was made for.")
    targets: BenchTargets | None = Field(None, description="The targets the deployment was chosen for.")


class BenchConfig(_Section):
    """Defaults for `pdctl bench ...` when run against this topology."""

    serve: BenchServe = Field(default_factory=BenchServe, description="`pdctl bench serve` defaults.")
    predicted: BenchPredicted | None = Field(None, description="A prediction to compare `bench serve`'s "
                                             "measurement with (written by `pdctl suggest --out`).")
