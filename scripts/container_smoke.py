"""Build the image and smoke-test it the way an MCP client uses it: stdio, read-only, offline.

Steps (each failure exits non-zero with the reason):
1. pick a container engine: $CONTAINER_ENGINE if set; else docker when its daemon answers;
   else the workspace's podman wrapper (../shared/tools/podman-local) when present, after
   its idempotent `setup`; else podman when it answers. With none, the step prints
   SKIPPED loudly and exits 0, except under CI=true or REQUIRE_CONTAINER=1, where it fails.
2. `--build`: build Containerfile into the image tag (default governed-evidence:ci).
3. check the image's configured user, then run `id` in it: uid and gid must be 10001.
4. run the image with `-i --read-only --network none` (podman also without its default
   tmpfs mounts, so nothing at all is writable) and speak MCP JSON-RPC over stdin/stdout:
   initialize, notifications/initialized, tools/list, a search that finds a cited
   passage, a search that abstains with NO_RELEVANT_CONTEXT, index_status (the statistics
   cache must report that it lives in memory, the index being read-only) and, when the
   statistics tools exist, one statistics call that must fail as a clear tool error
   without a network. Every stdout line must be JSON-RPC; stderr (JSON logs) is shown
   only on failure.
5. run the image again in team mode (`serve --transport http --host 0.0.0.0 --auth tokens`),
   read-only, published on 127.0.0.1 only, with a tokens file issued on the host by the
   project's CLI (.venv/bin/governed-evidence, else one on PATH) and mounted read-only:
   /health answers, a search over MCP with the bearer token returns a cited passage at the
   image's ceiling (the token's clearance is higher), a request without the token or with a
   wrong one gets 401, a foreign Host gets 421; then the container is stopped and must exit
   from its SIGTERM, not be killed. Neither the token nor the query may appear in its logs.
6. `--build` again: remove the untagged images the build left (the builder stage, and a
   previous build's image once the tag has moved on), found by the label both stages of the
   Containerfile set (`governed-evidence.stage`), whether the smoke test passed or not;
   `--keep-build-cache` leaves them, for quicker rebuilds while iterating on the image.

Only the standard library is used, so any python3 can run it.
"""

from __future__ import annotations

import argparse
import json
import os
import queue
import shlex
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
PODMAN_LOCAL = ROOT.parent / "shared" / "tools" / "podman-local"
EXPECTED_UID = "10001"
DOCUMENT_TOOLS = {"search_documents", "read_passage", "list_sources", "index_status"}
ANSWERABLE = "What is the standing charge on a metered water bill?"
UNANSWERABLE = "Can I bring my dog to the office?"
TIMEOUT_S = 180.0
#: Set by both stages of the Containerfile on every image they leave behind.
STAGE_LABEL = "governed-evidence.stage"
#: Team mode: the port the image EXPOSEs, and where the tokens folder is mounted read-only.
HTTP_PORT = 8000
TOKENS_DIR = "/run/governed-evidence"


class SmokeError(Exception):
    pass


def _answers(cmd: list[str]) -> bool:
    try:
        return subprocess.run(cmd, capture_output=True, timeout=60, check=False).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False


def pick_engine() -> tuple[list[str], str] | None:
    """(engine command, kind) where kind is docker | podman | podman-local."""
    forced = os.environ.get("CONTAINER_ENGINE", "").strip()
    if forced:
        cmd = shlex.split(forced)
        kind = "podman-local" if cmd[0].endswith("podman-local") else Path(cmd[0]).name
        return cmd, kind
    if shutil.which("docker") and _answers(["docker", "info"]):
        return ["docker"], "docker"
    # podman installed by the wrapper's setup cannot run containers here without the
    # wrapper's flags, so the wrapper goes first when this workspace provides it.
    if PODMAN_LOCAL.is_file() and os.access(PODMAN_LOCAL, os.X_OK):
        return [str(PODMAN_LOCAL)], "podman-local"
    if shutil.which("podman") and _answers(["podman", "info"]):
        return ["podman"], "podman"
    return None


def sh(cmd: list[str], **kwargs: Any) -> subprocess.CompletedProcess[str]:
    print("$ " + " ".join(shlex.quote(c) for c in cmd), flush=True)
    return subprocess.run(cmd, text=True, check=False, **kwargs)


def build(engine: list[str], kind: str, image: str) -> None:
    if kind == "podman-local":
        done = sh([*engine, "setup"], capture_output=True)
        if done.returncode != 0:
            raise SmokeError(f"podman-local setup failed:\n{done.stderr}")
        # The wrapper passes --build-arg BASE_IMAGE=<its local Debian base>.
        cmd = [*engine, "build", "-f", "Containerfile", "-t", image, "."]
    else:
        cmd = [*engine, "build", "-f", "Containerfile", "-t", image, "."]
        if os.environ.get("BASE_IMAGE"):
            cmd[2:2] = ["--build-arg", f"BASE_IMAGE={os.environ['BASE_IMAGE']}"]
    if sh(cmd, cwd=ROOT).returncode != 0:
        raise SmokeError("image build failed")


def image_size(engine: list[str], image: str) -> str:
    done = sh([*engine, "image", "inspect", "--format", "{{.Size}}", image], capture_output=True)
    size = done.stdout.strip()
    return f"{int(size) / 1e6:.0f} MB" if done.returncode == 0 and size.isdigit() else "unknown"


def prune_build_leftovers(engine: list[str]) -> str:
    """Remove the untagged images labelled by the Containerfile (never a tagged one)."""
    done = sh([*engine, "image", "prune", "--force", "--filter", f"label={STAGE_LABEL}"], capture_output=True)
    if done.returncode != 0:
        return f"could not remove the build's untagged images: {done.stderr.strip()}"
    removed = [line for line in done.stdout.splitlines() if line.strip()]
    return f"removed the untagged images labelled {STAGE_LABEL} (builder stage, earlier builds): {len(removed)}"


def check_user(engine: list[str], kind: str, image: str) -> str:
    inspect = sh([*engine, "image", "inspect", "--format", "{{.Config.User}}", image], capture_output=True)
    if inspect.returncode != 0:
        raise SmokeError(f"cannot inspect {image}: {inspect.stderr.strip()}")
    configured = inspect.stdout.strip()
    if configured.split(":")[0] != EXPECTED_UID:
        raise SmokeError(f"image user is {configured!r}, expected {EXPECTED_UID}:{EXPECTED_UID}")
    ident = sh([*engine, "run", "--rm", *_locked_down(kind), "--entrypoint", "id", image], capture_output=True)
    if ident.returncode != 0:
        raise SmokeError(f"`id` in the image failed: {ident.stderr.strip()}")
    out = ident.stdout.strip()
    if not out.startswith(f"uid={EXPECTED_UID}(") or f" gid={EXPECTED_UID}(" not in out:
        raise SmokeError(f"container runs as {out!r}, expected uid/gid {EXPECTED_UID}")
    return f"image user {configured}; id: {out}"


def _locked_down(kind: str) -> list[str]:
    flags = ["--read-only", "--network", "none"]
    if kind in ("podman", "podman-local"):
        flags.append("--read-only-tmpfs=false")  # podman adds writable /tmp, /run otherwise
    return flags


class Server:
    """The containerised server on a pipe; reads stdout lines on a thread."""

    def __init__(self, cmd: list[str]) -> None:
        print("$ " + " ".join(shlex.quote(c) for c in cmd), flush=True)
        self.proc = subprocess.Popen(
            cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, bufsize=1
        )
        self.lines: queue.Queue[str | None] = queue.Queue()
        self.stderr: list[str] = []
        threading.Thread(target=self._pump_stdout, daemon=True).start()
        threading.Thread(target=self._pump_stderr, daemon=True).start()

    def _pump_stdout(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.put(line)
        self.lines.put(None)

    def _pump_stderr(self) -> None:
        assert self.proc.stderr is not None
        for line in self.proc.stderr:
            self.stderr.append(line)

    def send(self, message: dict[str, Any]) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(json.dumps(message) + "\n")
        self.proc.stdin.flush()

    def reply(self, request_id: int, deadline: float) -> dict[str, Any]:
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise SmokeError(f"no reply to request {request_id} within {TIMEOUT_S:.0f} s")
            try:
                line = self.lines.get(timeout=remaining)
            except queue.Empty:
                continue
            if line is None:
                raise SmokeError(f"server closed stdout before replying to request {request_id}")
            try:
                message = json.loads(line)
            except json.JSONDecodeError:
                raise SmokeError(f"non-JSON line on stdout: {line[:200]!r}") from None
            if message.get("jsonrpc") != "2.0":
                raise SmokeError(f"stdout line is not JSON-RPC 2.0: {line[:200]!r}")
            if message.get("id") == request_id:
                return dict(message)

    def close(self) -> int:
        if self.proc.stdin is not None:
            self.proc.stdin.close()
        try:
            return self.proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            return self.proc.wait()


def _tool_result(reply: dict[str, Any], what: str) -> dict[str, Any]:
    if "error" in reply:
        raise SmokeError(f"{what}: JSON-RPC error {reply['error']}")
    result = reply["result"]
    if result.get("isError"):
        raise SmokeError(f"{what}: tool error {result.get('content')}")
    structured = result.get("structuredContent")
    if not isinstance(structured, dict):
        raise SmokeError(f"{what}: no structured content")
    return structured


def mcp_session(engine: list[str], kind: str, image: str) -> list[str]:
    transcript: list[str] = []
    server = Server([*engine, "run", "--rm", "-i", *_locked_down(kind), image])
    deadline = time.monotonic() + TIMEOUT_S
    try:
        server.send(
            {
                "jsonrpc": "2.0",
                "id": 1,
                "method": "initialize",
                "params": {
                    "protocolVersion": "2025-06-18",
                    "capabilities": {},
                    "clientInfo": {"name": "container-smoke", "version": "1"},
                },
            }
        )
        init = server.reply(1, deadline)["result"]
        info = init["serverInfo"]
        transcript.append(
            f"-> initialize\n   <- {info['name']} {info.get('version', '?')}, protocol {init['protocolVersion']}"
        )
        server.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
        transcript.append("-> notifications/initialized")

        server.send({"jsonrpc": "2.0", "id": 2, "method": "tools/list"})
        tools = {t["name"]: t for t in server.reply(2, deadline)["result"]["tools"]}
        missing = DOCUMENT_TOOLS - set(tools)
        if missing:
            raise SmokeError(f"tools/list lacks {sorted(missing)}")
        not_read_only = [n for n, t in tools.items() if not (t.get("annotations") or {}).get("readOnlyHint")]
        if not_read_only:
            raise SmokeError(f"tools not annotated read-only: {not_read_only}")
        transcript.append(f"-> tools/list\n   <- {len(tools)} tools, all read-only: {', '.join(sorted(tools))}")

        server.send(_search(3, ANSWERABLE))
        found = _tool_result(server.reply(3, deadline), "search")
        if found.get("status") != "OK" or not found.get("results"):
            raise SmokeError(f"search for an answerable question returned {found.get('status')}: {found.get('reason')}")
        top = found["results"][0]
        if found.get("search_mode") != "hybrid" or found.get("ceiling") != "public":
            raise SmokeError(f"unexpected mode/ceiling: {found.get('search_mode')}/{found.get('ceiling')}")
        if top.get("classification") != "public" or not top.get("citation_id") or not top.get("notice"):
            raise SmokeError(f"top result lacks citation, notice or is above the ceiling: {top}")
        transcript.append(
            f"-> search_documents({ANSWERABLE!r})\n"
            f"   <- OK, {len(found['results'])} result(s), mode {found['search_mode']}, ceiling {found['ceiling']}; "
            f"top: {top['citation_id']} ({top['classification']}, {top['matched_by']}, "
            f"confidence {top['confidence']:.2f})"
        )

        server.send(_search(4, UNANSWERABLE))
        abstained = _tool_result(server.reply(4, deadline), "abstention")
        if abstained.get("status") != "NO_RELEVANT_CONTEXT" or abstained.get("results"):
            raise SmokeError(f"expected NO_RELEVANT_CONTEXT, got {abstained.get('status')}")
        transcript.append(
            f"-> search_documents({UNANSWERABLE!r})\n   <- NO_RELEVANT_CONTEXT: {abstained.get('reason')}"
        )

        server.send({"jsonrpc": "2.0", "id": 5, "method": "tools/call", "params": {"name": "index_status"}})
        status = _tool_result(server.reply(5, deadline), "index_status")
        if not status.get("ok") or status.get("semantic_search") != "available":
            raise SmokeError(f"index_status: ok={status.get('ok')} semantic_search={status.get('semantic_search')}")
        visible = f"{status.get('passages')} visible passages"
        line = f"-> index_status\n   <- ok, integrity {status.get('integrity')}, {visible}"
        cache = status.get("statistics_cache")
        if isinstance(cache, dict):
            if cache.get("location") != "memory" or cache.get("persistent"):
                raise SmokeError(f"read-only image should keep the statistics cache in memory: {cache}")
            line += f"; statistics cache: {cache['location']} ({cache.get('reason')})"
        transcript.append(line)

        if "search_datasets" in tools:
            # Statistics need the network; without one the answer must be a clear tool error.
            server.send(_call(6, "search_datasets", {"query": "unemployment rate"}))
            reply = server.reply(6, deadline)
            result = reply.get("result") or {}
            text = " ".join(c.get("text", "") for c in result.get("content", []))
            if not result.get("isError") or "internal error" in text or not text:
                raise SmokeError(f"statistics without a network should be a clear tool error, got {reply}")
            transcript.append(f"-> search_datasets('unemployment rate')  [--network none]\n   <- tool error: {text}")
    except (SmokeError, KeyError, TypeError) as exc:
        server.close()
        sys.stderr.write("".join(server.stderr[-40:]))
        raise SmokeError(f"MCP session failed: {exc!r}") from None
    code = server.close()
    leftover: list[str] = []
    while not server.lines.empty():
        extra = server.lines.get()
        if extra is not None and extra.strip():
            leftover.append(extra)
    if leftover:
        raise SmokeError(f"unexpected stdout after the last reply: {leftover[:3]}")
    if code != 0:
        sys.stderr.write("".join(server.stderr[-40:]))
        raise SmokeError(f"server exited with {code} after stdin closed")
    if any(UNANSWERABLE in line or ANSWERABLE in line for line in server.stderr):
        raise SmokeError("query text leaked into the server's logs")
    transcript.append(f"   (stdin closed; server exited {code}; {len(server.stderr)} JSON log lines on stderr)")
    return transcript


def _host_cli() -> list[str]:
    """The project's CLI on the host, which issues the token the container is given."""
    venv = ROOT / ".venv" / "bin" / "governed-evidence"
    if venv.is_file() and os.access(venv, os.X_OK):
        return [str(venv)]
    found = shutil.which("governed-evidence")
    if found:
        return [found]
    raise SmokeError("team mode needs the project's CLI on the host to issue a token: run `make install` first")


def _issue_token(folder: Path, name: str, clearance: str) -> str:
    env = {k: v for k, v in os.environ.items() if not k.startswith("GOVERNED_EVIDENCE_")}
    cmd = [*_host_cli(), "token", "create", "--name", name, "--clearance", clearance]
    done = sh([*cmd, "--tokens-file", str(folder / "tokens.json"), "--json"], capture_output=True, env=env, timeout=120)
    if done.returncode != 0:
        raise SmokeError(f"`token create` failed: {done.stderr.strip()}")
    try:
        token = json.loads(done.stdout)["token"]
    except (json.JSONDecodeError, KeyError, TypeError):
        raise SmokeError("`token create --json` printed no token") from None
    if not isinstance(token, str) or not token.startswith("ge_"):
        raise SmokeError("`token create --json` printed something that is not a token")
    return token


def _readable_by_the_image(folder: Path) -> str:
    """Let the image's user (uid 10001) read the tokens folder: ``token create`` writes 0600."""
    if os.geteuid() == 0:  # docker, or podman run by root: uids are the same inside and out
        for path in (folder, *folder.iterdir()):
            os.chown(path, int(EXPECTED_UID), int(EXPECTED_UID))
        return f"owned by {EXPECTED_UID}, mode 0600"
    # Not root: the file cannot be given to uid 10001, so it is made readable (it holds
    # hashes, not tokens; the server warns about the mode once).
    folder.chmod(0o755)
    (folder / "tokens.json").chmod(0o644)
    return "mode 0644"


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


# Straight to 127.0.0.1, whatever proxy the environment names.
_DIRECT = urllib.request.build_opener(urllib.request.ProxyHandler({}))


def _http(
    url: str, body: dict[str, Any] | None = None, *, token: str | None = None, host: str | None = None
) -> tuple[int, dict[str, str], bytes]:
    """(status, headers, body) of a GET, or of a JSON-RPC POST when ``body`` is given."""
    headers = {"Accept": "application/json, text/event-stream"}
    data = None
    if body is not None:
        data = json.dumps(body).encode("utf-8")
        headers["Content-Type"] = "application/json"
    if token is not None:
        headers["Authorization"] = f"Bearer {token}"
    if host is not None:
        headers["Host"] = host
    method = "GET" if data is None else "POST"
    # Always http://127.0.0.1:<port>/... built here, never a caller's URL.
    request = urllib.request.Request(url, data=data, headers=headers, method=method)  # noqa: S310
    try:
        with _DIRECT.open(request, timeout=60) as answer:
            return answer.status, {k.lower(): v for k, v in answer.headers.items()}, answer.read()
    except urllib.error.HTTPError as exc:
        return exc.code, {k.lower(): v for k, v in exc.headers.items()}, exc.read()


def _container_running(engine: list[str], name: str) -> bool:
    # Not through sh(): asked every half second while the server starts.
    done = subprocess.run(
        [*engine, "inspect", "--format", "{{.State.Running}}", name], capture_output=True, text=True, check=False
    )
    return done.returncode == 0 and done.stdout.strip() == "true"


def _wait_for_health(engine: list[str], name: str, base: str, deadline: float) -> dict[str, Any]:
    while time.monotonic() < deadline:
        try:
            status, _, body = _http(f"{base}/health")
        except OSError:  # not listening yet (refused, or reset by the port forwarder)
            if not _container_running(engine, name):
                raise SmokeError("the container exited before /health answered") from None
            time.sleep(0.5)
            continue
        if status != 200:
            raise SmokeError(f"/health answered {status}: {body[:200]!r}")
        try:
            return dict(json.loads(body))
        except (json.JSONDecodeError, TypeError, ValueError):
            raise SmokeError(f"/health is not a JSON object: {body[:200]!r}") from None
    raise SmokeError(f"/health did not answer within {TIMEOUT_S:.0f} s")


def http_session(engine: list[str], kind: str, image: str) -> list[str]:
    """Team mode: streamable HTTP, bearer tokens from a read-only mount, 127.0.0.1 only."""
    transcript: list[str] = []
    name = f"ge-smoke-http-{os.getpid()}"
    port = _free_port()
    base, mcp = f"http://127.0.0.1:{port}", f"http://127.0.0.1:{port}/mcp"
    read_only = ["--read-only", *(["--read-only-tmpfs=false"] if kind in ("podman", "podman-local") else [])]
    with tempfile.TemporaryDirectory(prefix="ge-smoke-tokens-") as tmp:
        folder = Path(tmp)
        # Clearance internal, above the image's ceiling (public): the ceiling must still cap it.
        token = _issue_token(folder, "container-smoke", "internal")
        transcript.append(
            f"host: token create --clearance internal -> tokens.json ({_readable_by_the_image(folder)}), "
            f"mounted read-only at {TOKENS_DIR}"
        )
        # The folder, not the file: `token revoke` replaces the file, and a file mount would
        # keep showing the container the replaced one.
        run = [*engine, "run", "-d", "--name", name, *read_only, "-p", f"127.0.0.1:{port}:{HTTP_PORT}"]
        # 0.0.0.0 inside the container only: the engine publishes the port on 127.0.0.1.
        run += ["-v", f"{folder}:{TOKENS_DIR}:ro", image, "--transport", "http", "--host", "0.0.0.0"]  # noqa: S104
        run += ["--port", str(HTTP_PORT), "--auth", "tokens", "--tokens-file", f"{TOKENS_DIR}/tokens.json"]
        started = sh(run, capture_output=True)
        if started.returncode != 0:
            raise SmokeError(f"cannot start the container in HTTP mode: {started.stderr.strip()}")
        transcript.append(f"$ run -d {' '.join(run[run.index('--read-only') :]).replace(str(folder), '<tokens>')}")
        logs = ""
        try:
            health = _wait_for_health(engine, name, base, time.monotonic() + TIMEOUT_S)
            if health != {"status": "ok"}:
                raise SmokeError(f"/health said {health}")
            transcript.append(f"-> GET /health (no credential)\n   <- 200 {json.dumps(health)}")

            # Stateless mode: a tools/call stands alone, no initialize before it.
            status, _, body = _http(mcp, _search(1, ANSWERABLE), token=token)
            if status != 200:
                raise SmokeError(f"search over HTTP with the token answered {status}: {body[:300]!r}")
            found = _tool_result(json.loads(body), "search over HTTP")
            results = found.get("results") or []
            if found.get("status") != "OK" or not results:
                raise SmokeError(f"search over HTTP returned {found.get('status')}: {found.get('reason')}")
            top = results[0]
            if found.get("ceiling") != "public" or top.get("classification") != "public":
                raise SmokeError(f"the image's ceiling (public) did not cap an internal token: {found.get('ceiling')}")
            if not top.get("citation_id") or not top.get("notice"):
                raise SmokeError(f"top result lacks citation or notice: {top}")
            transcript.append(
                f"-> POST /mcp tools/call search_documents({ANSWERABLE!r}), Bearer token (clearance internal)\n"
                f"   <- 200 OK, {len(results)} result(s), ceiling {found['ceiling']}; top: {top['citation_id']}"
            )

            for label, credential in (("no token", None), ("a wrong token", token[:-2] + "xx")):
                status, headers, _ = _http(mcp, _search(2, ANSWERABLE), token=credential)
                challenge = headers.get("www-authenticate", "")
                if status != 401 or not challenge.lower().startswith("bearer"):
                    raise SmokeError(f"with {label}: {status} {challenge!r}, expected 401 with a Bearer challenge")
                transcript.append(f"-> POST /mcp tools/call with {label}\n   <- 401, WWW-Authenticate: Bearer ...")
            status, _, _ = _http(f"{base}/health", host="evil.example")
            if status != 421:
                raise SmokeError(f"a foreign Host header got {status}, expected 421")
            transcript.append(
                f"-> GET /health, Host: evil.example\n   <- 421 (Host 127.0.0.1:{port}, a loopback name, was allowed)"
            )
        except (SmokeError, KeyError, TypeError, ValueError, OSError) as exc:
            logs = sh([*engine, "logs", name], capture_output=True).stderr
            sys.stderr.write("\n".join(logs.splitlines()[-40:]) + "\n")
            sh([*engine, "rm", "--force", name], capture_output=True)
            raise SmokeError(f"HTTP session failed: {exc!r}") from None
        try:
            done = sh([*engine, "logs", name], capture_output=True)
            logs = done.stdout + done.stderr
            sh([*engine, "stop", "--time", "30", name], capture_output=True)
            code = sh([*engine, "inspect", "--format", "{{.State.ExitCode}}", name], capture_output=True)
        finally:
            sh([*engine, "rm", "--force", name], capture_output=True)
    if token in logs or token[3:] in logs:
        raise SmokeError("the bearer token appears in the container's logs")
    if ANSWERABLE in logs:
        raise SmokeError("query text leaked into the container's logs")
    # 143: uvicorn re-raises the SIGTERM it shut down on; 0 when the process ignores it
    # (PID 1 with the default action). 137 would mean `stop` had to kill it.
    exit_code = code.stdout.strip()
    if exit_code not in ("0", "143"):
        raise SmokeError(f"the server did not stop on SIGTERM: exit code {exit_code!r}")
    lines = len(logs.splitlines())
    transcript.append(f"   (stopped: exit {exit_code} on SIGTERM; {lines} log lines, no token, no query)")
    return transcript


def _call(request_id: int, tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
    return {
        "jsonrpc": "2.0",
        "id": request_id,
        "method": "tools/call",
        "params": {"name": tool, "arguments": arguments},
    }


def _search(request_id: int, query: str) -> dict[str, Any]:
    return _call(request_id, "search_documents", {"query": query, "limit": 3})


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Build and smoke-test the container image.")
    parser.add_argument("--build", action="store_true", help="build the image first")
    parser.add_argument("--image", default="governed-evidence:ci")
    parser.add_argument(
        "--keep-build-cache",
        action="store_true",
        help="with --build: keep the untagged builder-stage images (the layer cache) instead of removing them",
    )
    args = parser.parse_args(argv)
    picked = pick_engine()
    if picked is None:
        banner = "#" * 78
        print(f"{banner}\n# CONTAINER STEP SKIPPED: no docker daemon, podman or podman-local found.\n{banner}")
        if os.environ.get("CI") == "true" or os.environ.get("REQUIRE_CONTAINER") == "1":
            print("container step is required here (CI=true or REQUIRE_CONTAINER=1): failing", file=sys.stderr)
            return 1
        return 0
    engine, kind = picked
    image = args.image if kind == "docker" or "/" in args.image else f"localhost/{args.image}"
    print(f"container engine: {kind} ({' '.join(engine)})")
    started = time.monotonic()
    try:
        if args.build:
            build(engine, kind, image)
            print(f"built {image} in {time.monotonic() - started:.0f} s; image size {image_size(engine, image)}")
        user = check_user(engine, kind, image)
        transcript = mcp_session(engine, kind, image)
        http_transcript = http_session(engine, kind, image)
    except SmokeError as exc:
        print(f"CONTAINER SMOKE FAILED: {exc}", file=sys.stderr)
        return 1
    finally:
        if args.build and not args.keep_build_cache:
            print(prune_build_leftovers(engine))
    print("\n--- container smoke transcript (stdio, --read-only, --network none) ---")
    print(user)
    print("\n".join(transcript))
    print("\n--- team mode (streamable HTTP, --read-only, published on 127.0.0.1, --auth tokens) ---")
    print("\n".join(http_transcript))
    print(f"--- container smoke passed ({time.monotonic() - started:.0f} s) ---")
    return 0


if __name__ == "__main__":
    sys.exit(main())
