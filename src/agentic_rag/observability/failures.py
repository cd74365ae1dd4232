"""A background loop's failures, logged once per change of state, not once per attempt.

While the database is down, a loop that polls it every second would log the same traceback
every second on every worker. `RepeatedFailure` logs the first failure with its traceback,
stays silent while the loop keeps failing, and logs one line with the count and the duration
when an attempt succeeds again.
"""

import logging
import sys
import time


class RepeatedFailure:
    def __init__(
        self,
        logger: logging.Logger,
        what: str,
        *,
        traceback: bool = True,
        meanwhile: str = "retrying quietly until it succeeds again",
        settle_seconds: float = 0.0,
    ) -> None:
        """`traceback` False: the first failure in one line (for an outage of a store, whose
        traceback says nothing more); `meanwhile`: what that line says happens until then.
        `settle_seconds`: where attempts come from many requests at once, some succeed while a
        database is going down (on a connection still open); only a success that long after
        the last failure ends the outage, so that one outage is not logged as several."""
        self._log, self._what = logger, what
        self._traceback, self._meanwhile = traceback, meanwhile
        self._settle = settle_seconds
        self.failures = 0
        self._since = self._last = 0.0

    def failed(self) -> None:
        """Call from the `except` block of a failed attempt."""
        self.failures += 1
        self._last = time.monotonic()
        if self.failures == 1:
            self._since = self._last
            if self._traceback:
                self._log.exception("%s failed; %s", self._what, self._meanwhile)
            else:
                error = sys.exc_info()[1]
                reason = f"{type(error).__name__}: {error}"
                self._log.warning("%s failed (%s); %s", self._what, reason, self._meanwhile)

    def succeeded(self) -> None:
        if self.failures and time.monotonic() - self._last >= self._settle:
            seconds = time.monotonic() - self._since
            self._log.warning(
                "%s works again after %d failed attempts in %.0f s",
                self._what,
                self.failures,
                seconds,
            )
            self.failures = 0
