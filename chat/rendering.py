"""Model output to safe HTML: markdown-it-py, Pygments for code, then nh3 sanitizing.

Model output is untrusted. Raw HTML in it is escaped by markdown-it (``html=False``) and the
result is sanitized again by nh3 with a small allow-list, so a page, a websocket frame or a
share link never carries script, event handlers or remote images. Links get
``rel="noopener noreferrer nofollow"``; images become plain links (not auto-loaded); no style
attributes (table alignment is a class), as the Content-Security-Policy forbids inline style.

May import: markdown-it-py, Pygments, nh3, the standard library.
"""

from __future__ import annotations

import html
from functools import lru_cache

import nh3
from markdown_it import MarkdownIt
from pygments import highlight
from pygments.formatters import HtmlFormatter
from pygments.lexers import get_lexer_by_name
from pygments.util import ClassNotFound

_FORMATTER = HtmlFormatter(nowrap=True, classprefix="hl-")

ALLOWED_TAGS = {
    "p", "br", "hr", "strong", "em", "del", "s", "code", "pre", "blockquote", "ul", "ol", "li",
    "h1", "h2", "h3", "h4", "h5", "h6", "table", "thead", "tbody", "tr", "th", "td", "a", "span",
    "div", "button",
}
ALLOWED_ATTRIBUTES = {
    "a": {"href", "title"},
    "span": {"class"},
    "div": {"class"},
    "code": {"class"},
    "pre": {"class"},
    "button": {"class", "type", "title"},
    "ol": {"start"},
}


ALIGN_CLASSES = {"align-left", "align-center", "align-right"}


def _align_classes(state) -> None:  # noqa: ANN001 - markdown-it core rule signature
    """markdown-it writes table alignment as ``style="text-align:…"``; the page's
    Content-Security-Policy forbids inline style, so it becomes ``class="align-…"``."""
    for token in state.tokens:
        if token.type in ("th_open", "td_open"):
            style = token.attrGet("style") or ""
            if style.startswith("text-align:"):
                token.attrs.pop("style", None)
                token.attrSet("class", "align-" + style.split(":", 1)[1].strip())


def _fence(self, tokens, idx, options, env):  # noqa: ANN001 - markdown-it renderer signature
    token = tokens[idx]
    lang = (token.info or "").strip().split()[0] if token.info else ""
    code = token.content
    try:
        lexer = get_lexer_by_name(lang) if lang else None
    except ClassNotFound:
        lexer = None
    body = highlight(code, lexer, _FORMATTER) if lexer else html.escape(code)
    label = html.escape(lang or "text")
    return (
        f'<div class="codeblock"><div class="codebar"><span class="codelang">{label}</span>'
        f'<button type="button" class="copy-code" title="Copy code">Copy</button></div>'
        f'<pre><code class="language-{label}">{body}</code></pre></div>'
    )


def _image(self, tokens, idx, options, env):  # noqa: ANN001
    token = tokens[idx]
    src = token.attrGet("src") or ""
    alt = self.renderInlineAsText(token.children or [], options, env) or "image"
    return f'<a href="{html.escape(str(src))}">[image: {html.escape(alt)}]</a>'


@lru_cache(maxsize=1)
def _md() -> MarkdownIt:
    md = MarkdownIt("commonmark", {"html": False, "linkify": False, "breaks": True}).enable(
        ["table", "strikethrough"]
    )
    md.add_render_rule("fence", _fence)
    md.add_render_rule("code_block", _fence)
    md.add_render_rule("image", _image)
    md.core.ruler.push("align_classes", _align_classes)
    return md


def sanitize(fragment: str) -> str:
    """Sanitize an HTML fragment with the allow-list above (nh3)."""
    return nh3.clean(
        fragment,
        tags=ALLOWED_TAGS,
        attributes=ALLOWED_ATTRIBUTES,
        url_schemes={"http", "https", "mailto"},
        link_rel="noopener noreferrer nofollow",
        # No style attributes at all (the Content-Security-Policy allows no inline style):
        # table alignment arrives as one of three classes (see _align_classes).
        allowed_classes={"th": ALIGN_CLASSES, "td": ALIGN_CLASSES},
    )


def render_markdown(text: str) -> str:
    """Markdown text → sanitized HTML string. CRLF and U+2028 are kept as line breaks."""
    if not text:
        return ""
    return sanitize(_md().render(text))
