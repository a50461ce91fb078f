"""Model output → safe HTML (``chat.rendering``): markdown-it-py, Pygments, nh3.

Model output is untrusted: no script, no event handler, no ``javascript:`` link, no remote image
that loads by itself; links get ``rel="noopener noreferrer nofollow"``; code is highlighted and
has a Copy button; tables and CRLF text render like their LF forms.
"""

from __future__ import annotations

import re
from html.parser import HTMLParser

import pytest

from chat.rendering import render_markdown, sanitize

REL = 'rel="noopener noreferrer nofollow"'


class _Collector(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.elements: list[tuple[str, dict[str, str | None]]] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.elements.append((tag, dict(attrs)))


def elements(html: str) -> list[tuple[str, dict[str, str | None]]]:
    """Real elements of ``html`` (escaped text is not an element), with their attributes."""
    parser = _Collector()
    parser.feed(html)
    parser.close()
    return parser.elements


def tags(html: str) -> set[str]:
    return {tag for tag, _ in elements(html)}


def attributes(html: str) -> list[str]:
    return [name for _, attrs in elements(html) for name in attrs]


def hrefs(html: str) -> list[str]:
    return [attrs["href"] or "" for tag, attrs in elements(html) if "href" in attrs]


ALLOWED_OUTPUT_TAGS = {
    "p",
    "br",
    "hr",
    "strong",
    "em",
    "del",
    "s",
    "code",
    "pre",
    "blockquote",
    "ul",
    "ol",
    "li",
    "h1",
    "h2",
    "h3",
    "h4",
    "h5",
    "h6",
    "table",
    "thead",
    "tbody",
    "tr",
    "th",
    "td",
    "a",
    "span",
    "div",
    "button",
}


def test_empty_text_renders_empty() -> None:
    assert render_markdown("") == ""


def test_plain_paragraph() -> None:
    assert render_markdown("Hello **world**") == "<p>Hello <strong>world</strong></p>\n"


@pytest.mark.parametrize(
    "text",
    [
        "<script>alert(1)</script>hi",
        "<SCRIPT SRC=https://evil.example/x.js></SCRIPT>",
        "text\n\n<script>\nalert(document.cookie)\n</script>\n",
        "<div><script>alert(1)</script></div>",
    ],
)
def test_script_never_survives(text: str) -> None:
    out = render_markdown(text)
    assert "<script" not in out.lower()
    assert "script" not in tags(out)


@pytest.mark.parametrize(
    "text",
    [
        "<img src=x onerror=alert(1)>",
        '<a href="https://example.com" onclick="steal()">a</a>',
        "<div onmouseover=alert(1)>hover</div>",
        "<svg onload=alert(1)>",
        '<p style="x" onfocus="y" autofocus>z</p>',
        '![a" onerror="alert(1)](https://example.com/x.png)',
        '[a](https://example.com "t\\" onclick=\\"y")',
    ],
)
def test_event_handlers_never_survive(text: str) -> None:
    out = render_markdown(text)
    assert not [a for a in attributes(out) if a.startswith("on")], out
    assert "img" not in tags(out) and "svg" not in tags(out)


@pytest.mark.parametrize(
    "text",
    [
        "[click](javascript:alert(1))",
        "[click](JaVaScRiPt:alert(1))",
        "[click](  javascript:alert(1))",
        "[click](java\tscript:alert(1))",
        "<javascript:alert(1)>",
        "[click](vbscript:msgbox(1))",
        "[click](data:text/html;base64,PHNjcmlwdD5hbGVydCgxKTwvc2NyaXB0Pg==)",
        "![x](javascript:alert(1))",
        '<a href="javascript:alert(1)">x</a>',
        "[ref]\n\n[ref]: javascript:alert(1)",
    ],
)
def test_dangerous_link_schemes_are_not_links(text: str) -> None:
    out = render_markdown(text)
    for href in hrefs(out):
        scheme = re.match(r"^\s*([a-zA-Z][a-zA-Z0-9+.\-]*):", href)
        assert scheme is None or scheme[1].lower() in ("http", "https", "mailto"), href
    assert "javascript" not in "".join(hrefs(out)).lower()


def test_links_get_rel_noopener_noreferrer_nofollow() -> None:
    out = render_markdown("See [the docs](https://example.com/docs) and <https://example.org>.")
    anchors = [attrs for tag, attrs in elements(out) if tag == "a"]
    assert len(anchors) == 2
    for a in anchors:
        assert a["rel"] == "noopener noreferrer nofollow"
    assert 'href="https://example.com/docs"' in out
    assert 'href="https://example.org"' in out


def test_raw_img_tag_is_not_an_image() -> None:
    out = render_markdown('<img src="https://evil.example/track.png">')
    assert "<img" not in out
    assert "img" not in tags(out)


def test_markdown_image_becomes_a_link_not_an_image() -> None:
    out = render_markdown("![a cat](https://evil.example/cat.png)")
    assert "<img" not in out
    assert re.search(
        r'<a href="https://evil.example/cat.png" ' + REL + r">\[image: a cat\]</a>", out
    ), out


def test_data_image_is_not_loaded_nor_linked() -> None:
    out = render_markdown("![x](data:image/png;base64,iVBORw0KGgo=)")
    assert "img" not in tags(out)
    assert not [h for h in hrefs(out) if h.lower().startswith("data:")]


def test_no_auto_loading_style_background() -> None:
    # Only markdown-it produces style (table alignment); sanitize() must still drop CSS that
    # loads a remote resource if such HTML ever reaches it.
    out = sanitize(
        '<table><tr><td style="background:url(https://evil.example/t.png);text-align:left">x</td>'
        '<th style="background-image:url(https://evil.example/u.png)">y</th></tr></table>'
    )
    assert "url(" not in out
    assert "evil.example" not in out
    assert "style" not in out  # no inline style at all: the CSP forbids it


def test_sanitize_drops_disallowed_tags_and_attributes() -> None:
    out = sanitize(
        '<iframe src="https://e/x"></iframe><form action="/x"><input name=a></form>'
        '<a href="https://e" target="_blank" onclick="x">ok</a><object data="x"></object>'
    )
    assert tags(out) <= ALLOWED_OUTPUT_TAGS
    assert "iframe" not in out and "<form" not in out and "<input" not in out
    assert "onclick" not in out and "target" not in out
    assert REL in out


def test_code_fence_is_highlighted_with_copy_button() -> None:
    out = render_markdown("Here:\n\n```python\ndef f(x):\n    return x + 1\n```\n")
    assert '<div class="codeblock">' in out
    assert '<button type="button" class="copy-code" title="Copy code">Copy</button>' in out
    assert '<code class="language-python">' in out
    assert 'class="hl-k"' in out  # Pygments keyword span ("def", "return")
    assert "hl-" in out and "<span" in out
    assert '<span class="codelang">python</span>' in out


def test_code_fence_escapes_html_inside() -> None:
    out = render_markdown("```html\n<script>alert(1)</script>\n```")
    assert "<script" not in out
    assert "&lt;" in out
    out = render_markdown("```\n<b>bold?</b> <img src=x onerror=y>\n```")
    assert "<b>" not in out and "<img" not in out
    assert "&lt;b&gt;" in out
    assert 'class="copy-code"' in out


def test_code_fence_with_unknown_language_and_hostile_info() -> None:
    out = render_markdown('```nosuchlang"onclick="x\nx < y\n```')
    assert 'class="copy-code"' in out
    assert "x &lt; y" in out
    assert "onclick" not in attributes(out)


def test_indented_code_block_also_gets_copy_button() -> None:
    out = render_markdown("para\n\n    code line\n    <b>x</b>\n")
    assert 'class="copy-code"' in out
    assert "&lt;b&gt;x&lt;/b&gt;" in out


def test_inline_code_is_escaped() -> None:
    out = render_markdown("Use `<script>` carefully")
    assert "<code>&lt;script&gt;</code>" in out


def test_tables_render() -> None:
    out = render_markdown(
        "| model | ctx |\n|:---|---:|\n| sim-fast | 8192 |\n| sim-slow | 4096 |\n"
    )
    assert "<table>" in out and "<thead>" in out and "<tbody>" in out
    assert "<th" in out and "<td" in out
    assert out.count("<tr>") == 3
    assert 'class="align-right"' in out and 'class="align-left"' in out
    assert "style=" not in out
    assert ">8192<" in out


def test_strikethrough_and_lists() -> None:
    out = render_markdown("~~old~~\n\n1. one\n2. two\n\n- a\n- b\n")
    assert "<s>old</s>" in out or "<del>old</del>" in out
    assert "<ol>" in out and "<ul>" in out and out.count("<li>") == 4


def test_crlf_renders_like_lf() -> None:
    lf = "First line\nsecond line\n\nNew paragraph\n\n```python\nprint(1)\n```\n\n| a | b |\n|---|---|\n| 1 | 2 |\n"
    crlf = lf.replace("\n", "\r\n")
    out = render_markdown(crlf)
    assert out == render_markdown(lf)
    assert "\r" not in out
    assert "<br>" in out  # single newlines are line breaks
    assert out.count("<p>") == 2
    assert "<table>" in out and 'class="copy-code"' in out


def test_bare_cr_renders_like_lf() -> None:
    assert render_markdown("a\rb\r\rc") == render_markdown("a\nb\n\nc")


def test_output_uses_only_allowed_tags() -> None:
    text = (
        "# Title\n\n> quote\n\n---\n\n*em* **strong** `code`\n\n<details><summary>x</summary>y</details>\n\n"
        "<marquee>z</marquee> <style>body{display:none}</style> <link rel=stylesheet href=x>\n"
    )
    out = render_markdown(text)
    assert tags(out) <= ALLOWED_OUTPUT_TAGS, tags(out) - ALLOWED_OUTPUT_TAGS
