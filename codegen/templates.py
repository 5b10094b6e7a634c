"""The Jinja environment for kernel and model templates (StrictUndefined, no autoescape)."""
from __future__ import annotations

import functools
from importlib import resources
from typing import Any

import jinja2


@functools.lru_cache(maxsize=1)
def environment() -> jinja2.Environment:
    root = resources.files("onnxc.templates")
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(str(root)),
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
        autoescape=False,
    )
    return env


def render(template: str, data: dict[str, Any]) -> str:
    return environment().get_template(template).render(**data)
