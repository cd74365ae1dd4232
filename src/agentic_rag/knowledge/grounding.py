"""The check an LLM answer passes before it is returned: it says only what its cited passages say.

Deterministic, no second model. An answer fails when

- it cites nothing, or cites a number that is no source, or is only markers ("[3]");
- it says the sources do not answer (the quotes then serve better);
- a number in a sentence is in none of its cited passages (nor in the question);
- a sentence shares too few content words with its cited passages (an unsupported claim);
- its polarity disagrees with the cited text (negation cues: not, no, never, cannot, without,
  disable(d), off, fail(s), ...): a yes/no answer whose Yes or No is the opposite of
  what the passage closest to the question says, or a sentence that negates the passage sentence
  closest to it, or the other way round ("enforced by default" against "disabled by default").

A sentence without markers of its own is checked against every passage the answer cites.
"""

import itertools
import re
from collections.abc import Sequence
from dataclasses import dataclass

MIN_SUPPORT = 0.5
"""The least share of a sentence's content words that its cited passages must contain."""

_MARKERS = re.compile(r"\[(\d+(?:\s*[,;]\s*\d+)*)\]")
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[\"'(\[]?[A-Z0-9`])|\n+")
_WORD = re.compile(r"[A-Za-z0-9_]+(?:'[a-z]+)?")
_NUMBER = re.compile(r"(?<![\w.])\d+(?:[.,]\d+)*(?![\w])")
_YES_NO = re.compile(r"^\W*(yes|no)\b[\s,.:;!-]*", re.IGNORECASE)
_POLAR_QUESTION = re.compile(
    r"^\s*(is|are|am|was|were|does|do|did|can|could|will|would|should|shall|has|have|had|may|"
    r"might|must)\b",
    re.IGNORECASE,
)
_NO_ANSWER = re.compile(
    r"\b(sources?|passages?|context|documents?)\b[^.]*\b(do|does|did)\s*(not|n't)\s+"
    r"(say|contain|mention|answer|provide|specify|state|include)",
    re.IGNORECASE,
)
_NEGATION = re.compile(
    r"\b(not(?!\s+only\b)|no|never|none|nothing|neither|nor|cannot|without|disabl\w*|off|"
    r"fails?|unsupported|unable|impossible|prohibited|forbidden|avoid\w*)\b|n't\b",
    re.IGNORECASE,
)
# Where a compound sentence's clauses meet.
_CLAUSE = re.compile(r"[;,:]|\b(?:and|but|whereas|while)\b", re.IGNORECASE)
_DEFAULT = re.compile(r"\bdefault", re.IGNORECASE)
_NUMBER_WORDS = {
    word: str(value)
    for value, word in enumerate(
        ("two", "three", "four", "five", "six", "seven", "eight", "nine", "ten", "eleven"), start=2
    )
}
_STOPWORD_TEXT = """a about above after again all also am an and any are as at be because been
    before being
    below between both but by can could did do does doing down during each either else etc even
    ever every few for from further had has have having he her here hers herself him himself his
    how however i if in into is it its itself just let like may me might more most must my
    myself neither no nor not now of off on once one only or other our ours out over own per
    rather same shall she should so some such than that the their theirs them themselves then
    there these they this those through thus to too under until up upon us use used uses using
    very via was we were what when where whether which while who whom whose why will with would
    yes yet you your yours according source sources passage passages say says said never
    cannot none nothing without"""
_STOPWORDS = frozenset(_STOPWORD_TEXT.split())


@dataclass(frozen=True)
class Verdict:
    """`problem` is None when the answer passed; otherwise why it failed, in one phrase."""

    problem: str | None

    @property
    def grounded(self) -> bool:
        return self.problem is None


@dataclass(frozen=True)
class _Sentence:
    text: str
    cited: tuple[int, ...]


def check(question: str, answer: str, passages: Sequence[str]) -> Verdict:
    """Whether `answer` (with [n] markers numbering `passages` from 1) is grounded in them."""
    cited = {int(n) for group in _MARKERS.findall(answer) for n in re.split(r"[,;]", group)}
    if not cited:
        return Verdict("it cites no source")
    missing = sorted(n for n in cited if not 1 <= n <= len(passages))
    if missing:
        return Verdict(f"it cites [{missing[0]}], which is not one of the {len(passages)} sources")
    sentences = _sentences(answer)
    if not sentences:
        return Verdict("it is only citation markers, no answer")
    if _NO_ANSWER.search(_MARKERS.sub("", answer)):
        return Verdict("it says the sources do not answer the question")
    polar = _POLAR_QUESTION.match(question) is not None
    if not polar and not content_stems(" ".join(_YES_NO.sub("", s.text) for s in sentences)):
        return Verdict(
            "it does not answer the question (a bare Yes or No to a question that is not yes/no)"
        )
    everything = tuple(sorted(cited))
    for sentence in sentences:
        sources = [passages[n - 1] for n in (sentence.cited or everything)]
        problem = _sentence_problem(question, sentence, sources)
        if problem is not None:
            return Verdict(problem)
    return _polarity_problem(question, answer, [passages[n - 1] for n in everything])


def _sentences(answer: str) -> list[_Sentence]:
    """The answer's sentences with content, each with the markers it carries."""
    found: list[_Sentence] = []
    for part in _SENTENCE_END.split(answer.strip()):
        cited = tuple(int(n) for g in _MARKERS.findall(part) for n in re.split(r"[,;]", g))
        text = _MARKERS.sub("", part).strip()
        if _WORD.search(text):
            found.append(_Sentence(text, cited))
        elif found and cited:  # "... by default. [2]": the marker belongs to that sentence
            found[-1] = _Sentence(found[-1].text, found[-1].cited + cited)
    return found


def _sentence_problem(question: str, sentence: _Sentence, sources: Sequence[str]) -> str | None:
    evidence = " ".join(sources)
    known = _numbers(evidence) | _numbers(question)
    for number in sorted(_numbers(sentence.text)):
        if number not in known:
            return f"the number {number} is in none of its cited passages"
    claim = _YES_NO.sub("", sentence.text)
    words = content_stems(claim)
    if words:
        supported = words & content_stems(evidence)
        if len(supported) / len(words) < MIN_SUPPORT:
            unsupported = ", ".join(sorted(words - supported)[:4])
            return f"a sentence is not supported by its cited passages ({unsupported})"
        closest = _closest_sentences(claim, sources)
        if closest and all(_negated(claim) != _negated(c, claim) for c in closest):
            return f"a sentence contradicts its cited passage: {_shorten(closest[0])!r}"
    return None


def _polarity_problem(question: str, answer: str, sources: Sequence[str]) -> Verdict:
    """A Yes or No that says the opposite of the cited passage closest to the question."""
    said = _YES_NO.match(_MARKERS.sub("", answer))
    if said is None or not _POLAR_QUESTION.match(question):
        return Verdict(None)
    answer_says_yes = said.group(1).lower() == "yes"
    closest = _closest_sentences(question, sources)
    if _DEFAULT.search(question) and not any(_DEFAULT.search(c) for c in closest):
        # A question about a default is answered by a sentence that says what the default is.
        closest = _closest_sentences(question, sources, about=_DEFAULT)
        if not closest:
            return Verdict("it answers a question about a default, but no cited passage says it")
    asked = _negated(question)
    if closest and all((_negated(c, question) == asked) != answer_says_yes for c in closest):
        return Verdict(
            f"it answers {said.group(1).capitalize()}, but the cited passage says "
            f"{_shorten(closest[0])!r}"
        )
    return Verdict(None)


def _closest_sentences(
    text: str, sources: Sequence[str], *, about: re.Pattern[str] | None = None
) -> list[str]:
    """The sentences of `sources` closest to `text`: most content words shared, then most word
    pairs ("by default"); they must share two content words and half of `text`'s, so that they
    state the same thing. Ties are all kept. With `about`, only sentences matching it count,
    and two shared words suffice."""
    words, pairs = content_stems(text), _pairs(text)
    least = max(2, (len(words) + 1) // 2) if about is None else 2
    best: list[str] = []
    best_score = (least - 1, 0)
    for source in sources:
        for sentence in _SENTENCE_END.split(source):
            if about is not None and not about.search(sentence):
                continue
            score = (len(words & content_stems(sentence)), len(pairs & _pairs(sentence)))
            if score[0] < least:
                continue
            if score > best_score:
                best, best_score = [sentence.strip()], score
            elif score == best_score:
                best.append(sentence.strip())
    return best


def _pairs(text: str) -> set[tuple[str, str]]:
    words = [w[:6] for w in _WORD.findall(text.lower())]
    return set(itertools.pairwise(words))


def _negated(text: str, about: str | None = None) -> bool:
    """Whether the statement is negative: an odd number of negation cues. With `about`, in the
    clause of `text` that shares most content words with it: "writers do not block readers and
    readers do not block writers" holds two negations, and each clause is negative."""
    if about is not None:
        words = content_stems(about)
        clauses = [c for c in _CLAUSE.split(text) if c.strip()]
        text = max(clauses, key=lambda c: len(words & content_stems(c)), default=text)
    return len(_NEGATION.findall(text)) % 2 == 1


def _numbers(text: str) -> set[str]:
    digits = {m.replace(",", "") for m in _NUMBER.findall(text)}
    words = {_NUMBER_WORDS[w] for w in re.findall(r"[a-z]+", text.lower()) if w in _NUMBER_WORDS}
    return {d.rstrip(".") for d in digits} | words


def content_stems(text: str) -> set[str]:
    """Lower-cased words that carry content (identifiers split at "_"), cut to six letters (a
    crude, adequate stemmer: "constraints" and "constraint", "enabled" and "enable" meet)."""
    words = (part for m in _WORD.findall(text.lower()) for part in m.split("_"))
    return {w[:6] for w in words if len(w) > 2 and w not in _STOPWORDS and not w.isdigit()}


def _shorten(text: str, limit: int = 160) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 3].rsplit(" ", 1)[0] + "..."
