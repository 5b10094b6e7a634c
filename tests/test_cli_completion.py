"""``onnxc completion bash|zsh``: the script completes the commands, every command's options,
the values of options with choices, and file names, as the shells run it."""
from __future__ import annotations

import argparse
import contextlib
import io
import shlex
import shutil
import subprocess
from pathlib import Path

import pytest
from tools import ensure_tools, missing

from onnxc import cli


def script(shell: str) -> str:
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert cli.main(["completion", shell]) == 0
    return out.getvalue()


def bash_complete(words: list[str], cwd: Path) -> set[str]:
    """What bash offers for the last of ``words`` (the word being typed) after the script is loaded."""
    if shutil.which("bash") is None:
        missing("needs bash")
    line = " ".join(shlex.quote(w) for w in words)
    program = (f"{script('bash')}\nCOMP_WORDS=({line}); COMP_CWORD={len(words) - 1}; _onnxc\n"
               'printf "%s\\n" "${COMPREPLY[@]}"\n')
    proc = subprocess.run(["bash", "--norc", "--noprofile", "-c", program], cwd=cwd, capture_output=True, text=True,
                          timeout=60)
    assert proc.returncode == 0 and not proc.stderr, proc.stderr
    return {w for w in proc.stdout.splitlines() if w}


def subcommands() -> dict[str, argparse.ArgumentParser]:
    parser = cli.build_parser()
    return next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction)).choices


def test_commands(tmp_path: Path) -> None:
    assert bash_complete(["onnxc", "c"], tmp_path) == {"cache", "compile", "completion"}
    assert bash_complete(["onnxc", ""], tmp_path) >= set(subcommands()) | {"--help", "--version"}


@pytest.mark.parametrize("command", sorted(subcommands()))
def test_every_option_of_every_command(command: str, tmp_path: Path) -> None:
    wanted = {s for a in subcommands()[command]._actions for s in a.option_strings}
    assert bash_complete(["onnxc", command, "-"], tmp_path) == wanted
    assert bash_complete(["onnxc", "-v", command, "--"], tmp_path) == {s for s in wanted if s.startswith("--")}


def test_known_options(tmp_path: Path) -> None:
    assert {"--target", "--cuda-arch", "--dim", "--cflags-opt", "--portable", "-O"} <= bash_complete(
        ["onnxc", "compile", "-"], tmp_path)
    assert bash_complete(["onnxc", "verify", "--r"], tmp_path) == {"--rtol"}


@pytest.mark.parametrize("words, values", [
    (["onnxc", "compile", "m.onnx", "--target", ""], {"native", "c", "cuda"}),
    (["onnxc", "compile", "-O", ""], {"0", "1", "2", "99"}),
    (["onnxc", "compile", "--weights", "b"], {"bin"}),
    (["onnxc", "run", "--log-level", "w"], {"warning"}),
    (["onnxc", "completion", ""], {"bash", "zsh"}),
])
def test_option_values(words: list[str], values: set[str], tmp_path: Path) -> None:
    assert bash_complete(words, tmp_path) == values


def test_file_names(tmp_path: Path) -> None:
    (tmp_path / "model.onnx").write_bytes(b"")
    (tmp_path / "mobile.onnx").write_bytes(b"")
    (tmp_path / "build").mkdir()
    assert bash_complete(["onnxc", "info", "mo"], tmp_path) == {"model.onnx", "mobile.onnx"}
    assert bash_complete(["onnxc", "compile", "model.onnx", "-o", "bu"], tmp_path) == {"build"}


def test_zsh_loads_the_script(tmp_path: Path) -> None:
    ensure_tools({"zsh": "zsh"})
    path = tmp_path / "_onnxc"
    path.write_text(script("zsh"))
    program = f"autoload -U compinit && compinit -u -D && source {shlex.quote(str(path))} && print -r -- $_comps[onnxc]"
    proc = subprocess.run(["zsh", "-f", "-c", program], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert "_onnxc" in proc.stdout


def test_unknown_shell_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["completion", "fish"]) == cli.EXIT_ERROR
    assert "invalid choice: 'fish'" in capsys.readouterr().err
