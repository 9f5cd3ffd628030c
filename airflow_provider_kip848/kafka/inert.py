"""Names made inert for the format they land in: what a stored name can and cannot do to a page a person reads.

A group id, client id, host, instance, topic, application, team or controller name, a user id or a Param value
is data, and anyone who may create a consumer group chooses one. The renderers (the approval bodies and the plans
in ``changecontrol/`` and ``fleet/``, the reports, the plugin pages, the SVG charts) own the structure of what they
write (headings, tables, lists, emphasis); every value derived from data goes through one of these functions where
it meets that structure, so that no name adds a link, emphasis, a heading, an HTML element, a table cell or a line,
and every character of it shows. It lives in the core because the fleet's plan (``fleet/``) and change control
(``changecontrol/``) both render names and may not import each other; it imports nothing but the core's own
character sets (:mod:`.arguments`).

* :func:`visible`: control, direction (bidi), zero-width and other invisible characters as their escapes
  (``\\u202e``, ``\\n``) instead of acting: the base of every other function, and what the plugin pages' Jinja
  environment applies to every value before its autoescape (``plugins/pages.py``).
* :func:`md_name`: a name in Markdown, as an inline code span: literal in every CommonMark renderer (no emphasis,
  link, autolink, entity or HTML inside one); ``cell=True`` in a table row.
* :func:`md_text`: free text that mixes the provider's wording with names (plan notes, preflight evidence, the
  reasons of a refusal, an error quoted in a report) as plain text, inert as a whole: every ASCII character that
  opens or closes inline Markdown is backslash-escaped, a character that would start a block at the start of a
  line too, and every word a GFM renderer would turn into a link by itself (``www.``, ``://``, ``@``) is a code
  span, because Airflow's UI finds those words in the text *after* the escapes are resolved.
* :func:`md_fence`: a block of text (the reports' JSON) in a code fence no line of it can close.
* :func:`xml_text`: text for SVG (and HTML written without Jinja): escaped, visible, and only characters
  XML 1.0 allows.

The renderers they are made for: Airflow 3.3's UI for the approval bodies (react-markdown with remark-gfm and
``skipHtml``: GFM tables, where ``|`` splits a cell even inside a code span; autolink literals, applied to the
text after escapes are resolved; strikethrough with one or two ``~``), the reports page (markdown-it-py,
CommonMark with tables, raw HTML off), and any CommonMark or GFM viewer of a ``report.md``. A renderer that
links bare domains without ``www.`` (linkify's "fuzzy" links; none of these does) could still link
``orders.de`` in free text; a name itself is always a code span.
"""

from __future__ import annotations

import re
from html import escape

from airflow_provider_kip848.kafka.arguments import is_hidden

#: the control characters shown by their usual escapes; every other hidden character as ``\\uXXXX``
_SHOWN = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}
#: ASCII characters that open or close inline Markdown anywhere in a line (CommonMark + GFM): the escape itself,
#: code spans, emphasis, strikethrough, links, images and footnotes, raw HTML and autolinks (``<``: a ``>`` closes
#: nothing that ``<`` did not open), entities, table cells
_INLINE = frozenset("\\`*_~[]<&|")
#: what starts a block at the start of a line: a heading, a list item, a setext underline, a block quote
_LINE_START = frozenset("#-+=>")
#: an ordered list item's number at the start of a line (its ``.`` or ``)`` is escaped)
_ORDERED = re.compile(r"\d{1,9}(?=[.)])")
#: a word a GFM renderer (or markdown-it's linkify) links by itself: a URL, a ``www.`` host, an e-mail address
_LINK_PRONE = re.compile(r"://|www\.|@", re.IGNORECASE)
#: a cell delimiter with the backslashes before it (a GFM table pairs backslashes before it splits cells)
_PIPE = re.compile(r"(\\*)\|")
#: characters XML 1.0 does not allow, beyond those :func:`visible` already shows
_NOT_XML = re.compile("[\ufffe\uffff]")


def _escape_char(char: str) -> str:
    if char in _SHOWN:
        return _SHOWN[char]
    code = ord(char)
    return f"\\u{code:04x}" if code <= 0xFFFF else f"\\U{code:08x}"


def visible(value: object) -> str:
    """``value`` as text whose every character shows: controls, line breaks, direction overrides and marks,
    zero-width and every other invisible or space-like character (:func:`~.arguments.identifier_problem`'s
    set) as its escape (``\\n``, ``\\u202e``, ``\\u200b``), so a name can neither reorder nor hide the text
    around it, nor start a new line."""
    text = str(value)
    if text.isascii() and text.isprintable():  # printable ASCII: nothing to show
        return text
    return "".join(_escape_char(c) if is_hidden(text, i) else c for i, c in enumerate(text))


def md_name(value: object, *, cell: bool = False) -> str:
    """A name in Markdown: an inline code span holding :func:`visible` of it, its fence longer than any run of
    backticks in it. ``cell``: it sits in a GFM table row, where ``|`` ends a cell even inside a code span:
    each ``|`` is escaped (and the backslashes right before it doubled, so none pairs with the escape)."""
    text = visible(value)
    if not text:
        return "(empty)"
    if cell:
        text = _PIPE.sub(lambda m: m.group(1) * 2 + "\\|", text)
    fence = "`" * (max((len(run) for run in re.findall("`+", text)), default=0) + 1)
    # one space each side is taken off a code span's content that starts and ends with one (and is not all
    # spaces); a backtick at either end would join the fence
    padded = text[0] == "`" or text[-1] == "`" or (text[0] == text[-1] == " " and text.strip(" "))
    return f"{fence} {text} {fence}" if padded else f"{fence}{text}{fence}"


def md_text(value: object, *, cell: bool = False) -> str:
    """Free text in Markdown, inert as a whole: :func:`visible` of it with each character of :data:`_INLINE`
    backslash-escaped, the block a line could start with (``#``, ``-``, ``+``, ``=``, ``>``, ``1.``) escaped,
    and each word that would be linked by itself (``www.``, ``://``, ``@``) as a code span (:func:`md_name`).
    ``cell``: in a GFM table row."""
    words = visible(value).split(" ")
    text = " ".join(md_name(w, cell=cell) if _LINK_PRONE.search(w) else _escaped(w) for w in words)
    body = text.lstrip(" ")
    indent = text[:len(text) - len(body)]
    if body[:1] in _LINE_START:
        return f"{indent}\\{body}"
    if number := _ORDERED.match(body):
        return f"{indent}{number.group()}\\{body[number.end():]}"
    return text


def _escaped(word: str) -> str:
    """``word`` with each character of :data:`_INLINE` escaped; an ``_`` between two letters or digits is left
    as it is (it can neither open nor close emphasis there: ``group_config`` stays readable in the source)."""
    return "".join(f"\\{c}" if c in _INLINE and not (c == "_" and 0 < i < len(word) - 1 and word[i - 1].isalnum()
                                                    and word[i + 1].isalnum()) else c
                   for i, c in enumerate(word))


def md_fence(text: str, info: str = "") -> list[str]:
    """``text`` as the lines of a fenced code block (``info``: its language, e.g. ``json``), the fence longer
    than any run of backticks in it, each line :func:`visible`."""
    fence = "`" * max(3, max((len(run) for run in re.findall("`+", text)), default=0) + 1)
    return [f"{fence}{info}", *(visible(line) for line in text.split("\n")), fence]


def xml_text(value: object) -> str:
    """Text for an SVG (or HTML) element or attribute: :func:`visible`, the characters XML 1.0 does not allow
    shown too, then escaped (``<``, ``>``, ``&``, quotes)."""
    return escape(_NOT_XML.sub(lambda m: _escape_char(m.group()), visible(value)), quote=True)


__all__ = ["md_fence", "md_name", "md_text", "visible", "xml_text"]
