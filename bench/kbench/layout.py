"""Makes crates/kestrel-cli/hot-symbols.txt: the functions a session runs, in the order the
linker should place them (crates/kestrel-cli/build.rs turns the file into keys that
crates/kestrel-cli/code-layout.sh, the workspace's linker, resolves to an ordering file for
LLD in release builds).

    python3 bench/kbench/layout.py [--keep DIR] [--dry-run]
    python3 bench/kbench/layout.py --check MAP    # CI: is the list still this build's?

Why: a process's resident code is every 4 KB page it ever touched, and the kernel maps
64 KB around each fault. Start-up and an idle session run a few thousand functions spread
over 10 MB of text, so the TUI, the daemon and the worker each held 4-6 MB of code. Placed
together, they fit in a fraction of that (bench/RESULTS.md, 2026-11-30).

How: a release build that also writes a link map (`KESTREL_LINK_MAP`), then a session run
under `valgrind --tool=callgrind --trace-children=yes` against the scripted model: the
daemon, a TUI session of three turns with tool calls in mode auto and answers with code
blocks (so the worker's tool, sandbox and checkpoint code and the TUI's highlighting are
in; the bench's idle-tree row measures such a session, with other calls),
`kestrel exec` with tools, `kestrel sessions`. Every executed address is mapped to the
function (input section) holding it. Functions are grouped by the set of processes that
ran them and the groups laid out so that each process's functions are close to
contiguous: TUI-only, TUI+worker, TUI+daemon, all three, daemon-only, daemon+worker,
worker-only, then what only the short commands ran. Within a group, original address
order (keeps each crate's code together).

The list names symbols. With v0 mangling (.cargo/config.toml) a function's name is its
path plus its crate's disambiguator, which cargo derives from the crate's `-C metadata`:
version, dependencies, features, profile and toolchain (not RUSTFLAGS, not the source).
So most edits keep names, but not all: a renamed, moved or inlined function; methods of
an `impl` block after one added or removed in the same module (v0 numbers the blocks); a
version bump and a new toolchain. A build whose RUSTFLAGS drop the v0 setting (RUSTFLAGS in
the environment replace .cargo/config.toml's) gets legacy names, which the list does not
hold. Two drifts are taken out: functions ThinLTO promoted out of their module are
`NAME.llvm.<hash>` in the build, the hash changing with any edit of their crate (or of
code inlined into it) and, for dependencies, with the CARGO_HOME path, so the list holds
them as `NAME` (~6% of it); and a dependency added to a crate changes the disambiguator of
it and of every crate above it, so the names are matched with every `Cs<hash>_` and
back-reference a wildcard (`layout_key`, as build.rs and code-layout.sh do). Names not found are
skipped by the linker (only the layout suffers: each costs every process that runs it a
64 KB fault-around window). `.ci/run` links with a map and runs `--check`: it fails when
less than 99% of the listed functions, or 99.5% of Kestrel's own, are in the build, and
prints the missing; then run this script (about 5 minutes: two release links and a
minute under valgrind) and commit the file.
"""

import argparse
import bisect
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from kbench import tui  # noqa: E402
from kbench.agents import Kestrel, clean_env  # noqa: E402
from kbench.measure import ScriptedServer, step, tool_step  # noqa: E402

REPO = Path(__file__).resolve().parents[2]
OUTPUT = REPO / "crates" / "kestrel-cli" / "hot-symbols.txt"
ROLES = ("tui", "daemon", "worker", "command")
# Groups by the roles that ran a function, in layout order (see the module docs).
GROUP_ORDER = (
    {"tui"}, {"tui", "worker"}, {"tui", "daemon"}, {"tui", "daemon", "worker"},
    {"daemon"}, {"daemon", "worker"}, {"worker"},
)
TIMEOUT = 300.0


def build(work: Path) -> tuple:
    """The release binary with its link map, and the scripted model server."""
    target = Path(os.environ.get("CARGO_TARGET_DIR", REPO / "target"))
    link_map = work / "kestrel.map"
    # RUSTFLAGS would replace .cargo/config.toml's v0 mangling, which the names rely on.
    env = {key: value for key, value in os.environ.items() if key != "RUSTFLAGS"}
    env["KESTREL_LINK_MAP"] = str(link_map)
    for package, binary in (("kestrel-cli", "kestrel"), ("kestrel-testkit", "scripted-model")):
        subprocess.run(["cargo", "build", "--release", "-p", package, "--bin", binary],
                       cwd=REPO, env=env, check=True)
    if not link_map.is_file():
        raise SystemExit("the build wrote no link map: is the linker LLD (build.rs)?")
    return target / "release" / "kestrel", target / "release" / "scripted-model", link_map


def functions(link_map: Path) -> tuple:
    """Start addresses, ends and symbol names of the functions in `.text`: the input
    sections `.text.<symbol>` (Rust and C code are built with one section per function;
    LLVM names cold ones `.text.unlikely.<symbol>`). The map's symbol column is demangled,
    the ordering file needs the mangled name, which the section name carries."""
    section = re.compile(r"^\s*([0-9a-f]+)\s+[0-9a-f]+\s+([0-9a-f]+)\s+\d+\s+\S.*:\(\.text\.([^)]+)\)$")
    rows = []
    for line in link_map.read_text(errors="replace").splitlines():
        found = section.match(line)
        if found:
            start, size = int(found.group(1), 16), int(found.group(2), 16)
            name = re.sub(r"^(unlikely|hot|startup|exit|split)\.", "", found.group(3))
            if size:
                rows.append((start, start + size, name))
    rows.sort()
    return [row[0] for row in rows], [row[1] for row in rows], [row[2] for row in rows]


def role_of(command: str, binary: Path) -> str:
    """The process a callgrind file is of, from its command line (`BINARY ARGS...`; the
    binary's path may hold spaces, so it is matched whole, as given or resolved)."""
    command = command.strip()
    for path in (str(binary), os.path.realpath(binary)):
        if command == path or command.startswith(path + " "):
            words = command[len(path):].split()
            break
    else:
        return "other"
    if words == ["daemon"]:  # started by `daemon start` or a client (kestrel-daemon client.rs)
        return "daemon"
    if words == ["worker"]:
        return "worker"
    if not words or words[0].startswith("-"):
        return "tui"
    return "command"


def executed(out_dir: Path, binary: Path) -> dict:
    """Role -> executed addresses in `binary`, from every callgrind file in `out_dir`."""
    by_role = {role: set() for role in ROLES}
    objects = {str(binary), os.path.realpath(binary)}
    for path in out_dir.glob("cg.*"):
        text = path.read_text(errors="replace")
        command = re.search(r"^cmd:\s*(.*)$", text, re.M)
        role = role_of(command.group(1), binary) if command else "other"
        if role == "other":
            continue
        inside = False
        for line in text.splitlines():
            if line.startswith("ob="):
                inside = line[3:].strip() in objects
            elif inside and line.startswith("0x"):
                by_role[role].add(int(line.split(None, 1)[0], 16))
    return by_role


def tool_errors(home: Path) -> list:
    """Tool results of every recorded session that are errors: a profile of a failed call
    would miss the tool's code."""
    errors = []
    for record in (home / "sessions").rglob("*.jsonl"):
        if record.name == "index.jsonl":
            continue
        for line in record.read_text().splitlines():
            try:
                item = json.loads(line)
            except ValueError:
                continue
            if item.get("type") == "tool_result" and item.get("is_error"):
                errors.append(f"{record.name}: {str(item.get('output'))[:200]}")
    return errors


def run_session(kestrel: Path, scripted: Path, work: Path, out_dir: Path):
    """Daemon, TUI (three turns with tools), exec with tools and sessions, all under
    callgrind; each process writes `out_dir/cg.<pid>`."""
    valgrind = ["valgrind", "--tool=callgrind", "--trace-children=yes", "--dump-instr=yes",
                "--trace-children-skip=/usr/*,/bin/*,/sbin/*",
                "--compress-pos=no", "--compress-strings=no",
                f"--callgrind-out-file={out_dir}/cg.%p"]
    home, cwd = work / "home", work / "project"
    cwd.mkdir(parents=True, exist_ok=True)
    (cwd / "notes.txt").write_text("alpha\nbeta\ngamma\n")
    subprocess.run(["git", "init", "-q", str(cwd)], check=True)
    patch = "*** Begin Patch\n*** Update File: notes.txt\n@@\n alpha\n-beta\n+BETA\n*** End Patch\n"
    code = ("Done:\n\n```rust\nfn main() {\n    println!(\"hi\");\n}\n```\n\n```sh\ncargo test\n```"
            "\n\n```json\n{\"a\": [1, 2]}\n```\n\n")
    # Other tools and arguments than the bench's measured session (bench/kbench/tui.py), so
    # the list is not fitted to that one script.
    turns = [
        [tool_step("shell", {"command": "ls -la && echo done"}),
         tool_step("list_dir", {"path": "."}), tool_step("glob", {"pattern": "*.txt"}),
         step(code + "turn one done")],
        # A regular expression and a plain word: grep compiles them differently.
        [tool_step("read_file", {"path": "notes.txt"}), tool_step("grep", {"pattern": "gam+a"}),
         tool_step("grep", {"pattern": "beta"}),
         tool_step("write_file", {"path": "new.txt", "content": "one\ntwo\n"}),
         tool_step("edit_file", {"path": "new.txt", "old_string": "two", "new_string": "three"}),
         step("turn two done")],
        [tool_step("apply_patch", {"patch": patch}), step(code + "turn three done")],
    ]
    steps = [item for turn in turns for item in turn]
    with ScriptedServer(scripted, steps, work) as server:
        Kestrel.configure(home, server.base_url)
        (home / "config.toml").write_text('mode = "auto"\n' + (home / "config.toml").read_text())
        env = clean_env(KESTREL_HOME=home)
        session = None
        try:
            subprocess.run([*valgrind, str(kestrel), "daemon", "start"], env=env, cwd=cwd,
                           check=True, capture_output=True, timeout=TIMEOUT)
            session = tui.TuiSession([*valgrind, str(kestrel)], env, cwd)
            session.wait_for("daemon ready", timeout=TIMEOUT)
            for number, prompt in enumerate(("one", "two", "three")):
                session.type(f"turn {prompt}")
                session.wait_for(f"› turn {prompt}", timeout=TIMEOUT)
                session.type("\r")
                session.wait_for(f"turn {prompt} done", timeout=TIMEOUT)
                session.wait_for("● ready", timeout=TIMEOUT)
                if number == 0:
                    time.sleep(2.0)  # idle ticks (status line, timers) count too
            session.type("\x03")
            time.sleep(1.0)
            session.type("\x03")
            session.proc.wait(timeout=TIMEOUT)
        finally:
            if session and session.proc.poll() is None:
                os.killpg(session.proc.pid, signal.SIGKILL)
                session.proc.wait()
            subprocess.run([*valgrind, str(kestrel), "daemon", "stop"], env=env, cwd=cwd,
                           capture_output=True, timeout=TIMEOUT)
    with ScriptedServer(scripted, [tool_step("shell", {"command": "echo hi"}),
                                   tool_step("read_file", {"path": "notes.txt"}),
                                   step("exec done")], work) as server:
        Kestrel.configure(home, server.base_url)
        for argv in (["exec", "say hi"], ["sessions"]):
            subprocess.run([*valgrind, str(kestrel), *argv], env=env, cwd=cwd,
                           check=True, capture_output=True, timeout=TIMEOUT)
    if "BETA" not in (cwd / "notes.txt").read_text() or (cwd / "new.txt").read_text() != "one\nthree\n":
        raise SystemExit("the profiled apply_patch, write_file or edit_file call changed nothing")
    errors = tool_errors(home)
    if errors:
        raise SystemExit("profiled tool calls failed:\n" + "\n".join(errors))


def order(starts, ends, names, by_role) -> list:
    """Symbol names in layout order (see the module docs)."""
    roles_of = {}
    for role, addresses in by_role.items():
        for address in addresses:
            index = bisect.bisect_right(starts, address) - 1
            if index >= 0 and address < ends[index]:
                roles_of.setdefault(index, set()).add(role)
    groups = [[] for _ in range(len(GROUP_ORDER) + 1)]
    for index in sorted(roles_of):
        session_roles = roles_of[index] - {"command"}
        slot = GROUP_ORDER.index(session_roles) if session_roles else len(GROUP_ORDER)
        groups[slot].append(names[index])
    listed, seen = [], set()
    for group in groups:
        for name in map(stable_name, group):
            if name not in seen:
                seen.add(name)
                listed.append(name)
    return listed, [len(group) for group in groups], roles_of


CRATE_HASH = re.compile(r"Cs[0-9A-Za-z]+_")
BACKREF = re.compile(r"B[0-9A-Za-z]*_")
IMPL_M = re.compile(r"Ms[0-9A-Za-z]*_")
IMPL_X = re.compile(r"Xs[0-9A-Za-z]*_")


def stable_name(name: str) -> str:
    """A symbol's name without the `.llvm.<hash>` ThinLTO gives the functions it promotes
    out of their module: what the list holds."""
    return name.split(".llvm.")[0]


def layout_key(name: str) -> str:
    """What a listed name is matched by: build.rs's `layout_key` (which code-layout.sh's
    awk repeats): no `.llvm.` hash, every crate disambiguator (`Cs<hash>_`) and then every
    back-reference (`B<offset>_`, which moves when a hash before it changes length) a
    wildcard, then impl block numbers (`Ms<n>_`, `Xs<n>_`, which an impl block added
    earlier in the module changes) dropped."""
    key = BACKREF.sub("B*_", CRATE_HASH.sub("Cs*_", stable_name(name)))
    return IMPL_X.sub("X", IMPL_M.sub("M", key))


def check(link_map: Path) -> int:
    """0 when hot-symbols.txt still names the functions of the build that wrote `link_map`:
    at least 99% of its names and 99.5% of those of Kestrel's own crates, a name counting
    as found when the build has a function of the same `layout_key`; and 99% of those found
    placed first in `.text`. Each function left out costs every process that runs it a
    64 KB fault-around window of code (35 renamed functions cost the idle tree 1.6 MB:
    bench/RESULTS.md, 2026-11-30, session 4)."""
    _, _, names = functions(link_map)
    present = {layout_key(name) for name in names}
    listed = [line.strip() for line in OUTPUT.read_text().splitlines() if line.strip()]
    old_style = sum(1 for name in listed if ".llvm." in name)
    listed = [layout_key(name) for name in listed]
    own = [name for name in listed if "kestrel" in name]
    failed = False
    for label, group, threshold in (("all", listed, 0.99), ("Kestrel's own crates", own, 0.995)):
        found = sum(1 for name in group if name in present)
        share = found / len(group) if group else 0.0
        print(f"{OUTPUT.relative_to(REPO)}: {found} of {len(group)} functions ({label}) are in "
              f"this build ({share:.1%}; at least {threshold:.1%} needed)")
        failed |= share < threshold
    # Found is not enough: the linker must also have put them first (a linker that
    # ignored the script, or a pattern that no longer matches the way build.rs writes it).
    keys = [layout_key(name) for name in names]  # in address order
    wanted = set(listed)
    hot_end = next((i for i, key in enumerate(keys) if key not in wanted), len(keys))
    placed = len({key for key in keys[:hot_end]})
    found_all = len(wanted & present)
    share = placed / found_all if found_all else 0.0
    print(f"{placed} of the {found_all} listed functions found are placed first in .text, "
          f"before any other ({share:.1%}; at least 99.0% needed)")
    failed |= share < 0.99
    missing = [name for name in own if name not in present]
    if missing:
        print("missing own functions (first 20):\n  " + "\n  ".join(missing[:20]))
    if old_style:
        print(f"note: {old_style} names of the list carry a .llvm. hash, which the build ignores; "
              "the next regeneration drops them", file=sys.stderr)
    if failed:
        print("The code layout no longer fits this build (functions renamed or gone: a dependency, "
              "version or toolchain change, or code moved), and each process of a session holds "
              "megabytes more code (bench/RESULTS.md). Regenerate it with "
              "`python3 bench/kbench/layout.py` and commit crates/kestrel-cli/hot-symbols.txt.",
              file=sys.stderr)
        return 1
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--keep", help="keep the build's map and the callgrind files here")
    parser.add_argument("--dry-run", action="store_true", help="print the summary only")
    parser.add_argument("--check", metavar="MAP", help="only check the list against this link map")
    arguments = parser.parse_args()
    if arguments.check:
        return check(Path(arguments.check))
    if not shutil.which("valgrind"):
        raise SystemExit("valgrind is needed (Debian: apt-get install valgrind)")
    work = Path(arguments.keep or tempfile.mkdtemp(prefix="kestrel-layout-"))
    work.mkdir(parents=True, exist_ok=True)
    out_dir = work / "callgrind"
    shutil.rmtree(out_dir, ignore_errors=True)
    out_dir.mkdir()
    try:
        kestrel, scripted, link_map = build(work)
        starts, ends, names = functions(link_map)
        run_session(kestrel, scripted, work, out_dir)
        by_role = executed(out_dir, kestrel)
        listed, sizes, roles_of = order(starts, ends, names, by_role)
        for role in ROLES:
            indices = [i for i, roles in roles_of.items() if role in roles]
            size = sum(ends[i] - starts[i] for i in indices)
            print(f"{role:8} {len(indices):6d} functions, {size / 1024:7.0f} KB of code")
            if not indices:
                raise SystemExit(f"no function ran in the {role} process: nothing written")
        labels = ["+".join(sorted(g)) for g in GROUP_ORDER] + ["commands only"]
        print("groups:", ", ".join(f"{label} {size}" for label, size in zip(labels, sizes)))
        if not arguments.dry_run:
            OUTPUT.write_text("".join(f"{name}\n" for name in listed))
            print(f"{len(listed)} symbols -> {OUTPUT.relative_to(REPO)}")
    finally:
        if not arguments.keep:
            shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
