"""YouTube transcripts (sources/youtube.py): video URLs, the download through
youtube-transcript-api against a recorded YouTube, its errors, and WebVTT / SRT sent by a caller.

These machines cannot reach YouTube, so `RecordedYouTube` plays YouTube's part: it is a
`requests` transport adapter that answers the three requests the library makes (the watch
page, the innertube player call, the timedtext captions) with responses stored in
tests/data/youtube/, in YouTube's formats. Everything from the library's parsing on is real.
"""

import json
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest
import requests
from pydantic import ValidationError
from requests.adapters import BaseAdapter
from requests.structures import CaseInsensitiveDict
from youtube_transcript_api.proxies import GenericProxyConfig

from agentic_rag.config import Settings, load_cookies
from agentic_rag.knowledge.sources.youtube import (
    CaptionsDisabledError,
    CaptionsFormatError,
    InvalidVideoURLError,
    NoTranscriptError,
    RequestBlockedError,
    VideoUnavailableError,
    YouTubeTranscripts,
    parse_captions,
    video_id,
)

DATA = Path(__file__).resolve().parents[2] / "data" / "youtube"

# Video ids of the recorded scenarios (11 characters, like real ones).
OK = "pelicanFish"
NO_CAPTIONS = "wavesAtDawn"
GONE = "removedVid0"
BOT_CHECK = "botCheck000"
RATE_LIMITED = "tooMany4290"


class RecordedYouTube(BaseAdapter):
    """Test double of YouTube (unreachable here): serves recorded responses, keeps requests."""

    def __init__(self) -> None:
        super().__init__()
        self.sent: list[tuple[requests.PreparedRequest, dict[str, Any]]] = []

    def send(self, request: requests.PreparedRequest, **kwargs: Any) -> requests.Response:  # type: ignore[override]
        self.sent.append((request, kwargs))
        url = urlsplit(request.url or "")
        query = parse_qs(url.query)
        if url.path == "/watch":
            video = query["v"][0]
            if video == RATE_LIMITED:
                return self._answer(request, 429, b"", "text/html")
            return self._answer(request, 200, (DATA / "watch.html").read_bytes(), "text/html")
        if url.path == "/youtubei/v1/player":
            assert query["key"] == ["AIzaSyRecordedKeyForTests_0123456789abc"]
            assert isinstance(request.body, bytes)
            video = json.loads(request.body)["videoId"]
            name = {
                OK: "player_ok.json",
                NO_CAPTIONS: "player_captions_disabled.json",
                GONE: "player_unavailable.json",
                BOT_CHECK: "player_bot_check.json",
            }[video]
            player = (DATA / name).read_text().replace("PLACEHOLDER", video)
            return self._answer(request, 200, player.encode(), "application/json")
        if url.path == "/api/timedtext":
            captions = (DATA / f"timedtext_{query['lang'][0]}.xml").read_bytes()
            return self._answer(request, 200, captions, "text/xml")
        return self._answer(request, 404, b"", "text/html")

    def close(self) -> None:
        pass

    @staticmethod
    def _answer(
        request: requests.PreparedRequest, status: int, body: bytes, media_type: str
    ) -> requests.Response:
        response = requests.Response()
        response.status_code = status
        response._content = body
        response.headers = CaseInsensitiveDict({"Content-Type": f"{media_type}; charset=utf-8"})
        response.encoding = "utf-8"
        response.url = request.url or ""
        response.request = request
        return response


@pytest.mark.parametrize(
    "url",
    [
        f"https://www.youtube.com/watch?v={OK}",
        f"https://youtube.com/watch?feature=share&v={OK}&t=42s",
        f"http://m.youtube.com/watch?v={OK}",
        f"youtube.com/watch?v={OK}",
        f"https://youtu.be/{OK}?si=abc",
        f"https://www.youtube.com/shorts/{OK}",
        f"https://www.youtube.com/embed/{OK}?start=10",
        f"https://www.youtube-nocookie.com/embed/{OK}",
        f"https://www.youtube.com/live/{OK}",
        f"  {OK} ",
    ],
)
def test_video_ids_from_urls(url: str) -> None:
    assert video_id(url) == OK


@pytest.mark.parametrize(
    "url",
    [
        "https://vimeo.com/123456789",
        "https://www.youtube.com/watch?v=short",
        "https://www.youtube.com/channel/UCrecordedChannel000000",
        "https://evil.example/watch?v=pelicanFish",
        "not a url",
        "",
    ],
)
def test_what_is_not_a_video(url: str) -> None:
    with pytest.raises(InvalidVideoURLError, match="is not a YouTube video URL"):
        video_id(url)


def test_a_transcript_with_a_segment_per_cue() -> None:
    youtube = RecordedYouTube()
    document = YouTubeTranscripts(transport=youtube).fetch(f"https://youtu.be/{OK}")
    assert document.uri == f"https://www.youtube.com/watch?v={OK}"
    assert document.title == f"YouTube video {OK} (English)"
    assert document.metadata == {
        "video_id": OK,
        "language": "English",
        "language_code": "en",
        "generated": False,
    }
    assert len(document.sections) == 32
    assert {s.kind for s in document.sections} == {"segment"}
    second = document.sections[1]
    assert second.text == "today we're talking about how brown pelicans catch fish"
    assert second.start_seconds == 3.84
    assert second.end_seconds == pytest.approx(8.04)
    last = document.sections[-1]
    assert (last.text, last.start_seconds) == ("and see you in the next video", 124.32)
    assert "DDT" in document.text
    # Every request had a timeout (the library sets none).
    assert all(kwargs["timeout"] == 30.0 for _, kwargs in youtube.sent)


def test_languages_in_order_of_preference() -> None:
    document = YouTubeTranscripts(transport=RecordedYouTube()).fetch(OK, languages=["de", "es"])
    assert document.metadata["language_code"] == "es"
    assert document.metadata["generated"] is True
    assert document.sections[0].text == "hola a todos y bienvenidos al canal"


def test_no_transcript_in_the_languages_lists_those_available() -> None:
    with pytest.raises(NoTranscriptError) as error:
        YouTubeTranscripts(transport=RecordedYouTube()).fetch(OK, languages=["de", "fr"])
    assert str(error.value) == (
        f"video {OK} has no transcript in de, fr; "
        "available: en (English), es (Spanish (auto-generated), generated)"
    )


@pytest.mark.parametrize(
    ("video", "error", "message"),
    [
        (NO_CAPTIONS, CaptionsDisabledError, f"captions are disabled for video {NO_CAPTIONS}"),
        (GONE, VideoUnavailableError, f"video {GONE} is unavailable"),
        (BOT_CHECK, RequestBlockedError, "YouTube blocks requests from this network"),
        (RATE_LIMITED, RequestBlockedError, "YouTube rate-limits requests from this network"),
    ],
)
def test_failures_say_what_happened(video: str, error: type[Exception], message: str) -> None:
    with pytest.raises(error, match=message) as caught:
        YouTubeTranscripts(transport=RecordedYouTube()).fetch(video)
    if error is RequestBlockedError:
        assert "configure a proxy" in str(caught.value)
        assert "send the transcript itself as WebVTT or SRT" in str(caught.value)


def test_every_request_goes_through_the_configured_proxy() -> None:
    youtube = RecordedYouTube()
    proxy = GenericProxyConfig(
        http_url="http://user:pass@proxy.internal:3128",
        https_url="http://user:pass@proxy.internal:3128",
    )
    YouTubeTranscripts(proxy_config=proxy, transport=youtube).fetch(OK)
    assert len(youtube.sent) == 3  # watch page, player, captions
    for _, kwargs in youtube.sent:
        assert kwargs["proxies"]["https"] == "http://user:pass@proxy.internal:3128"


COOKIES = """# Netscape HTTP Cookie File
.youtube.com\tTRUE\t/\tTRUE\t0\tSID\tsigned-in-session
.youtube.com\tTRUE\t/\tTRUE\t2000000000\tPREF\thl=en
.example.com\tTRUE\t/\tTRUE\t0\tOTHER\tnot-for-youtube
"""


def test_cookies_from_a_netscape_file_go_with_every_request_to_youtube(tmp_path: Path) -> None:
    path = tmp_path / "cookies.txt"
    path.write_text(COOKIES)
    youtube = RecordedYouTube()
    YouTubeTranscripts(cookies=load_cookies(path), transport=youtube).fetch(OK)
    assert len(youtube.sent) == 3
    for request, _ in youtube.sent:
        sent = dict(pair.split("=", 1) for pair in request.headers["Cookie"].split("; "))
        assert sent["SID"] == "signed-in-session" and sent["PREF"] == "hl=en"
        assert "OTHER" not in sent  # another domain's cookie stays home


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("SID=abc; PREF=hl=en\n", "is not a Netscape cookies file"),
        (None, "cannot read the cookies file"),
    ],
)
def test_a_cookies_setting_that_names_no_cookies_file_is_refused(
    tmp_path: Path, text: str | None, message: str
) -> None:
    path = tmp_path / "cookies.txt"
    if text is not None:
        path.write_text(text)
    with pytest.raises(ValidationError) as refused:
        Settings(youtube_cookies_file=path)
    assert str(path) in str(refused.value) and message in str(refused.value)


async def test_async_fetch() -> None:
    document = await YouTubeTranscripts(transport=RecordedYouTube()).afetch(OK)
    assert len(document.sections) == 32


def test_webvtt_sent_by_the_caller() -> None:
    text = (DATA / "transcript.en.vtt").read_text()
    document = parse_captions(text, uri="upload://pelicans.vtt", title="Pelicans")
    assert document.mime_type == "text/vtt"
    assert [(s.text, s.start_seconds, s.end_seconds) for s in document.sections[:4]] == [
        ("hi everyone and welcome back to the channel", 0.0, 3.84),
        # Karaoke timestamps and <c> tags dropped; the repeated rolling cue merged into it.
        ("today we're talking about how brown pelicans catch fish", 3.84, 8.05),
        ("pelicans are large water birds found along warm coasts", 8.05, 11.64),
        ("the brown pelican is the only one that dives from the air", 11.64, 15.72),
    ]
    assert len(document.sections) == 9
    assert document.sections[-2].start_seconds == 64.2


def test_srt_sent_by_the_caller() -> None:
    text = (DATA / "transcript.en.srt").read_text()
    document = parse_captions(text, uri="upload://pelicans.srt", title="Pelicans")
    assert document.mime_type == "application/x-subrip"
    assert document.sections[1].text == "today we're talking about how brown pelicans catch fish"
    assert (document.sections[-1].start_seconds, document.sections[-1].end_seconds) == (
        3723.456,
        3725.0,
    )
    assert len(document.sections) == 6


@pytest.mark.parametrize(
    ("text", "format", "message"),
    [
        ("00:00:01.000 --> 00:00:02.000\nno header\n", "vtt", "not a valid VTT transcript"),
        ("just some words\n", None, "not a valid SRT transcript"),
        ("WEBVTT\n\n00:00:01.000 --> nonsense\nhello\n", None, r"has no text \(no readable"),
        ("WEBVTT\n\n00:00:01.000 --> 00:00:02.000\n<b></b>\n", None, "has no text"),
        ("hello", "sbv", "unknown captions format 'sbv'"),
    ],
)
def test_bad_captions(text: str, format: str | None, message: str) -> None:
    with pytest.raises(CaptionsFormatError, match=message):
        parse_captions(text, uri="upload://x", title="x", format=format)
