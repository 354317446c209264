"""The KV link a suggestion is priced on: GB/s and µs per descriptor, from the GPU's NIC, the user, or a measurement.

Why two numbers: SGLang moves a request's KV as one descriptor per layer K/V per send when prefill and decode
attention TP are equal, but as one descriptor per token per layer K/V (a few hundred bytes each) when they
differ (docs/plan.md). A link is fast or slow for the second kind by its per-descriptor cost, not its
bandwidth. Units are pdctl's everywhere: `gbps` = GB/s (1e9 bytes per second), as bench-transfer and
preflight report it — 400 Gb/s InfiniBand is 50.

Sources, in the order a user trusts them:
- `--transfer-from FILE`: a measurement. A bench-transfer document (`paths.per_token` and `paths.packed` move
  the same bytes with very different descriptor counts: the two runs give both numbers); a preflight document
  (each transfer's GB/s of SGLang's path plus its packed path's GB/s: the slowest verified pair); a document
  with one `gbps` and `descriptors` (bench-transfer `--stack sglang`): the bandwidth only, charged per byte.
- `--link-gbps G` (with `--us-per-descriptor U`): what the user says the link is.
- otherwise the GPU's nominal NIC (pdctl.suggest.names.SYSTEMS) and NOMINAL_US_PER_DESCRIPTOR, said so.
Figures are taken as what ONE prefill rank gets (a measurement over several rank pairs at once is thereby
spread over them: conservative).
"""

from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from pdctl.errors import UserError
from pdctl.suggest.names import SYSTEMS

# Posting one RDMA write through NIXL/UCX or Mooncake, order of magnitude: NIXL's LIBFABRIC backend spends
# ~2.4 µs of CPU per descriptor (ai-dynamo/nixl#1514: 18,880 descriptors, ~46 ms), UCX rc less. An assumption
# until measured: `--transfer-from` replaces it with the nodes' own number.
NOMINAL_US_PER_DESCRIPTOR = 1.0


@dataclass(frozen=True)
class Link:
    """GB/s and µs per descriptor one prefill rank gets towards the decode side; `source` says from where."""

    gbps: float
    us_per_descriptor: float
    source: str
    note: str | None = None

    @property
    def unlimited(self) -> bool:
        return math.isinf(self.gbps) and self.us_per_descriptor == 0

    def seconds(self, nbytes: float, descriptors: float) -> float:
        """Time to move NBYTES in DESCRIPTORS descriptors over this link (no queueing)."""
        wire = 0.0 if math.isinf(self.gbps) else nbytes / (self.gbps * 1e9)
        return wire + descriptors * self.us_per_descriptor * 1e-6

    def to_dict(self) -> dict[str, Any]:
        doc = asdict(self)
        doc["gbps"] = None if math.isinf(self.gbps) else self.gbps
        return doc


def unlimited() -> Link:
    """No KV term at all (AIConfigurator's own assumption): for comparing with its figures."""
    return Link(math.inf, 0.0, "none", "no KV transfer term (AIConfigurator's assumption)")


def nominal(system: str) -> Link:
    gbps = SYSTEMS[system][2]
    return Link(gbps, NOMINAL_US_PER_DESCRIPTOR, "nominal",
                f"{system}'s nominal RDMA NIC per GPU ({gbps:g} GB/s) and {NOMINAL_US_PER_DESCRIPTOR:g} µs per "
                "descriptor, assumed: measure the nodes (pdctl preflight / bench-transfer --json) and pass "
                "--transfer-from, or give --link-gbps")


def given(gbps: float, us_per_descriptor: float | None, source: str = "--link-gbps") -> Link:
    if not (gbps > 0 and math.isfinite(gbps)):
        raise UserError(f"--link-gbps must be a positive number of GB/s, got {gbps}")
    us = NOMINAL_US_PER_DESCRIPTOR if us_per_descriptor is None else us_per_descriptor
    if not (us >= 0 and math.isfinite(us)):
        raise UserError(f"--us-per-descriptor must be 0 or more, got {us_per_descriptor}")
    note = None if us_per_descriptor is not None else (
        f"{NOMINAL_US_PER_DESCRIPTOR:g} µs per descriptor assumed (--us-per-descriptor to set it)")
    return Link(gbps, us, source, note)


def from_file(path: str) -> Link:
    """A Link fitted from a bench-transfer or preflight JSON document (UserError on anything else)."""
    try:
        doc = json.loads(Path(path).read_text(encoding="utf-8"))
    except OSError as exc:
        raise UserError(f"--transfer-from {path}: cannot read it: {exc.strerror or exc}") from None
    except ValueError as exc:
        raise UserError(f"--transfer-from {path}: not JSON: {exc}") from None
    if not isinstance(doc, dict):
        raise UserError(f"--transfer-from {path}: expected a JSON object (bench-transfer or preflight --json)")
    if doc.get("ok") is False:
        raise UserError(f"--transfer-from {path}: the measurement failed (ok: false); a failed transfer has no "
                        "speed to price a suggestion with")
    source = f"--transfer-from {path}"
    try:
        if isinstance(doc.get("paths"), dict):
            return _from_bench(doc["paths"], source)
        if isinstance(doc.get("transfers"), list):
            return _from_preflight(doc["transfers"], source)
        if "gbps" in doc and "descriptors" in doc:
            return _positive(Link(float(doc["gbps"]), 0.0, source,
                                  "one measured path: its GB/s charged per byte, no separate per-descriptor cost"))
    except (KeyError, TypeError, ValueError) as exc:
        raise UserError(f"--transfer-from {path}: a field is missing or not a number: {exc}") from None
    raise UserError(f"--transfer-from {path}: neither a bench-transfer document (paths) nor a preflight "
                    "document (transfers) nor one with gbps and descriptors")


def _positive(link: Link) -> Link:
    if not (link.gbps > 0 and math.isfinite(link.gbps)):
        raise UserError(f"{link.source}: measured {link.gbps} GB/s: nothing to price a transfer with")
    return link


def fit(nbytes: float, slow_s: float, slow_desc: float, fast_s: float, fast_desc: float) -> tuple[float, float]:
    """(GB/s, µs per descriptor) from two transfers of the same NBYTES with SLOW_DESC and FAST_DESC descriptors:
    t = bytes / B + n * c. A fit that comes out negative (noise) falls back to the faster run's bandwidth and
    the rest of the slow run spread over its descriptors."""
    if slow_desc != fast_desc:
        c = (slow_s - fast_s) / (slow_desc - fast_desc)
        wire = fast_s - fast_desc * c
        if c >= 0 and wire > 0:
            return nbytes / wire / 1e9, c * 1e6
    gbps = nbytes / fast_s / 1e9
    c = max(0.0, slow_s - nbytes / (gbps * 1e9)) / max(1.0, slow_desc)
    return gbps, c * 1e6


def _from_bench(paths: dict[str, Any], source: str) -> Link:
    slow, fast = paths["per_token"], paths["packed"]
    key = "wire_seconds" if "wire_seconds" in slow and "wire_seconds" in fast else "seconds"
    gbps, us = fit(float(slow["bytes"]), float(slow[key]), float(slow["descriptors"]), float(fast[key]),
                   float(fast["descriptors"]))
    return _positive(Link(gbps, us, source, f"fitted from bench-transfer's two paths ({key})"))


def _from_preflight(transfers: list[dict[str, Any]], source: str) -> Link:
    fitted = []
    for t in transfers:
        if not t.get("verified") or not t.get("gbps"):
            continue
        details = t.get("details") or {}
        descriptors = float(t.get("descriptors") or 0)
        nbytes = float(t.get("bytes") or 0)
        seconds = t["us_per_descriptor"] * descriptors * 1e-6 if descriptors else 0.0
        packed = float(details.get("packed_gbps") or 0)
        if nbytes and seconds and packed:
            gbps = packed
            us = max(0.0, seconds - nbytes / (packed * 1e9)) / descriptors * 1e6
        else:
            gbps, us = float(t["gbps"]), 0.0
        fitted.append((gbps, us, f"{t.get('from')} -> {t.get('to')}"))
    if not fitted:
        raise UserError(f"{source}: no verified transfer in the preflight document")
    gbps, us, pair = min(fitted, key=lambda f: f[0])
    return _positive(Link(gbps, us, source, f"the slowest verified pair of {len(fitted)}: {pair}"))
