// The session's timeline: prompts with their authors, the agent's text as markdown, tool
// calls as compact rows that expand, step costs, completions, errors. Only the newest
// rows are rendered at first; scrolling up renders more, then loads older pages.

import { memo } from "preact/compat";
import { useEffect, useLayoutEffect, useMemo, useRef, useState } from "preact/hooks";
import { renderCode, renderMarkdown } from "../markdown";
import { coalescingKey } from "../timeline";
import type { TimelineEvent } from "../types";
import { Avatar, duration } from "./bits";

const FIRST_ROWS = 150;
const MORE_ROWS = 150;
/** Kinds shown elsewhere (boot steps in their panel) or not at all. */
const HIDDEN = new Set(["heartbeat", "boot_step", "ready", "step_start", "token_usage", "snapshot_ready"]);

function str(v: unknown): string {
  return typeof v === "string" ? v : v === undefined || v === null ? "" : JSON.stringify(v, null, 2);
}

/** What a tool call acts on, in a few words. */
export function toolTarget(e: TimelineEvent): string {
  const a = (e.args ?? {}) as Record<string, unknown>;
  const v = a.filePath ?? a.path ?? a.command ?? a.pattern ?? a.url ?? a.query ?? a.description;
  const s = str(v);
  return s.length > 80 ? `${s.slice(0, 77)}…` : s;
}

const Markdown = memo(({ text }: { text: string }) => (
  <div class="markdown" dangerouslySetInnerHTML={{ __html: renderMarkdown(text) }} />
));

function ToolRow({ e }: { e: TimelineEvent }) {
  const status = str(e.status);
  const args = str(e.args);
  const output = str(e.output);
  return (
    <details class={`tool status-${status}`}>
      <summary>
        <span class="tool-name">{str(e.tool)}</span>
        <span class="tool-target">{toolTarget(e)}</span>
        <span class={`badge status-${status}`}>{status}</span>
        <span class="muted small">{duration(e.durationMs as number | undefined)}</span>
      </summary>
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
    </details>
  );
}

const Row = memo(({ e }: { e: TimelineEvent }) => {
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
        </div>
      );
    }
    case "token":
      return <Markdown text={str(e.content)} />;
    case "tool_call":
      return <ToolRow e={e} />;
    case "step_finish": {
      const tokens = (e.tokens ?? {}) as { input?: number; output?: number };
      return (
        <div class="row-step muted small">
          step · ${Number(e.cost ?? 0).toFixed(4)}
          {tokens.input !== undefined && ` · ${tokens.input} in / ${tokens.output ?? 0} out tokens`}
        </div>
      );
    }
    case "execution_complete":
      return e.success ? (
        <div class="row-done" data-testid="execution-complete">
          ✓ Done
        </div>
      ) : (
        <div class="row-error" role="alert" data-testid="execution-failed">
          ✗ Failed{e.error ? `: ${str(e.error)}` : ""}
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
    case "git_sync":
      return (
        <div class="row-note muted small">
          git {str(e.status)} {str(e.repo)} {str(e.sha).slice(0, 8)}
        </div>
      );
    case "prompt_cancelled":
      return <div class="row-note muted small">A queued prompt was cancelled.</div>;
    case "stop_requested":
      return <div class="row-note muted small">Stop requested.</div>;
    case "session_title":
      return <div class="row-note muted small">Title: {str(e.title)}</div>;
    default:
      return <div class="row-note muted small">{e.type}</div>;
  }
});

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
  const [shown, setShown] = useState(FIRST_ROWS);
  const box = useRef<HTMLDivElement>(null);
  const atBottom = useRef(true);
  const anchor = useRef<{ height: number; top: number } | null>(null);

  // Keep the view pinned to the newest row while the reader is at the bottom; keep it
  // still when rows are added above.
  useLayoutEffect(() => {
    const el = box.current;
    if (!el) return;
    if (anchor.current) {
      el.scrollTop = anchor.current.top + (el.scrollHeight - anchor.current.height);
      anchor.current = null;
    } else if (atBottom.current) {
      el.scrollTop = el.scrollHeight;
    }
  }, [visible, shown]);

  const onScroll = () => {
    const el = box.current;
    if (!el) return;
    atBottom.current = el.scrollHeight - el.scrollTop - el.clientHeight < 40;
    if (el.scrollTop < 200) {
      if (shown < visible.length) {
        anchor.current = { height: el.scrollHeight, top: el.scrollTop };
        setShown((n) => n + MORE_ROWS);
      } else if (hasOlder && !loadingOlder) {
        anchor.current = { height: el.scrollHeight, top: el.scrollTop };
        onLoadOlder();
      }
    }
  };
  useEffect(() => {
    // A short timeline with older pages: fetch until it fills the view.
    const el = box.current;
    if (el && hasOlder && !loadingOlder && el.scrollHeight <= el.clientHeight) onLoadOlder();
  }, [visible.length, hasOlder, loadingOlder]);

  const rows = visible.slice(Math.max(0, visible.length - shown));
  return (
    <div class="timeline" ref={box} onScroll={onScroll} aria-live="polite" aria-label="Timeline" tabIndex={0} data-testid="timeline">
      {(hasOlder || shown < visible.length) && (
        <p class="muted small center">{loadingOlder ? "Loading older events…" : "Scroll up for older events"}</p>
      )}
      {rows.map((e) => (
        <div class="event" key={coalescingKey(e) ?? e.id} data-type={e.type} data-seq={e.seq}>
          <Row e={e} />
        </div>
      ))}
      {visible.length === 0 && <p class="muted center">Nothing yet. Send a prompt to start.</p>}
    </div>
  );
}
