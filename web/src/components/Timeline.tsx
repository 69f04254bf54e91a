// The session's timeline: prompts with their authors, the agent's text as markdown, tool
// calls as compact rows that expand, step costs, completions, errors. Only the newest
// rows are rendered at first; scrolling up renders more, then loads older pages.

import { memo } from "preact/compat";
import { useEffect, useLayoutEffect, useMemo, useRef, useState } from "preact/hooks";
import { onGrammarLoaded, renderCode, renderMarkdown, whenMarkdownReady } from "../markdown";
import { coalescingKey } from "../timeline";
import type { TimelineEvent } from "../types";
import { Avatar, duration } from "./bits";

/** Kinds shown elsewhere (boot steps in their panel) or not at all. */
const HIDDEN = new Set([
  "heartbeat",
  "boot_step",
  "ready",
  "step_start",
  // A step's tokens and cost are folded into its turn's summary.
  "step_finish",
  "snapshot_ready",
  "snapshot_saved",
  "sandbox_status",
  "artifact",
]);

function str(v: unknown): string {
  return typeof v === "string" ? v : v === undefined || v === null ? "" : JSON.stringify(v, null, 2);
}

/** What a tool call acts on, in a few words. */
export function toolTarget(e: TimelineEvent): string {
  const a = (e.args ?? {}) as Record<string, unknown>;
  // The agent's browser: what it typed where, else the element, text, key or caption.
  const typed = a.selector !== undefined && a.text !== undefined ? `${str(a.selector)} ← ${str(a.text)}` : undefined;
  const v =
    a.filePath ?? a.path ?? a.command ?? a.pattern ?? a.url ?? a.query ?? typed ?? a.selector ?? a.text ?? a.key ?? a.caption ?? a.description;
  const s = str(v);
  return s.length > 80 ? `${s.slice(0, 77)}…` : s;
}

/** Redraws when the markdown engine (or a code grammar) arrives. */
function useMarkdownEngine() {
  const [, setTick] = useState(0);
  useEffect(() => {
    const redraw = () => setTick((t) => t + 1);
    const a = whenMarkdownReady(redraw);
    const b = onGrammarLoaded(redraw);
    return () => {
      a();
      b();
    };
  }, []);
}

const Markdown = memo(({ text }: { text: string }) => {
  useMarkdownEngine();
  const html = renderMarkdown(text);
  return html === null ? (
    <div class="markdown plain">{text}</div>
  ) : (
    <div class="markdown" dangerouslySetInnerHTML={{ __html: html }} />
  );
});

function ToolBody({ e }: { e: TimelineEvent }) {
  useMarkdownEngine();
  const args = str(e.args);
  const output = str(e.output);
  return (
    <div class="tool-body">
      <h4>Input</h4>
      <pre>
        <code class="hljs" dangerouslySetInnerHTML={{ __html: renderCode(args, "json") }} />
      </pre>
      {output && (
        <>
          <h4>Output</h4>
          <pre>
            <code class="hljs" dangerouslySetInnerHTML={{ __html: renderCode(output) }} />
          </pre>
        </>
      )}
    </div>
  );
}

function ToolRow({ e }: { e: TimelineEvent }) {
  // The body (highlighted input and output) is built only once the row is opened.
  const [open, setOpen] = useState(false);
  const status = str(e.status);
  return (
    <details class={`tool status-${status}`} onToggle={(ev) => setOpen((ev.currentTarget as HTMLDetailsElement).open)}>
      <summary>
        <span class="tool-name">{str(e.tool)}</span>
        <span class="tool-target">{toolTarget(e)}</span>
        <span class={`badge status-${status}`}>{status}</span>
        <span class="muted small">{duration(e.durationMs as number | undefined)}</span>
      </summary>
      {open && <ToolBody e={e} />}
    </details>
  );
}

/** A picture the agent took: a thumbnail that opens full size in a lightbox. */
export function MediaFigure({ url, caption }: { url: string; caption: string }) {
  const [open, setOpen] = useState(false);
  return (
    <figure class="media" data-testid="media">
      <button type="button" class="media-thumb" onClick={() => setOpen(true)} aria-label={`Open the picture: ${caption}`}>
        <img src={url} alt={caption} loading="lazy" />
      </button>
      {caption && <figcaption class="muted small">{caption}</figcaption>}
      {open && (
        <div class="lightbox" role="dialog" aria-label={caption || "Picture"} onClick={() => setOpen(false)}>
          <img src={url} alt={caption} />
        </div>
      )}
    </figure>
  );
}

/** What a turn's steps used, summed for its summary line. */
type TurnUse = { steps: number; cost: number; input: number; output: number };

function turnUse(events: TimelineEvent[]): Map<string, TurnUse> {
  const out = new Map<string, TurnUse>();
  for (const e of events) {
    if (e.type !== "step_finish" || typeof e.messageId !== "string") continue;
    const t = out.get(e.messageId) ?? { steps: 0, cost: 0, input: 0, output: 0 };
    const tokens = (e.tokens ?? {}) as { input?: number; output?: number };
    t.steps += 1;
    t.cost += Number(e.cost ?? 0);
    t.input += Number(tokens.input ?? 0);
    t.output += Number(tokens.output ?? 0);
    out.set(e.messageId, t);
  }
  return out;
}

const plural = (n: number, one: string, many: string) => `${n} ${n === 1 ? one : many}`;

function turnText(t: TurnUse | undefined): string {
  if (!t) return "";
  const parts = [plural(t.steps, "step", "steps")];
  if (t.input || t.output) parts.push(`${t.input} in / ${t.output} out tokens`);
  if (t.cost > 0) parts.push(`$${t.cost.toFixed(4)}`);
  return ` · ${parts.join(" · ")}`;
}

const Row = memo(({ e, turn }: { e: TimelineEvent; turn?: TurnUse }) => {
  switch (e.type) {
    case "user_message": {
      const author = (e.author ?? {}) as { name?: string; avatar?: string };
      return (
        <div class="row-user">
          <div class="author">
            <Avatar name={author.name ?? "?"} src={author.avatar} />
            <strong>{author.name ?? "someone"}</strong>
            {typeof e.model === "string" && <span class="muted small">{e.model}</span>}
          </div>
          <div class="prompt-text">{str(e.content)}</div>
          {Array.isArray(e.attachments) && e.attachments.length > 0 && (
            <div class="muted small" data-testid="prompt-attachments">
              📎 {(e.attachments as { name?: string }[]).map((a) => a.name ?? "file").join(", ")}
            </div>
          )}
        </div>
      );
    }
    case "token":
      return <Markdown text={str(e.content)} />;
    case "tool_call":
      return <ToolRow e={e} />;
    case "execution_complete":
      return e.success ? (
        <div class="row-done" data-testid="execution-complete">
          ✓ Done<span class="muted small">{turnText(turn)}</span>
        </div>
      ) : (
        <div class="row-error" role="alert" data-testid="execution-failed">
          ✗ Failed{e.error ? `: ${str(e.error)}` : ""}
          <span class="muted small">{turnText(turn)}</span>
        </div>
      );
    case "error":
      return (
        <div class="row-error" role="alert">
          Error: {str(e.message ?? e.error)}
        </div>
      );
    case "warning":
      return <div class="row-warning">Warning: {str(e.message)}</div>;
    case "egress_blocked":
      return (
        <div class="row-warning" data-testid="egress-blocked">
          Blocked {e.method && e.method !== "CONNECT" ? `${str(e.method)} ` : ""}
          {str(e.host)}:{str(e.port)}
          <span class="muted small"> — {str(e.reason)}</span>
        </div>
      );
    case "git_sync":
      return (
        <div class="row-note muted small">
          git {str(e.status)} {str(e.repo)} {str(e.sha).slice(0, 8)}
        </div>
      );
    case "push_complete":
      return (
        <div class="row-note muted small">
          Pushed {str(e.branch) || "the session branch"}
          {e.repo ? ` to ${str(e.repo)}` : ""}
        </div>
      );
    case "push_error":
      return (
        <div class="row-error" role="alert">
          Push failed: {str(e.error)}
        </div>
      );
    case "prompt_cancelled":
      return <div class="row-note muted small">A queued prompt was cancelled.</div>;
    case "stop_requested":
      return <div class="row-note muted small">Stop requested.</div>;
    case "session_title":
      return <div class="row-note muted small">Title: {str(e.title)}</div>;
    case "media":
      return <MediaFigure url={str(e.url)} caption={str(e.caption)} />;
    case "terminal":
      return (
        <div class="row-note muted small" data-testid="terminal-note">
          {e.action === "opened"
            ? `${str(e.by)} opened a terminal`
            : e.action === "closed"
              ? `${str(e.by)} closed a terminal`
              : `A terminal ended${typeof e.exitCode === "number" ? ` (exit ${e.exitCode})` : ""}`}
        </div>
      );
    case "port":
      return (
        <div class="row-note muted small" data-testid="port-note">
          {str(e.by)} opened port {String(e.port)}
        </div>
      );
    case "editor":
      return (
        <div class="row-note muted small" data-testid="editor-note">
          {str(e.by)} opened the editor
        </div>
      );
    case "desktop":
      return (
        <div class="row-note muted small" data-testid="desktop-note">
          {str(e.by)} {e.control ? "took control of the desktop" : "opened the desktop"}
        </div>
      );
    default:
      return <div class="row-note muted small">{e.type}</div>;
  }
});

/** Rows rendered at once: the DOM stays this small however long the timeline is. */
const WINDOW = 200;
/** Rows added per step when scrolling, and rendered first. */
const STEP = 40;
const FIRST = 30;

export function Timeline({
  events,
  hasOlder,
  loadingOlder,
  onLoadOlder,
}: {
  events: TimelineEvent[];
  hasOlder: boolean;
  loadingOlder: boolean;
  onLoadOlder: () => void;
}) {
  const visible = useMemo(() => events.filter((e) => !HIDDEN.has(e.type)), [events]);
  const turns = useMemo(() => turnUse(events), [events]);
  // The rendered window, by sequence numbers so it survives older pages arriving in
  // front: from `top`, to `bottom` or (null) the newest event, followed live.
  const [win, setWin] = useState<{ top: number | null; bottom: number | null }>({ top: null, bottom: null });
  const box = useRef<HTMLDivElement>(null);
  const atBottom = useRef(true);
  const anchor = useRef<{ seq: number; offset: number } | null>(null);
  const waitingForPage = useRef(false);

  const indexOf = (seq: number | null, fallback: number) => {
    if (seq === null) return fallback;
    const i = visible.findIndex((e) => e.seq >= seq);
    return i < 0 ? fallback : i;
  };
  const last = visible.length - 1;
  let hi = win.bottom === null ? last : indexOf(win.bottom, last);
  let lo = win.top === null ? Math.max(0, hi - FIRST + 1) : indexOf(win.top, 0);
  if (win.bottom === null && atBottom.current && hi - lo + 1 > WINDOW + STEP) lo = hi - WINDOW + 1;
  if (lo > hi) [lo, hi] = [Math.max(0, hi - FIRST + 1), hi];
  const rows = visible.slice(lo, hi + 1);

  /** Remembers the first row in view, so it stays put while rows come and go around it. */
  const pin = () => {
    const el = box.current;
    if (!el) return;
    for (const row of el.querySelectorAll<HTMLElement>(".event")) {
      if (row.offsetTop + row.offsetHeight > el.scrollTop) {
        anchor.current = { seq: Number(row.dataset.seq), offset: row.offsetTop - el.scrollTop };
        return;
      }
    }
  };

  useLayoutEffect(() => {
    const el = box.current;
    if (!el) return;
    if (anchor.current) {
      const row = el.querySelector<HTMLElement>(`.event[data-seq="${anchor.current.seq}"]`);
      if (row) el.scrollTop = row.offsetTop - anchor.current.offset;
      anchor.current = null;
    } else if (atBottom.current && win.bottom === null) {
      el.scrollTop = el.scrollHeight;
    }
  }, [rows[0]?.seq, rows.length, visible]);

  const up = () => {
    if (lo > 0) {
      pin();
      const top = Math.max(0, lo - STEP);
      const bottom = Math.min(hi, top + WINDOW - 1);
      setWin({ top: visible[top].seq, bottom: bottom >= last ? null : visible[bottom].seq });
    } else if (hasOlder && !loadingOlder) {
      waitingForPage.current = true;
      onLoadOlder();
    }
  };
  const down = () => {
    if (win.bottom === null) return;
    pin();
    const bottom = Math.min(last, hi + STEP);
    const top = Math.max(0, bottom - WINDOW + 1);
    setWin({ top: visible[top].seq, bottom: bottom >= last ? null : visible[bottom].seq });
  };
  useEffect(() => {
    // An older page arrived: show its rows.
    if (waitingForPage.current && !loadingOlder) {
      waitingForPage.current = false;
      up();
    }
  }, [visible.length, loadingOlder]);

  const near = () => {
    const el = box.current;
    if (!el) return { top: false, bottom: false };
    return { top: el.scrollTop < 300, bottom: el.scrollHeight - el.scrollTop - el.clientHeight < 300 };
  };
  const onScroll = () => {
    const el = box.current;
    if (!el) return;
    atBottom.current = win.bottom === null && el.scrollHeight - el.scrollTop - el.clientHeight < 40;
    const n = near();
    if (n.top) up();
    else if (n.bottom) down();
  };
  // At the very top or bottom, wheel and keys produce no scroll event: they move the
  // window directly.
  const onWheel = (e: WheelEvent) => {
    const n = near();
    if (e.deltaY < 0 && n.top) up();
    if (e.deltaY > 0 && n.bottom) down();
  };
  const onKeyDown = (e: KeyboardEvent) => {
    const n = near();
    if (["PageUp", "ArrowUp", "Home"].includes(e.key) && n.top) up();
    if (["PageDown", "ArrowDown", "End"].includes(e.key) && n.bottom) down();
  };
  useEffect(() => {
    // A short timeline with older pages: fetch until it fills the view.
    const el = box.current;
    if (el && hasOlder && !loadingOlder && lo === 0 && el.scrollHeight <= el.clientHeight) up();
  }, [visible.length, hasOlder, loadingOlder]);

  const moreAbove = lo > 0 || hasOlder;
  return (
    <div
      class="timeline"
      ref={box}
      onScroll={onScroll}
      onWheel={onWheel}
      onKeyDown={onKeyDown}
      aria-live="polite"
      aria-label="Timeline"
      tabIndex={0}
      data-testid="timeline"
    >
      {moreAbove && <p class="muted small center">{loadingOlder ? "Loading older events…" : "Scroll up for older events"}</p>}
      {rows.map((e) => (
        <div class="event" key={coalescingKey(e) ?? e.id} data-type={e.type} data-seq={e.seq}>
          <Row e={e} turn={e.type === "execution_complete" && typeof e.messageId === "string" ? turns.get(e.messageId) : undefined} />
        </div>
      ))}
      {win.bottom !== null && (
        <button type="button" class="small jump" onClick={() => setWin({ top: null, bottom: null })}>
          Newer events ↓
        </button>
      )}
      {visible.length === 0 && <p class="muted center">Nothing yet. Send a prompt to start.</p>}
    </div>
  );
}
