// Environments in the browser: create one of two local repositories with a secret of its
// own, start a session on it from the picker, see the sandbox get both clones and exactly
// the secrets the seeds allow, then edit and delete the environment and see the running
// session unchanged. Run by `tests/tests/web.rs`, which registers `local/demo` and
// `local/other`, sets a global and a repository secret, and scripts the model.
import { BASE, expectVisible, launch, shot, step } from "./browser.mjs";

const browser = await launch();
try {
  const page = await (await browser.newContext({ viewport: { width: 1280, height: 900 } })).newPage();
  page.on("pageerror", (e) => console.log(`[page error] ${e.message}`));

  step("Settings › Environments: create staging with two repositories");
  await page.goto(`${BASE}/settings/environments`);
  const panel = page.getByRole("region", { name: "Environments" });
  await expectVisible(page, panel, "the environments panel");
  await panel.getByRole("button", { name: "New environment" }).click();
  await panel.getByLabel("Environment name").fill("staging");
  await panel.getByLabel("Environment description").fill("web and its sibling");
  await panel.getByLabel("Add a repository to the environment").selectOption("local/demo");
  await panel.getByLabel("Add a repository to the environment").selectOption("local/other");
  await panel.getByRole("button", { name: "Save environment" }).click();
  await expectVisible(page, panel.getByTestId("environments").getByText("staging"), "the saved environment");

  step("its own secret");
  const secrets = page.getByRole("region", { name: "Secrets" });
  await secrets.getByLabel("Secret scope").selectOption({ label: "Environment: staging" });
  await secrets.getByPlaceholder("NAME").fill("ENV_ONLY");
  await secrets.getByPlaceholder("value").fill("env-secret-77");
  await secrets.getByRole("button", { name: "Set" }).click();
  await expectVisible(page, secrets.getByTestId("secrets").getByText("ENV_ONLY"), "the environment's secret by name");
  await shot(page, "env-settings");

  step("Settings › Skills: a skill for every session; Settings › Models lists the catalog");
  await page.goto(`${BASE}/settings/models`);
  // The catalog first: Models sits above Skills and grows when it loads, which would move
  // the "New skill" button from under a click already on its way.
  const models = page.getByRole("region", { name: "Models", exact: true });
  await expectVisible(page, models.getByLabel("Enable inspect/fake-model", { exact: true }), "the compatible server's model");
  const skills = page.getByRole("region", { name: "Skills", exact: true });
  await skills.getByRole("button", { name: "New skill" }).click();
  await skills.getByLabel("Name", { exact: true }).fill("house-style");
  await skills.getByLabel("Description (when the agent should use it)").fill("Use for every change: the house style");
  await skills.getByLabel("Instructions (Markdown)").fill("Write small commits.");
  await skills.getByRole("button", { name: "Create skill" }).click();
  await expectVisible(page, skills.getByRole("list", { name: "Skills" }).getByText("house-style"), "the saved skill");
  const mcp = page.getByRole("region", { name: "MCP servers", exact: true });
  await mcp.getByLabel("MCP server name").fill("docs-site");
  await mcp.getByLabel("MCP server URL or command").fill("http://127.0.0.1:9/mcp");
  await mcp.getByRole("button", { name: "Add" }).click();
  await expectVisible(page, mcp.getByRole("list", { name: "MCP servers" }).getByText("docs-site"), "the saved MCP server");
  await shot(page, "skills-and-models");

  step("the picker lists the environment first; a session starts on it");
  await page.goto(`${BASE}/new`);
  await expectVisible(page, page.getByLabel("Environment", { exact: true }), "the environment picker");
  const picked = await page.getByLabel("Environment", { exact: true }).locator("option:checked").innerText();
  if (picked !== "staging") throw new Error(`the picker chose ${picked}`);
  const box = page.getByLabel("First prompt");
  await box.click();
  await box.pressSequentially("What is here?", { delay: 10 });
  await box.press("Enter");
  await page.waitForURL(/\/sessions\/[0-9a-f]+$/, { timeout: 30_000 });
  const sessionUrl = page.url();
  await expectVisible(page, page.getByTestId("environment").getByText("environment staging"), "the environment's name");
  await expectVisible(page, page.getByTestId("session-skills").getByText("house-style"), "the skill the session pinned");
  await expectVisible(page, page.getByTestId("session-mcp").getByText("docs-site"), "the MCP server the session was given");
  await expectVisible(page, page.getByTestId("execution-complete"), "completion", 120_000);
  await page.locator("details.tool summary", { hasText: "bash" }).first().click();
  const output = await page.locator("details.tool[open] pre").last().innerText();
  for (const want of ["demo", "other", "G=global-secret-11", "R=none", "E=env-secret-77"]) {
    if (!output.includes(want)) throw new Error(`the sandbox output lacks ${want}:\n${output}`);
  }
  await shot(page, "env-session");

  step("edit the environment: the running session is unchanged");
  await page.goto(`${BASE}/settings/environments`);
  await panel.getByRole("button", { name: "Edit staging" }).click();
  await panel.getByLabel("Environment name").fill("staging-2");
  await panel.getByRole("button", { name: "Remove local/other" }).click();
  await panel.getByRole("button", { name: "Save environment" }).click();
  await expectVisible(page, panel.getByTestId("environments").getByText("staging-2"), "the edited environment");
  await page.goto(sessionUrl);
  await expectVisible(page, page.getByTestId("environment").getByText("environment staging"), "the session's own copy of the name");
  const head = await page.locator(".session-head").innerText();
  if (!head.includes("local/other")) throw new Error(`the session lost a repository: ${head}`);

  step("delete it: the session says so");
  await page.goto(`${BASE}/settings/environments`);
  await panel.getByRole("button", { name: "Delete staging-2" }).click();
  await expectVisible(page, panel.getByRole("button", { name: "New environment" }), "the panel after delete");
  await page.goto(sessionUrl);
  await expectVisible(page, page.getByText("Environment deleted"), "the deleted environment");
  await shot(page, "env-deleted");
} finally {
  await browser.close();
}
