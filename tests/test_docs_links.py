"""Every relative Markdown link in README.md, ARCHITECTURE.md and docs/*.md resolves: the file
exists, and where the link names a `#anchor` in a Markdown file, that file has the heading (GitHub's
slug rules). setup.py's doc references exist too."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOCS = ["README.md", "ARCHITECTURE.md"] + sorted(f"docs/{p.name}" for p in (ROOT / "docs").glob("*.md"))

_FENCE = re.compile(r"^(```|~~~).*?^\1", re.M | re.S)
_INLINE_CODE = re.compile(r"`[^`\n]*`")
_LINK = re.compile(r"!?\[[^\]]*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
_HEADING = re.compile(r"^#{1,6}\s+(.+?)\s*#*\s*$", re.M)
_HTML_ANCHOR = re.compile(r"<a\s+(?:name|id)=\"([^\"]+)\"", re.I)


def _prose(text: str) -> str:
    """The text outside fenced code blocks (links there are examples, not links)."""
    return _FENCE.sub("", text)


def slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, markup and punctuation dropped, spaces to '-'."""
    s = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading)  # a link in a heading keeps its text
    s = s.strip().lower().replace("`", "")
    s = re.sub(r"[^\w\- ]", "", s)
    return s.replace(" ", "-")


def anchors(path: Path) -> set[str]:
    text = _prose(path.read_text(encoding="utf-8"))
    seen: dict[str, int] = {}
    out = set(_HTML_ANCHOR.findall(text))
    for h in _HEADING.findall(text):
        base = slug(h)
        n = seen.get(base, 0)
        seen[base] = n + 1
        out.add(base if n == 0 else f"{base}-{n}")
    return out


def links(rel: str) -> list[str]:
    text = _prose((ROOT / rel).read_text(encoding="utf-8"))
    return [t for t in _LINK.findall(text) if not re.match(r"^[a-z][a-z0-9+.-]*:", t)]


def test_the_documents_exist():
    for rel in ("README.md", "ARCHITECTURE.md", "docs/compatibility.md"):
        assert (ROOT / rel).is_file(), rel


def test_slug_follows_github():
    assert slug('`format("omnigraph")` and the JVM paths') == "formatomnigraph-and-the-jvm-paths"
    assert slug("Quarantine (`rejectedRowsPath`)") == "quarantine-rejectedrowspath"
    assert slug("Known limits, and why") == "known-limits-and-why"


@pytest.mark.parametrize("rel", DOCS)
def test_relative_links_resolve(rel):
    if not (ROOT / rel).exists():
        pytest.fail(f"{rel} is missing")
    src = ROOT / rel
    broken = []
    for target in links(rel):
        file_part, _, anchor = target.partition("#")
        dest = (src.parent / file_part).resolve() if file_part else src
        if not dest.exists():
            broken.append(f"{target} (no such file)")
            continue
        if anchor and dest.suffix == ".md" and anchor.lower() not in anchors(dest):
            broken.append(f"{target} (no heading #{anchor} in {dest.relative_to(ROOT)})")
    assert not broken, f"{rel}: broken links: {broken}"


def test_setup_py_doc_links_exist():
    text = (ROOT / "setup.py").read_text(encoding="utf-8")
    refs = set(re.findall(r"((?:docs/)?[\w./-]+\.md)\b", text))
    assert refs, "setup.py names no document"
    missing = [r for r in sorted(refs) if not (ROOT / r).exists()]
    assert not missing, f"setup.py names documents that do not exist: {missing}"
