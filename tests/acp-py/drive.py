"""Drives `kestrel acp` with the Python ACP client (`agent-client-protocol`, pinned in
requirements.txt): a second implementation besides the official TypeScript SDK, used as
an editor would, without opting in to Kestrel's extensions: initialize, session/new, a
prompt with a tool call and a permission request, a prompt cancelled mid-turn,
session/list, and session/load from a second connection (which attaches to the live
session and replays its history). Records every message it receives as it came off the
wire: a plain client must receive no extension notification (`_kestrel/...`) and no
`notice` update.

Run by crates/kestrel-cli/tests/daemon_acp_python.rs with tests/acp-py/.venv's python,
which sets KESTREL_BIN, KESTREL_HOME, KESTREL_TEST_CWD and the scripted model (write_file,
a text answer, then a long shell command). Prints one JSON line of findings on success;
exits 1 with the reason.
"""

import asyncio
import json
import os
import sys
from pathlib import Path

import acp
from acp.connection import StreamDirection
from acp.schema import AllowedOutcome, ClientCapabilities, FileSystemCapabilities
from acp.schema import RequestPermissionResponse

BIN = os.environ["KESTREL_BIN"]
CWD = os.environ["KESTREL_TEST_CWD"]


class Editor:
    """One editor's client side: what it was sent, and its answers to permissions."""

    def __init__(self, name):
        self.name = name
        self.updates = []
        self.extensions = []
        self.notices = []
        self.permissions = []

    def observe(self, event):
        """Every incoming message, before the SDK parses it."""
        if event.direction != StreamDirection.INCOMING:
            return
        method = event.message.get("method", "")
        if method.startswith("_"):
            self.extensions.append(method)
        update = (event.message.get("params") or {}).get("update") or {}
        if method == "session/update" and update.get("sessionUpdate") == "notice":
            self.notices.append(update)

    def connect(self):
        return acp.spawn_agent_process(self, BIN, "acp", env=os.environ, observers=[self.observe])

    async def request_permission(self, session_id, tool_call, options, **kwargs):
        self.permissions.append(session_id)
        option = next(o for o in options if o.kind == "allow_once")
        outcome = AllowedOutcome(option_id=option.option_id, outcome="selected")
        return RequestPermissionResponse(outcome=outcome)

    async def session_update(self, session_id, update, **kwargs):
        self.updates.append((session_id, update.model_dump(by_alias=True, exclude_none=True)))

    async def ext_notification(self, method, params):
        pass

    async def ext_method(self, method, params):
        raise acp.RequestError.method_not_found(method)

    def of(self, session_id, kind):
        return [u for (s, u) in self.updates if s == session_id and u["sessionUpdate"] == kind]


def check(condition, message):
    if not condition:
        raise AssertionError(message)


def plain_capabilities():
    files = FileSystemCapabilities(read_text_file=False, write_text_file=False)
    return ClientCapabilities(fs=files, terminal=False)


async def until(what, condition, seconds=30):
    for _ in range(seconds * 20):
        if condition():
            return
        await asyncio.sleep(0.05)
    raise AssertionError(f"timed out: {what}")


async def first_editor(findings):
    editor = Editor("first")
    async with editor.connect() as (conn, _):
        init = await conn.initialize(
            protocol_version=acp.PROTOCOL_VERSION, client_capabilities=plain_capabilities()
        )
        check(init.protocol_version == 1, f"protocol version {init.protocol_version}")
        check(init.agent_capabilities.load_session, "loadSession advertised")
        created = await conn.new_session(cwd=CWD, mcp_servers=[])
        session_id = created.session_id
        check(any(m.id == "ask" for m in created.modes.available_modes), "Kestrel's modes")
        await conn.set_session_mode(session_id=session_id, mode_id="ask")

        # A prompt with a tool call that needs permission.
        first = await conn.prompt(session_id=session_id, prompt=[acp.text_block("write py.txt")])
        check(first.stop_reason == "end_turn", f"first stop reason {first.stop_reason}")
        check(editor.permissions == [session_id], f"one permission: {editor.permissions}")
        written = Path(CWD, "py.txt").read_text()
        check(written == "written through Python\n", f"file content {written!r}")
        check(editor.of(session_id, "tool_call"), "a tool_call update")
        text = "".join(u["content"]["text"] for u in editor.of(session_id, "agent_message_chunk"))
        check(text == "wrote py.txt", f"answer text {text!r}")

        # A prompt cancelled while its (long) tool call runs.
        before = len(editor.updates)
        second = asyncio.create_task(
            conn.prompt(session_id=session_id, prompt=[acp.text_block("now the long thing")])
        )

        def long_call_runs():
            later = [u for (_, u) in editor.updates[before:]]
            return any(
                u["sessionUpdate"] == "tool_call_update" and u.get("status") == "in_progress"
                for u in later
            )

        await until("the long tool call to start", long_call_runs)
        await asyncio.sleep(0.3)
        await conn.cancel(session_id=session_id)
        cancelled = await asyncio.wait_for(second, 30)
        check(cancelled.stop_reason == "cancelled", f"cancel stop reason {cancelled.stop_reason}")

        listed = await conn.list_sessions()
        entry = next((s for s in listed.sessions if s.session_id == session_id), None)
        check(entry is not None, "session/list has the session")
        check(entry.cwd == CWD, f"listed cwd {entry.cwd}")
        check(entry.title == "write py.txt", f"listed title {entry.title}")
        findings["listed"] = len(listed.sessions)
        # Whatever the daemon sends after the turn's end (its turn notice) arrives too.
        await asyncio.sleep(0.3)
    findings["permissions"] = len(editor.permissions)
    return session_id, editor


async def second_editor(session_id, findings):
    editor = Editor("second")
    async with editor.connect() as (conn, _):
        await conn.initialize(protocol_version=acp.PROTOCOL_VERSION)
        loaded = await conn.load_session(cwd=CWD, session_id=session_id, mcp_servers=[])
        mode = loaded.modes.current_mode_id
        check(mode == "ask", f"mode after load {mode}")
        await asyncio.sleep(0.3)
        prompts = [u["content"]["text"] for u in editor.of(session_id, "user_message_chunk")]
        check("write py.txt" in prompts, f"replayed prompts {prompts}")
        check(editor.of(session_id, "tool_call"), "replayed tool calls")
        findings["replayed"] = len([u for (s, u) in editor.updates if s == session_id])
    return editor


async def main():
    findings = {}
    session_id, first = await asyncio.wait_for(first_editor(findings), 90)
    second = await asyncio.wait_for(second_editor(session_id, findings), 60)
    findings.update(
        ok=True,
        sessionId=session_id,
        extensions=first.extensions + second.extensions,
        notices=first.notices + second.notices,
    )
    print(json.dumps(findings))


if __name__ == "__main__":
    try:
        asyncio.run(main())
    except Exception as error:  # the test prints this
        print(f"{type(error).__name__}: {error}", file=sys.stderr)
        sys.exit(1)
