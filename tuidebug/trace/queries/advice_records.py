"""What advice is, as every answer hands it on: a suggestion (``Suggestion``) and how
``tuidebug advise --try`` applies it without editing the user's files (``Apply``); what a run of
the script compiled (``Counts``) and a suggestion tried (``Tried``), as ``advice.json`` keeps
them. Records only: ``advice`` finds the suggestions, ``advice.counts`` counts a run."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any


@dataclass(frozen=True)
class Apply:
    """How ``tuidebug advise --try`` applies a suggestion without editing the user's files:
    ``config`` (``{module.knob: value}`` of the compiler's config, set in the traced process;
    ``module``: ``dynamo``, ``inductor``, ``compiler``, ``fx``, as ``compat.tryout`` names them),
    ``compile_kwargs`` (added to every ``torch.compile`` call by a hook), ``dynamic_sources``
    (inputs marked dynamic by their Dynamo source, ``L['x']:0``), ``static_cache_len``
    (transformers' growing ``DynamicCache`` built as a static cache of that many positions)."""

    config: dict[str, Any] = field(default_factory=dict)
    compile_kwargs: dict[str, Any] = field(default_factory=dict)
    dynamic_sources: list[str] = field(default_factory=list)
    static_cache_len: int | None = None

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    def describe(self) -> str:
        """What the run does differently, as the consent plan shows it."""
        said = [f"{k} = {v!r}" for k, v in self.config.items()]
        said += [f"torch.compile(..., {k}={v!r})" for k, v in self.compile_kwargs.items()]
        said += [f"dynamic_sources {s}" for s in self.dynamic_sources]
        if self.static_cache_len:
            said.append(f"every transformers DynamicCache built as a static cache of "
                        f"{self.static_cache_len} positions")
        return ", ".join(said) or "nothing"

    @classmethod
    def from_json(cls, d: Any) -> "Apply":
        d = d if isinstance(d, dict) else {}
        return cls(config=dict(d.get("config") or {}),
                   compile_kwargs=dict(d.get("compile_kwargs") or {}),
                   dynamic_sources=[str(s) for s in d.get("dynamic_sources") or []],
                   static_cache_len=_int(d.get("static_cache_len")) or None)


@dataclass(frozen=True)
class Suggestion:
    """``id`` (stable: ``dynamic=True``, ``capture_scalar_outputs``…), ``text`` (what to do),
    ``why`` (what in the trace calls for it), ``about`` (``recompiles`` or ``graph breaks``),
    ``apply`` (None: a change to the user's code, listed but not tried)."""

    id: str
    text: str
    why: str
    about: str
    apply: Apply | None

    def to_json(self) -> dict[str, Any]:
        return {**asdict(self), "apply": self.apply.to_json() if self.apply else None,
                "tryable": self.apply is not None}


@dataclass(frozen=True)
class Counts:
    """What a run of the script compiled: Dynamo compiles that made a graph (a restarted
    analysis not counted twice), recompiles (of
    those, the ones after a failed guard), graph breaks (each time one was met: once per
    compile that reaches its line), the run's wall time (capture included), how it ended, and
    ``break_lines``: the breaks by line and cause, each once (None: not recorded) — a fix
    that only removes a recompile meets the same breaks in fewer compiles."""

    compiles: int
    recompiles: int
    graph_breaks: int
    wall_s: float | None
    status: str
    break_lines: int | None = None

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, d: Any) -> "Counts":
        d = d if isinstance(d, dict) else {}
        wall = d.get("wall_s")
        return cls(compiles=_int(d.get("compiles")), recompiles=_int(d.get("recompiles")),
                   graph_breaks=_int(d.get("graph_breaks")),
                   wall_s=float(wall) if isinstance(wall, (int, float)) else None,
                   status=str(d.get("status") or "?"),
                   break_lines=(d["break_lines"] if isinstance(d.get("break_lines"), int)
                                and not isinstance(d["break_lines"], bool) else None))


def _int(v: Any) -> int:
    return v if isinstance(v, int) and not isinstance(v, bool) else 0


@dataclass(frozen=True)
class Tried:
    """One suggestion tried: the counts before (the script re-run as traced) and after."""

    id: str
    before: Counts
    after: Counts
    trace: str | None = None

    def _breaks(self) -> tuple[int, int]:
        """The breaks compared: by line where both runs say (the same break met in fewer
        compiles is not a break removed), else as met."""
        a, b = self.after, self.before
        if a.break_lines is not None and b.break_lines is not None:
            return b.break_lines, a.break_lines
        return b.graph_breaks, a.graph_breaks

    @property
    def helped(self) -> bool:
        """Fewer compiles or fewer graph breaks, the script still ending well."""
        a, b = self.after, self.before
        before, after = self._breaks()
        return (a.status == "ok" and a.compiles <= b.compiles and after <= before
                and (a.compiles < b.compiles or after < before))

    @property
    def verdict(self) -> str:
        b, a = self.before, self.after
        # as many distinct break lines: the count is known, which lines is not (one removed
        # and another added reads the same), so the words claim the count only
        same = (a.break_lines is not None and a.break_lines == b.break_lines
                and a.graph_breaks != b.graph_breaks)
        change = (f"compiles {b.compiles} → {a.compiles}, graph breaks {b.graph_breaks} → "
                  f"{a.graph_breaks}" + (f" ({a.break_lines} break line(s) before and after, met by "
                                         f"{'fewer' if a.graph_breaks < b.graph_breaks else 'more'}"
                                         " compiles)" if same else ""))
        if a.status != "ok":
            return f"tried, the script then {a.status}: {change}"
        return ("verified: " if self.helped else "tried, did not help: ") + change

    def to_json(self) -> dict[str, Any]:
        return {"id": self.id, "before": self.before.to_json(), "after": self.after.to_json(),
                "trace": self.trace, "helped": self.helped, "verdict": self.verdict}
