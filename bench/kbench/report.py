"""The machine, the noise while measuring, the budgets of issue 7, and the Markdown entry
appended to bench/RESULTS.md."""

import datetime
import os
import platform
import subprocess
import threading
import time
from pathlib import Path

# (label, (group, measure) of the row that decides it, budget, unit)
BUDGETS = [
    ("TUI first paint, daemon up", ("tui", "first paint (daemon up)"), 5.0, "ms"),
    ("TUI input-ready, daemon up", ("tui", "input-ready (daemon up)"), 10.0, "ms"),
    # Keys typed at start-up and the shell tool's cost per call (issue 16).
    ("TUI text typed at first output, on screen", ("tui", "typed at first output, on screen (daemon up)"),
     5.0, "ms"),
    ("TUI typed text after the first frame", ("tui", "typed at first output, after the first frame (daemon up)"),
     1.0, "ms"),
    ("shell call overhead", ("tools (in-process, via the registry)",
                             "shell call overhead: per call, vs `bash -c true`"), 5.0, "ms"),
    ("idle RSS of the process tree", ("tui", "idle RSS of the tree with a worker, after 1 turn"), 20.0, "MB"),
    ("release binary", ("build", "release binary (target/release/kestrel)"), 15.0, "MB"),
    ("turn overhead, CPU per round trip", ("exec (chat)", "per round trip: CPU"), 2.0, "ms"),
    ("replay of a 100k-item record", ("store API (in-process)", "replay_open: 100000 items"), 300.0, "ms"),
    ("listing 10k sessions", ("sessions (10000 on disk)", "kestrel sessions: wall"), 100.0, "ms"),
    # The swarm's targets (its issue): orchestration with an instant model.
    ("swarm: per task, 2k files", ("swarm (orchestration, instant model)",
                                   "2000 files, workdir on disk: wall per task"), 1.0, "s"),
    ("swarm: per task, 20k files", ("swarm (orchestration, instant model)",
                                    "20000 files, workdir on disk: wall per task"), 4.0, "s"),
    ("swarm: orchestrator peak RSS, 200 tasks × 32", ("swarm (200 tasks, --max-parallel 32, 2000 files)",
                                                      "workdir on tmpfs: orchestrator peak RSS"), 30.0, "MB"),
    ("swarm status of a 10k-event run", ("swarm status (10000 events)", "1250 tasks, table: wall"), 50.0, "ms"),
    # One daemon, thousands of sessions (issue 13).
    ("scale: daemon RSS, 2,000 sessions", ("scale (2000 live sessions, one daemon)",
                                           "daemon RSS with 2000 sessions"), 64.0, "MB"),
    ("scale: Pss per idle worker", ("scale (2000 live sessions, one daemon)", "Pss per idle worker"), 1.5, "MB"),
    ("scale: burst of 2,000 prompts, p99", ("scale (2000 live sessions, one daemon)",
                                            "burst: p99 prompt latency"), 5000.0, "ms"),
    ("scale: update fan-out to 10 clients, p99", ("scale (2000 live sessions, one daemon)",
                                                  "update fan-out to 10 clients: p99"), 1.0, "ms"),
]


def machine() -> dict:
    cpu = "unknown CPU"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    memory = "?"
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                memory = f"{int(line.split()[1]) / 1024 / 1024:.1f} GiB"
    except OSError:
        pass
    rustc = _output(["rustc", "--version"])
    return {"nproc": os.cpu_count(), "cpu": cpu, "memory": memory,
            "kernel": platform.release(), "rustc": rustc}


def commit(repo: Path) -> str:
    head = _output(["git", "-C", str(repo), "rev-parse", "--short=10", "HEAD"]) or "unknown"
    dirty = _output(["git", "-C", str(repo), "status", "--porcelain", "--untracked-files=no",
                     "--", "crates", "Cargo.toml", "Cargo.lock"])
    return f"{head} + uncommitted changes in crates/" if dirty else head


def _output(argv) -> str:
    try:
        return subprocess.run(argv, capture_output=True, text=True, timeout=30).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return ""


class NoiseSampler:
    """Samples the load average and whether someone else is compiling (rustc, cc, ld
    processes not ours) twice a second while measurements run."""

    def __init__(self):
        self.samples = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self):
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join(timeout=5)

    def _run(self):
        while not self._stop.is_set():
            self.samples.append((os.getloadavg()[0], _compilers_running()))
            self._stop.wait(0.5)

    def summary(self) -> str:
        if not self.samples:
            return "no samples"
        loads = sorted(load for load, _ in self.samples)
        busy = sum(1 for _, compiling in self.samples if compiling)
        return (f"1-min load average {loads[0]:.2f}–{loads[-1]:.2f} (median "
                f"{loads[len(loads) // 2]:.2f}) on {os.cpu_count()} cores; another build "
                f"(rustc/cc/ld) was running in {busy} of {len(self.samples)} samples "
                f"({100 * busy / len(self.samples):.0f}%)")


def _compilers_running() -> bool:
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            name = (entry / "comm").read_text().strip()
        except OSError:
            continue
        if name in ("rustc", "cc", "cc1", "ld", "ld.lld", "lld", "collect2", "build-script-b"):
            return True
    return False


def budget_table(results) -> list:
    lines = ["| budget | target | median | verdict |", "|---|---|---|---|"]
    for label, (group, measure), budget, unit in BUDGETS:
        stat = results.find(group, measure)
        if stat is None:
            status = next((row.status for row in results.rows
                           if row.group == group and row.measure == measure and row.status), "not measured")
            lines.append(f"| {label} | ≤ {budget:g} {unit} | — | {status} |")
            continue
        median = stat.median
        if median <= budget:
            verdict = f"met ({100 * median / budget:.0f}% of budget)"
        else:
            verdict = f"**missed by {median - budget:.2f} {unit}** ({median / budget:.1f}× budget)"
        lines.append(f"| {label} | ≤ {budget:g} {unit} | {stat.text()} | {verdict} |")
    return lines


def entry(results, info: dict, head: str, runs: int, noise: str, note: str, elapsed_s: float) -> str:
    today = datetime.date.today().isoformat()
    lines = [
        f"## {today} · {head}" + (f" · {note}" if note else ""),
        "",
        f"- machine: {info['nproc']} × {info['cpu']}, {info['memory']} RAM, Linux {info['kernel']}",
        f"- toolchain: {info['rustc']}; release profile from Cargo.toml",
        f"- runs: {runs} per measure unless n says otherwise; median (min–max, n); "
        f"harness took {elapsed_s / 60:.1f} min",
        f"- noise: {noise}",
        "",
        "### Budgets (issue 7)",
        "",
        *budget_table(results),
    ]
    groups = []
    for row in results.rows:
        if row.group not in groups:
            groups.append(row.group)
    for group in groups:
        lines += ["", f"### {group}", "", "| measure | result | note |", "|---|---|---|"]
        for row in results.rows:
            if row.group != group:
                continue
            result = row.stat.text() if row.stat is not None else row.status
            lines.append(f"| {row.measure} | {result} | {row.note} |")
    if results.notes:
        lines += ["", "Notes:", ""] + [f"- {note}" for note in results.notes]
    return "\n".join(lines) + "\n"


def append(results_file: Path, text: str):
    with results_file.open("a") as out:
        out.write("\n" + text)
