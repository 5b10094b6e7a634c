"""The README and docs/ agree with the code: every doc is linked, every relative link resolves,
every ``onnxc.NAME``, ``SessionOptions.member`` and file path they mention exists, every
``onnxc COMMAND --flag`` they show is a flag of that command, every ``CompileOptions(field=...)``
a field, and the operator count they state holds. Cheap: it reads text and imports onnxc
(about ten seconds)."""
from __future__ import annotations

import dataclasses
import importlib
import re
from pathlib import Path

import pytest

import onnxc
from onnxc.benchmarks.cli import parser as suite_parser
from onnxc.cli import build_parser
from onnxc.compiler.ops import registry

REPO = Path(__file__).resolve().parents[1]
DOCS = sorted((REPO / "docs").glob("*.md"))
PAGES = [REPO / "README.md", REPO / "benchmarks" / "README.md", *DOCS]


def text(page: Path) -> str:
    return page.read_text(encoding="utf-8")


def page_id(page: Path) -> str:
    return str(page.relative_to(REPO))


def test_readme_links_every_doc():
    readme = text(REPO / "README.md")
    unlinked = [page_id(doc) for doc in DOCS if f"]({page_id(doc)})" not in readme]
    assert not unlinked, f"README.md does not link {unlinked}"


@pytest.mark.parametrize("page", PAGES, ids=page_id)
def test_relative_links_resolve(page):
    broken = []
    for target in re.findall(r"\]\(([^)\s]+)\)", text(page)):
        if re.match(r"[a-z]+:", target) or target.startswith("#"):
            continue
        if not (page.parent / target.split("#")[0]).exists():
            broken.append(target)
    assert not broken, f"{page_id(page)} links to missing files: {broken}"


def resolve(dotted: str) -> bool:
    """Whether ``onnxc.a.b`` names a module or an attribute."""
    parts = dotted.split(".")
    obj = onnxc
    for i, part in enumerate(parts[1:], start=2):
        if hasattr(obj, part):
            obj = getattr(obj, part)
            continue
        try:
            obj = importlib.import_module(".".join(parts[:i]))
        except ImportError:
            return False
    return True


@pytest.mark.parametrize("page", PAGES, ids=page_id)
def test_named_python_api_exists(page):
    # onnxc.NAME, not part of a longer dotted name (a config key such as session.onnxc.march)
    names = set(re.findall(r"(?<![\w.{])onnxc(?:\.[A-Za-z_]\w*)+", text(page)))
    names = {n.rstrip(".") for n in names if not n.startswith("onnxc.session")}   # logger names
    missing = sorted(n for n in names if not resolve(n))
    assert not missing, f"{page_id(page)} names what onnxc lacks: {missing}"


def command_flags() -> dict[str, set[str]]:
    parser = build_parser()
    commands = next(a for a in parser._actions if a.dest == "command").choices
    flags = {name: {flag for action in sub._actions for flag in action.option_strings}
             for name, sub in commands.items()}
    # `onnxc bench` without a model runs the benchmark suite, with the suite's options
    flags["bench"] |= {flag for action in suite_parser()._actions for flag in action.option_strings}
    return flags


@pytest.mark.parametrize("page", PAGES, ids=page_id)
def test_command_lines_use_real_flags(page):
    flags = command_flags()
    wrong = []
    for command, rest in re.findall(r"(?<![\w-])onnxc (\w+)((?: [^`\n|#]*)?)", text(page)):
        if command not in flags:
            continue                        # prose ("onnxc compiles ..."), not a command line
        for flag in re.findall(r"(?<![\w-])(--?[A-Za-z][\w-]*)", rest):
            if flag not in flags[command] and not flag.startswith(("-O", "-march", "-f", "-m")):
                wrong.append(f"onnxc {command} {flag}")
    assert not wrong, f"{page_id(page)} shows flags the commands lack: {sorted(set(wrong))}"


@pytest.mark.parametrize("page", PAGES, ids=page_id)
def test_compile_options_fields_exist(page):
    fields = {f.name for f in dataclasses.fields(onnxc.CompileOptions)}
    used = {name for call in re.findall(r"CompileOptions\(([^)]*)\)", text(page))
            for name in re.findall(r"(\w+)\s*=", call)}
    assert used <= fields, f"{page_id(page)}: CompileOptions has no {sorted(used - fields)}"


def test_stated_operator_count_holds():
    stated = re.search(r"over (\d+) operators", text(REPO / "README.md"))
    assert stated, "README.md states how many operators onnxc supports"
    supported = {(domain, op) for domain, op, *_ in registry.supported_ops()}
    assert len(supported) > int(stated.group(1))


def repo_path_exists(path: str) -> bool:
    """A path as the docs write it: from the repository root, or under one of the package's folders."""
    roots = [REPO, REPO / "tests", REPO / "templates", REPO / "compiler", REPO / "runtime", REPO / "codegen"]
    return any((root / path).exists() for root in roots) or bool(list(REPO.glob(f"**/{path}")))


@pytest.mark.parametrize("page", PAGES, ids=page_id)
def test_named_files_exist(page):
    named = set(re.findall(r"`([\w./-]+/[\w.-]+\.(?:py|j2|md|txt|c|h|toml))`", text(page)))
    named = {p for p in named if "NAME" not in p and not p.startswith(("build/", "/"))}     # not placeholders
    missing = sorted(p for p in named if not repo_path_exists(p))
    assert not missing, f"{page_id(page)} names files the repository lacks: {missing}"


@pytest.mark.parametrize("page", PAGES, ids=page_id)
def test_named_members_exist(page):
    # instances, for the options classes, whose settings are instance attributes
    owners = {"SessionOptions": onnxc.SessionOptions(), "RunOptions": onnxc.RunOptions(),
              "InferenceSession": onnxc.InferenceSession, "IOBinding": onnxc.IOBinding, "OrtValue": onnxc.OrtValue}
    fields = {f.name for f in dataclasses.fields(onnxc.CompileOptions)}
    missing = sorted(f"{owner}.{member}" for owner, member in set(re.findall(r"\b(\w+)\.([a-z_]\w*)", text(page)))
                     if (owner == "CompileOptions" and member not in fields)
                     or (owner in owners and not hasattr(owners[owner], member)))
    assert not missing, f"{page_id(page)} names members onnxc lacks: {missing}"
