// Automations in the browser: create a daily schedule on a local repository (the preset's
// live "next run" preview, a refused custom cron that fires too often), trigger it now,
// watch its run complete in the history and open its session, then pause and resume it;
// a Slack channel trigger whose regex does not read is refused with the reason, then made;
// a template fills the form (a GitHub trigger on a repository the App cannot see is
// refused with the reason).
// Run by `tests/tests/web.rs`, which registers `local/demo` and scripts the model.
import { BASE, expectVisible, launch, shot, step } from "./browser.mjs";

const browser = await launch();
try {
  const page = await (await browser.newContext({ viewport: { width: 1280, height: 900 } })).newPage();
  page.on("pageerror", (e) => console.log(`[page error] ${e.message}`));

  step("the automations page");
  await page.goto(`${BASE}/automations`);
  await expectVisible(page, page.getByRole("heading", { name: "Automations" }), "the automations page");

  step("a template fills the form: fix failing CI, a GitHub trigger");
  await expectVisible(page, page.getByTestId("automation-templates"), "the templates, open while there are no automations");
  await shot(page, "automation-templates");
  await page.getByRole("button", { name: "Template: Fix failing CI on a pull request" }).click();
  const filled = page.getByRole("form", { name: "New automation" });
  await expectVisible(page, filled.getByLabel("Automation name"), "the form");
  if ((await filled.getByLabel("Automation name").inputValue()) !== "Fix failing CI") throw new Error("the template did not fill the name");
  if ((await filled.getByLabel("Trigger type").inputValue()) !== "github_event") throw new Error("the template did not choose the trigger");
  if ((await filled.getByLabel("GitHub event").inputValue()) !== "check_suite") throw new Error("the template did not choose the event");
  if (!(await filled.getByLabel("Instructions").inputValue()).includes("check failed")) throw new Error("the template did not fill the instructions");
  await filled.getByLabel("Run on local/demo").check();
  await filled.getByRole("button", { name: "Create automation" }).click();
  await expectVisible(page, filled.getByText("cannot see local/demo"), "a repository the App cannot see, refused with the reason");
  await filled.getByRole("button", { name: "Cancel" }).click();

  step("Automations › New automation: a daily schedule on local/demo");
  await page.getByRole("button", { name: "New automation" }).click();
  const form = page.getByRole("form", { name: "New automation" });
  await form.getByLabel("Automation name").fill("Morning triage");
  await form.getByLabel("Run on local/demo").check();
  await form.getByLabel("Time zone").fill("UTC");
  await form.getByLabel("Schedule preset").selectOption("custom");
  await form.getByLabel("Cron expression").fill("*/5 * * * *");
  await expectVisible(page, form.getByTestId("next-run").getByText("15 minutes"), "a cron that fires too often refused");
  await form.getByLabel("Schedule preset").selectOption("daily");
  await form.getByLabel("Hour").selectOption("9");
  await expectVisible(page, form.getByTestId("next-run").getByText("Next run:"), "the next run's preview");
  await form.getByLabel("Instructions").fill("Summarise the open work.");
  await shot(page, "automation-form");
  await form.getByRole("button", { name: "Create automation" }).click();
  await page.waitForURL(/\/automations\/auto_[0-9a-f]+$/, { timeout: 30_000 });
  await expectVisible(page, page.getByRole("heading", { name: "Morning triage" }), "the automation's page");
  await expectVisible(page, page.getByTestId("automation-status").getByText("Enabled"), "enabled");
  await expectVisible(page, page.getByText("0 9 * * * (UTC)"), "the schedule");

  step("trigger now: a run appears and completes");
  await page.getByRole("button", { name: "Trigger now" }).click();
  await expectVisible(page, page.getByTestId("run").first(), "a run in the history");
  await expectVisible(page, page.locator('[data-testid="run"][data-status="completed"]'), "the run completed", 150_000);
  await shot(page, "automation-runs");

  step("its session");
  const automationUrl = page.url();
  await page.getByRole("link", { name: "View session" }).first().click();
  await page.waitForURL(/\/sessions\/[0-9a-f]+$/, { timeout: 30_000 });
  await expectVisible(page, page.getByText("[Auto] Morning triage").first(), "the session's title");
  await expectVisible(page, page.getByTestId("execution-complete"), "the session's completion");

  step("pause and resume");
  await page.goto(automationUrl);
  await page.getByRole("button", { name: "Pause" }).click();
  await expectVisible(page, page.getByTestId("automation-status").getByText("Paused"), "paused");
  await page.getByRole("button", { name: "Resume" }).click();
  await expectVisible(page, page.getByTestId("automation-status").getByText("Enabled"), "enabled again");

  step("the list");
  await page.getByRole("link", { name: "← Automations" }).click();
  await expectVisible(page, page.getByTestId("automations").getByRole("link", { name: "Morning triage" }), "listed");

  step("a Slack channel trigger: a regex that does not read is refused, then one that does is made");
  await page.getByRole("button", { name: "New automation" }).click();
  const slack = page.getByRole("form", { name: "New automation" });
  await slack.getByLabel("Trigger type").selectOption("slack_channel");
  await slack.getByLabel("Automation name").fill("Crash triage");
  await slack.getByLabel("Slack channels").fill("C0SUPPORT, C0ALERTS");
  await slack.getByLabel("Text match").selectOption("regex");
  await slack.getByLabel("Text pattern").fill("(crash");
  await slack.getByLabel("Slack users denied").fill("U0BOT");
  await slack.getByLabel("Instructions").fill("Triage the crash in the message.");
  await slack.getByRole("button", { name: "Create automation" }).click();
  await expectVisible(page, slack.getByText("does not read"), "the pattern's reason");
  await slack.getByLabel("Text pattern").fill("(?i)\\bcrash");
  await shot(page, "automation-slack-form");
  await slack.getByRole("button", { name: "Create automation" }).click();
  await page.waitForURL(/\/automations\/auto_[0-9a-f]+$/, { timeout: 30_000 });
  await expectVisible(page, page.getByText("Slack: C0ALERTS, C0SUPPORT"), "the watched channels");
  console.log("[automations] ok");
} finally {
  await browser.close();
}
