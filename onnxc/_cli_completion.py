"""Shell completion for the ``onnxc`` command, generated from its argparse parser: the
commands, each command's options, and the values of options with a fixed set of choices;
anything else completes as a file name (models, artifact folders, input files)."""
from __future__ import annotations

import argparse
import shlex
from dataclasses import dataclass

SHELLS = ("bash", "zsh")


@dataclass(frozen=True)
class Command:
    name: str
    options: tuple[str, ...]                          # every option string, -h included
    choices: tuple[tuple[str, tuple[str, ...]], ...]  # (option string, its values)
    arguments: tuple[str, ...]                        # values of positional arguments with choices


def commands(parser: argparse.ArgumentParser) -> tuple[tuple[str, ...], tuple[Command, ...]]:
    """The parser's own options, and its commands with what each takes."""
    top = tuple(s for a in parser._actions for s in a.option_strings)
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    found = []
    for name, p in sub.choices.items():
        options = tuple(s for a in p._actions for s in a.option_strings)
        choices = tuple((s, tuple(str(c) for c in a.choices)) for a in p._actions if a.option_strings and a.choices
                        for s in a.option_strings)
        arguments = tuple(str(c) for a in p._actions if not a.option_strings and a.choices for c in a.choices)
        found.append(Command(name, options, choices, arguments))
    return top, tuple(found)


def _words(words: tuple[str, ...]) -> str:
    return shlex.quote(" ".join(words))


def bash_script(parser: argparse.ArgumentParser) -> str:
    top, cmds = commands(parser)
    values = "\n".join(f"        {shlex.quote(f'{c.name} {option}')}) COMPREPLY=($(compgen -W {_words(vals)} "
                       '-- "$cur")); return ;;' for c in cmds for option, vals in c.choices)
    options = "\n".join(f'        {shlex.quote(c.name)}) COMPREPLY=($(compgen -W {_words(c.options)} -- "$cur")) ;;'
                        for c in cmds)
    arguments = "\n".join(f'        {shlex.quote(c.name)}) COMPREPLY=($(compgen -W {_words(c.arguments)} -- "$cur")); '
                          'return ;;' for c in cmds if c.arguments)
    names = _words(tuple(c.name for c in cmds) + top)
    return f"""\
# bash completion for onnxc (`onnxc completion bash`; generated from its options)
_onnxc() {{
    local cur="${{COMP_WORDS[COMP_CWORD]}}" prev="${{COMP_WORDS[COMP_CWORD-1]}}" command="" i
    for ((i = 1; i < COMP_CWORD; i++)); do
        if [[ "${{COMP_WORDS[i]}}" != -* ]]; then command="${{COMP_WORDS[i]}}"; break; fi
    done
    if [[ -z "$command" ]]; then
        COMPREPLY=($(compgen -W {names} -- "$cur"))
        return
    fi
    case "$command $prev" in
{values}
    esac
    if [[ "$cur" == -* ]]; then
        case "$command" in
{options}
        esac
        return
    fi
    case "$command" in
{arguments}
    esac
    COMPREPLY=($(compgen -f -- "$cur"))
}}
complete -o filenames -o bashdefault -F _onnxc onnxc
"""


def zsh_script(parser: argparse.ArgumentParser) -> str:
    """zsh runs the bash function through its bash-completion layer (bashcompinit)."""
    return ("#compdef onnxc\n# zsh completion for onnxc (`onnxc completion zsh`)\n"
            "autoload -U +X bashcompinit && bashcompinit\n" + bash_script(parser))


def script(parser: argparse.ArgumentParser, shell: str) -> str:
    return bash_script(parser) if shell == "bash" else zsh_script(parser)
