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


class BenchConfig(_Section):
    """Defaults for `pdctl bench ...` when run against this topology."""

    serve: BenchServe = Field(default_factory=BenchServe, description="`pdctl bench serve` defaults.")
