// A terminal in the browser: opened on a running session, typed into (echo $((6*7)) → 42),
// resized with the window, redrawn after a reload, and seen by a second participant; the
// sandbox opened in VS Code (code-server's workbench in a new window). Run by
// `tests/tests/terminal.rs` once the session's sandbox is running.
import { BASE, expectVisible, launch, shot, step } from "./browser.mjs";

const session = process.env.SESSION_ID;
const browser = await launch();

/** The terminal's screen as text (xterm's DOM renderer draws rows as elements). */
const screen = (page) => page.getByTestId("terminal-screen").locator(".xterm-rows");

async function waitForText(page, pattern, what) {
  const deadline = Date.now() + 30_000;
  for (;;) {
    const text = await screen(page).innerText().catch(() => "");
    const m = text.match(pattern);
    if (m) return m;
    if (Date.now() > deadline) {
      await shot(page, `failed-${what.replace(/\W+/g, "-")}`);
      throw new Error(`${what}: ${pattern} not on the screen:\n${text}`);
    }
    await page.waitForTimeout(100);
  }
}

try {
  const context = await browser.newContext({ viewport: { width: 1400, height: 1100 } });
  const page = await context.newPage();
  page.on("pageerror", (e) => console.log(`[page error] ${e.message}`));

  step("open a terminal and type");
  await page.goto(`${BASE}/sessions/${session}`);
  const panel = page.getByRole("region", { name: "Terminals" });
  const open = panel.getByTestId("open-terminal");
  await expectVisible(page, open, "the open button");
  await page.waitForFunction(() => !document.querySelector('[data-testid="open-terminal"]')?.disabled, null, { timeout: 60_000 });
  await open.click();
  await expectVisible(page, panel.locator(".xterm"), "the terminal");
  await waitForText(page, /[$#]\s*$/m, "the shell's prompt");
  await panel.locator(".xterm").click();
  await page.keyboard.type("echo $((6*7))");
  await page.keyboard.press("Enter");
  await waitForText(page, /^42\s*$/m, "the answer");
  await shot(page, "terminal-42");

  step("resize with the window");
  await page.keyboard.type("echo first=$(stty size)");
  await page.keyboard.press("Enter");
  const [, rows1, cols1] = await waitForText(page, /^first=(\d+) (\d+)\s*$/m, "the first size");
  await page.setViewportSize({ width: 900, height: 1100 });
  await page.waitForTimeout(500);
  await page.keyboard.type("echo second=$(stty size)");
  await page.keyboard.press("Enter");
  const [, rows2, cols2] = await waitForText(page, /^second=(\d+) (\d+)\s*$/m, "the second size");
  if (Number(cols2) >= Number(cols1)) throw new Error(`the terminal did not narrow: ${rows1}x${cols1} then ${rows2}x${cols2}`);

  step("reload: the screen comes back");
  await page.keyboard.type("echo $((7*6))done");
  await page.keyboard.press("Enter");
  await waitForText(page, /^42done\s*$/m, "the second answer");
  await page.reload();
  await expectVisible(page, panel.locator(".xterm"), "the terminal after the reload");
  await waitForText(page, /^42done\s*$/m, "the redrawn screen");
  await shot(page, "terminal-reloaded");

  step("open the sandbox in VS Code");
  const [editor] = await Promise.all([context.waitForEvent("page"), panel.getByTestId("open-editor").click()]);
  // VS Code's first page is its whole workbench (tens of MB of scripts), served by a
  // code-server that has just started: on a machine whose two cores run three other suites,
  // that load alone was seen to pass 60 s (34 s for the whole test when the cores are free).
  await editor.waitForSelector(".monaco-workbench", { timeout: 120_000 });
  // The repository's files in the explorer: the editor is on the sandbox's workspace.
  await editor.locator(".explorer-folders-view").getByText("README.md").waitFor({ timeout: 60_000 });
  await expectVisible(page, page.getByTestId("editor-note").filter({ hasText: "opened the editor" }), "the timeline's editor note");
  await shot(editor, "editor");
  await editor.close();

  step("paste a picture into the prompt box and send it");
  const box = page.getByRole("textbox", { name: "Prompt" });
  await box.click();
  await box.evaluate((el) => {
    // A 1×1 PNG, as a screenshot tool would put on the clipboard.
    const png = Uint8Array.from(atob("iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg=="), (c) => c.charCodeAt(0));
    const data = new DataTransfer();
    data.items.add(new File([png], "pasted.png", { type: "image/png" }));
    el.dispatchEvent(new ClipboardEvent("paste", { clipboardData: data, bubbles: true, cancelable: true }));
  });
  await expectVisible(page, page.getByTestId("attached-file").filter({ hasText: "pasted.png" }), "the attached picture");
  await box.fill("What is in this picture?");
  await page.getByLabel("Reasoning effort").selectOption("high");
  await box.press("Enter");
  await expectVisible(page, page.getByTestId("prompt-attachments").filter({ hasText: "pasted.png" }), "the picture on the timeline");
  await shot(page, "prompt-picture");

  step("a second participant sees it");
  const bob = await (await browser.newContext({ extraHTTPHeaders: { "X-OpenInspect-Actor": "bob" }, viewport: { width: 1400, height: 1100 } })).newPage();
  await bob.goto(`${BASE}/sessions/${session}`);
  const bobPanel = bob.getByRole("region", { name: "Terminals" });
  await expectVisible(bob, bobPanel.getByTestId("terminal-item"), "the terminal in bob's list");
  await expectVisible(bob, bobPanel.locator(".xterm"), "bob's view");
  await waitForText(bob, /^42done\s*$/m, "bob's redrawn screen");
  await expectVisible(bob, bob.getByTestId("terminal-note").filter({ hasText: "opened a terminal" }), "the timeline's note");
  await shot(bob, "terminal-bob");
  console.log("[terminal] ok");
} finally {
  await browser.close();
}
