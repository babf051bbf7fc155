"""What a compiled frame's code wraps (``compat.wrapped_of``), read from real frames of
decorated methods (no compile): transformers' ``can_return_tuple`` around a model's forward —
the frame Dynamo compiles for ``torch.compile(model)`` of a Hugging Face model, named
``wrapper`` — and plain ``functools.wraps`` wrappers with and without a named ``self``."""

from __future__ import annotations

import functools
import importlib.util
import sys
from typing import Any

import pytest

from tuidebug.compiler.compat.wrapped import wrapped_of


def _deco_self(func: Any) -> Any:
    @functools.wraps(func)
    def wrapper(self: Any, *args: Any, **kwargs: Any) -> Any:
        return func(self, *args, **kwargs)
    return wrapper


def _deco_star(func: Any) -> Any:
    @functools.wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        return func(*args, **kwargs)
    return wrapper


class _Model:
    @_deco_self
    def forward(self, input_ids: Any, attention_mask: Any = None) -> Any:
        return sys._getframe(1)  # the wrapper's frame, as Dynamo would be handed it

    @_deco_star
    @_deco_self
    def generate(self, prompt: Any, steps: int = 1) -> Any:
        return sys._getframe(2)  # the outer wrapper's frame


def test_a_wrapper_with_self_resolves_to_the_forward_and_its_arguments() -> None:
    w = wrapped_of(_Model().forward(1))
    assert w is not None, w
    assert (w["fn"], w["qualname"]) == ("forward", "_Model.forward"), w
    assert w["file"] == __file__ and w["line"] > 0, w
    assert w["args"] == ["input_ids", "attention_mask"] and w["passed_from"] == 0, w


def test_a_wrapper_of_star_args_holds_the_instance_first() -> None:
    """``wrapper(*args, **kwargs)`` around a method (transformers' check_model_inputs): its
    ``args[0]`` is the instance, the caller's first argument is ``args[1]``; the chain of
    wrappers is followed to the method itself."""
    w = wrapped_of(_Model().generate("p"))
    assert w is not None and w["qualname"] == "_Model.generate", w
    assert w["args"] == ["self", "prompt", "steps"] and w["passed_from"] == 1, w


def test_a_plain_function_frame_wraps_nothing() -> None:
    assert wrapped_of(sys._getframe()) is None
    assert wrapped_of(None) is None


@pytest.mark.skipif(importlib.util.find_spec("transformers") is None,
                    reason="transformers is not installed")
def test_transformers_can_return_tuple_wrapper_resolves_to_the_models_forward() -> None:
    from transformers.utils.generic import can_return_tuple

    class TinyLM:
        @can_return_tuple  # the same decorator before forward (Qwen3VLModel's layout)
        def get_image_features(self, pixel_values: Any) -> Any:
            return sys._getframe(1)

        @can_return_tuple
        def forward(self, input_ids: Any, past_key_values: Any = None) -> Any:
            return sys._getframe(1)

    frame = TinyLM().forward(1)
    assert frame.f_code.co_name == "wrapper" and frame.f_code.co_filename.endswith(
        "generic.py"), frame.f_code  # the frame Dynamo compiles
    w = wrapped_of(frame)
    assert w is not None and w["qualname"].endswith("TinyLM.forward"), w
    assert w["args"] == ["input_ids", "past_key_values"] and w["passed_from"] == 0, w


def test_an_instance_whose_class_lookup_raises_costs_nothing() -> None:
    """A descriptor on the class that raises on any attribute read (the user's objects are
    looked through at a recompile): it is not read, no error, the forward is found."""
    class Hostile:
        def __getattribute__(self, name: str) -> Any:
            raise RuntimeError("no")

    class M:
        trap = Hostile()

        @_deco_self
        def forward(self, x: Any) -> Any:
            return sys._getframe(1)

    w = wrapped_of(M().forward(1))
    assert w is not None and w["qualname"].endswith("M.forward"), w


def test_two_methods_under_one_decorator_resolve_each_to_its_own() -> None:
    """Every method one decorator wraps runs the same ``wrapper`` code: a class with
    ``@can_return_tuple get_image_features`` before ``@can_return_tuple forward`` (Qwen3VLModel,
    ClapModel, AlignModel…). ``forward``'s frame is ``forward``'s, with its own parameters; the
    method is told by the values the frame closes over, not by its code."""
    class VL:
        @_deco_self
        def get_image_features(self, pixel_values: Any) -> Any:
            return sys._getframe(1)

        @_deco_self
        def forward(self, input_ids: Any, pixel_values: Any = None) -> Any:
            return sys._getframe(1)

        @_deco_star
        def embed(self, tokens: Any) -> Any:
            return sys._getframe(1)

        @_deco_star
        def generate(self, prompt: Any, steps: int = 1) -> Any:
            return sys._getframe(1)

    vl = VL()
    w = wrapped_of(vl.forward(1))
    assert w is not None and w["qualname"].endswith("VL.forward"), w
    assert w["args"] == ["input_ids", "pixel_values"], w
    w = wrapped_of(vl.get_image_features(1))
    assert w is not None and w["qualname"].endswith("VL.get_image_features"), w
    w = wrapped_of(vl.generate("p"))
    assert w is not None and w["qualname"].endswith("VL.generate"), w
    assert w["args"] == ["self", "prompt", "steps"] and w["passed_from"] == 1, w


def test_no_code_of_the_users_runs_while_looking() -> None:
    """The class's attributes are read as stored (no descriptor, ``__getattr__`` or metaclass
    runs): a trap that counts its reads is never read, and the forward is still found."""
    reads: list[str] = []

    class Trap:
        def __getattr__(self, name: str) -> Any:
            reads.append(name)
            raise RuntimeError("no")

        def __get__(self, obj: Any, owner: Any = None) -> Any:
            reads.append("__get__")
            raise RuntimeError("no")

    class Meta(type):
        def __getattribute__(cls, name: str) -> Any:
            if name in ("__mro__", "__dict__"):
                reads.append(name)
            return super().__getattribute__(name)

    class M(metaclass=Meta):
        trap = Trap()

        @_deco_self
        def forward(self, x: Any) -> Any:
            return sys._getframe(1)

    w = wrapped_of(M().forward(1))
    assert w is not None and w["qualname"].endswith("M.forward"), w
    assert reads == [], reads


def test_a_frame_with_no_star_arguments_is_not_looked_through() -> None:
    """Only a frame whose code takes ``*args`` or ``**kwargs`` can be a wrapper passing its
    arguments on: any other frame's class is not read at all."""
    reads: list[str] = []

    class Meta(type):
        def __getattribute__(cls, name: str) -> Any:
            if name in ("__mro__", "__dict__"):
                reads.append(name)
            return super().__getattribute__(name)

    class M(metaclass=Meta):
        def forward(self, x: Any) -> Any:
            return sys._getframe()

    assert wrapped_of(M().forward(1)) is None
    assert reads == [], reads


def test_a_function_that_calls_what_it_closes_over_wraps_nothing() -> None:
    """``@torch.compile def step(*batch): return loss_fn(out, target)`` inside ``main()``:
    ``step`` closes over ``loss_fn`` but hands it arguments of its own, not its ``*batch``.
    Before, ``loss_fn`` was recorded as what ``step`` wraps (its ``out`` as ``args[0]``)."""
    def loss_fn(out: Any, target: Any) -> Any:
        return out

    def step(*batch: Any) -> Any:
        loss_fn(batch[0], batch[1])
        return sys._getframe()

    assert wrapped_of(step(1, 2)) is None


def test_a_method_that_calls_a_helper_it_closes_over_wraps_nothing() -> None:
    """``forward(self, *args)`` found on the instance's class, with no ``__wrapped__``: the
    frame is the method itself, not a wrapper of the helper it calls."""
    def helper(x: Any) -> Any:
        return x

    class M:
        def forward(self, *args: Any) -> Any:
            helper(args[0])
            return sys._getframe()

    assert wrapped_of(M().forward(1)) is None


def test_a_wrapper_without_functools_wraps_resolves_to_what_it_passes_its_args_to() -> None:
    """A decorator that does not set ``__wrapped__`` but passes ``*args`` on (read from the
    bytecode): the function it hands them to, told from another it only calls."""
    def log(x: Any) -> Any:
        return x

    def deco(func: Any) -> Any:
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            log(args)
            return func(*args, **kwargs)
        return wrapper

    @deco
    def loss(out: Any, target: Any) -> Any:
        return sys._getframe(1)

    w = wrapped_of(loss(1, 2))
    assert w is not None and w["qualname"].endswith("loss"), w
    assert w["args"] == ["out", "target"] and w["passed_from"] == 0, w


def test_a_method_whose_first_parameter_is_not_named_self_holds_the_instance_first() -> None:
    """``wrapper(*args)`` found on the instance's class: ``args[0]`` is the instance whatever
    the method calls it (before, only a parameter named ``self`` counted)."""
    class M:
        @_deco_star
        def generate(this: Any, prompt: Any) -> Any:
            return sys._getframe(1)

    w = wrapped_of(M().generate("p"))
    assert w is not None and w["args"] == ["this", "prompt"] and w["passed_from"] == 1, w


def test_a_dict_subclass_or_str_subclass_on_the_function_runs_nothing() -> None:
    """A function whose ``__dict__`` is a dict subclass with its own ``get``, and a wrapped
    function whose ``__qualname__`` is a str subclass with its own ``__str__``: neither is
    called (counted), the chain is still followed."""
    calls: list[str] = []

    class TrapDict(dict):  # type: ignore[type-arg]
        def get(self, *a: Any) -> Any:
            calls.append("get")
            return super().get(*a)

    class TrapStr(str):
        def __str__(self) -> str:
            calls.append("__str__")
            return "trapped"

    class M:
        @_deco_self
        def forward(self, x: Any) -> Any:
            return sys._getframe(1)

    fn = M.__dict__["forward"]
    fn.__dict__ = TrapDict(fn.__dict__)
    inner = fn.__dict__["__wrapped__"]
    inner.__qualname__ = TrapStr("M.forward")
    w = wrapped_of(M().forward(1))
    assert w is not None and w["args"] == ["x"], w
    assert calls == [], calls
