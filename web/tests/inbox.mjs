// The inbox in the browser: a prompt sent from a session's page finishes while the person
// is on another page; the header's count and the tab's title rise without a reload; the
// inbox lists it; opening it clears the count. Run by `tests/tests/web.rs` on a stack with
// one session on local/demo (SESSION_ID) whose scripted agent takes a few seconds.
import { BASE, expectVisible, launch, shot, step } from "./browser.mjs";

const session = process.env.SESSION_ID;
const browser = await launch();
try {
  const page = await (await browser.newContext({ viewport: { width: 1280, height: 900 } })).newPage();
  page.on("pageerror", (e) => console.log(`[page error] ${e.message}`));

  step("send a prompt from the session's page, then go elsewhere");
  await page.goto(`${BASE}/sessions/${session}`);
  await expectVisible(page, page.getByTestId("connection").getByText("live"), "the live session");
  const prompt = page.getByLabel("Prompt");
  await prompt.fill("tidy up");
  await page.getByRole("button", { name: "Send" }).click();
  await expectVisible(page, page.locator(".row-user", { hasText: "tidy up" }), "the prompt on the timeline");
  // Client-side navigation: the page is not loaded again from here on.
  await page.evaluate(() => (window.__loadedOnce = true));
  await page.getByRole("link", { name: "Settings" }).click();
  await page.waitForURL(`${BASE}/settings`);
  if ((await page.getByTestId("inbox-badge").count()) !== 0) throw new Error("a count before the prompt ended");

  step("the prompt ends: the count rises where the person is");
  await expectVisible(page, page.getByTestId("inbox-badge"), "the inbox count", 180_000);
  const badge = (await page.getByTestId("inbox-badge").textContent()).trim();
  if (badge !== "1") throw new Error(`the count is ${badge}, not 1`);
  const title = await page.title();
  if (!title.startsWith("(1) ")) throw new Error(`the tab's title does not count it: ${title}`);
  if (!(await page.evaluate(() => window.__loadedOnce === true))) throw new Error("the page was reloaded");
  await shot(page, "inbox-count");

  step("the inbox lists it; opening it clears the count");
  await page.getByTestId("inbox-link").click();
  await page.waitForURL(`${BASE}/inbox`);
  const item = page.getByTestId("inbox-item").first();
  await expectVisible(page, item, "the item");
  await expectVisible(page, item.getByText("Finished"), "what happened");
  await shot(page, "inbox");
  await item.locator("a").click();
  await page.waitForURL(`${BASE}/sessions/${session}`);
  await page.waitForFunction(() => !document.querySelector('[data-testid="inbox-badge"]'), null, { timeout: 30_000 });
  const after = await page.title();
  if (after.startsWith("(")) throw new Error(`the title still counts: ${after}`);
  await page.getByTestId("inbox-link").click();
  await expectVisible(page, page.getByText("Nothing unread."), "nothing unread");
} finally {
  await browser.close();
}
