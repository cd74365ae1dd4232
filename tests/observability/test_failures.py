"""RepeatedFailure with `settle_seconds`: attempts from many requests at once, some of which
succeed while a database is going down, are one outage in the log, not several."""

import logging
import time

import pytest

from agentic_rag.observability.failures import RepeatedFailure


def fail(outage: RepeatedFailure) -> None:
    try:
        raise ConnectionRefusedError("nothing listens")
    except OSError:
        outage.failed()


def test_a_success_amid_failures_does_not_end_the_outage_until_it_settles(
    caplog: pytest.LogCaptureFixture,
) -> None:
    log = logging.getLogger("agentic_rag.test.settle")
    outage = RepeatedFailure(log, "answering calls", settle_seconds=0.2)
    with caplog.at_level(logging.INFO, logger=log.name):
        fail(outage)
        outage.succeeded()  # a connection still open while the database goes down
        fail(outage)
        fail(outage)
        time.sleep(0.3)  # the database is back: nothing failed for longer than settle_seconds
        outage.succeeded()
        outage.succeeded()
    messages = [r.getMessage() for r in caplog.records]
    assert len(messages) == 2, messages
    assert messages[0] == "answering calls failed; retrying quietly until it succeeds again"
    assert messages[1].startswith("answering calls works again after 3 failed attempts in ")
