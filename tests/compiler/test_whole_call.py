"""``trace --profile`` measures the user's whole call through torch.compile against eager,
interleaved, and splits a compiled call into its parts (real compiles, CPU)."""

from __future__ import annotations

import json
import statistics
import subprocess
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.conftest import trace_example, trace_script
from tuidebug.trace.queries.whole_call import call_verdicts
from tuidebug.trace.format.reader import Trace
from tuidebug.trace.queries.summary import trace_summary

pytestmark = pytest.mark.slow
LAYERS = 3

# Each trace costs about 10 s of CPU (importing torch and Inductor is 6 of them), so this file
# traces two programs, once each, and every test reads the one it needs: ``item_trace``
# (examples/item_per_layer.py) and ``calls_trace``, one script made of the snippets below
# (CALLS), each compiling functions of its own names, whose whole calls are timed one by one.
# To add a test: write its snippet as a constant (names no other snippet uses), append it to
# CALLS, and read what it needs from ``calls_trace`` by its callable (``_verdict``) or its
# Dynamo frame (``_frame_ids``, ``_frame_graphs``) — not by position in the trace. A test that
# needs options of its own (not ``--profile 3``) or a process of its own traces its own script
# (``trace_script``).


@pytest.fixture(scope="module")
def item_trace(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("whole") / "item"
    proc = trace_example(out, "item_per_layer.py", "--layers", str(LAYERS),
                         extra=["--profile", "3"])
    assert proc.returncode == 0, proc.stderr[-3000:]
    return out


@dataclass(frozen=True)
class Traced:
    """``calls_trace``: the trace folder and the finished ``tuidebug trace`` process."""

    out: Path
    proc: subprocess.CompletedProcess[str]


@pytest.fixture(scope="module")
def calls_trace(tmp_path_factory: pytest.TempPathFactory) -> Traced:
    """The snippets of CALLS as one script, traced with ``--profile 3``."""
    out, proc = trace_script(tmp_path_factory.mktemp("whole"), "calls", "\n\n".join(CALLS),
                             "--profile", "3")
    return Traced(out, proc)


def _verdict(t: Trace, callable_name: str):
    """The whole-call verdict of ``callable_name`` (exactly one)."""
    found = [v for v in call_verdicts(t) if v.callable == callable_name]
    assert len(found) == 1, [v.callable for v in call_verdicts(t)]
    return found[0]


def _call(root: Path, callable_name: str) -> dict:
    """profile.json's entry for the whole call of ``callable_name`` (exactly one)."""
    found = [c for c in json.loads((root / "profile.json").read_text())["calls"]
             if c["callable"] == callable_name]
    assert len(found) == 1, found
    return found[0]


def _frame_ids(t: Trace, co_name: str) -> list[str]:
    """The compile ids (``F/N``, ``F/N_attempt``) of the one frame Dynamo compiled for the
    function ``co_name``, in order: ``["F/0"]`` when it compiled once."""
    frames = {c["id"].split("/")[0] for c in t.manifest.compiles
              if (c.get("summary") or {}).get("co_name") == co_name}
    assert len(frames) == 1, (co_name, t.manifest.compiles)
    return [c["id"] for c in t.manifest.compiles if c["id"].split("/")[0] in frames]


def _frame_graphs(t: Trace, co_name: str):
    """The graphs compiled for the function ``co_name`` and the rest of it after its graph
    breaks (Dynamo's resume functions, ``torch_dynamo_resume_in_<co_name>_at_<line>``)."""
    def ours(name: str | None) -> bool:
        return name == co_name or (name or "").startswith(f"torch_dynamo_resume_in_{co_name}_at")
    ids = {c["id"] for c in t.manifest.compiles if ours((c.get("summary") or {}).get("co_name"))}
    found = [g for g in t.graphs if g.compile_id in ids]
    assert found, (co_name, [g.id for g in t.graphs])
    return found


def _parts_add_up(v, root: Path) -> None:
    """The ledger is each marked part's mean share of the clocked calls' wall time, scaled to
    the timed calls' median (profile.json); ``other`` is that median less the parts. So the
    parts can never exceed the whole and ``other`` adds up by construction: neither is checked.
    What can fail here is how much of the clocked calls' wall time the marks span: at least
    70% (the time between marks is Python's, and grows with load: a training step's clocked
    calls left 10.9% unmarked under load 10, 19.9% in a fresh-clone run at load 3.3). A part missing
    from the marks (a graph, the backward) is folded into its neighbour, so this does not find
    it: each caller asserts the ledger's rows (its graphs, islands and backward parts)."""
    raw = _call(root, v.callable)
    whole = statistics.median(raw["times"]["compiled_s"])
    assert len(raw["times"]["compiled_s"]) == v.rounds >= 10
    assert v.ledger, "no ledger"
    marked = [p for p in v.ledger if p.part != "other"]
    rows = [p.as_json() for p in v.ledger]
    assert marked and all(p.seconds >= 0 for p in marked), rows
    covered = sum(p.seconds for p in marked)
    assert covered >= 0.7 * whole, (covered, whole, rows)


def test_graph_breaks_make_it_slower_and_are_named(item_trace: Path) -> None:
    t = Trace(item_trace)
    (v,) = call_verdicts(t)
    assert v.callable == "ItemPerLayer" and not v.training and v.rounds >= 10
    assert v.outcome == "slower" and v.ratio_high < 1.0, v.text
    assert "`.item()` at item_per_layer.py:" in v.text, v.text
    _parts_add_up(v, item_trace)
    islands = [p for p in v.ledger if p.part == "eager_island"]
    assert len(islands) == LAYERS  # one .item() per layer
    for p in islands:
        assert p.file and p.file.endswith("item_per_layer.py") and p.reason
        assert "Tensor.item()" in p.reason and p.seconds > 0
    graphs = [p for p in v.ledger if p.part == "graph"]
    assert len(graphs) == 2 * LAYERS  # before and after each break
    ids = {g.id for g in t.graphs}
    assert all(p.graph in ids for p in graphs)
    raw = json.loads((item_trace / "profile.json").read_text())
    (call,) = raw["calls"]
    # the ledger's marks are taken in further calls: the timed ones carry none, as eager's
    inst = call["instrumentation"]
    assert inst["timed"] == {"graph_marks": 0, "backward_hooks": 0, "wrapped_graph_calls": 0,
                             "watched_module_calls": 0}, inst
    n = call["ledger_calls"]["n"]
    # outside the timed calls the capture's wrapper and its watch of the compiled module's
    # calls are there, and counted: in the ledger's clocked calls alone (not their unclocked
    # primes or the warm-up, which went through the watch and the wrapper with no mark), so
    # the counts agree with one another and with the calls
    assert inst["clocked"] == {"graph_marks": 2 * (2 * LAYERS) * n, "backward_hooks": 0,
                               "wrapped_graph_calls": 2 * LAYERS * n,
                               "watched_module_calls": n}, (n, inst)
    assert n > 0
    m = raw["machine"]
    assert 1 <= m["threads"] <= m["cores"] and call["threads"] == m["threads"]
    assert len(call["times"]["compiled_s"]) == len(call["times"]["eager_s"]) == call["rounds"]


def test_info_json_has_the_verdict_and_ledger(item_trace: Path) -> None:
    p = trace_summary(Trace(item_trace))["profile"]
    v = p["verdict"]
    for key in ("compiled_s", "eager_s", "ratio", "ratio_low", "ratio_high", "text"):
        assert key in v
    assert v["ratio_low"] <= v["ratio"] <= v["ratio_high"]
    assert {x["part"] for x in p["ledger"]} <= {"dynamo", "graph", "eager_island",
                                               "cudagraph", "other"}
    assert any(x.get("line") and x.get("reason") for x in p["ledger"])


def test_a_training_step_is_timed_forward_and_backward(profiled_training_trace: Path) -> None:
    (v,) = call_verdicts(Trace(profiled_training_trace))
    assert v.training
    _parts_add_up(v, profiled_training_trace)
    back = [p for p in v.ledger if p.phase == "bwd" and p.part == "graph"]
    assert len(back) == 1 and back[0].seconds > 0 and back[0].graph
    assert "backward" in (back[0].graph or "")
    # around the compiled backward graph: the autograd engine (no break: one graph)
    rest = [p for p in v.ledger if p.phase == "bwd" and p.part != "graph"]
    assert [p.part for p in rest] == ["eager_island", "eager_island"], rest
    assert all(p.reason and "autograd engine" in p.reason for p in rest)
    # the verdict follows its own interval
    if v.ratio_low > 1:
        assert v.outcome == "faster"
    elif v.ratio_high < 1:
        assert v.outcome == "slower"
    else:
        assert v.outcome == "same" and v.text.startswith("no measurable difference")


MODULE_COMPILE = (Path(__file__).parents[1] / "fixtures" / "module_compile.py").read_text()


def test_model_compile_in_place_is_measured_as_the_module(calls_trace: Traced) -> None:
    """``model.compile()`` compiles the module's ``_call_impl`` in place: measured as the
    module (its name; its parameters make the call a training step), like torch.compile(model).
    Its forward breaks once: the backward is split into the two compiled backward graphs and
    the eager backward between them, attributed to that break, not one lump."""
    out, proc = calls_trace.out, calls_trace.proc
    assert "MODULE_COMPILE ok" in proc.stdout
    t = Trace(out)
    v = _verdict(t, "Tiny")
    assert v.training, "the module's parameters require grad: a training step"
    _parts_add_up(v, out)
    kinds = {g.id: g.kind for g in t.graphs}
    fwd = [p for p in v.ledger if p.part == "graph" and p.phase == "fwd"]
    bwd = [p for p in v.ledger if p.phase == "bwd"]
    assert len(fwd) == 2, v.ledger
    assert [p.part for p in bwd] == ["eager_island", "graph", "eager_island", "graph",
                                     "eager_island"], [p.as_json() for p in bwd]
    graphs = [p.graph for p in bwd if p.part == "graph"]
    assert all(g and kinds.get(g) == "backward" for g in graphs) and len(set(graphs)) == 2
    between = bwd[2]  # the backward of the forward's eager island: named by its break
    assert between.reason and "item()" in between.reason and between.line, between
    assert bwd[0].reason and "autograd engine" in bwd[0].reason
    # the hooks that mark each compiled backward fired in the clocked calls only: the timed
    # compiled calls paid for none, as the eager calls they alternate with pay for none
    call = _call(out, "Tiny")
    inst = call["instrumentation"]
    assert inst["timed"] == {"graph_marks": 0, "backward_hooks": 0, "wrapped_graph_calls": 0,
                             "watched_module_calls": 0}, inst
    n = call["ledger_calls"]["n"]
    assert inst["clocked"]["backward_hooks"] == 2 * 2 * n > 0, inst  # pre and post, 2 graphs
    assert inst["clocked"]["graph_marks"] == 2 * 2 * n, inst  # (the ledger's calls alone)


PRINTS = """import torch


@torch.compile
def printing_step(x):
    print("STEP CALLED")  # the user's own output, from inside the compiled function
    m = (x * 2).sum().item()  # a break: the rest holds no tensor, Dynamo leaves it to eager
    s = 0.0
    for i in range(20000):
        s += m * i
    return s


print("result", printing_step(torch.ones(4)))
"""


def test_the_timed_calls_print_nothing_to_the_users_output(calls_trace: Traced) -> None:
    """The whole call is timed over hundreds of calls of the user's function; what that function
    prints is the user's output once, as without tuidebug, not once per timed call (a
    transformers model printing a value after ``.item()`` printed it 491 times)."""
    out, proc = calls_trace.out, calls_trace.proc
    v = _verdict(Trace(out), "printing_step")
    assert v.rounds >= 10  # the function was called many more times than once
    lines = proc.stdout.splitlines()  # (info's summary after it quotes the line's code)
    assert lines.count("STEP CALLED") == 1, proc.stdout[-2000:]
    assert "result 1599920000.0" in lines
    # the eager rest after the last graph (the loop) is the .item() break's island, not Dynamo
    tail = [p for p in v.ledger if p.part == "eager_island" and p.phase == "fwd"]
    assert len(tail) == 1 and tail[0].reason and "item()" in tail[0].reason, v.ledger
    dyn = sum(p.seconds for p in v.ledger if p.part == "dynamo")
    assert tail[0].seconds > dyn, [p.as_json() for p in v.ledger]
    assert "STEP CALLED" not in proc.stderr.splitlines()


INFERENCE = """import torch


@torch.compile
def inference_f(x):
    return (x * 2).sin()


x = torch.randn(8)  # made outside inference mode: a normal tensor
with torch.inference_mode():
    print("sum", round(float(inference_f(x).sum()), 4))
"""


def test_timing_a_call_under_inference_mode_compiles_nothing_more(calls_trace: Traced) -> None:
    """A call made under ``torch.inference_mode()`` with tensors made outside it: the timed
    calls' copies of the arguments were made where the call returned, in inference mode, so
    they were inference tensors, failed Dynamo's dispatch-key guard and compiled the function
    a second time (TORCH_LOGS=recompiles without tuidebug: one compile). Now one compile."""
    t = Trace(calls_trace.out)
    (cid,) = _frame_ids(t, "inference_f")
    assert cid.endswith("/0"), cid
    v = _verdict(t, "inference_f")
    assert v.rounds >= 10


VIEW_OF_EARLIER = """import torch


@torch.compile
def view_step(x):
    y = (x * 2).sin()
    torch._dynamo.graph_break()
    return y.t()  # the second graph returns a view of its input, which the first graph made


view_step(torch.randn(3, 4, requires_grad=True))
print("VIEW ok")
"""


def test_a_graph_returning_a_view_of_an_earlier_graphs_output_times_no_backward(
        calls_trace: Traced) -> None:
    """The graph after the break returns only a view of its input (the first graph's output):
    its output leads to the first graph's compiled backward node, which was hooked for both
    graphs — the one backward timed twice, once as the second compile's. Now one backward graph,
    the first compile's, hooked once per clocked call."""
    out, proc = calls_trace.out, calls_trace.proc
    assert "VIEW ok" in proc.stdout
    t = Trace(out)
    ours = _frame_graphs(t, "view_step")
    assert len({g.compile_id for g in ours}) >= 2, [g.id for g in ours]  # broke once
    v = _verdict(t, "view_step")
    assert v.training
    back = [p for p in v.ledger if p.phase == "bwd" and p.part == "graph"]
    kinds = {g.id: (g.kind, g.compile_id) for g in t.graphs}
    assert len(back) == 1, [p.as_json() for p in v.ledger]
    kind, cid = kinds.get(back[0].graph or "", ("", ""))
    first = _frame_ids(t, "view_step")[0].split("/")[0]
    assert kind == "backward" and cid.split("/")[0] == first, (back, kinds)  # the first frame's
    missing = json.loads((out / "manifest.json").read_text()).get("not_available") or []
    assert not [x for x in missing if "backward" in str(x)], missing
    call = _call(out, "view_step")
    n = call["ledger_calls"]["n"]
    hooks = call["instrumentation"]["clocked"]["backward_hooks"]  # pre and post, one graph
    assert 0 < 2 * n == hooks, (hooks, n)  # the ledger's calls alone (not the warm-up call)


REDUCE_OVERHEAD = """import torch


def ro_f(x):
    return torch.relu(x * 2 + 1).sum(dim=1)


ro_cf = torch.compile(ro_f, mode="reduce-overhead")
print("out", ro_cf(torch.ones(8, 16)).shape)
"""


def test_reduce_overhead_on_the_cpu_replays_no_cuda_graph(calls_trace: Traced) -> None:
    """``mode="reduce-overhead"`` on the CPU: Inductor asks for CUDA graphs and captures none
    (a CPU graph; it logs no skip for it). The ledger named the graph "CUDA graph", the profile
    said "(…, CUDA graphs)" and the kernels went untimed ("not timed: under CUDA graphs the
    kernels are replayed without Python calls")."""
    out = calls_trace.out
    t = Trace(out)
    v = _verdict(t, "ro_f")
    parts = [p.part for p in v.ledger]
    assert "graph" in parts and "cudagraph" not in parts, [p.as_json() for p in v.ledger]
    prof = json.loads((out / "profile.json").read_text())
    assert prof["compiles"] and not any(c.get("cudagraphs") for c in prof["compiles"].values())
    (graph,) = _frame_graphs(t, "ro_f")
    (timings,) = list(out.glob(f"graphs/{graph.id}/code/timings.json"))
    tm = json.loads(timings.read_text())
    assert tm["run"].get("runs", 0) > 0, tm["run"]
    assert tm["kernels"] and all(k.get("run_s") for k in tm["kernels"].values()), tm
    (row,) = [g for g in trace_summary(t)["graphs"] if g["id"] == graph.id]
    assert row["cudagraphs"] == "requested, but no CUDA kernels", row


CACHE_STATE = """import torch


class Cache:  # transformers' StaticLayer: a length advanced in place at each call
    def __init__(self):
        self.length = torch.tensor(0)


def cache_f(x, cache):
    length = cache.length.to(x.device)
    pos = torch.arange(x.shape[0]) + length
    length.add_(x.shape[0])
    cache.length = length
    return x * 2 + pos


cache_cf = torch.compile(cache_f)
cache = Cache()
for _ in range(2):
    out = cache_cf(torch.ones(4), cache)
print("STATE", cache.length.item(), out.tolist())
"""


def test_a_call_given_state_it_changes_is_not_re_run_to_time_it(calls_trace: Traced) -> None:
    """Qwen2 ``generate(cache_implementation="static")`` under ``--profile``: the whole call
    was re-run hundreds of times on the user's StaticCache (an argument that is no tensor, so
    not copied), advancing it past its end: the script failed ("index out of bounds") where it
    runs untraced. An argument holding tensors is not re-run: the whole call is not measured,
    says why, and the program sees the state it would untraced."""
    out, proc = calls_trace.out, calls_trace.proc
    assert "STATE 8 [6.0, 7.0, 8.0, 9.0]" in proc.stdout, proc.stdout[-2000:]
    t = Trace(out)
    assert "cache_f" not in [v.callable for v in call_verdicts(t)]
    call = _call(out, "cache_f")
    assert "argument 1 (Cache)" in call["not_measured"], call
    s = trace_summary(t)
    assert any("whole call of cache_f not measured: argument 1 (Cache)" in n
               for n in s["profile"]["notes"]), s["profile"]["notes"]


BUFFER_IN_BACKWARD = """import torch


class Scaled(torch.nn.Module):  # Llama's rotary inv_freq: a buffer the backward needs
    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(8, 8)
        self.register_buffer("scale", torch.linspace(0.5, 1.5, 8))

    def forward(self, x):
        return (self.lin(x) * self.scale).sum()


m = Scaled()
loss = torch.compile(m)(torch.randn(4, 8))
loss.backward()  # the graph saved self.scale at the version it had in the call
print("BACKWARD OK", m.lin.weight.grad.shape)
"""


def test_the_users_backward_after_the_timed_calls_finds_its_buffers_as_saved(
        calls_trace: Traced) -> None:
    """A Llama training step under ``--profile``: the script's ``loss.backward()`` raised "one
    of the variables needed for gradient computation has been modified by an inplace
    operation: [torch.FloatTensor [8]] is at version 2" (the rotary inv_freq buffer). The
    module's buffers were put back after the timed calls by copying into every one of them,
    which bumps each buffer's version: the user's graph had saved it for its backward. Only a
    buffer the timed calls changed is put back."""
    out, proc = calls_trace.out, calls_trace.proc
    assert "BACKWARD OK" in proc.stdout, proc.stderr[-3000:]
    v = _verdict(Trace(out), "Scaled")
    assert v.training and v.rounds >= 10


SAME_TENSOR_TWICE = """import torch


def twice_f(input_ids, labels):  # transformers' model(input_ids=ids, labels=ids)
    return (input_ids.float() * 2 - labels.float()).sum()


twice_cf = torch.compile(twice_f)
ids = torch.arange(12).reshape(2, 6)
print("OUT", twice_cf(ids, ids).item())
"""


def test_one_tensor_passed_twice_stays_one_tensor_in_the_timed_calls(
        calls_trace: Traced) -> None:
    """A Llama training step called as ``model(input_ids=ids, labels=ids)``: the timed calls
    passed a copy of each argument, two tensors where the user passed one; Dynamo guards on
    that (``kwargs['input_ids'] is kwargs['labels']``) and compiled once more (0/1, a compile
    the program never makes), then timed that compile. The copies keep the call's aliasing."""
    out, proc = calls_trace.out, calls_trace.proc
    assert "OUT 66.0" in proc.stdout, proc.stdout[-2000:]
    t = Trace(out)
    (cid,) = _frame_ids(t, "twice_f")
    assert cid.endswith("/0") and cid in t.compiles, (cid, list(t.compiles))
    v = _verdict(t, "twice_f")
    assert v.rounds >= 10


PROGRAM_STATE = """import torch

torch.manual_seed(0)
cache = torch.zeros(4, 4)
pos = torch.zeros(1, dtype=torch.long)
model = torch.nn.Linear(4, 4)
opt = torch.optim.SGD(model.parameters(), lr=0.1)


@torch.compile
def advance(x):  # a global cache and position, not arguments
    cache.index_copy_(0, pos, x.view(1, 4))
    pos.add_(1)
    return cache.sum()


@torch.compile
def update():
    opt.step()


counted = torch.nn.Linear(4, 1)
counted.calls = 0


@torch.compile
def train(x):  # a count Dynamo advances at each call; a backward into .grad (a graph break)
    counted.calls += 1
    loss = counted(x).sum()
    loss.backward()
    return loss.detach()


advance(torch.randn(4))
model(torch.randn(2, 4)).sum().backward()
expected = (model.weight - 0.1 * model.weight.grad).detach()
update()
train(torch.ones(2, 4))
print("POS", int(pos), "ROWS", int((cache != 0).any(1).sum()))
print("W", "OK" if torch.equal(model.weight.detach(), expected) else "CHANGED")
print("CALLS", counted.calls, "GRAD", counted.weight.grad.tolist(), counted.bias.grad.tolist())
"""


def test_the_programs_own_tensors_the_graphs_write_are_put_back(calls_trace: Traced) -> None:
    """The whole call re-runs the call hundreds of times: a function writing a global cache at
    a global position ran it past its end (the script went on with POS 4, not 1), and a
    compiled ``opt.step()`` applied the step to the user's parameters each time (their
    weights far off). The tensors the graphs write (found at each graph's first call, the
    eager check's) are put back before each re-run and after: the program sees what it would
    untraced, and both calls are timed. A Python attribute Dynamo advances at every call and
    the ``.grad`` a ``loss.backward()`` inside the callable accumulates into are put back too
    (before: CALLS and GRAD of every re-run)."""
    out, proc = calls_trace.out, calls_trace.proc
    assert "POS 1 ROWS 1" in proc.stdout and "W OK" in proc.stdout, proc.stdout[-2000:]
    assert "CALLS 1 GRAD [[2.0, 2.0, 2.0, 2.0]] [2.0]" in proc.stdout, proc.stdout[-2000:]
    t = Trace(out)
    # no whole-call warning but the one REACHED_STATE makes on purpose (Scale.weight)
    assert not any("whole call" in w and "Scale.weight" not in w for w in
                   t.manifest.warnings), t.manifest.warnings
    calls = {c["callable"]: c for c in json.loads((out / "profile.json").read_text())["calls"]}
    assert set(calls) == CALLABLES, calls  # every whole call of the script, and no other
    ours = {name: calls[name] for name in ("advance", "update", "train")}
    assert all("not_measured" not in c for c in ours.values()), ours
    assert ours["advance"]["restored"] == ["cache", "pos"], ours["advance"]
    assert len(ours["update"]["restored"]) == 2, ours["update"]  # weight and bias
    assert set(ours["train"]["restored"]) == {"Linear.calls", "Linear.weight.grad",
                                              "Linear.bias.grad"}, ours["train"]
    assert {"advance", "update", "train"} <= {v.callable for v in call_verdicts(t)}


REACHED_STATE = """import copy

import torch


class Trainer:  # a plain object: the model, a head in a dict, the optimizer, a count
    def __init__(self):
        self.model = torch.nn.Linear(4, 2)
        self.heads = {"out": torch.nn.Linear(2, 1)}
        self.opt = torch.optim.SGD([*self.params()], lr=0.5)
        self.steps = 0
        for p in self.params():  # values a step changes exactly, in any order
            torch.nn.init.constant_(p, 0.25)

    def params(self):
        return [*self.model.parameters(), *self.heads["out"].parameters()]

    def step(self, x):
        self.steps += 1
        loss = self.heads["out"](self.model(x)).sum()
        loss.backward()
        self.opt.step()
        return loss.detach()


trainer = Trainer()
trainer_twin = copy.deepcopy(trainer)
torch.compile(trainer.step)(torch.ones(2, 4))
trainer_twin.step(torch.ones(2, 4))  # untraced, eager
trainer_same = all(torch.equal(p, q) and torch.equal(p.grad, q.grad)
                   for p, q in zip(trainer.params(), trainer_twin.params()))
print("TRAINER", trainer.steps, "SAME" if trainer_same else "DIFF",
      trainer.model.weight.grad.tolist())


class Scale(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.weight = torch.nn.Parameter(torch.ones(1))


eager_net, eager_scale = torch.nn.Linear(4, 1), Scale()
torch.nn.init.constant_(eager_net.weight, 0.25)
torch.nn.init.constant_(eager_net.bias, 0.25)
eager_opt = torch.optim.SGD(eager_net.parameters(), lr=0.5)
applied = [0]


@torch.compiler.disable
def apply_eagerly(optimizer):  # outside the graphs: an optimizer step, a parameter of none
    optimizer.step()
    with torch.no_grad():
        eager_scale.weight.add_(1)
    applied[0] += 1
    if applied[0] > 1:  # its re-run raises
        raise RuntimeError("applied twice")


@torch.compile
def eager_step(x):
    loss = (eager_net(x) * eager_scale.weight).sum()
    loss.backward()
    apply_eagerly(eager_opt)
    return loss.detach()


eager_step(torch.ones(2, 4))
many = [[i] for i in range(60_000)]  # 60,001 lists the function reaches: past the walk's bound


@torch.compile
def reaches_many(x):
    return x + len(many)


reaches_many(torch.ones(2))
print("NET", eager_net.weight.tolist(), eager_net.bias.tolist(), eager_net.weight.grad.tolist(),
      eager_net.bias.grad.tolist())
"""


def test_state_held_by_a_plain_object_or_stepped_outside_the_graphs_is_put_back(
        calls_trace: Traced) -> None:
    """``torch.compile(trainer.step)``, the model, a head in a dict and the SGD optimizer
    attributes of a plain object: the state was looked for only one level deep (the owner,
    the arguments, the closure, the named globals) and every re-run accumulated into the
    gradients and counted (before: TRAINER 3890 DIFF, grads -7777.5). The walk goes through
    the method's object, its attributes and dicts: the program ends as untraced (an eager
    twin), and the call is timed. An eager ``opt.step()`` (``torch.compiler.disable``'d) was
    stepped once more by the learning re-run, and where that re-run raised nothing said so
    (before: NET -3.75, no warning): the reached optimizer's parameters are copied before it
    and put back (NET as untraced: one step); a parameter no optimizer holds, written there,
    cannot be, and the trace's warning names it, raised or not."""
    out, proc = calls_trace.out, calls_trace.proc
    assert "TRAINER 1 SAME [[0.5, 0.5, 0.5, 0.5], [0.5, 0.5, 0.5, 0.5]]" in proc.stdout, \
        proc.stdout[-2000:]
    assert "NET [[-0.75, -0.75, -0.75, -0.75]] [-0.75] [[2.0, 2.0, 2.0, 2.0]] [2.0]" in \
        proc.stdout, proc.stdout[-2000:]
    trainer = _call(out, "Trainer.step")
    assert "not_measured" not in trainer and trainer["rounds"] >= 10, trainer
    assert {"Trainer.steps", "Linear.weight.grad"} <= set(trainer["restored"]), trainer
    said = _call(out, "eager_step")["not_measured"]
    assert "RuntimeError: applied twice" in said, said
    warned = [w for w in Trace(out).manifest.warnings if "whole call" in w]
    assert len(warned) == 1 and "(Scale.weight)" in warned[0], warned
    assert "Linear" not in warned[0], warned  # the optimizer's: put back, not named
    # what a call reaches past the walk's bound is not seen: the call is not re-run on it
    cut = _call(out, "reaches_many")["not_measured"]
    assert "is more than 50,000 objects" in cut, cut


ADVANCED = """import torch

sched_net = torch.nn.Linear(2, 1)
sched_opt = torch.optim.SGD(sched_net.parameters(), lr=0.05)
sched = torch.optim.lr_scheduler.ExponentialLR(sched_opt, gamma=0.5)


class ScaleState:  # torch.amp.GradScaler's: a tensor held by a plain object
    def __init__(self):
        self._scale = torch.tensor(1024.0)


scale_state = ScaleState()
history = []
steps_taken = 0


def count_step():
    global steps_taken
    steps_taken += 1


@torch.compile
def scheduled_step(x):
    loss = sched_net(x).sum()
    loss.backward()
    sched_opt.step()
    sched.step()
    scale_state._scale.mul_(2.0)
    history.append(1)
    count_step()
    return loss.detach()


scheduled_step(torch.ones(2, 2))
print("ADVANCED", sched_opt.param_groups[0]["lr"], sched.last_epoch, scale_state._scale.item(),
      len(history), steps_taken)
"""


def test_what_re_runs_advance_beyond_the_graphs_is_put_back(calls_trace: Traced) -> None:
    """An LR scheduler stepped inside the call (its optimizer's ``group['lr']`` halved at
    every re-run while ``last_epoch`` was put back: 0.05 -> 4.9e-5 after ten), a GradScaler's
    tensor ``_scale`` on a plain object, a list appended to and a global a helper counts: each
    was advanced by every re-run, neither put back nor told. Now the program ends as untraced
    and the call is timed."""
    out, proc = calls_trace.out, calls_trace.proc
    assert "ADVANCED 0.025 1 2048.0 1 1" in proc.stdout, proc.stdout[-2000:]
    call = _call(out, "scheduled_step")
    assert "not_measured" not in call and call["rounds"] >= 10, call


STRIDED_INPUT = """import torch


@torch.compile
def gated(x):
    return torch.nn.functional.silu(x) * 2


_gate_up = torch.randn(4, 16, requires_grad=True)
gated((_gate_up * 1).chunk(2, -1)[0])  # a view with gaps: strides (16, 1), not (8, 1)
print("STRIDED ok")
"""


def test_an_input_with_gaps_has_its_gradients_judged(calls_trace: Traced) -> None:
    """A half of ``gate_up.chunk(2, -1)`` (a MoE expert's SiLU in transformers' Mixtral) passed
    to a compiled function: the check copied it contiguous, and the compiled graph, which
    asserts the strides it was compiled for, raised on the copy (``gradients not judged: the
    backward re-run failed: AssertionError: expected size 8==8, stride 64==128``); the timed
    calls' copies failed the stride guard and compiled the function again (0/1, "called at"
    the user's line: a recompile the program never made). The copies keep the strides: one
    compile, the gradient judged, and matching."""
    out, proc = calls_trace.out, calls_trace.proc
    assert "STRIDED ok" in proc.stdout
    t = Trace(out)
    ids = _frame_ids(t, "gated")
    assert len(ids) == 1, ids  # no recompile made by the timed calls
    (cid,) = ids
    assert cid in t.runtime["checks"], list(t.runtime["checks"])
    grads = t.runtime["checks"][cid]["gradients"]
    assert "skipped" not in grads and grads["close"] is True, grads
    assert [g["name"] for g in grads["outputs"]] == ["x.grad"], grads


# the script ``calls_trace`` traces, and the whole calls its snippets make
CALLS = [MODULE_COMPILE, PRINTS, INFERENCE, VIEW_OF_EARLIER, REDUCE_OVERHEAD, CACHE_STATE,
         BUFFER_IN_BACKWARD, SAME_TENSOR_TWICE, PROGRAM_STATE, REACHED_STATE, ADVANCED,
         STRIDED_INPUT]
CALLABLES = {"Tiny", "printing_step", "inference_f", "view_step", "ro_f", "cache_f", "Scaled",
             "twice_f", "advance", "update", "train", "Trainer.step", "eager_step",
             "reaches_many", "scheduled_step", "gated"}
