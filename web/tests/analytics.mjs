// The analytics page for sessions made in the test: by person and by repository, a chart
// drawn (the chart library loaded with the page) and the table's row; the CSV link serves
// the same sums. Run by `tests/tests/web.rs` after one session's prompt ended.
import { BASE, expectVisible, launch, shot, step } from "./browser.mjs";

const browser = await launch();
try {
  const page = await (await browser.newContext({ viewport: { width: 1280, height: 1000 } })).newPage();
  page.on("pageerror", (e) => console.log(`[page error] ${e.message}`));

  step("Analytics by person: a chart and the local user's row");
  await page.goto(`${BASE}/analytics`);
  await page.getByLabel("Group by").selectOption("person");
  await expectVisible(page, page.locator('[data-testid="usage-chart"][data-drawn="1"]'), "the chart, drawn");
  const row = page.getByTestId("usage-table").locator("tbody tr").first();
  await expectVisible(page, row.getByText("local", { exact: true }), "the local user's row");
  const cells = await row.locator("td").allInnerTexts();
  if (cells[1] !== "1" || cells[3] !== "1") throw new Error(`sessions and tool calls: ${cells}`);
  await shot(page, "analytics-person");

  step("by repository, and its CSV");
  await page.getByLabel("Group by").selectOption("repository");
  await expectVisible(page, page.getByTestId("usage-table").getByText("local/demo"), "the repository's row");
  const href = await page.getByRole("link", { name: "Export CSV" }).getAttribute("href");
  const csv = await page.evaluate((h) => fetch(h).then((r) => r.text()), href);
  if (!csv.split("\r\n")[1]?.startsWith("local/demo,local/demo,1,1,1,")) throw new Error(`the CSV: ${csv}`);
  await shot(page, "analytics-repository");
} finally {
  await browser.close();
}
