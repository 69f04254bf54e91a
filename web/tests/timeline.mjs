// A session with 5,000 events: how long it takes to render, whether scrolling stays free
// of long tasks, and that scrolling up reaches the first event. Prints its measurements
// (reported in BENCHMARKS.md); it fails only if events cannot be reached.
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { ARTIFACTS, BASE, expectVisible, launch, shot, step } from "./browser.mjs";

const id = process.env.SESSION_ID;
const browser = await launch();
try {
  const page = await browser.newPage({ viewport: { width: 1280, height: 900 } });
  await page.addInitScript(() => {
    window.__longTasks = [];
    new PerformanceObserver((list) => {
      for (const e of list.getEntries()) window.__longTasks.push({ start: e.startTime, ms: e.duration });
    }).observe({ type: "longtask", buffered: true });
  });
  step("open the session");
  const t0 = Date.now();
  await page.goto(`${BASE}/sessions/${id}`);
  await expectVisible(page, page.getByTestId("execution-complete"), "the newest event");
  const renderMs = Date.now() - t0;
  await page.waitForTimeout(500);
  const loadTasks = await page.evaluate(() => window.__longTasks.splice(0));

  step("scroll to the top, loading older pages");
  const scrollStart = Date.now();
  let rounds = 0;
  for (;;) {
    rounds++;
    const done = await page.evaluate(() => {
      const el = document.querySelector('[data-testid="timeline"]');
      el.scrollBy(0, -1500);
      const first = el.querySelector(".event");
      return el.scrollTop === 0 && first && !el.textContent.includes("Scroll up for older") && !el.textContent.includes("Loading older");
    });
    if (done) break;
    if (Date.now() - scrollStart > 120_000) throw new Error(`could not reach the first event after ${rounds} scrolls`);
    await page.waitForTimeout(16);
  }
  const scrollMs = Date.now() - scrollStart;
  const scrollTasks = await page.evaluate(() => window.__longTasks.splice(0));
  const shown = await page.locator(".event").count();
  const firstText = await page.locator(".event").first().innerText();
  if (!firstText.includes("make a lot of events")) throw new Error(`the first event is not the prompt: ${firstText}`);
  await shot(page, "timeline-top");
  const metrics = {
    events: 5000,
    renderedRows: shown,
    firstRenderMs: renderMs,
    loadLongTasks: loadTasks.length,
    loadLongestTaskMs: Math.round(Math.max(0, ...loadTasks.map((t) => t.ms))),
    scrollToTopMs: scrollMs,
    scrollSteps: rounds,
    scrollLongTasks: scrollTasks.length,
    scrollLongTasksOver50ms: scrollTasks.filter((t) => t.ms > 50).length,
    scrollLongestTaskMs: Math.round(Math.max(0, ...scrollTasks.map((t) => t.ms))),
  };
  writeFileSync(join(ARTIFACTS, "metrics.json"), JSON.stringify(metrics, null, 2));
  console.log(`[timeline] ${JSON.stringify(metrics)}`);
} finally {
  await browser.close();
}
