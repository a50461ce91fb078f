"""Model output to safe HTML: markdown-it-py, Pygments for code, then nh3 sanitizing.

Model output is untrusted. Raw HTML in it is escaped by markdown-it (``html=False``) and the
result is sanitized again by nh3 with a small allow-list, so a page, a websocket frame or a
share link never carries script, event handlers or remote images. Links get
``rel="noopener noreferrer nofollow"``; images become plain links (not auto-loaded); no style
attributes (table alignment is a class), as the Content-Security-Policy forbids inline style.

Answers are rendered in **blocks**: :class:`BlockSplitter` finds the top-level block boundaries
of markdown text from complete lines only (a blank line followed by a line that is not indented,
an ATX heading, a fence at column 0 opening or closing), so any chunking of the same text gives
the same blocks. While a turn streams, each block that closed is rendered once
(:func:`render_block`) and sent; the open last block is rendered by the browser (a vendored
markdown-it + DOMPurify with the same rules). A finished answer is :func:`render_blocks` of its
text: the same splitter, the same renderer, so the final HTML equals the streamed blocks, block
by block. Each block is one ``<div class="mdb" dir="auto">`` (right-to-left text lays out right
to left per block).

May import: markdown-it-py, Pygments, nh3, django.utils.html (format_html), the standard library.
"""

from __future__ import annotations

import html
import re
from functools import lru_cache

import nh3
from django.utils.html import format_html
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
    "div": {"class", "dir"},
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
    label = (lang or "text")[:40]
    return format_html(
        '<div class="codeblock"><div class="codebar"><span class="codelang">{}</span>'
        '<button type="button" class="copy-code" title="Copy code">Copy</button></div>'
        '<pre><code class="language-{}">{}</code></pre></div>',
        label, label, _Safe(body),
    )


class _Safe(str):
    """Already-escaped HTML (Pygments output or ``html.escape``) for ``format_html``."""

    def __html__(self) -> str:
        return str(self)


def _image(self, tokens, idx, options, env):  # noqa: ANN001
    token = tokens[idx]
    src = token.attrGet("src") or ""
    alt = self.renderInlineAsText(token.children or [], options, env) or "image"
    return format_html('<a href="{}">[image: {}]</a>', str(src), alt)


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


# ---- blocks ---------------------------------------------------------------------------------

_FENCE_OPEN = re.compile(r"^( {0,3})(`{3,}|~{3,})(.*)$")
_ATX = re.compile(r"^#{1,6}(?:[ \t]|$)")


class BlockSplitter:
    """Top-level block boundaries of growing markdown text, decided from complete lines only.

    ``feed(text)`` takes the whole text so far (it must only grow) and returns the offsets
    (Python characters) where new blocks start; ``finish(text)`` treats the last line as
    complete at the end of the answer. Rules: a blank line followed by a non-blank line that
    does not start with a space or tab starts a block (an indented one continues a list item
    or indented code); an ATX heading line is a block of its own; a fence that opens at column
    0 starts a block and the line after its closing fence starts the next. Lines inside a fence
    never split. Because only complete lines (and the end of the answer) are looked at, any
    chunking of the same text gives the same boundaries.
    """

    __slots__ = ("_fence", "_fence_top", "_pending_blank", "block_start", "pos")

    def __init__(self) -> None:
        self.pos = 0  # start of the first line not looked at yet
        self.block_start = 0
        self._fence = ""  # the open fence's marker ("```", "~~~~", …)
        self._fence_top = False
        self._pending_blank = False

    def feed(self, text: str) -> list[int]:
        out: list[int] = []
        while True:
            nl = text.find("\n", self.pos)
            if nl == -1:
                return out
            start, self.pos = self.pos, nl + 1
            self._line(text[start:nl], start, out)

    def finish(self, text: str) -> list[int]:
        out = self.feed(text)
        if self.pos < len(text):
            start, self.pos = self.pos, len(text)
            self._line(text[start:], start, out)
        return out

    def _cut(self, at: int, out: list[int]) -> None:
        if at > self.block_start:
            out.append(at)
            self.block_start = at

    def _line(self, line: str, start: int, out: list[int]) -> None:
        line = line.rstrip("\r")
        if self._fence:
            stripped = line.lstrip(" ")
            if (len(line) - len(stripped) <= 3 and stripped.startswith(self._fence[0] * len(self._fence))
                    and not stripped.rstrip().strip(self._fence[0])):
                top, self._fence, self._fence_top = self._fence_top, "", False
                if top:
                    self._cut(self.pos, out)
            return
        if not line.strip():
            self._pending_blank = True
            return
        if self._pending_blank and line[0] not in " \t":
            self._cut(start, out)
        self._pending_blank = False
        fence = _FENCE_OPEN.match(line)
        if fence and not (fence.group(2)[0] == "`" and "`" in fence.group(3)):
            self._fence = fence.group(2)
            self._fence_top = not fence.group(1)
            if self._fence_top:
                self._cut(start, out)
        elif _ATX.match(line):
            self._cut(start, out)
            self._cut(self.pos, out)


def render_block(source: str) -> str:
    """One block's markdown source → its sanitized HTML in a ``<div class="mdb" dir="auto">``,
    or "" when it renders to nothing (blank lines)."""
    inner = render_markdown(source).strip()
    if not inner:
        return ""
    return format_html('<div class="mdb" dir="auto">{}</div>', _Safe(inner))


def split_blocks(text: str) -> list[str]:
    """The block sources of a finished text (see :class:`BlockSplitter`)."""
    splitter = BlockSplitter()
    cuts = splitter.finish(text)
    bounds = [0, *cuts, len(text)]
    return [text[a:b] for a, b in zip(bounds, bounds[1:], strict=False) if b > a]


@lru_cache(maxsize=2048)
def render_blocks(text: str) -> tuple[str, ...]:
    """A finished answer as its rendered blocks (cached by text: page loads render each
    answer once per process)."""
    return tuple(h for h in (render_block(src) for src in split_blocks(text)) if h)


class StreamedBlocks:
    """The blocks of one streamed text (answer or reasoning) of a running turn.

    ``advance(text)`` renders the blocks that closed since the last call and returns how many
    are new; ``finish(text)`` closes the rest at the end. ``html`` holds every rendered block
    in order; ``upto`` is the offset (Python characters) of the text they cover; the text
    after it is the open block, which the browser renders.
    """

    __slots__ = ("_splitter", "html", "upto")

    def __init__(self) -> None:
        self._splitter = BlockSplitter()
        self.html: list[str] = []
        self.upto = 0

    def _close(self, text: str, cuts: list[int]) -> int:
        before = len(self.html)
        for cut in cuts:
            block = render_block(text[self.upto:cut])
            if block:
                self.html.append(block)
            self.upto = cut
        return len(self.html) - before

    def advance(self, text: str) -> int:
        return self._close(text, self._splitter.feed(text))

    def finish(self, text: str) -> int:
        cuts = self._splitter.finish(text)
        if len(text) > self.upto and (not cuts or cuts[-1] < len(text)):
            cuts.append(len(text))
        return self._close(text, cuts)

    def reset(self) -> None:
        self._splitter = BlockSplitter()
        self.html = []
        self.upto = 0

    def finished(self, text: str) -> StreamedBlocks:
        """A finished copy (this one is left as it is): render the last blocks in a worker
        thread and swap the copy in on the event loop in one assignment, so no reader ever
        sees a half-finished list."""
        import copy

        done = StreamedBlocks()
        done._splitter = copy.copy(self._splitter)
        done.html = list(self.html)
        done.upto = self.upto
        done.finish(text)
        return done


_ATX_HEADING = re.compile(r"(#{1,6})(?=[ \t]|$)")


def demote_headings(text: str, *, under: int) -> str:
    """``text`` (Markdown) with every ATX heading outside fenced code moved ``under`` levels
    down (capped at 6), so a model's own "## Heading" nests below the export's heading of level
    ``under`` instead of breaking the document's outline. Linear in ``text``; fences (``````` or
    ``~~~``) and indented lines over 3 spaces are left as they are."""
    out, fence = [], ""
    for line in text.split("\n"):
        stripped = line.lstrip(" ")
        indent = len(line) - len(stripped)
        if indent <= 3 and stripped[:3] in ("```", "~~~"):
            if not fence:
                fence = stripped[:3]
            elif stripped.startswith(fence):
                fence = ""
        elif not fence and indent <= 3 and (m := _ATX_HEADING.match(stripped)):
            line = " " * indent + "#" * min(6, len(m.group(1)) + under) + stripped[len(m.group(1)):]
        out.append(line)
    return "\n".join(out)
