// Settings › Linear in the browser: the installation shown, a team mapping added and a
// box ticked, both kept after a reload. Run by `tests/tests/linear.rs` after the app was
// installed, with `local/demo` and `local/other` registered; the suite then sends an
// issue the mapping routes.
import { BASE, expectVisible, launch, shot, step } from "./browser.mjs";

const browser = await launch();
try {
  const page = await (await browser.newContext({ viewport: { width: 1280, height: 1000 } })).newPage();
  page.on("pageerror", (e) => console.log(`[page error] ${e.message}`));

  step("Settings › Linear: installed, a team mapping, issues moved on start");
  await page.goto(`${BASE}/settings/integrations`);
  const panel = page.getByRole("region", { name: "Linear" });
  await expectVisible(page, panel, "the Linear panel");
  await expectVisible(page, panel.getByTestId("linear-installations").getByText("Acme"), "the installation");
  for (let tries = 0; ; tries++) {
    await panel.getByLabel("Team key").fill("ENG");
    await panel.getByLabel("Team target").selectOption("local/demo");
    await page.waitForTimeout(200);
    const typed = await panel.getByLabel("Team key").inputValue();
    const target = await panel.getByLabel("Team target").inputValue();
    if (typed === "ENG" && target === "local/demo") break;
    if (tries === 20) throw new Error(`the form did not keep the mapping: ${typed} → ${target}`);
  }
  await panel.getByRole("button", { name: "Add team" }).click();
  await expectVisible(page, panel.getByTestId("linear-teams").getByText("ENG"), "the mapping");
  await panel.getByLabel("Move an issue to its team's first started state when the agent starts").check();
  await expectVisible(page, panel.getByText("Saved."), "the setting saved");

  step("kept after a reload");
  await page.reload();
  await expectVisible(page, panel.getByTestId("linear-teams").getByText("ENG"), "the mapping after a reload");
  if (!(await panel.getByLabel("Move an issue to its team's first started state when the agent starts").isChecked())) {
    throw new Error("the box was not kept");
  }
  await shot(page, "linear-settings");
} finally {
  await browser.close();
}
