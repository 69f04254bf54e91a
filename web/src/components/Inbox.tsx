import { useEffect, useState } from "preact/hooks";
import { del, errorText, get, post, put } from "../api";
import { kindWords, readAll, useInbox } from "../inbox";
import type { Channels, InboxItem, InboxKind, InboxPage, NotificationPrefs, PushKey } from "../wire";
import { ErrorNote, ago } from "./bits";

/** The inbox page: what needs the person, unread first in weight, newest first. */
export function Inbox() {
  const live = useInbox();
  const [items, setItems] = useState<InboxItem[] | null>(null);
  const [error, setError] = useState("");
  const load = () =>
    get<InboxPage>("/inbox")
      .then((p) => setItems(p.items))
      .catch((e) => setError(errorText(e)));
  // Read again whenever the live count moves (a new item, or read elsewhere).
  useEffect(() => {
    void load();
  }, [live.unread]);
  return (
    <section class="inbox" aria-labelledby="inbox-h">
      <div class="row-between">
        <h1 id="inbox-h">Inbox</h1>
        <button type="button" onClick={() => void readAll().then(load)} disabled={live.unread === 0}>
          Mark all read
        </button>
      </div>
      <p class="muted" data-testid="inbox-count">
        {live.unread === 0 ? "Nothing unread." : `${live.unread} unread`}
      </p>
      <ErrorNote text={error} />
      {items?.length === 0 && <p class="muted">Sessions that need you (a prompt ends, a question, a review, a mention) will be listed here.</p>}
      <ul class="inbox-list">
        {(items ?? []).map((i) => (
          <li class={i.readAt ? "inbox-item" : "inbox-item unread"} data-testid="inbox-item">
            <a href={i.url}>
              <span class="inbox-kind">{kindWords(i.kind)}</span>
              <strong>{i.title}</strong>
              <span class="muted">{ago(i.createdAt)}</span>
              <span class="inbox-detail">{i.detail}</span>
            </a>
          </li>
        ))}
      </ul>
    </section>
  );
}

const KINDS: { kind: InboxKind; label: string }[] = [
  { kind: "prompt_finished", label: "A prompt of mine finished" },
  { kind: "prompt_failed", label: "A prompt of mine failed" },
  { kind: "question", label: "The agent asks me something" },
  { kind: "mention", label: "Someone mentions me" },
  { kind: "pull_request", label: "A pull request of mine is merged, closed or reviewed" },
  { kind: "automation_failed", label: "An automation of mine fails" },
  { kind: "budget", label: "A budget of mine is 80 % used" },
];
const CHANNELS: { key: keyof Channels; label: string }[] = [
  { key: "browser", label: "Browser" },
  { key: "push", label: "Push" },
  { key: "slack", label: "Slack" },
];

function base64UrlToBytes(s: string): Uint8Array<ArrayBuffer> {
  const b64 = s.replace(/-/g, "+").replace(/_/g, "/") + "===".slice((s.length + 3) % 4);
  return Uint8Array.from(atob(b64), (c) => c.charCodeAt(0));
}

/** Settings › Notifications: per kind, where the person is told; this browser's permission
 *  and its Web Push subscription. */
export function NotificationSettings() {
  const [prefs, setPrefs] = useState<NotificationPrefs | null>(null);
  const [error, setError] = useState("");
  const [note, setNote] = useState("");
  const [permission, setPermission] = useState(typeof Notification === "undefined" ? "unsupported" : Notification.permission);
  const [pushKey, setPushKey] = useState<string | null>(null);
  const [subscribed, setSubscribed] = useState<PushSubscription | null>(null);
  useEffect(() => {
    get<NotificationPrefs>("/notifications/preferences")
      .then(setPrefs)
      .catch((e) => setError(errorText(e)));
    get<PushKey>("/notifications/push-key")
      .then((k) => setPushKey(k.publicKey ?? null))
      .catch(() => undefined);
    void navigator.serviceWorker
      ?.getRegistration("/")
      .then((r) => r?.pushManager.getSubscription())
      .then((s) => setSubscribed(s ?? null))
      .catch(() => undefined);
  }, []);
  const toggle = (kind: InboxKind, key: keyof Channels) => {
    if (!prefs) return;
    const current = prefs.kinds[kind] ?? { browser: false, push: false, slack: false };
    setPrefs({ kinds: { ...prefs.kinds, [kind]: { ...current, [key]: !current[key] } } });
  };
  const save = async (e: Event) => {
    e.preventDefault();
    if (!prefs) return;
    try {
      setPrefs(await put<NotificationPrefs>("/notifications/preferences", prefs));
      setNote("Saved.");
      setError("");
    } catch (err) {
      setError(errorText(err));
    }
  };
  const allow = async () => {
    setPermission(await Notification.requestPermission());
  };
  const subscribe = async () => {
    try {
      if (!pushKey) return;
      const reg = await navigator.serviceWorker.register("/sw.js", { scope: "/" });
      const sub = await reg.pushManager.subscribe({ userVisibleOnly: true, applicationServerKey: base64UrlToBytes(pushKey) });
      await post("/notifications/push-subscriptions", sub.toJSON());
      setSubscribed(sub);
      setError("");
    } catch (err) {
      setError(`This browser could not subscribe: ${errorText(err)}`);
    }
  };
  const unsubscribe = async () => {
    if (!subscribed) return;
    await del(`/notifications/push-subscriptions?endpoint=${encodeURIComponent(subscribed.endpoint)}`).catch(() => undefined);
    await subscribed.unsubscribe().catch(() => undefined);
    setSubscribed(null);
  };
  return (
    <section class="panel" aria-labelledby="notifications-h">
      <h2 id="notifications-h">Notifications</h2>
      <p class="muted">Everything is listed in your inbox. Choose what also reaches you, and where.</p>
      <form onSubmit={save}>
        <table class="list" data-testid="notification-prefs">
          <thead>
            <tr>
              <th scope="col">When</th>
              {CHANNELS.map((c) => (
                <th scope="col">{c.label}</th>
              ))}
            </tr>
          </thead>
          <tbody>
            {KINDS.map(({ kind, label }) => (
              <tr>
                <th scope="row">{label}</th>
                {CHANNELS.map((c) => (
                  <td>
                    <input
                      type="checkbox"
                      aria-label={`${label}: ${c.label}`}
                      checked={!!prefs?.kinds[kind]?.[c.key]}
                      onChange={() => toggle(kind, c.key)}
                    />
                  </td>
                ))}
              </tr>
            ))}
          </tbody>
        </table>
        <button type="submit" disabled={!prefs}>
          Save
        </button>
        {note && <span class="muted"> {note}</span>}
      </form>
      <h3>This browser</h3>
      <p>
        Notifications while a tab is open:{" "}
        {permission === "granted" ? (
          <strong>allowed</strong>
        ) : permission === "unsupported" ? (
          "not supported here"
        ) : (
          <button type="button" onClick={allow}>
            Allow
          </button>
        )}
      </p>
      <p>
        Push with every tab closed:{" "}
        {!pushKey ? (
          <span class="muted">not set up on this deployment (VAPID keys)</span>
        ) : subscribed ? (
          <button type="button" onClick={unsubscribe}>
            Stop push to this browser
          </button>
        ) : (
          <button type="button" onClick={subscribe}>
            Push to this browser
          </button>
        )}
      </p>
      <ErrorNote text={error} />
    </section>
  );
}
