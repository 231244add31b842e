"""The code-interpreter guest of the simulator's e2b-ci template.

It speaks e2b's code-interpreter protocol (the one the npm package
@e2b/code-interpreter calls on guest port 49999) over real IPython kernels
started with jupyter_client, one kernel per context. The Go side
(src/simulator/guest/codeinterp) starts it as the sandbox's user, hands it
this file on fd 3 and the access token on stdin, and ends it by closing
stdin. docs/simulator.md, "Code-interpreter guest", describes the protocol
and what it leaves out.

Threads: the HTTP server answers each connection on its own thread; every
kernel, kernel client and ZMQ socket lives on one asyncio loop thread, which
the handlers reach through run_coroutine_threadsafe, because jupyter_client's
clients are bound to the loop that made them.
"""

import ast
import asyncio
import hashlib
import hmac
import http.server
import json
import os
import queue
import select
import socket
import sys
import tempfile
import threading
import time
import uuid

from jupyter_client.manager import AsyncKernelManager

HOST = "127.0.0.1"
PORT = int(os.environ.get("SANDBOX_CI_PORT", "49999"))
# Where a context runs when its request names no cwd: the user's home, as
# on e2b.
DEFAULT_CWD = os.environ.get("HOME") or "/home/user"
# Bounds that keep one client from exhausting the sandbox: the request body
# (the code and env vars), the number of live contexts (each is a kernel of
# tens of MB), and how long an interrupted cell may take to stop before its
# kernel is replaced.
MAX_BODY_BYTES = 4 << 20
MAX_CONTEXTS = 16
INTERRUPT_GRACE_SECONDS = 10.0
KERNEL_READY_SECONDS = 60.0
# How often a waiting cell checks that its client is still there and that
# its kernel lives.
POLL_SECONDS = 0.2

# The MIME types of a display bundle and the result fields e2b names them.
MIME_FIELDS = {
    "text/plain": "text",
    "text/html": "html",
    "text/markdown": "markdown",
    "image/svg+xml": "svg",
    "image/png": "png",
    "image/jpeg": "jpeg",
    "application/pdf": "pdf",
    "text/latex": "latex",
    "application/json": "json",
    "application/javascript": "javascript",
    "e2b/data": "data",
    "e2b/chart": "chart",
}

LANGUAGE_ALIASES = {"": "python", "python": "python", "python3": "python", "py": "python"}


class HTTPError(Exception):
    def __init__(self, status, message):
        super().__init__(message)
        self.status = status
        self.message = message


def log(*args):
    print("codeinterp:", *args, file=sys.stderr, flush=True)


def normalize_language(language):
    """Returns the one language this guest has a kernel for, or raises."""
    name = (language or "").strip().lower()
    if name in LANGUAGE_ALIASES:
        return LANGUAGE_ALIASES[name]
    raise HTTPError(
        400,
        f"language {language!r} is not supported: this sandbox has a Python kernel only",
    )


# --- the access token ---------------------------------------------------


class AccessToken:
    """The envd access token requests must carry, learnt from stdin.

    Until the first line arrives nothing but /health is served (the sandbox
    is not claimed yet); an empty line turns the check off, as an empty
    token does for envd.
    """

    # The label the traffic token is derived with (envdtoken.Traffic).
    TRAFFIC_LABEL = b"e2b-traffic-access-token"

    def __init__(self):
        self._lock = threading.Lock()
        self._known = False
        self._digest = None  # None with _known: no check
        self._traffic_digest = None

    def set(self, token):
        with self._lock:
            self._known = True
            self._digest = hashlib.sha256(token.encode()).digest() if token else None
            # e2b's SDK sends the traffic token, not the access token, on
            # its context calls: hex(HMAC-SHA256(access token, label)).
            traffic = hmac.new(token.encode(), self.TRAFFIC_LABEL, hashlib.sha256).hexdigest() if token else ""
            self._traffic_digest = hashlib.sha256(traffic.encode()).digest() if token else None

    def check(self, presented, traffic=None):
        """Returns None when admitted, else (status, message).

        presented is X-Access-Token, traffic E2B-Traffic-Access-Token; the
        access token decides when it is sent."""
        with self._lock:
            known, digest, traffic_digest = self._known, self._digest, self._traffic_digest
        if not known:
            return 503, "Authentication unavailable: the sandbox is not claimed yet"
        if digest is None:
            return None
        if presented:
            got, want = hashlib.sha256(presented.encode()).digest(), digest
        else:
            got, want = hashlib.sha256((traffic or "").encode()).digest(), traffic_digest
        if not hmac.compare_digest(got, want):
            return 401, "Unauthorized: provide the sandbox's access token in X-Access-Token"
        return None


# --- kernels ------------------------------------------------------------


class Loop:
    """The asyncio loop every kernel and kernel client lives on."""

    def __init__(self):
        self.loop = asyncio.new_event_loop()
        threading.Thread(target=self.loop.run_forever, name="kernels", daemon=True).start()

    def run(self, coro, timeout=None):
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(timeout)


RESTARTED = object()  # handed to a running cell's queue when its kernel goes


def kernel_env():
    env = dict(os.environ)
    env.pop("SANDBOX_CI_PORT", None)
    # debugpy's warning about frozen modules would reach every kernel's
    # stderr on Python 3.11.
    env["PYDEVD_DISABLE_FILE_VALIDATION"] = "1"
    return env


class Context:
    """One kernel and the cells sent to it.

    lock serialises cells (a context runs one at a time, as a notebook
    does); restart and delete do not take it, they end the running cell.
    """

    def __init__(self, loop, cid, cwd):
        self.loop = loop
        self.id = cid
        self.cwd = cwd
        self.language = "python"
        self.lock = threading.Lock()
        self.generation = 0
        self._km = None
        self._kc = None
        self._pumps = []
        self._cells = {}  # msg_id → queue.Queue of iopub messages
        self._replies = {}  # msg_id → Future of the shell reply

    def describe(self):
        return {"id": self.id, "language": self.language, "cwd": self.cwd}

    # Coroutines, run on the loop.

    async def start(self):
        km = AsyncKernelManager(kernel_name="python3")
        await km.start_kernel(cwd=self.cwd, env=kernel_env())
        kc = km.client()
        kc.start_channels()
        try:
            await kc.wait_for_ready(timeout=KERNEL_READY_SECONDS)
        except Exception:
            kc.stop_channels()
            await km.shutdown_kernel(now=True)
            raise
        self._km, self._kc = km, kc
        self.generation += 1
        self._pumps = [
            asyncio.ensure_future(self._pump(kc.get_iopub_msg, self._on_iopub)),
            asyncio.ensure_future(self._pump(kc.get_shell_msg, self._on_shell)),
        ]

    async def stop(self):
        for t in self._pumps:
            t.cancel()
        self._pumps = []
        for q in self._cells.values():
            q.put(RESTARTED)
        self._cells.clear()
        for f in self._replies.values():
            if not f.done():
                f.set_exception(RuntimeError("the context's kernel was restarted"))
        self._replies.clear()
        kc, km, self._kc, self._km = self._kc, self._km, None, None
        if kc is not None:
            kc.stop_channels()
        if km is not None:
            try:
                await km.shutdown_kernel(now=True)
            except Exception as e:  # the kernel may be gone already
                log(f"context {self.id}: shutting the kernel down: {e}")

    async def restart(self):
        await self.stop()
        await self.start()

    async def _pump(self, get, handle):
        while True:
            try:
                msg = await get()
            except asyncio.CancelledError:
                raise
            except Exception as e:
                log(f"context {self.id}: reading the kernel: {e}")
                return
            handle(msg)

    def _on_iopub(self, msg):
        q = self._cells.get(msg.get("parent_header", {}).get("msg_id"))
        if q is not None:
            q.put(msg)

    def _on_shell(self, msg):
        f = self._replies.pop(msg.get("parent_header", {}).get("msg_id"), None)
        if f is not None and not f.done():
            f.set_result(msg)

    async def send_cell(self, code, q):
        if self._kc is None:
            raise HTTPError(503, f"context {self.id} has no kernel")
        # stop_on_error would make the kernel abort requests that arrive
        # just after a failing cell (the next cell, the env vars' reset)
        # without running them; cells here are sent one at a time, so there
        # is no queue of later cells it should spare.
        msg_id = self._kc.execute(code, silent=False, store_history=True, allow_stdin=False, stop_on_error=False)
        # No await since the send: the pump cannot have seen a message for
        # it yet.
        self._cells[msg_id] = q
        return msg_id

    def forget_cell(self, msg_id):
        self._cells.pop(msg_id, None)

    async def run_silent(self, code, user_expressions=None):
        """Runs code no client sees and returns the shell reply's content."""
        if self._kc is None:
            raise RuntimeError(f"context {self.id} has no kernel")
        msg_id = self._kc.execute(code, silent=True, store_history=False, allow_stdin=False,
                                  stop_on_error=False, user_expressions=user_expressions or {})
        f = asyncio.get_running_loop().create_future()
        self._replies[msg_id] = f
        msg = await asyncio.wait_for(f, KERNEL_READY_SECONDS)
        return msg["content"]

    async def read_env(self, keys):
        """The kernel's current values of keys (None: unset)."""
        expr = "__import__('json').dumps({k: __import__('os').environ.get(k) for k in %r})" % (list(keys),)
        content = await self.run_silent("", {"env": expr})
        got = content.get("user_expressions", {}).get("env", {})
        if got.get("status") != "ok":
            raise RuntimeError(f"reading the kernel's env: {got.get('ename')}: {got.get('evalue')}")
        # The expression's value is a str whose repr the kernel sends.
        return json.loads(ast.literal_eval(got["data"]["text/plain"]))

    async def interrupt(self):
        if self._km is not None:
            await self._km.interrupt_kernel()

    async def alive(self):
        return self._km is not None and await self._km.is_alive()


class Contexts:
    def __init__(self, loop):
        self.loop = loop
        self._lock = threading.Lock()
        self._all = {}
        self._default = None
        self._default_ready = None  # concurrent Future of the default's start

    def create(self, cwd):
        with self._lock:
            if len(self._all) >= MAX_CONTEXTS:
                raise HTTPError(400, f"too many contexts: a sandbox holds at most {MAX_CONTEXTS}; delete one first")
            ctx = Context(self.loop, uuid.uuid4().hex, cwd)
            self._all[ctx.id] = ctx
        try:
            self.loop.run(ctx.start(), KERNEL_READY_SECONDS + 10)
        except Exception as e:
            with self._lock:
                self._all.pop(ctx.id, None)
            raise HTTPError(400, f"failed to start a Python kernel in {cwd}: {e}") from e
        return ctx

    def start_default(self):
        """Starts the default context in the background (warm at boot)."""
        with self._lock:
            if self._default is not None and self._default.id in self._all:
                return self._default_ready
            ctx = Context(self.loop, uuid.uuid4().hex, DEFAULT_CWD)
            self._default = ctx
            self._all[ctx.id] = ctx

        async def start():
            await ctx.start()
            # Warm the data stack: the first cell that plots does not pay
            # for the imports or matplotlib's font cache. __import__ binds
            # no name in the user's namespace.
            await ctx.run_silent("__import__('numpy'); __import__('pandas'); __import__('matplotlib.pyplot')")

        self._default_ready = asyncio.run_coroutine_threadsafe(start(), self.loop.loop)
        return self._default_ready

    def default(self):
        ready = self.start_default()
        try:
            ready.result(KERNEL_READY_SECONDS + 10)
        except Exception as e:
            with self._lock:
                if self._default is not None:
                    self._all.pop(self._default.id, None)
                self._default = None
            raise HTTPError(500, f"the default Python context did not start: {e}") from e
        return self._default

    def get(self, cid):
        with self._lock:
            ctx = self._all.get(cid)
        if ctx is None:
            raise HTTPError(404, f"Context {cid} not found")
        return ctx

    def list(self):
        with self._lock:
            return [c.describe() for c in self._all.values()]

    def remove(self, cid):
        with self._lock:
            ctx = self._all.pop(cid, None)
            if ctx is self._default:
                self._default = None
        if ctx is None:
            raise HTTPError(404, f"Context {cid} not found")
        self.loop.run(ctx.stop(), KERNEL_READY_SECONDS)

    def close(self):
        with self._lock:
            all_, self._all = list(self._all.values()), {}
        for ctx in all_:
            try:
                self.loop.run(ctx.stop(), 10)
            except Exception as e:
                log(f"context {ctx.id}: {e}")


# --- turning kernel messages into e2b's output lines --------------------


def result_item(data, main):
    item = {"type": "result", "is_main_result": main}
    extra = {}
    for mime, value in data.items():
        field = MIME_FIELDS.get(mime)
        if field is None:
            extra[mime] = value
            continue
        if field == "text" and len(value) >= 2 and value[0] == value[-1] == "'":
            # A str's repr loses its quotes, as e2b's server does.
            value = value[1:-1]
        item[field] = value
    if extra:
        item["extra"] = extra
    return item


def output_item(msg):
    """The output line for one iopub message of a cell, or None."""
    kind, content = msg["msg_type"], msg["content"]
    if kind == "stream":
        name = content.get("name")
        if name in ("stdout", "stderr"):
            return {"type": name, "text": content.get("text", ""), "timestamp": stamp(msg)}
    elif kind == "execute_result":
        return result_item(content.get("data", {}), True)
    elif kind == "display_data":
        return result_item(content.get("data", {}), False)
    elif kind == "error":
        return {
            "type": "error",
            "name": content.get("ename", ""),
            "value": content.get("evalue", ""),
            "traceback": "\n".join(content.get("traceback", [])),
        }
    elif kind == "execute_input":
        return {"type": "number_of_executions", "execution_count": content.get("execution_count")}
    return None


def stamp(msg):
    date = msg.get("header", {}).get("date")
    if hasattr(date, "isoformat"):
        return date.isoformat()
    return date or time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


def env_code(values):
    """Code that sets the variables in values (None deletes) in os.environ."""
    return (
        "__import__('os').environ.update({k: v for k, v in %(v)s.items() if v is not None});"
        "[__import__('os').environ.pop(k, None) for k, v in %(v)s.items() if v is None]"
    ) % {"v": repr(values)}


# --- HTTP ---------------------------------------------------------------


class ClientGone(Exception):
    pass


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "e2b-code-interpreter-sim"
    # A streamed cell is many small writes (a chunk's size line, its data,
    # its end): with Nagle's algorithm each waits for the client's delayed
    # ACK, about 40 ms a cell. Every write here is meant to leave at once.
    disable_nagle_algorithm = True
    # Set on the class by main().
    token = None
    contexts = None

    def log_message(self, fmt, *args):
        pass  # a request log per cell would swamp the sandbox's output

    def do_GET(self):
        self._route("GET")

    def do_POST(self):
        self._route("POST")

    def do_DELETE(self):
        self._route("DELETE")

    def _route(self, method):
        path = self.path.split("?", 1)[0].rstrip("/") or "/"
        try:
            if method == "GET" and path == "/health":
                # Unauthenticated, as e2b's: the health probe carries no token.
                self._read_body()
                return self._json(200, "OK")
            refused = self.token.check(self.headers.get("X-Access-Token"),
                                       self.headers.get("E2B-Traffic-Access-Token"))
            if refused is not None:
                self._read_body()
                raise HTTPError(*refused)
            parts = path.strip("/").split("/")
            if method == "POST" and path == "/execute":
                return self._execute(self._read_json())
            if parts[0] == "contexts":
                if method == "POST" and len(parts) == 1:
                    return self._create_context(self._read_json())
                if method == "GET" and len(parts) == 1:
                    self._read_body()
                    return self._json(200, self.contexts.list())
                if method == "DELETE" and len(parts) == 2:
                    self._read_body()
                    self.contexts.remove(parts[1])
                    return self._json(200, None)
                if method == "POST" and len(parts) == 3 and parts[2] == "restart":
                    self._read_body()
                    ctx = self.contexts.get(parts[1])
                    self.contexts.loop.run(ctx.restart(), KERNEL_READY_SECONDS + 10)
                    return self._json(200, None)
            self._read_body()
            raise HTTPError(404, f"no route for {method} {path}")
        except HTTPError as e:
            self._text(e.status, e.message)
        except ClientGone:
            self.close_connection = True
        except Exception as e:  # a bug or a kernel failure: say so, keep serving
            log(f"{method} {path}: {e!r}")
            try:
                self._text(500, f"internal error: {e}")
            except OSError:
                self.close_connection = True

    # Bodies.

    def _read_body(self):
        if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
            self.close_connection = True
            raise HTTPError(411, "send the body with a Content-Length")
        try:
            n = int(self.headers.get("Content-Length") or 0)
        except ValueError:
            self.close_connection = True
            raise HTTPError(400, "malformed Content-Length")
        if n > MAX_BODY_BYTES:
            self.close_connection = True
            raise HTTPError(413, f"request body over {MAX_BODY_BYTES} bytes")
        return self.rfile.read(n) if n > 0 else b""

    def _read_json(self):
        raw = self._read_body()
        if not raw.strip():
            return {}
        try:
            body = json.loads(raw)
        except ValueError:
            raise HTTPError(400, "malformed JSON body")
        if not isinstance(body, dict):
            raise HTTPError(400, "the body must be a JSON object")
        return body

    # Answers.

    def _send(self, status, ctype, data):
        self.send_response(status)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _json(self, status, value):
        self._send(status, "application/json", json.dumps(value).encode())

    def _text(self, status, message):
        self._send(status, "text/plain; charset=utf-8", message.encode())

    # Routes.

    def _create_context(self, body):
        language = normalize_language(body.get("language"))
        cwd = body.get("cwd") or DEFAULT_CWD
        if not isinstance(cwd, str) or not os.path.isdir(cwd):
            raise HTTPError(400, f"cwd {cwd!r} is not a directory in the sandbox")
        ctx = self.contexts.create(cwd)
        ctx.language = language
        self._json(200, ctx.describe())

    def _execute(self, body):
        code = body.get("code")
        if not isinstance(code, str):
            raise HTTPError(400, "code must be a string")
        cid, language = body.get("context_id"), body.get("language")
        if cid and language:
            raise HTTPError(400, "Only one of context_id or language can be provided")
        env_vars = body.get("env_vars") or {}
        if not isinstance(env_vars, dict) or not all(
            isinstance(k, str) and isinstance(v, str) for k, v in env_vars.items()
        ):
            raise HTTPError(400, "env_vars must be an object of strings")
        if cid:
            ctx = self.contexts.get(cid)
        else:
            normalize_language(language)
            ctx = self.contexts.default()
        with ctx.lock:
            self._run_cell(ctx, code, env_vars)

    def _run_cell(self, ctx, code, env_vars):
        loop = self.contexts.loop
        generation = ctx.generation
        saved = None
        if env_vars:
            # The cell's variables apply to it only: the values they
            # replace, read in the kernel first, are put back after it.
            saved = loop.run(ctx.read_env(sorted(env_vars)), KERNEL_READY_SECONDS)
            reply = loop.run(ctx.run_silent(env_code(env_vars)), KERNEL_READY_SECONDS)
            if reply.get("status") != "ok":
                raise HTTPError(500, "could not set the cell's env vars in the kernel")
        q = queue.Queue()
        msg_id = loop.run(ctx.send_cell(code, q), 10)
        try:
            self._stream(ctx, q)
        finally:
            ctx.forget_cell(msg_id)
            if saved is not None and ctx.generation == generation:
                try:
                    reply = loop.run(ctx.run_silent(env_code(saved)), KERNEL_READY_SECONDS)
                    if reply.get("status") != "ok":
                        log(f"context {ctx.id}: restoring env vars: {reply.get('ename')}: {reply.get('evalue')}")
                except Exception as e:
                    log(f"context {ctx.id}: restoring env vars: {e}")

    def _stream(self, ctx, q):
        self.send_response(200)
        self.send_header("Content-Type", "application/x-ndjson")
        self.send_header("Transfer-Encoding", "chunked")
        self.send_header("Cache-Control", "no-store")
        self.end_headers()
        loop = self.contexts.loop
        gone = False
        interrupted_at = None
        last_alive_check = time.monotonic()
        while True:
            try:
                msg = q.get(timeout=POLL_SECONDS)
            except queue.Empty:
                msg = None
            if msg is RESTARTED:
                if not gone:
                    self._emit_safe({"type": "error", "name": "ContextRestarting",
                                     "value": "Context was restarted", "traceback": ""})
                break
            if msg is not None:
                if msg["msg_type"] == "status" and msg["content"].get("execution_state") == "idle":
                    break
                item = output_item(msg)
                if item is not None and not gone:
                    gone = not self._emit_safe(item)
            now = time.monotonic()
            if not gone and msg is None and self._client_gone():
                gone = True
            if gone and interrupted_at is None:
                # The SDK's timeout is its own: it drops the connection.
                # The cell is interrupted so the context stays usable.
                interrupted_at = now
                try:
                    loop.run(ctx.interrupt(), 10)
                except Exception as e:
                    log(f"context {ctx.id}: interrupt: {e}")
            if interrupted_at is not None and now - interrupted_at > INTERRUPT_GRACE_SECONDS:
                log(f"context {ctx.id}: the cell ignored the interrupt; restarting its kernel")
                loop.run(ctx.restart(), KERNEL_READY_SECONDS + 10)
                break
            if msg is None and now - last_alive_check > 1.0:
                last_alive_check = now
                if not loop.run(ctx.alive(), 10):
                    if not gone:
                        self._emit_safe({"type": "error", "name": "KernelDied",
                                         "value": "the kernel died during the execution; the context was restarted",
                                         "traceback": ""})
                    loop.run(ctx.restart(), KERNEL_READY_SECONDS + 10)
                    break
        if gone:
            raise ClientGone()
        if self._emit_safe({"type": "end_of_execution"}):
            try:
                self.wfile.write(b"0\r\n\r\n")
            except OSError:
                raise ClientGone()

    def _emit_safe(self, item):
        data = (json.dumps(item, ensure_ascii=False) + "\n").encode()
        try:
            self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
            return True
        except OSError:
            return False

    def _client_gone(self):
        """Whether the client closed its end while the cell runs."""
        try:
            readable, _, _ = select.select([self.connection], [], [], 0)
            if not readable:
                return False
            # Readable with data is a pipelined request; with none, EOF.
            return self.connection.recv(1, socket.MSG_PEEK) == b""
        except (OSError, ValueError):
            return True


class Server(http.server.ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True
    request_queue_size = 128


def main():
    # Connection files go to a private directory on the sandbox's tmpfs,
    # not into the user's home on its disk.
    os.environ["JUPYTER_RUNTIME_DIR"] = tempfile.mkdtemp(prefix="jupyter-runtime-")
    token = AccessToken()
    loop = Loop()
    contexts = Contexts(loop)
    Handler.token, Handler.contexts = token, contexts
    srv = Server((HOST, PORT), Handler)
    threading.Thread(target=srv.serve_forever, name="http", daemon=True).start()
    # "listening" is the machine's sign that the code interpreter is up;
    # it is sent once the default kernel has started and imported the
    # data stack, so a warm sandbox's first cell starts no kernel. A
    # kernel that does not start still lets the server answer (its cells
    # report the failure).
    try:
        contexts.start_default().result(KERNEL_READY_SECONDS + 10)
    except Exception as e:
        log(f"the default kernel did not start: {e}")
    print("listening", flush=True)

    # stdin: the access token, one line (empty: no check), possibly replaced
    # later; its end is the end of the guest.
    for line in sys.stdin:
        token.set(line.rstrip("\n"))
    srv.shutdown()
    contexts.close()


if __name__ == "__main__":
    main()
