"""How late the event loop answers: a task that asks to wake every `LAG_INTERVAL_SECONDS` and
records how much later than asked it woke (`agentic_rag_event_loop_lag_seconds`).

Every request of a worker waits while something holds its loop (CPU-bound work run on it
instead of in a thread or a process): that wait shows here as lag, where an idle loop, or a
busy one whose steps are short, stays near zero."""

import asyncio

from agentic_rag.observability import metrics

LAG_INTERVAL_SECONDS = 0.5


async def watch_loop_lag(interval: float = LAG_INTERVAL_SECONDS) -> None:
    """Record the loop's lag every `interval` seconds, until cancelled."""
    loop = asyncio.get_running_loop()
    while True:
        asked = loop.time() + interval
        await asyncio.sleep(interval)
        metrics.record_loop_lag(max(0.0, loop.time() - asked))
