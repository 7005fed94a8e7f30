"""Running processes and measuring them: wall time, CPU (user + sys, from wait4, so
children the process waited for are included) and peak RSS, through a small helper
(rusage.rs); medians over runs; the scripted model server as a context manager."""

import json
import os
import select
import shutil
import signal
import statistics
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path


class BenchError(Exception):
    """A measurement could not be taken (a process failed, a tool is missing)."""


@dataclass
class ProcessRun:
    """One finished process: times in ms, memory in MB."""

    wall_ms: float
    user_ms: float
    sys_ms: float
    maxrss_mb: float
    exit_code: int
    stdout: str
    stderr: str
    # The process's own VmHWM (MB) and CPU (ms, children left out), read from /proc
    # while it ran: only with `hwm=True`.
    hwm_mb: float = None
    self_cpu_ms: float = None

    @property
    def cpu_ms(self) -> float:
        return self.user_ms + self.sys_ms


# Set by use_rusage_helper(): the small program that spawns and measures (rusage.rs).
_HELPER = None


def use_rusage_helper(work: Path) -> Path:
    """Builds rusage.rs with plain rustc into `work`; every later run_process goes
    through it, so peak RSS is the program's own (see rusage.rs for why)."""
    global _HELPER
    source = Path(__file__).with_name("rusage.rs")
    binary = work / "rusage"
    built = subprocess.run(["rustc", "-O", "--edition", "2024", "-o", str(binary), str(source)],
                           capture_output=True, text=True)
    if built.returncode != 0:
        raise BenchError(f"cannot build {source}: {built.stderr[-800:]}")
    _HELPER = binary
    return binary


def run_process(argv, *, env=None, cwd=None, timeout=120.0, stdin_text=None, hwm=False) -> ProcessRun:
    """Runs argv to its end with stdin /dev/null (or `stdin_text`), output to temp files,
    through the rusage helper (wall, CPU and peak RSS of argv alone). The whole process
    group is killed, and an error raised, after `timeout` s. `hwm`: also argv's own
    VmHWM, polled every 5 ms (peak RSS from wait4 includes the children it waited for)."""
    if _HELPER is None:
        raise BenchError("use_rusage_helper() was not called")
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err, \
            tempfile.TemporaryFile() as inp, \
            tempfile.NamedTemporaryFile(suffix=".json") as usage_file:
        if stdin_text is not None:
            inp.write(stdin_text.encode())
            inp.seek(0)
        stdin = inp if stdin_text is not None else subprocess.DEVNULL
        helper = [str(_HELPER), *(["--hwm"] if hwm else []), usage_file.name]
        proc = subprocess.Popen([*helper, *map(str, argv)], env=env, cwd=cwd,
                                stdin=stdin, stdout=out, stderr=err, start_new_session=True)
        try:
            proc.wait(timeout=timeout)
            timed_out = False
        except subprocess.TimeoutExpired:
            timed_out = True
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            proc.wait()
        out.seek(0)
        err.seek(0)
        stdout = out.read().decode(errors="replace")
        stderr = err.read().decode(errors="replace")
        if timed_out:
            raise BenchError(f"{argv[0]} did not finish within {timeout} s: {stderr[-500:]}")
        try:
            usage = json.loads(Path(usage_file.name).read_text())
        except (OSError, ValueError) as error:
            raise BenchError(f"{argv[0]}: no usage from the helper ({error}): {stderr[-500:]}")
    return ProcessRun(wall_ms=usage["wall_ms"], user_ms=usage["user_ms"], sys_ms=usage["sys_ms"],
                      maxrss_mb=usage["maxrss_kb"] / 1024.0, exit_code=usage["exit_code"],
                      stdout=stdout, stderr=stderr,
                      hwm_mb=usage["hwm_kb"] / 1024.0 if "hwm_kb" in usage else None,
                      self_cpu_ms=usage.get("self_cpu_ms"))


def run_checked(argv, **kwargs) -> ProcessRun:
    """run_process, failing on a non-zero exit with the process's stderr."""
    run = run_process(argv, **kwargs)
    if run.exit_code != 0:
        raise BenchError(f"{' '.join(map(str, argv[:4]))} exited {run.exit_code}: "
                         f"{run.stderr.strip()[-800:]}")
    return run


@dataclass
class Stat:
    """Median, min and max of a list of samples, with its unit."""

    values: list
    unit: str

    @property
    def median(self) -> float:
        return statistics.median(self.values)

    @property
    def min(self) -> float:
        return min(self.values)

    @property
    def max(self) -> float:
        return max(self.values)

    def text(self, digits: int = 2) -> str:
        if len(self.values) == 1:
            return f"{self.median:.{digits}f} {self.unit}"
        return (f"{self.median:.{digits}f} {self.unit} "
                f"({self.min:.{digits}f}–{self.max:.{digits}f}, n={len(self.values)})")


@dataclass
class Row:
    """One line of a results table."""

    group: str
    measure: str
    stat: Stat = None
    note: str = ""
    status: str = ""  # set instead of stat: "not built yet", "skipped: ..."


@dataclass
class Results:
    rows: list = field(default_factory=list)
    notes: list = field(default_factory=list)

    def add(self, group, measure, values, unit, note=""):
        self.rows.append(Row(group, measure, Stat(list(values), unit), note))

    def missing(self, group, measure, status, note=""):
        self.rows.append(Row(group, measure, None, note, status))

    def find(self, group, measure):
        for row in self.rows:
            if row.group == group and row.measure == measure and row.stat is not None:
                return row.stat
        return None


def step(text: str) -> dict:
    """A scripted reply with this text."""
    return {"reply": {"text": text}}


def tool_step(name: str, arguments: dict) -> dict:
    """A scripted reply making one tool call."""
    return {"reply": {"tool_calls": [{"name": name, "arguments": arguments}]}}


class ScriptedServer:
    """`scripted-model` serving `steps`; its stdin is a pipe, so it exits with us."""

    def __init__(self, binary: Path, steps: list, workdir: Path):
        self.script = workdir / f"script-{os.getpid()}-{time.monotonic_ns()}.json"
        self.script.write_text(json.dumps({"steps": steps}))
        self.proc = subprocess.Popen([str(binary), "--script", str(self.script)],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE)
        ready, _, _ = select.select([self.proc.stdout], [], [], 10.0)
        line = self.proc.stdout.readline().decode().strip() if ready else ""
        if not line.startswith("listening "):
            self.close()
            raise BenchError(f"scripted-model did not start: {line!r}")
        self.base_url = line.split(" ", 1)[1]

    def close(self):
        if self.proc.stdin:
            self.proc.stdin.close()
        try:
            self.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        for stream in (self.proc.stdout, self.proc.stderr):
            if stream:
                stream.close()
        self.script.unlink(missing_ok=True)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def which(program: str):
    found = shutil.which(program)
    return Path(found) if found else None
