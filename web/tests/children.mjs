// A parent session's page lists the children its agent started (status, link), and a
// child's page links back to its parent. Run by `tests/tests/children.rs`.
import { BASE, expectVisible, launch, shot, step } from "./browser.mjs";

const parent = process.env.PARENT_ID;
const browser = await launch();
try {
  const page = await (await browser.newContext({ viewport: { width: 1280, height: 900 } })).newPage();
  page.on("pageerror", (e) => console.log(`[page error] ${e.message}`));
  step("the parent's page lists both children, done");
  await page.goto(`${BASE}/sessions/${parent}`);
  const panel = page.getByRole("region", { name: "Child sessions" });
  await expectVisible(page, panel.getByRole("link", { name: "Child A" }), "child A");
  await expectVisible(page, panel.getByRole("link", { name: "Child B" }), "child B");
  const states = await panel.locator(".badge").allInnerTexts();
  if (states.filter((s) => s === "completed").length !== 2) throw new Error(`children states: ${states}`);
  await shot(page, "parent");
  step("a child's page links its parent");
  await panel.getByRole("link", { name: "Child A" }).click();
  await expectVisible(page, page.getByTestId("parent").getByRole("link", { name: "the parent session" }), "the parent link");
  const href = await page.getByTestId("parent").getByRole("link").getAttribute("href");
  if (href !== `/sessions/${parent}`) throw new Error(`the parent link goes to ${href}`);
  await shot(page, "child");
} finally {
  await browser.close();
}
