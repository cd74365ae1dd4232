"""The labeled set's corpus, reproduced from the man pages of this machine.

`documents.json` names each document (a man page), the Debian package and version it comes
from, the sha256 of its roff source and of the markdown extracted from it (the NAME section and,
for some pages, one option entry held out: they are the queries). `reproduce` renders the pages
again and refuses to go on if any is missing or extracts to other text.
"""

import hashlib
import json
from collections.abc import Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass
from pathlib import Path

import manpages
import packages

HERE = Path(__file__).resolve().parent
DOCUMENTS = HERE / "documents.json"
QUERIES = HERE / "queries.json"
CACHE = HERE.parent / ".work" / "quality" / "rendered"  # gitignored (bench/.work/)
RENDER_WORKERS = 2
# Pages of these packages stay out: a separate evaluation is built from the PostgreSQL and
# Python documentation.
EXCLUDED_PACKAGES = ("postgres", "python")


class CorpusError(Exception):
    """The machine's man pages are not those the labeled set was built from."""


@dataclass(frozen=True)
class DocumentEntry:
    name: str  # "cp.1"
    section: str  # "man1"
    package: str
    version: str
    source_sha256: str
    held_out: str | None  # the tag of the option entry held out for a query, if any
    text_sha256: str

    @property
    def path(self) -> Path:
        return manpages.MAN_ROOT / self.section / f"{self.name}.gz"


@dataclass(frozen=True)
class Document:
    entry: DocumentEntry
    title: str
    markdown: str


@dataclass(frozen=True)
class Query:
    id: str
    kind: str  # "name" (the NAME line's description) or "option" (an option's description)
    text: str
    relevant: list[str]  # document names
    split: str  # "tuning" or "test"


def text_sha256(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def candidate_pages() -> list[tuple[Path, packages.Owner]]:
    """man1 and man8 pages a fresh machine of this image has: regular files (not aliases) of
    packages in the image's list at the same version, unmodified, that are not `.so` stubs."""
    image = packages.image_packages()
    owners = packages.page_owners()
    found = []
    for section in packages.SECTIONS:
        for path in sorted((manpages.MAN_ROOT / section).iterdir()):
            owner = owners.get(path)
            if (
                path.is_symlink()
                or owner is None
                or image.get(owner.package) != owner.version
                or any(word in owner.package for word in EXCLUDED_PACKAGES)
                or packages.md5_of(path) != owner.md5
                or manpages.is_redirect(path)
            ):
                continue
            found.append((path, owner))
    return found


def render_cached(path: Path) -> str:
    """The rendered page, from the cache when its source is unchanged (rendering ~2,000 pages
    takes minutes; the text hashes in documents.json catch any difference anyway)."""
    key = manpages.source_sha256(path)
    cached = CACHE / f"{key}.txt"
    if cached.exists():
        return cached.read_text()
    text = manpages.render(path)
    CACHE.mkdir(parents=True, exist_ok=True)
    partial = cached.with_suffix(".partial")
    partial.write_text(text)
    partial.replace(cached)
    return text


def load_pages(paths: Sequence[Path]) -> list[manpages.Page | manpages.PageError]:
    def one(path: Path) -> manpages.Page | manpages.PageError:
        try:
            return manpages.parse(path, render_cached(path))
        except manpages.PageError as exc:
            return exc

    with ThreadPoolExecutor(RENDER_WORKERS) as pool:
        return list(pool.map(one, paths))


def held_out_option(page: manpages.Page, tag: str | None) -> manpages.Option | None:
    if tag is None:
        return None
    matches = [o for o in page.options if o.tag == tag]
    if len(matches) != 1:
        raise CorpusError(f"{page.name}: {len(matches)} option entries tagged {tag!r}, not 1")
    return matches[0]


def read_entries(path: Path = DOCUMENTS) -> list[DocumentEntry]:
    return [DocumentEntry(**d) for d in json.loads(path.read_text())["documents"]]


def read_queries(path: Path = QUERIES) -> list[Query]:
    return [Query(**q) for q in json.loads(path.read_text())["queries"]]


def reproduce(entries: Sequence[DocumentEntry]) -> list[Document]:
    """Every document's text, extracted again from this machine's pages and checked."""
    problems = []
    present = []
    for entry in entries:
        if not entry.path.is_file():
            problems.append(f"{entry.path} is missing (Debian package {entry.package})")
        elif manpages.source_sha256(entry.path) != entry.source_sha256:
            problems.append(
                f"{entry.path} differs from the one the set was built from "
                f"({entry.package} {entry.version} expected)"
            )
        else:
            present.append(entry)
    pages = load_pages([e.path for e in present])
    documents = []
    for entry, page in zip(present, pages, strict=True):
        if isinstance(page, manpages.PageError):
            problems.append(str(page))
            continue
        markdown = page.markdown(without=held_out_option(page, entry.held_out))
        if text_sha256(markdown) != entry.text_sha256:
            problems.append(
                f"{entry.path}: the extracted text differs from the one the set was built from "
                "(another man-db or groff version renders it differently?)"
            )
            continue
        documents.append(Document(entry, page.title, markdown))
    if problems:
        shown = "\n  ".join(problems[:20])
        more = f"\n  ... and {len(problems) - 20} more" if len(problems) > 20 else ""
        raise CorpusError(
            f"{len(problems)} of {len(entries)} documents cannot be reproduced on this machine:"
            f"\n  {shown}{more}"
        )
    return documents


def write_json(path: Path, key: str, items: Iterable[object], **header: object) -> None:
    body = {**header, key: [asdict(i) for i in items]}  # type: ignore[call-overload]
    path.write_text(json.dumps(body, indent=1, ensure_ascii=False) + "\n")
