"""The sweep: which points `pdctl bench serve` measures, from the command line over the topology's `bench.serve`.

A point is one (concurrency, input length, output length) with a fixed number of requests, a warm-up and a
seed; the grid is every combination, in the order concurrency-major (the order a person reads the table in).
Pure logic: parsing lists like `1,4,16`, merging defaults, validating (UserError = exit 2 before anything runs).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from pdctl.errors import UserError
from pdctl.topology.bench import BenchServe

APIS = {"generate": "sglang", "completions": "sglang-oai", "chat": "sglang-oai-chat"}  # pdctl name -> tool backend


@dataclass(frozen=True)
class Point:
    """One measured point of the sweep."""

    index: int
    concurrency: int
    isl: int
    osl: int
    requests: int

    @property
    def key(self) -> tuple[int, int, int]:
        return (self.concurrency, self.isl, self.osl)


@dataclass(frozen=True)
class SweepSpec:
    """The whole sweep: the grid and what every point shares."""

    concurrency: tuple[int, ...]
    isl: tuple[int, ...]
    osl: tuple[int, ...]
    dataset: str = "random"
    num_prompts: int | None = None
    warmup: int = 2
    seed: int = 1
    api: str = "generate"
    request_rate: float | None = None  # None = as fast as the concurrency allows
    extra: dict[str, Any] = field(default_factory=dict)

    def requests_for(self, concurrency: int) -> int:
        """Requests per point: the asked number, else 4 per concurrent slot (at least 8), so every slot is
        busy for several requests and the percentiles rest on more than one wave."""
        return self.num_prompts if self.num_prompts is not None else max(8, 4 * concurrency)

    def points(self) -> list[Point]:
        """Every (concurrency, isl, osl) combination, concurrency-major."""
        out: list[Point] = []
        for c in self.concurrency:
            for i in self.isl:
                for o in self.osl:
                    out.append(Point(len(out), c, i, o, self.requests_for(c)))
        return out


def parse_int_list(text: str | None, option: str) -> tuple[int, ...] | None:
    """`1,4,16` -> (1, 4, 16); None stays None; anything else is a UserError naming OPTION."""
    if text is None:
        return None
    values: list[int] = []
    for part in str(text).split(","):
        part = part.strip()
        try:
            value = int(part)
        except ValueError:
            raise UserError(f"{option}: expected comma-separated positive integers, got {text!r}") from None
        if value < 1:
            raise UserError(f"{option}: every value must be at least 1, got {value}")
        values.append(value)
    if len(set(values)) != len(values):
        raise UserError(f"{option}: values repeat in {text!r}")
    return tuple(values)


def build_spec(defaults: Any | None, **cli: Any) -> SweepSpec:
    """The sweep from command-line values (None = not given) over DEFAULTS (a topology's `bench.serve`, or
    None for the built-in defaults, which are the same as the section's)."""
    if defaults is None:
        defaults = BenchServe()

    def pick(name: str) -> Any:
        value = cli.get(name)
        return value if value is not None else getattr(defaults, name, None)

    spec = SweepSpec(
        concurrency=tuple(pick("concurrency")), isl=tuple(pick("isl")), osl=tuple(pick("osl")),
        dataset=pick("dataset"), num_prompts=pick("num_prompts"), warmup=pick("warmup"), seed=pick("seed"),
        api=cli.get("api") or "generate", request_rate=cli.get("request_rate"),
    )
    validate(spec)
    return spec


def validate(spec: SweepSpec) -> None:
    """Reject a sweep the tool would refuse or that measures nothing (exit 2)."""
    for name in ("concurrency", "isl", "osl"):
        values = getattr(spec, name)
        if not values or any(not isinstance(v, int) or v < 1 for v in values):
            raise UserError(f"--{name}: every value must be a positive integer, got {list(values)}")
    if spec.num_prompts is not None and spec.num_prompts < 1:
        raise UserError(f"--num-prompts must be at least 1, got {spec.num_prompts}")
    if spec.warmup < 0:
        raise UserError(f"--warmup must be 0 or more, got {spec.warmup}")
    if spec.api not in APIS:
        raise UserError(f"--api must be one of {', '.join(APIS)}, got {spec.api!r}")
    if spec.request_rate is not None and not spec.request_rate > 0:
        raise UserError(f"--request-rate must be a positive number, got {spec.request_rate}")
    if min(spec.isl) < 2:
        raise UserError("--isl: prompts need at least 2 tokens")
