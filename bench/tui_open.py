"""How fast the terminal UI opens a large trace, and how fast each key and screen answers.

    python bench/tui_open.py [TRACE] [--cold N] [--compare OTHER] [--keys-only]
    python bench/tui_open.py [TRACE] [--compare OTHER] --only compare [--rounds N]
    python bench/tui_open.py [TRACE] --only ROWS

Without TRACE it uses (and, if missing, builds — several minutes each) the trace of a 24-layer
transformer training step, ``/tmp/tuidebug-bench/tr24``, and for the compare screen a variant of
it recompiled with ``max_fusion_size=16`` (other fusions, other kernels: a real comparison, not a
trace against its own copy), ``/tmp/tuidebug-bench/tr24-fusion16``. Runs the real app headless
(``App.run_test``) at 160×45 and prints, in milliseconds:

- import: importing the UI (textual, rich, tuidebug.tui) in this fresh process
- first paint: from creating the app to the overview painted with its content
- each screen: from the key press to the screen painted with its content (workers done)
- stepping: per ``n`` through every stage of the largest graph (snapshot read + diff)
- scrolling: per PageDown / End in the largest graph's text (must never block); a PageDown
  through Pilot includes Textual's own repaint and Pilot's idle waits, so the cost of our
  Line-API widget alone (one page rendered, caches cold) is printed too

then a per-key table: for each kind of key (``n``/``p`` through every stage of the largest
graph, switching to a screen already open, ``/`` and a search, Down in the code screen's kernel
list, the compare screen on two traces — OTHER, default the variant above; then again on four
copies of it in folders of their own, ``OTHER-copy1`` to ``-copy4``, each read as a trace never
read before, this trace's side read by then)
the median and the worst of

- wall time from the key press to its result painted (what the user waits for);
- CPU time (``time.process_time``: every thread of this process) from the key press to its
  result painted, and
- CPU time from the key press until nothing runs any more: the result and whatever the key
  started in the background (the pass stepper reading the neighbouring snapshots ahead, a long
  file's highlighting; the compare screen's rows: its first screenful painted is the result, the
  rest of the comparison drawn is the background);
- the UI thread's own share of that last figure (``time.thread_time`` on the event loop's
  thread, background included): a worker's CPU (the read-ahead) is not charged to the key. Keys are pressed one at a time, with a pause between them; the CPU
  spent in the pauses that no key's figure holds is printed too (it should be near zero: a
  key's background work is in its own figure).

against the budget (a key 50 ms, a screen 150 ms, the first paint 250 ms; OVER: the median with
the background work is over it). The row "a key bound to nothing", timed as the others, is
the harness's own cost (Pilot's press and the waits): part of every other row. On a loaded
machine the CPU figures are the ones to compare;

Before that sequence, in an app of its own: from the first paint until every screen is built
ahead in the background, the event loop's stalls (a key pressed at any moment waits for the
building step that runs: the worst stall is the longest such wait), and keys pressed now and
then meanwhile, each from its press until the app takes it;

and, with ``--cold N`` (default 3), N fresh processes timed from ``exec`` to the overview
painted (interpreter start and imports included).

``--only compare`` times the compare rows alone (the whole sequence takes minutes and loads the
machine): in ``--rounds N`` fresh apps (default 1), each left until every screen is built and
the work ahead is done, as the whole sequence leaves it by then. ``--only ROWS`` (several,
comma-separated, of ``built``: keys while screens are built ahead, ``screens``: opening and
switching, ``stepper``: ``n``/``p``, ``search``, ``down``: the code screen's kernel list,
``compare``) times those per-key rows in one app, in the whole sequence's order (the harness's
row always; without ``screens`` every screen is built ahead before the first row, as opening
them leaves them): about a minute for ``stepper,down``. Runs alternating two checkouts compare a
change's CPU ms. The machine's load average is printed: the
numbers scale with it. Also checks that torch was never imported.
"""

from __future__ import annotations

import time

T_START = time.perf_counter()

import asyncio  # noqa: E402
import os  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402
from pathlib import Path  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tuidebug.machine import cores, load1  # noqa: E402

BENCH_DIR = Path("/tmp/tuidebug-bench")
DEFAULT = BENCH_DIR / "tr24"
VARIANT = BENCH_DIR / "tr24-fusion16"  # the same step recompiled with other fusion limits


def build(out: Path, *sets: str) -> None:
    """Trace the 24-layer step into ``out`` (``sets``: Inductor flags, ``NAME=VALUE``)."""
    print(f"building {out} (24-layer transformer, one training step"
          f"{', ' + ', '.join(sets) if sets else ''}; takes minutes)…", flush=True)
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    flags = [a for s in sets for a in ("--set", s)]
    out.parent.mkdir(parents=True, exist_ok=True)
    subprocess.run([sys.executable, "-m", "tuidebug.cli", "trace", "-o", str(out), *flags,
                    str(ROOT / "examples" / "transformer_block.py"), "--layers", "24"],
                   env=env, check=False)
    if not (out / "manifest.json").exists():
        sys.exit(f"could not build {out}")


async def wait_ready(app, pilot, check, timeout: float = 60.0,  # type: ignore[no-untyped-def]
                     workers: bool = True) -> None:
    deadline = time.perf_counter() + timeout
    while True:
        await pilot.pause()
        if workers:
            await app.workers.wait_for_complete()
        if check():
            await pilot.pause()  # one more refresh: the content is painted
            return
        if time.perf_counter() > deadline:
            raise TimeoutError("screen did not become ready")
        await asyncio.sleep(0.005)


async def paint_only(path: Path) -> None:
    from tuidebug.trace.format.reader import Trace
    from tuidebug.tui.app import TuidebugApp
    from tuidebug.tui.widgets.textview import TextView

    app = TuidebugApp(Trace(path))
    async with app.run_test(size=(160, 45)) as pilot:
        await wait_ready(app, pilot, lambda: app.screen.query_one(TextView).line_count > 0)
        print(f"PAINTED {time.perf_counter() - T_START:.4f}", flush=True)


def cold_starts(path: Path, n: int) -> list[float]:
    out = []
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    for _ in range(n):
        t = time.perf_counter()
        proc = subprocess.Popen([sys.executable, __file__, str(path), "--paint-only"],
                                stdout=subprocess.PIPE, text=True, env=env)
        assert proc.stdout is not None
        for line in proc.stdout:
            if line.startswith("PAINTED"):
                out.append(time.perf_counter() - t)
                break
        proc.wait()
    return out


async def run(path: Path) -> None:
    t0 = time.perf_counter()
    from tuidebug.trace.format.reader import Trace
    from tuidebug.tui.app import TuidebugApp
    from tuidebug.tui.widgets.textview import TextView
    t_import = time.perf_counter() - t0
    results: list[tuple[str, float]] = [("import UI", t_import)]

    t1 = time.perf_counter()
    trace = Trace(path)
    app = TuidebugApp(trace)
    async with app.run_test(size=(160, 45)) as pilot:
        await wait_ready(app, pilot, lambda: app.screen.query_one(TextView).line_count > 0)
        results.append(("first paint (overview)", time.perf_counter() - t1))

        def loaded() -> bool:
            return app.screen.is_loaded()  # type: ignore[attr-defined]

        def graph_shown() -> bool:
            sv = getattr(app.screen, "stage_view", None)
            return sv is not None

        for key, name, extra in (("2", "passes", graph_shown), ("3", "ir", None),
                                 ("4", "code", None), ("5", "autotune", None),
                                 ("6", "errors", None), ("1", "overview", None)):
            t = time.perf_counter()
            await pilot.press(key)
            await wait_ready(app, pilot, lambda: loaded() and (extra is None or extra()))
            results.append((f"open {name} screen", time.perf_counter() - t))

        # the largest graph, stepped through stage by stage
        graphs = sorted(trace.graphs, key=lambda g: max((s.nodes or 0) for s in g.stages) if g.stages else 0)
        big = graphs[-1]
        app.set_graph(big.id)
        await pilot.press("2")
        await wait_ready(app, pilot, graph_shown)
        screen = app.screen
        # jump straight to the largest snapshot (not read yet) and watch the event loop
        # meanwhile: the JSON parse runs in a worker thread
        heavy = max((i for i, st in enumerate(big.stages) if st.file),
                    key=lambda i: big.stages[i].nodes or 0)
        t = time.perf_counter()
        screen._select_stage(heavy)  # type: ignore[attr-defined]
        worst_lag = 0.0
        while time.perf_counter() - t < 30:
            t_tick = time.perf_counter()
            await asyncio.sleep(0.01)
            worst_lag = max(worst_lag, time.perf_counter() - t_tick - 0.01)
            sv = screen.stage_view  # type: ignore[attr-defined]
            if sv is not None and sv.stage is big.stages[heavy]:
                break
        results.append((f"select the largest snapshot ({big.stages[heavy].nodes} nodes, "
                        "unread): shown", time.perf_counter() - t))
        results.append(("  worst event-loop stall meanwhile", worst_lag))
        screen._select_stage(0)  # type: ignore[attr-defined]
        await wait_ready(app, pilot, graph_shown)
        n = len(big.stages)
        t = time.perf_counter()
        worst = 0.0
        for _ in range(n - 1):
            ts = time.perf_counter()
            pos = screen.current_position()  # type: ignore[attr-defined]
            await pilot.press("n")
            await wait_ready(app, pilot, lambda: screen.stage_view is not None  # type: ignore[attr-defined]
                             and screen.current_position() != pos  # type: ignore[attr-defined]
                             and screen.stage_view.stage is screen.current_stage())  # type: ignore[attr-defined]
            worst = max(worst, time.perf_counter() - ts)
        results.append((f"step through {n} stages of {big.id}: mean per step",
                        (time.perf_counter() - t) / max(1, n - 1)))
        results.append(("  slowest step", worst))

        screen._select_stage(heavy)  # type: ignore[attr-defined]
        await wait_ready(app, pilot, lambda: screen.stage_view.stage is big.stages[heavy])  # type: ignore[attr-defined]
        view = screen.query_one("#graph-view", TextView)
        view.focus()
        await pilot.pause()
        lines = view.line_count
        t = time.perf_counter()
        for _ in range(50):
            await pilot.press("pagedown")
        await pilot.pause()
        results.append((f"PageDown in a {lines}-line graph: mean per key", (time.perf_counter() - t) / 50))
        t = time.perf_counter()
        await pilot.press("end")
        await pilot.pause()
        await pilot.press("home")
        await pilot.pause()
        results.append(("End then Home", time.perf_counter() - t))

        # the cost of painting one page of that graph through the Line API, caches cold
        height = view.scrollable_content_region.height
        view.scroll_to(y=lines // 2, animate=False, immediate=True)
        view.refresh_lines_cache()
        t = time.perf_counter()
        for y in range(height):
            view.render_line(y)
        results.append((f"render one page ({height} lines) of it, cold", time.perf_counter() - t))

        await pilot.press("4")
        await wait_ready(app, pilot, loaded)
        code = app.screen.query_one("#code-view", TextView)
        title = app.screen.query_one("#code-title")
        from tuidebug.tui.widgets.highlight import Highlighted

        def wrapper_shown() -> bool:
            return str(title.content).startswith("wrapper.py") and code.line_count > 1

        # run the action directly and watch the event loop: Pilot.press would wait for the
        # highlighting worker before returning
        t = time.perf_counter()
        app.screen.action_show_wrapper()  # type: ignore[attr-defined]
        shown = highlighted = None
        worst_lag = 0.0
        while highlighted is None and time.perf_counter() - t < 60:
            t_tick = time.perf_counter()
            await asyncio.sleep(0.01)
            worst_lag = max(worst_lag, time.perf_counter() - t_tick - 0.01)
            if shown is None and wrapper_shown():
                shown = time.perf_counter() - t
            if shown is not None and isinstance(code.source, Highlighted) and code.source.complete:
                highlighted = time.perf_counter() - t
        results.append((f"open the wrapper of {big.id} ({code.line_count} lines), text shown",
                        shown or float("nan")))
        results.append(("  … and syntax-highlighted (in a worker)", highlighted or float("nan")))
        results.append(("  worst event-loop stall meanwhile", worst_lag))
        await wait_ready(app, pilot, loaded)
        code.focus()
        t = time.perf_counter()
        for _ in range(50):
            await pilot.press("pagedown")
        await pilot.pause()
        results.append(("PageDown in the wrapper: mean per key", (time.perf_counter() - t) / 50))

    print(f"trace: {path}  ({', '.join(f'{g.id}: {max((s.nodes or 0) for s in g.stages)} nodes' for g in trace.graphs)})")
    for name, secs in results:
        print(f"  {name:<62} {secs * 1000:9.1f} ms")
    print(f"  torch imported: {'torch' in sys.modules}")


async def step_stages(app, pilot, keys: "Keys", stages: int, label):  # type: ignore[no-untyped-def]
    """On the app's graph: the pass stepper opened at its first stage, ``n`` through its
    ``stages`` stages and ``p`` back, one press at a time, each timed into ``keys`` under
    ``label(key)`` from the press to the stage shown (the snapshots next to it may still be
    read ahead). Returns the stepper's screen."""
    from tuidebug.tui.widgets.lists import PickList

    await pilot.press("2")
    await wait_ready(app, pilot, lambda: bool(app.screen.is_loaded()))
    screen = app.screen
    screen.query_one(PickList).focus()
    screen._select_stage(0)

    def stage_shown() -> bool:
        sv = screen.stage_view
        return sv is not None and sv.stage is screen.current_stage()
    await wait_ready(app, pilot, stage_shown)
    for key in ("n", "p"):
        for _ in range(stages - 1):
            await asyncio.sleep(0.3)  # one press at a time, not a key held down
            pos = screen.current_position()
            await keys.time(label(key), 50, app, pilot, lambda key=key: pilot.press(key),
                            lambda pos=pos: screen.current_position() != pos and stage_shown(),
                            workers=False)
    return screen


class Keys:
    """Samples of (wall, CPU to the result, CPU with the background work, the UI thread's own
    CPU with its background work) seconds per kind of key."""

    def __init__(self) -> None:
        self.samples: dict[str, list[tuple[float, float, float, float]]] = {}
        self.budget: dict[str, float] = {}
        self.counted = 0.0  # CPU seconds that some key's figure holds

    async def time(self, label: str, budget_ms: float, app, pilot, press, ready,  # type: ignore[no-untyped-def]
                   timeout: float = 60.0, workers: bool = True) -> None:
        """One press: wall and CPU until ``ready()`` (``workers=False``: whatever still runs in
        the background, as the stepper's reading ahead), then CPU until every worker is done.
        The UI thread's own CPU (``time.thread_time`` here: the harness runs on the app's event
        loop) is kept apart: what the workers spend meanwhile (reading ahead in a thread) is
        not time the key's answer waited for, unless it held the interpreter."""
        t, c, u = time.perf_counter(), time.process_time(), time.thread_time()
        await press()
        await wait_ready(app, pilot, ready, timeout=timeout, workers=workers)
        wall, cpu = time.perf_counter() - t, time.process_time() - c
        await app.workers.wait_for_complete()  # what the key started in the background
        await pilot.pause()
        # and what it started once its result was painted (the pass stepper's read-ahead)
        await app.workers.wait_for_complete()
        await pilot.pause()
        total, ui = time.process_time() - c, time.thread_time() - u
        self.counted += total
        self.samples.setdefault(label, []).append((wall, cpu, total, ui))
        self.budget[label] = budget_ms

    def add(self, label: str, budget_ms: float, wall: float, cpu: float) -> None:
        self.samples.setdefault(label, []).append((wall, cpu, cpu, cpu))
        self.budget[label] = budget_ms
        self.counted += cpu

    def report(self) -> None:
        import statistics

        print(f"  {'key':<44} {'n':>3} {'wall med':>9} {'worst':>8} {'CPU med':>8} "
              f"{'worst':>8} {'+bg med':>8} {'worst':>8} {'UI med':>7} {'worst':>7} "
              f"{'budget':>7}")
        for label, xs in self.samples.items():
            walls = [w * 1000 for w, _, _, _ in xs]
            cpus = [c * 1000 for _, c, _, _ in xs]
            alls = [a * 1000 for _, _, a, _ in xs]
            uis = [u * 1000 for _, _, _, u in xs]
            budget = self.budget[label]
            over = ("  OVER" if statistics.median(alls) > budget
                    else "  worst over" if max(alls) > budget else "")
            print(f"  {label:<44} {len(xs):>3} {statistics.median(walls):9.1f} {max(walls):8.1f} "
                  f"{statistics.median(cpus):8.1f} {max(cpus):8.1f} "
                  f"{statistics.median(alls):8.1f} {max(alls):8.1f} "
                  f"{statistics.median(uis):7.1f} {max(uis):7.1f} {budget:7.0f}{over}")


COMPARE_SAMPLES = 5  # the compare screen opened on the other trace, then on copies of it


def other_copies(other: Path, n: int) -> list[Path]:
    """``other``, then ``n - 1`` copies of it in folders of their own (made once): each
    compared as a trace not read before."""
    import shutil

    out = [other]
    for i in range(1, n):
        copy = other.with_name(f"{other.name}-copy{i}")
        if not (copy / "manifest.json").exists():
            shutil.rmtree(copy, ignore_errors=True)
            shutil.copytree(other, copy)
        out.append(copy)
    return out


def compared(app, against: Path) -> bool:  # type: ignore[no-untyped-def]
    """The compare screen shows its comparison with ``against`` (its first screenful at
    least), not the line saying it is being read."""
    from tuidebug.tui.widgets.textview import TextView

    screen = app.screen
    if getattr(screen, "shown_path", None) != against:
        return False
    view = screen.query_one(TextView)
    return view.line_count > 3 and view.source.plain(0).startswith("o: open")


async def while_built_ahead(path: Path) -> str:
    """A fresh app: from its first paint until every screen is built ahead (prebuild.py), the
    event loop watched (how long a key pressed at any moment waits for the step of building
    that runs), and a key bound to nothing pressed now and then meanwhile: how long from its
    press until the app takes it. Returns lines that say how long the build took, the stalls
    and the keys' waits."""
    import random
    import statistics

    from textual import events

    from tuidebug.trace.format.reader import Trace
    from tuidebug.tui.app import TuidebugApp
    from tuidebug.tui.widgets.textview import TextView

    taken: dict[int, float] = {}  # a key event -> when the app first dispatched it

    def hook(message: object) -> None:
        if isinstance(message, events.Key):
            taken.setdefault(id(message), time.perf_counter())

    app = TuidebugApp(Trace(path), prewarm=False)
    stalls: list[float] = []
    waits: list[float] = []
    async with app.run_test(size=(160, 45), message_hook=hook) as pilot:
        await wait_ready(app, pilot, lambda: app.screen.query_one(TextView).line_count > 0,
                         workers=False)
        t, c = time.perf_counter(), time.process_time()
        done = asyncio.Event()

        async def watch() -> None:
            while not done.is_set():
                tick = time.perf_counter()
                await asyncio.sleep(0.002)
                stalls.append(time.perf_counter() - tick - 0.002)
        watcher = asyncio.ensure_future(watch())
        rng = random.Random(0)
        while app.prebuilder._timer is not None and time.perf_counter() - t < 60:
            await asyncio.sleep(rng.uniform(0.2, 0.45))  # past the quiet time: a step runs
            if app.prebuilder._timer is None:
                break
            key = events.Key("z", "z")  # bound to nothing: what is timed is the wait
            pressed = time.perf_counter()
            app.post_message(key)
            while id(key) not in taken and time.perf_counter() - pressed < 5:
                await asyncio.sleep(0.001)
            waits.append(taken.get(id(key), time.perf_counter()) - pressed)
        wall, cpu = time.perf_counter() - t, time.process_time() - c
        done.set()
        await watcher
        built = list(app.prebuilder.built)
    ms = sorted(x * 1000 for x in stalls)
    ws = sorted(x * 1000 for x in waits)
    return (f"  built {len(built)} screens ahead ({', '.join(built)}) in {wall:.1f} s, "
            f"{cpu * 1000:.0f} ms CPU; event-loop stalls meanwhile: worst {ms[-1]:.1f} ms, "
            f"p99 {ms[int(len(ms) * 0.99)]:.1f}, median {statistics.median(ms):.1f}, "
            f"{sum(1 for x in ms if x > 16)} over 16 ms ({len(ms)} samples)\n"
            f"  a key pressed meanwhile ({len(ws)} keys), from the press until the app took it: "
            + (f"median {statistics.median(ws):.1f} ms, worst {ws[-1]:.1f} ms" if ws else "—"))


async def compare_keys(app, pilot, keys: Keys, other: Path) -> None:  # type: ignore[no-untyped-def]
    """The compare screen: this trace against another 24-layer trace, then against copies of it
    in other folders (each read afresh; this trace's side is read by then), from the overview
    each time. CPU: to the comparison's first screenful painted; +bg: to all of it drawn."""
    def loaded() -> bool:
        return bool(app.screen.is_loaded())  # type: ignore[attr-defined]

    for i, against in enumerate(other_copies(other, COMPARE_SAMPLES)):
        if i:
            await asyncio.sleep(0.3)
            await pilot.press("1")
            await wait_ready(app, pilot, loaded)
            await asyncio.sleep(0.3)
        app.compare_with = against
        label = ("open the compare screen (two such traces)" if not i else
                 "  again, another copy (this trace read before)")
        await keys.time(label, 150, app, pilot,
                        lambda: app.action_show_screen("compare"),
                        lambda against=against: compared(app, against), timeout=120,
                        workers=False)


async def compare_only(path: Path, other: Path, rounds: int) -> None:
    """``--only compare``: a fresh app, left until every screen is built and the work ahead
    done (as the full sequence leaves it by then), then only the compare rows; ``rounds``
    times, each in an app of its own (the other trace and its copies read afresh in each)."""
    from tuidebug.trace.format.reader import Trace
    from tuidebug.tui.app import TuidebugApp
    from tuidebug.tui.widgets.textview import TextView

    keys = Keys()
    for _ in range(rounds):
        app = TuidebugApp(Trace(path), prewarm=False)
        async with app.run_test(size=(160, 45)) as pilot:
            await wait_ready(app, pilot, lambda: app.screen.query_one(TextView).line_count > 0)
            deadline = time.perf_counter() + 120
            while not app.prebuilder.done and time.perf_counter() < deadline:
                await asyncio.sleep(0.1)
            await app.workers.wait_for_complete()
            await asyncio.sleep(0.6)  # the idle collection and freeze (prebuild._keep_read)
            await compare_keys(app, pilot, keys, other)
    print(f"compare rows only, {rounds} app(s) (load average {load1():.2f}; "
          f"{path.name} against {other.name}):")
    keys.report()


async def down_the_kernels(app, pilot, keys: Keys, presses: int = 40) -> None:  # type: ignore[no-untyped-def]
    """The code screen: Down through its kernel list from the wrapper, one press at a time,
    each timed until the next kernel's code is shown highlighted."""
    from tuidebug.tui.widgets.highlight import Highlighted
    from tuidebug.tui.widgets.lists import PickList
    from tuidebug.tui.widgets.textview import TextView

    await pilot.press("4")
    await wait_ready(app, pilot, lambda: bool(app.screen.is_loaded()))
    code = app.screen
    lst = code.query_one(PickList)
    lst.focus()
    lst.highlighted = 0
    await wait_ready(app, pilot, lambda: True)
    cv = code.query_one("#code-view", TextView)
    for _ in range(min(presses, lst.option_count - 1)):
        await asyncio.sleep(0.3)
        before = lst.highlighted
        await keys.time("Down in the code screen's kernel list", 50, app, pilot,
                        lambda: pilot.press("down"),
                        lambda before=before: lst.highlighted != before
                        and isinstance(cv.source, Highlighted))


ROWS = ("built", "screens", "stepper", "search", "down", "compare")


async def per_key(path: Path, other: Path, only: tuple[str, ...] = ROWS) -> None:
    """Every kind of key (of the groups ``only``) timed one press at a time (wall and CPU),
    against its budget."""
    from tuidebug.trace.format.reader import Trace
    from tuidebug.tui.app import TuidebugApp
    from tuidebug.tui.widgets.bars import SearchBar
    from tuidebug.tui.widgets.lists import PickList
    from tuidebug.tui.widgets.textview import TextView

    built_ahead = await while_built_ahead(path) if "built" in only else ""
    keys = Keys()
    c_start = time.process_time()
    t_start = time.perf_counter()
    trace = Trace(path)
    t, c = time.perf_counter(), time.process_time()
    app = TuidebugApp(trace, prewarm=False)
    async with app.run_test(size=(160, 45)) as pilot:
        await wait_ready(app, pilot, lambda: app.screen.query_one(TextView).line_count > 0)
        keys.add("first paint (overview)", 250, time.perf_counter() - t,
                 time.process_time() - c)

        def loaded() -> bool:
            return bool(app.screen.is_loaded())  # type: ignore[attr-defined]

        # the harness's own cost per key (Pilot's press, the waits for idle and workers): a key
        # bound to nothing, timed as every other key — what no key can go under
        for _ in range(10):
            await asyncio.sleep(0.3)
            await keys.time("a key bound to nothing (the harness)", 50, app, pilot,
                            lambda: pilot.press("z"), lambda: True)

        # the largest graph first, so that every screen opens on it
        big = max(trace.graphs, key=lambda g: max((s.nodes or 0) for s in g.stages)
                  if g.stages else 0)
        app.set_graph(big.id)
        names = (("2", "passes"), ("3", "ir"), ("4", "code"), ("5", "autotune"),
                 ("6", "errors"), ("1", "overview"))
        for key, name in names if "screens" in only else ():
            await keys.time(f"open a screen ({name})" if name != "overview"
                            else "switch to an open screen", 150 if name != "overview" else 50,
                            app, pilot, lambda key=key: pilot.press(key), loaded)
        for _ in range(2 if "screens" in only else 0):
            for key, name in names:
                await keys.time("switch to an open screen", 50, app, pilot,
                                lambda key=key: pilot.press(key), loaded)
        if "screens" not in only:  # every screen built ahead, as opening them leaves them
            t_built = time.perf_counter()
            while not app.prebuilder.done and time.perf_counter() - t_built < 120:
                await asyncio.sleep(0.2)

        # the pass stepper: n through every stage of the largest graph, then p back
        n = len(big.stages)
        if "stepper" in only:
            await step_stages(app, pilot, keys, n,
                              lambda key: f"{key} (next/previous stage, {n} stages)")

        # search: / opens the bar; a query and enter finds the next match
        if "search" in only and "stepper" not in only:
            await pilot.press("2")
            await wait_ready(app, pilot, loaded)
        screen = app.screen
        if "search" in only:
            # the focus moved from the stage list to the graph, timed on its own (it restyles
            # and repaints both: it was charged to the first / below, its worst case)
            async def focus_graph() -> None:
                screen.query_one("#graph-view", TextView).focus()
            await asyncio.sleep(0.3)
            await keys.time("focus the graph (from the stage list)", 50, app, pilot,
                            focus_graph, lambda: screen.query_one("#graph-view").has_focus)
        for _ in range(3 if "search" in only else 0):
            await asyncio.sleep(0.3)
            await keys.time("/ (open the search bar)", 50, app, pilot,
                            lambda: pilot.press("slash"),
                            lambda: screen.query_one(SearchBar).is_open)
            await pilot.press(*"addmm")
            await keys.time("enter (search a 5k-line graph)", 50, app, pilot,
                            lambda: pilot.press("enter"), lambda: True)
            await pilot.press("escape")
            await wait_ready(app, pilot, lambda: not screen.query_one(SearchBar).is_open)

        # the code screen: Down through its kernel list (each shows a kernel, highlighted)
        if "down" in only:
            await down_the_kernels(app, pilot, keys)

        if "compare" in only:
            await compare_keys(app, pilot, keys, other)
            await keys.time("switch to an open screen", 50, app, pilot,
                            lambda: pilot.press("1"), loaded)
        cpu_all = time.process_time() - c_start
        wall_all = time.perf_counter() - t_start

    print(f"per key, one press at a time (load average {load1():.2f}; "
          f"compare: {path.name} against {other.name}):")
    keys.report()
    if built_ahead:
        print(built_ahead)
    print(f"  CPU of the whole sequence {cpu_all * 1000:.0f} ms over {wall_all:.1f} s; in the "
          f"keys' figures {keys.counted * 1000:.0f} ms; between keys (pauses, nothing pressed) "
          f"{(cpu_all - keys.counted) * 1000:.0f} ms")


def _option(args: list[str], name: str) -> str | None:
    """The value after ``name`` in ``args`` (both taken out of it), or None."""
    if name not in args:
        return None
    i = args.index(name)
    value = args[i + 1]
    del args[i:i + 2]
    return value


def main() -> None:
    args = sys.argv[1:]
    compare = _option(args, "--compare")
    other: Path | None = Path(compare) if compare else None
    cold = int(_option(args, "--cold") or 3)
    rows = _option(args, "--only")
    only: tuple[str, ...] = tuple(rows.split(",")) if rows else ROWS
    if set(only) - set(ROWS):
        sys.exit(f"--only: rows are {', '.join(ROWS)}")
    rounds = int(_option(args, "--rounds") or 1)
    if "--keys-only" in args:
        args.remove("--keys-only")
    if "--paint-only" in args:
        asyncio.run(paint_only(Path(args[0])))
        return
    path = Path(args[0]) if args else DEFAULT
    if not (path / "manifest.json").exists():
        if args:
            sys.exit(f"not a trace: {path}")
        build(path)
    print(f"load average {load1():.2f} on {cores()} cores")
    if only == ("compare",):
        asyncio.run(compare_only(path, other or VARIANT, rounds))
        return
    keys_only = "--keys-only" in sys.argv or only != ROWS
    times = [] if keys_only else cold_starts(path, cold)
    if times:
        print(f"  cold start (fresh process, exec → overview painted): "
              + ", ".join(f"{t * 1000:.0f} ms" for t in times)
              + f"   (best {min(times) * 1000:.0f} ms)")
    if not keys_only:
        asyncio.run(run(path))
    if other is None:
        other = VARIANT
        if "compare" in only and not (VARIANT / "manifest.json").exists():
            build(VARIANT, "max_fusion_size=16")
    asyncio.run(per_key(path, other, only))


if __name__ == "__main__":
    main()
