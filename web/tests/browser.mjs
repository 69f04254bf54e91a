// Shared by the browser suites: Debian's Chromium driven by playwright-core (which
// downloads nothing), with the flags headless Chromium needs on a closed network.
import { chromium } from "playwright-core";
import { mkdirSync } from "node:fs";
import { join } from "node:path";

export const BASE = process.env.BASE_URL ?? "http://127.0.0.1:8787";
export const ARTIFACTS = process.env.ARTIFACTS_DIR ?? "e2e-artifacts";
mkdirSync(ARTIFACTS, { recursive: true });

export async function launch() {
  return chromium.launch({
    executablePath: process.env.INSPECT_CHROMIUM ?? "/usr/bin/chromium",
    headless: true,
    args: [
      "--no-sandbox",
      "--disable-gpu",
      "--disable-quic",
      "--no-first-run",
      "--disable-background-networking",
      "--disable-component-update",
      "--disable-sync",
    ],
  });
}

export async function shot(page, name) {
  await page.screenshot({ path: join(ARTIFACTS, `${name}.png`), fullPage: true });
}

export function step(name) {
  console.log(`[e2e] ${name}`);
}

/** Fails with what the page showed, for a readable error. */
export async function expectVisible(page, locator, what, timeout = 90_000) {
  try {
    await locator.first().waitFor({ state: "visible", timeout });
  } catch (e) {
    await shot(page, `failed-${what.replace(/\W+/g, "-")}`);
    const text = await page.locator("body").innerText().catch(() => "");
    throw new Error(`${what} did not appear: ${e.message}\n--- page ---\n${text.slice(-3000)}`);
  }
}
