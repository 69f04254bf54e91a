// `inspect login` through the browser: the CLI printed its sign-in page (LOGIN_URL, with
// its loopback port and one-time state); signed out, the page goes through GitHub and back
// to itself, "Allow" makes a token and posts it to the CLI's port, whose page says it is
// done. A link whose state is malformed is refused by the page. Run by `tests/tests/web.rs`
// after signin.mjs, on the same stack, while the real CLI waits.
import { BASE, expectVisible, launch, shot, step } from "./browser.mjs";

const link = process.env.LOGIN_URL;
if (!link?.startsWith(`${BASE}/settings/cli?`)) throw new Error(`not a sign-in link: ${link}`);
const browser = await launch();
try {
  const page = await (await browser.newContext({ viewport: { width: 1280, height: 900 } })).newPage();
  page.on("pageerror", (e) => console.log(`[page error] ${e.message}`));

  step("signed out: through GitHub and back to the command line's page");
  await page.goto(link);
  await page.getByRole("link", { name: "Sign in with GitHub" }).click();
  await page.waitForURL(link, { timeout: 30_000 });
  await expectVisible(page, page.getByRole("heading", { name: "Sign in the command line" }), "the hand-off page");
  const port = new URL(link).searchParams.get("port");
  await expectVisible(page, page.getByText(`waiting on port ${port}`), "which port asks");
  await expectVisible(page, page.locator("section strong", { hasText: "alice" }), "as whom");
  await shot(page, "cli-login");

  step("a link with a made-up state is refused");
  const other = await page.context().newPage();
  await other.goto(`${BASE}/settings/cli?port=${port}&state=x`);
  await expectVisible(other, other.getByText("This link is not one `inspect login` made"), "the refusal");
  if ((await other.getByRole("button", { name: "Allow" }).count()) !== 0) throw new Error("Allow offered on a bad link");
  await other.close();

  step("Allow: the token goes to the command line's port");
  await page.getByRole("button", { name: "Allow" }).click();
  await page.waitForURL(`http://127.0.0.1:${port}/callback`, { timeout: 30_000 });
  await expectVisible(page, page.getByText("Signed in. You can close this tab"), "the command line's answer");
  if (page.url().includes("oit_")) throw new Error(`the token is in the URL: ${page.url()}`);
  console.log("[cli-login] ok");
} finally {
  await browser.close();
}
