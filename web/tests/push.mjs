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

  step("the app's service worker is registered and active");
  const cdp = await context.newCDPSession(page);
  const registrations = [];
  const versions = new Map(); // versionId → its latest state
  cdp.on("ServiceWorker.workerRegistrationUpdated", (e) => registrations.push(...e.registrations));
  cdp.on("ServiceWorker.workerVersionUpdated", (e) => e.versions.forEach((v) => versions.set(v.versionId, v)));
  await cdp.send("ServiceWorker.enable");
  await page.evaluate(async () => {
    await navigator.serviceWorker.register("/sw.js", { scope: "/" });
    await navigator.serviceWorker.ready;
  });
  // `ready` resolves once the worker is activating; the browser delivers a push to an
  // activated one (a push sent earlier may be dropped), so wait for DevTools to say so.
  const activated = (id) => [...versions.values()].some((v) => v.registrationId === id && v.status === "activated");
  const deadline = Date.now() + 15_000;
  let reg;
  while (Date.now() < deadline) {
    reg = registrations.find((r) => r.scopeURL === `${BASE}/` && !r.isDeleted);
    if (reg && activated(reg.registrationId)) break;
    await new Promise((r) => setTimeout(r, 100));
  }
  if (!reg) throw new Error(`no registration: ${JSON.stringify(registrations)}`);
  if (!activated(reg.registrationId)) throw new Error(`not activated: ${JSON.stringify([...versions.values()])}`);

  step("the push the control plane sent shows as a notification");
  // A push service delivers again until the browser takes the message; so does this, up to
  // three times, 5 s apart (the notification's tag makes a second delivery replace the
  // first, so one is shown either way).
  let shown = [];
  for (let attempt = 1; attempt <= 3 && !shown.length; attempt++) {
    if (attempt > 1) console.log(`[push] no notification after 5 s: delivering again (${attempt})`);
    await cdp.send("ServiceWorker.deliverPushMessage", {
      origin: BASE,
      registrationId: reg.registrationId,
      data: payload,
    });
    shown = await page.evaluate(async () => {
      const r = await navigator.serviceWorker.ready;
      for (let i = 0; i < 50; i++) {
        const list = await r.getNotifications();
        if (list.length) return list.map((n) => ({ title: n.title, body: n.body, tag: n.tag, url: n.data?.url }));
        await new Promise((ok) => setTimeout(ok, 100));
      }
      return [];
    });
  }
  const notice = JSON.parse(payload);
  if (shown.length !== 1) throw new Error(`notifications shown: ${JSON.stringify(shown)}`);
  if (shown[0].title !== notice.title || shown[0].body !== notice.body || shown[0].tag !== notice.tag)
    throw new Error(`shown ${JSON.stringify(shown[0])}, sent ${payload}`);
  if (!shown[0].url.endsWith(expectUrl)) throw new Error(`its link is ${shown[0].url}, not …${expectUrl}`);
  console.log(`[push] shown: ${JSON.stringify(shown[0])}`);
} finally {
  await browser.close();
}
