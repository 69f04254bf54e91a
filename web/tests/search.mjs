// Finding work: the sessions list's search (by what was asked), ⌘K to jump to a setting and
// to a session, and a session renamed in place. Run by `tests/tests/web.rs` on a stack with
// one session on local/demo whose prompt was "look around".
import { BASE, expectVisible, launch, shot, step } from "./browser.mjs";

const browser = await launch();
try {
  const page = await (await browser.newContext({ viewport: { width: 1280, height: 900 } })).newPage();
  page.on("pageerror", (e) => console.log(`[page error] ${e.message}`));

  step("the sessions list finds the session by its prompt, and nothing for a stranger");
  await page.goto(`${BASE}/`);
  await page.getByTestId("session-search").fill("around");
  await expectVisible(page, page.locator(".session-row").first(), "the session found");
  await page.getByTestId("session-search").fill("no such words here");
  await expectVisible(page, page.getByText("No session matches."), "nothing found");

  step("⌘K: jump to a settings section");
  await page.keyboard.press("Control+k");
  const jump = page.getByRole("dialog", { name: "Jump to" });
  await expectVisible(page, jump, "the jump dialog");
  await jump.getByLabel("Jump to").fill("prebuilt");
  await page.keyboard.press("Enter");
  await page.waitForURL(`${BASE}/settings/images`);
  await expectVisible(page, page.getByRole("region", { name: "Prebuilt images" }), "the images section");

  step("⌘K: jump to the session by what was asked");
  await page.keyboard.press("Control+k");
  await jump.getByLabel("Jump to").fill("around");
  await expectVisible(page, jump.getByRole("option").filter({ hasText: "session ·" }).first(), "the session in the results");
  await shot(page, "jump");
  await page.keyboard.press("Enter");
  await page.waitForURL(/\/sessions\/[0-9a-f]+$/);

  step("rename it in place");
  await page.getByRole("button", { name: "Rename" }).click();
  await page.getByLabel("Session title").fill("Quarterly cleanup");
  await page.keyboard.press("Enter");
  await expectVisible(page, page.getByRole("heading", { name: /Quarterly cleanup/ }), "the new title");
  await page.goto(`${BASE}/`);
  await page.getByTestId("session-search").fill("quarterly");
  await expectVisible(page, page.locator(".session-row").getByText("Quarterly cleanup"), "found by its new title");
  await shot(page, "search");
} finally {
  await browser.close();
}
