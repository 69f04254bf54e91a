// The agent's picture in the browser: on the timeline (loaded, not broken), in the session's
// artifacts, and full size in a lightbox. Run by `tests/tests/media.rs`.
import { BASE, expectVisible, launch, shot, step } from "./browser.mjs";

const session = process.env.SESSION_ID;
const browser = await launch();
try {
  const page = await (await browser.newContext({ viewport: { width: 1400, height: 1000 } })).newPage();
  page.on("pageerror", (e) => console.log(`[page error] ${e.message}`));
  step("the picture on the timeline and in the artifacts");
  await page.goto(`${BASE}/sessions/${session}`);
  const figure = page.locator("main, body").getByTestId("media").first();
  await expectVisible(page, figure, "the picture");
  await page.waitForFunction(() => {
    const img = document.querySelector('[data-testid="media"] img');
    return img instanceof HTMLImageElement && img.complete && img.naturalWidth > 0;
  }, null, { timeout: 30_000 });
  await expectVisible(page, page.getByRole("region", { name: "Artifacts" }).getByTestId("media"), "the picture among the artifacts");
  await expectVisible(page, page.getByText("The hello page").first(), "its caption");
  step("full size in a lightbox");
  await figure.getByRole("button").click();
  await expectVisible(page, page.getByRole("dialog", { name: "The hello page" }), "the lightbox");
  await shot(page, "media-lightbox");
  console.log("[media] ok");
} finally {
  await browser.close();
}
