// The web client end to end, against the whole local stack (wrangler dev, the local
// sandbox host, the real supervisor and OpenCode, a scripted model). Run by the Rust test
// `tests/tests/web.rs`, which starts the stack and scripts the model in this order.
import { writeFileSync } from "node:fs";
import { createInterface } from "node:readline";
import { join } from "node:path";
import { ARTIFACTS, BASE, expectVisible, launch, shot, step } from "./browser.mjs";

/** The harness answers on stdin when it has done what a `[e2e] …-server` line asked. */
const stdin = createInterface({ input: process.stdin });
const lines = stdin[Symbol.asyncIterator]();
async function nextLine() {
  const { value, done } = await lines.next();
  if (done) throw new Error("the harness closed stdin");
  return value;
}

const browser = await launch();
const metrics = {};
try {
  const alice = await browser.newContext({ viewport: { width: 1280, height: 900 } });
  const page = await alice.newPage();
  page.on("pageerror", (e) => console.log(`[page error] ${e.message}`));

  step("sessions list, signed in by local mode");
  const t0 = Date.now();
  await page.goto(BASE + "/");
  await expectVisible(page, page.getByRole("heading", { name: "Sessions" }), "sessions heading");
  metrics.firstRenderMs = Date.now() - t0;
  metrics.firstPage = await page.evaluate(() => {
    const nav = performance.getEntriesByType("navigation")[0];
    const scripts = performance.getEntriesByType("resource").filter((r) => r.initiatorType === "script" || r.name.endsWith(".js"));
    return {
      domContentLoadedMs: Math.round(nav.domContentLoadedEventEnd),
      jsEncodedBytes: scripts.reduce((n, r) => n + (r.encodedBodySize || 0), 0),
      jsDecodedBytes: scripts.reduce((n, r) => n + (r.decodedBodySize || 0), 0),
    };
  });
  await shot(page, "01-sessions");

  step("new session on the local repository; typing warms the sandbox");
  await page.getByRole("link", { name: "New session" }).first().click();
  await expectVisible(page, page.getByRole("heading", { name: "New session" }), "new session form");
  await page.getByLabel("Repository", { exact: true }).selectOption("local/demo");
  const box = page.getByLabel("First prompt");
  await box.click();
  await box.pressSequentially("Add a hello file", { delay: 20 });
  await shot(page, "02-new-session");
  await box.press("Enter");
  await page.waitForURL(/\/sessions\/[0-9a-f]+$/, { timeout: 30_000 });
  const sessionUrl = page.url();

  step("boot steps, tool calls, streamed markdown, completion");
  await expectVisible(page, page.getByTestId("boot-steps").getByText("clone demo"), "boot step: clone");
  await expectVisible(page, page.locator("details.tool", { hasText: "write" }), "write tool row");
  await expectVisible(page, page.locator(".markdown strong", { hasText: "done" }), "markdown text");
  await expectVisible(page, page.getByTestId("execution-complete"), "completion");
  // A tool row expands to its input and output.
  await page.locator("details.tool summary", { hasText: "bash" }).first().click();
  await expectVisible(page, page.locator("details.tool[open] pre", { hasText: "ran-bash" }), "tool output");
  await expectVisible(page, page.getByTestId("boot-steps").getByText("agent"), "boot step: agent");
  await shot(page, "03-session");

  step("a second person opens the link, appears in presence, prompts");
  const bobContext = await browser.newContext({ extraHTTPHeaders: { "X-OpenInspect-Actor": "bob" }, viewport: { width: 1280, height: 900 } });
  const bob = await bobContext.newPage();
  await bob.goto(sessionUrl);
  await expectVisible(bob, bob.getByTestId("execution-complete"), "bob sees the history");
  await expectVisible(page, page.getByTestId("presence").getByText("bob"), "bob in alice's presence");
  await expectVisible(bob, bob.getByTestId("presence").getByText("local"), "alice in bob's presence");
  const bobBox = bob.getByLabel("Prompt");
  await bobBox.fill("Say hi to bob");
  await bobBox.press("Enter");
  await expectVisible(page, page.locator(".row-user", { hasText: "Say hi to bob" }).getByText("bob"), "bob's prompt on alice's page");
  await expectVisible(page, page.locator(".markdown", { hasText: "Hi bob" }), "the answer on alice's page");
  await expect2(page, "execution-complete", 2);
  await shot(bob, "04-second-browser");

  step("reload mid-turn and catch up with nothing missing or doubled");
  const prompt = page.getByLabel("Prompt");
  await prompt.fill("Take your time");
  await prompt.press("Enter");
  await expectVisible(page, page.locator("details.tool", { hasText: "sleep" }), "the slow tool starts");
  await page.reload();
  await expectVisible(page, page.locator(".markdown", { hasText: "Slept well" }), "the turn finishes after reload");
  await expect2(page, "execution-complete", 3);
  const seqs = await page.locator(".event").evaluateAll((els) => els.map((e) => Number(e.getAttribute("data-seq"))));
  if (new Set(seqs).size !== seqs.length) throw new Error(`doubled events after reload: ${seqs}`);
  const users = await page.locator('.event[data-type="user_message"]').count();
  if (users !== 3) throw new Error(`expected 3 prompts on the timeline, saw ${users}`);
  const sorted = [...seqs].sort((a, b) => a - b);
  if (JSON.stringify(sorted) !== JSON.stringify(seqs)) throw new Error("events out of order");

  step("the server restarts: the page shows the dropped connection and catches up");
  const before = await page.locator(".event").evaluateAll((els) => els.map((e) => e.getAttribute("data-seq")));
  console.log("[e2e] stop-server");
  await nextLine(); // the harness stopped wrangler
  await expectVisible(page, page.getByTestId("connection").getByText("reconnecting"), "the dropped connection", 30_000);
  await shot(page, "07-reconnecting");
  console.log("[e2e] start-server");
  await nextLine(); // the harness started wrangler again, on the same state
  await expectVisible(page, page.getByTestId("connection").getByText("live"), "the connection back", 60_000);
  const after = await page.locator(".event").evaluateAll((els) => els.map((e) => e.getAttribute("data-seq")));
  if (JSON.stringify(after) !== JSON.stringify(before)) throw new Error(`the timeline changed across the restart:\n${before}\n${after}`);
  await prompt.fill("Still there?");
  await prompt.press("Enter");
  // If the restart cut a snapshot short, the sandbox is held until the snapshot deadline
  // (60 s) gives it back.
  await expectVisible(page, page.locator(".markdown", { hasText: "Back again" }), "a turn after the restart", 150_000);
  await expect2(page, "execution-complete", 4);

  step("stop a running turn");
  await prompt.fill("Run for a long time");
  await prompt.press("Enter");
  await expectVisible(page, page.locator("details.tool", { hasText: "sleep 120" }), "the long tool starts");
  await page.getByRole("button", { name: "Stop" }).click();
  await expectVisible(page, page.locator('.event[data-type="stop_requested"], [data-testid="execution-failed"]'), "the stop lands");
  await page.getByRole("button", { name: "Stop" }).waitFor({ state: "detached", timeout: 60_000 });

  step("a narrow screen");
  await page.setViewportSize({ width: 390, height: 844 });
  await shot(page, "05-session-phone");
  await page.setViewportSize({ width: 1280, height: 900 });

  step("settings: a secret shows by name only");
  await page.goto(BASE + "/settings/environments");
  await expectVisible(page, page.getByRole("heading", { name: "Secrets" }), "settings");
  await page.getByLabel("Secret name").fill("E2E_TOKEN");
  await page.getByLabel("Secret value").fill("e2e-secret-value-9d2f");
  await page.getByRole("button", { name: "Set" }).click();
  await expectVisible(page, page.getByTestId("secrets").getByText("E2E_TOKEN"), "the secret's name");
  const html = await page.content();
  if (html.includes("e2e-secret-value-9d2f")) throw new Error("the secret's value is on the page");
  await shot(page, "06-settings");

  step("keyboard: Escape leaves the prompt box");
  await page.goto(sessionUrl);
  await page.getByLabel("Prompt").focus();
  await page.keyboard.press("Escape");
  const focused = await page.evaluate(() => document.activeElement?.getAttribute("aria-label"));
  if (focused === "Prompt") throw new Error("Escape did not leave the prompt box");

  writeFileSync(join(ARTIFACTS, "metrics.json"), JSON.stringify(metrics, null, 2));
  console.log(`[e2e] metrics ${JSON.stringify(metrics)}`);
  console.log("[e2e] ok");
} finally {
  await browser.close();
  // Let the process end: an open stdin keeps it alive.
  stdin.close();
  process.stdin.destroy();
}

async function expect2(page, testId, n) {
  const deadline = Date.now() + 90_000;
  for (;;) {
    const count = await page.getByTestId(testId).count();
    if (count >= n) return;
    if (Date.now() > deadline) {
      await shot(page, `failed-${testId}-${n}`);
      throw new Error(`expected ${n} × ${testId}, saw ${count}`);
    }
    await page.waitForTimeout(200);
  }
}
