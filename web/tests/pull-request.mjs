// A session the GitHub bot started shows its pull request: the artifact with its state on
// the session page, and the mark on the sessions list; merged on GitHub while the page is
// open, the artifact turns to merged without a reload. Run by `tests/tests/github.rs` once
// the agent has opened the PR (it merges the PR when this script says it waits).
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { BASE, expectVisible, launch, shot, step } from "./browser.mjs";

const session = process.env.SESSION_ID;
const number = process.env.PR_NUMBER;
const browser = await launch();
try {
  const page = await (await browser.newContext({ viewport: { width: 1280, height: 900 } })).newPage();
  page.on("pageerror", (e) => console.log(`[page error] ${e.message}`));

  step("the session page shows the pull request with its state");
  await page.goto(`${BASE}/sessions/${session}`);
  const artifacts = page.getByRole("region", { name: "Artifacts" });
  const link = artifacts.getByRole("link", { name: `Pull request acme/web#${number}` });
  await expectVisible(page, link, "the pull request artifact");
  const href = await link.getAttribute("href");
  if (!href || !href.endsWith(`/acme/web/pull/${number}`)) throw new Error(`the artifact links to ${href}`);
  await expectVisible(page, artifacts.locator('[data-pr-state="open"]'), "the PR's state");
  await shot(page, "pr-session");

  step("the sessions list marks the session");
  await page.goto(`${BASE}/`);
  await expectVisible(page, page.locator(".session-row").filter({ hasText: "PR open" }), "the PR mark");
  await shot(page, "pr-sessions");

  step("repository settings: the bot is on for acme/web; turn on review-on-open");
  await page.goto(`${BASE}/settings/repositories`);
  const panel = page.getByRole("region", { name: "Repository settings" });
  await expectVisible(page, panel, "the repository settings");
  await panel.getByLabel("Repository to configure").selectOption("acme/web");
  const bot = panel.getByLabel("The GitHub bot answers in this repository");
  await bot.waitFor();
  // The settings load through the control plane: up to 30 s on a loaded machine, as the
  // other waits here.
  for (let i = 0; i < 300 && !(await bot.isChecked()); i++) await page.waitForTimeout(100);
  if (!(await bot.isChecked())) throw new Error("the bot's setting did not load");
  await panel.getByLabel("Review every new pull request").check();
  await panel.getByRole("button", { name: "Save" }).click();
  await expectVisible(page, panel.getByText("Saved."), "the saved note");
  const saved = await page.evaluate(() => fetch("/repos/acme/web/settings").then((r) => r.json()));
  if (saved.autoReviewOnOpen !== true || saved.botEnabled !== true || saved.prLabel !== "open-inspect") {
    throw new Error(`settings not saved: ${JSON.stringify(saved)}`);
  }
  await shot(page, "repo-settings");

  step("merged on GitHub: the open page shows it without a reload");
  await page.goto(`${BASE}/sessions/${session}`);
  const live = page.getByRole("region", { name: "Artifacts" });
  await expectVisible(page, live.locator('[data-pr-state="open"]'), "the PR open");
  await page.evaluate(() => (window.__notReloaded = true));
  writeFileSync(join(process.env.ARTIFACTS_DIR, "waiting-for-merge"), "");
  await expectVisible(page, live.locator('[data-pr-state="merged"]'), "the PR merged", 90_000);
  await expectVisible(page, live.getByText(/merged .*ago|merged just now/), "when it was merged");
  if (!(await page.evaluate(() => window.__notReloaded === true))) throw new Error("the page was reloaded");
  await shot(page, "pr-merged");
} finally {
  await browser.close();
}
