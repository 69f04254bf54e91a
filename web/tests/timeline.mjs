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
    window.__frames = [];
    new PerformanceObserver((list) => {
      for (const e of list.getEntries()) {
        const script = e.scripts.reduce((n, sc) => n + sc.duration, 0);
        const layout = e.styleAndLayoutStart ? e.startTime + e.duration - e.styleAndLayoutStart : 0;
        window.__frames.push({ ms: Math.round(e.duration), script: Math.round(script), layout: Math.round(layout), top: e.scripts.map((sc) => `${sc.sourceFunctionName || sc.invoker}:${Math.round(sc.duration)}`).slice(0, 3) });
      }
    }).observe({ type: "long-animation-frame", buffered: true });
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
  await page.getByTestId("timeline").hover();
  for (;;) {
    rounds++;
    await page.mouse.wheel(0, -1500);
    const done = await page.evaluate(() => {
      const el = document.querySelector('[data-testid="timeline"]');
      const first = el.querySelector(".event");
      return el.scrollTop === 0 && first && first.getAttribute("data-seq") !== null && !el.textContent.includes("Scroll up for older") && !el.textContent.includes("Loading older");
    });
    if (done) break;
    if (Date.now() - scrollStart > 120_000) {
      const seen = await page.evaluate(() => {
        const el = document.querySelector('[data-testid="timeline"]');
        const rows = el.querySelectorAll(".event");
        return { scrollTop: el.scrollTop, rows: rows.length, first: rows[0]?.getAttribute("data-seq"), top: el.firstElementChild?.textContent };
      });
      await shot(page, "timeline-stuck");
      throw new Error(`could not reach the first event after ${rounds} scrolls: ${JSON.stringify(seen)}`);
    }
    await page.waitForTimeout(16);
  }
  const scrollMs = Date.now() - scrollStart;
  const scrollTasks = await page.evaluate(() => window.__longTasks.splice(0));
  const frames = await page.evaluate(() => window.__frames.sort((a, b) => b.ms - a.ms).slice(0, 5));
  console.log(`[timeline] slowest frames ${JSON.stringify(frames)}`);
  const shown = await page.locator(".event").count();
  const firstText = await page.locator(".event").first().innerText();
  if (!firstText.includes("make a lot of events")) throw new Error(`the first event is not the prompt: ${firstText}`);
  await shot(page, "timeline-top");
  const metrics = {
    events: 5000,
    rowsInTheDom: shown,
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
