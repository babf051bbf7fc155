"""Hostile archives (docs/security.md, "Archives"): a packed trace is untrusted data.

Each case is a real ``.tar.gz`` on the real file system, made the way an attacker would: a PAX or
GNU long-name header announcing far more than the archive holds (the tar reader read it all into
memory before any check), a corrupt deflate stream, a pack manifest lost, a top folder named
like the cache's bookkeeping or holding escape sequences, an unpack killed half-way, and
``pack`` of a trace holding a huge sparse file."""

from __future__ import annotations

import gzip
import os
import subprocess
import sys
import tarfile
import time
from pathlib import Path

import pytest

from tests.faults.conftest import Case
from tests.faults.hostile import BASE
from tests.faults.test_hostile_traces import data_escapes, run_cli
from tuidebug.errors import PackError, UnpackError
from tuidebug.trace.archive.pack import PACK_MANIFEST, pack
from tuidebug.trace.archive.unpack import unpack

REPO = Path(__file__).resolve().parents[2]


def _huge_header_archive(path: Path, kind: bytes, announced: int) -> Path:
    """A ``.tar.gz`` whose first header is a ``kind`` (PAX or GNU long name) header announcing
    ``announced`` bytes, followed by that many zero bytes (they compress ~1000:1)."""
    info = tarfile.TarInfo("t/././@LongLink")
    info.type = kind
    info.size = announced
    header = info.tobuf(tarfile.GNU_FORMAT)
    with gzip.open(path, "wb", compresslevel=1) as gz:
        gz.write(header)
        zeros = b"\0" * (1 << 20)
        for _ in range(announced >> 20):
            gz.write(zeros)
    return path


@pytest.mark.parametrize("kind", [tarfile.XHDTYPE, tarfile.GNUTYPE_LONGNAME])
def test_huge_header_is_refused_before_it_is_read(tmp_path: Path, kind: bytes,
                                                  case: Case) -> None:
    """A 768 MiB PAX / GNU long-name header in a few-MB archive, unpacked in a child allowed
    512 MiB more than it starts with: refused by size, not a MemoryError."""
    case.note = f"archive header {kind!r} announcing 768 MiB"
    arc = _huge_header_archive(tmp_path / "bomb.tar.gz", kind, 768 << 20)
    assert arc.stat().st_size < 8_000_000
    child = (
        "import resource, sys\n"
        "from tuidebug.trace.archive.unpack import unpack\n"
        "from tuidebug.errors import UnpackError\n"
        "rss = int(open('/proc/self/statm').read().split()[0]) * resource.getpagesize()\n"
        "vm = int(open('/proc/self/statm').read().split()[0]) * resource.getpagesize()\n"
        "resource.setrlimit(resource.RLIMIT_AS, (vm + (512 << 20), vm + (512 << 20)))\n"
        "try:\n"
        f"    unpack({str(arc)!r}, {str(tmp_path / 'cache')!r})\n"
        "except UnpackError as e:\n"
        "    print('REFUSED', e)\n")
    t0 = time.monotonic()
    r = subprocess.run([sys.executable, "-c", child], capture_output=True, text=True,
                       timeout=120, env={**os.environ, "PYTHONPATH": str(REPO)})
    assert r.returncode == 0 and "REFUSED" in r.stdout, (r.stdout, r.stderr[-2000:])
    assert "header of 805,306,368 bytes" in r.stdout, r.stdout
    assert time.monotonic() - t0 < 60
    assert not any((tmp_path / "cache").iterdir())  # the partial unpack is removed
    case.survived = True
    case.data_lost = False


def _packed(tmp_path: Path, name: str = "t") -> Path:
    src = tmp_path / "src" / name
    src.parent.mkdir(parents=True, exist_ok=True)
    import shutil

    shutil.copytree(BASE, src)
    return Path(pack(src, tmp_path / "t.tar.gz") and tmp_path / "t.tar.gz")


@pytest.mark.parametrize("frac", [0.2, 0.5])
def test_corrupt_deflate_is_a_clear_error(tmp_path: Path, frac: float, case: Case) -> None:
    """The deflate stream broken inside a member (a zlib.error traceback), or bytes of it
    flipped (the tar reader took the garbage for the archive's end: a partial trace opened
    silently)."""
    case.note = f"archive: corrupt deflate stream at {frac:.0%}"
    good = _packed(tmp_path).read_bytes()
    broken = tmp_path / "broken.tar.gz"
    broken.write_bytes(good[:int(len(good) * frac)] + b"\xff" * 4096)
    with pytest.raises(UnpackError, match="not a readable .tar.gz .*invalid block type"):
        unpack(broken, tmp_path / "cache")
    flipped = bytearray(good)
    for i in range(int(len(good) * frac), int(len(good) * frac) + 16):
        flipped[i] ^= 0x5A
    broken.write_bytes(bytes(flipped))
    with pytest.raises(UnpackError, match="damaged archive|not a readable"):
        unpack(broken, tmp_path / "cache")
    assert not any((tmp_path / "cache").iterdir())
    case.survived = True
    case.data_lost = False


def test_lost_pack_manifest_is_damage(tmp_path: Path, case: Case,
                                      capsys: pytest.CaptureFixture[str]) -> None:
    """The archive cut before its last member (the pack manifest): it opened silently as a
    partial trace, nothing checked."""
    case.note = "archive: pack manifest lost"
    arc = _packed(tmp_path)
    cut = tmp_path / "cut.tar.gz"
    with tarfile.open(arc, "r:gz") as src, tarfile.open(cut, "w:gz") as out:
        members = [m for m in src if not m.name.endswith(PACK_MANIFEST)]
        assert members
        for m in members:
            out.addfile(m, src.extractfile(m) if m.isreg() else None)
    with pytest.raises(UnpackError, match="pack manifest .* is missing"):
        unpack(cut, tmp_path / "cache")
    rc, text = run_cli(["info", str(cut)], capsys)
    assert rc == 2 and "damaged archive" in text, text
    case.survived = True
    case.data_lost = False


@pytest.mark.parametrize("top", [".tuidebug-unpacked", "done.json", "trace"])
def test_top_folder_named_like_the_cache_bookkeeping(tmp_path: Path, top: str,
                                                     case: Case) -> None:
    case.note = f"archive: top folder {top!r}"
    arc = _packed(tmp_path, top)
    for _ in range(2):  # unpacked, then found in the cache
        d = unpack(arc, tmp_path / "cache")
        assert (d / "manifest.json").is_file() and (d / "graphs").is_dir()
    case.survived = True
    case.data_lost = False


def test_escapes_in_the_top_folder_stay_off_the_terminal(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch,
        case: Case) -> None:
    """OSC 52, clear screen and C1 controls in the archive's folder name: the "unpacked X → …"
    message printed them raw from info, info --json and perfetto; perfetto named its output
    file after the folder."""
    case.note = "archive: escape sequences in the top folder"
    monkeypatch.setenv(
        "TUIDEBUG_ARCHIVE_CACHE", str(tmp_path / "cache"))
    arc = _packed(tmp_path, "t\x1b]52;c;cHduZWQ=\x07\x1b[2J\x1b]0;title\x07\x9b2J\x9d0;t\x9c")
    for args in (["info"], ["info", "--json"]):
        rc, text = run_cli([*args, str(arc)], capsys)
        assert rc == 0, text
        assert not data_escapes(text) and "\x9b" not in text and "\x9d" not in text, text
    out = tmp_path / "out"
    out.mkdir()
    monkeypatch.chdir(out)
    rc, text = run_cli(["perfetto", str(arc)], capsys)
    assert rc == 0 and not data_escapes(text) and "\x9b" not in text, text
    (written,) = list(out.iterdir())
    assert written.name.endswith(".perfetto.json")
    assert all(c.isalnum() or c in "._+-" for c in written.name), written.name
    case.survived = True
    case.data_lost = False


def test_interrupted_unpack_is_cleaned(tmp_path: Path, case: Case) -> None:
    """A partial unpack left by a process killed mid-way is removed by the next unpack."""
    case.note = "archive: interrupted unpack"
    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()
    cache = tmp_path / "cache"
    partial = cache / f".v2-{'0' * 32}.{gone.pid}-1"
    (partial / "trace" / "t").mkdir(parents=True)
    (partial / "trace" / "t" / "half.json").write_text("{")
    unpack(_packed(tmp_path), cache)
    assert not partial.exists()
    case.survived = True
    case.data_lost = False


def test_pack_refuses_a_huge_sparse_file(tmp_path: Path, case: Case) -> None:
    """A 6 GiB sparse file in the trace: a clear refusal (it was read whole: MemoryError)."""
    case.note = "pack: 6 GiB sparse file"
    import shutil

    src = tmp_path / "t"
    shutil.copytree(BASE, src)
    with open(src / "graphs" / "huge.bin", "wb") as f:
        f.truncate(6 << 30)
    t0 = time.monotonic()
    with pytest.raises(PackError, match="more than 4,294,967,296 bytes"):
        pack(src, tmp_path / "t.tar.gz")
    assert time.monotonic() - t0 < 30
    assert not list(tmp_path.glob("*.tar.gz")) and not list(tmp_path.glob(".*.tmp"))
    case.survived = True
    case.data_lost = False


@pytest.mark.parametrize("depth", [990, 200_000])
def test_pack_redact_of_deep_json(tmp_path: Path, depth: int, case: Case) -> None:
    """``pack --redact`` of a trace whose JSON is nested deep: a RecursionError traceback.
    Too deep to parse: packed as it is (readers refuse it too); deep enough to parse but not
    to walk: left out of the redacted pack (it could hold source lines)."""
    import shutil

    case.note = f"pack --redact: JSON nested {depth} deep"
    src = tmp_path / "t"
    shutil.copytree(BASE, src)
    (src / "compiles" / "deep.json").write_text("[" * depth + "]" * depth)
    (src / "compiles" / "deep.jsonl").write_text("[" * depth + "]" * depth + "\n")
    manifest = pack(src, tmp_path / "t.tar.gz", redact=True)
    assert "manifest.json" in manifest["files"]
    d = unpack(tmp_path / "t.tar.gz", tmp_path / "cache")
    assert (d / "manifest.json").is_file()
    case.survived = True
    case.data_lost = False
