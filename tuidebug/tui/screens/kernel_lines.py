"""What the code screen draws of a kernel: its row in the kernel list (``kernel_prompt``) and
its provenance panel (``ProvenanceLines``: IR nodes, the numerics verdict and wrong buffers, FX
nodes and the user's source lines, each a line enter acts on)."""

from __future__ import annotations

from pathlib import Path

from rich.text import Text

from tuidebug.inert import inert_text
from tuidebug.trace.queries import provenance
from tuidebug.trace.queries.numerics import KernelNumerics, NodeNumerics
from tuidebug.tui.widgets.lists import Row
from tuidebug.viewers.numerics_view import kernel_mark, kernel_numerics_line
from tuidebug.viewers.summary_text import launch_text


def kernel_prompt(k: provenance.KernelInfo, judged: KernelNumerics | None = None) -> Row:
    """``cpp_fused_add_…norm_relu_2  cpp 140l``: a long name loses its middle (kernels of one
    graph differ at the end: ``_0``, ``_1``…), its kind and size are kept — or, when the
    numerics check judged it, its mark instead (``✗ first 0.31 vs 4.4e-08``)."""
    if k.kind == "extern":
        return Row(inert_text(k.name, "dim"), middle=True)
    if judged is not None:  # the verdict is what a narrow list must keep (the title has the rest)
        return Row(inert_text(k.name, "bold"), kernel_mark(judged), middle=True)
    tail = Text(f"  {k.kind}" + (f" {k.lines}l" if k.lines else ""), style="dim")
    return Row(inert_text(k.name, "bold"), tail, middle=True)


class ProvenanceLines:
    """The provenance panel: IR nodes, FX nodes and source lines of one kernel."""

    def __init__(self, k: provenance.KernelInfo | None, judged: KernelNumerics | None = None,
                 wrong: list[NodeNumerics] | None = None) -> None:
        self.items: list[tuple[str, str, Text]] = []  # (kind, value, text)
        self.wrong_line: int | None = None  # the first wrong buffer's user line (numerics)
        if k is None:
            self.items.append(("", "", Text("the wrapper calls every kernel below; "
                                            "select a kernel to see where it came from", "dim")))
            return
        head = Text.assemble(inert_text(k.name, "bold"), (f"  {k.kind}", "dim"))
        if k.ir_nodes:
            head.append(f"   IR nodes: {', '.join(k.ir_nodes[:10])}", style="dim")
            if len(k.ir_nodes) > 10:
                head.append(f" +{len(k.ir_nodes) - 10}", style="dim")
        self.items.append(("", "", head))
        if judged is not None:
            self.items.append(("", "", kernel_numerics_line(judged)))
        for n in wrong or []:
            src = n.source or {}
            t = Text.assemble(("wrong   ", "bold red"), inert_text(n.node, "red"),
                              inert_text(f"  compiled↔fp64 {n.err_compiled:.3g}, eager "
                                         f"{n.err_eager:.3g}   " if n.err_compiled is not None
                                         and n.err_eager is not None else "  "))
            if src.get("file"):
                t.append_text(inert_text(f"{Path(str(src.get('file'))).name}:{src.get('line')}  ",
                                         "green"))
                t.append_text(inert_text(str(src.get("code") or "").strip(), "italic"))
                if self.wrong_line is None:
                    self.wrong_line = len(self.items)
                self.items.append(("source", f"{src.get('file')}\x00{src.get('line')}", t))
            else:
                self.items.append(("fx", n.node, t))
        if k.launch:
            self.items.append(("", "", Text.assemble(("launch  ", "bold cyan"),
                                                     launch_text(k.launch))))
        if k.original_aten:
            self.items.append(("", "", Text("aten: " + ", ".join(k.original_aten), "dim")))
        for s in k.source:
            t = Text.assemble(("source  ", "bold green"),
                              (f"{Path(str(s.get('file'))).name}:{s.get('line')}", "green"),
                              f"  in {s.get('fn')}   ",
                              (str(s.get("code") or "").strip(), "italic"))
            self.items.append(("source", f"{s.get('file')}\x00{s.get('line')}", t))
        if not k.source:
            self.items.append(("", "", Text("source  no user source line recorded", "dim")))
        for n in k.fx_nodes:
            self.items.append(("fx", n, Text.assemble(("fx node ", "bold magenta"), n)))
        if not k.fx_nodes:
            self.items.append(("", "", Text("fx node none recorded", "dim")))

    def __len__(self) -> int:
        return len(self.items)

    def plain(self, i: int) -> str:
        return self.items[i][2].plain

    def rich(self, i: int) -> Text:
        return self.items[i][2]
