"""tuidebug pack / unpack: a trace as one .tar.gz, and a hostile archive opened safely.

Real archives on the real filesystem; the traces are the checked-in fixtures (captured on a GPU)."""

from __future__ import annotations

import hashlib
import io
import json
import tarfile
from pathlib import Path

import pytest

from tests.conftest import digest
from tuidebug.trace.archive.pack import PACK_MANIFEST, pack, redact_traceback
from tuidebug.trace.format.reader import Trace
from tuidebug.trace.queries.summary import trace_summary
from tuidebug.trace.archive.unpack import MAX_BYTES_ENV, UnpackError, is_archive, unpack

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"
FAILED = FIXTURES / "cuda_fail_runtime"  # a runtime failure: error traceback, source lines


def test_pack_round_trip_is_byte_identical(tmp_path: Path) -> None:
    out = tmp_path / "t.tar.gz"
    manifest = pack(FAILED, out)
    assert is_archive(out) and not is_archive(FAILED / "manifest.json")
    original = digest(FAILED)
    assert {k: v["sha256"] for k, v in manifest["files"].items()} == original
    d = unpack(out, tmp_path / "cache")
    assert d.parent.parent.parent == tmp_path / "cache"
    got = digest(d)
    assert got.pop(PACK_MANIFEST)
    assert got == original
    assert unpack(out, tmp_path / "cache") == d  # the same archive again: the same folder
    assert trace_summary(Trace(d))["status"] == trace_summary(Trace(FAILED))["status"] == "failed"


def test_redact_drops_code_and_source_lines(tmp_path: Path) -> None:
    out = tmp_path / "r.tar.gz"
    manifest = pack(FAILED, out, redact=True)
    assert manifest["redacted"] and manifest["dropped_files"] >= 3
    d = unpack(out, tmp_path / "cache")
    names = {p.relative_to(d).as_posix() for p in d.rglob("*") if p.is_file()}
    assert not [n for n in names if n.endswith((".py", ".cpp"))], names
    assert "graphs/0_0-inference/code/kernels.json" in names
    # every source line captured (e.g. `h = torch.relu(self.norm(self.fc(x)))`) is gone
    code_lines = {f["code"] for f in _frames(FAILED) if f.get("code")}
    assert len(code_lines) > 3
    original = "".join(json.dumps(json.loads(p.read_text())) for p in FAILED.rglob("*.json"))
    assert all(json.dumps(c)[1:-1] in original for c in code_lines)  # the check can fail
    text = "".join(json.dumps(json.loads(p.read_text())) for p in d.rglob("*.json"))
    text += "".join(p.read_text() for p in d.rglob("*") if p.is_file() and p.suffix != ".json")
    assert not [c for c in code_lines if json.dumps(c)[1:-1] in text or c in text]
    assert "failing_compile.py:40 in forward" in text  # where the guards came from stays
    assert {f["line"] for f in _frames(d)} == {f["line"] for f in _frames(FAILED)}
    tb = json.loads((d / "graphs/0_0-inference/error.json").read_text())["traceback"]
    assert 'File "' in tb and "return compiled_fn(full_args)" not in tb
    # what is left still opens
    summary = trace_summary(Trace(d))
    assert summary["status"] == "failed" and summary["graphs"]


def _frames(root: Path) -> list[dict]:
    out: list[dict] = []

    def walk(v: object) -> None:
        if isinstance(v, dict):
            if "file" in v and "line" in v and "code" in v:
                out.append(v)
            for x in v.values():
                walk(x)
        elif isinstance(v, list):
            for x in v:
                walk(x)
    for p in root.rglob("*.json"):
        walk(json.loads(p.read_text()))
    return out


def test_redact_traceback_keeps_frames_and_exception() -> None:
    tb = ('Traceback (most recent call last):\n  File "m.py", line 3, in f\n    secret()\n'
          '    ^^^^^^\nValueError: boom\n')
    assert redact_traceback(tb) == ('Traceback (most recent call last):\n'
                                    '  File "m.py", line 3, in f\nValueError: boom\n')


# -- hostile archives ---------------------------------------------------------------------------

def _archive(path: Path, members: list[tuple[tarfile.TarInfo, bytes | None]]) -> Path:
    with tarfile.open(path, "w:gz") as tar:
        for info, data in members:
            tar.addfile(info, io.BytesIO(data) if data is not None else None)
    return path


def _file(name: str, data: bytes = b"{}") -> tuple[tarfile.TarInfo, bytes]:
    info = tarfile.TarInfo(name)
    info.size = len(data)
    return info, data


def _special(name: str, kind: bytes, target: str = "") -> tuple[tarfile.TarInfo, None]:
    info = tarfile.TarInfo(name)
    info.type = kind
    info.linkname = target
    return info, None


MANIFEST = json.dumps({"format": "tuidebug-trace", "format_version": 1, "status": "ok",
                       "graphs": [], "compiles": []}).encode()

HOSTILE = {
    "absolute path": [_file("t/manifest.json", MANIFEST), _file("/tmp/tuidebug-escape")],
    "dot-dot": [_file("t/manifest.json", MANIFEST), _file("t/../../tuidebug-escape")],
    "symlink": [_file("t/manifest.json", MANIFEST), _special("t/link", tarfile.SYMTYPE, "/etc")],
    "hard link": [_file("t/manifest.json", MANIFEST),
                  _special("t/hard", tarfile.LNKTYPE, "/etc/passwd")],
    "device": [_file("t/manifest.json", MANIFEST), _special("t/zero", tarfile.CHRTYPE)],
    "fifo": [_file("t/manifest.json", MANIFEST), _special("t/fifo", tarfile.FIFOTYPE)],
    "two top-level folders": [_file("t/manifest.json", MANIFEST), _file("u/x.json")],
    "file at the top": [_file("manifest.json", MANIFEST)],
    "name twice": [_file("t/manifest.json", MANIFEST), _file("t/manifest.json", MANIFEST)],
    "no trace inside": [_file("t/readme.txt", b"hello")],
}


@pytest.mark.parametrize("case", sorted(HOSTILE))
def test_hostile_archive_is_refused_and_writes_nothing(tmp_path: Path, case: str) -> None:
    arc = _archive(tmp_path / "evil.tar.gz", HOSTILE[case])
    cache = tmp_path / "cache"
    before = sorted(p.name for p in tmp_path.parent.iterdir())
    with pytest.raises(UnpackError):
        unpack(arc, cache)
    assert not any(cache.iterdir()), list(cache.rglob("*"))  # the partial unpack is removed
    assert sorted(p.name for p in tmp_path.parent.iterdir()) == before
    assert not Path("/tmp/tuidebug-escape").exists()


def _with_pack_manifest(members: list[tuple[tarfile.TarInfo, bytes]]
                        ) -> list[tuple[tarfile.TarInfo, bytes]]:
    """``members`` (files of one top folder) and the pack manifest ``tuidebug pack`` writes."""
    top = members[0][0].name.split("/")[0]
    files = {m.name.split("/", 1)[1]: {"sha256": hashlib.sha256(d).hexdigest(), "size": len(d)}
             for m, d in members}
    return [*members, _file(f"{top}/{PACK_MANIFEST}", json.dumps(
        {"format": "tuidebug-pack", "version": 1, "files": files}).encode())]


def test_size_cap_stops_a_gzip_bomb(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    arc = _archive(tmp_path / "bomb.tar.gz", _with_pack_manifest(
        [_file("t/manifest.json", MANIFEST), _file("t/big.txt", b"\0" * 3_000_000)]))
    assert arc.stat().st_size < 20_000  # compresses 150:1 or better
    monkeypatch.setenv(MAX_BYTES_ENV, "1000000")
    with pytest.raises(UnpackError, match="more than 1000000 bytes"):
        unpack(arc, tmp_path / "cache")
    monkeypatch.delenv(MAX_BYTES_ENV)
    assert (unpack(arc, tmp_path / "cache") / "big.txt").stat().st_size == 3_000_000


def test_tampered_file_fails_the_manifest_check(tmp_path: Path) -> None:
    good = tmp_path / "good.tar.gz"
    pack(FAILED, good)
    members = []
    with tarfile.open(good, "r:gz") as tar:
        for m in tar:
            data = tar.extractfile(m).read()  # type: ignore[union-attr]
            if m.name.endswith("/runtime.json"):
                data = data.replace(b"}", b', "x": 1}', 1)
                m.size = len(data)
            members.append((m, data))
    bad = _archive(tmp_path / "bad.tar.gz", members)
    with pytest.raises(UnpackError, match="runtime.json: sha256 differs"):
        unpack(bad, tmp_path / "cache")
    extra = _archive(tmp_path / "extra.tar.gz",
                     [(m, d) for m, d in members if not m.name.endswith("/runtime.json")])
    with pytest.raises(UnpackError, match="missing: \\['runtime.json'\\]"):
        unpack(extra, tmp_path / "cache")


def test_not_an_archive(tmp_path: Path) -> None:
    junk = tmp_path / "junk.tar.gz"
    junk.write_bytes(b"\x1f\x8b" + hashlib.sha256(b"x").digest())
    with pytest.raises(UnpackError, match="not a readable .tar.gz"):
        unpack(junk, tmp_path / "cache")


def test_a_redacted_pack_counts_what_it_unpacks_to(tmp_path: Path, monkeypatch,  # noqa: ANN001
                                                   mlp_trace: Path) -> None:
    """A redacted compile record is packed plain: the archive's size check counts its plain
    size, not the stored .gz's (the pack passed the check and unpack refused it)."""
    from tuidebug.trace.archive import pack as pack_mod
    from tuidebug.trace.format import compressed

    stored = sum(p.stat().st_size for p in mlp_trace.rglob("*") if p.is_file())
    packed = [p for p in mlp_trace.rglob("*" + compressed.SUFFIX)
              if Path(compressed.logical_name(p.name)).suffix in pack_mod._CODE_METADATA]
    assert packed, "the trace stores redacted files compressed"
    monkeypatch.setattr(pack_mod, "MAX_BYTES", stored)  # the stored bytes fit, the plain do not
    with pytest.raises(pack_mod.PackError, match="holds more than"):
        pack(mlp_trace, tmp_path / "r.tar.gz", redact=True)
    pack(mlp_trace, tmp_path / "p.tar.gz")  # unredacted: as stored, it fits
