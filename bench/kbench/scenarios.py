"""The end-to-end measurements: each runs the release binary against the scripted model
server (one fresh server per run) and adds rows to the results."""

import json
import os
import shutil
from dataclasses import dataclass
from pathlib import Path

from .agents import Codex, Kestrel
from .measure import BenchError, Results, ScriptedServer, run_checked, step, tool_step

WIRES = ("chat", "responses", "anthropic")
# Extra round trips in the overhead script: enough that the per-trip figure is not
# lost in start-up noise, few enough to keep a run short.
ROUND_TRIPS = 20


@dataclass
class Context:
    repo: Path
    kestrel: Path
    scripted_model: Path
    runs: int
    work: Path
    results: Results
    bench_bins: dict
    codex: Path = None


def _exec_once(ctx, agent: Kestrel, wire: str, steps: list, cwd: Path, home: Path):
    with ScriptedServer(ctx.scripted_model, steps, ctx.work) as server:
        agent.configure(home, server.base_url, wire)
        run = agent.exec(home, cwd, "benchmark prompt")
    if run.exit_code != 0 or "done" not in run.stdout:
        raise BenchError(f"kestrel exec ({wire}) failed ({run.exit_code}): {run.stderr[-800:]}")
    return run


def _overhead_cwd(ctx) -> Path:
    cwd = ctx.work / "exec-cwd"
    cwd.mkdir(exist_ok=True)
    (cwd / "notes.txt").write_text("a small file the model reads\n" * 20)
    return cwd


def exec_overhead(ctx: Context):
    """Per model round trip: a script of ROUND_TRIPS read_file calls and an answer, minus
    a script of the answer alone, paired run by run (order alternating), per trip."""
    agent = Kestrel(ctx.kestrel)
    cwd = _overhead_cwd(ctx)
    calls = [tool_step("read_file", {"path": "notes.txt"})] * ROUND_TRIPS
    for wire in WIRES:
        single, multi = [], []
        home = ctx.work / f"home-exec-{wire}"
        _exec_once(ctx, agent, wire, [step("done")], cwd, home)  # warm-up
        for index in range(ctx.runs):
            order = [(single, [step("done")]), (multi, calls + [step("done")])]
            for bucket, steps in (order if index % 2 == 0 else order[::-1]):
                bucket.append(_exec_once(ctx, agent, wire, steps, cwd, home))
        group = f"exec ({wire})"
        r = ctx.results
        r.add(group, "one request: wall", [run.wall_ms for run in single], "ms",
              "process start to exit, model reply included")
        r.add(group, "one request: CPU (user+sys)", [run.cpu_ms for run in single], "ms")
        r.add(group, "one request: peak RSS", [run.maxrss_mb for run in single], "MB")
        pairs = list(zip(single, multi))
        r.add(group, "per round trip: wall", [(m.wall_ms - s.wall_ms) / ROUND_TRIPS for s, m in pairs],
              "ms", f"({ROUND_TRIPS} read_file round trips − 1 request) / {ROUND_TRIPS}, paired runs; "
              "includes the scripted server's latency")
        r.add(group, "per round trip: CPU", [(m.cpu_ms - s.cpu_ms) / ROUND_TRIPS for s, m in pairs],
              "ms", "kestrel process only (the server is another process)")


def exec_memory_after_turns(ctx: Context, trips: int = 50):
    """Peak RSS of an exec session of `trips` round trips, against one request."""
    agent = Kestrel(ctx.kestrel)
    cwd = _overhead_cwd(ctx)
    steps = [tool_step("read_file", {"path": "notes.txt"})] * trips + [step("done")]
    home = ctx.work / "home-exec-memory"
    runs = [_exec_once(ctx, agent, "chat", steps, cwd, home) for _ in range(ctx.runs)]
    ctx.results.add("exec (chat)", f"{trips} round trips: peak RSS", [run.maxrss_mb for run in runs], "MB",
                    "stand-in for 'RSS after a 50-turn session' until the TUI/daemon exist")
    ctx.results.add("exec (chat)", f"{trips} round trips: wall", [run.wall_ms for run in runs], "ms")


def _generate(ctx, bench: str, home: Path, *arguments: str) -> str:
    binary = ctx.bench_bins.get(bench)
    if binary is None:
        raise BenchError(f"the {bench} bench binary was not built")
    if home.exists():
        shutil.rmtree(home)
    run = run_checked([str(binary), "--generate", str(home), *arguments], timeout=600)
    return run.stdout.strip()


def resume(ctx: Context, sizes=(1_000, 10_000, 100_000)):
    """`kestrel exec resume ID PROMPT` of a record of N items, with one text reply: the
    whole resume (open and replay the record, rebuild the history, send all of it)."""
    agent = Kestrel(ctx.kestrel)
    cwd = _overhead_cwd(ctx)
    for items in sizes:
        home = ctx.work / f"home-resume-{items}"
        session_id = _generate(ctx, "replay", home, "--items", str(items))
        runs = []
        for _ in range(ctx.runs):
            with ScriptedServer(ctx.scripted_model, [step("done")], ctx.work) as server:
                agent.configure(home, server.base_url, "chat")
                run = agent.resume(home, cwd, session_id, "one more step")
            if run.exit_code != 0:
                raise BenchError(f"resume of {items} items failed: {run.stderr[-800:]}")
            runs.append(run)
        size_mb = sum(path.stat().st_size for path in (home / "sessions").rglob("*.jsonl")) / 1e6
        group = "resume (exec resume, end to end)"
        label = f"{items} items ({size_mb:.0f} MB home)" if size_mb >= 1 else f"{items} items"
        ctx.results.add(group, f"{label}: wall", [r.wall_ms for r in runs], "ms",
                        "includes sending the whole history to the model in one request")
        ctx.results.add(group, f"{label}: CPU", [r.cpu_ms for r in runs], "ms")
        ctx.results.add(group, f"{label}: peak RSS", [r.maxrss_mb for r in runs], "MB")
        shutil.rmtree(home)


def sessions(ctx: Context, count: int = 10_000):
    """`kestrel sessions` over a home with `count` sessions: warm (index present) and
    cold (index deleted first, so it is rebuilt from every record)."""
    agent = Kestrel(ctx.kestrel)
    home = ctx.work / "home-sessions"
    _generate(ctx, "sessions", home, "--sessions", str(count))
    index = home / "sessions" / "index.jsonl"
    warm, cold = [], []
    agent.sessions(home, ctx.work)  # warm-up
    for _ in range(ctx.runs):
        warm.append(run_checked_sessions(agent, home, ctx.work))
    for _ in range(max(3, ctx.runs // 2)):
        index.unlink()
        cold.append(run_checked_sessions(agent, home, ctx.work))
    group = f"sessions ({count} on disk)"
    ctx.results.add(group, "kestrel sessions: wall", [r.wall_ms for r in warm], "ms", "index present")
    ctx.results.add(group, "kestrel sessions: CPU", [r.cpu_ms for r in warm], "ms")
    ctx.results.add(group, "kestrel sessions: peak RSS", [r.maxrss_mb for r in warm], "MB")
    ctx.results.add(group, "no index (rebuild): wall", [r.wall_ms for r in cold], "ms",
                    "index deleted before each run: every record's head is read")
    shutil.rmtree(home)


def run_checked_sessions(agent, home, cwd):
    run = agent.sessions(home, cwd)
    if run.exit_code != 0 or not run.stdout.strip():
        raise BenchError(f"kestrel sessions failed ({run.exit_code}): {run.stderr[-800:]}")
    return run


def in_process(ctx: Context, bench: str, *arguments: str, env=None):
    """Runs a Rust bench target (store or tools) and adds the rows it reports."""
    binary = ctx.bench_bins.get(bench)
    if binary is None:
        raise BenchError(f"the {bench} bench binary was not built")
    run = run_checked([str(binary), "--json", "--runs", str(ctx.runs), *arguments], env=env, timeout=1800)
    for line in run.stdout.splitlines():
        if not line.startswith("{"):
            continue
        row = json.loads(line)
        group = row["bench"].split(".", 1)[0]
        group = {"store": "store API (in-process)", "tools": "tools (in-process, via the registry)",
                 "baseline": "tools (in-process, via the registry)"}.get(group, group)
        ctx.results.add(group, f"{row['bench'].split('.', 1)[1]}: {row['param']}", row["values"],
                        row["unit"], "baseline, same loop" if row["bench"].startswith("baseline.") else "")


def compare_codex(ctx: Context):
    """Kestrel and Codex on the same script and server (Responses API), interleaved run
    by run; ratios Codex / Kestrel per run, then their median."""
    if ctx.codex is None:
        ctx.results.missing("compare", "Codex CLI", "skipped: not installed",
                            "npm install --prefix ~/.cache/kestrel-bench/agents @openai/codex")
        return
    kestrel, codex = Kestrel(ctx.kestrel), Codex(ctx.codex)
    cwd = _overhead_cwd(ctx)
    homes = {"kestrel": ctx.work / "home-cmp-kestrel", "codex": ctx.work / "home-cmp-codex"}
    # An unknown tool: both agents answer it with an error result and go on, so the round
    # trip is the agent's own loop and nothing else.
    scenarios = {
        "one request": [step("done")],
        f"{ROUND_TRIPS} round trips": [tool_step("noop", {})] * ROUND_TRIPS + [step("done")],
    }

    def once(agent, steps):
        with ScriptedServer(ctx.scripted_model, steps, ctx.work) as server:
            if agent is kestrel:
                agent.configure(homes["kestrel"], server.base_url, "responses")
                run = agent.exec(homes["kestrel"], cwd, "benchmark prompt")
            else:
                agent.configure(homes["codex"], server.base_url)
                run = agent.exec(homes["codex"], cwd, "benchmark prompt")
        if run.exit_code != 0 or "done" not in run.stdout:
            raise BenchError(f"{agent.name} failed ({run.exit_code}): {run.stderr[-800:]}")
        return run

    version = codex.version()
    for name, steps in scenarios.items():
        once(kestrel, steps)
        once(codex, steps)  # warm-up: first start in a fresh home does more
        runs = {"kestrel": [], "codex": []}
        for index in range(ctx.runs):
            order = [kestrel, codex] if index % 2 == 0 else [codex, kestrel]
            for agent in order:
                runs[agent.name].append(once(agent, steps))
        group = f"compare: {version} vs kestrel ({name})"
        for metric, unit, get in (("wall", "ms", lambda r: r.wall_ms), ("CPU", "ms", lambda r: r.cpu_ms),
                                  ("peak RSS", "MB", lambda r: r.maxrss_mb)):
            k = [get(r) for r in runs["kestrel"]]
            c = [get(r) for r in runs["codex"]]
            ctx.results.add(group, f"kestrel {metric}", k, unit)
            ctx.results.add(group, f"codex {metric}", c, unit)
            ctx.results.add(group, f"ratio codex/kestrel {metric}", [b / a for a, b in zip(k, c) if a > 0],
                            "×", "per interleaved pair")
    ctx.results.add("compare: binary size", "codex native binary", [ctx.codex.stat().st_size / 1e6], "MB",
                    str(ctx.codex))


def tools(ctx: Context, tree=None):
    """The tools bench, then its shell part again with an empty HOME: `bash -lc` reads
    the user's login profile, which on a developer machine can cost more than everything
    else; without it, what is left is the tool's own cost."""
    in_process(ctx, "tools", *(["--tree", str(tree)] if tree else []))
    empty_home = ctx.work / "empty-home"
    empty_home.mkdir(exist_ok=True)
    env = dict(os.environ, HOME=str(empty_home))
    in_process(ctx, "tools", "--only", "shell", "--label", "empty HOME", env=env)
