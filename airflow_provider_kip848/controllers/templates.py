"""Command templates whose values cannot become shell: what is refused, and how values reach the commands.

A ``command`` controller's values (the run's params, ``{group_protocol}``, ``{instance}``) never pass through
a shell's parser. The template is rendered with each placeholder as ``"${KIP848_ARG_<name>}"`` and the value
goes into that environment variable (:func:`render`): the shell expands it as one word and never reads it as
code. Two things could still turn a value into shell, and :func:`template_problems` refuses both when the
registry entry is read:

* **where a placeholder sits** (:mod:`~.shell`): inside single or double quotes, ``$'...'``, backticks,
  ``$( )``, ``$(( ))``, ``${...}``, a here-document or a comment, right after a backslash or a ``$``;
* **what reads it**: a command that parses text as shell (or as an arithmetic expression, a variable name, a
  program) again. A template that runs a shell, ``eval`` or the like anywhere takes no placeholder at all,
  since a value could reach it through a variable (``X={v}; sh -c "$X"``); a placeholder as a command's name,
  as the command a wrapper (``sudo``, ``env``, ``timeout`` ...) runs or in that wrapper's own options, as an
  interpreter's program (``python3 {v}``, ``sed {v}``), or as a variable's name (``export {v}``) is refused.

A placeholder that is a bare part of a word stays allowed: ``--region={region}``, ``/etc/{app}.conf``.
The lists below are what the check knows; docs/controllers.md has them, with examples. Pure: no I/O.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass

from airflow_provider_kip848.controllers.shell import CONTEXTS, Command, Lexed, Word, lex

#: the environment variable a placeholder's value travels in (``{region}`` -> ``KIP848_ARG_region``)
ENV_PREFIX = "KIP848_ARG_"
#: shells: a template running one anywhere (or naming one followed by -c) takes no placeholder
SHELLS = frozenset({"sh", "bash", "dash", "ash", "ksh", "ksh93", "mksh", "pdksh", "oksh", "zsh", "yash", "posh",
                    "csh", "tcsh", "fish", "rc", "es", "pwsh", "powershell", "elvish", "nu", "xonsh"})
#: commands that read text as shell code (or run it in a shell): a template running one takes no placeholder
RESHELL = frozenset({"eval", "trap", "alias", "function", "su", "runuser", "ssh", "rsh", "script", "watch",
                     "parallel", "sshpass"})
#: commands that read a file as shell code: a placeholder or an expansion in their arguments is refused
SOURCE = frozenset({".", "source"})
#: bash's arithmetic and its integer attribute: a value in a variable is evaluated as an expression
#: (``a[$(cmd)]`` runs cmd); a template using one takes no placeholder
ARITHMETIC = frozenset({"let", "[["})
#: builtins that set the variables their arguments name: a placeholder must come after the ``=`` of NAME=
DECLARATIONS = frozenset({"export", "readonly", "local", "declare", "typeset"})
#: builtins whose arguments are variable names (evaluated as ``name[subscript]`` by bash): no placeholder
NAME_TAKERS = frozenset({"read", "mapfile", "readarray", "getopts", "unset"})
#: commands that run another command given in their arguments: name -> (options taking a separate argument,
#: positional arguments before the command)
WRAPPERS: Mapping[str, tuple[frozenset[str], int]] = {
    "sudo": (frozenset("-u -g -U -C -D -h -p -r -t -T -R --user --group --other-user --close-from --chdir --host "
                       "--prompt --role --type --command-timeout --chroot".split()), 0),
    "doas": (frozenset({"-u", "-C"}), 0),
    "env": (frozenset({"-u", "-C", "--unset", "--chdir"}), 0),
    "nohup": (frozenset(), 0), "setsid": (frozenset(), 0), "unbuffer": (frozenset(), 0),
    "builtin": (frozenset(), 0), "busybox": (frozenset(), 0), "unshare": (frozenset(), 0),
    "nice": (frozenset({"-n", "--adjustment"}), 0),
    "ionice": (frozenset({"-c", "-n", "-p", "-P", "-u", "--class", "--classdata"}), 0),
    "timeout": (frozenset({"-s", "-k", "--signal", "--kill-after"}), 1),
    "stdbuf": (frozenset({"-i", "-o", "-e"}), 0),
    "chrt": (frozenset(), 1), "taskset": (frozenset(), 1), "chroot": (frozenset(), 1),
    "exec": (frozenset({"-a"}), 0), "command": (frozenset(), 0), "time": (frozenset({"-f", "-o"}), 0),
    "xargs": (frozenset("-I -n -P -L -l -d -s -a -E -e --max-args --max-procs --max-lines --delimiter "
                        "--max-chars --arg-file --eof --replace".split()), 0),
    "flock": (frozenset({"-w", "-E", "--timeout", "--conflict-exit-code"}), 1),
    "nsenter": (frozenset({"-t", "-S", "-G", "--target", "--setuid", "--setgid"}), 0),
    "systemd-run": (frozenset({"-p", "-E", "-u", "-M", "-H", "--unit", "--property", "--setenv", "--uid",
                               "--gid", "--machine", "--host", "--description", "--slice"}), 0),
}
#: wrapper options that hand their command to a shell (``sudo -s``, ``flock -c``, ``env -S``): a template using
#: one takes no placeholder
WRAPPER_SHELL_OPTIONS: Mapping[str, frozenset[str]] = {
    "sudo": frozenset({"-s", "-i", "--shell", "--login"}), "doas": frozenset({"-s"}),
    "env": frozenset({"-S", "--split-string"}), "flock": frozenset({"-c", "--command"}),
}
#: interpreters: name -> (options whose argument is code or a program to load, options taking a data argument,
#: permuted: sed and awk read options after operands too). Their first operand is the program unless an option
#: gave it; what follows the program is data
INTERPRETERS: Mapping[str, tuple[frozenset[str], frozenset[str], bool]] = {
    "python": (frozenset({"-c", "-m"}), frozenset({"-W", "-X", "-Q"}), False),
    "pypy": (frozenset({"-c", "-m"}), frozenset({"-W", "-X", "-Q"}), False),
    "perl": (frozenset({"-e", "-E", "-M", "-m"}), frozenset(), False),
    "ruby": (frozenset({"-e", "-r"}), frozenset({"-I", "-C"}), False),
    "node": (frozenset({"-e", "--eval", "-p", "--print", "-r", "--require", "--import", "--loader"}), frozenset(),
             False),
    "php": (frozenset({"-r", "-f", "-B", "-R", "-F", "-E", "-c", "-d"}), frozenset(), False),
    "lua": (frozenset({"-e", "-l"}), frozenset(), False), "Rscript": (frozenset({"-e"}), frozenset(), False),
    "tclsh": (frozenset(), frozenset(), False), "wish": (frozenset(), frozenset(), False),
    "osascript": (frozenset({"-e"}), frozenset(), False),
    "awk": (frozenset({"-f", "-e", "--file", "--source", "-i", "--include"}),
            frozenset({"-v", "-F", "--assign", "--field-separator"}), True),
    "sed": (frozenset({"-e", "-f", "--expression", "--file"}), frozenset({"-l", "--line-length"}), True),
}
_INTERPRETER_ALIASES = {"gawk": "awk", "mawk": "awk", "nawk": "awk", "gsed": "sed", "jruby": "ruby",
                        "nodejs": "node", "luajit": "lua"}
#: words that start a compound command or a list; the command name is the word after them
_RESERVED = frozenset({"!", "{", "}", "if", "then", "else", "elif", "fi", "do", "done", "while", "until"})
#: compounds whose first words are not a command (``for x in {a} {b}``, ``case {r} in``)
_NOT_COMMANDS = frozenset({"for", "select", "case", "in", "esac"})
_ASSIGNMENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\+?=")
_FIND_EXEC = frozenset({"-exec", "-execdir", "-ok", "-okdir"})


@dataclass(frozen=True)
class TemplateProblem:
    """Why a template cannot take a value safely: ``placeholder`` (None: the template as a whole)."""

    placeholder: str | None
    why: str

    def __str__(self) -> str:
        return f"{{{self.placeholder}}} {self.why}" if self.placeholder else self.why


def command_name(text: str) -> str:
    """A command word's name as the lists know it: its basename, python3.11 -> python, gawk -> awk."""
    name = text.rsplit("/", 1)[-1]
    if re.fullmatch(r"python[0-9.]*|pypy[0-9.]*", name):
        name = "pypy" if name.startswith("pypy") else "python"
    elif re.fullmatch(r"(perl|ruby|php|lua|node|tclsh|wish)[0-9.]*", name):
        name = re.sub(r"[0-9.]+$", "", name)
    return _INTERPRETER_ALIASES.get(name, name)


def _options_end(words: list[Word], start: int, takes_arg: frozenset[str], positional: int,
                 allow_assignments: bool) -> int:
    """The index of the command a wrapper runs: past its options (``-u root``, ``-n``, ``--user=x``), its
    assignments (env's NAME=value) and its leading positional arguments (timeout's duration)."""
    i = start
    while i < len(words):
        text = words[i].text
        if text == "--":
            i += 1
            break
        if text.startswith("-") and len(text) > 1:
            i += 1 + _takes_next(text, takes_arg)
            continue
        if allow_assignments and _ASSIGNMENT.match(words[i].plain):
            i += 1
            continue
        if positional > 0:
            positional -= 1
            i += 1
            continue
        break
    return i


def _takes_next(text: str, takes_arg: frozenset[str]) -> int:
    """1 when option word ``text`` leaves its argument to the next word (``-u root``, ``-nu root``), else 0
    (a flag, ``--user=root``, ``-uroot``)."""
    if text.startswith("--"):
        return int(text in takes_arg)
    for pos, letter in enumerate(text[1:], start=1):
        if f"-{letter}" in takes_arg:
            return int(pos == len(text) - 1)
    return 0


def _shell_options(name: str, words: list[Word]) -> str | None:
    """The option of wrapper ``name`` among ``words`` that hands the command to a shell, if any."""
    wanted = WRAPPER_SHELL_OPTIONS.get(name, frozenset())
    for word in words:
        text = word.text.split("=", 1)[0]
        if text in wanted:
            return text
        if re.fullmatch(r"-[A-Za-z]+", text) and any(f"-{c}" in wanted for c in text[1:]):
            return text
    return None


class _Checker:
    """The rules over one template's lexed commands (see the module docstring)."""

    def __init__(self, lexed: Lexed) -> None:
        self.lexed = lexed
        self.problems: list[TemplateProblem] = []
        self.wide: str | None = None  # why the template as a whole takes no placeholder

    def refuse_words(self, words: list[Word], why: str) -> None:
        for word in words:
            for placeholder, _ in word.placeholders:
                self.problems.append(TemplateProblem(placeholder.name, why))

    def whole(self, why: str) -> None:
        if self.wide is None:
            self.wide = why

    def command(self, command: Command) -> None:
        if command.arithmetic:
            self.whole("the template has an arithmetic command (( ... )): bash evaluates a variable's value in "
                       "it as an expression, and a value could reach it through a variable")
        words = [w for w in command.words if w.role == "word"]
        for k, word in enumerate(words):  # a shell named anywhere with -c after it (docker exec c sh -c ...)
            if not word.dynamic and command_name(word.text) in SHELLS:
                rest = words[k + 1:]
                if any(re.fullmatch(r"-[A-Za-z]*c[A-Za-z]*", w.text) for w in rest):
                    self.whole(f"the template runs `{word.text} -c`, a shell that parses its argument as "
                               "shell again")
        i = 0
        while i < len(words):  # past assignments and reserved words: the command's name
            word = words[i]
            if word.text in _NOT_COMMANDS and not word.quoted:
                return
            if (word.text in _RESERVED and not word.quoted) or (_ASSIGNMENT.match(word.plain) and not
                                                                 word.text.startswith("=")):
                i += 1
                continue
            break
        self.invocation(words, i)

    def invocation(self, words: list[Word], i: int) -> None:
        """``words[i]`` is the name of a command that runs with ``words[i + 1:]``."""
        if i >= len(words):
            return
        head, args = words[i], words[i + 1:]
        if head.placeholders:
            self.refuse_words([head], "is the command's name: the run would choose the program that runs")
        elif head.dynamic:
            self.whole(f"the command `{head.text}` is computed when it runs (an expansion): what runs cannot be "
                       "checked, so the template takes no placeholder (write the program's path out)")
        else:
            name = command_name(head.text)
            handler = next((h for names, h in self._handlers() if name in names), None)
            if handler is not None:
                handler(name, head, args)

    def _handlers(self) -> list[tuple[Collection[str], Callable[[str, Word, list[Word]], None]]]:
        return [(RESHELL, self.reshell), (SHELLS, self.shell), (SOURCE, self.source), (ARITHMETIC, self.arith),
                (DECLARATIONS, self.declaration), (NAME_TAKERS, self.name_taker), (("printf", "test", "["),
                                                                                    self.name_option),
                (WRAPPERS, self.wrapper), (("find",), self.find), (INTERPRETERS, self.interpreter)]

    def reshell(self, name: str, head: Word, _args: list[Word]) -> None:
        if name == "function":
            self.whole("the template defines a shell function: a later word may run its body with the values")
            return
        self.whole(f"the template runs `{head.text}`, which parses text as shell again (a value could reach it "
                   "through a variable)")

    def source(self, _name: str, head: Word, args: list[Word]) -> None:
        if any(w.dynamic for w in args):
            self.whole(f"the template runs `{head.text}` on a file it computes: which code runs cannot be checked")
        self.refuse_words(args, f"is an argument of `{head.text}`, which runs a file as shell: the run would "
                                "choose the code")

    def arith(self, _name: str, head: Word, _args: list[Word]) -> None:
        self.whole(f"the template runs `{head.text}`: bash evaluates values there as arithmetic expressions, and a "
                   "value could reach it through a variable")

    def declaration(self, name: str, head: Word, args: list[Word]) -> None:
        option = next((w.text for w in args if w.text[:1] in "-+" and len(w.text) > 1), None)
        if option is not None:  # -i makes later assignments arithmetic, -n makes a name a reference
            self.whole(f"the template runs `{head.text} {option}`: bash evaluates values of such variables as "
                       "arithmetic expressions (or as names), and a value could reach one through a variable")
            return
        for word in args:
            for placeholder, after_equals in word.placeholders:
                if not after_equals:
                    self.problems.append(TemplateProblem(
                        placeholder.name, f"is the name of a variable `{head.text}` sets: the run would choose "
                                          "which variable (write NAME={" + placeholder.name + "})"))

    def name_taker(self, _name: str, head: Word, args: list[Word]) -> None:
        self.refuse_words(args, f"is an argument of `{head.text}`, which reads it as a variable's name (bash "
                                "evaluates a subscript in it)")

    def name_option(self, _name: str, head: Word, args: list[Word]) -> None:
        if any(w.text in ("-v", "-R") for w in args):
            self.refuse_words(args, f"is an argument of `{head.text}` with -v: bash evaluates a variable name's "
                                    "subscript")

    def find(self, _name: str, _head: Word, args: list[Word]) -> None:
        for k, word in enumerate(args):
            if word.text in _FIND_EXEC and not word.quoted:
                self.invocation(args, k + 1)

    def shell(self, _name: str, head: Word, args: list[Word]) -> None:
        """A shell with a script file runs that file, its arguments data; with -c, -s or no file it parses text
        as shell (its argument, its input)."""
        end = _options_end(args, 0, frozenset({"-o", "+o", "-O", "+O", "--rcfile", "--init-file"}), 0,
                           allow_assignments=False)
        flags = "".join(w.text[1:] for w in args[:end] if re.fullmatch(r"[-+][A-Za-z]+", w.text))
        if "c" in flags or "s" in flags or end >= len(args):
            self.whole(f"the template runs `{head.text}` on text it parses as shell again (-c, -s or its input; "
                       "a value could reach it through a variable)")
            return
        self.refuse_words(args[:end + 1], f"is the script `{head.text}` runs, or one of its options: the run would "
                                          "choose the code")
        if args[end].dynamic:
            self.whole(f"the template runs `{head.text}` on a script it computes: which code runs cannot be "
                       "checked")

    def wrapper(self, name: str, head: Word, args: list[Word]) -> None:
        takes_arg, positional = WRAPPERS[name]
        end = _options_end(args, 0, takes_arg, positional, allow_assignments=name == "env")
        if (option := _shell_options(name, args[:end])) is not None:
            self.whole(f"the template runs `{head.text} {option}`, which hands its command to a shell")
            return
        why = (f"is in `{head.text}`'s own arguments, before the command it runs: the value could become an option "
               "or that command (give an option's value glued to it: --name={value})")
        for word in args[:end]:
            glued = word.plain.startswith("--") or (name == "env" and _ASSIGNMENT.match(word.plain))
            for placeholder, after_equals in word.placeholders:
                if not (glued and after_equals):
                    self.problems.append(TemplateProblem(placeholder.name, why))
        self.invocation(args, end)

    def interpreter(self, name: str, head: Word, args: list[Word]) -> None:
        code_options, data_options, permuted = INTERPRETERS[name]
        why = f"is the program `{head.text}` runs (its code, script or options): the run would choose the code"
        given = False  # an option gave the program: operands are data
        operand_seen = False
        k = 0
        while k < len(args):
            word = args[k]
            if word.text == "--":
                if not given and not operand_seen and k + 1 < len(args):
                    self.refuse_words([args[k + 1]], why)
                return
            if word.text.startswith("-") and len(word.text) > 1 and (permuted or not operand_seen):
                self.refuse_words([word], why)  # -e{code}, --file={x}, -F{x}
                option = word.text.split("=", 1)[0]
                short = option[:2] if not option.startswith("--") else option
                if option in code_options or short in code_options:
                    given = True
                    if option in code_options and option == word.text and k + 1 < len(args):
                        self.refuse_words([args[k + 1]], why)
                        k += 1
                elif option in data_options and option == word.text:
                    k += 1  # -v name=value, -F ':': data
                k += 1
                continue
            if not given and not operand_seen:
                self.refuse_words([word], why)
            operand_seen = True
            if not permuted:
                return
            k += 1

    def check(self) -> list[TemplateProblem]:
        if self.lexed.defines_function:
            self.whole("the template defines a shell function: a later word may run its body with the values")
        if self.lexed.arithmetic:
            self.whole("the template has an arithmetic expansion $(( )) or command (( )): bash evaluates a "
                       "variable's value there as an expression, and a value could reach it through a variable")
        for command in self.lexed.commands:
            self.command(command)
        problems = [TemplateProblem(s.placeholder.name, f"sits {CONTEXTS[s.context]}: the value's quoting does not "
                                                        "hold there")
                    for s in self.lexed.spots if s.context is not None]
        problems += self.problems
        if self.wide is not None and any(True for _ in self.lexed.spots):
            placed = sorted({s.placeholder.name for s in self.lexed.spots})
            problems.append(TemplateProblem(None, f"{self.wide}; it has {', '.join('{' + n + '}' for n in placed)}"))
        unique: list[TemplateProblem] = []
        for problem in problems:
            if problem not in unique:
                unique.append(problem)
        return unique


def template_problems(template: str) -> list[TemplateProblem]:
    """Why ``template``'s placeholders cannot take a value safely (empty: every one is a bare word part where no
    command reads it as shell). ValueError: the template is not a valid format string."""
    lexed = lex(template)
    if lexed.problem is not None:
        return [TemplateProblem(None, f"the template is not shell text the check can follow: {lexed.problem}"),
                *(TemplateProblem(s.placeholder.name, f"sits {CONTEXTS[s.context]}") for s in lexed.spots
                  if s.context is not None)]
    return _Checker(lexed).check()


def env_name(name: str) -> str:
    """The environment variable holding placeholder ``name``'s value."""
    return ENV_PREFIX + name


def render(template: str, values: Mapping[str, str]) -> tuple[str, dict[str, str]]:
    """``template`` as the shell text that runs (each placeholder ``"${KIP848_ARG_name}"``) and the environment
    holding the values: no shell parses a value."""
    script = template.format(**{name: f'"${{{env_name(name)}}}"' for name in values})
    return script, {env_name(name): value for name, value in values.items()}


def display(template: str, values: Mapping[str, str]) -> str:
    """``template`` with each value written in as one shell-quoted word: what the approval and the reports show,
    the same command as :func:`render` runs (a placeholder is a bare word part, so the two read the same)."""
    return template.format(**{name: shlex.quote(value) for name, value in values.items()})


__all__ = ["ARITHMETIC", "DECLARATIONS", "ENV_PREFIX", "INTERPRETERS", "NAME_TAKERS", "RESHELL", "SHELLS", "SOURCE",
           "WRAPPERS", "WRAPPER_SHELL_OPTIONS", "TemplateProblem", "command_name", "display", "env_name", "render",
           "template_problems"]
