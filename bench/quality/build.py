"""Build the labeled set (documents.json, queries.json) from this machine's man pages.

    .venv/bin/python bench/quality/build.py

Run once; its output is committed, and run.py reproduces the corpus from it. Two kinds of
query, each with one relevant document, and neither found verbatim anywhere in the indexed
corpus:

- `name`: the description on a page's NAME line ("copy files and directories" -> cp.1). The
  NAME section is left out of every indexed document.
- `option`: the description of one of a page's options ("don't copy the file data, just the
  attributes" -> cp.1). That option's entry (its tag and all its text) is left out of the
  indexed page, so the query asks for a page by what it can do, in words it does not contain.

Pages and queries are picked by a hash of their names (no randomness to seed), and the queries
are split into a tuning half and a test half, alternately within each kind.
"""

import hashlib
import re
import sys
from collections import Counter
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import corpus
import manpages
import packages

SALT = "agentic-rag quality set 1"
MAX_CHARS = 5_000
"""Pages up to this much text (without NAME): man pages chunk into many small sections (about
7 chunks for 5,000 characters), and the embedder sets the budget of a run."""
GCLOUD_PAGES = 300
"""A sample of the Google Cloud CLI's pages (generally available commands only): reference
documentation of another kind than the system's tools, and many near neighbours."""
NAME_QUERIES = 260
OPTION_QUERIES = 140
MIN_BODY_CHARS = 800  # a page that has a query is more than an alias stub
MIN_NAME_WORDS = 3
OPTION_WORDS = (6, 40)
_SENTENCE_END = re.compile(r"(?<=[a-z0-9)])\.\s")


def rank(name: str) -> str:
    return hashlib.sha256(f"{SALT}:{name}".encode()).hexdigest()


def normal(text: str) -> str:
    return " ".join(text.lower().split())


def option_query(option: manpages.Option) -> str | None:
    """The option's description as a query: its first sentence when the paragraph is long."""
    text = option.description
    low, high = OPTION_WORDS
    if len(text.split()) > high:
        text = _SENTENCE_END.split(text, maxsplit=1)[0] + "."
    words = len(text.split())
    return text if low <= words <= high else None


def pages_of(paths: Sequence[Path]) -> list[manpages.Page]:
    return [p for p in corpus.load_pages(paths) if isinstance(p, manpages.Page)]


def main() -> None:
    candidates = corpus.candidate_pages()
    gcloud = sorted(
        (
            (path, owner)
            for path, owner in candidates
            if owner.package == "google-cloud-cli"
            and not re.search(r"_(alpha|beta)(_|\.)", path.name)
        ),
        key=lambda c: rank(c[0].name),
    )
    system = [(p, o) for p, o in candidates if o.package != "google-cloud-cli"]
    owners = dict(candidates)
    print(f"{len(system)} system pages, {len(gcloud)} gcloud pages are candidates", flush=True)

    pages = [p for p in pages_of([p for p, _ in system]) if len(p.markdown()) <= MAX_CHARS]
    picked_gcloud: list[manpages.Page] = []
    for start in range(0, len(gcloud), 100):
        batch = pages_of([p for p, _ in gcloud[start : start + 100]])
        picked_gcloud += [p for p in batch if len(p.markdown()) <= MAX_CHARS]
        if len(picked_gcloud) >= GCLOUD_PAGES:
            break
    pages += picked_gcloud[:GCLOUD_PAGES]

    # The same text under two names (gcc-ar-12 and x86_64-linux-gnu-gcc-ar-12): keep one.
    seen: set[str] = set()
    unique = []
    for page in sorted(pages, key=lambda p: p.name):
        body = page.markdown().split("\n", 1)[1]
        if body not in seen:
            seen.add(body)
            unique.append(page)
    pages = unique
    print(f"{len(pages)} documents", flush=True)

    # Option queries first: they decide which entry each page holds out.
    full = {p.name: normal(p.markdown()) for p in pages}
    everything = "\x00".join(full.values())

    def nowhere_else(page: manpages.Page, option: manpages.Option, text: str) -> bool:
        """Not in another page, nor in this one once the option is held out."""
        query = normal(text)
        return everything.count(query) == full[page.name].count(query) and query not in normal(
            page.markdown(without=option)
        )

    option_candidates = []
    for page in sorted(pages, key=lambda p: rank(p.name)):
        if len(page.markdown()) < MIN_BODY_CHARS:
            continue
        tags = Counter(o.tag for o in page.options)
        for option in sorted(page.options, key=lambda o: rank(f"{page.name}:{o.tag}")):
            text = option_query(option)
            if text is not None and tags[option.tag] == 1 and nowhere_else(page, option, text):
                option_candidates.append((page, option, text))
                break
    option_picked = option_candidates[:OPTION_QUERIES]
    held_out = {page.name: option for page, option, _ in option_picked}
    haystack = "\x00".join(normal(p.markdown(without=held_out.get(p.name))) for p in pages)
    descriptions = Counter(normal(p.description) for p in pages)
    name_candidates = [
        (page, page.description)
        for page in sorted(pages, key=lambda p: rank(p.name))
        if len(page.markdown()) >= MIN_BODY_CHARS
        and len(page.description.split()) >= MIN_NAME_WORDS
        and descriptions[normal(page.description)] == 1
        and "manual page" not in page.description.lower()
        and normal(page.description) not in haystack
    ]

    queries: list[corpus.Query] = []
    for kind, picked in (
        ("name", [(p, t) for p, t in name_candidates[:NAME_QUERIES]]),
        ("option", [(p, t) for p, _, t in option_picked]),
    ):
        for i, (page, text) in enumerate(picked):
            queries.append(
                corpus.Query(
                    id=f"{kind}:{page.name}",
                    kind=kind,
                    text=text,
                    relevant=[page.name],
                    split="tuning" if i % 2 == 0 else "test",
                )
            )

    entries = []
    for page in sorted(pages, key=lambda p: p.name):
        owner: packages.Owner = owners[page.path]
        option = held_out.get(page.name)
        entries.append(
            corpus.DocumentEntry(
                name=page.name,
                section=page.path.parent.name,
                package=owner.package,
                version=owner.version,
                source_sha256=manpages.source_sha256(page.path),
                held_out=option.tag if option else None,
                text_sha256=corpus.text_sha256(page.markdown(without=option)),
            )
        )
    built = datetime.now(UTC).strftime("%Y-%m-%d")
    corpus.write_json(
        corpus.DOCUMENTS,
        "documents",
        entries,
        built=built,
        source="Debian man pages (man1, man8) of the image's packages, rendered by man-db",
        max_chars=MAX_CHARS,
        gcloud_pages=GCLOUD_PAGES,
    )
    corpus.write_json(corpus.QUERIES, "queries", queries, built=built)
    kinds = Counter(q.kind for q in queries)
    print(f"{len(entries)} documents, {len(queries)} queries {dict(kinds)}")


if __name__ == "__main__":
    main()
