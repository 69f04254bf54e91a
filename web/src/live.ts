// One session's live connection: fetches a WS token, subscribes, applies every message to
// a state the views read, and reconnects by itself (backoff 0.5 s → 10 s), catching up
// with nothing missing or doubled.

import { addEvents, applyOlderPage, applyWindow, emptyTimeline, type Timeline } from "./timeline";
import { get, post } from "./api";
import type { Artifact, Participant, Presence, QueuedPrompt, ServerMessage, SessionState } from "./types";
import type { TerminalInfo, TerminalList } from "./wire";

/** The session's client WebSocket URL on this origin. */
export function socketUrl(sessionId: string): URL {
  const url = new URL(`/sessions/${sessionId}/ws`, location.href);
  url.protocol = url.protocol === "https:" ? "wss:" : "ws:";
  return url;
}

export type Connection = "connecting" | "live" | "reconnecting" | "closed";

export interface LiveState {
  connection: Connection;
  session: SessionState | null;
  me: Participant | null;
  timeline: Timeline;
  queue: QueuedPrompt[];
  presence: Presence[];
  artifacts: Artifact[];
  tunnelUrls: Record<string, string>;
  /** When the workspace's change was last captured (0: not since the page opened). */
  changesAt: number;
  /** The session's terminals, newest first; `live` counts subscriptions (a terminal
   * view redraws itself from the scroll-back after each). */
  terminals: TerminalInfo[];
  live: number;
  sandbox: { status: string; error?: string };
  processing: boolean;
  loadingOlder: boolean;
  errors: string[];
  version: number;
}

export function initialLiveState(): LiveState {
  return {
    connection: "connecting",
    session: null,
    me: null,
    timeline: emptyTimeline(),
    queue: [],
    presence: [],
    artifacts: [],
    tunnelUrls: {},
    changesAt: 0,
    terminals: [],
    live: 0,
    sandbox: { status: "none" },
    processing: false,
    loadingOlder: false,
    errors: [],
    version: 0,
  };
}

export class LiveSession {
  state: LiveState = initialLiveState();
  private ws: WebSocket | null = null;
  private attempts = 0;
  private closed = false;
  private timer: ReturnType<typeof setTimeout> | null = null;
  private pinger: ReturnType<typeof setInterval> | null = null;
  private readonly clientId = `web-${Math.random().toString(36).slice(2, 10)}`;
  /** Who draws each terminal's bytes (a terminal view), by terminal id. */
  private readonly terminalSinks = new Map<string, (bytes: Uint8Array, replay: boolean) => void>();

  constructor(
    private readonly sessionId: string,
    private readonly onChange: () => void,
  ) {
    void this.connect();
  }

  private changed() {
    this.state.version++;
    this.onChange();
  }

  private async connect() {
    if (this.closed) return;
    this.state.connection = this.attempts === 0 ? "connecting" : "reconnecting";
    this.changed();
    let token: string;
    try {
      token = (await post<{ token: string }>(`/sessions/${this.sessionId}/ws-token`)).token;
    } catch (e) {
      this.fail(e);
      return;
    }
    const ws = new WebSocket(socketUrl(this.sessionId));
    this.ws = ws;
    ws.onopen = () => ws.send(JSON.stringify({ type: "subscribe", token, clientId: this.clientId }));
    ws.onmessage = (m) => {
      try {
        this.receive(JSON.parse(String(m.data)) as ServerMessage);
      } catch {
        // A frame we cannot read changes nothing.
      }
    };
    ws.onclose = (ev) => {
      if (this.ws !== ws) return;
      this.ws = null;
      if (this.pinger) clearInterval(this.pinger);
      if (ev.code === 4001 && this.attempts > 3) {
        this.state.errors = [...this.state.errors, "You no longer have access to this session."];
      }
      this.retry();
    };
  }

  private fail(e: unknown) {
    const status = (e as { status?: number }).status;
    if (status === 401 || status === 404) {
      this.closed = true;
      this.state.connection = "closed";
      this.state.errors = [...this.state.errors, status === 404 ? "This session does not exist." : "Sign in to see this session."];
      this.changed();
      return;
    }
    this.retry();
  }

  private retry() {
    if (this.closed) return;
    this.state.connection = "reconnecting";
    this.changed();
    const delay = Math.min(10_000, 500 * 2 ** this.attempts++);
    this.timer = setTimeout(() => void this.connect(), delay);
  }

  send(message: Record<string, unknown>): boolean {
    if (this.ws?.readyState !== WebSocket.OPEN) return false;
    this.ws.send(JSON.stringify(message));
    return true;
  }

  /** Routes a terminal's output to `sink` until the returned function is called. */
  onTerminal(id: string, sink: (bytes: Uint8Array, replay: boolean) => void): () => void {
    this.terminalSinks.set(id, sink);
    return () => {
      if (this.terminalSinks.get(id) === sink) this.terminalSinks.delete(id);
    };
  }

  private async loadTerminals() {
    try {
      this.state.terminals = (await get<TerminalList>(`/sessions/${this.sessionId}/terminals`)).terminals;
      this.changed();
    } catch {
      // The list comes again with the next subscription.
    }
  }

  /** Asks for the page before the oldest event held (scrolling back). */
  loadOlder() {
    const t = this.state.timeline;
    if (!t.hasOlder || !t.olderCursor || this.state.loadingOlder) return;
    if (this.send({ type: "fetch_history", cursor: t.olderCursor, limit: 200 })) {
      this.state.loadingOlder = true;
      this.changed();
    }
  }

  close() {
    this.closed = true;
    if (this.timer) clearTimeout(this.timer);
    if (this.pinger) clearInterval(this.pinger);
    this.ws?.close(1000);
  }

  receive(m: ServerMessage) {
    const s = this.state;
    switch (m.type) {
      case "subscribed":
        this.attempts = 0;
        s.connection = "live";
        s.session = m.session;
        s.me = m.participant;
        s.artifacts = m.artifacts;
        s.queue = m.promptQueue;
        s.processing = m.session.isProcessing;
        s.sandbox = { status: m.session.sandboxStatus };
        applyWindow(s.timeline, m.timeline);
        if (s.timeline.backfillCursor) this.send({ type: "fetch_history", cursor: s.timeline.backfillCursor, limit: 500 });
        if (this.pinger) clearInterval(this.pinger);
        this.pinger = setInterval(() => this.send({ type: "ping" }), 25_000);
        s.live++;
        void this.loadTerminals();
        break;
      case "sandbox_event":
        addEvents(s.timeline, [m.event]);
        break;
      case "sandbox_events":
        addEvents(s.timeline, m.events);
        break;
      case "history_page": {
        const backfilling = s.timeline.backfillCursor !== null;
        applyOlderPage(s.timeline, m);
        if (!backfilling) s.loadingOlder = false;
        if (s.timeline.backfillCursor) this.send({ type: "fetch_history", cursor: s.timeline.backfillCursor, limit: 500 });
        break;
      }
      case "prompt_queue_updated":
        s.queue = m.promptQueue;
        break;
      case "presence_sync":
      case "presence_update":
        s.presence = m.participants;
        break;
      case "presence_leave":
        s.presence = s.presence.filter((p) => p.participantId !== m.participantId);
        break;
      case "sandbox_warming":
        s.sandbox = { status: "warming" };
        break;
      case "sandbox_spawning":
        s.sandbox = { status: "spawning" };
        break;
      case "sandbox_status":
        s.sandbox = { status: m.status, error: m.error ?? undefined };
        // A sandbox that stopped took its terminals with it.
        if (["stopped", "failed", "stale"].includes(m.status)) {
          s.terminals = s.terminals.map((t) => (t.closedAt ? t : { ...t, closedAt: Date.now() }));
        }
        break;
      case "sandbox_ready":
        s.sandbox = { status: "ready" };
        break;
      case "sandbox_error":
        s.sandbox = { status: "failed", error: m.error };
        break;
      case "artifact_created":
      case "artifact_updated":
        // Updated in place (a pull request's state), new ones at the end.
        s.artifacts = s.artifacts.some((a) => a.id === m.artifact.id)
          ? s.artifacts.map((a) => (a.id === m.artifact.id ? m.artifact : a))
          : [...s.artifacts, m.artifact];
        break;
      case "terminal_output": {
        // Bytes for a view, not state: nothing re-renders for them.
        const sink = this.terminalSinks.get(m.terminalId);
        if (sink) {
          const raw = atob(m.data);
          const bytes = new Uint8Array(raw.length);
          for (let i = 0; i < raw.length; i++) bytes[i] = raw.charCodeAt(i);
          sink(bytes, m.replay === true);
        }
        return;
      }
      case "terminal_opened":
        s.terminals = [m.terminal, ...s.terminals.filter((t) => t.id !== m.terminal.id)];
        break;
      case "terminal_resized":
        s.terminals = s.terminals.map((t) => (t.id === m.terminalId ? { ...t, cols: m.cols, rows: m.rows } : t));
        break;
      case "terminal_closed":
        s.terminals = s.terminals.map((t) =>
          t.id === m.terminalId ? { ...t, closedAt: t.closedAt ?? Date.now(), exitCode: m.exitCode ?? null } : t,
        );
        break;
      case "diff_updated":
        s.changesAt = m.capturedAt;
        break;
      case "tunnel_urls":
        s.tunnelUrls = m.tunnelUrls;
        break;
      case "processing_status":
        s.processing = m.isProcessing;
        break;
      case "session_status":
        if (s.session) s.session = { ...s.session, status: m.status };
        break;
      case "session_title":
        if (s.session) s.session = { ...s.session, title: m.title };
        break;
      case "error":
        s.errors = [...s.errors.slice(-4), m.message];
        break;
      default:
        return;
    }
    this.changed();
  }
}
