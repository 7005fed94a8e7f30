#!/usr/bin/env python3
"""Kestrel's benchmark harness (issue 7). Builds the release binary, measures it against
the scripted model server (and Codex CLI on the same server, where installed), and
appends the results to bench/RESULTS.md. See bench/README.md.

    python3 bench/run.py [--runs 7] [--only exec,resume,swarm,...] [--skip-build] [--codex auto|off|PATH]
                         [--tree DIR] [--note TEXT] [--dry-run] [--rev COMMIT]
"""

import argparse
import contextlib
import json
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from kbench import recovery, report, scale, scenarios, swarm, tui  # noqa: E402
from kbench.agents import find_codex  # noqa: E402
from kbench.measure import BenchError, Results, run_checked, run_process, use_rusage_helper  # noqa: E402

GROUPS = ("build", "tui", "exec", "compare", "resume", "sessions", "store", "tools", "recovery", "swarm",
          "scale")
# Run only when asked for (`--only swarm`): it takes half an hour on a slow disk. `scale`
# runs thousands of sessions for minutes and needs gigabytes of memory.
SLOW_GROUPS = ("swarm", "scale")
BENCH_TARGETS = {"replay": "kestrel-store", "sessions": "kestrel-store", "swarm_status": "kestrel-store",
                 "tools": "kestrel-tools"}


def parse_arguments():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=7, help="runs per measure (default 7)")
    default_groups = [group for group in GROUPS if group not in SLOW_GROUPS]
    parser.add_argument("--only", default=",".join(default_groups),
                        help=f"comma-separated groups (default all but {','.join(SLOW_GROUPS)}): "
                        f"{','.join(GROUPS)}")
    parser.add_argument("--skip-build", action="store_true",
                        help="use the binaries already in the target dir")
    parser.add_argument("--codex", default="auto", help="Codex binary: auto (default), off, or a path")
    parser.add_argument("--tree", help="tree for the grep bench (default $CARGO_HOME/registry/src)")
    parser.add_argument("--note", default="", help="what this run is about (before/after of a change)")
    parser.add_argument("--dry-run", action="store_true", help="print the entry, do not append it")
    parser.add_argument("--rev", help="measure this commit, built in a clean worktree (target dir "
                        "$CARGO_TARGET_DIR or /var/tmp/kestrel-bench-target), not the checkout")
    arguments = parser.parse_args()
    groups = [group.strip() for group in arguments.only.split(",") if group.strip()]
    unknown = [group for group in groups if group not in GROUPS]
    if unknown:
        parser.error(f"unknown group(s) {', '.join(unknown)}; choose from {', '.join(GROUPS)}")
    if arguments.runs < 1:
        parser.error("--runs must be at least 1")
    arguments.groups = groups
    return arguments


# Set for --rev: cargo runs in the worktree with its own target dir.
CARGO_ENV = None


def target_dir(repo: Path) -> Path:
    try:
        run = run_checked(["cargo", "metadata", "--format-version", "1", "--no-deps"], cwd=repo,
                          env=CARGO_ENV, timeout=120)
        return Path(json.loads(run.stdout)["target_directory"])
    except BenchError:  # a half-edited workspace: fall back to where cargo would put it
        return Path((CARGO_ENV or os.environ).get("CARGO_TARGET_DIR") or repo / "target")


def cargo(repo: Path, *arguments: str):
    print(f"bench: cargo {' '.join(arguments)}", file=sys.stderr, flush=True)
    # RUSTFLAGS in the environment would replace .cargo/config.toml's v0 symbol names, and
    # the binary's code layout (crates/kestrel-cli/hot-symbols.txt) would not apply: the
    # bench measures the binary as `cargo build --release` makes it.
    env = {key: value for key, value in (CARGO_ENV or os.environ).items() if key != "RUSTFLAGS"}
    return run_checked(["cargo", *arguments], cwd=repo, env=env, timeout=3600)


def bench_binaries(repo: Path, target: Path, skip_build: bool) -> dict:
    """The Rust bench executables, built with `cargo bench --no-run` (or the newest built)."""
    found = {}
    if skip_build:
        for name in BENCH_TARGETS:
            candidates = [path for path in (target / "release" / "deps").glob(f"{name}-*")
                          if path.is_file() and path.suffix == "" and path.stat().st_mode & 0o111]
            if candidates:
                found[name] = max(candidates, key=lambda path: path.stat().st_mtime)
        return found
    for package in sorted(set(BENCH_TARGETS.values())):
        run = cargo(repo, "bench", "-p", package, "--no-run", "--message-format=json")
        for line in run.stdout.splitlines():
            message = json.loads(line) if line.startswith("{") else {}
            target_info = message.get("target", {})
            if message.get("executable") and "bench" in target_info.get("kind", []):
                found[target_info["name"]] = Path(message["executable"])
    return found


def build(repo: Path, target: Path, results: Results, skip_build: bool):
    if not skip_build:
        cargo(repo, "build", "--release", "-p", "kestrel-cli")
        cargo(repo, "build", "--release", "-p", "kestrel-testkit", "--bin", "scripted-model")
    kestrel = target / "release" / "kestrel"
    scripted = target / "release" / "scripted-model"
    for binary in (kestrel, scripted):
        if not binary.is_file():
            raise BenchError(f"{binary} is missing: run without --skip-build")
    return kestrel, scripted


def sizes(ctx):
    size_mb = ctx.kestrel.stat().st_size / 1e6
    ctx.results.add("build", "release binary (target/release/kestrel)", [size_mb], "MB",
                    "thin LTO, codegen-units 1, strip (Cargo.toml [profile.release])")
    prefix = ctx.work / "install"
    (prefix / "bin").mkdir(parents=True, exist_ok=True)
    shutil.copy2(ctx.kestrel, prefix / "bin" / "kestrel")
    installed = sum(path.stat().st_size for path in prefix.rglob("*") if path.is_file())
    ctx.results.add("build", "install (files under the prefix)", [installed / 1e6], "MB",
                    "the install is the one binary (ARCHITECTURE §2)")


def main() -> int:
    arguments = parse_arguments()
    repo = Path(__file__).resolve().parents[1]
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="kestrel-bench-") as work:
        use_rusage_helper(Path(work))
        if arguments.rev:
            with clean_worktree(repo, arguments.rev) as tree:
                text = measure(arguments, tree, Path(work), started)
        else:
            text = measure(arguments, repo, Path(work), started)
    print(text)
    if not arguments.dry_run:
        report.append(repo / "bench" / "RESULTS.md", text)
        print("bench: appended to bench/RESULTS.md", file=sys.stderr)
    return 0


@contextlib.contextmanager
def clean_worktree(repo: Path, rev: str):
    """A detached worktree of `rev` (the committed state only: the shared checkout may hold
    other engineers' half-done edits), removed afterwards; its builds go to a target dir
    kept between runs, so only what changed recompiles."""
    global CARGO_ENV
    tree = Path(tempfile.gettempdir()) / f"kestrel-bench-worktree-{os.getpid()}"
    run_checked(["git", "-C", str(repo), "worktree", "add", "--detach", str(tree), rev], timeout=120)
    CARGO_ENV = dict(os.environ)
    CARGO_ENV.setdefault("CARGO_TARGET_DIR", "/var/tmp/kestrel-bench-target")
    try:
        yield tree
    finally:
        CARGO_ENV = None
        run_process(["git", "-C", str(repo), "worktree", "remove", "--force", str(tree)], timeout=120)


def measure(arguments, repo: Path, work: Path, started: float) -> str:
    """Builds, runs the chosen groups in order, and returns the Markdown entry."""
    results = Results()
    target = target_dir(repo)
    kestrel, scripted = build(repo, target, results, arguments.skip_build)
    wants_rust = {"store", "tools", "resume", "sessions", "swarm"} & set(arguments.groups)
    bins = bench_binaries(repo, target, arguments.skip_build) if wants_rust else {}
    ctx = scenarios.Context(repo=repo, kestrel=kestrel, scripted_model=scripted, runs=arguments.runs,
                            work=work, results=results, bench_bins=bins,
                            codex=find_codex(arguments.codex))
    steps = {
        "build": lambda: sizes(ctx),
        "tui": lambda: tui.tui(ctx),
        "exec": lambda: (scenarios.exec_overhead(ctx), scenarios.exec_memory_after_turns(ctx)),
        "compare": lambda: scenarios.compare_codex(ctx),
        "resume": lambda: scenarios.resume(ctx),
        "sessions": lambda: scenarios.sessions(ctx),
        "store": lambda: (scenarios.in_process(ctx, "replay"), scenarios.in_process(ctx, "sessions")),
        "tools": lambda: scenarios.tools(ctx, arguments.tree),
        "recovery": lambda: recovery.restart(ctx),
        "swarm": lambda: swarm.group(ctx),
        "scale": lambda: scale.group(ctx),
    }
    with report.NoiseSampler() as noise:
        for group in GROUPS:
            if group not in arguments.groups:
                continue
            print(f"bench: {group}", file=sys.stderr, flush=True)
            group_started = time.monotonic()
            try:
                steps[group]()
            except BenchError as error:
                results.missing(group, "(group failed)", f"error: {error}")
                print(f"bench: {group} failed: {error}", file=sys.stderr)
            print(f"bench: {group} took {time.monotonic() - group_started:.0f} s", file=sys.stderr)
    return report.entry(results, report.machine(), report.commit(repo), arguments.runs,
                        noise.summary(), arguments.note, time.monotonic() - started)


if __name__ == "__main__":
    try:
        sys.exit(main())
    except BenchError as error:
        print(f"bench: {error}", file=sys.stderr)
        sys.exit(1)
