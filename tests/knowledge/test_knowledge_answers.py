"""Answers say only what their sources say (issue 17, points 4, 9 and 12).

The grounding check (knowledge/grounding.py) is run on answers real models gave, or would give,
over SQLite's documentation (public domain): the local Qwen's "Yes, foreign key constraints are
enforced by default in SQLite." against passages that say they are off by default, a bare "[3]",
a wrong number, a citation of a source that does not exist. Through a live server, an LLM answer
that fails is replaced by the quotes with a note; the LLM is the test double of a hosted chat API
(KnowledgeChatDouble, tests/support/knowledge.py), these machines reach none.
"""

import re
from collections.abc import Iterator
from pathlib import Path

import pytest

from agentic_rag.knowledge import answers, grounding
from agentic_rag.knowledge.fusion import Fused
from agentic_rag.knowledge.results import Provenance, SearchHit
from agentic_rag.knowledge.retrieval import citation_relevance
from tests.support.knowledge import Caller, KnowledgeChatDouble
from tests.support.live import live_server, serve_in_thread
from tests.support.outcomes import output
from tests.support.security import create_key

# From SQLite's foreignkeys.html and limits.html (public domain), as the extractor stores them,
# escapes included (issue 17, point 4: the answer path must not pass them on).
FOREIGN_KEYS = (
    "## Enabling Foreign Key Support\n\n"
    "Foreign key constraints are disabled by default (for backwards compatibility), so must "
    "be enabled separately for each database connection. Assuming the library is compiled "
    "with foreign key constraints enabled, it must still be enabled by the application at "
    "runtime, using the PRAGMA foreign\\_keys command. For example:\n\n"
    "```\nsqlite> PRAGMA foreign_keys = ON;\n```\n\n"
    "It is not possible to enable or disable foreign key constraints in the middle of a "
    "multi-statement transaction (when SQLite is not in **autocommit mode**)."
)
ATTACHED = (
    "## Maximum Number Of Attached Databases\n\n"
    "The ATTACH statement is an SQLite extension that allows two or more databases to be "
    "associated to the same database connection and to operate as if they were a single "
    "database. The number of simultaneously attached databases is limited to "
    "SQLITE\\_MAX\\_ATTACHED which is set to 10 by default. The maximum number of attached "
    "databases cannot be increased above 125."
)
PASSAGES = [FOREIGN_KEYS, ATTACHED]
ENFORCED = "Are foreign key constraints enforced by default in SQLite?"
HOW_MANY = "How many databases can be attached by default?"
CONTRADICTING = "Yes, foreign key constraints are enforced by default in SQLite [1]."
GROUNDED = (
    "No. Foreign key constraints are disabled by default and must be enabled for each "
    "database connection with PRAGMA foreign_keys [1]."
)


def problem(question: str, answer: str) -> str | None:
    return grounding.check(question, answer, [answers.unescaped(p) for p in PASSAGES]).problem


def test_a_correct_cited_answer_passes() -> None:
    assert problem(ENFORCED, GROUNDED) is None
    assert problem(HOW_MANY, "By default, at most 10 databases can be attached [2].") is None
    assert problem(HOW_MANY, "By default 10. It can never be more than 125. [2]") is None


def test_the_contradicting_yes_is_rejected() -> None:
    found = problem(ENFORCED, CONTRADICTING)
    assert found is not None and "contradicts" in found and "disabled by default" in found
    # A bare Yes or No against the passage closest to the question is caught too.
    found = problem(ENFORCED, "Yes, they are [1].")
    assert found is not None and found.startswith("it answers Yes, but the cited passage says")
    found = problem("Are foreign key constraints disabled by default?", "No, they are not [1].")
    assert found is not None and found.startswith("it answers No, but the cited passage says")


def test_a_marker_alone_is_no_answer() -> None:
    assert problem(ENFORCED, "[3]") is not None
    assert problem(ENFORCED, "[1]") == "it is only citation markers, no answer"


def test_a_wrong_number_is_rejected() -> None:
    found = problem(HOW_MANY, "By default, at most 12 databases can be attached [2].")
    assert found == "the number 12 is in none of its cited passages"


def test_a_citation_of_a_missing_source_is_rejected() -> None:
    found = problem(ENFORCED, "No, foreign key constraints are disabled by default [4].")
    assert found == "it cites [4], which is not one of the 2 sources"


def test_an_uncited_or_unsupported_answer_is_rejected() -> None:
    assert problem(ENFORCED, "No, they are disabled by default.") == "it cites no source"
    found = problem(ENFORCED, "SQLite checks constraints with a background thread [1].")
    assert found is not None and found.startswith("a sentence is not supported")
    found = problem("Which PRAGMA enables foreign keys?", "Yes [1][2]")
    assert found is not None and found.startswith("it does not answer the question")
    # Yes to a question about a default, citing only a passage that does not say the default.
    found = problem("Are 10 databases attached by default?", "Yes [2].")
    assert found is None  # [2] says "set to 10 by default"
    found = problem("Is autocommit mode on by default in SQLite?", "Yes, it is [1].")
    assert found == "it answers a question about a default, but no cited passage says it"


def test_the_prompt_carries_no_backslash_escapes() -> None:
    assert any("\\_" in p for p in PASSAGES)  # the input has them
    messages = answers.prompt("What does PRAGMA foreign\\_keys do?", PASSAGES)
    for message in messages:
        assert "\\" not in message["content"]
    assert "PRAGMA foreign_keys command" in messages[-1]["content"]
    assert "SQLITE_MAX_ATTACHED" in messages[-1]["content"]


def test_the_extractive_answer_is_whole_sentences_without_markup() -> None:
    text = answers.extractive(ENFORCED, PASSAGES)
    lines = text.splitlines()
    assert lines[0] == f"{answers.NO_LLM}:"
    for marker in ("```", "**", "\\", "...", "##"):
        assert marker not in text
    quoted = re.sub(r"^\[\d\] ", "", lines[1])
    assert quoted.startswith("Foreign key constraints are disabled by default")
    source = " ".join(answers.plain(FOREIGN_KEYS).split())
    sentences = re.split(r"(?<=[.!?]) (?=[A-Z])", quoted)
    assert len(sentences) == answers.SENTENCES_PER_PASSAGE
    for sentence in sentences:  # each a whole sentence of the passage
        assert sentence[0].isupper() and sentence.endswith((".", ":")), sentence
        assert sentence in source
    assert "SQLITE_MAX_ATTACHED which is set to 10 by default." in answers.extractive(
        HOW_MANY, PASSAGES
    )


def hit(rank: int, score: float) -> SearchHit:
    page = f"https://bees.example/{rank}"
    where = Provenance(
        document_id=page,
        source_id="bees",
        source_kind="url",
        uri=page,
        title=page,
        chunk_id=rank,
        position=0,
        char_start=0,
        char_end=10,
    )
    return SearchHit(rank=rank, score=score, text=f"passage {rank}", provenance=where)


def ranks(hits: list[SearchHit]) -> list[int]:
    return [h.rank for h in hits]


def test_the_sources_are_the_hits_near_the_best() -> None:
    """Issue 33, point 3: [2] and [3] at 0.179 and 0 of a fused 2.0 were filler, not sources."""
    hits = [hit(1, 2.0), hit(2, 1.1), hit(3, 0.179), hit(4, 0.0)]
    fused = citation_relevance(None, hits, [])
    assert fused == [2.0, 1.1, 0.179, 0.0]
    assert ranks(answers.sources(hits, fused, 0.5)) == [1, 2]
    assert ranks(answers.sources(hits, fused, 0.05)) == [1, 2, 3]
    assert answers.sources(hits, fused, 0.0) == hits
    assert answers.sources([], [], 0.5) == []
    # With no relevance above 0 there is no scale to be far below on: every hit is a source.
    negative = [hit(1, -0.1), hit(2, -0.5)]
    assert answers.sources(negative, [-0.1, -0.5], 0.5) == negative


def test_each_reranker_is_cut_on_a_relevance_scale() -> None:
    # A cross-encoder's logits as probabilities: 4, 1 and -3 are 0.98, 0.73 and 0.05.
    logits = [hit(1, 4.0), hit(2, 1.0), hit(3, -3.0)]
    relevance = citation_relevance("cross-encoder", logits, [])
    assert [round(r, 2) for r in relevance] == [0.98, 0.73, 0.05]
    assert ranks(answers.sources(logits, relevance, 0.5)) == [1, 2]
    # MMR's values dock the second passage for resembling the first; its fused score says it
    # is as relevant, and it stays a source.
    picked = [hit(1, 0.9), hit(2, 0.02), hit(3, 0.01)]
    fused = [Fused(1, 2.0, {}), Fused(3, 0.1, {}), Fused(2, 1.8, {})]
    relevance = citation_relevance("mmr", picked, fused)
    assert relevance == [2.0, 1.8, 0.1]
    assert ranks(answers.sources(picked, relevance, 0.5)) == [1, 2]


@pytest.fixture
def alpha(database_url: str, data_dir: Path) -> Iterator[tuple[Caller, KnowledgeChatDouble]]:
    double = KnowledgeChatDouble(lambda prompt: CONTRADICTING if ENFORCED in prompt else GROUNDED)
    key = create_key(database_url, "alpha", ["read", "write"])
    with (
        serve_in_thread(double.app()) as url,
        live_server(
            None,
            database_url=database_url,
            data_dir=data_dir,
            llm_base_url=f"{url}/v1",
            llm_model="test-model",
        ) as live,
    ):
        caller = Caller(live.url, key)
        output(caller.skill("ingest_text", text=FOREIGN_KEYS, title="Foreign Key Support"))
        yield caller, double
        caller.client.close()


def test_a_failed_llm_answer_is_replaced_by_quotes_with_the_reason(
    alpha: tuple[Caller, KnowledgeChatDouble],
) -> None:
    caller, double = alpha
    answer = output(caller.skill("hybrid_retrieve", query=ENFORCED))["answer"]
    assert answer["mode"] == "extractive"
    assert answer["rejected"] == CONTRADICTING
    note = answer["note"]
    assert note.startswith("The LLM's answer was withheld because a sentence contradicts")
    assert answer["text"].startswith(f"{note}:\n[1] Foreign key constraints are disabled")
    assert "\\" not in double.requests[-1]["messages"][-1]["content"]

    kept = output(caller.skill("hybrid_retrieve", query="How are foreign keys enabled?"))
    assert kept["answer"]["mode"] == "llm"
    assert kept["answer"]["text"] == GROUNDED
    assert kept["answer"]["note"] is None and kept["answer"]["rejected"] is None


def test_a_quote_that_announces_a_list_goes_on_with_its_items() -> None:
    """A quote ending in "Advantages include:" says nothing by itself; the list's first items
    follow it, each whole, without their markers."""
    passage = (
        "There are advantages and disadvantages to using WAL instead of a rollback journal. "
        "Advantages include:\n\n"
        "1. WAL is significantly faster in most scenarios.\n"
        "2. WAL provides more concurrency as readers do not block writers.\n"
        "3. Disk I/O operations tend to be more sequential using WAL.\n"
        "4. WAL uses many fewer fsync() operations.\n"
        "5. The fifth advantage is left for the reader."
    )
    quoted = answers.best_sentences("What are the advantages of WAL?", passage)
    assert quoted.startswith("There are advantages and disadvantages")
    assert "Advantages include: WAL is significantly faster in most scenarios." in quoted
    assert quoted.endswith("WAL uses many fewer fsync() operations.")
    assert "fifth" not in quoted and "1." not in quoted


def test_the_local_models_two_contradictions_of_the_full_benchmark_are_rejected() -> None:
    """bench/answers on all 66 questions: the packaged model's two answers that contradicted
    their passages and passed. Each clause of a compound sentence has its own negation ("do
    not block ... and ... do not block" is negative twice, not positive), and "should be
    avoided" is the opposite of "should be used"."""
    wal = (
        "The second advantage of WAL-mode is that writers do not block readers and readers to "
        "do not block writers. This is mostly true."
    )
    verdict = grounding.check(
        "Do readers block writers in WAL mode?",
        "Yes, readers block writers in WAL mode. [1][2]",
        [
            wal,
            "WAL provides more concurrency as readers do not block writers and a writer "
            "does not block readers.",
        ],
    )
    assert not verdict.grounded and "cited passage" in (verdict.problem or "")
    autoincrement = (
        "The AUTOINCREMENT keyword imposes extra CPU, memory, disk space, and disk I/O overhead "
        "and should be avoided if not strictly needed. It is usually not needed."
    )
    verdict = grounding.check(
        "Should the AUTOINCREMENT keyword be used when it is not strictly needed?",
        "Yes, the AUTOINCREMENT keyword should be used when it is not strictly needed. [1][2]",
        [
            autoincrement,
            "In SQLite, a column with type INTEGER PRIMARY KEY is an alias for the ROWID.",
        ],
    )
    assert not verdict.grounded
    # The answers those passages do support still pass.
    assert grounding.check(
        "Do readers block writers in WAL mode?",
        "No, in WAL mode readers do not block writers. [1]",
        [wal],
    ).grounded
