"""Sources: what turns a URL, a PDF, a transcript or a text into an `ExtractedDocument`.

- `markdown`: markdown or plain text -> sections under their heading paths.
- `fetch`: one resource through the SSRF guard, bounded (size, decompression, time, redirects),
  conditional on stored validators.
- `robots`: robots.txt rules per site and the per-host pacing of requests.
- `sitemaps`: the URLs (and `lastmod`) a sitemap lists.
- `html_page`: an HTML page -> its main text (trafilatura) and links.
- `web`: the crawler (`crawl`), its options, outcomes and frontier.
- `pdf`: text per page, OCR of scanned pages, streaming.
- `youtube`: transcripts downloaded from YouTube, or sent as WebVTT / SRT.
"""
