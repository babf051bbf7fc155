"""DOT ids, strings and HTML labels from untrusted trace data: the one place they are escaped.

Node names, module paths and kernel names come from a trace (docs/security.md). Written into a
DOT file unescaped they can end a quoted string and add attributes (``URL="javascript:…"``,
which ``dot -Tsvg`` turns into an ``xlink:href``), use a ``:`` that python-graphviz reads as a
port (the part after a second ``:`` is written unquoted), or make the file unparsable.

- ``dot_id`` — a node or cluster id: every character outside a small safe set is
  percent-encoded (injective, so distinct names stay distinct ids; never a ``:``).
- ``dot_string`` — an attribute value (tooltip, plain label, SVG ``id``) or a subgraph name
  (quoted whole by graphviz, never split at ``:``): control characters shown visibly,
  backslashes, quotes and newlines escaped, never read as an HTML label.
- ``html`` — text inside an HTML-like label we build (``html_label`` marks the whole label).
- ``dot_attrs`` — a node's, edge's or cluster's attributes ready for graphviz: URL attributes
  dropped, every value escaped unless it is an ``html_label``.
"""

from __future__ import annotations

import html as _html
import re
from typing import Any

from graphviz import nohtml

from tuidebug.inert import inert

# attributes that make a link or name a file in the output: never set from trace data
URL_ATTRS = frozenset({"href", "url", "xlink:href", "target", "labelurl", "labelhref",
                       "headurl", "headhref", "tailurl", "tailhref", "edgeurl", "edgehref",
                       "labeltarget", "headtarget", "tailtarget", "edgetarget", "image",
                       "imagepath", "shapefile", "fontpath", "stylesheet"})
_ID_SAFE = re.compile(r"[^A-Za-z0-9_@/.#=+\-]")


class HtmlLabel(str):
    """An HTML-like label built here from escaped parts (``html_label``): written as is."""


def dot_id(name: Any) -> str:
    """A DOT id for ``name``: characters outside ``[A-Za-z0-9_@/.#=+-]`` percent-encoded."""
    return _ID_SAFE.sub(lambda m: "".join(f"%{b:02X}" for b in m.group().encode("utf-8")),
                        str(name)) or "%"


def dot_string(value: Any) -> str:
    """An attribute value: shown as written (controls visible), never markup or an escape."""
    text = inert(value, multiline=True)
    text = text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")
    return nohtml(text.replace("\t", " "))


def html(value: Any) -> str:
    """Text for inside an HTML-like label: markup characters escaped, controls visible."""
    return _html.escape(inert(value, multiline=False), quote=True)


def html_label(body: str) -> HtmlLabel:
    """``<body>`` as an HTML-like label; every piece of data in ``body`` went through ``html``."""
    return HtmlLabel(f"<{body}>")


def dot_attrs(attrs: dict[str, Any]) -> dict[str, str]:
    """Attributes for graphviz: URL attributes dropped, every value escaped (``HtmlLabel`` values
    are kept as built)."""
    out: dict[str, str] = {}
    for key, value in attrs.items():
        if key.lower() in URL_ATTRS or value is None:
            continue
        out[key] = value if isinstance(value, HtmlLabel) else dot_string(value)
    return out
