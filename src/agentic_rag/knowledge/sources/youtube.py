"""YouTube transcripts -> a document with one "segment" section per cue, timestamps kept.

Two ways in: `YouTubeTranscripts.fetch` downloads the captions with youtube-transcript-api
(proxies configurable: YouTube refuses many cloud addresses), and `parse_captions` reads a
transcript the caller sends as WebVTT or SRT, for networks that cannot reach YouTube at all.
Every failure of the download becomes a `TranscriptError` subclass that says what to do.

Cookies (a signed-in browser's, exported as a Netscape cookies file: config.load_cookies reads
it) go into the HTTP session this module gives youtube-transcript-api, whose own cookie option is
disabled in 1.2.5 ("not working properly with YouTube's most recent changes"): YouTube decides
what they are worth, and they are sent only to the domains they name.
"""

import asyncio
import io
import re
from collections.abc import Iterable, Sequence
from http.cookiejar import CookieJar
from typing import Any
from urllib.parse import parse_qs, urlsplit

import requests
import webvtt
from requests.adapters import BaseAdapter
from webvtt.errors import MalformedCaptionError, MalformedFileError
from youtube_transcript_api import (
    AgeRestricted,
    CouldNotRetrieveTranscript,
    InvalidVideoId,
    IpBlocked,
    NoTranscriptFound,
    RequestBlocked,
    TranscriptsDisabled,
    VideoUnavailable,
    VideoUnplayable,
    YouTubeTranscriptApi,
)
from youtube_transcript_api.proxies import ProxyConfig

from agentic_rag.knowledge.documents import ExtractedDocument, Section

_VIDEO_ID = re.compile(r"[A-Za-z0-9_-]{11}")
_YOUTUBE_HOSTS = frozenset(
    {
        "youtube.com",
        "www.youtube.com",
        "m.youtube.com",
        "music.youtube.com",
        "youtube-nocookie.com",
        "www.youtube-nocookie.com",
    }
)
_PATH_PREFIXES = ("/shorts/", "/embed/", "/live/", "/v/", "/e/")
_TAG = re.compile(r"<[^>]*>")


class InvalidVideoURLError(ValueError):
    pass


class TranscriptError(Exception):
    """A transcript that could not be had; the subclass says why, the message what to do."""


class NoTranscriptError(TranscriptError):
    def __init__(self, video_id: str, requested: Sequence[str], available: Sequence[str]) -> None:
        self.available = list(available)
        super().__init__(
            f"video {video_id} has no transcript in {', '.join(requested)}; "
            f"available: {', '.join(available) or 'none'}"
        )


class CaptionsDisabledError(TranscriptError):
    pass


class VideoUnavailableError(TranscriptError):
    pass


class RequestBlockedError(TranscriptError):
    pass


class TranscriptFetchError(TranscriptError):
    pass


class CaptionsFormatError(ValueError):
    """A WebVTT or SRT text that cannot be read."""


def video_id(video_url: str) -> str:
    """The video id of a watch, youtu.be, shorts, embed or live URL, or of a bare id."""
    candidate = video_url.strip()
    if _VIDEO_ID.fullmatch(candidate):
        return candidate
    try:
        parsed = urlsplit(candidate if "://" in candidate else f"https://{candidate}")
        host = (parsed.hostname or "").lower()
    except ValueError:  # a malformed port or address
        host = ""
    found: str | None = None
    if host == "youtu.be":
        found = parsed.path.lstrip("/").split("/", 1)[0]
    elif host in _YOUTUBE_HOSTS:
        if parsed.path == "/watch":
            found = next(iter(parse_qs(parsed.query).get("v", [])), None)
        elif parsed.path.startswith(_PATH_PREFIXES):
            found = parsed.path.split("/")[2]
    if found and _VIDEO_ID.fullmatch(found):
        return found
    raise InvalidVideoURLError(
        f"{video_url!r} is not a YouTube video URL (watch, youtu.be, shorts, embed or live) "
        "or an 11-character video id"
    )


def watch_url(video: str) -> str:
    return f"https://www.youtube.com/watch?v={video}"


class YouTubeTranscripts:
    """Downloads transcripts. `proxy_config` (youtube-transcript-api's `GenericProxyConfig`
    or `WebshareProxyConfig`) routes every request through a proxy. `transport` replaces the
    network adapter of the HTTP session: tests give a recorded YouTube, as these machines
    cannot reach the real one. `cookies` go with every request to the domains they name.
    Blocking: async callers use `afetch`.
    """

    def __init__(
        self,
        *,
        proxy_config: ProxyConfig | None = None,
        cookies: CookieJar | None = None,
        timeout_seconds: float = 30.0,
        transport: BaseAdapter | None = None,
    ) -> None:
        self.proxy_config = proxy_config
        self.cookies = cookies
        self.timeout_seconds = timeout_seconds
        self.transport = transport

    def fetch(self, video_url: str, languages: Sequence[str] = ("en",)) -> ExtractedDocument:
        """The transcript in the first of `languages` the video has (manual before generated)."""
        video = video_id(video_url)
        languages = list(languages) or ["en"]
        # A new client per call: youtube-transcript-api's client is not thread-safe.
        api = YouTubeTranscriptApi(proxy_config=self.proxy_config, http_client=self._session())
        try:
            transcripts = api.list(video)
            try:
                transcript = transcripts.find_transcript(languages)
            except NoTranscriptFound:
                available = [_describe(t) for t in transcripts]
                raise NoTranscriptError(video, languages, available) from None
            fetched = transcript.fetch()
        except CouldNotRetrieveTranscript as exc:
            raise _translate(video, exc) from None
        except requests.RequestException as exc:
            raise TranscriptFetchError(
                f"could not reach YouTube for video {video}: {exc}"
            ) from None
        segments = [(s.text, s.start, s.start + s.duration) for s in fetched.snippets]
        return _document(
            uri=watch_url(video),
            title=f"YouTube video {video} ({fetched.language})",
            mime_type="text/vtt",
            segments=segments,
            metadata={
                "video_id": video,
                "language": fetched.language,
                "language_code": fetched.language_code,
                "generated": fetched.is_generated,
            },
        )

    async def afetch(self, video_url: str, languages: Sequence[str] = ("en",)) -> ExtractedDocument:
        return await asyncio.to_thread(self.fetch, video_url, languages)

    def _session(self) -> requests.Session:
        session = _TimeoutSession(self.timeout_seconds)
        for cookie in self.cookies or ():
            session.cookies.set_cookie(cookie)
        if self.transport is not None:
            session.mount("https://", self.transport)
            session.mount("http://", self.transport)
        return session


def parse_captions(
    text: str, *, uri: str, title: str, format: str | None = None
) -> ExtractedDocument:
    """A transcript sent as WebVTT or SRT (`format` "vtt" or "srt"; None: by its first line).

    Cue markup (`<v Speaker>`, `<i>`, karaoke timestamps) is dropped, and a cue that repeats
    the one before it (as YouTube's rolling captions do) is merged into it. Malformed cues are
    skipped; a text with no readable cue at all is an error.
    """
    chosen = format or ("vtt" if text.lstrip("\ufeff \t\r\n").startswith("WEBVTT") else "srt")
    if chosen not in ("vtt", "srt"):
        raise CaptionsFormatError(f"unknown captions format {format!r}: use 'vtt' or 'srt'")
    try:
        captions = webvtt.WebVTT.from_buffer(io.StringIO(text.lstrip("\ufeff")), format=chosen)
    except (MalformedFileError, MalformedCaptionError) as exc:
        raise CaptionsFormatError(f"not a valid {chosen.upper()} transcript: {exc}") from None
    segments = [
        (caption.text, _seconds(caption.start_time), _seconds(caption.end_time))
        for caption in captions.captions
    ]
    mime_type = "text/vtt" if chosen == "vtt" else "application/x-subrip"
    return _document(
        uri=uri, title=title, mime_type=mime_type, segments=segments, metadata={"format": chosen}
    )


class _TimeoutSession(requests.Session):
    """A session whose requests time out (youtube-transcript-api sets none)."""

    def __init__(self, timeout_seconds: float) -> None:
        super().__init__()
        self.timeout_seconds = timeout_seconds

    def request(self, *args: Any, **kwargs: Any) -> requests.Response:
        kwargs.setdefault("timeout", self.timeout_seconds)
        return super().request(*args, **kwargs)


def _document(
    *,
    uri: str,
    title: str,
    mime_type: str,
    segments: Iterable[tuple[str, float, float]],
    metadata: dict[str, Any],
) -> ExtractedDocument:
    sections: list[Section] = []
    for raw, start, end in segments:
        text = " ".join(_TAG.sub("", raw).split())
        if not text:
            continue
        previous = sections[-1] if sections else None
        if previous is not None and text == previous.text:
            sections[-1] = Section(
                text=text, kind="segment", start_seconds=previous.start_seconds, end_seconds=end
            )
            continue
        sections.append(Section(text=text, kind="segment", start_seconds=start, end_seconds=end))
    if not sections:
        raise CaptionsFormatError(f"the transcript of {uri} has no text (no readable cue)")
    return ExtractedDocument(
        uri=uri, title=title, mime_type=mime_type, sections=sections, metadata=metadata
    )


def _seconds(timestamp: Any) -> float:
    return float(timestamp.in_milliseconds()) / 1000


def _describe(transcript: Any) -> str:
    kind = ", generated" if transcript.is_generated else ""
    return f"{transcript.language_code} ({transcript.language}{kind})"


def _translate(video: str, exc: CouldNotRetrieveTranscript) -> TranscriptError:
    if isinstance(exc, RequestBlocked):  # IpBlocked too
        what = "rate-limits" if isinstance(exc, IpBlocked) else "blocks"
        return RequestBlockedError(
            f"YouTube {what} requests from this network for video {video}: configure a proxy "
            "(youtube proxy settings), or send the transcript itself as WebVTT or SRT"
        )
    if isinstance(exc, TranscriptsDisabled):
        return CaptionsDisabledError(f"captions are disabled for video {video}")
    if isinstance(exc, VideoUnavailable | InvalidVideoId):
        return VideoUnavailableError(
            f"video {video} is unavailable (removed, private or no such id)"
        )
    if isinstance(exc, AgeRestricted):
        return VideoUnavailableError(f"video {video} is age-restricted: YouTube needs a sign-in")
    if isinstance(exc, VideoUnplayable):
        return VideoUnavailableError(f"video {video} cannot be played: {exc.cause}")
    return TranscriptFetchError(
        f"the transcript of video {video} could not be fetched: {exc.cause}"
    )
