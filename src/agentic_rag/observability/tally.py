"""Counters and histograms kept as plain numbers and turned into metric families when scraped.

prometheus_client's `Counter.inc` and `Histogram.observe` check their state and take a lock
on every update (8 updates and ~0.1 M instructions of a durable message/send's 1.8 M). A
process that is the only writer of its metrics has nothing to share them with: these keep one
float per series and give the registry the families prometheus_client's would (same names,
samples, labels, bucket bounds and `_created` times). They are updated and scraped on the event
loop's thread only. Metrics several workers share (`PROMETHEUS_MULTIPROC_DIR`) stay
prometheus_client's, whose values live in files every worker reads (`metrics.Metrics`).
"""

import time
from bisect import bisect_left
from collections.abc import Callable, Iterable, Sequence

from prometheus_client import CollectorRegistry, Metric
from prometheus_client.registry import Collector
from prometheus_client.utils import INF, floatToGoString


class Count:
    """One series of a counter."""

    __slots__ = ("created", "value")

    def __init__(self) -> None:
        self.value = 0.0
        self.created = time.time()

    def inc(self, amount: float = 1) -> None:
        if amount < 0:
            raise ValueError("Counters can only be incremented by non-negative amounts.")
        self.value += amount

    def add_samples(self, family: Metric, labels: dict[str, str]) -> None:
        family.add_sample(family.name + "_total", labels, self.value)
        family.add_sample(family.name + "_created", labels, self.created)


class Buckets:
    """The upper bounds of a histogram's buckets, +Inf last, and their `le` labels."""

    def __init__(self, bounds: Sequence[float]) -> None:
        upper = [float(bound) for bound in bounds]
        if upper != sorted(upper):
            raise ValueError("Buckets not in sorted order")
        self.upper = upper if upper and upper[-1] == INF else [*upper, INF]
        self.labels = [floatToGoString(bound) for bound in self.upper]  # type: ignore[no-untyped-call]


class Distribution:
    """One series of a histogram: how many observations fell in each bucket, and their sum."""

    __slots__ = ("buckets", "counts", "created", "sum")

    def __init__(self, buckets: Buckets) -> None:
        self.buckets = buckets
        self.counts = [0.0] * len(buckets.upper)
        self.sum = 0.0
        self.created = time.time()

    def observe(self, amount: float) -> None:
        self.sum += amount
        # The first bucket whose upper bound is >= amount, as prometheus_client's loop finds it.
        self.counts[bisect_left(self.buckets.upper, amount)] += 1

    def add_samples(self, family: Metric, labels: dict[str, str]) -> None:
        total = 0.0
        for le, count in zip(self.buckets.labels, self.counts, strict=True):
            total += count
            family.add_sample(family.name + "_bucket", {**labels, "le": le}, total)
        family.add_sample(family.name + "_count", labels, total)
        if self.buckets.upper[0] >= 0:  # a sum of negative observations means nothing
            family.add_sample(family.name + "_sum", labels, self.sum)
        family.add_sample(family.name + "_created", labels, self.created)


class Family[S: (Count, Distribution)](Collector):
    """A labelled counter (`kind` "counter", series `Count`) or histogram ("histogram",
    `Distribution`): `labels(...)` gives the series to update."""

    def __init__(
        self,
        kind: str,
        name: str,
        documentation: str,
        labelnames: Sequence[str],
        new_series: Callable[[], S],
    ) -> None:
        self.kind, self.name, self.documentation = kind, name, documentation
        self.labelnames = tuple(labelnames)
        self._new_series: Callable[[], S] = new_series
        self._series: dict[tuple[str, ...], S] = {}

    def labels(self, *values: str) -> S:
        """The series of these label values, created at its first use."""
        if len(values) != len(self.labelnames):
            raise ValueError("Incorrect label count")
        key = tuple(str(value) for value in values)
        series = self._series.get(key)
        if series is None:
            series = self._series[key] = self._new_series()
        return series

    def describe(self) -> Iterable[Metric]:
        return [Metric(self.name, self.documentation, self.kind)]

    def collect(self) -> Iterable[Metric]:
        family = Metric(self.name, self.documentation, self.kind)
        for values, series in self._series.items():
            series.add_samples(family, dict(zip(self.labelnames, values, strict=True)))
        return [family]


def local_counter(
    registry: CollectorRegistry, name: str, documentation: str, labelnames: Sequence[str]
) -> Family[Count]:
    family = Family("counter", name, documentation, labelnames, Count)
    registry.register(family)
    return family


def local_histogram(
    registry: CollectorRegistry,
    name: str,
    documentation: str,
    labelnames: Sequence[str],
    bounds: Sequence[float],
) -> Family[Distribution]:
    buckets = Buckets(bounds)
    family = Family("histogram", name, documentation, labelnames, lambda: Distribution(buckets))
    registry.register(family)
    return family
