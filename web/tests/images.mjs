// Prebuilt images in the browser: Settings › Prebuilt images shows a repository's builds
// (ready with its commit, the replaced one deleted) and its schedule; "Build now" starts a
// build that is followed until ready. Run by `tests/tests/images.rs` after the scheduled
// and the hand-made builds of `local/demo`; HEAD_SHORT is the first 8 of the image's commit.
import { BASE, expectVisible, launch, shot, step } from "./browser.mjs";

const browser = await launch();
try {
  const page = await (await browser.newContext({ viewport: { width: 1280, height: 1000 } })).newPage();
  page.on("pageerror", (e) => console.log(`[page error] ${e.message}`));

  step("Settings › Prebuilt images: the builds so far and the schedule");
  await page.goto(`${BASE}/settings/images`);
  const panel = page.getByRole("region", { name: "Prebuilt images" });
  await expectVisible(page, panel, "the images panel");
  const builds = panel.getByTestId("image-builds");
  await expectVisible(page, builds.locator('[data-status="ready"]').first(), "a ready image");
  await expectVisible(page, builds.getByText(`demo@${process.env.HEAD_SHORT}`).first(), "the image's commit");
  await expectVisible(page, builds.locator('[data-status="deleted"]').first(), "the replaced image");
  const interval = await panel.getByLabel("Rebuild interval in minutes").inputValue();
  if (interval !== "60") throw new Error(`the schedule shows ${interval}`);
  await shot(page, "images-settings");

  step("Build now: followed until ready");
  const before = await builds.locator('[data-status="ready"]').count();
  await panel.getByRole("button", { name: "Build now" }).click();
  await expectVisible(page, panel.getByRole("button", { name: "Building…" }), "the running build");
  await expectVisible(page, panel.getByRole("button", { name: "Build now" }), "the build's end", 60_000);
  const after = await builds.locator('[data-status="ready"], [data-status="deleted"]').count();
  if (after <= before) throw new Error(`no new build shown (${before} → ${after})`);
  await shot(page, "images-built");
} finally {
  await browser.close();
}
