// "Try N ways" in the browser: a prompt typed on the session page starts three attempts;
// they show side by side with their changed files as they finish; "Use this one" on the
// second opens its pull request and the group is decided. Run by `tests/tests/github.rs`.
import { BASE, expectVisible, launch, shot, step } from "./browser.mjs";

const session = process.env.SESSION_ID;
const browser = await launch();
try {
  const page = await (await browser.newContext({ viewport: { width: 1400, height: 1000 } })).newPage();
  page.on("pageerror", (e) => console.log(`[page error] ${e.message}`));
  step("three ways at one prompt");
  await page.goto(`${BASE}/sessions/${session}`);
  await page.getByRole("textbox", { name: "Prompt" }).fill("Add a line to way.txt");
  await page.getByRole("combobox", { name: "How many ways" }).selectOption("3");
  await page.getByRole("button", { name: "Try 3 ways" }).click();
  const panel = page.getByRole("region", { name: "Attempts" });
  await expectVisible(page, panel.getByTestId("attempt").nth(2), "the third attempt");
  step("side by side, each with its change, all finished");
  await page.waitForFunction(
    () => {
      const cards = [...document.querySelectorAll('[data-testid="attempt"]')];
      return (
        cards.length === 3 &&
        cards.every((c) => c.textContent.includes("way.txt") && c.querySelector("button")?.disabled === false)
      );
    },
    null,
    { timeout: 240_000, polling: 500 },
  );
  const boxes = await panel.getByTestId("attempt").evaluateAll((cards) => cards.map((c) => c.getBoundingClientRect().top));
  if (new Set(boxes.map(Math.round)).size !== 1) throw new Error(`the attempts are not side by side: ${boxes}`);
  await shot(page, "attempts");
  step("use the second");
  await panel.getByTestId("attempt").nth(1).getByRole("button", { name: "Use this one" }).click();
  await expectVisible(page, panel.getByTestId("attempt-pr").getByRole("link", { name: /acme\/web#\d+/ }), "the pull request's link");
  await expectVisible(page, panel.getByTestId("attempt").nth(1).getByText("chosen", { exact: true }), "the chosen badge");
  const left = await panel.getByRole("button", { name: "Use this one" }).count();
  if (left !== 0) throw new Error(`${left} "Use this one" buttons left after choosing`);
  await shot(page, "attempts-chosen");
  console.log("[attempts] ok");
} finally {
  await browser.close();
}
