// The service worker: shows a Web Push from the control plane as a notification (its
// payload is a Notice: title, body, url, tag) and opens its link when clicked.
self.addEventListener("push", (event) => {
  let notice = { title: "Open-Inspect", body: "", url: "/inbox", tag: "inbox" };
  try {
    notice = { ...notice, ...event.data.json() };
  } catch {
    // A push without a JSON payload still says something happened.
  }
  event.waitUntil(
    self.registration.showNotification(notice.title, {
      body: notice.body,
      tag: notice.tag,
      data: { url: notice.url },
    }),
  );
});

self.addEventListener("notificationclick", (event) => {
  event.notification.close();
  const url = new URL(event.notification.data?.url ?? "/inbox", self.location.origin).href;
  event.waitUntil(
    self.clients.matchAll({ type: "window", includeUncontrolled: true }).then((tabs) => {
      const open = tabs.find((t) => t.url === url);
      return open ? open.focus() : self.clients.openWindow(url);
    }),
  );
});
