"""QueryBatcher: the texts of concurrent one-text calls embedded together, in one model call.

A search embeds one short query. Run one by one, each query pays the model call's fixed cost
(and, locally, concurrent calls contend for the same cores); batched, eight short queries
cost about half the CPU each (bench/results/search-throughput-findings.md). No call waits for
company: a text that arrives while no batch runs starts one at once, and those that arrive
meanwhile go together in the next. A batch's vectors are the ones each text gets alone
(rows are independent in the model; padding is masked).
"""

import asyncio

import numpy as np

from agentic_rag.embedding.embedders import Embedder


class QueryBatcher:
    def __init__(self, embedder: Embedder, *, most: int = 32) -> None:
        """`most`: the most texts one model call embeds."""
        self._embedder, self._most = embedder, most
        self._waiting: list[tuple[str, asyncio.Future[np.ndarray]]] = []
        self._drain: asyncio.Task[None] | None = None

    async def embed(self, text: str) -> np.ndarray:
        """`text`'s L2-normalised float32 vector."""
        loop = asyncio.get_running_loop()
        if self._drain is None or self._drain.done() or self._drain.get_loop() is not loop:
            # None runs in this loop (a test may run several loops, one after the other).
            self._waiting = []
            self._drain = loop.create_task(self._batches())
        future: asyncio.Future[np.ndarray] = loop.create_future()
        self._waiting.append((text, future))
        return await future

    async def _batches(self) -> None:
        """Embeds what is waiting, a batch at a time, until nothing is."""
        await asyncio.sleep(0)  # the callers of this loop turn join the first batch
        while self._waiting:
            batch, self._waiting = self._waiting[: self._most], self._waiting[self._most :]
            live = [(text, future) for text, future in batch if not future.done()]
            if not live:
                continue  # their callers were cancelled
            try:
                vectors = await self._embedder.embed([text for text, _ in live])
            except Exception as exc:  # each caller gets the error its own call would have
                for _, future in live:
                    if not future.done():
                        future.set_exception(exc)
                continue
            for (_, future), vector in zip(live, vectors, strict=True):
                if not future.done():
                    future.set_result(vector)
