import { describe, expect, it } from "vitest";
import { addEvents, applyOlderPage, applyWindow, bootSteps, emptyTimeline, ordered } from "./timeline";
import type { TimelineEvent } from "./types";

const ev = (seq: number, type: string, extra: Record<string, unknown> = {}): TimelineEvent => ({
  id: `evt_${seq}`,
  seq,
  type,
  timestamp: 1000 + seq,
  ...extra,
});

describe("timeline reducer", () => {
  it("orders by sequence whatever the arrival order, and drops doubles", () => {
    const t = emptyTimeline();
    addEvents(t, [ev(3, "user_message"), ev(1, "user_message")]);
    addEvents(t, [ev(2, "step_start"), ev(3, "user_message")]);
    expect(ordered(t).map((e) => e.seq)).toEqual([1, 2, 3]);
    expect(t.lastSeq).toBe(3);
  });

  it("skips heartbeats", () => {
    const t = addEvents(emptyTimeline(), [ev(1, "heartbeat"), ev(2, "ready")]);
    expect(ordered(t).map((e) => e.type)).toEqual(["ready"]);
  });

  it("keeps one version of a streamed part and of a tool call", () => {
    const t = emptyTimeline();
    addEvents(t, [ev(1, "token", { messageId: "m", partId: "p", content: "Hel" })]);
    addEvents(t, [ev(2, "tool_call", { callId: "c", status: "running" })]);
    addEvents(t, [ev(3, "token", { messageId: "m", partId: "p", content: "Hello" })]);
    addEvents(t, [ev(4, "tool_call", { callId: "c", status: "completed" })]);
    // A stale version arriving late changes nothing.
    addEvents(t, [ev(0, "token", { messageId: "m", partId: "p", content: "H" })]);
    const all = ordered(t);
    expect(all.map((e) => e.seq)).toEqual([3, 4]);
    expect(all[0].content).toBe("Hello");
    expect(all[1].status).toBe("completed");
  });

  it("merges a reconnect's window without doubles", () => {
    const t = emptyTimeline();
    applyWindow(t, { events: [ev(1, "a"), ev(2, "b")], cursor: null, hasMore: false });
    applyWindow(t, { events: [ev(2, "b"), ev(3, "c")], cursor: "c1", hasMore: true });
    expect(ordered(t).map((e) => e.seq)).toEqual([1, 2, 3]);
    expect(t.backfillCursor).toBeNull();
  });

  it("pages back after a reconnect until nothing is missing", () => {
    const t = emptyTimeline();
    applyWindow(t, { events: [ev(1, "a"), ev(2, "b")], cursor: null, hasMore: false });
    // Offline while 600 events happened; the window holds the newest 500.
    const window = Array.from({ length: 500 }, (_, i) => ev(103 + i, "x"));
    applyWindow(t, { events: window, cursor: "w", hasMore: true });
    expect(t.backfillCursor).toBe("w");
    applyOlderPage(t, { events: Array.from({ length: 50 }, (_, i) => ev(53 + i, "x")), cursor: "p1", hasMore: true });
    expect(t.backfillCursor).toBe("p1");
    applyOlderPage(t, { events: Array.from({ length: 50 }, (_, i) => ev(3 + i, "x")), cursor: "p2", hasMore: true });
    expect(t.backfillCursor).toBeNull();
    const seqs = ordered(t).map((e) => e.seq);
    expect(seqs.length).toBe(602);
    expect(seqs).toEqual(Array.from({ length: 602 }, (_, i) => i + 1));
    // Scrolling back still uses the first window's cursor.
    expect(t.hasOlder).toBe(false);
  });

  it("tracks older pages for scrolling back", () => {
    const t = emptyTimeline();
    applyWindow(t, { events: [ev(10, "a")], cursor: "old", hasMore: true });
    expect(t.hasOlder).toBe(true);
    applyOlderPage(t, { events: [ev(5, "a")], cursor: null, hasMore: false });
    expect(t.hasOlder).toBe(false);
    expect(ordered(t).map((e) => e.seq)).toEqual([5, 10]);
  });

  it("summarises boot steps by their latest state", () => {
    const steps = bootSteps([
      ev(1, "boot_step", { step: "git_sync:demo", status: "running" }),
      ev(2, "boot_step", { step: "git_sync:demo", status: "completed", durationMs: 120 }),
      ev(3, "boot_step", { step: "setup", status: "failed", output: "boom" }),
    ]);
    expect(steps).toEqual([
      { step: "git_sync:demo", status: "completed", durationMs: 120, detail: undefined, output: undefined },
      { step: "setup", status: "failed", durationMs: undefined, detail: undefined, output: "boom" },
    ]);
  });

  it("holds 5,000 events", () => {
    const t = emptyTimeline();
    for (let i = 1; i <= 5000; i++) addEvents(t, [ev(i, i % 2 ? "token" : "tool_call", { messageId: "m", partId: `p${i}`, callId: `c${i}` })]);
    expect(ordered(t).length).toBe(5000);
  });
});
