"""The TUI as a web page: ``tuidebug serve TRACE`` through textual-serve.

Each browser tab that connects gets its own app process (``python -m tuidebug.tui.serve
--child TRACE``) driven over a websocket. The server listens on loopback unless another address
is named; it answers only requests whose ``Host`` (on loopback) and websocket ``Origin`` name the
server itself, so that another web page in the same browser cannot drive it (DNS rebinding,
cross-site websockets); at most ``max_sessions`` app processes run at once. Without
``allow_run`` the app runs nothing (no recompile, worker, minify or bisect): a served trace is
only viewed. The page is tuidebug's own template (``serve_templates/``): every asset it loads,
the font included, comes from this server, never from another host (a cluster without internet
would wait on that request).
"""

from __future__ import annotations

import asyncio
import ipaddress
import os
import shlex
import signal
import socket
import sys
from pathlib import Path
from typing import Any, Callable
from urllib.parse import urlsplit

from tuidebug import proc
from tuidebug.errors import ServeError
from tuidebug.trace.format.safefile import to_int
from tuidebug.tui.serve_messages import MAX_COLS, MAX_ROWS, client_message, screen_size

LOOPBACK_NAMES = {"localhost", "127.0.0.1", "::1"}
CHILD_FLAG = "--child"
JOB_FLAG = "--job"
TEMPLATES = Path(__file__).parent / "serve_templates"


def is_loopback(host: str) -> bool:
    if host in LOOPBACK_NAMES:
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def free_port(host: str) -> int:
    """A port nothing listens on now at ``host`` (the OS's choice)."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])


def child_command(trace: Path, *, allow_run: bool, job: Path | None = None) -> str:
    """The shell command textual-serve runs for each browser session (``job``: the distributed
    job ``trace`` is a rank of; the session opens on its ranks screen)."""
    cmd = [sys.executable, "-m", "tuidebug.tui.serve", CHILD_FLAG, str(trace.resolve())]
    if allow_run:
        cmd.append("--allow-run")
    if job is not None:
        cmd += [JOB_FLAG, str(job.resolve())]
    return shlex.join(cmd)


def _host_name(value: str) -> str:
    """``host`` of a ``Host`` header value (``host:port``, ``[::1]:port``)."""
    return (urlsplit(f"//{value}").hostname or "").lower()


def request_allowed(host_header: str | None, origin: str | None, *, bound: str) -> str | None:
    """None when a request may be served, else why not. Served on loopback, the ``Host`` must
    be a loopback name (a rebound DNS name is refused); a websocket's ``Origin``, when sent,
    must be the ``Host`` itself: the page was served by this server (also through a forwarded
    port)."""
    host = (host_header or "").strip().lower()
    if is_loopback(bound) and _host_name(host) not in LOOPBACK_NAMES:
        return f"host {host_header!r} is not this server"
    if origin is not None and urlsplit(origin.strip().lower()).netloc != host:
        return f"origin {origin!r} is not this server"
    return None


TESTING_ONLY_TITLE = "[TESTING-ONLY]"


def page_title(trace: Path, job: Path | None = None) -> str:
    """The page's title (the browser tab's, and the start dialog's): ``tuidebug — NAME`` (the
    trace's folder, or the job's), after ``[TESTING-ONLY]`` when the trace's config sets a
    ``*_TESTING_ONLY`` flag — a planted bug, as the title bar of every screen says."""
    from tuidebug.inert import inert
    from tuidebug.trace.format.reader import Trace
    from tuidebug.trace.queries.numerics import testing_only_flags

    title = f"tuidebug — {inert((job or trace).name, multiline=False, limit=100)}"
    return f"{TESTING_ONLY_TITLE} {title}" if testing_only_flags(Trace(trace)) else title


def make_server(trace: Path, *, host: str, port: int, allow_run: bool,
                max_sessions: int = 4, on_ready: Callable[[str], None] | None = None,
                job: Path | None = None) -> Any:
    """A textual-serve ``Server`` for ``trace`` with the checks above."""
    try:
        from aiohttp import web
        from textual_serve.server import Server
    except ImportError as e:
        raise ServeError(f"serving needs textual-serve ({e}); install it with: "
                         "pip install textual-serve") from None

    url_host = f"[{host}]" if ":" in host else host

    class TraceServer(Server):  # type: ignore[misc]
        sessions = 0

        async def _make_app(self) -> Any:
            app = await super()._make_app()
            app.middlewares.append(self._guard)
            return app

        @web.middleware
        async def _guard(self, request: Any, handler: Any) -> Any:
            why = request_allowed(request.headers.get("Host"), request.headers.get("Origin"),
                                  bound=host)
            if why:
                raise web.HTTPForbidden(text=f"tuidebug serve: {why}\n")
            if request.path != "/ws":
                return await handler(request)
            size = screen_size(to_int(request.query.get("width", "80")),
                               to_int(request.query.get("height", "24")))
            if size is None:
                raise web.HTTPBadRequest(text="tuidebug serve: width and height must be a "
                                              f"screen of at most {MAX_COLS}×{MAX_ROWS}\n")
            if TraceServer.sessions >= max_sessions:
                raise web.HTTPServiceUnavailable(
                    text=f"tuidebug serve: {max_sessions} sessions are open already\n")
            TraceServer.sessions += 1
            try:
                return await handler(request)
            finally:
                TraceServer.sessions -= 1

        async def _process_messages(self, websocket: Any, app_service: Any) -> None:
            """textual-serve's message loop, with every message checked first
            (``serve_messages``): a malformed one is dropped, never a traceback."""
            from aiohttp import WSMsgType

            async for message in websocket:
                if message.type != WSMsgType.TEXT:
                    continue
                m = client_message(message.data)
                if m is None:
                    continue
                if m.kind == "stdin":
                    await app_service.send_bytes(m.text.encode("utf-8", "replace"))
                elif m.kind == "resize":
                    await app_service.set_terminal_size(m.width, m.height)
                elif m.kind == "ping":
                    await websocket.send_json(["pong", m.text])
                elif m.kind == "blur":
                    await app_service.blur()
                elif m.kind == "focus":
                    await app_service.focus()

        async def on_startup(self, app: Any) -> None:
            pass  # (textual-serve prints its logo here)

        async def handle_index(self, request: Any) -> Any:
            # the page's websocket goes back to the address the browser used (the name of a
            # machine served on 0.0.0.0, a forwarded port), so that its Origin is its Host
            self.public_url = f"http://{request.host}"
            return await super().handle_index(request)

        def serve(self, debug: bool = False) -> None:
            """textual-serve's ``serve``, announcing the URL once the socket listens (aiohttp
            calls ``print`` then), not before: a port in use is an error, never a URL."""
            self.debug = debug
            self.initialize_logging()
            loop = asyncio.new_event_loop()
            for sig in (signal.SIGINT, signal.SIGTERM):
                try:
                    loop.add_signal_handler(sig, self.request_exit)
                except NotImplementedError:
                    pass
            web.run_app(self._make_app(), host=self.host, port=self.port, handle_signals=False,
                        loop=loop, print=lambda *_: on_ready and on_ready(self.public_url))

        def initialize_logging(self) -> None:  # textual-serve's rich log: only warnings
            import logging

            logging.getLogger("textual-serve").setLevel(logging.WARNING)
            logging.getLogger("aiohttp.access").setLevel(logging.WARNING)

    return TraceServer(child_command(trace, allow_run=allow_run, job=job), host=host, port=port,
                       title=page_title(trace, job), public_url=f"http://{url_host}:{port}",
                       templates_path=TEMPLATES)


def serve(trace: Path, *, host: str = "127.0.0.1", port: int = 0, allow_run: bool = False,
          max_sessions: int = 4, on_ready: Callable[[str], None] | None = None,
          job: Path | None = None) -> None:
    """Serve ``trace`` (a rank of distributed ``job``: on the ranks screen) until interrupted.
    ``port`` 0: a free one."""
    if port == 0:
        try:
            port = free_port(host)
        except OSError as e:
            raise ServeError(f"cannot listen on {host}: {e.strerror or e}") from e
    # the app processes (textual-serve starts them with this environment) import this
    # checkout's tuidebug, wherever the server was started from
    os.environ["PYTHONPATH"] = proc.child_env()["PYTHONPATH"]
    server = make_server(trace, host=host, port=port, allow_run=allow_run,
                         max_sessions=max_sessions, on_ready=on_ready, job=job)
    try:
        server.serve()
    except OSError as e:
        raise ServeError(f"cannot listen on {host}:{port}: {e.strerror or e}") from e


def _child(argv: list[str]) -> int:
    """One browser session: the app on the trace, under textual's web driver."""
    allow_run = "--allow-run" in argv
    job = Path(argv[argv.index(JOB_FLAG) + 1]) if JOB_FLAG in argv else None
    paths = [a for i, a in enumerate(argv)
             if not a.startswith("--") and (i == 0 or argv[i - 1] != JOB_FLAG)]
    # what the session writes (an exported SVG, before it goes to the browser) goes to a folder
    # of its own, never into the directory the server was started from
    import shutil
    import tempfile

    from tuidebug.trace.format.reader import Trace
    from tuidebug.tui.app import TuidebugApp

    work = tempfile.mkdtemp(prefix="tuidebug-serve-")
    os.chdir(work)
    try:
        app = TuidebugApp(Trace(Path(paths[0])), allow_run=allow_run, prewarm=allow_run,
                          job=job, start="ranks" if job is not None else "overview")
        app.run()
    finally:
        os.chdir("/")
        shutil.rmtree(work, ignore_errors=True)
    return int(app.return_code or 0)


if __name__ == "__main__" and sys.argv[1:2] == [CHILD_FLAG]:
    sys.exit(_child(sys.argv[2:]))
