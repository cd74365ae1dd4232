"""What every fault module of the cluster shares: a client of each replica of its `running`
cluster."""

from collections.abc import Iterator

import pytest

from tests.support.cluster import Answers, Cluster


@pytest.fixture
def answers(running: Cluster) -> Iterator[tuple[Answers, Answers]]:
    a, b = (Answers(replica.url) for replica in running.replicas)
    yield a, b
    a.close()
    b.close()
