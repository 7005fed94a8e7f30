"""Instruction counts of one `kestrel` command under callgrind: a figure the load of a
shared machine does not move, for before/after pairs of an optimisation.

    python3 bench/kbench/instructions.py [--kestrel BIN] [--scripted BIN] SCENARIO...

Scenarios: `exec` (one request, chat), `unknown-tools` (10 calls of a tool that does not
exist, then an answer), `known-tools` (10 `read_file` calls, then an answer),
`sessions` (`kestrel sessions` over a home of 10k sessions; needs the `sessions` bench
binary from `cargo bench -p kestrel-store --no-run`). Prints one line per scenario:
the instructions of the kestrel process (all threads; children it spawns are not
counted), and the callgrind output file to open with `callgrind_annotate`."""

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from kbench.agents import Kestrel, clean_env  # noqa: E402
from kbench.measure import ScriptedServer, step, tool_step  # noqa: E402

REPO = Path(__file__).resolve().parents[2]


def callgrind(argv, env, cwd, out: Path) -> int:
    run = subprocess.run(["valgrind", "--tool=callgrind", f"--callgrind-out-file={out}", *argv],
                         env=env, cwd=cwd, capture_output=True, text=True, timeout=600)
    found = re.search(r"Collected : (\d+)", run.stderr)
    if run.returncode != 0 or not found:
        raise SystemExit(f"{argv[0]} failed ({run.returncode}): {run.stderr[-1500:]}")
    return int(found.group(1))


def exec_scenario(kestrel, scripted, work: Path, steps, name: str) -> tuple:
    home, cwd = work / f"home-{name}", work / "cwd"
    cwd.mkdir(exist_ok=True)
    (cwd / "notes.txt").write_text("a small file the model reads\n" * 20)
    with ScriptedServer(scripted, steps, work) as server:
        Kestrel.configure(home, server.base_url, "chat")
        out = work / f"callgrind.{name}"
        env = clean_env(KESTREL_HOME=home, KESTREL_CATALOG_URL="off")
        return callgrind([str(kestrel), "exec", "benchmark prompt"], env, cwd, out), out


def sessions_scenario(kestrel, work: Path) -> tuple:
    deps = REPO / "target" / "release" / "deps"
    benches = sorted((p for p in deps.glob("sessions-*") if os.access(p, os.X_OK) and p.suffix == ""),
                     key=lambda p: p.stat().st_mtime)
    if not benches:
        raise SystemExit("no sessions bench binary: cargo bench -p kestrel-store --no-run")
    home = work / "home-sessions"
    subprocess.run([str(benches[-1]), "--generate", str(home), "--sessions", "10000"],
                   check=True, capture_output=True, timeout=600)
    env = clean_env(KESTREL_HOME=home, KESTREL_CATALOG_URL="off")
    subprocess.run([str(kestrel), "sessions"], env=env, check=True, capture_output=True, timeout=60)
    out = work / "callgrind.sessions"
    return callgrind([str(kestrel), "sessions"], env, work, out), out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--kestrel", default=str(REPO / "target/release/kestrel"))
    parser.add_argument("--scripted", default=str(REPO / "target/release/scripted-model"))
    parser.add_argument("--keep", help="directory for the callgrind files (default: a temp dir, removed)")
    parser.add_argument("scenarios", nargs="+",
                        choices=["exec", "unknown-tools", "known-tools", "sessions"])
    arguments = parser.parse_args()
    if shutil.which("valgrind") is None:
        raise SystemExit("valgrind is not installed")
    work = Path(arguments.keep or tempfile.mkdtemp(prefix="kestrel-instr-"))
    work.mkdir(parents=True, exist_ok=True)
    try:
        for scenario in arguments.scenarios:
            if scenario == "sessions":
                count, out = sessions_scenario(arguments.kestrel, work)
            else:
                calls = {"exec": [],
                         "unknown-tools": [tool_step("noop", {})] * 10,
                         "known-tools": [tool_step("read_file", {"path": "notes.txt"})] * 10}[scenario]
                count, out = exec_scenario(arguments.kestrel, arguments.scripted, work,
                                           calls + [step("done")], scenario)
            print(f"{scenario}: {count / 1e6:.2f} M instructions ({out})")
    finally:
        if not arguments.keep:
            shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
