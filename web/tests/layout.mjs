// Every page at a desktop and a phone width: a screenshot each, and every label placed
// where a person looks for it — above or beside its own control, never over another one.
// Fails naming the page, the width and the label. Run by `tests/tests/web.rs`.
import { BASE, launch, shot, step } from "./browser.mjs";

const PAGES = [
  ["sessions", "/"],
  ["inbox", "/inbox"],
  ["new-session", "/new"],
  ["automations", "/automations"],
  ["analytics", "/analytics"],
  ["settings-account", "/settings/account"],
  ["settings-notifications", "/settings/notifications"],
  ["settings-repositories", "/settings/repositories"],
  ["settings-environments", "/settings/environments"],
  ["settings-models", "/settings/models"],
  ["settings-images", "/settings/images"],
  ["settings-integrations", "/settings/integrations"],
  ["settings-cli", "/settings/cli?port=40000&state=0123456789abcdef0123"],
];
const WIDTHS = [
  ["desktop", 1280, 900],
  ["phone", 390, 844],
];

/** In the page: each problem with a label, in words. */
function problems() {
  const out = [];
  const visible = (el) => {
    const r = el.getBoundingClientRect();
    const s = getComputedStyle(el);
    return r.width > 0 && r.height > 0 && s.visibility !== "hidden" && s.display !== "none";
  };
  const box = (el) => el.getBoundingClientRect();
  const overlap = (a, b) =>
    Math.min(a.right, b.right) - Math.max(a.left, b.left) > 2 && Math.min(a.bottom, b.bottom) - Math.max(a.top, b.top) > 2;
  const controls = [...document.querySelectorAll("input, select, textarea, button")].filter(visible);
  for (const label of document.querySelectorAll("label")) {
    if (!visible(label)) continue;
    const own = label.control;
    const name = label.textContent.trim().split("\n")[0].slice(0, 40);
    const l = box(label);
    if (own && visible(own) && !label.contains(own)) {
      const c = box(own);
      const below = c.top >= l.bottom - 4 && c.top - l.bottom <= 40 && c.left < l.right + 8 && c.right > l.left - 8;
      const beside = c.left >= l.right - 4 && c.left - l.right <= 48 && c.top < l.bottom && c.bottom > l.top;
      if (!below && !beside) out.push(`"${name}" is detached from its control`);
    }
    // The label's own text must not sit over another control.
    for (const c of controls) {
      if (c === own || label.contains(c)) continue;
      if (overlap(l, box(c))) out.push(`"${name}" overlaps a ${c.tagName.toLowerCase()} (${c.getAttribute("aria-label") ?? c.id ?? ""})`);
    }
  }
  return out;
}

const browser = await launch();
const found = [];
try {
  for (const [width, w, h] of WIDTHS) {
    const page = await (await browser.newContext({ viewport: { width: w, height: h } })).newPage();
    page.on("pageerror", (e) => console.log(`[page error] ${e.message}`));
    for (const [name, path] of PAGES) {
      step(`${name} at ${width} width`);
      await page.goto(BASE + path);
      await page.waitForLoadState("networkidle");
      await page.waitForTimeout(300);
      await shot(page, `layout-${name}-${width}`);
      for (const p of await page.evaluate(problems)) found.push(`${path} (${width}): ${p}`);
    }
    await page.close();
  }
} finally {
  await browser.close();
}
if (found.length > 0) {
  throw new Error(`labels out of place:\n${found.join("\n")}`);
}
