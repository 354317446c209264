"""UCX_PROTO_INFO=y tables (in a process's log) -> which transport and device UCX chose per operation.

UCX prints one table per endpoint configuration and operation when the endpoint is first used:

    | <worker> inter-node cfg#0                                    |   (UCX >= 1.18: title, then operation)
    | remote memory write by ucp_put* from host memory to host     |
    | Range  | Description | Config            |
    | 0..inf | zero-copy   | tcp/eth1          |

older releases put title and operation on one row (`| perftest inter-node cfg#0 | active message by ... |`).
The Config column names the lanes, e.g. `rc_mlx5/mlx5_0:1`, `tcp/eth1`, `cma/memory`, or
`50% on rc_mlx5/mlx5_0:1 and 50% on rc_mlx5/mlx5_2:1`. NIXL moves KV with ucp_put (remote memory write), so
the write tables say which path the bytes took; `intra-node` between two nodes of a topology means UCX saw one
machine (shared memory, loopback) — the bytes never crossed a network.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

_TITLE = re.compile(r"^(?P<name>.*?)\s*\b(?P<locality>self|intra-node|inter-node)\s+cfg#(?P<cfg>\d+)\s*$")
_OLD_TITLE = re.compile(r"^(?P<name>.*?)\s+ep_cfg\[(?P<cfg>\d+)\]\s*$")
_RANGE = re.compile(r"^\d+(?:\.\.(?:\d+|inf))?$")
_LANE = re.compile(r"\b(?P<tl>[a-z][a-z0-9_]*)/(?P<dev>[A-Za-z0-9_.:\-]+?)(?:/path\d+)?(?=$|[\s,|])")
_WRITE = "remote memory write"


@dataclass
class ProtoTable:
    """One UCX protocol table: which endpoint, what operation, and (range, protocol, config) rows."""

    endpoint: str
    locality: str | None  # self | intra-node | inter-node (None: older UCX without it)
    cfg: str
    operation: str = ""
    rows: list[tuple[str, str, str]] = field(default_factory=list)

    @property
    def is_write(self) -> bool:
        """A remote memory write (ucp_put): how NIXL moves KV."""
        return self.operation.startswith(_WRITE)

    def lanes(self) -> list[str]:
        """Distinct `transport/device` lanes over all rows, in order."""
        out: list[str] = []
        for _, _, config in self.rows:
            for lane in config_lanes(config):
                if lane not in out:
                    out.append(lane)
        return out

    def bulk_lanes(self) -> list[str]:
        """The lanes of the row covering the largest messages (range up to inf): what bulk KV uses."""
        for rng, _, config in reversed(self.rows):
            if rng.endswith("inf"):
                return config_lanes(config)
        return self.lanes()


def config_lanes(config: str) -> list[str]:
    """'50% on rc_mlx5/mlx5_0:1 and 50% on rc_mlx5/mlx5_2:1' -> ['rc_mlx5/mlx5_0:1', 'rc_mlx5/mlx5_2:1']."""
    return list(dict.fromkeys(f"{m.group('tl')}/{m.group('dev')}" for m in _LANE.finditer(config)))


def _cells(line: str) -> list[str] | None:
    """The `|`-separated cells of a table line (after UCX's `[time] [host:pid:tid]` prefix), else None."""
    start = line.find("|")
    if start < 0 or "+--" in line[:start + 3] and line.strip().endswith("+"):
        return None
    body = line[start:].strip()
    if not body.endswith("|"):
        return None
    return [c.strip() for c in body.strip("|").split("|")]


def _title(text: str) -> ProtoTable | None:
    match = _TITLE.match(text) or _OLD_TITLE.match(text)
    if match is None:
        return None
    groups = match.groupdict()
    return ProtoTable(endpoint=groups["name"].strip(), locality=groups.get("locality"), cfg=groups["cfg"])


def parse_proto_info(text: str) -> list[ProtoTable]:
    """Every protocol table in TEXT (other log lines are ignored), in order."""
    tables: list[ProtoTable] = []
    current: ProtoTable | None = None
    for line in text.splitlines():
        cells = _cells(line)
        if not cells:
            continue
        if len(cells) in (1, 2) and (head := _title(cells[0])) is not None:
            current = head
            if len(cells) == 2:
                current.operation = cells[1]
            tables.append(current)
        elif current is None:
            continue
        elif len(cells) == 1 and not current.operation:
            current.operation = cells[0]
        elif len(cells) == 3 and _RANGE.match(cells[0].replace(" ", "")):
            current.rows.append((cells[0].replace(" ", ""), cells[1], cells[2]))
    return tables


@dataclass(frozen=True)
class WritePath:
    """How a process's RMA writes travel: the bulk lanes, and whether UCX saw the peer as another node."""

    lanes: list[str]
    localities: list[str]

    @property
    def crosses_nodes(self) -> bool:
        """True when every write endpoint is inter-node (older UCX without localities: unknown = True)."""
        return all(loc == "inter-node" for loc in self.localities) if self.localities else True

    def describe(self) -> str:
        where = ", ".join(dict.fromkeys(self.localities)) or "locality not printed"
        return f"{' + '.join(self.lanes) or 'no lanes'} ({where})"


def write_path(text: str) -> WritePath | None:
    """The RMA-write path of a process from its log, or None when no write table was printed (no transfer
    yet, or UCX_PROTO_INFO not set). `self` endpoints are left out: NIXL connects every agent to itself (for
    local transfers), and that endpoint carries no KV to a peer."""
    writes = [t for t in parse_proto_info(text) if t.is_write and t.rows and t.locality != "self"]
    if not writes:
        return None
    lanes: list[str] = []
    for table in writes:
        for lane in table.bulk_lanes():
            if lane not in lanes:
                lanes.append(lane)
    localities = [t.locality for t in writes if t.locality]
    return WritePath(lanes=lanes, localities=list(dict.fromkeys(localities)))
