"""TUI start-up in a pty and the RSS of the whole process tree. The TUI, the daemon and
the worker are not built yet: until `kestrel` paints a screen, these rows read "not built
yet", and the code below is what measures them once it does.

First paint: from spawn to the first output byte on the pty (120x40). Input-ready: a
marker is typed into the pty right after spawn, with the pty's echo off, so it shows up
on screen only once the TUI has read it and drawn it."""

import fcntl
import os
import select
import signal
import struct
import subprocess
import termios
import time
from pathlib import Path

from .agents import clean_env
from .measure import run_process

COLUMNS, ROWS = 120, 40
MARKER = "kbench7"

TUI_MEASURES = [
    "first paint (daemon up)",
    "input-ready (daemon up)",
    "first paint (daemon started on demand)",
    "input-ready (daemon started on demand)",
    "idle RSS of the tree (TUI + daemon + worker)",
    "idle RSS of the tree after a 50-turn session",
    "Enter to reply on screen",
]


class PtyRun:
    """What one start in a pty showed: times in ms (None if never seen), the output."""

    def __init__(self, first_output_ms, marker_ms, exited, output):
        self.first_output_ms = first_output_ms
        self.marker_ms = marker_ms
        self.exited = exited
        self.output = output


def _controlling_tty():
    os.setsid()
    fcntl.ioctl(0, termios.TIOCSCTTY, 0)


def start_in_pty(argv, env, cwd, timeout=3.0, type_marker=True) -> PtyRun:
    """Starts argv on a fresh 120x40 pty, types MARKER at once, and watches the screen
    until the marker is drawn, the process exits, or `timeout` s pass; then ends it."""
    master, slave = os.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", ROWS, COLUMNS, 0, 0))
    attributes = termios.tcgetattr(slave)
    attributes[3] &= ~termios.ECHO  # only the program may show what was typed
    termios.tcsetattr(slave, termios.TCSANOW, attributes)
    env = dict(env, TERM="xterm-256color", COLUMNS=str(COLUMNS), LINES=str(ROWS))
    started = time.perf_counter()
    proc = subprocess.Popen(argv, env=env, cwd=cwd, stdin=slave, stdout=slave, stderr=slave,
                            preexec_fn=_controlling_tty, close_fds=True)
    os.close(slave)
    if type_marker:
        os.write(master, MARKER.encode())
    output = bytearray()
    first_output_ms = marker_ms = None
    exited = False
    deadline = started + timeout
    try:
        while time.perf_counter() < deadline:
            ready, _, _ = select.select([master], [], [], 0.005)
            now_ms = (time.perf_counter() - started) * 1000.0
            if ready:
                try:
                    chunk = os.read(master, 65536)
                except OSError:  # the slave side closed: the process is gone
                    chunk = b""
                if chunk:
                    output.extend(chunk)
                    first_output_ms = first_output_ms if first_output_ms is not None else now_ms
                    if marker_ms is None and MARKER.encode() in output:
                        marker_ms = now_ms
                        break
            if proc.poll() is not None:
                exited = True
                break
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
        os.close(master)
    return PtyRun(first_output_ms, marker_ms, exited, output.decode(errors="replace"))


def tree_rss_mb(root_pids) -> float:
    """Resident memory (VmRSS) of these processes and all their descendants, in MB."""
    children = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        children.setdefault(int(fields[1]), []).append(int(entry.name))
    total_kb, pending, seen = 0, list(root_pids), set()
    while pending:
        pid = pending.pop()
        if pid in seen:
            continue
        seen.add(pid)
        pending.extend(children.get(pid, []))
        try:
            for line in Path(f"/proc/{pid}/status").read_text().splitlines():
                if line.startswith("VmRSS:"):
                    total_kb += int(line.split()[1])
        except OSError:
            continue
    return total_kb / 1024.0


def daemon_idle(ctx, settle_s: float = 1.0):
    """`kestrel daemon start` (until it reports running) and the daemon's RSS once idle,
    alone: the first part of the tree's idle RSS that exists."""
    home = ctx.work / "home-daemon"
    home.mkdir(exist_ok=True)
    env = clean_env(KESTREL_HOME=home)
    starts, rss = [], []
    for _ in range(ctx.runs):
        run = run_process([str(ctx.kestrel), "daemon", "start"], env=env, cwd=ctx.work, timeout=30)
        if run.exit_code != 0:
            ctx.results.missing("daemon", "kestrel daemon start", "not built yet",
                                f"exit {run.exit_code}: {run.stderr.strip()[-100:]}")
            return
        starts.append(run.wall_ms)
        time.sleep(settle_s)
        try:
            pid = int((home / "run" / "daemon.pid").read_text().strip())
            rss.append(tree_rss_mb([pid]))
        finally:
            _daemon(ctx, env, "stop")
    ctx.results.add("daemon", "kestrel daemon start: wall", starts, "ms", "until the command returns")
    ctx.results.add("daemon", "idle RSS: daemon alone", rss, "MB",
                    f"VmRSS {settle_s:g} s after start, no client, no worker")


def tui(ctx):
    """The TUI rows: measured when `kestrel` paints in a pty, "not built yet" otherwise."""
    daemon_idle(ctx)
    home = ctx.work / "home-tui"
    home.mkdir(exist_ok=True)
    env = clean_env(KESTREL_HOME=home)
    probe = start_in_pty([str(ctx.kestrel)], env, ctx.work)
    if probe.exited or probe.marker_ms is None:
        said = probe.output.strip().splitlines()[-1:] or ["(nothing)"]
        for measure in TUI_MEASURES:
            ctx.results.missing("tui", measure, "not built yet", f"`kestrel` in a pty said: {said[0][:100]}")
        return
    # Daemon started on demand: a home with no daemon running.
    _measure_starts(ctx, env, "daemon started on demand", before=lambda: _daemon(ctx, env, "stop"))
    daemon_up = _daemon(ctx, env, "start")
    if daemon_up:
        _measure_starts(ctx, env, "daemon up", before=lambda: None)
        _daemon(ctx, env, "stop")
    else:
        for measure in ("first paint (daemon up)", "input-ready (daemon up)"):
            ctx.results.missing("tui", measure, "not built yet", "`kestrel daemon start` failed")
    for measure in TUI_MEASURES[4:]:
        ctx.results.missing("tui", measure, "not built yet", "needs the daemon and worker; see kbench/tui.py")


def _daemon(ctx, env, action) -> bool:
    run = run_process([str(ctx.kestrel), "daemon", action], env=env, cwd=ctx.work, timeout=30)
    return run.exit_code == 0


def _measure_starts(ctx, env, label, before):
    paint, ready = [], []
    for _ in range(ctx.runs):
        before()
        run = start_in_pty([str(ctx.kestrel)], env, ctx.work)
        if run.first_output_ms is not None:
            paint.append(run.first_output_ms)
        if run.marker_ms is not None:
            ready.append(run.marker_ms)
    for measure, values in ((f"first paint ({label})", paint), (f"input-ready ({label})", ready)):
        if values:
            ctx.results.add("tui", measure, values, "ms", f"{COLUMNS}x{ROWS} pty, warm")
        else:
            ctx.results.missing("tui", measure, "not seen", "no output / marker within 3 s")
