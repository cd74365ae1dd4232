"""Real text for the knowledge benchmarks: the Debian man pages of this machine.

Pages are rendered with `man -l` (wide, so that paragraphs stay on one line) and turned into
markdown (`# name(section)`, `## SECTION`, body dedented), which the product's own parser and
chunker then read. The thousands of near-identical `gcloud_*` pages and translated pages are left
out. Rendered pages are cached in bench/.work/knowledge/ (rendering costs ~0.1 s a page).

Queries are the NAME lines of pages ("copy files and directories"): natural language, 3 to 8
words, mixing rare and frequent words.
"""

import gzip
import json
import os
import random
import re
import subprocess
from dataclasses import dataclass
from pathlib import Path

MAN_ROOT = Path("/usr/share/man")
WORK = Path(__file__).resolve().parent / ".work" / "knowledge"
_SECTIONS = ("man1", "man5", "man7", "man8", "man2", "man3")
_NAME_SPLIT = re.compile(r"\s+(?:-|\\-|\u2010|\u2013|\u2014)\s+")


@dataclass(frozen=True)
class Page:
    name: str  # "cp.1"
    markdown: str
    description: str  # the NAME line's description, "" if none


def page_files() -> list[Path]:
    files = []
    for section in _SECTIONS:
        for path in sorted((MAN_ROOT / section).glob("*.gz")):
            if path.name.startswith("gcloud") or path.stat().st_size < 600:
                continue  # gcloud: thousands of near-copies; tiny files: `.so` redirects
            files.append(path)
    return files


def _render(path: Path) -> str:
    with gzip.open(path, "rt", errors="replace") as f:
        head = f.read(200)
    if head.startswith(".so "):
        return ""
    env = {**os.environ, "MANWIDTH": "2000", "MAN_KEEP_FORMATTING": "", "LANG": "C.UTF-8"}
    done = subprocess.run(
        ["man", "--nh", "--nj", "-l", str(path)],
        capture_output=True,
        text=True,
        env=env,
        timeout=30,
        check=False,
    )
    return done.stdout if done.returncode == 0 else ""


def _markdown(name: str, rendered: str) -> tuple[str, str]:
    """(markdown, description) of a rendered page."""
    lines = rendered.splitlines()
    if len(lines) > 2:
        lines = lines[1:-1]  # header and footer
    out = [f"# {name}"]
    description = ""
    section = ""
    for line in lines:
        stripped = line.strip()
        if not stripped:
            out.append("")
            continue
        indent = len(line) - len(line.lstrip())
        if indent == 0 and stripped.upper() == stripped and len(stripped) < 60:
            section = stripped
            out.append(f"\n## {stripped.title()}\n")
        elif indent == 3 and len(stripped) < 60 and not stripped.startswith("-"):
            out.append(f"\n### {stripped}\n")
        else:
            text = stripped.lstrip("#|`~>*-_=")
            if section == "NAME" and not description:
                parts = _NAME_SPLIT.split(stripped, maxsplit=1)
                description = parts[1] if len(parts) == 2 else ""
            out.append(text or stripped.replace("-", " "))
    return re.sub(r"\n{3,}", "\n\n", "\n".join(out)).strip() + "\n", description


def pages(count: int, *, seed: int = 7) -> list[Page]:
    """`count` pages (or all there are), a seeded sample in a fixed order; cached."""
    WORK.mkdir(parents=True, exist_ok=True)
    cache = WORK / "manpages.json"
    known: dict[str, dict[str, str]] = json.loads(cache.read_text()) if cache.exists() else {}
    files = page_files()
    random.Random(seed).shuffle(files)
    chosen: list[Page] = []
    changed = False
    for path in files:
        if len(chosen) >= count:
            break
        name = path.name.removesuffix(".gz")
        if name not in known:
            markdown, description = _markdown(name, _render(path))
            known[name] = {"markdown": markdown, "description": description}
            changed = True
        entry = known[name]
        if len(entry["markdown"]) > 400:
            chosen.append(Page(name, entry["markdown"], entry["description"]))
    if changed:
        cache.write_text(json.dumps(known))
    return chosen


def queries(pages_: list[Page], count: int, *, seed: int = 11) -> list[str]:
    """NAME-line descriptions of 3 to 8 words, deduplicated, in a seeded order."""
    seen: set[str] = set()
    found = []
    for page in pages_:
        text = re.sub(r"[^\w\s'./+-]", " ", page.description).strip()
        words = text.split()
        if 3 <= len(words) <= 8 and text.lower() not in seen:
            seen.add(text.lower())
            found.append(" ".join(words))
    random.Random(seed).shuffle(found)
    return found[:count]
