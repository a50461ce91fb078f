"""Markdown exports keep a valid outline: a model's own headings nest below the export's
heading of the answer (chat.rendering.demote_headings), fenced code is left alone."""

from __future__ import annotations

from chat.rendering import demote_headings


def test_headings_move_below_the_export_heading_outside_fences() -> None:
    text = "# Top\n## Simulated answer\ntext #not\n```md\n# in code\n```\n~~~\n## also code\n~~~\n   ### indented\n    # code block\n#nospace"
    out = demote_headings(text, under=3).split("\n")
    assert out[0] == "#### Top" and out[1] == "##### Simulated answer" and out[2] == "text #not"
    assert out[4] == "# in code" and out[7] == "## also code"  # fences untouched
    assert out[9] == "   ###### indented" and out[10] == "    # code block" and out[11] == "#nospace"
    assert demote_headings("###### deep", under=3) == "###### deep"  # capped at 6
    big = "## h\n" * 50_000
    assert demote_headings(big, under=1).count("### h") == 50_000
