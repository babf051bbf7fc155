"""The accuracy judge: is a compiled graph's output right, decided as PyTorch's own tooling does.

The rule follows ``torch._dynamo.utils.same(ref, res, fp64_ref=...)`` (torch 2.13), written here
in plain torch ops so that no private API is needed and so that the minifier's generated
``repro.py`` can carry the very same code (``minify.codegen`` copies everything after the marker
line below into it verbatim: that part needs only ``math`` and ``torch``). Per output:

1. ``exact``: integer and bool outputs must be equal; ``shape``/``dtype``: a different shape or
   dtype is a mismatch.
2. ``allclose``: within ``tol`` of eager everywhere (``rtol = atol = tol``; NaN equal to NaN):
   a match.
3. ``non-finite``: the compiled output has a NaN or an infinity where neither eager nor the
   float64 reference has that value, or another value where eager and the float64 reference
   are the same infinity: a mismatch.
4. ``rmse-fp64``: against the float64 reference (the eager graph re-run on inputs upcast to
   float64 under ``KeptWide``: its casts to narrower floats kept in float64), ``RMSE(compiled, fp64) <= multiplier * RMSE(eager, fp64) + tol / 10``, the
   multiplier 3 for 16-bit floats and for outputs of fewer than 1000 elements, else 2 — the
   compiled output may be a little less accurate than eager, not more than that.
5. Where no float64 reference exists (an op without float64 support, a graph that draws random
   numbers, out of memory): ``cosine-eager`` for 16-bit and 8-bit floats (cosine similarity to
   eager at least 0.99, ``same(cos_similarity=True)``), ``allclose-eager`` for the others
   (within ``10 * tol`` of eager). The verdict says which rule decided and why.

``tol`` depends on the output's dtype (``DEFAULT_TOL``) unless one is given (``--accuracy-tol``).
"""

# ---- the rule: copied verbatim into repro.py (math and torch only, no annotations) ----
import math
import weakref

import torch

DEFAULT_TOL = {"float64": 1e-5, "float32": 1e-4, "float16": 1e-2, "bfloat16": 1e-2,
               "complex64": 1e-4, "complex128": 1e-5}
LOW_PRECISION_TOL = 1e-1  # float8 and other narrow floats
COSINE_MIN = 0.99


def tolerance(dtype, tol=None):
    """``tol`` when given, else the dtype's default (``DEFAULT_TOL``)."""
    if tol is not None:
        return float(tol)
    return DEFAULT_TOL.get(str(dtype).replace("torch.", ""), LOW_PRECISION_TOL)


def is_low_precision(dtype):
    return dtype.is_floating_point and torch.finfo(dtype).bits <= 16


def flatten_outputs(value):
    """Nested lists/tuples -> a flat list, in order."""
    if isinstance(value, (list, tuple)):
        return [y for x in value for y in flatten_outputs(x)]
    return [value]


EAGER_DTYPE = "_reference_eager_dtype"  # a float64 tensor's dtype in eager, where known


def upcast(value):
    """A tensor's float64 (complex128) copy, its eager dtype kept on it (``EAGER_DTYPE``: what
    ``KeptWide``'s ``x.float()`` reads); anything else as it is."""
    if isinstance(value, torch.Tensor) and (value.is_complex() or value.is_floating_point()):
        out = value.detach().to(torch.complex128 if value.is_complex() else torch.float64)
        setattr(out, EAGER_DTYPE, value.dtype)
        return out
    return value


def _rmse(x, ref, keep):
    return float((x - ref)[keep].abs().pow(2).mean().sqrt()) if bool(keep.any()) else 0.0


def judge_output(actual, eager, fp64, tol=None, why_no_fp64=""):
    """The verdict for one output tensor: ``ok`` and the ``rule`` that decided, with the errors."""
    entry = {"dtype": str(actual.dtype).replace("torch.", ""), "shape": list(actual.shape),
             "max_abs": 0.0, "max_rel": 0.0, "err_compiled": None, "err_eager": None}
    if actual.shape != eager.shape:
        entry.update(ok=False, rule="shape", max_abs=math.inf, max_rel=math.inf,
                     detail=f"shape: compiled {list(actual.shape)}, eager {list(eager.shape)}")
        return entry
    if actual.dtype != eager.dtype:
        entry.update(ok=False, rule="dtype", max_abs=math.inf, max_rel=math.inf,
                     detail=f"dtype: compiled {entry['dtype']}, eager {eager.dtype}")
        return entry
    a, e = actual.detach().cpu(), eager.detach().cpu()
    if not (a.is_floating_point() or a.is_complex()):
        same = bool(torch.equal(a, e))
        entry.update(ok=same, rule="exact", max_abs=0.0 if same else math.inf,
                     max_rel=0.0 if same else math.inf,
                     detail="equal" if same else "integer/bool values differ")
        return entry
    t = tolerance(actual.dtype, tol)
    entry["tol"] = t
    if a.is_complex():
        a, e = torch.view_as_real(a), torch.view_as_real(e)
    a, e = a.to(torch.float64), e.to(torch.float64)
    r = None
    if isinstance(fp64, torch.Tensor) and fp64.shape == actual.shape and \
            fp64.dtype in (torch.float64, torch.complex128):
        r = fp64.detach().cpu()
        r = torch.view_as_real(r) if r.is_complex() else r
    elif isinstance(fp64, torch.Tensor):
        # the float64 run computed this output otherwise: a graph that casts (a loss's
        # ``logits.float()``) gives it in the dtype it casts to, and a tensor made in the default
        # dtype (torch.zeros, arange().float(), a random draw, an input the float64 conversion
        # missed) stays float32: no float64 reference for it either way
        why_no_fp64 = why_no_fp64 or (
            f"the float64 run gave it as {str(fp64.dtype).replace('torch.', '')}: a cast in "
            "the graph, or a tensor made in the default dtype" if fp64.shape == actual.shape else
            f"the float64 run gave it the shape {list(fp64.shape)}")
        entry["no_fp64"] = why_no_fp64
    both_nan = a.isnan() & e.isnan()
    diff = torch.where(both_nan, torch.zeros_like(a), (a - e).abs())
    diff = diff.nan_to_num(nan=math.inf)
    if diff.numel():
        entry["max_abs"] = float(diff.max())
        entry["max_rel"] = float((diff / e.abs().clamp_min(1e-12)).max())
    if r is not None:
        keep = a.isfinite() & e.isfinite() & r.isfinite()
        entry["err_compiled"], entry["err_eager"] = _rmse(a, r, keep), _rmse(e, r, keep)
    if a.numel() == 0 or bool(torch.isclose(a, e, rtol=t, atol=t, equal_nan=True).all()):
        entry.update(ok=True, rule="allclose", detail=f"within {t:g} of eager everywhere")
        return entry
    odd = ~a.isfinite() & ~((a == e) | both_nan)
    if r is not None:
        odd &= ~((a == r) | (a.isnan() & r.isnan()))
    if bool(odd.any()):
        entry.update(ok=False, rule="non-finite",
                     detail=f"{int(odd.sum())} NaN/inf values where eager has none")
        return entry
    # a NaN or an infinity eager gives (and float64 too, where there is one) that compiled
    # does not: the RMSE (over the values finite everywhere) and the cosine cannot see it, and
    # a compiled graph that drops a NaN hides a bug in its propagation (``same()`` fails both)
    lost = ~e.isfinite() & ~((a == e) | both_nan)
    if r is not None:
        lost &= (e == r) | (e.isnan() & r.isnan())
    if bool(lost.any()):
        nans, infs = bool((lost & e.isnan()).any()), bool((lost & e.isinf()).any())
        what = "NaN or infinite" if nans and infs else "NaN" if nans else "infinite"
        entry.update(ok=False, rule="non-finite",
                     detail=f"{int(lost.sum())} value(s) where eager"
                            f"{' and float64 are both' if r is not None else ' is'} {what} "
                            f"and compiled is not")
        return entry
    if r is not None:
        low = is_low_precision(actual.dtype)
        mult = 3.0 if low or actual.numel() < 1000 or t >= 2e-2 else 2.0
        bound = mult * entry["err_eager"] + t / 10.0
        ok = entry["err_compiled"] <= bound
        # values left out of the RMSE (not finite on a side) where compiled and eager differ
        # (compiled inf as float64 is, eager finite): said, so "eager 0" is not read as exact
        left = ~keep & ~((a == e) | both_nan)
        aside = (f"; {int(left.sum())} value(s) not finite in float64 or compiled left out, "
                 f"where compiled equals float64 at {int((left & ((a == r) | (a.isnan() & r.isnan()))).sum())}"
                 f" and eager at {int((left & ((e == r) | (e.isnan() & r.isnan()))).sum())}"
                 if bool(left.any()) else "")
        entry.update(ok=ok, rule="rmse-fp64", multiplier=mult,
                     detail=f"RMSE vs float64: compiled {entry['err_compiled']:.3g} "
                            f"{'<=' if ok else '>'} {mult:g} x eager {entry['err_eager']:.3g} "
                            f"+ {t / 10:g}{aside}")
        return entry
    why = f" (no float64 reference: {why_no_fp64})" if why_no_fp64 else ""
    if is_low_precision(actual.dtype):
        af, ef = a.flatten(), e.flatten()
        keep = af.isfinite() & ef.isfinite()
        cos = float(torch.nn.functional.cosine_similarity(af[keep], ef[keep], dim=0, eps=1e-6)) \
            if bool(keep.any()) else 1.0
        ok = cos >= COSINE_MIN
        entry.update(ok=ok, rule="cosine-eager", cosine=cos,
                     detail=f"cosine similarity to eager {cos:.4f} "
                            f"{'>=' if ok else '<'} {COSINE_MIN}{why}")
        return entry
    ok = bool(torch.isclose(a, e, rtol=10 * t, atol=10 * t, equal_nan=True).all())
    entry.update(ok=ok, rule="allclose-eager",
                 detail=f"{'within' if ok else 'not within'} {10 * t:g} of eager "
                        f"(max abs err {entry['max_abs']:.3g}){why}")
    return entry


def judge(actual, eager, fp64=None, tol=None, why_no_fp64="", why_each=None):
    """The verdict on a graph's outputs: ``{"close", "rule", "outputs": [...], "max_abs",
    "max_rel"}``. ``fp64``: the outputs of the float64 re-run, or None (``why_no_fp64`` says
    why); ``tol``: one tolerance for every output, else each dtype's default; ``why_each``: per
    output, why the float64 run's value is no float64 reference for it ("": it is)."""
    outs, worst_abs, worst_rel = [], 0.0, 0.0
    a_list, e_list = flatten_outputs(actual), flatten_outputs(eager)
    r_list = flatten_outputs(fp64) if fp64 is not None else [None] * len(a_list)
    if len(a_list) != len(e_list):
        return {"close": False, "rule": "outputs", "max_abs": math.inf, "max_rel": math.inf,
                "outputs": [], "detail": f"{len(a_list)} outputs, eager has {len(e_list)}"}
    for i, (a, e) in enumerate(zip(a_list, e_list)):
        if not (isinstance(a, torch.Tensor) and isinstance(e, torch.Tensor)):
            continue
        r = r_list[i] if i < len(r_list) else None
        apart = why_each[i] if why_each and i < len(why_each) else ""
        entry = {"index": i, **judge_output(a, e, None if apart else r, tol,
                                            apart or why_no_fp64)}
        if apart:
            entry["no_fp64"] = apart
        worst_abs, worst_rel = max(worst_abs, entry["max_abs"]), max(worst_rel, entry["max_rel"])
        outs.append(entry)
    bad = [o for o in outs if not o["ok"]]
    decided = bad[0] if bad else next((o for o in outs if o["rule"] != "allclose"),
                                      outs[0] if outs else None)
    return {"close": not bad, "rule": decided["rule"] if decided else "none",
            "max_abs": worst_abs, "max_rel": worst_rel, "outputs": outs,
            "detail": (f"output {decided['index']}: {decided['detail']}" if decided
                       else "no tensor outputs")}


# names of the operators (functions, methods, ATen overload packets) that draw random numbers
RANDOM_OPS = frozenset({
    "rand", "randn", "rand_like", "randn_like", "randint", "randint_like", "randperm",
    "bernoulli", "bernoulli_", "multinomial", "normal", "normal_", "uniform", "uniform_",
    "random_", "exponential_", "geometric_", "cauchy_", "log_normal_", "poisson", "rrelu",
    "rrelu_", "rrelu_with_noise", "gumbel_softmax", "dropout", "dropout_", "dropout1d",
    "dropout2d", "dropout3d", "alpha_dropout", "feature_alpha_dropout", "feature_dropout",
    "native_dropout", "fused_dropout", "_fused_dropout", "scaled_dot_product_attention",
    "inductor_random", "inductor_seeds", "inductor_randint"})
_DROPOUT_TRAINING = {"dropout": 2, "dropout1d": 2, "dropout2d": 2, "dropout3d": 2,
                     "alpha_dropout": 2, "feature_alpha_dropout": 2, "native_dropout": 2,
                     "feature_dropout": 2}  # position of the ``training``/``train`` argument
RANDOM_WHY = "the graph draws random numbers; a float64 run may draw other ones"


def draws(name, args, kwargs):
    """Whether a call of a random-looking op really draws: dropout with ``p == 0`` or not in
    training, attention without ``dropout_p``, do not."""
    args, kwargs = list(args), dict(kwargs or {})
    if name == "scaled_dot_product_attention":
        p = kwargs.get("dropout_p", args[4] if len(args) > 4 else 0.0)
        return not (isinstance(p, (int, float)) and p == 0)
    if name in _DROPOUT_TRAINING:
        p = kwargs.get("p", args[1] if len(args) > 1 else 0.5)
        pos = _DROPOUT_TRAINING[name]
        train = kwargs.get("training", kwargs.get("train", args[pos] if len(args) > pos else True))
        return not ((isinstance(p, (int, float)) and p == 0) or train is False)
    return True


# casts the float64 reference keeps in float64: methods casting to a fixed narrower float; ops
# that reinterpret bits (their dtype is no precision)
_CASTS = {"float": torch.float32, "half": torch.float16, "bfloat16": torch.bfloat16}
_BITCASTS = frozenset({"view", "view_as_real", "view_as_complex"})


def _wide(dtype):
    """float64 (complex128) for a narrower floating (complex) dtype, else None."""
    if not isinstance(dtype, torch.dtype) or dtype in (torch.float64, torch.complex128):
        return None
    if dtype.is_complex:
        return torch.complex128
    return torch.float64 if dtype.is_floating_point else None


def _tensors(x):
    if isinstance(x, torch.Tensor):
        return [x]
    if isinstance(x, (list, tuple)):
        return [t for v in x for t in _tensors(v)]
    if isinstance(x, dict):
        return [t for v in x.values() for t in _tensors(v)]
    return []


def _floats(x):
    return [t for t in _tensors(x) if t.is_floating_point() or t.is_complex()]


def _has_tensor(x):
    return any(isinstance(v, torch.Tensor) or isinstance(v, (list, tuple)) and _has_tensor(v)
               for v in x)


def _in_place(func, name):
    """``add_``, ``__iadd__``, ``__setitem__``, ATen's ``add_.Tensor``: an op that writes into
    an argument (an ATen overload: its schema says so)."""
    schema = getattr(func, "_schema", None)
    if schema is not None:
        return schema.is_mutable
    if name.startswith("__"):
        return name.startswith("__i") and name not in (
            "__init__", "__index__", "__int__", "__invert__") or name == "__setitem__"
    return name.endswith("_")


def _defaulted(out, args, kwargs):
    """Whether ``out`` has floats in a narrower default dtype that no argument chose: no
    floating tensor and no dtype among the arguments (``torch.ones(4)``, ``ints * 0.5``)."""
    return any(_wide(t.dtype) is not None and t.dtype == torch.get_default_dtype()
               for t in _floats(out)) and not _floats(list(args) + list(kwargs.values())) \
        and kwargs.get("dtype") is None  # dtype=None: none given


def _ints_up(x):
    """Integer tensors (lists and tuples of them) in float64."""
    if isinstance(x, torch.Tensor):
        return x.to(torch.float64) if not (x.is_floating_point() or x.is_complex()) else x
    if isinstance(x, (list, tuple)) and _has_tensor(x):
        return type(x)(_ints_up(v) for v in x)
    return x


def _up(x):
    """A tensor in a narrower float read in float64 (complex128); lists and tuples of them."""
    if isinstance(x, torch.Tensor):
        return x.to(_wide(x.dtype)) if _wide(x.dtype) is not None else x
    if isinstance(x, (list, tuple)) and _has_tensor(x):
        return type(x)(_up(v) for v in x)
    return x


def _widened(name, args):
    """(``args`` with each narrower float dtype made float64, whether one was);
    ``x.to(other)`` and ``x.type_as(other)`` of a narrower ``other``: to float64."""
    args, changed = list(args), False
    for i, a in enumerate(args):
        if _wide(a) is not None:
            args[i], changed = _wide(a), True
        elif i == 1 and name in ("to", "type_as") and isinstance(a, torch.Tensor) and \
                _wide(a.dtype) is not None and _floats(args[:1]):
            if name == "type_as":
                return (args[0], torch.empty((), dtype=_wide(a.dtype), device=a.device)), True
            return (args[0], a.device, _wide(a.dtype), *args[2:]), True
    return tuple(args), changed


def _eager_dtype(out, inputs):
    """Each float64 tensor of ``out`` told the dtype eager computes it in, where every float
    input's is known (``EAGER_DTYPE``): their promotion."""
    known = [getattr(t, EAGER_DTYPE, None) for t in inputs if t.is_floating_point()]
    if not known or None in known:
        return
    dtype = known[0]
    for d in known[1:]:
        dtype = torch.promote_types(dtype, d)
    for t in _tensors(out):
        if t.dtype == torch.float64 and not hasattr(t, EAGER_DTYPE):
            setattr(t, EAGER_DTYPE, dtype)


class KeptWide(torch.overrides.TorchFunctionMode):
    """While on, a run on inputs upcast to float64 stays float64 (the float64 reference): a
    cast to a narrower float (``.float()``, ``.half()``, ``.to(torch.float32)``, a ``dtype=``
    naming one: transformers' ``logits.float()``, RMSNorm's ``.to(torch.float32)``) gives
    float64, what the default dtype makes is float64 (``torch.ones(4)``, ``ints * 0.5``; the
    default itself is never set: it is the whole process's), a narrower tensor the graph holds
    is read in float64. Run as written, that part would be float32 arithmetic, which compiled
    and eager match exactly. Left as they are: in-place writes (into a tensor of their dtype),
    bitcasts, properties, autocast (it leaves float64 tensors alone). ``met(cast)``: told of
    each cast kept wide (``cast`` True) and of each op that still computed in a narrower float
    (False). ``drew``: the random ops that drew (a float64 run may draw other numbers than
    eager: no reference, ``RANDOM_WHY``). Each value computed from one that was computed in
    a narrower float is known (``narrow_notes``: per output, why it is no float64 reference)."""

    def __init__(self):
        super().__init__()
        self.drew = set()
        self._narrow = {}  # id(tensor) -> (a weak reference to it, where it went narrow)

    def met(self, cast):
        pass

    def at(self, name):
        """Where the run is, for a value computed in a narrower float: the op's name."""
        return f"op {name}"

    def narrow_at(self, x):
        """Where ``x`` (a tensor) or a value it was computed from went narrow, or ""."""
        got = self._narrow.get(id(x)) if isinstance(x, torch.Tensor) else None
        return got[1] if got is not None and got[0]() is x else ""

    def narrow_notes(self, out):
        """Per output of the run (``flatten_outputs``): why its value is no float64 reference
        (it was computed from a value computed in a narrower float), or ""."""
        return [f"the float64 run computed it in a narrower float at {w}" if w else ""
                for w in map(self.narrow_at, flatten_outputs(out))]

    def _mark(self, out, where):
        for t in _tensors(out):
            self._narrow[id(t)] = (weakref.ref(t), where)

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = dict(kwargs or {})
        name = getattr(func, "__name__", "")
        if getattr(func, "_schema", None) is not None:  # an ATen overload: add_.Tensor
            name = name.split(".")[0]
        drawing = name in RANDOM_OPS and draws(name, args, kwargs)
        if drawing:
            self.drew.add(name)
        where = next(filter(None, map(self.narrow_at, _tensors([args, kwargs]))), "") \
            if self._narrow else ""  # an argument computed from a narrower value
        if drawing:  # called as given (a dtype=float32 draws eager's numbers), read in float64
            out = _up(func(*args, **kwargs))
            if where:
                self._mark(out, where)
            return out
        src = args[0] if args and isinstance(args[0], torch.Tensor) else None
        if name in _CASTS and src is not None and not src.is_complex():
            if src.is_floating_point():  # a float made narrower: the model's cast
                self.met(True)
            out = src.to(torch.float64)  # as eager's x.float() of a float32 x: x itself
            eager = getattr(src, EAGER_DTYPE, None)
            if out is src and eager is not None and eager != _CASTS[name]:
                out = src.clone()  # eager's x.float() of a bfloat16 x: a copy
            if eager is not None or not src.is_floating_point():
                setattr(out, EAGER_DTYPE, _CASTS[name])
            if where:
                self._mark(out, where)
            return out
        keep = name in _BITCASTS or _in_place(func, name) or name == "__get__" or "autocast" in name
        changed = False
        if not keep:
            args, changed = _widened(name, args)
            for k, v in list(kwargs.items()):
                if _wide(v) is not None:
                    kwargs[k], changed = _wide(v), True
            if changed and _floats(list(args) + list(kwargs.values())) and \
                    not (name.startswith("new_") or name.endswith("_like")):  # values cast
                self.met(True)
            args, kwargs = _up(args), {k: _up(v) for k, v in kwargs.items()}
        out = func(*args, **kwargs)
        if not keep and _defaulted(out, args, kwargs):  # float64 where the default chose
            out = self._defaulted(func, name, args, kwargs, out)
        inputs = list(args) + list(kwargs.values())
        if name != "__get__" and not changed and any(_wide(t.dtype) for t in _floats(out)) \
                and _tensors(inputs):  # ints.type(torch.FloatTensor) too
            self.met(False)  # computed in a narrower float after all
            where = where or self.at(name)
        if where:
            self._mark(out, where)
        if not _in_place(func, name):
            _eager_dtype(out, _tensors([args, kwargs]))
        return out

    @staticmethod
    def _defaulted(func, name, args, kwargs, out):
        """``out`` of an op whose floats the default dtype chose, as under a float64 default
        (never set: it is the whole process's, other threads' too): a factory called again with
        ``dtype=torch.float64``, an op on integer tensors (``ints * 0.5``) on them in float64;
        a random op's draws (eager's very numbers) read in float64."""
        if name in RANDOM_OPS:
            return _up(out)
        try:
            if not _has_tensor(list(args) + list(kwargs.values())):
                return func(*args, **dict(kwargs, dtype=torch.float64))
            return func(*_ints_up(args), **{k: _ints_up(v) for k, v in kwargs.items()})
        except (TypeError, RuntimeError):  # takes no dtype; no float64 kernel for it
            return _up(out)
