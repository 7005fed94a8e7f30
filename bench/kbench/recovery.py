"""Crash recovery through the daemon: how long after `kill -9` of a worker mid-turn its
session is back (the restarted worker has loaded the record and the daemon has sent
`_kestrel/worker/restarted`), and when the client's pending prompt is answered. Driven
through a real `kestrel acp` client, as an editor would."""

import json
import os
import select
import signal
import subprocess
import time
from pathlib import Path

from .agents import Kestrel, clean_env
from .measure import BenchError, ScriptedServer, run_process, tool_step

WAIT_S = 30.0


class AcpClient:
    """A `kestrel acp` process spoken to in JSON-RPC lines."""

    def __init__(self, kestrel: Path, env: dict, cwd: Path):
        self.proc = subprocess.Popen([str(kestrel), "acp"], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                                     env=env, cwd=cwd)
        self.next_id = 1
        self.buffer = b""

    def send(self, message: dict):
        self.proc.stdin.write((json.dumps(message) + "\n").encode())
        self.proc.stdin.flush()

    def request(self, method: str, params: dict) -> int:
        request_id = self.next_id
        self.next_id += 1
        self.send({"jsonrpc": "2.0", "id": request_id, "method": method, "params": params})
        return request_id

    def read(self, deadline: float) -> dict:
        while b"\n" not in self.buffer:
            left = deadline - time.monotonic()
            ready, _, _ = select.select([self.proc.stdout], [], [], max(left, 0))
            if not ready:
                raise BenchError("kestrel acp: no message in time")
            chunk = os.read(self.proc.stdout.fileno(), 65536)
            if not chunk:
                raise BenchError("kestrel acp closed its output")
            self.buffer += chunk
        line, self.buffer = self.buffer.split(b"\n", 1)
        return json.loads(line)

    def until(self, matches, what: str) -> dict:
        deadline = time.monotonic() + WAIT_S
        while True:
            message = self.read(deadline)
            if matches(message):
                return message
            if time.monotonic() > deadline:
                raise BenchError(f"timed out waiting for {what}")

    def call(self, method: str, params: dict) -> dict:
        request_id = self.request(method, params)
        answer = self.until(lambda m: m.get("id") == request_id and "method" not in m, method)
        if "error" in answer:
            raise BenchError(f"{method}: {answer['error']}")
        return answer["result"]

    def close(self):
        self.proc.stdin.close()
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


def _one_restart(ctx, run: int):
    """One session mid-turn, its worker killed: (ms to restarted, ms to the prompt's answer)."""
    home = ctx.work / f"home-recovery-{run}"
    cwd = ctx.work / f"work-recovery-{run}"
    cwd.mkdir(parents=True, exist_ok=True)
    steps = [tool_step("shell", {"command": "sleep 30"})]
    with ScriptedServer(ctx.scripted_model, steps, ctx.work) as server:
        Kestrel.configure(home, server.base_url)
        env = clean_env(KESTREL_HOME=home)
        client = AcpClient(ctx.kestrel, env, cwd)
        try:
            # Opted in (session.notices): it waits for `_kestrel/worker/restarted`.
            opt_in = {"session": {"notices": {}}}
            client.call("initialize", {"protocolVersion": 1, "clientCapabilities": opt_in})
            session = client.call("session/new", {"cwd": str(cwd), "mcpServers": []})["sessionId"]
            client.call("session/set_mode", {"sessionId": session, "modeId": "yolo"})
            prompt = client.request("session/prompt", {
                "sessionId": session, "prompt": [{"type": "text", "text": "run it"}]})
            client.until(lambda m: m.get("method") == "session/update"
                         and m["params"]["update"].get("sessionUpdate") == "tool_call", "the tool call")
            status = client.call("_kestrel/daemon/status", {})
            pid = next(s["workerPid"] for s in status["sessions"] if s["sessionId"] == session)
            killed = time.monotonic()
            os.kill(pid, signal.SIGKILL)
            answered = restarted = None
            while answered is None or restarted is None:
                message = client.read(killed + WAIT_S)
                now = time.monotonic()
                if message.get("id") == prompt and "method" not in message:
                    answered = (now - killed) * 1000
                if message.get("method") == "_kestrel/worker/restarted":
                    restarted = (now - killed) * 1000
            return restarted, answered
        finally:
            client.close()
            stopped = run_process([str(ctx.kestrel), "daemon", "stop"], env=env, cwd=ctx.work, timeout=30)
            if stopped.exit_code != 0:
                raise BenchError(f"kestrel daemon stop: {stopped.stderr.strip()[-200:]}")


def restart(ctx):
    restarted, answered = [], []
    for run in range(ctx.runs):
        took_restart, took_answer = _one_restart(ctx, run)
        restarted.append(took_restart)
        answered.append(took_answer)
    ctx.results.add("recovery", "worker kill -9 mid-turn → session back", restarted, "ms",
                    "until `_kestrel/worker/restarted`: new worker, initialize, session/load of the record")
    ctx.results.add("recovery", "worker kill -9 mid-turn → pending prompt answered", answered, "ms",
                    "stopReason cancelled, sent once the record is loaded")
