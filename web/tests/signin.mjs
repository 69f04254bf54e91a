// Sign-in with GitHub in the browser, against a fake GitHub that follows its documented
// OAuth flow: the sign-in page, the round trip, the app as the signed-in person, sign-out.
import { BASE, expectVisible, launch, shot, step } from "./browser.mjs";

const browser = await launch();
try {
  const page = await browser.newPage({ viewport: { width: 1280, height: 900 } });
  step("signed out: the sign-in page");
  await page.goto(`${BASE}/settings`);
  await expectVisible(page, page.getByRole("link", { name: "Sign in with GitHub" }), "the sign-in page");
  await shot(page, "signin");
  step("through GitHub and back to the page asked for");
  await page.getByRole("link", { name: "Sign in with GitHub" }).click();
  await page.waitForURL(`${BASE}/settings`, { timeout: 30_000 });
  await expectVisible(page, page.getByRole("heading", { name: "Settings" }), "settings after sign-in");
  await expectVisible(page, page.locator(".who-name", { hasText: "alice" }), "alice in the header");
  // Local repositories are for local mode only.
  if ((await page.getByRole("heading", { name: "Local repositories" }).count()) !== 0) {
    throw new Error("local repositories shown to a signed-in user");
  }
  step("sign out");
  await page.getByRole("button", { name: "Sign out" }).click();
  await expectVisible(page, page.getByRole("link", { name: "Sign in with GitHub" }), "signed out");
  console.log("[signin] ok");
} finally {
  await browser.close();
}
