// The changes panel in the browser: after a turn that edited two repositories, both are
// listed with their files and counts; a file's diff opens (unified, then split); after the
// next turn the list updates without a reload. Run by `tests/tests/changes.rs`, which
// runs the next turn when this script says it waits.
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { BASE, expectVisible, launch, shot, step } from "./browser.mjs";

const session = process.env.SESSION_ID;
const browser = await launch();
try {
  const page = await (await browser.newContext({ viewport: { width: 1400, height: 1000 } })).newPage();
  page.on("pageerror", (e) => console.log(`[page error] ${e.message}`));

  step("both repositories and their files");
  await page.goto(`${BASE}/sessions/${session}`);
  const panel = page.getByRole("region", { name: "Changes" });
  await expectVisible(page, panel.getByRole("region", { name: "Changes in demo" }), "the demo repository");
  await expectVisible(page, panel.getByRole("region", { name: "Changes in other" }), "the other repository");
  await expectVisible(page, panel.getByTestId("changed-file").filter({ hasText: "notes.md" }), "notes.md");
  await expectVisible(page, panel.getByTestId("changed-file").filter({ hasText: "new file.txt" }), "a name with a space");

  step("a file's diff, unified then split");
  await panel.getByTestId("changed-file").filter({ hasText: "notes.md" }).click();
  await expectVisible(page, panel.locator(".d2h-file-wrapper"), "the diff");
  await expectVisible(page, panel.locator(".d2h-ins").filter({ hasText: "two" }).first(), "an added line");
  await shot(page, "changes-unified");
  await panel.getByRole("button", { name: "Split" }).click();
  await expectVisible(page, panel.locator(".d2h-file-side-diff").first(), "the split view");
  await shot(page, "changes-split");

  step("the next turn: the list follows without a reload");
  await page.evaluate(() => (window.__notReloaded = true));
  writeFileSync(join(process.env.ARTIFACTS_DIR, "waiting-for-next-turn"), "");
  await panel.getByTestId("changed-file").filter({ hasText: "notes.md" }).waitFor({ state: "detached", timeout: 120_000 });
  await expectVisible(page, panel.getByTestId("changed-file").filter({ hasText: "README.md" }), "README.md still changed");
  if (!(await page.evaluate(() => window.__notReloaded === true))) throw new Error("the page was reloaded");
  await shot(page, "changes-after");
  console.log("[changes] ok");
} finally {
  await browser.close();
}
