// The desktop people watch, in the browser: a person clicks "Desktop" on the session page;
// their link (the control plane's, which sends them through the sandbox's gate to noVNC)
// opens in a new tab, the canvas connects and shows the empty desktop; then they ask the agent to open its app, and the agent's
// browser appears on the desktop and animates: frames that change, counted in pixels.
// Run by `tests/tests/media.rs`.
import { expectVisible, launch, shot, step } from "./browser.mjs";

const { BASE_URL, SESSION_ID, PERSON } = process.env;
const browser = await launch();
try {
  const context = await browser.newContext({
    viewport: { width: 1300, height: 860 },
    extraHTTPHeaders: { "X-OpenInspect-Actor": PERSON },
  });
  const session = await context.newPage();
  session.on("pageerror", (e) => console.log(`[page error] ${e.message}`));
  step("Desktop, on the session page: the person's link leads to noVNC through the gate");
  await session.goto(`${BASE_URL}/sessions/${SESSION_ID}`);
  const button = session.getByRole("region", { name: "Terminals" }).getByTestId("open-desktop");
  await expectVisible(session, button, "the Desktop button");
  await session.waitForFunction(() => !document.querySelector('[data-testid="open-desktop"]')?.disabled, null, {
    timeout: 60_000,
  });
  const [page] = await Promise.all([context.waitForEvent("page"), button.click()]);
  await page.waitForURL(/vnc\.html/, { timeout: 30_000 });
  if (!page.url().includes("vnc.html") || page.url().includes("inspect_port_token")) {
    throw new Error(`the link ended at ${page.url()}`);
  }
  if (!page.url().includes("view_only=1")) throw new Error(`not view-only: ${page.url()}`);
  const canvas = page.locator("#noVNC_container canvas");
  await canvas.waitFor({ state: "visible", timeout: 30_000 });
  await page.waitForFunction(
    () => {
      const c = document.querySelector("#noVNC_container canvas");
      return c && c.width === 1280 && c.height === 800;
    },
    null,
    { timeout: 30_000 },
  );
  // The pixels of the canvas, every 4th of each row and column (enough to see a change).
  const frame = () =>
    page.evaluate(() => {
      const c = document.querySelector("#noVNC_container canvas");
      const d = c.getContext("2d").getImageData(0, 0, c.width, c.height).data;
      const out = [];
      for (let y = 0; y < c.height; y += 4) {
        for (let x = 0; x < c.width; x += 4) {
          const i = (y * c.width + x) * 4;
          out.push((d[i] << 16) | (d[i + 1] << 8) | d[i + 2]);
        }
      }
      return out;
    });
  const changed = (a, b) => a.reduce((n, v, i) => n + (v !== b[i] ? 1 : 0), 0);
  const empty = await frame();
  await shot(page, "desktop-empty");

  step("the agent opens its app: its browser shows on the desktop and moves");
  const asked = await fetch(`${BASE_URL}/sessions/${SESSION_ID}/prompt`, {
    method: "POST",
    headers: { "content-type": "application/json", "X-OpenInspect-Actor": PERSON },
    body: JSON.stringify({ content: "open the app and watch it" }),
  });
  if (!asked.ok) throw new Error(`the prompt was refused: ${asked.status} ${await asked.text()}`);
  const deadline = Date.now() + 120_000;
  let last = await frame();
  let moving = 0;
  const counts = [];
  while (moving < 4) {
    if (Date.now() > deadline) {
      await shot(page, "desktop-still");
      throw new Error(`the desktop did not draw the agent's browser: changed pixels ${counts.join(", ")}`);
    }
    await page.waitForTimeout(400);
    const now = await frame();
    const n = changed(last, now);
    const away = changed(empty, now);
    counts.push(n);
    // A frame that differs from the empty desktop and from the frame before.
    moving = n > 200 && away > 5_000 ? moving + 1 : 0;
    last = now;
  }
  await shot(page, "desktop-agent");
  await expectVisible(
    session,
    session.getByTestId("desktop-note").filter({ hasText: "opened the desktop" }),
    "the timeline's desktop note",
  );
  console.log(`[desktop] ok: changed pixels between frames ${counts.slice(-4).join(", ")} of ${empty.length}`);
} finally {
  await browser.close();
}
