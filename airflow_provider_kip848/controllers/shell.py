"""A POSIX shell lexer for command templates: where each ``{placeholder}`` of a template sits.

A ``command`` controller's template is shell text with placeholders (``str.format`` fields: ``{region}``;
``{{``/``}}`` are literal braces). A value is safe only where the shell takes it as data and never parses it
again: a bare part of a word at the template's own level (``--region={region}``, ``/etc/{app}.conf``). Inside
quotes, ``$'...'``, backticks, ``$( )``, ``$(( ))``, ``${...}``, a here-document or a comment the shell reads the
text differently, and a placeholder there is refused (:mod:`~.templates` turns the spots into refusals and adds
the rules about commands: ``sh -c``, ``eval`` ...).

This is not a full shell parser, and needs not be one: it follows what decides where a placeholder sits
(quoting states, backslashes, comments, here-document bodies, command boundaries ``; & | && || ( )`` and
newlines, redirections) and records the template's top-level simple commands as words, which the rules read.
Where it cannot follow the text (an unterminated quote), it says so and the template is refused. Pure: no I/O.
"""

from __future__ import annotations

import string
from dataclasses import dataclass, field

#: why a placeholder is not a bare word part, by the construct it sits in
CONTEXTS = {
    "sq": "inside single quotes ('...')",
    "dq": 'inside double quotes ("...")',
    "dsq": "inside $'...'",
    "bq": "inside backticks (`...`, a command substitution)",
    "cmdsub": "inside $( ) (a command substitution)",
    "arith": "inside an arithmetic expression ($(( )) or (( )): the shell evaluates the value as an expression)",
    "param": "inside ${...} (a parameter expansion)",
    "comment": "in a comment",
    "heredoc": "in a here-document's body",
    "delimiter": "in a here-document's delimiter",
    "backslash": "right after a backslash",
    "dollar": "right after '$' (a shell variable is written ${{name}} in a template)",
    "tilde": "in a tilde prefix (~user: the shell looks the text up as a user name)",
}
_NAME_START = set(string.ascii_letters + "_")
_SPECIAL_PARAMS = set("0123456789@*#?$!-")
_BLANKS = (" ", "\t")
_OPERATORS = (";", "&", "|")
_REDIRECTIONS = ("<<", "<<-", "<<<", ">>", ">|", "<&", ">&", "<>")
#: what opens a quote or a backtick, and what closes each construct
_OPENERS = {"'": "sq", '"': "dq", "`": "bq"}
_CLOSERS = {"sq": "'", "dq": '"', "dsq": "'", "bq": "`", "param": "}"}


@dataclass(frozen=True)
class Placeholder:
    """One ``{name}`` of a template; ``number``: its place among the template's placeholders (1, 2 ...)."""

    name: str
    number: int


@dataclass(frozen=True)
class Spot:
    """Where a placeholder sits: ``context`` is a key of :data:`CONTEXTS`, None for a bare word part."""

    placeholder: Placeholder
    context: str | None


@dataclass
class Word:
    """A top-level word: its text after quote removal (expansions kept as written), its placeholders and whether
    each comes after a literal ``=`` of the word, and what the word is to its command."""

    text: str = ""
    placeholders: list[tuple[Placeholder, bool]] = field(default_factory=list)
    quoted: bool = False  # holds quoting: ', ", \ or $'...'
    dynamic: bool = False  # holds an expansion ($x, ${x}, $(...), `...`, $((...))): its value is computed
    role: str = "word"  # word | redirect (a redirection's target) | delimiter (a here-document's) | io (2 in 2>)
    strip_tabs: bool = False  # a delimiter of <<- (the body's lines lose their leading tabs)
    plain: str = ""  # the unquoted literal text it starts with (NAME= of an assignment)
    _plain_open: bool = True

    def add(self, text: str, *, quoted: bool = False, dynamic: bool = False) -> None:
        self.text += text
        self.quoted = self.quoted or quoted
        self.dynamic = self.dynamic or dynamic
        if quoted or dynamic:
            self._plain_open = False
        elif self._plain_open:
            self.plain += text

    def add_placeholder(self, placeholder: Placeholder) -> None:
        self.placeholders.append((placeholder, "=" in self.text))
        self.text += "{" + placeholder.name + "}"
        self._plain_open = False


@dataclass
class Command:
    """A top-level simple command (or a compound's head: ``if``, ``for`` ... are its first words)."""

    words: list[Word] = field(default_factory=list)
    arithmetic: bool = False  # a (( ... )) command


@dataclass
class Lexed:
    """What the lexer found: every placeholder's spot, the top-level commands, and what it could not follow."""

    spots: list[Spot]
    commands: list[Command]
    defines_function: bool
    arithmetic: bool  # $(( )) or (( )) anywhere
    problem: str | None  # the text is not shell the lexer can follow (an unterminated quote ...)


@dataclass
class _Frame:
    kind: str  # cmd (the top level) | cmdsub ($( )) | sq | dq | dsq | bq | arith | param | comment
    depth: int = 0  # open parentheses (cmdsub, arith)
    word: Word | None = None  # cmd and cmdsub frames: the word being read
    command: Command = field(default_factory=Command)
    next_role: str = "word"
    next_strip: bool = False

    @property
    def commands(self) -> bool:
        return self.kind in ("cmd", "cmdsub")


def template_items(template: str) -> list[str | Placeholder]:
    """The template as characters and placeholders (``{{``/``}}`` already single braces). ValueError: the
    template is not a valid format string."""
    items: list[str | Placeholder] = []
    number = 0
    for literal, name, _spec, _conversion in string.Formatter().parse(template):
        items.extend(literal)
        if name is not None:
            number += 1
            items.append(Placeholder(name, number))
    return items


class _Lexer:
    def __init__(self, items: list[str | Placeholder]) -> None:
        self.items = items
        self.i = 0
        self.stack = [_Frame("cmd")]
        self.spots: list[Spot] = []
        self.commands: list[Command] = []
        self.heredocs: list[tuple[str, bool]] = []  # (delimiter, strip leading tabs) waiting for their bodies
        self.defines_function = False
        self.arithmetic = False
        self.problem: str | None = None

    # -- helpers ----------------------------------------------------------------------------------------------

    def peek(self, ahead: int = 0) -> str | Placeholder | None:
        j = self.i + ahead
        return self.items[j] if j < len(self.items) else None

    @property
    def frame(self) -> _Frame:
        return self.stack[-1]

    def cmd_frame(self) -> _Frame:
        return next(f for f in reversed(self.stack) if f.commands)

    def at_top(self) -> bool:
        """The innermost command context is the template's own level (not inside $( ))."""
        return self.cmd_frame() is self.stack[0]

    def refuse(self, placeholder: Placeholder, context: str) -> None:
        self.spots.append(Spot(placeholder, context))

    def nested_context(self) -> str:
        """The construct a placeholder inside something sits in: the outermost one (the one to rewrite)."""
        return self.stack[1].kind

    @staticmethod
    def _start_word(frame: _Frame) -> Word:
        if frame.word is None:
            frame.word = Word(role=frame.next_role, strip_tabs=frame.next_strip)
            frame.next_role, frame.next_strip = "word", False
        return frame.word

    def word(self) -> Word:
        return self._start_word(self.cmd_frame())

    def add(self, text: str, *, quoted: bool = False, dynamic: bool = False) -> None:
        self.word().add(text, quoted=quoted, dynamic=dynamic)
        if not self.at_top():  # a word inside $( ) is part of the top-level word holding the substitution
            self._start_word(self.stack[0]).add(text, dynamic=True)

    def end_word(self) -> None:
        frame = self.cmd_frame()
        word, frame.word = frame.word, None
        if word is None:
            return
        if word.role == "delimiter":
            self.heredocs.append((word.text, word.strip_tabs))
        frame.command.words.append(word)

    def end_command(self) -> None:
        self.end_word()
        frame = self.cmd_frame()
        if frame is self.stack[0] and (frame.command.words or frame.command.arithmetic):
            self.commands.append(frame.command)
        frame.command = Command()

    # -- the top level and $( ) -------------------------------------------------------------------------------

    def dollar(self) -> None:
        """``$`` at self.i: what it opens (a quote, $( ), $(( )), ${ }), a variable, or a literal ``$``."""
        nxt = self.peek(1)
        opens = {"(": "cmdsub", "{": "param"}
        if self.frame.commands:
            opens.update({"'": "dsq", '"': "dq"})
        if isinstance(nxt, Placeholder):
            self.refuse(nxt, "dollar" if len(self.stack) == 1 else self.nested_context())
            self.add("$", dynamic=True)
            self.i += 2
        elif nxt == "(" and self.peek(2) == "(":
            self.add("$((", dynamic=True)
            self.arithmetic = True
            self.stack.append(_Frame("arith"))
            self.i += 3
        elif isinstance(nxt, str) and nxt in opens:
            kind = opens[nxt]
            quoted = kind in ("dsq", "dq")
            self.add("" if quoted else "$" + nxt, quoted=quoted, dynamic=not quoted)
            self.stack.append(_Frame(kind))
            self.i += 2
        else:  # $name, $1, $?: a variable; anything else: a literal $
            variable = isinstance(nxt, str) and (nxt in _NAME_START or nxt in _SPECIAL_PARAMS)
            quoted = self.frame.kind == "dq"
            self.add("$", quoted=quoted and not variable, dynamic=variable or not quoted)
            self.i += 1

    def redirection(self, c: str) -> None:
        frame = self.cmd_frame()
        word = frame.word
        if word is not None and not word.quoted and word.text.isdigit() and not word.placeholders:
            word.role = "io"  # the 2 of 2>file
        self.end_word()
        op = c
        self.i += 1
        while isinstance(self.peek(), str) and op + str(self.peek()) in _REDIRECTIONS:
            op += str(self.peek())
            self.i += 1
        frame.next_role = "delimiter" if op in ("<<", "<<-") else "redirect"
        frame.next_strip = op == "<<-"

    def cmd(self, c: str | Placeholder) -> None:
        """One item in a command context (the top level, or inside $( ))."""
        if isinstance(c, Placeholder):
            self.cmd_placeholder(c)
        elif c in _BLANKS:
            self.end_word()
            self.i += 1
        elif c == "\n":
            self.end_word() if not self.at_top() else self.end_command()
            self.i += 1
            self.heredoc_bodies()
        elif c in _OPERATORS:
            self.end_word() if not self.at_top() else self.end_command()
            self.i += 1
        elif c in "()":
            self.paren(c)
        elif c in "<>":
            self.redirection(c)
        elif c == "#" and self.frame.word is None:
            self.stack.append(_Frame("comment"))
            self.i += 1
        elif c == "\\":
            self.backslash()
        elif c == "$":
            self.dollar()
        elif c in _OPENERS:
            kind = _OPENERS[c]
            self.add("`" if kind == "bq" else "", quoted=kind != "bq", dynamic=kind == "bq")
            self.stack.append(_Frame(kind))
            self.i += 1
        else:
            self.add(c)
            self.i += 1

    def cmd_placeholder(self, c: Placeholder) -> None:
        if not self.at_top():
            self.refuse(c, self.nested_context())
            self.add("{" + c.name + "}", dynamic=True)
        else:
            word = self.word()
            if word.role == "delimiter":
                self.refuse(c, "delimiter")
            elif word.text.startswith("~") and "/" not in word.text and not word.quoted and not word.dynamic:
                self.refuse(c, "tilde")
            else:
                self.spots.append(Spot(c, None))
            word.add_placeholder(c)
        self.i += 1

    def paren(self, c: str) -> None:
        """``(`` or ``)`` in a command context: inside $( ) they nest (the last one closes it); at the top level
        ``((`` opens an arithmetic command, ``name()`` defines a function, and each ends a command."""
        frame = self.frame
        self.i += 1
        if not self.at_top():
            self.end_word()
            if c == ")" and frame.depth == 0:
                self.stack.pop()
                self.add(")", dynamic=True)
            else:
                frame.depth += 1 if c == "(" else -1
            return
        if c == "(" and frame.word is None and not frame.command.words and self.peek() == "(":
            frame.command.arithmetic = True
            self.arithmetic = True
            self.stack.append(_Frame("arith"))
            self.i += 1
            return
        if c == "(" and (frame.word is not None or frame.command.words):
            self.defines_function = True  # name() { ...; }: a later word may run its body
        self.end_command()

    def backslash(self) -> None:
        nxt = self.peek(1)
        if isinstance(nxt, Placeholder):
            self.refuse(nxt, "backslash" if self.at_top() else self.nested_context())
            self.word().add_placeholder(nxt)
        elif nxt is None:
            self.add("\\")
        elif nxt != "\n":  # a backslash-newline is a line continuation: nothing, the word goes on
            self.add(nxt, quoted=True)
        self.i += 2

    # -- quotes and other constructs --------------------------------------------------------------------------

    def inside(self, c: str | Placeholder) -> None:
        """One item inside a quote, a backtick, $(( )), ${ } or a comment."""
        kind = self.frame.kind
        if isinstance(c, Placeholder):
            self.refuse(c, self.nested_context())
            if kind != "comment":
                self.add("{" + c.name + "}", dynamic=True)
            self.i += 1
        elif kind == "comment":
            if c == "\n":
                self.stack.pop()  # the newline ends the command too: read again in the enclosing frame
            else:
                self.i += 1
        elif c == _CLOSERS.get(kind):
            self.stack.pop()
            self.add("`" if kind == "bq" else "" if kind != "param" else "}", quoted=kind != "bq",
                     dynamic=kind in ("bq", "param"))
            self.i += 1
        elif kind == "sq":
            self.add(c, quoted=True)
            self.i += 1
        elif c == "\\":
            self.escaped_inside(kind)
        elif kind == "arith":
            self.arith(c)
        elif kind in ("dq", "param") and c == "$":
            self.dollar()
        elif kind in ("dq", "param") and c == "`":
            self.add("`", dynamic=True)
            self.stack.append(_Frame("bq"))
            self.i += 1
        elif kind == "param" and c in "'\"":
            self.stack.append(_Frame(_OPENERS[c]))
            self.i += 1
        else:
            self.add(c, quoted=kind in ("dq", "dsq"), dynamic=kind not in ("dq", "dsq"))
            self.i += 1

    def escaped_inside(self, kind: str) -> None:
        """A backslash inside double quotes, $'...', backticks or ${ }: the next item is taken as it is."""
        nxt = self.peek(1)
        if isinstance(nxt, Placeholder):
            self.refuse(nxt, self.nested_context())
            self.add("{" + nxt.name + "}", dynamic=True)
        elif nxt is not None:
            quoted = kind in ("dq", "dsq")
            self.add(nxt, quoted=quoted, dynamic=not quoted)
        self.i += 2

    def arith(self, c: str) -> None:
        """Inside $(( )) or (( )): parentheses nest; ``))`` at depth 0 closes it."""
        frame = self.frame
        if c == ")" and frame.depth == 0 and self.peek(1) == ")":
            self.stack.pop()
            self.add("))", dynamic=True)
            self.i += 2
            return
        if c in "()":
            frame.depth = max(0, frame.depth + (1 if c == "(" else -1))
        self.add(c, dynamic=True)
        self.i += 1

    def heredoc_bodies(self) -> None:
        """After a newline: the bodies of the here-documents opened on that line, each up to its delimiter."""
        while self.heredocs:
            delimiter, strip = self.heredocs.pop(0)
            while True:
                if self.i >= len(self.items):
                    self.problem = f"the here-document ending with {delimiter!r} is not closed"
                    return
                line: list[str | Placeholder] = []
                while self.i < len(self.items) and self.items[self.i] != "\n":
                    line.append(self.items[self.i])
                    self.i += 1
                self.i += 1  # the newline
                for item in line:
                    if isinstance(item, Placeholder):
                        self.refuse(item, "heredoc")
                text = "".join(c for c in line if isinstance(c, str))
                if not any(isinstance(c, Placeholder) for c in line) and \
                        (text.lstrip("\t") if strip else text) == delimiter:
                    break

    def run(self) -> Lexed:
        while self.i < len(self.items) and self.problem is None:
            c = self.items[self.i]
            if self.frame.commands:
                self.cmd(c)
            else:
                self.inside(c)
        if self.problem is None and len(self.stack) > 1:
            open_kind = self.stack[-1].kind
            self.problem = {"sq": "a single quote is not closed", "dq": "a double quote is not closed",
                            "dsq": "a $'...' is not closed", "bq": "a backtick is not closed",
                            "cmdsub": "a $( is not closed", "arith": "an arithmetic expression is not closed",
                            "param": "a ${ is not closed"}.get(open_kind)
            if open_kind == "comment":
                self.stack.pop()
                self.problem = None
        if self.problem is None:
            self.end_command()
            if self.heredocs:
                self.problem = f"the here-document ending with {self.heredocs[0][0]!r} has no body"
        return Lexed(self.spots, self.commands, self.defines_function, self.arithmetic, self.problem)


def lex(template: str) -> Lexed:
    """Where every placeholder of ``template`` sits, and its top-level commands (ValueError: not a valid format
    string)."""
    return _Lexer(template_items(template)).run()


__all__ = ["CONTEXTS", "Command", "Lexed", "Placeholder", "Spot", "Word", "lex", "template_items"]
