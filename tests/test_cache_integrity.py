"""The compile cache under damage, concurrency and other users: a damaged artifact is rebuilt
(in the cache) or refused (given by the user), never loaded; processes building the same
model at once make one artifact; a cache folder others can write is refused."""
from __future__ import annotations

import hashlib
import json
import os
import stat
import subprocess
import sys
import textwrap

import numpy as np
import onnx
import xxhash
import pytest
from onnx import TensorProto as T
from onnx import helper

import onnxc
from helpers import make_model
from onnxc import driver
from onnxc.runtime import cache, session

WEIGHTS = np.arange(256, dtype=np.float32)


def add_weights_model() -> onnx.ModelProto:
    """y = x + w: an output that shows at once whether the weights loaded are the built ones."""
    w = onnx.numpy_helper.from_array(WEIGHTS, "w")
    return make_model([helper.make_node("Add", ["x", "w"], ["y"])], [("x", T.FLOAT, [256])],
                      [("y", T.FLOAT, [256])], [w])


@pytest.fixture
def cache_dir(tmp_path, monkeypatch):
    root = tmp_path / "cache"
    monkeypatch.setenv("ONNXC_CACHE_DIR", str(root))
    return root


@pytest.fixture
def compiles(monkeypatch):
    """The folders the session compiled into, in order."""
    built = []
    real = driver.compile_model
    monkeypatch.setattr(driver, "compile_model", lambda source, out, options, **kw: built.append(out)
                        or real(source, out, options, **kw))
    return built


def flip_middle_byte(path: str) -> None:
    with open(path, "r+b") as f:
        size = f.seek(0, os.SEEK_END)
        f.seek(size // 2)
        byte = f.read(1)
        f.seek(size // 2)
        f.write(bytes([byte[0] ^ 0x5A]))


def truncate_half(path: str) -> None:
    os.truncate(path, os.path.getsize(path) // 2)


def edit_manifest(path: str) -> None:
    """Still valid JSON with the same checksums, another arena size: only the manifest's
    own checksum tells."""
    manifest = json.loads(open(path).read())
    manifest["arena_bytes"] += 4096
    with open(path, "w") as f:
        json.dump(manifest, f)


DAMAGES = {
    "library flipped": ("libmodel.so", flip_middle_byte),
    "library truncated": ("libmodel.so", truncate_half),
    "library removed": ("libmodel.so", os.unlink),
    "weights flipped": ("weights.bin", flip_middle_byte),
    "weights truncated": ("weights.bin", truncate_half),
    "manifest edited": ("manifest.json", edit_manifest),
    "manifest truncated": ("manifest.json", truncate_half),
    "verification record removed": (cache._VERIFIED, os.unlink),
}


@pytest.mark.parametrize("damage", list(DAMAGES))
def test_a_damaged_cached_artifact_is_rebuilt_not_loaded(damage, cache_dir, compiles):
    data = add_weights_model().SerializeToString()
    folder = onnxc.InferenceSession(data).artifact_dir
    assert len(compiles) == 1
    name, spoil = DAMAGES[damage]
    spoil(os.path.join(folder, name))
    sess = onnxc.InferenceSession(data)
    assert len(compiles) == 2, "the damaged artifact was loaded instead of rebuilt"
    assert sess.artifact_dir == folder
    cache.verify_artifact(folder)
    x = np.ones(256, np.float32)
    np.testing.assert_array_equal(sess.run(None, {"x": x})[0], x + WEIGHTS)
    assert [n for n in os.listdir(cache_dir) if n.startswith(".")] == [], "a build folder was left behind"


def test_an_intact_cached_artifact_is_loaded_without_compiling(cache_dir, compiles):
    data = add_weights_model().SerializeToString()
    onnxc.InferenceSession(data)
    onnxc.InferenceSession(data)
    assert len(compiles) == 1


def test_a_build_folder_left_by_a_dead_process_is_removed(cache_dir, compiles):
    data = add_weights_model().SerializeToString()
    folder = onnxc.InferenceSession(data).artifact_dir
    dead = cache_dir / f".{os.path.basename(folder)}-killed"
    dead.mkdir()
    (dead / "model.c").write_text("half a file")
    flip_middle_byte(os.path.join(folder, "libmodel.so"))
    onnxc.InferenceSession(data)
    assert not dead.exists()


@pytest.mark.parametrize("damage", ["library flipped", "library truncated", "weights flipped", "weights truncated",
                                    "manifest truncated"])
def test_an_artifact_folder_failing_its_checksums_is_refused(damage, tmp_path):
    folder = tmp_path / "build"
    onnxc.compile_model(add_weights_model(), folder)
    x = np.ones(256, np.float32)
    np.testing.assert_array_equal(onnxc.InferenceSession(str(folder)).run(None, {"x": x})[0], x + WEIGHTS)
    name, spoil = DAMAGES[damage]
    spoil(str(folder / name))
    with pytest.raises(onnxc.ModelError, match="damaged onnxc artifact"):
        onnxc.InferenceSession(str(folder))


def test_weights_changed_after_a_verified_load_are_caught(tmp_path):
    """The record of verified weights holds their size, mtime, ctime and inode: restoring the
    mtime after a write (touch -r) does not make changed weights pass."""
    folder = tmp_path / "build"
    onnxc.compile_model(add_weights_model(), folder)
    onnxc.InferenceSession(str(folder))
    weights = str(folder / "weights.bin")
    st = os.stat(weights)
    flip_middle_byte(weights)
    os.utime(weights, ns=(st.st_atime_ns, st.st_mtime_ns))
    with pytest.raises(onnxc.ModelError, match="weights.bin does not match"):
        onnxc.InferenceSession(str(folder))


def test_an_artifact_of_an_earlier_onnxc_with_a_sha256_of_its_weights_is_still_checked(tmp_path):
    """Artifacts built before the weights' checksum became XXH3 name a SHA-256 of them: they load
    when it matches and are damaged when it does not."""
    folder = tmp_path / "build"
    onnxc.compile_model(add_weights_model(), folder)
    manifest = json.loads((folder / "manifest.json").read_text())
    del manifest["weights_xxh3_128"]
    manifest["weights_sha256"] = hashlib.sha256((folder / "weights.bin").read_bytes()).hexdigest()
    (folder / "manifest.json").write_text(json.dumps(manifest))
    x = np.ones(256, np.float32)
    np.testing.assert_array_equal(onnxc.InferenceSession(str(folder)).run(None, {"x": x})[0], x + WEIGHTS)
    flip_middle_byte(str(folder / "weights.bin"))
    with pytest.raises(onnxc.ModelError, match="weights.bin does not match"):
        onnxc.InferenceSession(str(folder))


def test_a_folder_without_a_manifest_is_not_an_artifact(tmp_path):
    with pytest.raises(onnxc.ModelError, match="not an onnxc artifact"):
        onnxc.InferenceSession(str(tmp_path))


PROCESSES = 4

WORKER = textwrap.dedent("""
    import json, os, sys, time
    import numpy as np
    import onnxc
    from onnxc import driver
    built = []
    real = driver.compile_model
    def slow_compile(source, out, options, **kw):
        built.append(out)
        time.sleep(0.5)   # every process arrives while the first one builds
        return real(source, out, options, **kw)
    driver.compile_model = slow_compile
    while not os.path.exists(sys.argv[2]):
        time.sleep(0.001)
    sess = onnxc.InferenceSession(sys.argv[1])
    y = sess.run(None, {"x": np.arange(256, dtype=np.float32)})[0]
    print(json.dumps({"built": len(built), "folder": sess.artifact_dir, "y": y.tobytes().hex()}))
""")


def test_processes_compiling_the_same_model_at_once_make_one_artifact(tmp_path, cache_dir):
    model = tmp_path / "m.onnx"
    onnx.save(add_weights_model(), str(model))
    go = tmp_path / "go"
    procs = [subprocess.Popen([sys.executable, "-c", WORKER, str(model), str(go)], stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True) for _ in range(PROCESSES)]
    go.touch()
    reports = []
    for p in procs:
        out, err = p.communicate(timeout=300)
        assert p.returncode == 0, err[-2000:]
        reports.append(json.loads(out.strip().splitlines()[-1]))
    assert sum(r["built"] for r in reports) == 1, [r["built"] for r in reports]
    assert len({r["folder"] for r in reports}) == 1
    assert len({r["y"] for r in reports}) == 1
    assert reports[0]["y"] == (np.arange(256, dtype=np.float32) + WEIGHTS).tobytes().hex()
    artifacts = [n for n in os.listdir(cache_dir) if os.path.isdir(cache_dir / n) and n not in ("index", "templates")]
    assert artifacts == [os.path.basename(reports[0]["folder"])]
    cache.verify_artifact(reports[0]["folder"])


def test_the_cache_folder_and_its_artifacts_are_user_only(tmp_path, monkeypatch):
    root = tmp_path / "deep" / "cache"
    monkeypatch.setenv("ONNXC_CACHE_DIR", str(root))
    model = tmp_path / "m.onnx"
    onnx.save(add_weights_model(), str(model))
    folder = onnxc.InferenceSession(str(model)).artifact_dir
    for path in (root, folder, root / "index"):
        assert stat.S_IMODE(os.stat(path).st_mode) == 0o700, path


@pytest.mark.parametrize("mode", [0o770, 0o707, 0o777, 0o720], ids=oct)
def test_a_cache_folder_others_can_write_is_refused(mode, cache_dir, compiles):
    cache_dir.mkdir()
    os.chmod(cache_dir, mode)
    with pytest.raises(cache.UnsafeCacheError, match="chmod 700") as info:
        onnxc.InferenceSession(add_weights_model())
    assert isinstance(info.value, onnxc.OnnxcError) and isinstance(info.value, PermissionError)
    assert compiles == []


def test_a_cache_inside_a_world_writable_folder_is_refused_unless_sticky(tmp_path, monkeypatch, compiles):
    shared = tmp_path / "shared"
    shared.mkdir()
    monkeypatch.setenv("ONNXC_CACHE_DIR", str(shared / "mine" / "cache"))
    os.chmod(shared, 0o777)
    with pytest.raises(cache.UnsafeCacheError, match="every user can write"):
        onnxc.InferenceSession(add_weights_model())
    os.chmod(shared, 0o1777)   # as /tmp: others cannot rename or remove what is not theirs
    onnxc.InferenceSession(add_weights_model())
    assert len(compiles) == 1


@pytest.mark.skipif(os.geteuid() != 0, reason="giving a folder to another user needs root")
def test_a_cache_folder_owned_by_another_user_is_refused(cache_dir, compiles):
    cache_dir.mkdir(mode=0o700)
    os.chown(cache_dir, 65534, 65534)
    with pytest.raises(cache.UnsafeCacheError, match="not private"):
        onnxc.InferenceSession(add_weights_model())
    assert compiles == []


def test_the_weights_written_beside_the_c_compile_are_checked_and_a_failure_to_write_them_fails_the_build(
        tmp_path, monkeypatch):
    """The weights file is written on a thread of its own while code is generated and compiled
    (driver.py): the manifest holds its checksum, and a failed write fails the compile, which
    leaves no manifest and no part of the file behind."""
    driver.compile_model(add_weights_model(), tmp_path / "ok", driver.CompileOptions())
    manifest = json.loads((tmp_path / "ok" / "manifest.json").read_text())
    weights = (tmp_path / "ok" / "weights.bin").read_bytes()
    assert manifest["weights_xxh3_128"] == xxhash.xxh3_128_hexdigest(weights)
    assert np.array_equal(np.frombuffer(weights, np.float32), WEIGHTS)

    class FullDisk:
        def write(self, data):
            raise OSError(28, "No space left on device")

        def close(self):
            pass
    start = driver._WeightsWriter.__init__

    def full_disk(self, path):
        start(self, path)
        self.file.close()
        self.file = FullDisk()
    monkeypatch.setattr(driver._WeightsWriter, "__init__", full_disk)
    with pytest.raises(OSError, match="No space left"):
        driver.compile_model(add_weights_model(), tmp_path / "full", driver.CompileOptions())
    assert sorted(os.listdir(tmp_path / "full")) and not [
        name for name in os.listdir(tmp_path / "full") if name.startswith(".tmp-") or name in ("manifest.json",
                                                                                             "weights.bin")]


@pytest.mark.parametrize("block", [5, 7, 64, 1 << 22])
def test_a_model_files_digest_covers_its_external_data_whatever_the_read_block(tmp_path, cache_dir, monkeypatch,
                                                                               block):
    """The digest hashes a model file in blocks: the word that marks external data is found
    wherever it falls across blocks, and a changed external file changes the digest."""
    model = add_weights_model()
    onnx.save(model, str(tmp_path / "m.onnx"), save_as_external_data=True, all_tensors_to_one_file=True,
              location="m.data", size_threshold=0)
    monkeypatch.setattr(cache, "HASH_BLOCK", block)
    digest, files = cache._hash_model_file(str(tmp_path / "m.onnx"))
    data = (tmp_path / "m.onnx").read_bytes()
    expected = hashlib.sha256(data + b"m.data" + (tmp_path / "m.data").read_bytes()).hexdigest()
    assert (digest, files) == (expected, [str(tmp_path / "m.onnx"), str(tmp_path / "m.data")])
    (tmp_path / "m.data").write_bytes((tmp_path / "m.data").read_bytes()[:-1] + b"\1")
    assert cache._hash_model_file(str(tmp_path / "m.onnx"))[0] != digest
    onnx.save(add_weights_model(), str(tmp_path / "inline.onnx"))   # (saving with external data changed model)
    assert cache._hash_model_file(str(tmp_path / "inline.onnx")) == (
        hashlib.sha256((tmp_path / "inline.onnx").read_bytes()).hexdigest(), [str(tmp_path / "inline.onnx")])
