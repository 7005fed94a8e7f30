"""The agents under test, each run headless against the scripted model server with a
home of its own: Kestrel (`kestrel exec`) and, where installed, Codex CLI (`codex exec`)."""

import os
from pathlib import Path

from .measure import BenchError, ProcessRun, run_process

# Variables that would change what an agent does (keys, model, mode, logging).
SCRUBBED_PREFIXES = ("KESTREL_", "CODEX_", "OPENAI_", "ANTHROPIC_", "RUST_LOG")


def clean_env(**extra) -> dict:
    env = {key: value for key, value in os.environ.items()
           if not key.startswith(SCRUBBED_PREFIXES)}
    env.update({key: str(value) for key, value in extra.items()})
    return env


class Kestrel:
    """`kestrel exec` with `$KESTREL_HOME` pointing at a home configured for the server."""

    name = "kestrel"

    def __init__(self, binary: Path):
        self.binary = binary

    @staticmethod
    def configure(home: Path, base_url: str, wire: str = "chat"):
        home.mkdir(parents=True, exist_ok=True)
        (home / "config.toml").write_text(
            'model = "scripted/test-model"\n'
            "[providers.scripted]\n"
            f'base_url = "{base_url}"\n'
            f'wire_api = "{wire}"\n')

    def exec(self, home: Path, cwd: Path, prompt: str, *extra: str, timeout=120.0) -> ProcessRun:
        argv = [str(self.binary), "exec", *extra, prompt]
        return run_process(argv, env=clean_env(KESTREL_HOME=home), cwd=cwd, timeout=timeout)

    def resume(self, home: Path, cwd: Path, session_id: str, prompt: str, timeout=300.0):
        argv = [str(self.binary), "exec", "resume", session_id, prompt]
        return run_process(argv, env=clean_env(KESTREL_HOME=home), cwd=cwd, timeout=timeout)

    def sessions(self, home: Path, cwd: Path, timeout=120.0) -> ProcessRun:
        argv = [str(self.binary), "sessions"]
        return run_process(argv, env=clean_env(KESTREL_HOME=home), cwd=cwd, timeout=timeout)


class Codex:
    """`codex exec` (the native binary the npm package ships, not its node wrapper) with
    `$CODEX_HOME` holding a custom provider pointed at the server (Responses API)."""

    name = "codex"

    def __init__(self, binary: Path):
        self.binary = binary

    @staticmethod
    def configure(home: Path, base_url: str):
        home.mkdir(parents=True, exist_ok=True)
        (home / "config.toml").write_text(
            'model = "test-model"\n'
            'model_provider = "scripted"\n'
            "[model_providers.scripted]\n"
            'name = "scripted"\n'
            f'base_url = "{base_url}"\n'
            'wire_api = "responses"\n')

    def exec(self, home: Path, cwd: Path, prompt: str, timeout=120.0) -> ProcessRun:
        argv = [str(self.binary), "exec", "--skip-git-repo-check", "--color", "never", prompt]
        return run_process(argv, env=clean_env(CODEX_HOME=home), cwd=cwd, timeout=timeout)

    def version(self) -> str:
        run = run_process([str(self.binary), "--version"], env=clean_env(), timeout=30)
        return run.stdout.strip()


def find_codex(explicit: str):
    """The Codex binary: `explicit` (a path, or "off"), else the native binary of an npm
    install under ~/.cache/kestrel-bench/agents or the repo's bench/.agents, else `codex`
    on PATH (possibly the node wrapper)."""
    if explicit == "off":
        return None
    if explicit and explicit != "auto":
        path = Path(explicit).expanduser()
        if not path.is_file():
            raise BenchError(f"--codex {explicit}: no such file")
        return path
    roots = [Path.home() / ".cache/kestrel-bench/agents", Path(__file__).resolve().parents[1] / ".agents"]
    for root in roots:
        vendor = root / "node_modules/@openai"
        for candidate in sorted(vendor.glob("codex-*/vendor/*/bin/codex")):
            if candidate.is_file():
                return candidate
    from shutil import which
    found = which("codex")
    return Path(found) if found else None
