"""One reading path: every file of a trace, a job, a node folder or an archive member is read
through ``tuidebug/trace/format/safefile.py`` (regular files only, no link out, size caps,
bounded nesting and numbers, strings safe to encode; docs/security.md). As the layering test
scans for private torch modules, this one scans the sources for reads that go around it:
``json.load(s)``, ``.read_text()``, ``.read_bytes()``, ``open()``, ``os.open``/``os.fdopen``,
``tarfile.open``, ``gzip.open``. A read of something that is not trace data (tuidebug's own
work files, a child's pipe, torch's own source) is listed below with the reason; an entry that
no longer matches anything fails too, so the list stays true."""

from __future__ import annotations

import re
from pathlib import Path

from tests.conftest import ROOT

PACKAGE = ROOT / "tuidebug"
SAFEFILE = "tuidebug/trace/format/safefile.py"
READS = re.compile(r"json\.loads?\(|(?<!safefile)(?<!compressed)\.read_(?:text|bytes)\(|(?<![\w.])open\(|"
                   r"\bos\.open\(|\bos\.fdopen\(|\btarfile\.open\(|\bgzip\.open\(")

# (module, what the line holds): why it is not trace data
ALLOWED: dict[tuple[str, str], str] = {
    ("tuidebug/proc.py", "msg = json.loads(line)"): "a child's message pipe (tuidebug's own)",
    ("tuidebug/proc.py", 'os.fdopen(fd, "w"'): "writes the message pipe",
    ("tuidebug/cli/__init__.py", "os.open(os.devnull"): "/dev/null for stdout",
    ("tuidebug/mcp/bounded.py", "json.loads(piece)"): "its own JSON of an answer, read back",
    ("tuidebug/trace/format/atomic.py", "os.fdopen(fd, \"wb\""): "writes",
    ("tuidebug/trace/format/atomic.py", 'open(path, "a"'): "appends",
    ("tuidebug/trace/jobs/progress.py", "os.open(path, os.O_WRONLY"): "writes a progress log",
    ("tuidebug/trace/archive/pack.py", 'open(tmp, "wb")'): "writes the archive",
    ("tuidebug/trace/archive/pack.py", "tarfile.open(fileobj=gz, mode=\"w\""): "writes",
    ("tuidebug/trace/archive/unpack.py", "os.open(target, os.O_WRONLY"): "writes a member",
    ("tuidebug/trace/archive/unpack.py", 'os.fdopen(fd, "wb")'): "writes a member",
    ("tuidebug/trace/archive/unpack.py", "tarfile.open(src, mode=\"r:gz\", tarinfo="):
        "the archive, read with its headers capped (_CappedTarInfo) and each member written "
        "through caps; is_archive and the hash read it through safefile",
    ("tuidebug/compiler/worker/__main__.py", "json.loads(ns.job)"): "argv from the parent",
    ("tuidebug/compiler/worker/child.py", 'open(0, "r"'): "stdin",
    ("tuidebug/compiler/worker/child.py", 'open(1, "w"'): "stdout",
    ("tuidebug/compiler/worker/child.py", 'open(2, "w"'): "stderr",
    ("tuidebug/compiler/worker/child.py", "os.open(os.devnull"): "/dev/null",
    ("tuidebug/compiler/worker/client.py", 'os.fdopen(fd, "wb")'): "writes the worker's log",
    ("tuidebug/compiler/worker/client.py", "self.log_path.read_text("): "the worker's own log",
    ("tuidebug/compiler/run_script.py", "json.loads(ns.overrides)"): "argv from the parent",
    ("tuidebug/compiler/run_script.py", "json.loads(ns.apply)"): "argv from the parent",
    ("tuidebug/compiler/run_script.py", "fd = os.open(path, os.O_WRONLY"):
        "a rank's stacks file, opened to be written by faulthandler",
    ("tuidebug/compiler/advise.py", 'open(log, "wb")'): "writes the child's log",
    ("tuidebug/compiler/capture/numerics.py", "open(str(path), encoding="):
        "Inductor's output code module, in the user's process while capturing",
    ("tuidebug/compiler/compat/hooks.py", "json.loads(payload)"):
        "a payload torch logs in the user's process while capturing",
    ("tuidebug/compiler/compat/caches.py", "json.loads(payload)"):
        "a payload torch logs in the user's process while capturing",
    ("tuidebug/compiler/flags/values.py", "json.loads(t)"): "a value the user typed (--set)",
    ("tuidebug/compiler/flags/registry.py", "Path(path).read_text("):
        "torch's own config module source",
    ("tuidebug/compiler/demo_run.py", "path.read_text()"): "torch's version.py",
    ("tuidebug/minify/codegen.py", "Path(spec.origin).read_text()"): "a module's own source",
    ("tuidebug/minify/pool.py", 'open(log_path, "ab")'): "writes a worker's log",
    ("tuidebug/minify/repro_template.py", 'open(os.environ["TUIDEBUG_REPRO_RESULT"], "w")'):
        "the repro writes its result",
    ("tuidebug/minify/bisection.py", "json.loads(result_file.read_text())"):
        "a result file tuidebug's child wrote in minify's work folder",
    ("tuidebug/minify/bisect_task.py", 'os.fdopen(fd, "wb")'): "writes the task's log",
    ("tuidebug/minify/bisect_task.py", "self.log_path.read_text("): "the task's own log",
    ("tuidebug/minify/bisect_task.py", "json.loads(argv[0])"): "argv from the parent",
    ("tuidebug/minify/minifier.py", 'open(self.work_dir / "candidates.jsonl")'):
        "minify's own work folder",
    ("tuidebug/minify/minifier.py", "json.loads(line) for line in f"): "minify's own log",
    ("tuidebug/minify/minifier.py", 'open(self.work_dir / "verify.log", "wb")'): "writes",
    ("tuidebug/minify/minifier.py", "json.loads(result_file.read_text())"):
        "a result file tuidebug's child wrote in minify's work folder",
    ("tuidebug/minify/script_child.py", "json.loads(argv[0])"): "argv from the parent",
    ("tuidebug/minify/candidates.py", 'open(self.work_dir / "candidates.jsonl", "a")'):
        "appends to minify's own log",
}


def _reads() -> list[tuple[str, int, str]]:
    out = []
    for path in sorted(PACKAGE.rglob("*.py")):
        rel = path.relative_to(ROOT).as_posix()
        if rel == SAFEFILE:
            continue
        for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            code = line.split("#", 1)[0] if not line.lstrip().startswith('"') else ""
            if READS.search(code) and not re.match(r"\s*(async )?def ", code):
                out.append((rel, n, line.strip()))
    return out


def test_every_read_of_trace_data_goes_through_safefile() -> None:
    reads = _reads()
    assert len(reads) > 20  # the scan found the allowed reads: it looked
    used: set[tuple[str, str]] = set()
    bypass = []
    for rel, n, line in reads:
        hit = [key for key in ALLOWED if key[0] == rel and key[1] in line]
        if hit:
            used.update(hit)
        else:
            bypass.append(f"{rel}:{n}: {line}")
    assert not bypass, ("reads that go around tuidebug/trace/format/safefile.py (read_json, "
                        "read_text, read_bytes, open_regular, lines, loads):\n"
                        + "\n".join(bypass))
    stale = sorted(set(ALLOWED) - used)
    assert not stale, f"allowed reads that no longer exist (remove them): {stale}"


def test_the_scan_sees_a_bypass(tmp_path: Path) -> None:
    """The pattern catches each form of read it names (a scan that cannot fail is no test)."""
    for line in ['data = json.loads(p.read_text())', 'with open(p, "rb") as f:',
                 "raw = (d / 'x.json').read_bytes()", "fd = os.open(p, os.O_RDONLY)",
                 "tarfile.open(src)", "json.load(f)"]:
        assert READS.search(line), line
    for line in ["def open(self) -> None:", "safefile.read_json(p)", "self.is_open()",
                 "safefile.read_text(p)", "safefile.read_bytes(p, 10)"]:
        assert not READS.search(line) or re.match(r"\s*def ", line), line
