// A stand-in for `kestrel worker` in the daemon's own tests: a tiny ACP agent on stdio
// that answers initialize/new/set_mode/prompt/history, and for a prompt "spawn TEXT" asks
// its host for a child session (`_kestrel/session/spawn`) and says the child's id.
import readline from "node:readline";

const input = readline.createInterface({ input: process.stdin });
const waiting = new Map();
const history = [];
let nextId = 1000;
let sessionId;

const send = (message) => process.stdout.write(JSON.stringify({ jsonrpc: "2.0", ...message }) + "\n");
const update = (value) => {
  history.push(value);
  send({ method: "session/update", params: { sessionId, update: value } });
};
const text = (value) => ({ sessionUpdate: "agent_message_chunk", content: { type: "text", text: value } });

input.on("line", async (line) => {
  const message = JSON.parse(line);
  if (message.method === undefined) {
    waiting.get(message.id)?.(message);
    return;
  }
  const reply = (result) => send({ id: message.id, result });
  switch (message.method) {
    case "initialize":
      return reply({ protocolVersion: 1, agentCapabilities: { loadSession: true } });
    case "session/new": {
      sessionId = `fake-${process.pid}`;
      const parent = message.params._meta?.kestrel?.parentSessionId ?? null;
      const modes = { currentModeId: "ask", availableModes: [{ id: "ask", name: "Ask" }, { id: "yolo", name: "Yolo" }] };
      return reply({ sessionId, modes, _meta: { parent } });
    }
    case "session/set_mode":
      update({ sessionUpdate: "current_mode_update", currentModeId: message.params.modeId });
      return reply({});
    case "_kestrel/session/history":
      return reply({ updates: history });
    case "session/prompt": {
      const said = message.params.prompt[0].text;
      history.push({ sessionUpdate: "user_message_chunk", content: { type: "text", text: said } });
      if (said.startsWith("spawn ")) {
        const id = nextId++;
        const answer = await new Promise((resolve) => {
          waiting.set(id, resolve);
          const params = { parentSessionId: sessionId, cwd: process.cwd(), prompt: said.slice(6), mode: "yolo" };
          send({ id, method: "_kestrel/session/spawn", params });
        });
        update(text(answer.result ? `child ${answer.result.sessionId}` : `spawn failed: ${answer.error.message}`));
      } else {
        update(text(`got: ${said}`));
      }
      return reply({ stopReason: "end_turn" });
    }
    default:
      if (message.id !== undefined) send({ id: message.id, error: { code: -32601, message: "not in the fake" } });
  }
});
