"""What a re-run of the whole call advances beyond its compiled graphs is put back or told
(``reach`` finds it, ``side_state.SideState`` takes, learns and restores it), and the walk
runs none of the user's code. Fast: the calls are plain eager Python (no compile)."""

from __future__ import annotations

import weakref

import pytest
import torch

from tuidebug.compiler import compat
from tuidebug.compiler.capture.agreement import Agreement, communicates
from tuidebug.compiler.capture.call_state import state_holders
from tuidebug.compiler.capture.reach import reach
from tuidebug.compiler.capture.side_state import SideState, optimizer_tensors, parameters


def _side(fn, *args) -> tuple[SideState, object]:
    """The SideState of a call of ``fn`` as ``whole_call`` makes it (the optimizers' tensors
    tracked: ``Rewound`` puts those back), and what the walk reached."""
    reached = reach(fn, None, args, {})
    assert reached.cut is None
    params = parameters(reached.modules, reached.optimizers)
    tracked = {id(t) for _, t in optimizer_tensors(reached.optimizers, params)}
    return SideState(reached.spaces, params, tracked, reached.containers,
                     reached.tensors), reached


def _rerun(side: SideState, fn, *args, times: int = 10) -> None:
    """One learning re-run, then ``times`` more each after a restore, then the last restore:
    what the whole call does."""
    fn(*args)
    side.learn()
    for _ in range(times):
        side.restore()
        fn(*args)
    side.learn()
    side.restore()


NET = torch.nn.Linear(2, 1)
SGD = torch.optim.SGD(NET.parameters(), lr=0.05)
SCHED = torch.optim.lr_scheduler.ExponentialLR(SGD, gamma=0.5)


def _scheduled_step(x: torch.Tensor) -> None:
    SGD.zero_grad()
    NET(x).sum().backward()
    SGD.step()
    SCHED.step()


def test_an_lr_scheduler_stepped_in_the_call_leaves_the_lr_as_the_users_call_did() -> None:
    """ExponentialLR(0.5) stepped inside the call: ``sched.last_epoch`` was put back but each
    re-run halved ``group['lr']`` (10 re-runs: 0.05 -> 4.9e-5). The reached optimizer's
    groups' entries but ``params`` are put back."""
    x = torch.ones(1, 2)
    _scheduled_step(x)  # the user's call
    lr, epoch = SGD.param_groups[0]["lr"], SCHED.last_epoch
    side, _ = _side(_scheduled_step, x)
    _rerun(side, _scheduled_step, x)
    assert (SGD.param_groups[0]["lr"], SCHED.last_epoch) == (lr, epoch) == (0.025, 1)
    assert SCHED.get_last_lr() == [0.025]


def test_a_tensor_lr_is_copied_and_put_back() -> None:
    net = torch.nn.Linear(2, 1)
    opt = torch.optim.Adam(net.parameters(), lr=torch.tensor(0.01))

    def step() -> None:
        opt.param_groups[0]["lr"].mul_(0.5)

    step()
    side, _ = _side(step)
    _rerun(side, step)
    assert opt.param_groups[0]["lr"].item() == pytest.approx(0.005)
    assert any("param_groups[0].lr" in n for n in side.names()), side.names()


class Scaler:  # torch.amp.GradScaler's state: tensors held by a plain object
    def __init__(self) -> None:
        self._scale = torch.tensor(1024.0)
        self._growth_tracker = torch.tensor(0)


SCALER = Scaler()
HIST: list[float] = []
STEP = 0


def bump() -> None:
    global STEP
    STEP += 1


def _advancing_step(x: torch.Tensor) -> None:
    SCALER._scale.mul_(2.0)
    SCALER._growth_tracker.add_(1)
    HIST.append(float(x.sum()))
    bump()


def test_tensors_of_plain_objects_lists_and_helpers_globals_are_put_back() -> None:
    """A GradScaler's ``_scale`` (1024 -> 8192 after the re-runs), a list appended to in place
    and a global a helper writes (``global STEP`` in ``bump()``: the walk did not look into
    called functions) were advanced by every re-run, neither put back nor told."""
    x = torch.ones(2)
    _advancing_step(x)  # the user's call
    side, _ = _side(_advancing_step, x)
    _rerun(side, _advancing_step, x)
    assert SCALER._scale.item() == 2048.0 and SCALER._growth_tracker.item() == 1
    assert HIST == [2.0] and STEP == 1
    assert side.unrestorable == [] and side.why() is None


BUFFERS = [torch.zeros(3)]


def _writes_a_listed_tensor() -> None:
    BUFFERS[0].add_(1)


def test_a_tensor_written_in_place_that_is_not_copied_is_told() -> None:
    """A tensor the walk meets in a list (no copy of it is kept) written in place by a
    re-run: the call is not re-run (``why``), and the warning names it."""
    _writes_a_listed_tensor()
    side, reached = _side(_writes_a_listed_tensor)
    assert any(t is BUFFERS[0] for t in reached.tensors)
    _writes_a_listed_tensor()
    side.learn()
    assert side.unrestorable == ["a tensor of shape (3,)"], side.unrestorable
    assert side.why() is not None and "a tensor of shape (3,)" in side.why()
    # a view of a tensor that is put back (a cache Rewound restores) moves with it: not told
    reached = reach(_writes_a_listed_tensor, None, (), {})
    params = parameters(reached.modules, reached.optimizers)
    kept = SideState(reached.spaces, params, set(), reached.containers, reached.tensors,
                     [BUFFERS[0].view(3)])
    _writes_a_listed_tensor()
    kept.learn()
    assert kept.unrestorable == [], kept.unrestorable


class Holder:
    def __init__(self) -> None:
        self.data = torch.zeros(2**19)  # 2 MiB: a dataset, say — not copied


HOLDER = Holder()


def _writes_a_large_attribute() -> None:
    HOLDER.data.add_(1)


def test_a_large_tensor_attribute_is_watched_not_copied() -> None:
    """Copying every tensor a plain object holds could double a dataset in memory: a tensor
    over ``SMALL`` is not copied, and where a re-run writes it, it is told."""
    _writes_a_large_attribute()
    side, _ = _side(_writes_a_large_attribute)
    assert side.nbytes() == 0
    _writes_a_large_attribute()
    side.learn()
    assert side.unrestorable == ["Holder.data"], side.unrestorable


class Raising(list):
    def __iter__(self):
        raise RuntimeError("the walk ran the user's __iter__")


class Lying:
    @property
    def __class__(self):  # a LocalProxy's: reading it runs user code
        raise RuntimeError("the walk read __class__")


class Target:
    pass


def test_the_walk_runs_none_of_the_users_code() -> None:
    """``isinstance`` reads ``__class__`` (a dead ``weakref.proxy`` raises ReferenceError, a
    LocalProxy runs code) and ``list(item)`` runs a subclass's ``__iter__``: the walk raised
    out of the capture. Now every check is on ``type()`` and containers are read through
    their base types."""
    gone = Target()
    proxy = weakref.proxy(gone)
    del gone
    with pytest.raises(ReferenceError):
        isinstance(proxy, torch.nn.Module)  # what the walk did
    inner = torch.nn.Linear(1, 1)
    items = Raising([inner, Lying()])

    def step(x):
        return x

    reached = reach(step, None, (proxy, items, Lying()), {})
    assert reached.cut is None and inner in reached.modules
    # the look for arguments holding tensors (a KV cache) is the same walk
    assert state_holders((proxy, Lying(), items), {}) == []


LR_TABLE = [0.001 * i for i in range(60_000)]


def _uses_a_table(x: torch.Tensor) -> torch.Tensor:
    return x * LR_TABLE[3]


def test_plain_values_do_not_count_towards_the_walks_bound() -> None:
    """A 60,000-entry learning-rate table cut the walk (each float counted): the whole call
    was not timed. Containers and objects are counted, plain values are not."""
    assert reach(_uses_a_table, None, (torch.ones(1),), {}).cut is None
    many = [[i] for i in range(60_000)]  # 60,001 containers: past the bound

    def reaches_many(x):
        return x + len(many)

    assert reach(reaches_many, None, (torch.ones(1),), {}).cut is not None


def test_the_agreement_settles_at_the_next_point_only() -> None:
    """A failure of this rank's measure between agreement points is the next point's reason
    (every rank stops there); one process has no rank to wait for."""
    agree = Agreement(communicates(None, False, None), torch.device("cpu"))
    assert agree.together is False  # one process
    agree.settle("timing the call failed: X")
    assert agree.made == 1 and agree.short == "timing the call failed: X"
    agree.settle("again")
    assert agree.made == 1


def test_the_call_device_is_cuda_before_meta() -> None:
    """A meta tensor met before the call's CUDA tensors made a CUDA call timed on the host's
    clock: every device off the CPU is collected, CUDA first. Here (CPU): meta among CPU
    tensors in any order; on a GPU also CUDA after meta."""
    meta, host = torch.empty(2, device="meta"), torch.ones(2)
    assert compat.call_devices([host, meta, host, meta]) == [torch.device("meta")]
    assert compat.call_devices([host, 3, None]) == []
    if torch.cuda.is_available():
        gpu = torch.ones(2, device="cuda")
        assert compat.call_device([meta, host, gpu]) == gpu.device
        assert compat.call_devices([meta, gpu]) == [gpu.device, torch.device("meta")]


def _uncounted_on_rank(rank: int, store_file: str, out_dir: str) -> None:
    import json
    import os

    import torch.distributed as dist

    import time

    from tuidebug.compiler import compat
    from tuidebug.compiler.capture.agreement import uncounted
    from tuidebug.compiler.capture.counted_ranks import CountedRanks, _key

    compat.count_default_groups(compat.Patcher(print))  # as the capture does at its start

    def group(n: int) -> None:  # a fresh default group (and store) for each case
        if n:
            dist.destroy_process_group()
        dist.init_process_group("gloo", init_method=f"file://{store_file}{n}", rank=rank,
                                world_size=2)
    group(0)
    try:
        said = {"none": uncounted(None), "zero": uncounted(0), "some": uncounted(3),
                "failed": uncounted(None, "installing the counter failed: OSError"),
                "counted_anyway": uncounted(2, "installing the counter failed: OSError")}
        words = CountedRanks()  # rank 1's counter failed: every rank reads that, from the store
        said["mine"] = words.mine(*((3, None) if rank == 0 else (None, said["failed"])))
        said["why_not"] = words.why_not()
        dist.barrier()
        group(1)
        words = CountedRanks()  # every rank counts
        words.say(None)
        dist.barrier()
        said["all_count"] = words.why_not()
        dist.barrier()
        group(2)  # rank 1's compile fell back to eager: no graph by its first call that talks
        words = CountedRanks()
        said["no_graph_mine"] = words.mine(2, None, lambda: True, graphs=rank == 0)
        said["no_graph"] = words.why_not()
        dist.barrier()
        group(3)  # rank 1 says nothing until rank 0 decided: rank 0 waits 1 s, not the store's
        words = CountedRanks(wait_s=1.0)
        if rank == 1:
            compat.default_store().wait([_key("decided")])
        words.mine(2, None)
        began = time.monotonic()
        said["silent"] = words.why_not()
        said["silent_s"] = time.monotonic() - began
        dist.barrier()
        # a default group made again after destroy_process_group has the same key prefix on
        # the same store (torchrun's agent's, the user's): its words are keyed by its number in
        # this process, so the last group's words and decision are not read as its own. (Made
        # here on fresh stores: gloo's own rendezvous keys race on a store a group reuses.)
        group(4)
        said["key_first"] = _key("decided")
        dist.barrier()
        group(5)
        said["key_again"] = _key("decided")
        dist.barrier()
    finally:
        dist.destroy_process_group()
    with open(os.path.join(out_dir, f"rank{rank}.json"), "w") as f:
        json.dump(said, f)


@pytest.mark.slow
def test_a_call_of_a_job_whose_collectives_are_not_counted_is_never_re_run(tmp_path) -> None:
    """A process of a job of several ranks started without ``tuidebug trace --nproc-per-node``
    (``mp.spawn`` from a traced script) counts no collectives: whether a call talks to the
    other ranks is not known, so it is not timed (before: the ranks agreed in doubt, and a
    call only rank 0 makes, its evaluation, left rank 0 waiting in the agreement). A rank
    whose counter failed says so through the group's store, and every rank reads it
    (``CountedRanks``: the others then time no call that talks to it). Real processes, a real
    gloo group of two."""
    import json

    import torch.multiprocessing as mp

    from tuidebug.compiler.capture.agreement import NOT_LAUNCHED, uncounted, uncounted_said
    assert uncounted(None) is None  # one process: timed
    mp.spawn(_uncounted_on_rank, args=(str(tmp_path / "store"), str(tmp_path)), nprocs=2)
    for rank in (0, 1):
        said = json.loads((tmp_path / f"rank{rank}.json").read_text())
        assert said["zero"] is None and said["some"] is None, said
        assert said["none"] == NOT_LAUNCHED, said
        assert said["failed"] == "installing the counter failed: OSError", said
        assert said["counted_anyway"] is None, said
        assert said["why_not"].startswith(
            "rank 1 does not count its collectives (installing the counter failed: OSError): a "
            "rank that does not count times no call, so no rank re-runs one"), said
        assert said["all_count"] is None, said
        assert said["no_graph_mine"] is None, said  # no reason of its own: its word says it
        assert said["no_graph"].startswith(
            "rank 1 had compiled no graph by its first call that talks to the others (its "
            "compile fell back to eager, or made none): it times no call with the others"), said
        # the rank that waited decided for both: rank 1, whose word came later, reads that
        assert said["silent"].startswith(
            "rank 1 said no word in 1 s of whether it counts its collectives"), said
        assert said["silent_s"] < 30, said
        # a default group made again keys its words apart from the last's
        assert said["key_first"] != said["key_again"], said  # bounded (1 s asked; a busy machine), never 30 min
        assert (said["mine"] is None) if rank == 0 else said["mine"].startswith(
            "this rank's collectives are not counted (installing the counter failed: OSError), "
            "so whether the call talks to the other ranks is not known"), said
    assert uncounted_said(NOT_LAUNCHED).startswith(
        "this rank's collectives are not counted (the job was not started by tuidebug trace "
        "--nproc-per-node N, which counts them), so whether the call talks to the other ranks "
        "is not known")


class _Recorded(dict):
    """A dict subclass whose own methods say when they are run (the walk must not run them)."""

    ran: list[str] = []

    def clear(self) -> None:
        _Recorded.ran.append("clear")
        dict.clear(self)

    def update(self, *a, **k) -> None:
        _Recorded.ran.append("update")
        dict.update(self, *a, **k)


def test_an_ordered_dict_is_put_back_in_order_and_a_dict_subclass_is_told() -> None:
    """``dict.clear``/``dict.update`` on an OrderedDict skipped its order table: afterwards
    ``list(od)`` raised KeyError. Exactly dict, list, set, OrderedDict and defaultdict are put
    back through their own methods; any other subclass whose items changed is told (the call
    not timed), never put back through its own code."""
    from collections import OrderedDict, defaultdict
    od = OrderedDict([("a", 1), ("b", 2), ("c", 3)])
    dd = defaultdict(list, {"x": [1]})
    sub = _Recorded(k=1)
    _Recorded.ran.clear()
    side = SideState([], [], set(), [od, dd, sub])

    def call() -> None:
        od["d"] = 4
        od.move_to_end("a")
        dd["y"].append(2)
        dict.__setitem__(sub, "j", 2)

    call()
    side.learn()
    assert [type(c) for c, _ in side.containers] == [OrderedDict, defaultdict]
    assert side.subclassed == ["_Recorded of 1 items"]
    why = side.why()
    assert why is not None and "_Recorded of 1 items" in why
    side.restore()
    assert list(od) == ["a", "b", "c"] and list(od.items()) == [("a", 1), ("b", 2), ("c", 3)]
    od["e"] = 5  # the order table still works
    assert list(od) == ["a", "b", "c", "e"]
    assert dict(dd) == {"x": [1]} and type(dd) is defaultdict
    assert _Recorded.ran == [] and dict(sub) == {"k": 1, "j": 2}  # told, not put back


def test_a_tensor_over_other_bytes_of_a_kept_ones_storage_is_still_watched() -> None:
    """A loose tensor sharing storage with a tensor put back was skipped whatever bytes it
    covered: the other half of a flat buffer (FSDP's flat parameters) written in place by a
    re-run went untold. Only one whose bytes lie inside a kept tensor's is skipped (a view
    moves with it)."""
    flat = torch.zeros(8)
    kept = flat[:4]  # put back by Rewound
    view = flat[1:3]  # inside it
    other = flat[4:]  # the same storage, other bytes
    strided = flat[::2]  # reaches past the kept half
    side = SideState([], [], set(), [], [view, other, strided], [kept])
    with torch.no_grad():
        view.add_(1)
        other.add_(1)
        strided.add_(1)
    side.learn()
    assert side.unrestorable == ["a tensor of shape (4,)", "a tensor of shape (4,)"], \
        side.unrestorable
    assert [id(t) for _, t, _, _ in side._loose] == [id(other), id(strided)]


def test_a_write_to_the_kept_tensor_alone_is_no_write_of_its_storage_siblings() -> None:
    """Views of one base share a version counter: a write to the tensor put back moved the
    counter of the other half of its flat buffer, which was then said written ("not timed",
    a false reason). A sibling is told by what it holds; a Counter's items are put back
    (through dict's methods: Counter.update counts what it is given)."""
    from collections import Counter
    flat = torch.zeros(8)
    kept, other = flat[:4], flat[4:]
    counts = Counter(a=1)
    side = SideState([], [], set(), [counts], [other], [kept])
    with torch.no_grad():
        kept.add_(1)  # the graphs' write, put back by Rewound
    counts["b"] += 1
    side.learn()
    assert side.unrestorable == [] and side.why() is None, side.unrestorable
    side.restore()
    assert counts == Counter(a=1) and type(counts) is Counter
    with torch.no_grad():
        other.add_(1)  # now the sibling itself is written
    side.learn()
    assert side.unrestorable == ["a tensor of shape (4,)"]
