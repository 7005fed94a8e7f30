"""One daemon, thousands of sessions (issue 13). The daemon is started at a soft open-file
limit of 1,024 (it raises its own to the hard limit), N sessions are opened through one
client on the daemon's socket, and the bench records: what each idle worker and the
daemon hold (descriptors, memory, threads) and spend (CPU, wake-ups); a burst of N
prompts against the Rust scripted model (latency percentiles, throughput); the same
burst again with 5% of the workers SIGKILLed in the middle (every prompt answered, every
killed session restarted, every record parsing, no prompt sent to the model twice); and
the spread of one session's updates over 10 attached clients. Sizes N/2 and N alternate
run by run, so per-session costs are also given as the slope between them.

    KBENCH_SCALE_SESSIONS=200 python3 bench/run.py --only scale --runs 1   # a quick look
"""

import json
import os
import random
import re
import resource
import selectors
import socket
import statistics
import subprocess
import time
from pathlib import Path

from .agents import clean_env
from .measure import BenchError, run_process

GROUP = "scale"
SESSIONS = int(os.environ.get("KBENCH_SCALE_SESSIONS", "2000"))
SOFT_LIMIT = 1024
IDLE_S = 10.0
SETTLE_S = 12.0
KILLED_SHARE = 0.05
FANOUT_CLIENTS = 10
KERNEL_STACK_MB = 16 / 1024
FANOUT_WORDS = 500
WAIT_S = 600.0
PROMPT = re.compile(r"(burst|chaos) prompt number (\d+)\.")


class Connection:
    """A client of the daemon's socket, JSON-RPC lines; messages it was not waiting for
    are kept in `backlog`."""

    def __init__(self, path: Path):
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.connect(str(path))
        self.buffer = b""
        self.next_id = 1
        self.backlog = []

    def send_many(self, messages: list):
        self.sock.sendall(b"".join((json.dumps(m) + "\n").encode() for m in messages))

    def new_request(self, method: str, params: dict) -> dict:
        """A request with the next id, to be sent with `send_many`."""
        message = {"jsonrpc": "2.0", "id": self.next_id, "method": method, "params": params}
        self.next_id += 1
        return message

    def receive(self, timeout: float) -> list:
        """Whatever whole lines arrive within `timeout` (at least one read), parsed."""
        self.sock.settimeout(timeout)
        try:
            chunk = self.sock.recv(1 << 20)
        except socket.timeout:
            return []
        if not chunk:
            raise BenchError("the daemon closed the connection")
        return self.take_lines(chunk)

    def take_lines(self, chunk: bytes) -> list:
        self.buffer += chunk
        *lines, self.buffer = self.buffer.split(b"\n")
        return [json.loads(line) for line in lines if line.strip()]

    def call(self, method: str, params: dict, timeout: float = 60.0) -> dict:
        message = self.new_request(method, params)
        self.send_many([message])
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for answer in self.receive(deadline - time.monotonic()):
                if answer.get("id") == message["id"] and "method" not in answer:
                    if "error" in answer:
                        raise BenchError(f"{method}: {answer['error'].get('message')}")
                    return answer["result"]
                self.backlog.append(answer)
        raise BenchError(f"no answer to {method} within {timeout:.0f} s")

    def close(self):
        self.sock.close()


def _initialized(path: Path) -> Connection:
    connection = Connection(path)
    # Opted in (session.notices): it waits for `_kestrel/session/turn` and
    # `_kestrel/worker/restarted`, which plain ACP clients are not sent.
    opt_in = {"session": {"notices": {}}}
    connection.call("initialize", {"protocolVersion": 1, "clientCapabilities": opt_in})
    return connection


class Server:
    """`scripted-model` with a request log (to count what reached the model)."""

    def __init__(self, binary: Path, steps: list, work: Path, name: str):
        self.script = work / f"{name}-script.json"
        self.log = work / f"{name}-requests.jsonl"
        self.script.write_text(json.dumps({"steps": steps}))
        self.proc = subprocess.Popen([str(binary), "--script", str(self.script), "--log", str(self.log)],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=subprocess.DEVNULL)
        line = self.proc.stdout.readline().decode().strip()
        if not line.startswith("listening "):
            self.close()
            raise BenchError(f"scripted-model did not start: {line!r}")
        self.base_url = line.split(" ", 1)[1]

    def close(self):
        self.proc.stdin.close()
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self.proc.stdout.close()


def _proc_status(pid: int, field: str) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    return 0


def _pss_kb(pid: int) -> int:
    for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines():
        if line.startswith("Pss:"):
            return int(line.split()[1])
    return 0


def _cpu_and_wakeups(pids: list) -> dict:
    """Per process: CPU ticks (user + sys) and, per thread, context switches."""
    found = {}
    for pid in pids:
        try:
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
            threads = {}
            for task in os.listdir(f"/proc/{pid}/task"):
                text = Path(f"/proc/{pid}/task/{task}/status").read_text()
                threads[task] = sum(int(line.split()[1]) for line in text.splitlines()
                                    if "ctxt_switches" in line)
            found[pid] = (int(fields[11]) + int(fields[12]), threads)
        except (OSError, IndexError, ValueError):
            continue
    return found


def _spent(before: dict, after: dict, pids: list) -> tuple:
    """CPU ticks and context switches of `pids` between two samples (threads that ended
    meanwhile not counted; new ones from zero)."""
    ticks = switches = 0
    for pid in pids:
        if pid not in before or pid not in after:
            continue
        ticks += after[pid][0] - before[pid][0]
        switches += sum(count - before[pid][1].get(task, 0) for task, count in after[pid][1].items())
    return ticks, switches


def _mem_available_kb() -> int:
    for line in Path("/proc/meminfo").read_text().splitlines():
        if line.startswith("MemAvailable:"):
            return int(line.split()[1])
    return 0


def _open_files_soft(pid: int) -> str:
    for line in Path(f"/proc/{pid}/limits").read_text().splitlines():
        if line.startswith("Max open files"):
            return line.split()[3]
    return "?"


def _percentile(values: list, share: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(share * len(ordered)))]


def _configure(home: Path, burst_url: str, fanout_url: str):
    home.mkdir(parents=True, exist_ok=True)
    (home / "config.toml").write_text(
        'model = "scripted/test-model"\n'
        f'[providers.scripted]\nbase_url = "{burst_url}"\nwire_api = "chat"\n'
        f'[providers.fanout]\nbase_url = "{fanout_url}"\nwire_api = "chat"\n')


def _start_daemon(kestrel: Path, env: dict, work: Path) -> int:
    hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
    limit = (SOFT_LIMIT, hard) if hard == resource.RLIM_INFINITY or hard >= SOFT_LIMIT else (hard, hard)
    started = subprocess.run([str(kestrel), "daemon", "start"], env=env, cwd=work, capture_output=True,
                             text=True, timeout=60,
                             preexec_fn=lambda: resource.setrlimit(resource.RLIMIT_NOFILE, limit))
    if started.returncode != 0:
        raise BenchError(f"kestrel daemon start: {started.stderr.strip()[-300:]}")
    return int((Path(env["KESTREL_HOME"]) / "run" / "daemon.pid").read_text().split()[0])


def _answers(connection: Connection, ids: dict, deadline: float, on_answer=None) -> dict:
    """Reads until every request id in `ids` (id → index) is answered: index → (time, answer)."""
    answered = {}
    while len(answered) < len(ids):
        if time.monotonic() > deadline:
            raise BenchError(f"{len(ids) - len(answered)} of {len(ids)} requests unanswered")
        for message in connection.receive(1.0):
            index = ids.get(message.get("id")) if "method" not in message else None
            if index is None:
                connection.backlog.append(message)
                continue
            answered[index] = (time.monotonic(), message)
            if on_answer:
                on_answer(len(answered))
    return answered


def _open_sessions(connection: Connection, n: int, cwd: Path) -> tuple:
    requests = [connection.new_request("session/new", {"cwd": str(cwd), "mcpServers": []}) for _ in range(n)]
    started = time.monotonic()
    connection.send_many(requests)
    answered = _answers(connection, {r["id"]: i for i, r in enumerate(requests)}, started + WAIT_S)
    took = time.monotonic() - started
    sessions = []
    for index in range(n):
        answer = answered[index][1]
        if "error" in answer:
            raise BenchError(f"session/new {index}: {answer['error'].get('message')}")
        sessions.append(answer["result"]["sessionId"])
    return sessions, took


def _burst(connection: Connection, sessions: list, label: str, on_answer=None) -> tuple:
    requests = [connection.new_request("session/prompt", {
        "sessionId": session, "prompt": [{"type": "text", "text": f"{label} prompt number {i}."}]})
        for i, session in enumerate(sessions)]
    started = time.monotonic()
    connection.send_many(requests)
    answered = _answers(connection, {r["id"]: i for i, r in enumerate(requests)}, started + WAIT_S,
                        on_answer)
    latencies = [answered[i][0] - started for i in range(len(sessions))]
    return latencies, [answered[i][1] for i in range(len(sessions))], time.monotonic() - started


def _chaos(connection: Connection, sessions: list) -> dict:
    """The burst again, with KILLED_SHARE of the workers SIGKILLed once a tenth is answered."""
    status = connection.call("_kestrel/daemon/status", {})
    pids = {s["sessionId"]: s["workerPid"] for s in status["sessions"]}
    victims = set(random.Random(13).sample(range(len(sessions)), max(1, int(len(sessions) * KILLED_SHARE))))
    killed = []

    def kill_once(count):
        if count >= len(sessions) // 10 and not killed:
            for index in victims:
                try:
                    os.kill(pids[sessions[index]], 9)
                    killed.append(index)
                except (KeyError, ProcessLookupError, TypeError):
                    pass

    _, answers, _ = _burst(connection, sessions, "chaos", kill_once)
    reasons = {}
    for index, answer in enumerate(answers):
        reason = answer.get("result", {}).get("stopReason") if "result" in answer else "error"
        reasons[reason] = reasons.get(reason, 0) + 1
        if index not in victims and reason != "end_turn":
            raise BenchError(f"chaos: session {index} was not killed but answered {reason}")
    restarted = set()
    wanted = {sessions[index] for index in killed}
    deadline = time.monotonic() + WAIT_S
    while not wanted <= restarted:
        if time.monotonic() > deadline:
            raise BenchError(f"chaos: {len(wanted - restarted)} killed sessions never announced a restart")
        for message in connection.backlog + connection.receive(1.0):
            if message.get("method") == "_kestrel/worker/restarted":
                restarted.add(message["params"]["sessionId"])
        connection.backlog = []
    return {"killed": len(killed), "restarted": len(wanted & restarted), "reasons": reasons}


def _fanout(socket_path: Path, cwd: Path) -> list:
    """One session, FANOUT_CLIENTS attached clients, a streamed answer: per update, the
    time between the first and the last client receiving it (ms)."""
    driver = _initialized(socket_path)
    meta = {"kestrel": {"model": "fanout/test-model"}}
    session = driver.call("session/new", {"cwd": str(cwd), "mcpServers": [], "_meta": meta})["sessionId"]
    clients = [driver]
    for _ in range(FANOUT_CLIENTS - 1):
        observer = _initialized(socket_path)
        observer.call("session/load", {"sessionId": session, "cwd": str(cwd), "mcpServers": []})
        clients.append(observer)
    arrivals = [[] for _ in clients]
    selector = selectors.DefaultSelector()
    for index, client in enumerate(clients):
        client.sock.setblocking(False)
        selector.register(client.sock, selectors.EVENT_READ, index)
    prompt = driver.new_request("session/prompt", {"sessionId": session,
                                               "prompt": [{"type": "text", "text": "stream it"}]})
    driver.sock.setblocking(True)
    driver.send_many([prompt])
    driver.sock.setblocking(False)
    ended = set()
    deadline = time.monotonic() + WAIT_S
    while len(ended) < len(clients):
        if time.monotonic() > deadline:
            raise BenchError("fan-out: the turn's end did not reach every client")
        # Every ready client is read and stamped before anything is parsed.
        received = []
        for key, _ in selector.select(timeout=1.0):
            received.append((key.data, clients[key.data].sock.recv(1 << 20), time.monotonic()))
        for index, chunk, now in received:
            if not chunk:
                raise BenchError("fan-out: a client was disconnected")
            for message in clients[index].take_lines(chunk):
                update = message.get("params", {}).get("update", {})
                if update.get("sessionUpdate") == "agent_message_chunk":
                    arrivals[index].append(now)
                if message.get("method") == "_kestrel/session/turn" and not message["params"]["running"]:
                    ended.add(index)
    for client in clients:
        client.close()
    counts = {len(times) for times in arrivals}
    if len(counts) != 1 or not arrivals[0]:
        raise BenchError(f"fan-out: clients saw different numbers of updates: {sorted(counts)}")
    return [(max(times) - min(times)) * 1000 for times in zip(*arrivals)]


def _records(home: Path) -> tuple:
    """(records, records with a line that does not parse)."""
    records = broken = 0
    for path in (home / "sessions").rglob("*.jsonl"):
        if path.name == "index.jsonl":
            continue
        records += 1
        for line in path.read_text().splitlines():
            try:
                json.loads(line)
            except ValueError:
                broken += 1
                break
    return records, broken


def _sent_twice(log: Path) -> int:
    """Prompts that reached the model in more than one request (each request counted for
    its last prompt: the earlier ones are history)."""
    seen = {}
    for line in log.read_text().splitlines():
        matches = PROMPT.findall(line)
        if matches:
            seen[matches[-1]] = seen.get(matches[-1], 0) + 1
    return sum(1 for count in seen.values() if count > 1)


def _one_run(ctx, n: int, run: int) -> dict:
    work = ctx.work / f"scale-{n}-{run}"
    home, cwd = work / "home", work / "cwd"
    cwd.mkdir(parents=True, exist_ok=True)
    words = " ".join(f"w{i}" for i in range(FANOUT_WORDS))
    burst = Server(ctx.scripted_model, [{"reply": {"text": "ok"}}] * (2 * n + 10), work, "burst")
    fanout = Server(ctx.scripted_model, [{"reply": {"text": words},
                                          "fault": {"kind": "slow_chunks", "delay_ms": 2}}], work, "fanout")
    _configure(home, burst.base_url, fanout.base_url)
    env = clean_env(KESTREL_HOME=home, KESTREL_CATALOG_URL="off")
    try:
        daemon = _start_daemon(ctx.kestrel, env, work)
        socket_path = home / "run" / "daemon.sock"
        files_before = len(os.listdir(f"/proc/{daemon}/fd"))
        connection = _initialized(socket_path)
        sessions, open_s = _open_sessions(connection, n, cwd)
        # Past tokio's blocking-pool keep-alive (10 s): the threads an idle worker keeps.
        time.sleep(SETTLE_S)
        status = connection.call("_kestrel/daemon/status", {})
        workers = [s["workerPid"] for s in status["sessions"] if s["workerPid"]]
        out = {"open_s": open_s, "limit": _open_files_soft(daemon),
               "files_per_worker": (len(os.listdir(f"/proc/{daemon}/fd")) - files_before - 1) / n,
               "daemon_rss_mb": _proc_status(daemon, "VmRSS") / 1024,
               "pss_mb": sum(_pss_kb(pid) for pid in workers) / len(workers) / 1024,
               "threads": statistics.median(_proc_status(pid, "Threads") for pid in workers),
               "page_tables_mb": sum(_proc_status(pid, "VmPTE") for pid in workers) / len(workers) / 1024}
        before = _cpu_and_wakeups([daemon] + workers)
        time.sleep(IDLE_S)
        after = _cpu_and_wakeups([daemon] + workers)
        tick_ms = 1000 / os.sysconf("SC_CLK_TCK")
        daemon_ticks, out["idle_daemon_wakeups"] = _spent(before, after, [daemon])
        out["idle_daemon_cpu_ms"] = daemon_ticks * tick_ms
        worker_ticks, out["idle_workers_wakeups"] = _spent(before, after, workers)
        out["idle_workers_cpu_ms"] = worker_ticks * tick_ms
        latencies, answers, took = _burst(connection, sessions, "burst")
        not_ended = sum(1 for answer in answers if answer.get("result", {}).get("stopReason") != "end_turn")
        if not_ended:
            raise BenchError(f"burst: {not_ended} of {n} prompts did not end with end_turn")
        out.update(burst_s=took, p50_ms=_percentile(latencies, 0.5) * 1000,
                   p99_ms=_percentile(latencies, 0.99) * 1000, throughput=n / took)
        out["chaos"] = _chaos(connection, sessions)
        out["fanout_ms"] = _fanout(socket_path, cwd)
        connection.close()
    finally:
        stopped = run_process([str(ctx.kestrel), "daemon", "stop"], env=env, cwd=work, timeout=180)
        burst.close()
        fanout.close()
    if stopped.exit_code != 0:
        raise BenchError(f"kestrel daemon stop: {stopped.stderr.strip()[-300:]}")
    out["records"], out["broken_records"] = _records(home)
    out["sent_twice"] = _sent_twice(burst.log)
    return out


def group(ctx):
    sizes = (SESSIONS // 2, SESSIONS)
    runs = max(1, min(ctx.runs, 3))
    by_size = {size: [] for size in sizes}
    for run in range(runs):
        for size in (sizes if run % 2 == 0 else sizes[::-1]):
            print(f"bench: scale: {size} sessions (run {run + 1}/{runs})", flush=True)
            by_size[size].append(_one_run(ctx, size, run))
    _report(ctx, by_size, sizes)


def _report(ctx, by_size: dict, sizes: tuple):
    r, small, n = ctx.results, by_size[sizes[0]], by_size[sizes[1]]
    g = f"{GROUP} ({sizes[1]} live sessions, one daemon)"

    def values(key, runs=n):
        return [run[key] for run in runs]

    r.add(g, f"open {sizes[1]} sessions (session/new pipelined on one client)", values("open_s"), "s",
          f"until every answer; daemon soft open-file limit {n[0]['limit']} (started at {SOFT_LIMIT}, "
          f"raised by the daemon to the hard limit)")
    r.add(g, "daemon descriptors per worker", values("files_per_worker"), "",
          "the worker's socket (stdin and stdout); it was 3 before (two pipes and a pidfd)")
    r.add(g, f"daemon RSS with {sizes[1]} sessions", values("daemon_rss_mb"), "MB", "budget ≤ 64 MB")
    r.add(g, "daemon RSS per extra session", [(b["daemon_rss_mb"] - a["daemon_rss_mb"]) * 1024 /
          (sizes[1] - sizes[0]) for a, b in zip(small, n)], "kB",
          f"slope between {sizes[0]} and {sizes[1]} sessions, paired runs")
    r.add(g, "Pss per idle worker", values("pss_mb"), "MB", "smaps_rollup of every worker / N, after "
          f"the last session opened and {SETTLE_S:.0f} s of rest; budget ≤ 1.5 MB")
    r.add(g, "threads per idle worker", values("threads"), "", "median over the workers")
    daemon_per_session = [(b["daemon_rss_mb"] - a["daemon_rss_mb"]) / (sizes[1] - sizes[0])
                          for a, b in zip(small, n)]
    r.add(g, "memory per session", [run["pss_mb"] + run["page_tables_mb"] + run["threads"] * KERNEL_STACK_MB
                                    + daemon for run, daemon in zip(n, daemon_per_session)], "MB",
          "the worker's Pss, page tables (VmPTE) and kernel stacks (16 KiB a thread), and the "
          "daemon's RSS per extra session")
    r.add(g, f"idle {IDLE_S:.0f} s: daemon CPU", values("idle_daemon_cpu_ms"), "ms", "user + sys")
    r.add(g, f"idle {IDLE_S:.0f} s: daemon context switches", values("idle_daemon_wakeups"), "",
          "all its threads")
    r.add(g, f"idle {IDLE_S:.0f} s: CPU of all workers", values("idle_workers_cpu_ms"), "ms", "summed")
    r.add(g, f"idle {IDLE_S:.0f} s: context switches of all workers", values("idle_workers_wakeups"), "",
          "summed over every thread of every worker")
    r.add(g, f"burst of {sizes[1]} prompts: all answered", values("burst_s"), "s",
          "one prompt to every session at once, instant scripted model (Rust), one client")
    r.add(g, "burst: p50 prompt latency", values("p50_ms"), "ms", "send to answer")
    r.add(g, "burst: p99 prompt latency", values("p99_ms"), "ms", "budget ≤ 5,000 ms")
    r.add(g, "burst: throughput", values("throughput"), "prompts/s")
    chaos = [run["chaos"] for run in n]
    r.add(g, "chaos burst: workers SIGKILLed", [c["killed"] for c in chaos], "",
          f"{KILLED_SHARE:.0%} of the workers, random, once a tenth of the burst was answered")
    r.add(g, "chaos burst: killed sessions restarted and announced", [c["restarted"] for c in chaos], "",
          "`_kestrel/worker/restarted` for each; every prompt answered: "
          + "; ".join(", ".join(f"{k} {v}" for k, v in sorted(c["reasons"].items(), key=str)) for c in chaos))
    r.add(g, "records whose every line parses", [run["records"] - run["broken_records"] for run in n], "",
          f"of {n[0]['records']} (all sessions, after both bursts and the kills)")
    r.add(g, "prompts sent to the model more than once", values("sent_twice"), "",
          "from the scripted model's request log")
    spreads = [spread for run in n for spread in run["fanout_ms"]]
    r.add(g, f"update fan-out to {FANOUT_CLIENTS} clients: p50", [_percentile(run["fanout_ms"], 0.5) for run in n],
          "ms", f"per update of a {FANOUT_WORDS}-word streamed answer, last client minus first; "
          f"{len(spreads)} updates in all")
    r.add(g, f"update fan-out to {FANOUT_CLIENTS} clients: p99", [_percentile(run["fanout_ms"], 0.99) for run in n],
          "ms", "budget ≤ 1 ms (with the other sessions open and idle)")
    _limits(ctx, n, r.find(g, "memory per session").median)


def _limits(ctx, n: list, memory: float):
    pid_max = int(Path("/proc/sys/kernel/pid_max").read_text())
    threads_max = int(Path("/proc/sys/kernel/threads-max").read_text())
    hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
    threads = statistics.median(run["threads"] for run in n)
    available = _mem_available_kb() / 1024
    ctx.results.notes.append(
        f"Limits on this machine: pid_max {pid_max} (each worker is {threads:g} tasks: "
        f"~{pid_max // max(threads, 1):.0f} workers), threads-max {threads_max}, hard open-file limit "
        f"{'unlimited' if hard == resource.RLIM_INFINITY else hard} (one per worker in the daemon), "
        f"MemAvailable {available / 1024:.1f} GiB (~{available / max(memory, 0.01):.0f} sessions at "
        f"{memory:.2f} MB each).")
    ctx.results.notes.append(
        f"10,000 sessions would need: kernel.pid_max above {10_000 * threads + 2_000:.0f} "
        f"(the default 32768 allows ~{32_768 // max(threads, 1):.0f} workers), a hard open-file "
        f"limit of at least {10_000 + 64} (LimitNOFILE), and about {10_000 * memory / 1024:.1f} GiB "
        f"of memory.")
