#!/usr/bin/env node
// Drives `kestrel acp` with the official ACP TypeScript SDK, as an editor would:
// initialize, session/new, a prompt with a tool call and a permission request, a
// prompt cancelled mid-turn, session/list, and session/load from a second connection
// (which attaches to the live session and replays its history). Neither connection opts
// in to Kestrel's extensions, so neither may receive a `_kestrel/...` notification or a
// `notice` update.
//
// Run by crates/kestrel-cli/tests/daemon_acp_sdk.rs, which sets KESTREL_BIN, KESTREL_HOME,
// KESTREL_TEST_CWD and the scripted model (write_file, a text answer, then a long shell
// command). Prints one JSON line of findings on success; exits 1 with the reason.

import { spawn } from "node:child_process";
import { Readable, Writable } from "node:stream";
import { existsSync, readFileSync } from "node:fs";
import * as acp from "@agentclientprotocol/sdk";

const bin = process.env.KESTREL_BIN;
const cwd = process.env.KESTREL_TEST_CWD;
if (!bin || !cwd) throw new Error("KESTREL_BIN and KESTREL_TEST_CWD must be set");

function assert(condition, message) {
  if (!condition) throw new Error(`assertion failed: ${message}`);
}

/// One editor: a `kestrel acp` process and an SDK client app on its stdio.
function connectEditor(onPermission) {
  const child = spawn(bin, ["acp"], { stdio: ["pipe", "pipe", "inherit"], env: process.env });
  const stream = acp.ndJsonStream(Writable.toWeb(child.stdin), Readable.toWeb(child.stdout));
  const updates = [];
  const others = [];
  const app = acp
    .client({ name: "kestrel-sdk-test" })
    .onNotification("session/update", ({ params }) => {
      updates.push(params);
    })
    // Anything else the agent sends; a plain client (no session.notices) gets no
    // Kestrel extension (`_kestrel/...`).
    .onNotification("*", ({ method }) => {
      others.push(method);
    })
    .onRequest("session/request_permission", ({ params }) => onPermission(params));
  return { child, stream, app, updates, others };
}

const withTimeout = (promise, ms, what) =>
  Promise.race([
    promise,
    new Promise((_, reject) => setTimeout(() => reject(new Error(`timed out: ${what}`)), ms)),
  ]);

const permissions = [];
const allowOnce = (params) => {
  permissions.push(params);
  const option = params.options.find((o) => o.kind === "allow_once");
  return { outcome: { outcome: "selected", optionId: option.optionId } };
};

const findings = {};
const editor = connectEditor(allowOnce);
let sessionId;
await withTimeout(
  editor.app.connectWith(editor.stream, async (ctx) => {
    const init = await ctx.request("initialize", {
      protocolVersion: acp.PROTOCOL_VERSION,
      clientCapabilities: { fs: { readTextFile: false, writeTextFile: false }, terminal: false },
    });
    assert(init.protocolVersion === 1, `protocol version ${init.protocolVersion}`);
    assert(init.agentCapabilities?.loadSession === true, "loadSession advertised");
    assert(init.agentCapabilities?.sessionCapabilities?.list, "session/list advertised");

    const created = await ctx.request("session/new", { cwd, mcpServers: [] });
    sessionId = created.sessionId;
    assert(typeof sessionId === "string" && sessionId.length > 0, "a session id");
    assert(created.modes?.availableModes?.some((m) => m.id === "ask"), "Kestrel's modes");
    await ctx.request("session/set_mode", { sessionId, modeId: "ask" });

    // A prompt with a tool call that needs permission.
    const first = await ctx.request("session/prompt", {
      sessionId,
      prompt: [{ type: "text", text: "write sdk.txt" }],
    });
    assert(first.stopReason === "end_turn", `first stop reason ${first.stopReason}`);
    assert(permissions.length === 1, `one permission request, got ${permissions.length}`);
    assert(permissions[0].sessionId === sessionId, "permission names the session");
    const written = readFileSync(`${cwd}/sdk.txt`, "utf8");
    assert(written === "written through the SDK\n", `file content ${JSON.stringify(written)}`);
    const mine = editor.updates.filter((u) => u.sessionId === sessionId).map((u) => u.update);
    const calls = mine.filter((u) => u.sessionUpdate === "tool_call");
    assert(calls.length >= 1, "a tool_call update");
    const text = mine
      .filter((u) => u.sessionUpdate === "agent_message_chunk" && u.content.type === "text")
      .map((u) => u.content.text)
      .join("");
    assert(text === "wrote sdk.txt", `answer text ${JSON.stringify(text)}`);

    // A prompt cancelled while its (long) tool call runs.
    const before = editor.updates.length;
    const second = ctx.request("session/prompt", {
      sessionId,
      prompt: [{ type: "text", text: "now run the long thing" }],
    });
    const deadline = Date.now() + 30000;
    while (
      !editor.updates
        .slice(before)
        .some((u) => u.update.sessionUpdate === "tool_call_update" && u.update.status === "in_progress") &&
      !(permissions.length === 2 && editor.updates.slice(before).some((u) => u.update.sessionUpdate === "tool_call"))
    ) {
      assert(Date.now() < deadline, "the long tool call to start");
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
    await new Promise((resolve) => setTimeout(resolve, 300));
    await ctx.notify("session/cancel", { sessionId });
    const cancelled = await second;
    assert(cancelled.stopReason === "cancelled", `cancel stop reason ${cancelled.stopReason}`);

    const listed = await ctx.request("session/list", {});
    const entry = listed.sessions.find((s) => s.sessionId === sessionId);
    assert(entry, "session/list has the session");
    assert(entry.cwd === cwd, `listed cwd ${entry.cwd}`);
    assert(entry.title === "write sdk.txt", `listed title ${entry.title}`);
    findings.listed = listed.sessions.length;
  }),
  90000,
  "the first editor",
);
editor.child.stdin.end();

// A second editor loads the session: the daemon attaches it and replays the history.
const other = connectEditor(allowOnce);
await withTimeout(
  other.app.connectWith(other.stream, async (ctx) => {
    await ctx.request("initialize", { protocolVersion: acp.PROTOCOL_VERSION, clientCapabilities: {} });
    const loaded = await ctx.request("session/load", { sessionId, cwd, mcpServers: [] });
    assert(loaded.modes?.currentModeId === "ask", `mode after load ${loaded.modes?.currentModeId}`);
    await new Promise((resolve) => setTimeout(resolve, 300));
    const replay = other.updates.filter((u) => u.sessionId === sessionId).map((u) => u.update);
    const userText = replay
      .filter((u) => u.sessionUpdate === "user_message_chunk" && u.content.type === "text")
      .map((u) => u.content.text);
    assert(userText.includes("write sdk.txt"), `replayed prompts ${JSON.stringify(userText)}`);
    assert(replay.some((u) => u.sessionUpdate === "tool_call"), "replayed tool calls");
    findings.replayed = replay.length;
  }),
  60000,
  "the second editor",
);
other.child.stdin.end();
assert(existsSync(`${cwd}/sdk.txt`), "the file is still there");
const extensions = [...editor.others, ...other.others];
assert(extensions.length === 0, `notifications a plain client must not get: ${extensions}`);
const notices = [...editor.updates, ...other.updates].filter((u) => u.update.sessionUpdate === "notice");
assert(notices.length === 0, `notices to a plain client: ${JSON.stringify(notices)}`);
console.log(JSON.stringify({ ok: true, sessionId, permissions: permissions.length, ...findings }));
process.exit(0);
