"""One candidate deployment: an AIConfigurator row read as SGLang roles, with pdctl's figures and verdict.

AIConfigurator describes a worker by attention TP (`tp`), attention DP (`dp`), MoE TP x EP and context
parallelism (`cp`); its GPUs are tp x pp x dp x cp. SGLang describes the same worker by `--tp-size` (all its
GPUs), `--dp-size` with `--enable-dp-attention` (attention TP = tp / dp) and `--ep-size` (MoE EP; MoE TP is
the rest of --tp-size). pdctl writes the SGLang form (AIConfigurator's own generator takes the GPU count of a
worker from moe_tp x moe_ep, which is why its artefacts are not used: docs/suggest.md).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from pdctl.suggest.kv import KvTerm


@dataclass(frozen=True)
class Role:
    """One role of a candidate, in SGLang's terms; `replicas` for the whole candidate (scaled to the GPUs)."""

    tp: int  # --tp-size: GPUs of one replica (pp 1; AIConfigurator tp x dp x cp)
    dp: int
    enable_dp_attention: bool
    ep: int  # --ep-size (1: MoE TP over the whole --tp-size)
    pp: int
    cp: int  # AIConfigurator's context parallelism (pdctl renders only 1)
    attn_tp: int
    replicas: int
    batch: int  # AIConfigurator's batch per attention-DP rank
    max_running_requests: int | None  # decode: the batch of the whole replica

    @property
    def gpus(self) -> int:
        return self.tp * self.pp

    def short(self) -> str:
        """`4x tp4 dp4 ep4`: replicas and what SGLang is told (tables, labels)."""
        dp = f" dp{self.dp}" if self.enable_dp_attention else ""
        ep = f" ep{self.ep}" if self.ep > 1 else ""
        pp = f" pp{self.pp}" if self.pp > 1 else ""
        return f"{self.replicas}x tp{self.tp}{pp}{dp}{ep}"

    def to_dict(self) -> dict[str, Any]:
        return {"tp": self.tp, "dp": self.dp, "enable_dp_attention": self.enable_dp_attention, "ep": self.ep,
                "pp": self.pp, "attn_tp": self.attn_tp, "replicas": self.replicas, "batch": self.batch,
                "max_running_requests": self.max_running_requests, "gpus_per_replica": self.gpus,
                **({"aic_cp": self.cp} if self.cp != 1 else {})}


def role_from_row(row: dict[str, Any], side: str, scale: int) -> Role:
    """SIDE ('p' or 'd') of an AIConfigurator row as an SGLang role; SCALE: copies of the unit deployed."""
    tp, dp, pp = int(row[f"({side})tp"]), int(row[f"({side})dp"]), int(row[f"({side})pp"])
    cp = int(row.get(f"({side})cp") or 1)
    return Role(tp=tp * dp * cp, dp=dp, enable_dp_attention=dp > 1, ep=int(row[f"({side})moe_ep"]), pp=pp, cp=cp,
                attn_tp=tp, replicas=int(row[f"({side})workers"]) * scale, batch=int(row[f"({side})bs"]),
                max_running_requests=int(row["(d)global_bs"]) if side == "d" else None)


@dataclass
class Candidate:
    """A candidate and everything pdctl found about it."""

    row: dict[str, Any]  # AIConfigurator's row (rounded as it rounds)
    prefill: Role
    decode: Role
    scale: int  # copies of AIConfigurator's unit deployment that fit the GPUs (its "gpu_cluster" figure)
    gpus: int  # the GPUs given
    kv: KvTerm | None = None
    ttft_ms: float = 0.0
    tokens_per_s_per_gpu: float = 0.0
    problems: list[dict[str, str]] = field(default_factory=list)  # {"rule", "message", "stage"}

    @property
    def shape(self) -> tuple[Any, ...]:
        """What makes two candidates the same deployment (the decode batch aside)."""
        return (self.prefill.tp, self.prefill.dp, self.prefill.ep, self.prefill.pp, self.prefill.cp,
                self.prefill.replicas, self.decode.tp, self.decode.dp, self.decode.ep, self.decode.pp,
                self.decode.replicas)

    @property
    def itl_ms(self) -> float:
        return float(self.row["tpot"])

    @property
    def ok(self) -> bool:
        return not self.problems

    @property
    def gpus_used(self) -> int:
        return self.prefill.replicas * self.prefill.gpus + self.decode.replicas * self.decode.gpus

    def label(self) -> str:
        return f"P {self.prefill.short()} -> D {self.decode.short()}"

    def to_dict(self) -> dict[str, Any]:
        row = self.row
        return {
            "prefill": self.prefill.to_dict(), "decode": self.decode.to_dict(),
            "aic": {"ttft_ms": row["ttft"], "tpot_ms": row["tpot"], "tokens_per_s_per_gpu": row["tokens/s/gpu"],
                    "tokens_per_s_per_gpu_cluster": aic_cluster_figure(row["tokens/s/gpu"],
                                                                       int(row["num_total_gpus"]), self.gpus),
                    "request_rate": row["request_rate"], "concurrency": row["concurrency"],
                    "gpus": row["num_total_gpus"], "tokens_per_s_per_user": row["tokens/s/user"]},
            "kv_transfer_ms": round(self.kv.transfer_ms, 3) if self.kv else None,
            "kv": self.kv.to_dict() if self.kv else None,
            "ttft_ms": round(self.ttft_ms, 3), "itl_ms": self.itl_ms,
            "tokens_per_s_per_gpu": self.tokens_per_s_per_gpu,
            "concurrency": int(row["concurrency"]) * self.scale,
            "request_rate": round(float(row["request_rate"]) * self.scale, 3),
            "gpus_used": self.gpus_used, "scale": self.scale,
            "verdict": "ok" if self.ok else "rejected", "rules": list(self.problems),
        }


def aic_cluster_figure(tokens_per_s_per_gpu: float, unit_gpus: int, gpus: int) -> float:
    """AIConfigurator's tokens/s/gpu_cluster: the unit deployment copied as often as it fits in GPUS, per GPU
    of all of them — the same float operations in the same order (pareto_analysis), so it is bit-identical."""
    return tokens_per_s_per_gpu * (gpus // unit_gpus) * unit_gpus / gpus


def from_row(row: dict[str, Any], gpus: int) -> Candidate:
    """A Candidate of an AIConfigurator row, scaled to as many copies as GPUS hold (at least one)."""
    scale = max(1, gpus // int(row["num_total_gpus"]))
    return Candidate(row=row, prefill=role_from_row(row, "p", scale), decode=role_from_row(row, "d", scale),
                     scale=scale, gpus=gpus)
