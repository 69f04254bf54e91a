// The timeline reducer: pure, unit-tested. It mirrors the server's timeline — events
// ordered by sequence, a streamed text part or a tool call kept once in its latest
// version — and merges whatever arrives (live events, the window a subscribe brings,
// older pages) without gaps or doubles.

import type { EventPage, TimelineEvent } from "./types";

export interface Timeline {
  /** Events by sequence number. */
  bySeq: Map<number, TimelineEvent>;
  /** Coalescing key → the sequence number of its latest version. */
  latest: Map<string, number>;
  /** Cursor for the page before the oldest event held, and whether there is one. */
  olderCursor: string | null;
  hasOlder: boolean;
  /** Highest sequence seen; live events continue from here. */
  lastSeq: number;
  /** When a reconnect's window does not reach back to what was held: the cursor to page
   * back from until it does. */
  backfillCursor: string | null;
  /** The highest sequence held before the reconnect: backfilling stops once reached. */
  backfillUntil: number;
  /** Bumped on every change (cheap change detection for views). */
  version: number;
}

export function emptyTimeline(): Timeline {
  return {
    bySeq: new Map(),
    latest: new Map(),
    olderCursor: null,
    hasOlder: false,
    lastSeq: 0,
    backfillCursor: null,
    backfillUntil: 0,
    version: 0,
  };
}

/** Events that replace an earlier version of themselves. */
export function coalescingKey(e: TimelineEvent): string | null {
  switch (e.type) {
    case "token":
      return `token:${e.messageId ?? ""}:${(e.partId as string | undefined) ?? ""}`;
    case "tool_call":
      return `tool:${(e.callId as string | undefined) ?? e.id}`;
    default:
      return null;
  }
}

/** Adds events (any order, possibly already held). Mutates and returns `t`. */
export function addEvents(t: Timeline, events: TimelineEvent[]): Timeline {
  let changed = false;
  for (const e of events) {
    if (e.type === "heartbeat" || t.bySeq.has(e.seq)) continue;
    const key = coalescingKey(e);
    if (key) {
      const prev = t.latest.get(key);
      if (prev !== undefined && prev > e.seq) continue; // an older version arrived late
      if (prev !== undefined) t.bySeq.delete(prev);
      t.latest.set(key, e.seq);
    }
    t.bySeq.set(e.seq, e);
    if (e.seq > t.lastSeq) t.lastSeq = e.seq;
    changed = true;
  }
  if (changed) t.version++;
  return t;
}

/** The window a `subscribed` message brings (first connect or a reconnect). */
export function applyWindow(t: Timeline, page: EventPage): Timeline {
  const heldBefore = t.lastSeq;
  const oldestInPage = page.events.reduce((m, e) => Math.min(m, e.seq), Infinity);
  const first = t.bySeq.size === 0;
  addEvents(t, page.events);
  if (first) {
    t.olderCursor = page.cursor;
    t.hasOlder = page.hasMore;
  } else if (page.hasMore && oldestInPage > heldBefore + 1) {
    // Missed more than the window holds: page back until we reach what we had.
    t.backfillCursor = page.cursor;
    t.backfillUntil = heldBefore;
  }
  t.version++;
  return t;
}

/** An older page (`history_page`), for scrolling back or backfilling a reconnect. */
export function applyOlderPage(t: Timeline, page: EventPage): Timeline {
  const backfilling = t.backfillCursor !== null;
  addEvents(t, page.events);
  if (backfilling) {
    const oldest = page.events.reduce((m, e) => Math.min(m, e.seq), Infinity);
    const reached = page.events.length === 0 || !page.hasMore || oldest <= t.backfillUntil + 1;
    t.backfillCursor = reached ? null : page.cursor;
  } else {
    t.olderCursor = page.cursor;
    t.hasOlder = page.hasMore;
  }
  t.version++;
  return t;
}

/** Events in sequence order. */
export function ordered(t: Timeline): TimelineEvent[] {
  return [...t.bySeq.values()].sort((a, b) => a.seq - b.seq);
}

/** Boot steps, latest state per step, in the order they first appeared. */
export interface BootStep {
  step: string;
  status: string;
  durationMs?: number;
  detail?: string;
  output?: string;
}

export function bootSteps(events: TimelineEvent[]): BootStep[] {
  const steps = new Map<string, BootStep>();
  for (const e of events) {
    if (e.type !== "boot_step") continue;
    const step = String(e.step ?? "");
    steps.set(step, {
      step,
      status: String(e.status ?? ""),
      durationMs: e.durationMs as number | undefined,
      detail: e.detail as string | undefined,
      output: e.output as string | undefined,
    });
  }
  return [...steps.values()];
}
