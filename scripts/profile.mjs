// Samples the Worker's (and its Durable Objects') CPU under `wrangler dev` through the
// runtime's inspector, and says where the time went.
//
//   node_modules/.bin/node scripts/profile.mjs [inspector-port] [seconds] [out.cpuprofile]
//
// The port is wrangler's `--inspector-port` (9229 unless told otherwise; the test stack and
// the benchmarks pick a free one: `ps aux | grep -o 'inspector-port [0-9]*'`). Build the
// Worker with `INSPECT_KEEP_WASM_NAMES=1` so Rust functions keep their names. Put load on
// the system while it samples (a benchmark, a session); windows under a few seconds may
// catch nothing. The profile opens in Chrome's DevTools (Performance panel) too.

import { writeFileSync } from "node:fs";
import { createRequire } from "node:module";

const require = createRequire(import.meta.url);
const WebSocket = require("ws"); // wrangler's own dependency, in node_modules

const [port = "9229", seconds = "10", out = "worker.cpuprofile"] = process.argv.slice(2);

const targets = await (await fetch(`http://127.0.0.1:${port}/json`)).json();
if (!targets.length) throw new Error(`nothing to profile on port ${port}`);
// wrangler's inspector proxy refuses sockets from origins other than its DevTools.
const socket = new WebSocket(targets[0].webSocketDebuggerUrl, {
  headers: { Origin: "https://devtools.devprod.cloudflare.dev" },
});
await new Promise((resolve, reject) => {
  socket.once("open", resolve);
  socket.once("error", reject);
});

let lastId = 0;
const waiting = new Map();
socket.on("message", (data) => {
  const reply = JSON.parse(data.toString());
  waiting.get(reply.id)?.(reply);
  waiting.delete(reply.id);
});
const call = (method, params = {}) =>
  new Promise((resolve) => {
    const id = ++lastId;
    waiting.set(id, resolve);
    socket.send(JSON.stringify({ id, method, params }));
  });

await call("Profiler.enable");
await call("Profiler.setSamplingInterval", { interval: 200 });
await call("Profiler.start");
await new Promise((resolve) => setTimeout(resolve, Number(seconds) * 1000));
const { profile } = (await call("Profiler.stop")).result;
writeFileSync(out, JSON.stringify(profile));
socket.close();

// Self and inclusive time per function name.
const nodes = new Map(profile.nodes.map((n) => [n.id, n]));
const parent = new Map();
for (const n of profile.nodes) for (const c of n.children ?? []) parent.set(c, n.id);
const label = (n) => {
  const f = n.callFrame;
  const name = f.functionName || `(anonymous ${f.url.split("/").pop()}:${f.lineNumber})`;
  return name.replace(/::h[0-9a-f]{16}$/, "");
};
const hits = new Map();
for (const s of profile.samples) hits.set(s, (hits.get(s) ?? 0) + 1);
const total = profile.samples.length;
const self = new Map();
const inclusive = new Map();
const add = (m, k, v) => m.set(k, (m.get(k) ?? 0) + v);
for (const [id, count] of hits) {
  add(self, label(nodes.get(id)), count);
  const seen = new Set();
  for (let at = id; at !== undefined; at = parent.get(at)) {
    const name = label(nodes.get(at));
    if (!seen.has(name)) add(inclusive, name, count);
    seen.add(name);
  }
}
const top = (m, n) =>
  [...m]
    .sort((a, b) => b[1] - a[1])
    .slice(0, n)
    .map(([k, v]) => `${((100 * v) / total).toFixed(1).padStart(5)}%  ${k.slice(0, 140)}`)
    .join("\n");
console.log(`${total} samples in ${seconds} s -> ${out}`);
console.log(`\nself time:\n${top(self, 25)}`);
console.log(`\ninclusive time (our crates):\n${top(
  new Map([...inclusive].filter(([k]) => k.startsWith("inspect_") || k.includes(" as inspect_"))),
  25,
)}`);
