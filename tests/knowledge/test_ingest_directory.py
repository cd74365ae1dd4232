"""`ingest_pdf` by path (docs/security.md, "Files by path"): each tenant reads only its own
subdirectory of the ingestion directory; a path into another tenant's files gets the answer a
name that is not there gets, and no answer names the server's directories.

The product's server with two tenants' API keys and a JWT whose tenant is no directory name,
over A2A.
"""

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.support.knowledge import Caller
from tests.support.live import live_server
from tests.support.outcomes import failure, output
from tests.support.pdf_samples import text_pdf
from tests.support.security import AUDIENCE, ISSUER, SECRET, claims, create_key, hs256


@dataclass
class Tenants:
    directory: Path
    alpha: Caller
    beta: Caller
    odd: Caller  # a JWT whose tenant is "../alpha"


@pytest.fixture
def tenants(database_url: str, data_dir: Path, tmp_path: Path) -> Iterator[Tenants]:
    directory = tmp_path / "ingest"
    (directory / "alpha").mkdir(parents=True)
    (directory / "beta").mkdir()
    (directory / "alpha" / "ledger.pdf").write_bytes(text_pdf([["The vault code is 4471."]]))
    (directory / "shared.pdf").write_bytes(text_pdf([["Placed for everyone, once."]]))
    alpha_key = create_key(database_url, "alpha", ["read", "write"])
    beta_key = create_key(database_url, "beta", ["read", "write"])
    token = hs256(claims(tenant="../alpha"))
    with live_server(
        None,
        database_url=database_url,
        data_dir=data_dir,
        ingest_directory=directory,
        jwt_secret=SECRET,
        jwt_issuer=ISSUER,
        jwt_audience=AUDIENCE,
    ) as live:
        alpha, beta = Caller(live.url, alpha_key), Caller(live.url, beta_key)
        odd = Caller(live.url, "unused")
        odd.client.headers.pop("X-API-Key")
        odd.client.headers["Authorization"] = f"Bearer {token}"
        yield Tenants(directory, alpha, beta, odd)
        for caller in (alpha, beta, odd):
            caller.client.close()


def absent(path: str) -> str:
    return f"no file {path!r} in this tenant's ingestion directory (paths are relative to it)"


def test_a_tenant_reads_its_own_files_only_and_cannot_tell_anothers_exist(
    tenants: Tenants,
) -> None:
    # Beta: the same name in its own directory, the ways into alpha's, and every other way out,
    # each answered as a name that is not there, whether or not the file exists.
    for path in (
        "alpha/ledger.pdf",
        "ledger.pdf",
        "../alpha/ledger.pdf",
        "../alpha/missing.pdf",
        str(tenants.directory / "alpha" / "ledger.pdf"),
        "../shared.pdf",
        "../../" + "x" * 300 + ".pdf",  # too long a name for the file system
    ):
        said = failure(tenants.beta.skill("ingest_pdf", path=path))
        assert said == absent(path)
        assert str(tenants.directory) not in said.replace(path, "")
    ingested = output(tenants.alpha.skill("ingest_pdf", path="ledger.pdf"))
    assert ingested["documents"][0]["uri"] == "ledger.pdf"
    # Files left in the directory itself (the layout before tenants had their own) are nobody's.
    assert failure(tenants.alpha.skill("ingest_pdf", path="../shared.pdf")) == absent(
        "../shared.pdf"
    )
    # Beta found nothing of alpha's.
    assert output(tenants.beta.skill("hybrid_retrieve", query="vault code"))["hits"] == []


def test_a_tenant_whose_name_is_no_directory_reads_no_file_by_path(tenants: Tenants) -> None:
    said = failure(tenants.odd.skill("ingest_pdf", path="ledger.pdf"))
    assert said.startswith("reading files by path needs a tenant named with letters, digits")
    assert output(tenants.odd.skill("hybrid_retrieve", query="vault code"))["hits"] == []
