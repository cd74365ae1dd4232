"""A background loop's failures, logged once per change of state, not once per attempt.

While the database is down, a loop that polls it every second would log the same traceback
every second on every worker. `RepeatedFailure` logs the first failure with its traceback,
stays silent while the loop keeps failing, and logs one line with the count and the duration
when an attempt succeeds again.
"""

import logging
import time


class RepeatedFailure:
    def __init__(self, logger: logging.Logger, what: str) -> None:
        self._log, self._what = logger, what
        self.failures = 0
        self._since = 0.0

    def failed(self) -> None:
        """Call from the `except` block of a failed attempt."""
        self.failures += 1
        if self.failures == 1:
            self._since = time.monotonic()
            self._log.exception("%s failed; retrying quietly until it succeeds again", self._what)

    def succeeded(self) -> None:
        if self.failures:
            seconds = time.monotonic() - self._since
            self._log.warning(
                "%s works again after %d failed attempts in %.0f s",
                self._what,
                self.failures,
                seconds,
            )
            self.failures = 0
