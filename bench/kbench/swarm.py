"""The swarm orchestrator (`kestrel swarm run`, ARCHITECTURE §10) with an instant model
(the scripted server): what the orchestration itself costs per task on generated
repositories of 2,000 and 20,000 files, where that time goes (every `git` the run starts,
timed through a shim on PATH), the orchestrator's peak memory on a wide graph, and
`kestrel swarm status` of a long event log.

Every task is one line: its implementer writes `notes/<task>.txt` with `write_file` and
ends its turn, its reviewer approves with `swarm_review`; acceptance is `true`. Each run
gets a fresh home, a fresh scripted server and the same repository (its integration
branch deleted afterwards); the daemon the run starts is stopped after it."""

import json
import os
import shutil
import stat
import subprocess
from pathlib import Path

from .agents import clean_env
from .measure import BenchError, ScriptedServer, run_checked, run_process

# Tasks of the overhead runs, and the repositories they run on (files).
OVERHEAD_TASKS = 6
REPO_SIZES = (2_000, 20_000)
# The wide run.
WIDE_TASKS = 200
WIDE_PARALLEL = 32
# `kestrel swarm status`: events in the generated run, over few or many tasks.
STATUS_EVENTS = 10_000
STATUS_SESSIONS = 2_500
STATUS_TASK_COUNTS = (50, 1_250)

IMPLEMENTER, REVIEWER = "impl", "review"
KEY_VAR = "KBENCH_SCRIPTED_KEY"
RUN_TIMEOUT_S = 3600.0

# Files per directory of a generated repository, and the text of each file (~1.4 KB).
FILES_PER_DIR = 20
FILE_LINES = 40


def generate_repo(path: Path, files: int) -> Path:
    """A git repository on `main` holding `files` source-like files (one commit), made
    once and kept for every run of the group."""
    if (path / ".git").is_dir():
        return path
    if path.exists():
        shutil.rmtree(path)
    path.mkdir(parents=True)
    for index in range(files):
        directory = path / "src" / f"pkg{index // FILES_PER_DIR:04d}"
        if index % FILES_PER_DIR == 0:
            directory.mkdir(parents=True, exist_ok=True)
        lines = [f"# module {index}\n"] + [
            f"def function_{index}_{line}(value):  # generated line {line} of the module\n"
            for line in range(FILE_LINES)]
        (directory / f"mod{index % FILES_PER_DIR:02d}.py").write_text("".join(lines))
    (path / "README.md").write_text(f"A generated repository of {files} files.\n")
    for argv in (["init", "-q", "-b", "main"], ["add", "-A"],
                 ["-c", "user.name=bench", "-c", "user.email=bench@localhost",
                  "commit", "-q", "-m", "generated"]):
        _git(path, argv, timeout=600)
    return path


def _git(repo: Path, argv, timeout=120.0) -> str:
    done = subprocess.run(["git", "-C", str(repo), *argv], capture_output=True, text=True,
                          timeout=timeout)
    if done.returncode != 0:
        raise BenchError(f"git {' '.join(argv[:3])} in {repo}: {done.stderr.strip()[-400:]}")
    return done.stdout


def task_ids(count: int) -> list:
    return [f"t{index:03d}" for index in range(count)]


def graph_text(ids: list) -> str:
    tasks = "".join(
        f'\n[[task]]\nid = "{task}"\ntitle = "Note {task}"\n'
        f'description = "Write notes/{task}.txt holding its id."\nacceptance = ["true"]\n'
        for task in ids)
    return f'goal = "bench: {len(ids)} one-line tasks"\nbase = "main"\n{tasks}'


def script_steps(ids: list) -> list:
    """Per task: the implementer's write_file and its closing text, the reviewer's
    approval and its closing text, each routed by model and the role's prompt line."""
    steps = []
    for task in ids:
        for model, role, first in (
                (IMPLEMENTER, "implementer",
                 {"name": "write_file", "arguments": {"path": f"notes/{task}.txt", "content": f"{task}\n"}}),
                (REVIEWER, "reviewer",
                 {"name": "swarm_review", "arguments": {"approve": True, "findings": []}})):
            when = {"model": model, "contains": f"task={task} role={role}"}
            steps.append({"reply": {"tool_calls": [first]}, "when": when})
            steps.append({"reply": {"text": "done"}, "when": when})
    return steps


def configure(home: Path, base_url: str, workdir: Path):
    home.mkdir(parents=True, exist_ok=True)
    (home / "config.toml").write_text(
        f'model = "scripted/{IMPLEMENTER}"\n\n'
        f'[providers.scripted]\nbase_url = "{base_url}"\nwire_api = "chat"\n'
        f'api_key_env = "{KEY_VAR}"\n\n'
        f'[swarm]\nworkdir = "{workdir}"\n\n'
        f'[swarm.roles.implementer]\nmodel = "scripted/{IMPLEMENTER}"\n\n'
        f'[swarm.roles.reviewer]\nmodel = "scripted/{REVIEWER}"\n')


class SwarmRun:
    """One `kestrel swarm run --graph` of `ids` on `repo`: its process measures and the
    run's events."""

    def __init__(self, ctx, repo: Path, ids: list, max_parallel: int, name: str, path_prefix=None,
                 workdir_root: Path = None):
        self.ctx, self.repo, self.ids = ctx, repo, ids
        self.home = ctx.work / f"home-swarm-{name}"
        self.workdir = (workdir_root or ctx.work) / f"swarm-work-{name}"
        self.graph = ctx.work / f"graph-{name}.toml"
        self.graph.write_text(graph_text(ids))
        self.max_parallel = max_parallel
        self.path_prefix = path_prefix

    def env(self) -> dict:
        # An empty HOME: acceptance commands run in `bash -lc`, and a developer's login
        # profile (pyenv, nvm, ...) would be measured with them.
        empty_home = self.ctx.work / "empty-home"
        empty_home.mkdir(exist_ok=True)
        extra = {"KESTREL_HOME": self.home, KEY_VAR: "bench", "KESTREL_CATALOG_URL": "off",
                 "XDG_CACHE_HOME": self.ctx.work / "xdg-cache", "HOME": empty_home}
        if self.path_prefix:
            extra["PATH"] = f"{self.path_prefix}:{os.environ.get('PATH', '')}"
        return clean_env(**extra)

    def once(self):
        """Runs it; returns (ProcessRun, events). Fails unless every task merged."""
        for path in (self.home, self.workdir):
            if path.exists():
                shutil.rmtree(path)
        with ScriptedServer(self.ctx.scripted_model, script_steps(self.ids), self.ctx.work) as server:
            configure(self.home, server.base_url, self.workdir)
            env = self.env()
            try:
                run = run_process([self.ctx.kestrel, "swarm", "run", "--graph", self.graph,
                                   "--max-parallel", str(self.max_parallel)],
                                  env=env, cwd=self.repo, timeout=RUN_TIMEOUT_S, hwm=True)
                self.workers_left = daemon_children(self.home)
            finally:
                run_process([self.ctx.kestrel, "daemon", "stop"], env=env, cwd=self.ctx.work, timeout=60)
        runs = list((self.home / "swarm").iterdir()) if (self.home / "swarm").is_dir() else []
        events = []
        if len(runs) == 1:
            text = (runs[0] / "events.jsonl").read_text()
            events = [json.loads(line) for line in text.splitlines() if line.endswith("}")]
            _git(self.repo, ["branch", "-D", f"kestrel/{runs[0].name}"])
        merged = sum(1 for event in events if event["type"] == "merged")
        if run.exit_code != 0 or merged != len(self.ids):
            raise BenchError(f"kestrel swarm run ({len(self.ids)} tasks) exited {run.exit_code}, "
                             f"{merged} merged: {run.stderr.strip()[-800:]}")
        return run, events


def daemon_children(home: Path):
    """(count, summed VmRSS in MB) of the processes the home's daemon runs (its workers)."""
    try:
        daemon = int((home / "run" / "daemon.pid").read_text().strip())
    except (OSError, ValueError):
        return 0, 0.0
    count, rss_kb = 0, 0
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            status = (entry / "status").read_text()
        except OSError:
            continue
        fields = dict(line.split(":", 1) for line in status.splitlines() if ":" in line)
        if fields.get("PPid", "").strip() == str(daemon):
            count += 1
            rss_kb += int(fields.get("VmRSS", "0 kB").split()[0])
    return count, rss_kb / 1024


def tmpfs_root():
    """A directory on tmpfs (/dev/shm) for worktrees and clones, or None."""
    shm = Path("/dev/shm")
    if not (shm.is_dir() and os.access(shm, os.W_OK)):
        return None
    root = shm / f"kbench-swarm-{os.getpid()}"
    root.mkdir(exist_ok=True)
    return root


def overhead(ctx):
    """Per task: the whole run's wall time / tasks, `max_parallel` 1, on each repository
    size, with `[swarm] workdir` on the disk (beside the home, as by default) and on
    tmpfs (what is left without the file system's cost of writing and deleting
    checkouts); the four interleaved run by run. CPU is the orchestrator's with the git
    commands it waited for (the daemon and its workers are not its children)."""
    ids = task_ids(OVERHEAD_TASKS)
    repos = {files: generate_repo(ctx.work / f"swarm-repo-{files}", files) for files in REPO_SIZES}
    tmpfs = tmpfs_root()
    places = [("disk", None)] + ([("tmpfs", tmpfs)] if tmpfs else [])
    runners = {(files, place): SwarmRun(ctx, repos[files], ids, 1, f"overhead-{files}-{place}",
                                        workdir_root=root)
               for place, root in places for files in REPO_SIZES}
    keys = list(runners)
    results = {key: [] for key in keys}
    try:
        for index in range(overhead_runs(ctx)):
            shift = index % len(keys)
            for key in keys[shift:] + keys[:shift]:
                results[key].append(runners[key].once()[0])
    finally:
        if tmpfs:
            shutil.rmtree(tmpfs, ignore_errors=True)
    group = "swarm (orchestration, instant model)"
    tasks = len(ids)
    for files, place in keys:
        runs = results[(files, place)]
        label = f"{files} files, workdir on {place}"
        ctx.results.add(group, f"{label}: wall per task", [run.wall_ms / 1000 / tasks for run in runs], "s",
                        f"{tasks} independent one-line tasks, --max-parallel 1, acceptance `true`: "
                        "the whole `kestrel swarm run` / tasks (daemon start and cleanup included)")
        ctx.results.add(group, f"{label}: CPU per task", [run.cpu_ms / 1000 / tasks for run in runs], "s",
                        "the orchestrator and the git commands it ran (not the daemon or its workers)")
        ctx.results.add(group, f"{label}: orchestrator's own CPU per task",
                        [run.self_cpu_ms / 1000 / tasks for run in runs], "s", "its git commands left out")
        ctx.results.add(group, f"{label}: orchestrator peak RSS", [run.hwm_mb for run in runs], "MB",
                        "VmHWM of the `kestrel swarm run` process")
    for files in REPO_SIZES:
        git_time(ctx, repos[files], ids, f"{files} files")


def overhead_runs(ctx) -> int:
    """A 20k-file run takes minutes on a slow disk: at most 3 of each."""
    return max(1, min(ctx.runs, 3))


GIT_SHIM = """#!/bin/bash
# kbench: times every git command of a swarm run (the orchestrator's and the workers').
start=$EPOCHREALTIME
"$KBENCH_REAL_GIT" "$@"
status=$?
end=$EPOCHREALTIME
# Arguments joined by the unit separator: one may hold spaces (`user.name=Kestrel swarm`).
IFS=$'\\x1f'
arguments="$*"
printf '%s %s %s\\n' "$start" "$end" "${arguments//$'\\n'/ }" >> "$KBENCH_GIT_LOG"
exit $status
"""


def _subcommand(arguments: str) -> str:
    """`worktree add`, `clone`, ... of a logged git command line (`-C DIR`, `-c K=V` and
    the identity options left out)."""
    words = arguments.split("\x1f")
    index = 0
    while index < len(words) and words[index] in ("-C", "-c"):
        index += 2
    words = words[index:]
    if not words:
        return "?"
    if words[0] in ("worktree", "merge", "branch") and len(words) > 1 and not words[1].startswith("/"):
        second = words[1] if not words[1].startswith("-") or words[1] in ("--abort",) else ""
        return f"{words[0]} {second}".strip()
    return words[0]


def git_time(ctx, repo: Path, ids: list, label: str):
    """One more run with a shim named `git` first on PATH that logs each command's start,
    end and arguments: the time of every git subcommand per task, summed."""
    shim_dir = ctx.work / "git-shim"
    shim_dir.mkdir(exist_ok=True)
    shim = shim_dir / "git"
    shim.write_text(GIT_SHIM)
    shim.chmod(shim.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    real_git = shutil.which("git")
    if real_git is None:
        raise BenchError("git is not on PATH")
    log = ctx.work / f"git-{label.replace(' ', '-')}.log"
    log.unlink(missing_ok=True)
    os.environ["KBENCH_REAL_GIT"] = real_git
    os.environ["KBENCH_GIT_LOG"] = str(log)
    try:
        runner = SwarmRun(ctx, repo, ids, 1, f"gittime-{label.replace(' ', '-')}", path_prefix=shim_dir)
        run, _ = runner.once()
    finally:
        os.environ.pop("KBENCH_REAL_GIT", None)
        os.environ.pop("KBENCH_GIT_LOG", None)
    totals, counts = {}, {}
    for line in log.read_text().splitlines():
        start, end, arguments = line.split(" ", 2)
        name = _subcommand(arguments)
        totals[name] = totals.get(name, 0.0) + (float(end) - float(start)) * 1000
        counts[name] = counts.get(name, 0) + 1
    tasks = len(ids)
    group = f"swarm: where a task's time goes ({label}, one run with a git timing shim)"
    git_total = sum(totals.values())
    ctx.results.add(group, "whole run: wall per task", [run.wall_ms / tasks], "ms",
                    "the shim itself adds a bash start (~2 ms) to every git command")
    ctx.results.add(group, "orchestrator's own CPU per task", [run.self_cpu_ms / tasks], "ms",
                    "its git commands left out")
    ctx.results.add(group, "all git commands: per task", [git_total / tasks], "ms",
                    f"{sum(counts.values()) / tasks:.1f} commands per task; summed wall times "
                    "(commands of different tasks overlap)")
    for name in sorted(totals, key=lambda key: -totals[key]):
        ctx.results.add(group, f"git {name}", [totals[name] / tasks], "ms",
                        f"{counts[name] / tasks:.1f} per task")


def wide(ctx):
    """WIDE_TASKS independent tasks with --max-parallel WIDE_PARALLEL on the smaller
    repository: the orchestrator's peak RSS (its own VmHWM) and the whole run's time,
    with the workdir on tmpfs (up to 3 runs) and once on the disk."""
    ids = task_ids(WIDE_TASKS)
    repo = generate_repo(ctx.work / f"swarm-repo-{REPO_SIZES[0]}", REPO_SIZES[0])
    tmpfs = tmpfs_root()
    places = ([("tmpfs", tmpfs, overhead_runs(ctx))] if tmpfs else []) + [("disk", None, 1)]
    group = f"swarm ({WIDE_TASKS} tasks, --max-parallel {WIDE_PARALLEL}, {REPO_SIZES[0]} files)"
    try:
        for place, root, count in places:
            runner = SwarmRun(ctx, repo, ids, WIDE_PARALLEL, f"wide-{place}", workdir_root=root)
            measured, workers = [], []
            for _ in range(count):
                measured.append(runner.once())
                workers.append(runner.workers_left)
            runs = [run for run, _ in measured]
            events = len(measured[-1][1])
            label = f"workdir on {place}"
            ctx.results.add(group, f"{label}: orchestrator peak RSS", [run.hwm_mb for run in runs], "MB",
                            "VmHWM of the `kestrel swarm run` process, read from /proc every 5 ms")
            ctx.results.add(group, f"{label}: whole run, wall", [run.wall_ms / 1000 for run in runs], "s",
                            f"{events} events")
            ctx.results.add(group, f"{label}: CPU, orchestrator and its git", [run.cpu_ms / 1000 for run in runs],
                            "s", "wait4: the process and the children it waited for")
            ctx.results.add(group, f"{label}: CPU, orchestrator alone", [run.self_cpu_ms / 1000 for run in runs],
                            "s", "/proc/PID/stat utime + stime")
            ctx.results.add(group, f"{label}: daemon's processes left when the run ended",
                            [count for count, _ in workers], "processes", "role sessions' workers still running")
            ctx.results.add(group, f"{label}: their summed RSS", [rss for _, rss in workers], "MB", "VmRSS")
    finally:
        if tmpfs:
            shutil.rmtree(tmpfs, ignore_errors=True)


def status(ctx):
    """`kestrel swarm status RUN` (table and --json) of a run of STATUS_EVENTS events
    generated with the store's API (the swarm_status bench's --generate), beside
    STATUS_SESSIONS sessions in the index."""
    binary = ctx.bench_bins.get("swarm_status")
    if binary is None:
        raise BenchError("the swarm_status bench binary was not built")
    group = f"swarm status ({STATUS_EVENTS} events)"
    for tasks in STATUS_TASK_COUNTS:
        home = ctx.work / f"home-swarm-status-{tasks}"
        if home.exists():
            shutil.rmtree(home)
        generated = run_checked([binary, "--generate", home, "--events", str(STATUS_EVENTS),
                                 "--sessions", str(STATUS_SESSIONS), "--tasks", str(tasks)], timeout=600)
        run_id = generated.stdout.strip()
        env = clean_env(KESTREL_HOME=home, KESTREL_CATALOG_URL="off")
        argvs = {"table": [ctx.kestrel, "swarm", "status", run_id],
                 "--json": [ctx.kestrel, "swarm", "status", run_id, "--json"]}
        for argv in argvs.values():
            run_checked(argv, env=env, cwd=ctx.work)  # warm-up
        runs = {name: [] for name in argvs}
        for index in range(ctx.runs):
            order = list(argvs) if index % 2 == 0 else list(reversed(argvs))
            for name in order:
                runs[name].append(run_checked(argvs[name], env=env, cwd=ctx.work))
        for name, measured in runs.items():
            label = f"{tasks} tasks, {name}"
            ctx.results.add(group, f"{label}: wall", [run.wall_ms for run in measured], "ms",
                            f"{STATUS_SESSIONS} sessions in the index" if name == "table" else "")
            ctx.results.add(group, f"{label}: peak RSS", [run.maxrss_mb for run in measured], "MB")
        shutil.rmtree(home)


def group(ctx):
    """The whole group; a part that fails is reported and the next one still runs."""
    for part, label in ((overhead, "orchestration per task"), (wide, f"{WIDE_TASKS} tasks"),
                        (status, "swarm status")):
        try:
            part(ctx)
        except BenchError as error:
            ctx.results.missing("swarm", f"{label} (failed)", f"error: {error}")
