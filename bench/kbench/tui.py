"""TUI start-up in a pty, the RSS of the whole process tree (idle before any session,
idle with a worker after a first turn that ran tools, over several fresh sessions, and
after a 50-turn session, each also per process), and Enter to a scripted reply on
screen. Until `kestrel` paints a screen these rows read "not built yet".

First paint: from spawn to the first printable text on the pty (120x40); the queries a
TUI sends first (cursor position, device attributes, colours) are answered as a
terminal would. Input-ready: a
marker is typed into the pty right after spawn and again every millisecond, with the
pty's echo off, so it shows up on screen only once the TUI has read it and drawn it."""

import fcntl
import os
import re
import shutil
import select
import signal
import struct
import subprocess
import termios
import time
from pathlib import Path

from .agents import Codex, Kestrel, clean_env
from .measure import BenchError, ScriptedServer, run_process, step, tool_step
import unicodedata

COLUMNS, ROWS = 120, 40
MARKER = "kbench7"
# Typed once, at the program's first output, by a user who starts typing at once.
EARLY_TEXT = "zq-probe-17"
# How often the marker is typed again until it shows: the input-ready resolution.
RETYPE_S = 0.001

TUI_MEASURES = [
    "first paint (daemon up)",
    "input-ready (daemon up)",
    "first paint, typing at first output (daemon up)",
    "typed at first output, on screen (daemon up)",
    "typed at first output, after the first frame (daemon up)",
    "first paint (daemon started on demand)",
    "input-ready (daemon started on demand)",
    "idle RSS: TUI + daemon, no session yet",
    "idle RSS of the tree with a worker, after 1 turn",
    "idle RSS of the tree after a 50-turn session",
    "Enter to reply on screen",
]
# The per-process rows that follow each tree row of a session.
ROLES = ("TUI", "daemon", "worker")


class PtyRun:
    """What one start in a pty showed: times in ms (None if never seen), the output."""

    def __init__(self, first_output_ms, marker_ms, exited, output):
        self.measured = None
        self.first_output_ms = first_output_ms
        self.marker_ms = marker_ms
        self.exited = exited
        self.output = output


# What a terminal answers to the queries TUIs send at start-up; without an answer many
# wait for a timeout, which would be measured as their start-up.
QUERY_ANSWERS = [
    (b"\x1b[6n", b"\x1b[1;1R"),  # cursor position
    (b"\x1b[c", b"\x1b[?62;22c"),  # primary device attributes
    (b"\x1b[0c", b"\x1b[?62;22c"),
    (b"\x1b]10;?", b"\x1b]10;rgb:ffff/ffff/ffff\x1b\\"),  # foreground colour
    (b"\x1b]11;?", b"\x1b]11;rgb:0000/0000/0000\x1b\\"),  # background colour
]
ESCAPES = re.compile(rb"\x1b(\[[0-?]*[ -/]*[@-~]|\][^\x07\x1b]*(\x07|\x1b\\)|[()][0-9A-Za-z]|[=>78c])")


def answer_queries(master: int, chunk: bytes):
    for query, answer in QUERY_ANSWERS:
        for _ in range(chunk.count(query)):
            os.write(master, answer)


def shows_text(output: bytes) -> bool:
    """Whether the screen shows something yet: printable text once escape sequences
    (queries, mode switches, cursor moves) are taken out."""
    return any(32 < byte < 127 or byte >= 0xC0 for byte in ESCAPES.sub(b"", bytes(output)))


def _controlling_tty():
    os.setsid()
    fcntl.ioctl(0, termios.TIOCSCTTY, 0)


def spawn_in_pty(argv, env, cwd):
    """argv on a fresh 120x40 pty with echo off (only the program may show what was
    typed): the master side, the process and when it was started (perf_counter)."""
    master, slave = os.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", ROWS, COLUMNS, 0, 0))
    attributes = termios.tcgetattr(slave)
    attributes[3] &= ~termios.ECHO
    termios.tcsetattr(slave, termios.TCSANOW, attributes)
    env = dict(env, TERM="xterm-256color", COLUMNS=str(COLUMNS), LINES=str(ROWS))
    started = time.perf_counter()
    proc = subprocess.Popen(argv, env=env, cwd=cwd, stdin=slave, stdout=slave, stderr=slave,
                            preexec_fn=_controlling_tty, close_fds=True)
    os.close(slave)
    return master, proc, started


def start_in_pty(argv, env, cwd, timeout=3.0, type_marker=True, when_ready=None) -> PtyRun:
    """Starts argv on a fresh 120x40 pty, types MARKER at once and every RETYPE_S, and
    watches the screen until the marker is drawn, the process exits, or `timeout` s
    pass; then calls `when_ready(pid)` if the marker showed (its result lands in
    `PtyRun.measured`) and ends the process."""
    master, proc, started = spawn_in_pty(argv, env, cwd)
    if type_marker:
        os.write(master, MARKER.encode())
    output = bytearray()
    first_output_ms = marker_ms = None
    exited = False
    deadline = started + timeout
    next_type = started + RETYPE_S
    try:
        while time.perf_counter() < deadline:
            ready, _, _ = select.select([master], [], [], RETYPE_S)
            now = time.perf_counter()
            now_ms = (now - started) * 1000.0
            if type_marker and marker_ms is None and now >= next_type:
                # Input typed before the program set its terminal mode may be discarded
                # (TCSAFLUSH), so keep typing until the marker shows.
                os.write(master, MARKER.encode())
                next_type = now + RETYPE_S
            if ready:
                try:
                    chunk = os.read(master, 65536)
                except OSError:  # the slave side closed: the process is gone
                    chunk = b""
                if chunk:
                    answer_queries(master, chunk)
                    output.extend(chunk)
                    if first_output_ms is None and shows_text(output):
                        first_output_ms = now_ms
                    if marker_ms is None and MARKER.encode() in output:
                        marker_ms = now_ms
                        break
            if proc.poll() is not None:
                exited = True
                break
        measured = when_ready(proc.pid) if when_ready and marker_ms is not None else None
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
        os.close(master)
    run = PtyRun(first_output_ms, marker_ms, exited, output.decode(errors="replace"))
    run.measured = measured
    return run


class EarlyTyping:
    """What one start showed when EARLY_TEXT was typed at the program's first output:
    times in ms from spawn (None if never seen)."""

    def __init__(self, first_paint_ms, drawn_ms):
        self.first_paint_ms = first_paint_ms
        self.drawn_ms = drawn_ms


def type_at_first_output(argv, env, cwd, timeout=3.0, settle=0.3) -> EarlyTyping:
    """Starts argv on a fresh 120x40 pty with echo off, writes EARLY_TEXT once as soon
    as the program writes anything (its first output: mode switches, not yet a frame),
    and watches the output until the program itself draws that text (echo is off). First
    paint is the first printable text, as in `start_in_pty`. While watching, the text is
    looked for in the raw output only (a first draw of a line writes it whole), so that
    the harness's own work per chunk stays small and does not delay what it sees; when
    it never shows whole there (drawn over two frames: a frame rewrites only the cells
    that changed), the chunks are replayed through a `Screen` each time the output has
    been quiet for `settle` s: drawn is when the chunk that completed the text arrived."""
    master, proc, started = spawn_in_pty(argv, env, cwd)
    chunks = []  # (ms from spawn, bytes)
    output = bytearray()
    typed = False
    first_paint_ms = drawn_ms = None
    deadline = started + timeout
    try:
        while drawn_ms is None and time.perf_counter() < deadline:
            wait = settle if first_paint_ms is not None else 0.05
            ready, _, _ = select.select([master], [], [], wait)
            now_ms = (time.perf_counter() - started) * 1000.0
            if not ready:
                if proc.poll() is not None:
                    break
                # Quiet after the first paint: drawn over two frames already? Else go on
                # watching (a late draw is a number, not "not drawn").
                if first_paint_ms is not None and drawn_on_screen(chunks, EARLY_TEXT) is not None:
                    break
                continue
            try:
                chunk = os.read(master, 65536)
            except OSError:  # the slave side closed: the process is gone
                break
            if not chunk:
                break
            if not typed:
                os.write(master, EARLY_TEXT.encode())
                typed = True
            answer_queries(master, chunk)
            chunks.append((now_ms, chunk))
            output.extend(chunk)
            if first_paint_ms is None and shows_text(output):
                first_paint_ms = now_ms
            if EARLY_TEXT.encode() in output:
                drawn_ms = now_ms
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
        os.close(master)
    if drawn_ms is None:
        drawn_ms = drawn_on_screen(chunks, EARLY_TEXT)
    return EarlyTyping(first_paint_ms, drawn_ms)


def drawn_on_screen(chunks, text):
    """When `text` first showed on a screen fed the timed chunks (ms, bytes), or None."""
    screen = Screen()
    for at_ms, chunk in chunks:
        screen.feed(chunk)
        if text in screen.text():
            return at_ms
    return None


def _children() -> dict:
    children = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        children.setdefault(int(fields[1]), []).append(int(entry.name))
    return children


def _descendants(root_pids, children) -> list:
    pending, seen = list(root_pids), []
    while pending:
        pid = pending.pop()
        if pid in seen:
            continue
        seen.append(pid)
        pending.extend(children.get(pid, []))
    return seen


def memory_kb(pid) -> dict:
    """VmRSS of one process, and from smaps_rollup its Pss (shared pages divided among
    the processes mapping them: the binary's text is counted once over the tree, not once
    per process), its private pages, and the file-backed part of its RSS (mostly the
    binary's text). Zeros when the process is gone."""
    memory = {"rss": 0, "pss": 0, "private": 0, "file": 0}
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                memory["rss"] = int(line.split()[1])
        rollup = {}
        for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines()[1:]:
            name, _, value = line.partition(":")
            rollup[name.strip()] = int(value.split()[0])
    except (OSError, ValueError, IndexError):
        return memory
    memory["pss"] = rollup.get("Pss", 0)
    memory["private"] = rollup.get("Private_Clean", 0) + rollup.get("Private_Dirty", 0)
    memory["file"] = rollup.get("Rss", 0) - rollup.get("Anonymous", 0)
    return memory


def tree_rss_mb(root_pids) -> float:
    """Resident memory (VmRSS) of these processes and all their descendants, in MB."""
    pids = _descendants(root_pids, _children())
    return sum(memory_kb(pid)["rss"] for pid in pids) / 1024.0


def session_breakdown(tui_pid, daemon_pid) -> dict:
    """Memory (KB, as `memory_kb`) of the TUI (with any children), the daemon alone,
    and the daemon's descendants (the worker, and its tools if any run), by role."""
    children = _children()
    workers = _descendants(children.get(daemon_pid, []), children)
    groups = {"TUI": _descendants([tui_pid], children), "daemon": [daemon_pid], "worker": workers}
    breakdown = {}
    for role, pids in groups.items():
        total = {"rss": 0, "pss": 0, "private": 0, "file": 0, "count": 0}
        for pid in pids:
            for key, value in memory_kb(pid).items():
                total[key] += value
            total["count"] += 1
        breakdown[role] = total
    return breakdown


def add_breakdown(ctx, measure, breakdowns, note):
    """The tree row (summed VmRSS over `breakdowns`, one per session: median, min–max, n)
    and one row per role from the median session by summed VmRSS (the lower of the two
    middle ones when n is even), so the role rows add up to the tree row's median; their
    Pss, private and file-backed memory in the note, and with several sessions the
    role's range over them."""

    def mb(kb):
        return kb / 1024.0

    def total(breakdown):
        return sum(breakdown[role]["rss"] for role in ROLES)

    ordered = sorted(breakdowns, key=total)
    middle = ordered[(len(ordered) - 1) // 2]
    which = "the median session's" if len(breakdowns) > 1 else "the session's"
    ctx.results.add("tui", measure, [mb(total(b)) for b in breakdowns], "MB",
                    f"{note}; summed VmRSS; {which} summed Pss "
                    f"{mb(sum(middle[role]['pss'] for role in ROLES)):.2f} MB (the binary's shared "
                    "text counted once)")
    for role in ROLES:
        figures = middle[role]
        if figures["count"] == 0:
            ctx.results.missing("tui", f"{measure}: {role}", "no process", note)
            continue
        spread = ""
        if len(breakdowns) > 1:
            values = sorted(mb(b[role]["rss"]) for b in breakdowns)
            spread = f"; {values[0]:.2f}–{values[-1]:.2f} MB over the {len(values)} sessions"
        ctx.results.add("tui", f"{measure}: {role}", [mb(figures["rss"])], "MB",
                        f"VmRSS ({which}); Pss {mb(figures['pss']):.2f}, private "
                        f"{mb(figures['private']):.2f}, file-backed {mb(figures['file']):.2f} MB; "
                        f"{figures['count']} process(es){spread}")


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


def page_cache_from_exec(binary: Path):
    """Drops the binary's pages from the page cache (only this file's, and only pages no
    running process maps) and runs it once, so its pages come back the way they do
    after a reboot or an install: read by exec's faults. How they got into the cache
    decides the size of the page-cache folios, and a fault maps a whole folio: the same
    binary freshly written by `cp` measured 3.6 MB more summed VmRSS (TUI + daemon +
    worker) than after this. Without it rows would depend on how the build wrote it."""
    fd = os.open(binary, os.O_RDONLY)
    try:
        os.fsync(fd)  # dirty pages (just linked) cannot be dropped
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    finally:
        os.close(fd)
    subprocess.run([str(binary), "--version"], capture_output=True, timeout=30)


def tui(ctx):
    """The TUI rows: measured when `kestrel` paints in a pty, "not built yet" otherwise."""
    page_cache_from_exec(ctx.kestrel)
    daemon_idle(ctx)
    home = ctx.work / "home-tui"
    # A configured model whose server is a closed port: start-up needs no model.
    Kestrel.configure(home, "http://127.0.0.1:9/v1")
    env = clean_env(KESTREL_HOME=home)
    codex_reference(ctx)
    try:
        _kestrel_tui(ctx, home, env)
    finally:
        # The TUI starts a detached daemon after its first frame: leave none behind.
        _daemon(ctx, env, "stop")


def _kestrel_tui(ctx, home, env):
    probe = start_in_pty([str(ctx.kestrel)], env, ctx.work)
    if probe.exited or probe.marker_ms is None:
        said = probe.output.strip().splitlines()[-1:] or ["(nothing)"]
        for measure in TUI_MEASURES:
            ctx.results.missing("tui", measure, "not built yet", f"`kestrel` in a pty said: {said[0][:100]}")
        return
    # Daemon started on demand: a home with no daemon running.
    _measure_starts(ctx, env, "daemon started on demand", before=lambda: _daemon(ctx, env, "stop"))
    if _daemon(ctx, env, "start"):
        _measure_starts(ctx, env, "daemon up", before=lambda: None, home=home)
        _measure_early_typing(ctx, env, "daemon up")
        _daemon(ctx, env, "stop")
    else:
        for measure in ("first paint (daemon up)", "input-ready (daemon up)",
                        "first paint, typing at first output (daemon up)",
                        "typed at first output, on screen (daemon up)",
                        "typed at first output, after the first frame (daemon up)",
                        "idle RSS: TUI + daemon, no session yet"):
            ctx.results.missing("tui", measure, "not built yet", "`kestrel daemon start` failed")
    if ctx.scripted_model is None:
        for measure in TUI_MEASURES[-3:]:  # the session rows
            ctx.results.missing("tui", measure, "not measured", "no scripted-model binary")
        return
    _session_measures(ctx)


def _daemon(ctx, env, action) -> bool:
    run = run_process([str(ctx.kestrel), "daemon", action], env=env, cwd=ctx.work, timeout=30)
    return run.exit_code == 0


def _measure_starts(ctx, env, label, before, home=None):
    """Starts the TUI `runs` times; with `home` (daemon up), also the idle RSS of the
    TUI's tree plus the daemon's 1 s after input-ready. No prompt was sent, so no worker
    runs yet (a worker starts with the first turn): see the session rows for that."""

    def idle_rss(pid):
        time.sleep(1.0)
        daemon = int((home / "run" / "daemon.pid").read_text().strip())
        return tree_rss_mb([pid, daemon])

    paint, ready, rss = [], [], []
    for _ in range(ctx.runs):
        before()
        run = start_in_pty([str(ctx.kestrel)], env, ctx.work, when_ready=idle_rss if home else None)
        if run.first_output_ms is not None:
            paint.append(run.first_output_ms)
        if run.marker_ms is not None:
            ready.append(run.marker_ms)
        if run.measured is not None:
            rss.append(run.measured)
    for measure, values in ((f"first paint ({label})", paint), (f"input-ready ({label})", ready)):
        if values:
            ctx.results.add("tui", measure, values, "ms", f"{COLUMNS}x{ROWS} pty, warm")
        else:
            ctx.results.missing("tui", measure, "not seen", "no output / marker within 3 s")
    if home is not None:
        measure = "idle RSS: TUI + daemon, no session yet"
        if rss:
            ctx.results.add("tui", measure, rss, "MB",
                            "VmRSS of the TUI, the daemon and their children 1 s after input-ready")
        else:
            ctx.results.missing("tui", measure, "not seen", "the TUI never became input-ready")


def _measure_early_typing(ctx, env, label):
    """Starts the TUI `runs` times, EARLY_TEXT typed at its first output: the first
    frame must not wait for the typing, and the typed text must ride on it or follow
    within a frame's work."""
    paint, drawn, after = [], [], []
    for _ in range(ctx.runs):
        run = type_at_first_output([str(ctx.kestrel)], env, ctx.work)
        if run.first_paint_ms is not None:
            paint.append(run.first_paint_ms)
        if run.drawn_ms is not None:
            drawn.append(run.drawn_ms)
        if run.first_paint_ms is not None and run.drawn_ms is not None:
            after.append(run.drawn_ms - run.first_paint_ms)
    note = (f"{COLUMNS}x{ROWS} pty, warm, echo off; `{EARLY_TEXT}` written once at the "
            "program's first output")
    for measure, values, extra in (
            (f"first paint, typing at first output ({label})", paint, ""),
            (f"typed at first output, on screen ({label})", drawn,
             "; when Kestrel draws the text"),
            (f"typed at first output, after the first frame ({label})", after,
             "; per start, the text drawn minus the first paint (0: on the first frame)")):
        if values:
            ctx.results.add("tui", measure, values, "ms", note + extra)
        else:
            ctx.results.missing("tui", measure, "not seen", f"not drawn within 3 s; {note}")


def codex_reference(ctx):
    """Codex's TUI measured the same way: the figure Kestrel's TUI will be held against.
    Its home lies outside /tmp (in /tmp Codex prints a warning first, which would count
    as its first paint); its provider points at a closed port, so nothing waits on a model."""
    if ctx.codex is None:
        return
    home = Path.home() / ".cache" / "kestrel-bench" / f"codex-tui-home-{os.getpid()}"
    Codex.configure(home, "http://127.0.0.1:9/v1")
    env = clean_env(CODEX_HOME=home)
    paint, ready, rss = [], [], []

    def idle_rss(pid):
        time.sleep(1.0)
        return tree_rss_mb([pid])

    try:
        start_in_pty([str(ctx.codex)], env, ctx.work, timeout=5)  # warm-up (first start writes its home)
        for _ in range(ctx.runs):
            run = start_in_pty([str(ctx.codex)], env, ctx.work, timeout=5, when_ready=idle_rss)
            if run.first_output_ms is not None:
                paint.append(run.first_output_ms)
            if run.marker_ms is not None:
                ready.append(run.marker_ms)
            if run.measured is not None:
                rss.append(run.measured)
    finally:
        shutil.rmtree(home, ignore_errors=True)
    note = f"{ctx.codex.name} TUI, same pty and method; Kestrel's TUI is measured the same way"
    for measure, values, unit in (("Codex first paint (reference)", paint, "ms"),
                                  ("Codex input-ready (reference)", ready, "ms"),
                                  ("Codex idle RSS of its tree, 1 s after input-ready (reference)", rss, "MB")):
        if values:
            ctx.results.add("tui", measure, values, unit, note)
        else:
            ctx.results.missing("tui", measure, "not seen", note)


class Screen:
    """Just enough of a terminal to read what ratatui drew: cursor moves (CUP), clears
    (ED 2, EL), printable text (wide characters take two cells); colours and modes are
    skipped. Needed because a frame rewrites only the cells that changed, so the text of
    a line is not always contiguous in the output."""

    CSI = re.compile(rb"\x1b\[([0-?]*)([ -/]*)([@-~])")

    def __init__(self, rows=ROWS, cols=COLUMNS):
        self.rows, self.cols = rows, cols
        self.grid = [[" "] * cols for _ in range(rows)]
        self.row = self.col = 0
        self.pending = b""

    def feed(self, data: bytes):
        data = self.pending + data
        i = 0
        while i < len(data):
            byte = data[i]
            if byte == 0x1B:
                csi = self.CSI.match(data, i)
                if csi:
                    self._csi(csi.group(1).decode(), csi.group(3).decode())
                    i = csi.end()
                    continue
                other = ESCAPES.match(data, i)
                if other:
                    i = other.end()
                    continue
                if len(data) - i < 64:  # an escape cut in two: wait for the rest
                    break
                i += 1
            elif byte == 0x0D:
                self.col, i = 0, i + 1
            elif byte == 0x0A:
                self.row, i = min(self.row + 1, self.rows - 1), i + 1
            elif byte < 0x20 or byte == 0x7F:
                i += 1
            else:
                length = 1 if byte < 0x80 else 2 if byte < 0xE0 else 3 if byte < 0xF0 else 4
                if i + length > len(data):
                    break
                self._put(data[i:i + length].decode(errors="replace"))
                i += length
        self.pending = data[i:]

    def _put(self, char: str):
        wide = unicodedata.east_asian_width(char) in ("W", "F")
        if unicodedata.combining(char):
            return
        if self.col < self.cols:
            self.grid[self.row][self.col] = char
            if wide and self.col + 1 < self.cols:
                self.grid[self.row][self.col + 1] = ""
        self.col += 2 if wide else 1

    def _csi(self, params: str, final: str):
        numbers = [int(part) if part.isdigit() else 0 for part in params.split(";")] if params else []
        if final == "H":
            row = numbers[0] if numbers and numbers[0] else 1
            col = numbers[1] if len(numbers) > 1 and numbers[1] else 1
            self.row, self.col = min(row, self.rows) - 1, min(col, self.cols) - 1
        elif final == "J" and numbers[:1] == [2]:
            self.grid = [[" "] * self.cols for _ in range(self.rows)]
        elif final == "K":
            for col in range(self.col, self.cols):
                self.grid[self.row][col] = " "

    def text(self) -> str:
        return "\n".join("".join(row).rstrip() for row in self.grid)


class TuiSession:
    """`kestrel` on a 120x40 pty, its output fed to a Screen; keys typed through the
    master side (echo off, as in `start_in_pty`)."""

    def __init__(self, argv, env, cwd):
        self.master, slave = os.openpty()
        fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", ROWS, COLUMNS, 0, 0))
        env = dict(env, TERM="xterm-256color", COLUMNS=str(COLUMNS), LINES=str(ROWS))
        self.proc = subprocess.Popen(argv, env=env, cwd=cwd, stdin=slave, stdout=slave,
                                     stderr=slave, preexec_fn=_controlling_tty, close_fds=True)
        os.close(slave)
        self.screen = Screen()

    def wait_for(self, text: str, timeout: float = 10.0) -> float:
        """Reads output until `text` is on screen; returns the time it showed
        (perf_counter). Fails after `timeout` s."""
        deadline = time.perf_counter() + timeout
        while text not in self.screen.text():
            left = deadline - time.perf_counter()
            if left <= 0 or self.proc.poll() is not None:
                raise BenchError(f"{text!r} never showed; the screen:\n{self.screen.text()}")
            ready, _, _ = select.select([self.master], [], [], min(left, 0.05))
            if ready:
                try:
                    chunk = os.read(self.master, 65536)
                except OSError:
                    chunk = b""
                answer_queries(self.master, chunk)
                self.screen.feed(chunk)
        return time.perf_counter()

    def type(self, text: str):
        os.write(self.master, text.encode())

    def close(self):
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)
        self.proc.wait()
        os.close(self.master)


TURNS = 50
# The end of the first turn's answer, after its tool calls.
TOOLS_ANSWER = "kbench-tools-done"
# Answers show code: the first code block loads syntax highlighting into the TUI, which
# a session with no code on screen would never measure.
CODE_ANSWER = ("Patched it:\n\n```rust\nfn main() {\n    let notes = std::fs::read_to_string(\"notes.txt\");\n"
               "    println!(\"{notes:?}\");\n}\n```\n\nand to check:\n\n```python\nprint(open('notes.txt')"
               ".read().upper())\n```\n\n" + TOOLS_ANSWER)
# The file the first turn reads, greps and patches, created in each session's cwd.
NOTES = "notes.txt"
NOTES_BEFORE = "alpha\nbeta\ngamma\n"
NOTES_AFTER = "alpha\nBETA\ngamma\n"
PATCH = f"*** Begin Patch\n*** Update File: {NOTES}\n@@\n alpha\n-beta\n+BETA\n*** End Patch\n"
# What the screen shows for each tool call of the first turn once it succeeded.
TOOL_CELLS = ("✓ shell: echo hi", f"✓ read_file: {NOTES}", "✓ grep: gamma", f"✓ apply_patch: {NOTES}")
TOOLS_NOTE = ("its first turn ran shell, read_file, grep and apply_patch (mode auto) and "
              "answered with a Rust and a Python code block")


def idle_sessions(runs: int) -> int:
    """How many fresh sessions the idle row takes its median over."""
    return max(3, min(runs, 5))


def tools_turn() -> list:
    """The scripted steps of a first turn as a user's: shell, read_file, grep and
    apply_patch (argument `patch`, as kestrel-tools' apply_patch takes it), then an
    answer with code blocks. A session that ran tools holds more in its worker than one
    that only chatted, and code on screen more in the TUI."""
    return [tool_step("shell", {"command": "echo hi"}),
            tool_step("read_file", {"path": NOTES}),
            tool_step("grep", {"pattern": "gamma"}),
            tool_step("apply_patch", {"patch": PATCH}),
            step(CODE_ANSWER)]


def _check_tools_turn(session, cwd: Path):
    """Fails unless the first turn's tools all succeeded: a ✓ cell for each on screen,
    no ✗, and the patch applied to the file. A broken session must not be measured."""
    screen = session.screen.text()
    lines = screen.splitlines()
    missing = [cell for cell in TOOL_CELLS if cell not in screen]
    # A failed cell's next line carries the error.
    failed = [" ".join(lines[i:i + 2]) for i, line in enumerate(lines) if "✗" in line]
    if missing or failed:
        raise BenchError(f"the tools turn did not succeed: not shown {missing}, failed {failed}; "
                         f"the screen:\n{screen}")
    patched = (cwd / NOTES).read_text()
    if patched != NOTES_AFTER:
        raise BenchError(f"apply_patch did not patch {NOTES}: it holds {patched!r}")


def _run_session(ctx, name: str, replies: list, timed: int):
    """A fresh session: its own home (mode auto) and cwd, the daemon started, the TUI
    started, the tools turn (checked), 1 s idle and the tree's breakdown; then one turn
    per reply (Enter to reply timed for the first `timed`), 1 s idle and the breakdown
    again if there were any; the TUI closed and the daemon stopped. Returns (breakdown
    after the first turn, Enter-to-reply ms, breakdown after the last turn or None)."""
    home, cwd = ctx.work / f"home-{name}", ctx.work / f"cwd-{name}"
    for path in (home, cwd):
        shutil.rmtree(path, ignore_errors=True)
    cwd.mkdir(parents=True)
    (cwd / NOTES).write_text(NOTES_BEFORE)
    enter_ms = []
    after_all = None
    with ScriptedServer(ctx.scripted_model, tools_turn() + [step(reply) for reply in replies],
                        ctx.work) as server:
        Kestrel.configure(home, server.base_url)
        # Without a mode the TUI asks before apply_patch; auto is what a user leaves on.
        config = home / "config.toml"
        config.write_text('mode = "auto"\n' + config.read_text())
        env = clean_env(KESTREL_HOME=home)
        if not _daemon(ctx, env, "start"):
            raise BenchError("`kestrel daemon start` failed")
        session = None
        try:
            session = TuiSession([str(ctx.kestrel)], env, cwd)
            session.wait_for("daemon ready")
            daemon = int((home / "run" / "daemon.pid").read_text().strip())
            session.type("run the tools")
            session.wait_for("› run the tools")
            session.type("\r")
            session.wait_for(TOOLS_ANSWER, timeout=30.0)  # the worker starts with this turn
            session.wait_for("● ready")
            _check_tools_turn(session, cwd)
            time.sleep(1.0)
            after_one = session_breakdown(session.proc.pid, daemon)
            for turn, reply in enumerate(replies):
                prompt = f"question {turn:03d}"
                session.type(prompt)
                session.wait_for(f"› {prompt}")
                sent = time.perf_counter()
                session.type("\r")
                shown = session.wait_for(reply, timeout=30.0)
                if turn < timed:
                    enter_ms.append((shown - sent) * 1000.0)
                session.wait_for("● ready")
            if replies:
                time.sleep(1.0)
                after_all = session_breakdown(session.proc.pid, daemon)
        finally:
            if session is not None:
                session.close()
            _daemon(ctx, env, "stop")
    return after_one, enter_ms, after_all


def _session_measures(ctx):
    """Sessions against the scripted model whose first turn runs tools (`tools_turn`),
    as a user's does. Idle after 1 turn: `idle_sessions` fresh sessions, each measured
    1 s after its first answer (the median session's processes in the per-role rows).
    One more session goes on to TURNS turns: the Enter-to-reply times (turns 2.., the
    reply one short line, so on screen once its text is) and the tree 1 s after the last."""
    idle = "idle RSS of the tree with a worker, after 1 turn"
    many = f"idle RSS of the tree after a {TURNS}-turn session"
    try:
        after_one = [_run_session(ctx, f"tui-session-{index}", [], 0)[0]
                     for index in range(idle_sessions(ctx.runs))]
    except BenchError as error:
        ctx.results.missing("tui", idle, "failed", str(error).splitlines()[0][:200])
    else:
        add_breakdown(ctx, idle, after_one,
                      f"{len(after_one)} fresh sessions, each 1 s after its first answer; {TOOLS_NOTE}")
    replies = [f"kbench-reply-{turn:03d}" for turn in range(1, TURNS)]
    try:
        _, enter_ms, after_all = _run_session(ctx, "tui-session-long", replies, max(ctx.runs, 1))
    except BenchError as error:
        for measure in (many, "Enter to reply on screen"):
            ctx.results.missing("tui", measure, "failed", str(error).splitlines()[0][:200])
        return
    ctx.results.add("tui", "Enter to reply on screen", enter_ms, "ms",
                    f"{COLUMNS}x{ROWS} pty, daemon and worker up, one-line scripted reply")
    add_breakdown(ctx, many, [after_all],
                  f"one session, 1 s after turn {TURNS}; {TOOLS_NOTE}")
