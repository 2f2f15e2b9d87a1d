"""Documentation integrity, checked on every text file of the repository:

* every Markdown file cited anywhere (code, comments, YAML, XML, docs) exists in the repository;
* every relative Markdown link ``[text](path#anchor)`` resolves to a file inside the repository,
  and its anchor (also in ``PATH.md#anchor`` citations) names a heading of that file;
* a section cited as ``docs/REFERENCES.md, <section>`` or ``FILE.md "<section>"`` exists there;
* nothing cites documents that are not in the repository (the design notes and fact sheets the
  project started from).

Documentation files are named in capitals (``README.md``, ``docs/INTERFACES.md``); lower-case
``.md`` names are reports the tools write (``eval.md``, ``comparison.md``), not citations. A
cited name resolves against the citing file's directory or any directory above it, up to the
repository root: ``NAD.md`` from ``src/na_training/na_training/convert/run.py`` is
``src/na_training/NAD.md``, ``docs/INTERFACES.md`` from anywhere is the one under ``docs/``.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
THIS_FILE = Path(__file__).resolve()          # holds deliberately broken examples; not scanned
SKIP_DIRS = {".git", ".venv", "build", "install", "log", "runs", "demo_output", "__pycache__", ".pytest_cache",
             ".ruff_cache", ".bootstrap"}
MAX_BYTES = 1 << 20

# A cited documentation file: a capitalised *.md name, optionally with a relative directory path.
# The look-behind keeps URLs (".../README.md" after "/") and longer names out.
MD_CITATION = re.compile(r"(?<![\w./-])((?:[\w.-]+/)*[A-Z][A-Z0-9_]*\.md)(?![\w-])")
MD_ANCHOR = re.compile(r"(?<![\w./-])((?:[\w.-]+/)*[A-Z][A-Z0-9_]*\.md)#([\w-]+)")
MD_QUOTED_SECTION = re.compile(r"(?<![\w./-])((?:[\w.-]+/)*[A-Z][A-Z0-9_]*\.md)\)?,?[ \t]+\(?\"([^\"\n]+)\"")
REFERENCES_SECTION = re.compile(r"(?<![\w./-])(?:docs/)?REFERENCES\.md,\s*(?:(?:#|//|\*|<!--)\s*)?\"?(.{0,80})")
MARKDOWN_LINK = re.compile(r"\[[^\]\n]*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")
URL_SCHEME = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*:")
HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$")
FENCE = re.compile(r"^\s*(```|~~~)")

# Documents outside the repository that must not be cited (spelled in pieces so that this file
# does not match its own patterns).
OUTSIDE_DOCUMENTS = [
    ("fact sheet", re.compile(r"\b" + "FAC" + r"TS\b")),
    ("shared reference folder", re.compile(r"\b" + "shared" + r"/")),
    ("paper text file", re.compile("neuralactuator" + r"-paper\.txt")),
]


# ---- the checker (pure functions of a root directory, so the self-checks can run on a made-up tree)
def text_files(root: Path) -> list[Path]:
    """Every readable UTF-8 text file under ``root`` outside build, install and cache folders."""
    found = []
    for path in sorted(root.rglob("*")):
        rel = path.relative_to(root)
        if any(part in SKIP_DIRS or part.endswith(".egg-info") for part in rel.parts[:-1]):
            continue
        if not path.is_file() or path.resolve() == THIS_FILE or path.stat().st_size > MAX_BYTES:
            continue
        try:
            path.read_text(encoding="utf-8")
        except (UnicodeDecodeError, OSError):
            continue
        found.append(path)
    return found


def github_slug(title: str) -> str:
    """The anchor GitHub gives a heading: lower case, punctuation dropped, spaces to hyphens."""
    title = re.sub(r"`|\*\*|__", "", title).strip().lower()
    return re.sub(r"[^\w\- ]", "", title).replace(" ", "-")


def headings(markdown: str) -> list[str]:
    """Heading titles of a Markdown text, outside fenced code blocks."""
    titles, in_fence = [], False
    for line in markdown.splitlines():
        if FENCE.match(line):
            in_fence = not in_fence
            continue
        if not in_fence and (match := HEADING.match(line)):
            titles.append(match.group(2))
    return titles


def anchors(markdown: str) -> set[str]:
    """Anchors of every heading, with GitHub's -1, -2 suffixes for repeated titles."""
    seen: dict[str, int] = {}
    result = set()
    for title in headings(markdown):
        slug = github_slug(title)
        result.add(slug if slug not in seen else f"{slug}-{seen[slug]}")
        seen[slug] = seen.get(slug, 0) + 1
    return result


def section_titles(markdown: str) -> set[str]:
    """Heading titles, also without a trailing parenthesis ("Topics (all SI)" is cited as "Topics")."""
    titles = set()
    for title in headings(markdown):
        titles |= {title, re.sub(r"\s*\(.*\)$", "", title)}
    return titles


def resolve_citation(root: Path, citing: Path, cited: str) -> Path | None:
    """The file a cited ``.md`` path names: relative to the citing file's folder or any folder above it."""
    folder = citing.parent
    while True:
        candidate = (folder / cited).resolve()
        if candidate.is_file() and candidate.is_relative_to(root.resolve()):
            return candidate
        if folder.resolve() == root.resolve() or folder == folder.parent:
            return None
        folder = folder.parent


def markdown_body(markdown: str) -> str:
    """The text outside fenced code blocks (links inside code are examples, not links)."""
    lines, in_fence = [], False
    for line in markdown.splitlines():
        if FENCE.match(line):
            in_fence = not in_fence
            continue
        lines.append("" if in_fence else line)
    return "\n".join(lines)


def blank_link_targets(markdown: str) -> str:
    """The text with every Markdown link target replaced by spaces (the link check covers those)."""
    def blank(match: re.Match) -> str:
        whole, start = match.group(0), match.start(0)
        return whole[: match.start(1) - start] + " " * len(match.group(1)) + whole[match.end(1) - start:]

    return MARKDOWN_LINK.sub(blank, markdown)


def problems(root: Path) -> list[str]:
    """Every documentation problem under ``root``, as 'file:line: what' strings."""
    found: list[str] = []
    references = root / "docs" / "REFERENCES.md"
    reference_sections = sorted(section_titles(references.read_text()), key=len, reverse=True) \
        if references.is_file() else []

    def where(path: Path, text: str, offset: int) -> str:
        return f"{path.relative_to(root)}:{text.count(chr(10), 0, offset) + 1}"

    for path in text_files(root):
        text = path.read_text(encoding="utf-8")
        cited_text = blank_link_targets(text) if path.suffix == ".md" else text
        for what, pattern in OUTSIDE_DOCUMENTS:
            for match in pattern.finditer(text):
                found.append(f"{where(path, text, match.start())}: cites the {what} '{match.group(0)}', "
                             "which is not in the repository (cite docs/REFERENCES.md, <section>)")
        for match in MD_CITATION.finditer(cited_text):
            if resolve_citation(root, path, match.group(1)) is None:
                found.append(f"{where(path, text, match.start())}: cites {match.group(1)}, "
                             "which is not in the repository")
        for match in MD_ANCHOR.finditer(cited_text):
            target = resolve_citation(root, path, match.group(1))
            if target is not None and match.group(2) not in anchors(target.read_text()):
                found.append(f"{where(path, text, match.start())}: {match.group(1)} has no section "
                             f"#{match.group(2)}")
        for match in MD_QUOTED_SECTION.finditer(cited_text):
            target = resolve_citation(root, path, match.group(1))
            if target is not None and match.group(2) not in section_titles(target.read_text()):
                found.append(f"{where(path, text, match.start())}: {match.group(1)} has no section "
                             f"\"{match.group(2)}\"")
        for match in REFERENCES_SECTION.finditer(cited_text):
            cited = match.group(1)
            if not any(re.match(re.escape(title) + r"(?![\w-])", cited) for title in reference_sections):
                found.append(f"{where(path, text, match.start())}: docs/REFERENCES.md has no section at "
                             f"'{cited.strip()[:40]}'")
        if path.suffix == ".md":
            body = markdown_body(text)
            for match in MARKDOWN_LINK.finditer(body):
                link = match.group(1)
                if URL_SCHEME.match(link):
                    continue
                target_text, _, anchor = link.partition("#")
                target = path if not target_text else (path.parent / target_text).resolve()
                if not target.is_relative_to(root.resolve()) or not target.exists():
                    found.append(f"{where(path, body, match.start())}: link to {link} does not resolve "
                                 "inside the repository")
                elif anchor and target.suffix == ".md" and anchor not in anchors(target.read_text()):
                    found.append(f"{where(path, body, match.start())}: link to {link}: no such section")
    return found


# ---- the repository ------------------------------------------------------------------------------
def test_repository_documentation_is_consistent() -> None:
    report = problems(ROOT)
    assert report == [], "documentation problems:\n" + "\n".join(report)


def test_documentation_files_are_named_in_capitals() -> None:
    """The citation check above recognises documentation by its capitalised name; keep it that way."""
    lower = [str(p.relative_to(ROOT)) for p in text_files(ROOT)
             if p.suffix == ".md" and not re.fullmatch(r"[A-Z][A-Z0-9_]*", p.stem)]
    assert lower == []


@pytest.mark.parametrize("section", ["OpenManipulator-X", "XM430-W350", "Protocol 2.0", "Net F/T", "Serial F/T sensor",
                                     "Authors' setup", "Paper"])
def test_references_has_the_sections_code_cites(section: str) -> None:
    assert section in section_titles((ROOT / "docs" / "REFERENCES.md").read_text())


# ---- the oracle fails where it should ------------------------------------------------------------
def _tree(root: Path, files: dict[str, str]) -> Path:
    for name, content in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(content)
    return root


GOOD_TREE = {
    "README.md": "See [the design](docs/DESIGN.md#data-flow) and [refs](docs/REFERENCES.md#net-ft).\n"
                 "```bash\n# not a heading; [not a link](nowhere.md)\n```\n",
    "docs/DESIGN.md": "# Design\n## Data flow\nAs in [README](../README.md) and [below](#design).\n",
    "docs/REFERENCES.md": "# References\n## Net F/T\n## Topics (all SI)\n",
    "pkg/NOTES.md": "# Notes\n",
    "pkg/pkg/module.py": '"""Port 49152 (docs/REFERENCES.md, Net F/T); layout in NOTES.md and\n'
                        'docs/DESIGN.md "Data flow"; topics in docs/REFERENCES.md "Topics"; writes eval.md."""\n',
    "pkg/config.yaml": "port: 49152   # docs/REFERENCES.md,\n              # Net F/T\n",
}


def test_oracle_accepts_a_consistent_tree(tmp_path) -> None:
    assert problems(_tree(tmp_path, GOOD_TREE)) == []


@pytest.mark.parametrize(("name", "content", "expected"), [
    ("pkg/pkg/a.py", "# numbers: " + "FAC" + "TS §2\n", "fact sheet"),
    ("pkg/pkg/b.py", "# see " + "shared" + "/reference/notes.txt\n", "shared reference folder"),
    ("pkg/pkg/c.py", "# design in ARCHITECTURE.md\n", "cites ARCHITECTURE.md"),
    ("pkg/pkg/d.py", "# docs/MISSING.md\n", "cites docs/MISSING.md"),
    ("pkg/pkg/e.py", "# docs/REFERENCES.md, Serial F/T sensor\n", "no section at 'Serial F/T sensor'"),
    ("pkg/pkg/f.py", "# docs/REFERENCES.md, Net F/Tx\n", "no section at 'Net F/Tx'"),
    ("pkg/pkg/g.py", "# docs/DESIGN.md#missing-part\n", "no section #missing-part"),
    ("pkg/pkg/h.py", '# docs/DESIGN.md "Control flow"\n', 'no section "Control flow"'),
    ("docs/X.md", "# X\n[gone](GONE.md)\n", "link to GONE.md does not resolve"),
    ("docs/Y.md", "# Y\n[out](../../outside.txt)\n", "does not resolve inside the repository"),
    ("docs/Z.md", "# Z\n[bad](DESIGN.md#nope)\n", "link to DESIGN.md#nope: no such section"),
])
def test_oracle_reports_each_kind_of_problem(tmp_path, name: str, content: str, expected: str) -> None:
    root = _tree(tmp_path / "repo", {**GOOD_TREE, name: content})
    (tmp_path / "outside.txt").write_text("not in the repository\n")
    report = problems(root)
    assert len(report) == 1 and expected in report[0] and report[0].startswith(name), report


def test_github_slugs() -> None:
    assert github_slug("Protocol 2.0") == "protocol-20"
    assert github_slug("Net F/T") == "net-ft"
    assert github_slug("Authors' setup") == "authors-setup"
    assert github_slug("OpenManipulator-X") == "openmanipulator-x"
    assert anchors("# A\n## A\n") == {"a", "a-1"}
