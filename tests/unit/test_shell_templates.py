"""Command templates whose values cannot become shell: the lexer (controllers/shell.py), the rules over it
(controllers/templates.py) and the rendering that keeps every value away from a shell's parser.

* where a placeholder sits: a bare word part is allowed (``--region={region}``, ``/etc/{app}.conf``, next to
  escaped or closed quotes); inside single or double quotes, ``$'...'``, backticks, ``$( )``, ``$(( ))``,
  ``${...}``, a here-document (body or delimiter), a comment, after a backslash or a ``$``, in a tilde prefix:
  refused, each saying where;
* what reads it: a shell (``sh -c``, ``bash -ec``, a pipe into ``sh``, ``docker exec c sh -c``), ``eval``,
  ``ssh``, ``su``, a wrapper handing its command to a shell (``sudo -s``, ``flock -c``, ``env -S``), bash
  arithmetic and attributes, a function definition, a computed command: the whole template takes no
  placeholder; a placeholder as a command's name, in a wrapper's own arguments, as an interpreter's program or
  a variable's name: refused;
* the rendering: each value travels in ``KIP848_ARG_<name>`` and the text runs ``"${KIP848_ARG_<name>}"``; run
  by the real ``/bin/sh`` (dash) and ``bash`` with hostile values, every accepted template gives each value as
  one argument, exactly what the approval's display shows, and never runs anything of it; the same holds for
  randomly generated templates the check accepts.
"""

from __future__ import annotations

import random
import shlex
import subprocess

import pytest

from airflow_provider_kip848.controllers.shell import lex
from airflow_provider_kip848.controllers.templates import display, render, template_problems

ALLOWED = [
    "stop {r}", "ctl --region={r}", "/usr/bin/ctl --config /etc/{a}.conf", "ctl a{r}b", "ctl it\\'s {r}",
    "ctl 'quoted text' {r} \"more\"", "ctl {r}'suffix'", "ctl \"prefix\"{r}", "ctl > /var/log/{r}.log",
    "ctl 2>&1 {r}", "A={r} ctl", "export A={r}", "env A={r} ctl", "sudo -n /usr/local/sbin/ctl start {group_protocol}",
    "sudo --user={u} ctl", "timeout 5 ctl {r}", "python3 /opt/x.py {r}", "python3 -u /opt/x.py --x={r}",
    "python3 -c 'import sys' {r}", "sed -n s/a/b/p {f}", "awk -F: -v x={v} '{{print x}}' /etc/{a}.conf",
    "for x in {a}; do echo $x; done", "case {r} in eu) echo a;; esac",
    "printf '%s' {group_protocol} > /p && supervisorctl start {instance}", "bash /opt/roll.sh {r}",
    "bash -o pipefail /opt/roll.sh {r}", "cat <<EOF\nliteral $HOME\nEOF\nctl {r}", "ctl '#' {r}", "ctl a#b {r}",
    "ctl \"$HOME\" {r}", "ctl ${{HOME}} {r}", "awk '{{print $2}}' {f}", "ctl {r} # a comment",
    "ctl \\\n  {r}", "{{ ctl {r}; }}", "( ctl {r} )", "find /srv -name {n} -print", "xargs -I{{}} rm {r}",
    ". /opt/env.sh && ctl {r}", "ctl {r} | grep -v sh", "if ctl {r}; then echo ok; fi",
    "ctl \"$(date)\" {r}", "printf '%s\\n' \"a'b\" {r}",
]


@pytest.mark.parametrize("template", ALLOWED)
def test_a_bare_placeholder_in_a_word_is_allowed(template):
    assert template_problems(template) == []


CONTEXT_REFUSALS = [
    ("stop '{r}'", "inside single quotes"),
    ("ctl 'it'\\''s {r}'", "inside single quotes"),
    ("stop \"{r}\"", "inside double quotes"),
    ("ctl \"a\\\"b {r}\"", "inside double quotes"),
    ("ctl $'{r}'", "inside $'...'"),
    ("ctl `echo {r}`", "inside backticks"),
    ("ctl $(echo {r})", "inside $( )"),
    ("x=$(cat /etc/{r}) ctl", "inside $( )"),
    ("ctl \"$(echo \")\" {r})\"", "inside double quotes"),
    ("ctl $((1+{r}))", "inside an arithmetic expression"),
    ("(( n = {r} ))", "inside an arithmetic expression"),
    ("ctl ${{X:-{r}}}", "inside ${...}"),
    ("cat <<EOF\n{r}\nEOF", "in a here-document's body"),
    ("cat <<'EOF'\n{r}\nEOF", "in a here-document's body"),
    ("cat <<-EOF\n\ta {r}\n\tEOF", "in a here-document's body"),
    ("ctl # {r}", "in a comment"),
    ("ctl \\{r}", "right after a backslash"),
    ("ctl ${r}", "right after '$'"),
    ("ls ~{u}/x", "in a tilde prefix"),
]


@pytest.mark.parametrize("template, where", CONTEXT_REFUSALS)
def test_a_placeholder_where_the_quoting_does_not_hold_is_refused_saying_where(template, where):
    problems = [str(p) for p in template_problems(template)]
    assert any(p.startswith("{") and where in p and "the value's quoting does not hold there" in p
               for p in problems), problems


def test_a_here_document_delimiter_placeholder_is_refused():
    problems = [str(p) for p in template_problems("cat <<{d}\nx\n{d}\nctl")]
    assert any("in a here-document's delimiter" in p for p in problems), problems
    assert any("not shell text the check can follow" in p for p in problems), problems


@pytest.mark.parametrize("template", ["ctl 'unclosed {r}", "ctl \"unclosed {r}", "ctl $(echo {r}",
                                      "ctl `x {r}", "cat <<EOF\n{r}\n"])
def test_text_the_lexer_cannot_follow_is_refused(template):
    problems = [str(p) for p in template_problems(template)]
    assert problems and "not shell text the check can follow" in problems[0], problems


WHOLE_REFUSALS = [
    ("sh -c \"x {r}\"", "`sh -c`"), ("sh -c x {r}", "`sh -c`"), ("bash -ec x {r}", "`bash -c`"),
    ("X={r}; sh -c \"$X\"", "`sh -c`"), ("ctl {r} | sh", "`sh` on text it parses"), ("sh -s {r}", "`sh` on text"),
    ("docker exec app sh -c ls {r}", "`sh -c`"), ("find /x -exec sh -c 'rm $1' sh {{}} \\; ; echo {r}", "`sh -c`"),
    ("/bin/bash -lc 'x' {r}", "`/bin/bash -c`"), ("eval {r}", "`eval`"), ("X={r}; eval \"ctl $X\"", "`eval`"),
    ("ssh host ls {r}", "`ssh`"), ("su -c ls root {r}", "`su`"), ("sudo -s ctl {r}", "`sudo -s`"),
    ("sudo -nu root -i ctl {r}", "`sudo -i`"), ("flock /run/l -c ctl {r}", "`flock -c`"),
    ("env -S 'ctl x' {r}", "`env -S`"), ("watch ctl {r}", "`watch`"), ("trap 'ctl' EXIT; ctl {r}", "`trap`"),
    ("[[ {r} == a ]]", "`[[`"), ("let x={r}", "`let`"), ("declare -i n; n={r}; ctl $n", "`declare -i`"),
    ("local -n ref; ctl {r}", "`local -n`"), ("ctl $((n+1)); x={r}", "arithmetic expansion"),
    ("f() {{ :; }}; f {r}", "defines a shell function"), ("function f {{ :; }}; f {r}", "defines a shell function"),
    ("$HOME/bin/ctl {r}", "is computed when it runs"), ("\"$CTL\" stop {r}", "is computed when it runs"),
    ("$(command -v ctl) {r}", "is computed when it runs"), (". \"$F\" && ctl {r}", "on a file it computes"),
]


@pytest.mark.parametrize("template, what", WHOLE_REFUSALS)
def test_a_template_running_something_that_parses_text_again_takes_no_placeholder(template, what):
    problems = [str(p) for p in template_problems(template)]
    whole = [p for p in problems if not p.startswith("{")]
    assert whole and what in whole[0] and whole[0].endswith("{r}"), problems


PLACE_REFUSALS = [
    ("{cmd} --x", "is the command's name"), ("/opt/{app}/bin/stop", "is the command's name"),
    ("sudo {r}", "is the command's name"), ("env {r}", "is the command's name"), ("nice -n 5 {r}", "command's name"),
    ("exec {r}", "is the command's name"), ("find /x -exec {c} \\;", "is the command's name"),
    ("sudo -u {u} ctl", "in `sudo`'s own arguments"), ("timeout {n} ctl", "in `timeout`'s own arguments"),
    ("sudo -u{u} ctl", "in `sudo`'s own arguments"),
    ("python3 {r}", "is the program `python3` runs"), ("python3 -c {r}", "program `python3`"),
    ("python3 -m {r}", "program `python3`"), ("python3 -W{r} x.py", "program `python3`"),
    ("perl -e {r}", "program `perl`"), ("node -e {r}", "program `node`"), ("sed {r} f", "program `sed`"),
    ("sed -e s/a/b/ -e {r} f", "program `sed`"), ("sed s/a/b/ f -e {r}", "program `sed`"),
    ("awk {p} f", "program `awk`"), ("gawk -f {p} f", "program `gawk`"), ("sudo -n python3 {r}", "program `python3`"),
    ("export {r}", "is the name of a variable `export` sets"), ("readonly {r}=1", "the name of a variable"),
    ("read {r}", "reads it as a variable's name"), ("unset {r}", "variable's name"),
    ("printf -v {r} x", "with -v"), ("[ -v {r} ]", "with -v"), (". {r}", "runs a file as shell"),
    ("source /opt/{r}.sh", "runs a file as shell"), ("bash {r}", "is the script `bash` runs"),
]


@pytest.mark.parametrize("template, why", PLACE_REFUSALS)
def test_a_placeholder_where_a_command_reads_code_a_name_or_a_program_is_refused(template, why):
    problems = [str(p) for p in template_problems(template)]
    assert any(p.startswith("{") and why in p for p in problems), problems


def test_the_lexer_keeps_top_level_commands_and_word_text_after_quote_removal():
    lexed = lex("A=1 sudo -n 'ctl' \"it's\" {r} 2>/dev/null | grep x; echo done\nnext")
    assert [[w.text for w in c.words] for c in lexed.commands] == [
        ["A=1", "sudo", "-n", "ctl", "it's", "{r}", "2", "/dev/null"], ["grep", "x"], ["echo", "done"], ["next"]]
    roles = [w.role for w in lexed.commands[0].words]
    assert roles[-2:] == ["io", "redirect"]
    assert [(s.placeholder.name, s.context) for s in lexed.spots] == [("r", None)]
    assert not lexed.defines_function and not lexed.arithmetic and lexed.problem is None


def test_a_here_document_body_is_skipped_to_its_delimiter_and_commands_go_on():
    lexed = lex("cat <<-'END' > /tmp/f\n\t$(not run) 'x\n\tEND\nctl {r}")
    assert [[w.text for w in c.words] for c in lexed.commands] == [["cat", "END", "/tmp/f"], ["ctl", "{r}"]]
    assert [(s.placeholder.name, s.context) for s in lexed.spots] == [("r", None)]


# -- the rendering, run by real shells ----------------------------------------------------------------------------

HOSTILE = ["eu; touch X", "$(touch X)", "`touch X`", "'; touch X; '", "\"; touch X; \"", "a\nb; touch X", "*",
           "-n", "\\", "${HOME}", "~root", "", "  spaced  ", "x' 'y", "$'\\x41'", "{r}", "%s%n"]
#: (template, what printf prints for a value); the first two are one simple command, whose display splits into
#: printf's arguments
RUN_TEMPLATES = [
    ("printf '[%s]\\n' {r}", lambda v: [v]),
    ("printf '[%s]\\n' --region={r} a{r}b /etc/{r}.conf", lambda v: [f"--region={v}", f"a{v}b", f"/etc/{v}.conf"]),
    ("X={r} && printf '[%s]\\n' \"$X\" {r}\"q\"", lambda v: [v, f"{v}q"]),
    ("for x in {r}; do printf '[%s]\\n' \"$x\"; done", lambda v: [v]),
    ("case {r} in *) printf '[%s]\\n' {r};; esac", lambda v: [v]),
    ("printf '[%s]\\n' {r} > out.txt && cat out.txt", lambda v: [v]),
    ("env A={r} sh /dev/null && printf '[%s]\\n' \"it's\" {r}", lambda v: ["it's", v]),
]


def _printed(stdout: str) -> list[str]:
    """The ``[%s]`` lines printf wrote, as the values they hold (a value may hold a newline)."""
    assert stdout.startswith("[") and stdout.endswith("]\n"), stdout
    return stdout[1:-2].split("]\n[")


@pytest.mark.parametrize("shell", ["/bin/sh", "bash"])
@pytest.mark.parametrize("template, expected", RUN_TEMPLATES, ids=[t for t, _ in RUN_TEMPLATES])
def test_a_value_reaches_the_command_as_one_argument_and_as_the_approval_shows_it(shell, template, expected,
                                                                                   tmp_path):
    """Run by dash and by bash: every hostile value arrives whole (the argv printf got), never runs (no X), and
    the display an approval shows splits, as a shell reads it, into the same arguments."""
    assert template_problems(template) == []
    for value in HOSTILE:
        script, env = render(template, {"r": value})
        done = subprocess.run([shell, "-c", script], env={"PATH": "/usr/bin:/bin", **env}, cwd=tmp_path,
                              capture_output=True, text=True, timeout=30, check=False)
        assert done.returncode == 0, (value, done.stderr)
        assert _printed(done.stdout) == expected(value), value
        shown = display(template, {"r": value})
        if template in (RUN_TEMPLATES[0][0], RUN_TEMPLATES[1][0]):  # one simple command: its words are the arguments
            assert shlex.split(shown, comments=False)[2:] == expected(value), shown
        assert not (tmp_path / "X").exists(), f"{value!r} ran as shell in {script!r}"


def test_render_puts_each_value_in_its_variable_and_display_quotes_it():
    script, env = render("ctl --region={region} {mode} {{literal}}", {"region": "eu 1", "mode": "x'y"})
    assert script == 'ctl --region="${KIP848_ARG_region}" "${KIP848_ARG_mode}" {literal}'
    assert env == {"KIP848_ARG_region": "eu 1", "KIP848_ARG_mode": "x'y"}
    assert display("ctl --region={region} {mode}", {"region": "eu 1", "mode": "x'y"}) == \
        "ctl --region='eu 1' 'x'\"'\"'y'"


_PIECES = ["printf '[%s]\\n'", "echo", ":", "true", "x={r}", "{r}", "'{r}'", "\"{r}\"", "'", "\"", "\\", "$(",
           ")", "`", ";", "|", "&&", "||", "#", "\n", "<<E", "E", "eval", "sh -c", "$x", "\"$x\"", "a{r}b", " ",
           "{{", "}}", "$((", "))", "${{", "}}", "(", ")", "bash", "-c", "cat", ">", "/dev/null", "'a b'", "$'x'",
           "exec", "sudo", "env", "~", "=", "\t", "2>&1", "for", "in", "do", "done", "read", "export"]


def test_random_templates_the_check_accepts_never_run_the_value(tmp_path):
    """Fuzzing the rules with the real shells: templates drawn from shell pieces (quotes, substitutions, eval,
    sh -c, here-documents, wrappers ...); every one the check accepts is run by dash and bash with values that
    would plant X if any shell parsed them. X never appears."""
    rng = random.Random(45)
    values = ["x; touch X", "$(touch X)", "`touch X`", "'; touch X #", "\"; touch X #", "\ntouch X\n"]
    accepted = 0
    for _ in range(1200):
        template = " ".join(rng.choice(_PIECES) for _ in range(rng.randint(2, 9)))
        try:
            if template_problems(template):
                continue
            render(template, {"r": "v"})
        except (ValueError, IndexError, KeyError):  # not a format string with only {r}
            continue
        if "{r}" not in template.replace("{{", "").replace("}}", ""):
            continue
        accepted += 1
        for shell in ("/bin/sh", "bash"):
            for value in values:
                script, env = render(template, {"r": value})
                subprocess.run([shell, "-c", script], env={"PATH": "/usr/bin:/bin", **env}, cwd=tmp_path,
                               stdin=subprocess.DEVNULL, capture_output=True, timeout=30, check=False)
                assert not (tmp_path / "X").exists(), f"{template!r} ran {value!r} under {shell}"
    assert accepted >= 30, accepted  # the fuzz exercised accepted templates, not only refusals


def test_the_fuzz_refuses_what_would_run_the_value_under_the_old_quoting(tmp_path):
    """The other side of the fuzz: among the drawn templates the check refuses, many would have run the value
    with the old rendering (each value shell-quoted into the text): the refusals are not idle."""
    rng = random.Random(46)
    ran = 0
    for _ in range(300):
        template = " ".join(rng.choice(_PIECES) for _ in range(rng.randint(2, 9)))
        try:
            if not template_problems(template):
                continue
            old = display(template, {"r": "x'; touch X; '$(touch X)`touch X`"})
        except (ValueError, IndexError, KeyError):
            continue
        subprocess.run(["/bin/sh", "-c", old], cwd=tmp_path, stdin=subprocess.DEVNULL, capture_output=True,
                       timeout=30, check=False)
        if (tmp_path / "X").exists():
            ran += 1
            (tmp_path / "X").unlink()
    assert ran >= 5, ran

