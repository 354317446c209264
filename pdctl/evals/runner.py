"""The eval loop: P requests in flight, each result scored and written the moment it completes.

Why asyncio + httpx rather than threads: 128 (or 1024) concurrent requests are just sockets, and a single
event loop makes a clean stop trivial — on Ctrl-C we stop handing out questions, cancel what is in flight, and
everything already written stays written. The loop knows nothing about rendering: it reports each record to
an `on_record` callback (the CLI's progress bar).
"""

from __future__ import annotations

import asyncio
import contextlib
import signal
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import httpx

from pdctl.evals.base import Item
from pdctl.evals.client import Completion, RequestConfig, RequestFailed, complete
from pdctl.evals.results import ResultsWriter, make_record
from pdctl.liveness import Liveness, Watchdog

Score = Callable[[str, Item], dict[str, Any]]  # pdctl.evals.base.Eval.score
GiveUp = Callable[[str], Awaitable[str | None]]  # pdctl.evals.client.complete's give_up


@dataclass
class Job:
    """One question to ask: the item, its full prompt and its results key."""

    item: Item
    prompt: str
    key: str


@dataclass
class RunOutcome:
    """What one run (this process) did: new records, wall time, whether it was interrupted, and the
    deployment's dead processes when that is why it stopped early (pdctl.liveness)."""

    records: list[dict] = field(default_factory=list)
    wall_s: float = 0.0
    interrupted: bool = False
    dead: Liveness | None = None


async def _ask(client: httpx.AsyncClient, cfg: RequestConfig, job: Job, score: Score,
               give_up: GiveUp | None = None) -> dict:
    try:
        completion: Completion | None = await complete(client, cfg, job.prompt, give_up)
        error, attempts, history = None, completion.attempts, None
    except RequestFailed as exc:
        completion, error, attempts, history = None, exc.message, exc.attempts, exc.history
    record = make_record(job.item, job.key, completion, error, attempts, score)
    if history:
        record["error_history"] = history
    return record


async def run_jobs(
    jobs: Sequence[Job],
    cfg: RequestConfig,
    parallel: int,
    writer: ResultsWriter,
    score: Score,
    on_record: Callable[[dict], None] | None = None,
    stop: asyncio.Event | None = None,
    watchdog: Watchdog | None = None,
) -> RunOutcome:
    """Ask every job with PARALLEL in flight, SCORE each answer (the eval's scorer); write and report each
    record; return early when STOP is set.

    When run in the main thread, SIGINT sets STOP (a clean stop) instead of raising KeyboardInterrupt.
    WATCHDOG (the run's processes, pdctl.liveness): asked when a request fails transiently; a dead process
    stops the eval at once (outcome.dead) instead of retrying every question against it.
    """
    stop = stop or asyncio.Event()
    outcome = RunOutcome()

    async def give_up(_failure: str) -> str | None:
        if watchdog is None:
            return None
        found = await asyncio.to_thread(watchdog.dead)
        if found is None:
            return None
        outcome.dead = found
        stop.set()
        return "stopped: " + found.summary()

    queue: asyncio.Queue[Job] = asyncio.Queue()
    for job in jobs:
        queue.put_nowait(job)

    loop = asyncio.get_running_loop()
    sigint_installed = False
    with contextlib.suppress(NotImplementedError, RuntimeError, ValueError):
        loop.add_signal_handler(signal.SIGINT, stop.set)
        sigint_installed = True

    limits = httpx.Limits(max_connections=parallel, max_keepalive_connections=parallel)
    start = time.monotonic()
    async with httpx.AsyncClient(limits=limits, timeout=cfg.timeout_s) as client:

        async def worker() -> None:
            while not stop.is_set():
                try:
                    job = queue.get_nowait()
                except asyncio.QueueEmpty:
                    return
                record = await _ask(client, cfg, job, score, give_up)
                writer.write(record)  # even if a stop came meanwhile: it is a finished answer
                outcome.records.append(record)
                if on_record is not None:
                    on_record(record)

        workers = [asyncio.create_task(worker()) for _ in range(max(1, min(parallel, len(jobs))))]
        all_done = asyncio.gather(*workers)
        stopper = asyncio.create_task(stop.wait())
        try:
            await asyncio.wait({all_done, stopper}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            if stop.is_set() and outcome.dead is None:
                outcome.interrupted = True
            for task in workers:
                task.cancel()
            stopper.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await all_done
            with contextlib.suppress(asyncio.CancelledError):
                await stopper
            if sigint_installed:
                loop.remove_signal_handler(signal.SIGINT)
    outcome.wall_s = time.monotonic() - start
    if not outcome.interrupted and outcome.dead is None and len(outcome.records) < len(jobs):
        outcome.interrupted = True
    return outcome
