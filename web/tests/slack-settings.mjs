// Settings › Slack in the browser: add a routing rule and a channel association, see them
// kept after a reload, remove the association. Run by `tests/tests/slack.rs`, which
// registers `local/demo` and `local/other` and then sends a request the rule routes.
import { BASE, expectVisible, launch, shot, step } from "./browser.mjs";

const browser = await launch();
try {
  const page = await (await browser.newContext({ viewport: { width: 1280, height: 1000 } })).newPage();
  page.on("pageerror", (e) => console.log(`[page error] ${e.message}`));

  step("Settings › Slack: a rule and a channel");
  await page.goto(`${BASE}/settings/integrations`);
  const panel = page.getByRole("region", { name: "Slack" });
  await expectVisible(page, panel, "the Slack panel");
  await panel.getByLabel("Keyword").fill("billing");
  await panel.getByLabel("Rule target").selectOption("local/other");
  await panel.getByRole("button", { name: "Add rule" }).click();
  await expectVisible(page, panel.getByTestId("slack-rules").getByText("billing"), "the rule");
  await panel.getByLabel("Channel id").fill("CDOCS");
  await panel.getByLabel("Channel target").selectOption("local/demo");
  await panel.getByRole("button", { name: "Add channel" }).click();
  await expectVisible(page, panel.getByTestId("slack-channels").getByText("CDOCS"), "the channel");

  step("kept after a reload; a bad channel id is refused");
  await page.reload();
  await expectVisible(page, panel.getByTestId("slack-rules").getByText("billing"), "the rule after a reload");
  // The page's other lists may still be arriving and re-render the form: type until the
  // form holds what was typed, then send it.
  for (let tries = 0; ; tries++) {
    await panel.getByLabel("Channel id").fill("#general");
    await panel.getByLabel("Channel target").selectOption("local/demo");
    await page.waitForTimeout(200);
    const typed = await panel.getByLabel("Channel id").inputValue();
    const target = await panel.getByLabel("Channel target").inputValue();
    if (typed === "#general" && target === "local/demo") break;
    if (tries === 20) throw new Error(`the form did not keep the channel: ${typed} → ${target}`);
  }
  await panel.getByRole("button", { name: "Add channel" }).click();
  await expectVisible(page, panel.getByText("is not a Slack channel id"), "the refusal");
  await panel.getByRole("button", { name: "Remove the channel CDOCS" }).click();
  await page.waitForTimeout(300);
  if ((await panel.getByTestId("slack-channels").locator("li").count()) !== 0) throw new Error("the channel stayed");
  await shot(page, "slack-settings");
} finally {
  await browser.close();
}
