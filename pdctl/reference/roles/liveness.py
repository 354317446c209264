"""Telling a slow PD peer from a dead one, and the deadlines that follow from it.

Why: on a loaded machine (a CI runner, a laptop, two cores shared by ten processes) a live prefill can take
seconds to answer its bootstrap port; failing its rooms then kills requests that would have succeeded. Only
a refused connection says the process is gone. So:
- a probe that times out is SLOW: logged, never fatal by itself; the rooms waiting on that peer keep their
  deadline (`--transfer-timeout` after the last sign of progress) and time out only if it stays silent;
- a refused (or reset) connection is DEAD: after DEAD_AFTER in a row the peer's rooms fail at once;
- a peer that answers and still holds a room proves progress: the room's deadline moves to now + timeout
  (`RoomClock`), so a long queue at a slow prefill does not fail requests that are merely waiting their turn.
Both sides use it: decode's heartbeat lists the rooms decode holds, the prefill answers which it holds, and
each side extends its own waits for the rooms the other confirmed.
"""

from __future__ import annotations

import errno
import threading
import time

SLOW = "slow"
DEAD = "dead"
DEAD_AFTER = 2  # refused connections in a row before a peer counts as gone
_DEAD_ERRNOS = {errno.ECONNREFUSED, errno.ECONNRESET, errno.EHOSTUNREACH, errno.ENETUNREACH}


def classify(exc: BaseException) -> str:
    """SLOW for a timeout (the peer may be busy), DEAD for a refused/reset connection (nobody listens)."""
    seen: set[int] = set()
    todo: list[BaseException | None] = [exc]
    while todo:
        e = todo.pop()
        if e is None or id(e) in seen:
            continue
        seen.add(id(e))
        if isinstance(e, (ConnectionRefusedError, ConnectionResetError)):
            return DEAD
        if isinstance(e, OSError) and e.errno in _DEAD_ERRNOS:
            return DEAD
        if "Connection refused" in str(e):
            return DEAD
        todo.extend([e.__cause__, e.__context__, *[a for a in getattr(e, "args", ()) if isinstance(a, BaseException)]])
        reason = getattr(e, "reason", None)
        if isinstance(reason, BaseException):
            todo.append(reason)
    return SLOW


class PeerHealth:
    """Consecutive probe outcomes of one peer: `record(outcome)` returns True once the peer counts as dead."""

    def __init__(self) -> None:
        self.dead = 0
        self.slow = 0

    def record(self, outcome: str) -> bool:
        """OUTCOME is SLOW, DEAD or "ok"; True when DEAD_AFTER refusals came in a row."""
        if outcome == DEAD:
            self.dead += 1
            return self.dead >= DEAD_AFTER
        self.dead = 0
        self.slow = self.slow + 1 if outcome == SLOW else 0
        return False


class RoomClock:
    """When each room was last vouched for by the peer (thread-safe), so waits count silence, not queueing."""

    def __init__(self) -> None:
        self._seen: dict[int, float] = {}
        self._lock = threading.Lock()

    def touch(self, rooms: list[int] | set[int], now: float | None = None) -> None:
        """The peer confirmed ROOMS just now."""
        now = time.monotonic() if now is None else now
        with self._lock:
            for room in rooms:
                self._seen[int(room)] = now

    def deadline(self, room: int, start: float, timeout: float) -> float:
        """TIMEOUT seconds after START or after the peer last confirmed ROOM, whichever is later."""
        with self._lock:
            return max(start, self._seen.get(int(room), start)) + timeout

    def forget_older_than(self, cutoff: float) -> None:
        """Drop rooms not confirmed since CUTOFF (bounded memory)."""
        with self._lock:
            for room in [r for r, t in self._seen.items() if t < cutoff]:
                del self._seen[room]
