// A Web Push reaches a closed tab's service worker: the payload the control plane sent
// (encrypted, VAPID-signed) as the fake push service decrypted it (PUSH_PAYLOAD) is
// delivered to the app's service worker (`/sw.js`) the way a push service's message
// arrives (DevTools' ServiceWorker.deliverPushMessage); the worker shows the notification,
// and the notification's link is the session's. Chromium's own PushManager subscribes only
// through Google's push service, out of reach here: the subscription is the fake's.
// Run by `tests/tests/web.rs`.
import { BASE, launch, step } from "./browser.mjs";

const payload = process.env.PUSH_PAYLOAD;
const expectUrl = process.env.PUSH_URL;
const browser = await launch();
try {
  const context = await browser.newContext();
  await context.grantPermissions(["notifications"], { origin: BASE });
  const page = await context.newPage();
  page.on("pageerror", (e) => console.log(`[page error] ${e.message}`));
  await page.goto(`${BASE}/settings/notifications`);

  step("the app's service worker is registered");
  const cdp = await context.newCDPSession(page);
  const registrations = [];
  cdp.on("ServiceWorker.workerRegistrationUpdated", (e) => registrations.push(...e.registrations));
  await cdp.send("ServiceWorker.enable");
  await page.evaluate(async () => {
    await navigator.serviceWorker.register("/sw.js", { scope: "/" });
    await navigator.serviceWorker.ready;
  });
  const deadline = Date.now() + 10_000;
  while (!registrations.some((r) => r.scopeURL === `${BASE}/`) && Date.now() < deadline) {
    await new Promise((r) => setTimeout(r, 100));
  }
  const reg = registrations.find((r) => r.scopeURL === `${BASE}/`);
  if (!reg) throw new Error(`no registration: ${JSON.stringify(registrations)}`);

  step("the push the control plane sent shows as a notification");
  await cdp.send("ServiceWorker.deliverPushMessage", {
    origin: BASE,
    registrationId: reg.registrationId,
    data: payload,
  });
  const shown = await page.evaluate(async () => {
    const r = await navigator.serviceWorker.ready;
    for (let i = 0; i < 100; i++) {
      const list = await r.getNotifications();
      if (list.length) return list.map((n) => ({ title: n.title, body: n.body, tag: n.tag, url: n.data?.url }));
      await new Promise((ok) => setTimeout(ok, 100));
    }
    return [];
  });
  const notice = JSON.parse(payload);
  if (shown.length !== 1) throw new Error(`notifications shown: ${JSON.stringify(shown)}`);
  if (shown[0].title !== notice.title || shown[0].body !== notice.body || shown[0].tag !== notice.tag)
    throw new Error(`shown ${JSON.stringify(shown[0])}, sent ${payload}`);
  if (!shown[0].url.endsWith(expectUrl)) throw new Error(`its link is ${shown[0].url}, not …${expectUrl}`);
  console.log(`[push] shown: ${JSON.stringify(shown[0])}`);
} finally {
  await browser.close();
}
