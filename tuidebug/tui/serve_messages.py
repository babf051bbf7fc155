"""What a browser may send ``tuidebug serve`` over its websocket, checked before it is used.

textual-serve's page sends JSON envelopes: ``["stdin", text]``, ``["resize", {"width",
"height"}]``, ``["ping", data]``, ``["blur"]``, ``["focus"]``. Anything can reach the socket (a
script, not the page), so each message is read as untrusted: not JSON, nested too deep, a wrong
shape, more than :data:`MAX_MESSAGE` characters or a screen bigger than :data:`MAX_COLS` ×
:data:`MAX_ROWS` is refused — dropped, never a traceback on the server's terminal.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from tuidebug.trace.format import safefile

MAX_MESSAGE = 256 * 1024  # characters of one message (keys, a paste)
MAX_COLS = 1000
MAX_ROWS = 500
MAX_PING = 200  # characters of a ping's payload echoed back


@dataclass(frozen=True)
class ClientMessage:
    kind: str  # stdin, resize, ping, blur, focus
    text: str = ""  # stdin: the keys; ping: the payload
    width: int = 0  # resize
    height: int = 0


def screen_size(width: Any, height: Any) -> tuple[int, int] | None:
    """(width, height) when both are whole numbers of a screen this server draws; else None."""
    if type(width) is not int or type(height) is not int:
        return None
    if not (1 <= width <= MAX_COLS and 1 <= height <= MAX_ROWS):
        return None
    return width, height


def client_message(data: Any) -> ClientMessage | None:
    """The message a websocket text frame carries, or None when it is refused."""
    if not isinstance(data, str) or len(data) > MAX_MESSAGE:
        return None
    try:
        envelope = safefile.loads(data)
    except ValueError:
        return None
    if not isinstance(envelope, list) or not envelope or not isinstance(envelope[0], str):
        return None
    kind, rest = envelope[0], envelope[1:]
    if kind == "stdin" and len(rest) == 1 and isinstance(rest[0], str):
        return ClientMessage("stdin", text=rest[0])
    if kind == "resize" and len(rest) == 1 and isinstance(rest[0], dict):
        size = screen_size(rest[0].get("width"), rest[0].get("height"))
        return ClientMessage("resize", width=size[0], height=size[1]) if size else None
    if kind == "ping" and len(rest) == 1 and isinstance(rest[0], (str, int, float)) \
            and not isinstance(rest[0], bool) and len(str(rest[0])) <= MAX_PING:
        return ClientMessage("ping", text=str(rest[0]))
    if kind in ("blur", "focus"):
        return ClientMessage(kind)
    return None
