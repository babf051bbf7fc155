"""``tuidebug completion bash|zsh|fish``: a shell completion script written from the parser.

Every sub-command, option (with its help and, where it has them, its choices) comes from the
argparse parser itself, so the script is never out of date with the commands. Arguments that are
not options complete as file names (traces, archives, scripts).

    eval "$(tuidebug completion bash)"           # ~/.bashrc
    eval "$(tuidebug completion zsh)"            # ~/.zshrc (after compinit)
    tuidebug completion fish | source            # ~/.config/fish/config.fish
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass, field

SHELLS = ("bash", "zsh", "fish")
DESCRIPTION = ("Print a completion script for SHELL, written from tuidebug's own argument parser. "
               "bash: eval \"$(tuidebug completion bash)\" in ~/.bashrc; zsh: eval \"$(tuidebug "
               "completion zsh)\" in ~/.zshrc after compinit; fish: tuidebug completion fish | "
               "source in ~/.config/fish/config.fish.")


@dataclass
class Option:
    flags: list[str]
    help: str
    takes_value: bool
    choices: list[str] = field(default_factory=list)
    files: bool = True  # a value that may be a file name (not a number)


@dataclass
class Sub:
    name: str
    help: str
    options: list[Option]
    words: list[str] = field(default_factory=list)  # choices of its positional arguments


def _help(action: argparse.Action) -> str:
    text = action.help if isinstance(action.help, str) and action.help != argparse.SUPPRESS \
        else ""
    return " ".join(text.split())


def _options(parser: argparse.ArgumentParser) -> list[Option]:
    out = []
    for a in parser._actions:  # argparse's public API has no walk over actions
        if not a.option_strings or a.help == argparse.SUPPRESS:
            continue
        takes = a.nargs != 0 and not isinstance(a, (argparse._HelpAction,
                                                    argparse._VersionAction))
        out.append(Option(list(a.option_strings), _help(a), takes,
                          [str(c) for c in a.choices] if a.choices else [],
                          a.type not in (int, float)))
    return out


def _positional_words(parser: argparse.ArgumentParser) -> list[str]:
    return [str(c) for a in parser._actions if not a.option_strings and a.choices
            and not isinstance(a, argparse._SubParsersAction) for c in a.choices]


def describe(parser: argparse.ArgumentParser) -> tuple[list[Option], list[Sub]]:
    """The parser's own options and its sub-commands with theirs."""
    subs: list[Sub] = []
    for a in parser._actions:
        if isinstance(a, argparse._SubParsersAction):
            helps = {c.dest: _help(c) for c in a._choices_actions}
            for name, p in a.choices.items():
                subs.append(Sub(name, helps.get(name, ""), _options(p), _positional_words(p)))
    return _options(parser), subs


def _words(options: list[Option]) -> str:
    return " ".join(f for o in options for f in o.flags)


def bash(prog: str, parser: argparse.ArgumentParser) -> str:
    top, subs = describe(parser)
    fn = f"_{prog.replace('-', '_')}_complete"
    cases = []
    for s in subs:
        valued = [f for o in s.options if o.takes_value and not o.choices and o.files
                   for f in o.flags]
        numbers = [f for o in s.options if o.takes_value and not o.files for f in o.flags]
        choice = "".join(f'\n        {"|".join(o.flags)}) COMPREPLY=($(compgen -W "'
                         f'{" ".join(o.choices)}" -- "$cur")); return;;'
                         for o in s.options if o.choices)
        files = f'\n        {"|".join(valued)}) COMPREPLY=($(compgen -f -- "$cur")); return;;' \
            if valued else ""
        nums = f'\n        {"|".join(numbers)}) return;;' if numbers else ""
        words = f' words="{" ".join(s.words)}"' if s.words else ""
        cases.append(f'    {s.name}) opts="{_words(s.options)}"{words}\n      case "$prev" in'
                     f'{choice}{files}{nums}\n      esac;;')
    body = "\n".join(cases)
    return f"""# bash completion for {prog} (written by `{prog} completion bash`)
{fn}() {{
  local cur="${{COMP_WORDS[COMP_CWORD]}}" prev="${{COMP_WORDS[COMP_CWORD-1]}}"
  local cmd="" opts="" words="" w
  for w in "${{COMP_WORDS[@]:1:COMP_CWORD-1}}"; do
    case "$w" in -*) ;; *) cmd="$w"; break;; esac
  done
  if [[ -z "$cmd" ]]; then
    COMPREPLY=($(compgen -W "{' '.join(s.name for s in subs)} {_words(top)}" -- "$cur"))
    return
  fi
  case "$cmd" in
{body}
  esac
  if [[ "$cur" == -* ]]; then
    COMPREPLY=($(compgen -W "$opts" -- "$cur"))
  elif [[ -n "$words" ]]; then
    COMPREPLY=($(compgen -W "$words" -- "$cur"))
  else
    COMPREPLY=($(compgen -f -- "$cur"))
  fi
}}
complete -o filenames -o bashdefault -F {fn} {prog}
"""


def _zq(text: str) -> str:
    """Text inside a single-quoted zsh _arguments/_describe spec."""
    for c in "\\[]:":
        text = text.replace(c, "\\" + c)
    return text.replace("'", "'\\''")


def zsh(prog: str, parser: argparse.ArgumentParser) -> str:
    _, subs = describe(parser)
    fn = f"_{prog.replace('-', '_')}"
    commands = "\n    ".join(f"'{_zq(s.name)}:{_zq(s.help)}'" for s in subs)
    cases = []
    for s in subs:
        specs = []
        for o in s.options:
            value = ""
            if o.takes_value:
                value = f":value:({' '.join(o.choices)})" if o.choices else \
                    ":value:_files" if o.files else ":number: "
            specs += [f"'{f}[{_zq(o.help)}]{value}'" for f in o.flags]
        specs.append(f"'*:word:({' '.join(s.words)})'" if s.words else "'*:file:_files'")
        cases.append(f"    {s.name}) _arguments -s \\\n        " + " \\\n        ".join(specs)
                     + " ;;")
    body = "\n".join(cases)
    return f"""#compdef {prog}
# zsh completion for {prog} (written by `{prog} completion zsh`)
{fn}() {{
  local -a commands
  commands=(
    {commands}
  )
  if (( CURRENT == 2 )); then
    _describe -t commands '{prog} command' commands
    return
  fi
  shift words
  (( CURRENT-- ))
  case $words[1] in
{body}
    *) _files ;;
  esac
}}
compdef {fn} {prog}
"""


def _fq(text: str) -> str:
    return "'" + text.replace("\\", "\\\\").replace("'", "\\'") + "'"


def fish(prog: str, parser: argparse.ArgumentParser) -> str:
    top, subs = describe(parser)
    lines = [f"# fish completion for {prog} (written by `{prog} completion fish`)",
             f"complete -c {prog} -f"]
    for o in top:
        lines.append(f"complete -c {prog} -n __fish_use_subcommand {_fish_flags(o)}")
    for s in subs:
        lines.append(f"complete -c {prog} -n __fish_use_subcommand -a {s.name} -d {_fq(s.help)}")
        cond = f"-n '__fish_seen_subcommand_from {s.name}'"
        for o in s.options:
            lines.append(f"complete -c {prog} {cond} {_fish_flags(o)}")
        lines.append(f"complete -c {prog} {cond} -a {_fq(' '.join(s.words))}" if s.words
                     else f"complete -c {prog} {cond} -F")
    return "\n".join(lines) + "\n"


def _fish_flags(o: Option) -> str:
    parts = []
    for f in o.flags:
        if f.startswith("--"):
            parts.append(f"-l {f[2:]}")
        elif len(f) == 2:
            parts.append(f"-s {f[1]}")
        else:
            parts.append(f"-o {f[1:]}")
    if o.choices:
        parts.append(f"-x -a {_fq(' '.join(o.choices))}")
    elif o.takes_value:
        parts.append("-r -F" if o.files else "-x")
    if o.help:
        parts.append(f"-d {_fq(o.help)}")
    return " ".join(parts)


def script(shell: str, parser: argparse.ArgumentParser) -> str:
    return {"bash": bash, "zsh": zsh, "fish": fish}[shell](parser.prog, parser)


def completion_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("shell", choices=SHELLS, help="the shell to write the script for")


def cmd_completion(ns: argparse.Namespace) -> int:
    from tuidebug.cli import build_parser

    print(script(ns.shell, build_parser()), end="")
    return 0
