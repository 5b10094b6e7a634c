"""The Jinja environment for kernel and model templates (StrictUndefined, no autoescape)."""
from __future__ import annotations

import contextlib
import functools
import os
import tempfile
from importlib import resources
from typing import Any, Optional

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
        bytecode_cache=_bytecode_cache(),
    )
    return env


def _bytecode_cache() -> jinja2.BytecodeCache:
    return _CompiledTemplates()


class _CompiledTemplates(jinja2.BytecodeCache):
    """Compiled templates kept in the compile cache's ``templates`` folder (a second of every
    cold compile otherwise); Jinja checks each against its template's source. The folder is
    looked up at each use (ONNXC_CACHE_DIR may change), and without a usable private cache
    templates are compiled as before."""

    @staticmethod
    def _folder() -> Optional[str]:
        from ..compiler.errors import OnnxcError
        from ..runtime.cache import cache_root
        try:
            folder = os.path.join(cache_root(), "templates")
            os.makedirs(folder, mode=0o700, exist_ok=True)
            return folder
        except (OSError, OnnxcError):
            return None

    def load_bytecode(self, bucket: jinja2.bccache.Bucket) -> None:
        folder = self._folder()
        if folder is not None:
            with contextlib.suppress(OSError):
                with open(os.path.join(folder, f"{bucket.key}.cache"), "rb") as f:
                    bucket.load_bytecode(f)

    def dump_bytecode(self, bucket: jinja2.bccache.Bucket) -> None:
        folder = self._folder()
        if folder is None:
            return
        with contextlib.suppress(OSError):
            fd, tmp = tempfile.mkstemp(dir=folder, prefix=".tmp-")
            try:
                with os.fdopen(fd, "wb") as f:
                    bucket.write_bytecode(f)
                os.replace(tmp, os.path.join(folder, f"{bucket.key}.cache"))
            finally:
                if os.path.exists(tmp):
                    os.unlink(tmp)


def render(template: str, data: dict[str, Any]) -> str:
    return environment().get_template(template).render(**data)
