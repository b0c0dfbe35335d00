"""bench/common.py: a results page's writer rewrites only its own marked block."""

from __future__ import annotations

from bench import common

BEGIN, END = "<!-- x: begin -->", "<!-- x: end -->"


def test_replace_section_keeps_the_analysis_around_its_block(tmp_path):
    page = tmp_path / "results" / "page.md"
    common.replace_section(page, BEGIN, END, f"{BEGIN}\nfirst\n{END}", prepend=True)
    page.write_text(page.read_text(encoding="utf-8") + "Analysis written by hand.\n", encoding="utf-8")
    common.replace_section(page, BEGIN, END, f"{BEGIN}\nsecond\n{END}", prepend=True)
    assert page.read_text(encoding="utf-8") == f"{BEGIN}\nsecond\n{END}\n\nAnalysis written by hand.\n"
