#!/usr/bin/env node
// Validates ACP transcripts (one JSON-RPC message per line, both directions in the order
// they passed) against schema/v1/schema.json of the pinned @agentclientprotocol/sdk:
// every message against the whole protocol, requests' params against the *Request
// definition of their method, responses against the *Response definition of the method
// they answer (errors against Error), notifications against their *Notification.
// Kestrel extensions (methods starting with `_`) are free-form in ACP; the updates of a
// `_kestrel/session/history` answer are checked as SessionUpdate.
//
// Usage: node tests/acp/validate-transcript.mjs FILE...   (exit 1 on the first bad file)

import { readFileSync } from "node:fs";
import Ajv2020 from "ajv/dist/2020.js";
import addFormats from "ajv-formats";

const schemaUrl = new URL(
  "./node_modules/@agentclientprotocol/sdk/schema/v1/schema.json",
  import.meta.url,
);
const schema = JSON.parse(readFileSync(schemaUrl, "utf8"));
const KEY = "acp";

const ajv = new Ajv2020({ strict: false, allErrors: true });
addFormats(ajv);
const integer = (min, max) => ({
  type: "number",
  validate: (n) => Number.isInteger(n) && n >= min && n <= max,
});
ajv.addFormat("int32", integer(-(2 ** 31), 2 ** 31 - 1));
ajv.addFormat("uint16", integer(0, 2 ** 16 - 1));
ajv.addFormat("uint32", integer(0, 2 ** 32 - 1));
ajv.addFormat("int64", integer(Number.MIN_SAFE_INTEGER, Number.MAX_SAFE_INTEGER));
ajv.addFormat("uint64", integer(0, Number.MAX_SAFE_INTEGER));
ajv.addFormat("double", { type: "number", validate: (n) => Number.isFinite(n) });
ajv.addSchema(schema, KEY);

const validators = new Map();
function validator(ref) {
  if (!validators.has(ref)) {
    const validate = ajv.getSchema(`${KEY}${ref}`);
    if (!validate) throw new Error(`no schema at ${ref}`);
    validators.set(ref, validate);
  }
  return validators.get(ref);
}
const def = (name) => validator(`#/$defs/${name}`);
const whole = validator("#");

// method -> definition name, from the schema's own x-method annotations.
const defsByMethod = { Request: new Map(), Response: new Map(), Notification: new Map() };
for (const [name, body] of Object.entries(schema.$defs)) {
  const method = body["x-method"];
  if (!method) continue;
  for (const suffix of Object.keys(defsByMethod)) {
    if (name.endsWith(suffix)) defsByMethod[suffix].set(method, name);
  }
}

function check(validate, value, what, errors) {
  if (!validate(value)) {
    const details = (validate.errors ?? [])
      .slice(0, 8)
      .map((e) => `${e.instancePath || "/"} ${e.message}${e.params ? " " + JSON.stringify(e.params) : ""}`)
      .join("; ");
    errors.push(`${what}: ${details}`);
  }
}

function validateFile(path) {
  const lines = readFileSync(path, "utf8").split("\n").filter((line) => line.trim() !== "");
  const pending = new Map(); // JSON id -> [methods of requests awaiting an answer]
  const problems = [];
  lines.forEach((line, index) => {
    const where = `${path}:${index + 1}`;
    const errors = [];
    let message;
    try {
      message = JSON.parse(line);
    } catch (error) {
      problems.push(`${where}: not JSON: ${error.message}`);
      return;
    }
    if (message.jsonrpc !== "2.0") errors.push(`jsonrpc must be "2.0"`);
    check(whole, message, "not an ACP message", errors);
    const hasId = Object.hasOwn(message, "id");
    const key = JSON.stringify(message.id);
    if (typeof message.method === "string" && hasId) {
      const method = message.method;
      if (method.startsWith("_")) {
        if (method === "_kestrel/session/history" && typeof message.params?.sessionId !== "string") {
          errors.push(`${method} needs params.sessionId`);
        }
      } else if (defsByMethod.Request.has(method)) {
        check(def(defsByMethod.Request.get(method)), message.params, `${method} params`, errors);
      } else {
        errors.push(`unknown request method ${method}`);
      }
      pending.set(key, [...(pending.get(key) ?? []), method]);
    } else if (typeof message.method === "string") {
      const method = message.method;
      if (!method.startsWith("_")) {
        const name = defsByMethod.Notification.get(method);
        if (name) check(def(name), message.params, `${method} params`, errors);
        else errors.push(`unknown notification ${method}`);
      }
    } else if (hasId) {
      const waiting = pending.get(key) ?? [];
      if (waiting.length !== 1) {
        errors.push(
          waiting.length === 0
            ? `a response to id ${key}, which no request is waiting for`
            : `a response to id ${key}, which requests ${waiting.join(", ")} all wait for`,
        );
      } else {
        const method = waiting[0];
        pending.delete(key);
        if (Object.hasOwn(message, "error")) {
          check(def("Error"), message.error, `${method} error`, errors);
        } else if (method === "_kestrel/session/history") {
          const updates = message.result?.updates;
          if (!Array.isArray(updates)) errors.push(`${method} result needs an updates array`);
          else updates.forEach((u, i) => check(def("SessionUpdate"), u, `${method} updates[${i}]`, errors));
        } else if (!method.startsWith("_")) {
          const name = defsByMethod.Response.get(method);
          if (name) check(def(name), message.result, `${method} result`, errors);
          else errors.push(`no response definition for ${method}`);
        }
      }
    } else {
      errors.push("neither a request, a notification nor a response");
    }
    for (const error of errors) problems.push(`${where}: ${error}\n    ${line.slice(0, 400)}`);
  });
  return { count: lines.length, problems };
}

const files = process.argv.slice(2);
if (files.length === 0) {
  console.error("usage: node validate-transcript.mjs FILE...");
  process.exit(2);
}
let failed = false;
for (const file of files) {
  const { count, problems } = validateFile(file);
  if (problems.length > 0) {
    failed = true;
    console.error(`${file}: ${problems.length} problem(s) in ${count} messages`);
    for (const problem of problems) console.error(problem);
  } else {
    console.log(`${file}: ${count} messages valid`);
  }
}
process.exit(failed ? 1 : 0);
