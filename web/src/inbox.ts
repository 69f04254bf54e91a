// The person's inbox, live: the unread count and the unread items, kept current by the
// inbox socket (`/inbox/socket`, reconnecting by itself) and shared by every view (the
// header's badge, the tab's title, the sessions list, the inbox page). A new item the
// person asked to hear of in the browser becomes a notification while the tab is open.

import { useEffect, useState } from "preact/hooks";
import { get, post } from "./api";
import type { InboxItem, InboxMessage, InboxPage } from "./wire";

export interface InboxState {
  unread: number;
  /** Unread items, newest first (what the badge and the list's dots show). */
  items: InboxItem[];
  live: boolean;
}

let state: InboxState = { unread: 0, items: [], live: false };
const listeners = new Set<(s: InboxState) => void>();
let socket: WebSocket | null = null;
let started = false;
let backoff = 500;
const BASE_TITLE = document.title || "Open-Inspect";

function set(next: Partial<InboxState>) {
  state = { ...state, ...next };
  document.title = state.unread > 0 ? `(${state.unread}) ${BASE_TITLE}` : BASE_TITLE;
  for (const l of listeners) l(state);
}

async function refresh() {
  const page = await get<InboxPage>("/inbox?unread=1").catch(() => null);
  if (page) set({ unread: page.unread, items: page.items });
}

const KIND_WORDS: Record<string, string> = {
  prompt_finished: "Finished",
  prompt_failed: "Failed",
  question: "Asks you",
  pull_request: "Pull request",
  automation_failed: "Automation failed",
  mention: "You were mentioned",
  budget: "Budget",
};

export function kindWords(kind: string): string {
  return KIND_WORDS[kind] ?? kind;
}

function notify(item: InboxItem) {
  if (typeof Notification === "undefined" || Notification.permission !== "granted") return;
  // Not for what the person is looking at.
  if (!document.hidden && location.pathname === item.url) return;
  const n = new Notification(`${kindWords(item.kind)}: ${item.title}`, {
    body: item.detail,
    tag: `session-${item.sessionId}`,
  });
  n.onclick = () => {
    window.focus();
    location.assign(item.url);
  };
}

function connect() {
  const url = new URL("/inbox/socket", location.href);
  url.protocol = url.protocol === "https:" ? "wss:" : "ws:";
  const ws = new WebSocket(url);
  socket = ws;
  ws.onopen = () => {
    backoff = 500;
    set({ live: true });
    // What happened while the socket was down.
    void refresh();
  };
  ws.onmessage = (e) => {
    let msg: InboxMessage;
    try {
      msg = JSON.parse(String(e.data)) as InboxMessage;
    } catch {
      return;
    }
    if (msg.type === "item") {
      const items = [msg.item, ...state.items.filter((i) => i.id !== msg.item.id)];
      set({ unread: msg.unread, items });
      if (msg.notify) notify(msg.item);
    } else if (msg.type === "unread") {
      if (msg.unread !== state.unread) void refresh();
      set({ unread: msg.unread, items: msg.unread === 0 ? [] : state.items });
    }
  };
  ws.onclose = () => {
    if (socket !== ws) return;
    set({ live: false });
    setTimeout(connect, backoff);
    backoff = Math.min(backoff * 2, 10_000);
  };
}

/** Starts the live inbox once (signed-in pages only). */
export function startInbox() {
  if (started) return;
  started = true;
  void refresh();
  connect();
}

/** Marks a session's items read (opening it does), when any are unread. */
export async function readSession(sessionId: string) {
  if (!state.items.some((i) => i.sessionId === sessionId)) return;
  const r = await post<{ unread: number }>("/inbox/read", { sessionId }).catch(() => null);
  if (r) set({ unread: r.unread, items: state.items.filter((i) => i.sessionId !== sessionId) });
}

export async function readAll() {
  const r = await post<{ unread: number }>("/inbox/read", { all: true }).catch(() => null);
  if (r) set({ unread: r.unread, items: [] });
}

export function useInbox(): InboxState {
  const [s, setS] = useState(state);
  useEffect(() => {
    listeners.add(setS);
    setS(state);
    return () => {
      listeners.delete(setS);
    };
  }, []);
  return s;
}
