"""What the user can do about a trace's graph breaks: a Dynamo config knob the break's own
words name (tried by ``advise --try``), else the change to the user's line (listed, not
tried)."""

from __future__ import annotations

from tuidebug.trace.queries.advice_records import Apply, Suggestion
from tuidebug.trace.queries.frames import is_own
from tuidebug.trace.queries.graph_breaks import in_data_parallel, trace_breaks


# Dynamo config knobs a graph break's own words name, and how they name them: ``.item()``
# (``capture_scalar_outputs=False`` in its cause), an op whose output shape depends on the data
# (``nonzero``, boolean-mask indexing: its hint names the knob)
_BREAK_KNOBS = (("capture_scalar_outputs", "capture_scalar_outputs=False"),
                ("capture_dynamic_output_shape_ops",
                 "capture_dynamic_output_shape_ops = True"))


def break_advice(trace: Trace) -> list[Suggestion]:
    """Suggestions for the trace's graph breaks: a config knob to try where Dynamo's cause
    names one, else the change to the code (listed, not tried) where the break is in the
    user's code (a break inside torch's DDP or the standard library is no change to make, even
    where the user's line called it)."""
    out: dict[str, Suggestion] = {}
    for bs in trace_breaks(trace).values():
        for b in bs:
            where = b.user_line or b.site
            at = f"{where.file.rsplit('/', 1)[-1]}:{where.line}" if where else "?"
            why = f"{b.cause} at {at}"
            said = f"{b.cause} {b.explanation} {' '.join(b.hints)}"
            knob = next((k for k, sign in _BREAK_KNOBS if sign in said), None)
            if knob is not None:
                s = out.setdefault(knob, Suggestion(
                    knob, f"torch._dynamo.config.{knob} = True", why, "graph breaks",
                    Apply(config={f"dynamo.{knob}": True})))
                if at not in s.why:
                    out[knob] = Suggestion(s.id, s.text, f"{s.why}; {at}", s.about, s.apply)
            elif b.advice and b.user_line and is_own(b.user_line.file) and not b.torchs_own \
                    and not (b.site and in_data_parallel(b.site.file)):
                # the user's line, and the break not in DDP's or FSDP's own code (DDP's
                # forward logs through its C++ logger, FSDP2's hooks are disabled for Dynamo:
                # no change of the user's makes that go) nor a graph_break() torch calls
                # itself (around an optimizer step); a break in other torch code
                # (torch/utils/checkpoint.py) keeps its advice
                out.setdefault(f"break at {at}", Suggestion(f"break at {at}", b.advice, why,
                                                            "graph breaks", None))
    return list(out.values())
