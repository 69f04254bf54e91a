// A session the GitHub bot started shows its pull request: the artifact with its state on
// the session page, and the mark on the sessions list. Run by `tests/tests/github.rs`
// once the agent has opened the PR.
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
} finally {
  await browser.close();
}
