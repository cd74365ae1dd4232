"""Man pages of this machine as documents: rendered with man-db, parsed into sections.

A page is rendered with `man -l` (no hyphenation, no justification, one paragraph per line), so
that its text does not depend on a terminal. The rendered page becomes markdown for the product's
own parser (`markdown_sections`): `# name(section)`, then `## SECTION` and `### Subsection`
headings, and the body dedented. What the labeled set needs from a page is read off the same
rendering: the NAME line's description and the option entries (a tag such as `-a, --archive`
and its description), each of which can be held out of the indexed text.
"""

import gzip
import hashlib
import os
import re
import subprocess
from dataclasses import dataclass
from pathlib import Path

MAN_ROOT = Path("/usr/share/man")
# Wide enough that groff never breaks a paragraph: no hyphens, no wrapped lines to join.
RENDER_WIDTH = 2000
_BODY_INDENT = 7  # where man's body text starts
_SUBSECTION_INDENT = 3
_NAME_SPLIT = re.compile(r"\s+(?:-|\\-|\u2010|\u2013|\u2014)\s+")
# Lines that markdown_sections would take for structure (a heading, a fence, a rule, a table
# delimiter) are kept indented so that they stay text.
_MARKDOWN_BLOCK = re.compile(r"(#|```|~~~|(?:[-*_][ \t]*){3,}$|\|?[ \t]*:?-+:?[ \t]*\|)")
_OPTION_TAG = re.compile(r"-{1,2}[A-Za-z0-9?@#]")
_TAG_GAP = re.compile(r"\s{2,}")


class PageError(Exception):
    """A man page that cannot be used: it does not render, or has no NAME line."""


@dataclass(frozen=True)
class Line:
    indent: int
    text: str  # without the indent; "" for a blank line


@dataclass(frozen=True)
class Option:
    """An option entry: lines [start, end) of the page's body, its tag and its description."""

    start: int
    end: int
    tag: str
    description: str


@dataclass(frozen=True)
class Page:
    name: str  # "cp.1"
    path: Path
    title: str  # "cp(1)"
    description: str  # from the NAME line: "copy files and directories"
    lines: list[Line]  # the body, NAME section excluded, header and footer removed
    options: list[Option]

    def markdown(self, *, without: Option | None = None) -> str:
        """The page as markdown, without its NAME section and without the entry `without`."""
        out = [f"# {self.title}", ""]
        for i, line in enumerate(self.lines):
            if without is not None and without.start <= i < without.end:
                continue
            if not line.text:
                out.append("")
            elif line.indent == 0:
                out += ["", f"## {line.text}", ""]
            elif line.indent == _SUBSECTION_INDENT:
                out += ["", f"### {line.text}", ""]
            else:
                depth = max(line.indent - _BODY_INDENT, 0)
                if depth < 4 and _MARKDOWN_BLOCK.match(line.text):
                    depth = 4
                out.append(" " * depth + line.text)
        return _squeeze_blank_lines("\n".join(out)).strip() + "\n"


def source_sha256(path: Path) -> str:
    """The hash of the page's roff source (decompressed)."""
    with gzip.open(path) as f:
        return hashlib.sha256(f.read()).hexdigest()


def is_redirect(path: Path) -> bool:
    """A `.so` stub that only includes another page."""
    with gzip.open(path) as f:
        head = f.read(512).decode("latin-1")
    return any(line.startswith(".so ") for line in head.splitlines()[:5])


def render(path: Path) -> str:
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "LANG": "C.UTF-8",
        "LC_ALL": "C.UTF-8",
        "MANWIDTH": str(RENDER_WIDTH),
        "MAN_KEEP_FORMATTING": "",
    }
    done = subprocess.run(
        ["man", "--local-file", "--no-hyphenation", "--no-justification", str(path)],
        capture_output=True,
        env=env,
        timeout=60,
        check=False,
    )
    if done.returncode != 0 or not done.stdout.strip():
        raise PageError(f"{path}: man exited {done.returncode}: {done.stderr[:200]!r}")
    text = done.stdout.decode("utf-8", errors="replace")
    # Overstrikes (bold, underline) that man leaves when it thinks it writes to a terminal.
    return re.sub(r".\x08", "", text)


def parse(path: Path, rendered: str) -> Page:
    name = path.name.removesuffix(".gz")
    raw = [line.rstrip() for line in rendered.splitlines()]
    content = [i for i, line in enumerate(raw) if line.strip()]
    if len(content) < 3:
        raise PageError(f"{name}: the rendered page is empty")
    body = raw[content[0] + 1 : content[-1]]  # without the header and footer lines
    lines = [
        Line(len(line) - len(line.lstrip(" ")), line.strip()) if line.strip() else Line(0, "")
        for line in body
    ]
    description, lines = _cut_name_section(name, lines)
    stem, _, section = name.rpartition(".")
    return Page(
        name=name,
        path=path,
        title=f"{stem}({section})",
        description=description,
        lines=lines,
        options=_options(lines),
    )


def load(path: Path) -> Page:
    return parse(path, render(path))


def _cut_name_section(name: str, lines: list[Line]) -> tuple[str, list[Line]]:
    start = next((i for i, ln in enumerate(lines) if ln.indent == 0 and ln.text == "NAME"), None)
    if start is None:
        raise PageError(f"{name}: no NAME section")
    end = next(
        (i for i in range(start + 1, len(lines)) if lines[i].indent == 0 and lines[i].text),
        len(lines),
    )
    text = " ".join(ln.text for ln in lines[start + 1 : end] if ln.text)
    parts = _NAME_SPLIT.split(text, maxsplit=1)
    if len(parts) != 2 or not parts[1].strip():
        raise PageError(f"{name}: the NAME line has no description: {text[:120]!r}")
    return " ".join(parts[1].split()), lines[:start] + lines[end:]


def _options(lines: list[Line]) -> list[Option]:
    """Entries whose tag starts with a dash and whose description is more indented (man's
    .TP/.IP), or follows the tag on its line after a wide gap."""
    found = []
    i = 0
    while i < len(lines):
        line = lines[i]
        if line.indent < _BODY_INDENT or not _OPTION_TAG.match(line.text):
            i += 1
            continue
        gap = _TAG_GAP.search(line.text)
        tag, first = (line.text[: gap.start()], line.text[gap.end() :]) if gap else (line.text, "")
        end = i + 1
        while end < len(lines) and (not lines[end].text or lines[end].indent > line.indent):
            end += 1
        while end > i + 1 and not lines[end - 1].text:  # trailing blank lines stay
            end -= 1
        paragraph = [first] if first else []
        for following in lines[i + 1 : end]:
            if not following.text:
                if paragraph:
                    break
                continue
            paragraph.append(following.text)
        if paragraph:
            found.append(Option(i, end, tag, " ".join(" ".join(paragraph).split())))
        i = end
    return found


def _squeeze_blank_lines(text: str) -> str:
    return re.sub(r"\n{3,}", "\n\n", text)
