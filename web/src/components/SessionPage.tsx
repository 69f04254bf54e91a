import { useEffect, useMemo, useRef, useState } from "preact/hooks";
import { api, errorText, get, post, upload } from "../api";
import { readSession, useInbox } from "../inbox";
import { LiveSession, initialLiveState, type LiveState } from "../live";
import { bootSteps, ordered } from "../timeline";
import type { ChildSummary, Me, QueuedPrompt } from "../types";
import type { Attachment, PortLink } from "../wire";
import { Avatar, ErrorNote, ago, duration, repoLabel } from "./bits";
import { ChangesPanel } from "./Changes";
import { TerminalsPanel } from "./Terminals";
import { AttemptsPanel, TryWays, useChildren } from "./Attempts";
import { EffortPicker, ModelPicker } from "./ModelPicker";
import { MediaFigure, Timeline } from "./Timeline";

const TYPING_EVERY_MS = 3000;

function useLive(id: string): [LiveState, LiveSession | null] {
  const [, setVersion] = useState(0);
  const live = useRef<LiveSession | null>(null);
  useEffect(() => {
    const l = new LiveSession(id, () => setVersion((v) => v + 1));
    live.current = l;
    return () => l.close();
  }, [id]);
  return [live.current?.state ?? emptyState, live.current];
}

const emptyState = initialLiveState();

function BootPanel({ state }: { state: LiveState }) {
  const steps = useMemo(() => bootSteps(ordered(state.timeline)), [state.timeline.version]);
  const status = state.sandbox.status;
  return (
    <section class="panel" aria-label="Sandbox">
      <h2>
        Sandbox <span class={`badge sandbox-${status}`} data-testid="sandbox-status">{status}</span>
      </h2>
      {state.sandbox.error && <p class="error small">{state.sandbox.error}</p>}
      {steps.length > 0 && (
        <ol class="steps" data-testid="boot-steps">
          {steps.map((s) => (
            <li class={`step status-${s.status}`} key={s.step}>
              <span class="step-name">{s.step.replace("git_sync:", "clone ")}</span>
              <span class={`badge status-${s.status}`}>{s.status}</span>
              <span class="muted small">{duration(s.durationMs)}</span>
              {s.detail && <div class="muted small">{s.detail}</div>}
              {s.output && s.status === "failed" && <pre class="hook-output">{s.output}</pre>}
            </li>
          ))}
        </ol>
      )}
    </section>
  );
}

/** Opens a tunnelled port through a link the control plane signs for the person (the
 * port's gate swaps it for a cookie); the window opens at once so no blocker stops it. */
function openPort(e: Event, sessionId: string, port: string) {
  e.preventDefault();
  const w = window.open("", "_blank");
  post<PortLink>(`/sessions/${sessionId}/ports/${port}/link`)
    .then((link) => {
      if (w) w.location.href = link.url;
      else location.href = link.url;
    })
    .catch((err) => {
      w?.close();
      alert(errorText(err));
    });
}

function ArtifactsPanel({ state, sessionId }: { state: LiveState; sessionId: string }) {
  const tunnels = Object.entries(state.tunnelUrls);
  if (state.artifacts.length === 0 && tunnels.length === 0) return null;
  return (
    <section class="panel" aria-label="Artifacts">
      <h2>Artifacts</h2>
      <ul class="plain">
        {state.artifacts.map((a) => {
          const meta = (a.metadata ?? {}) as Record<string, unknown>;
          const label =
            a.type === "pr"
              ? `Pull request ${meta.repoOwner ? `${String(meta.repoOwner)}/${String(meta.repoName)}` : ""}${meta.number ? `#${String(meta.number)}` : ""}`
              : a.type === "branch"
                ? `Branch ${String(meta.branch ?? meta.head ?? "")}`
                : a.type === "media"
                  ? "Picture"
                  : a.type === "review"
                  ? `Review of ${String(meta.repoOwner ?? "")}/${String(meta.repoName ?? "")}#${String(meta.number ?? "")}`
                  : a.type;
          return (
            <li key={a.id}>
              {a.url ? (
                <a href={a.url} target="_blank" rel="noreferrer">
                  {label}
                </a>
              ) : (
                label
              )}
              {a.type === "pr" && typeof meta.state === "string" && (
                <span class={`badge pr-${meta.state}`} data-pr-state={meta.state}>
                  {meta.state}
                </span>
              )}
              {a.type === "pr" && typeof meta.stateAt === "number" && (
                <span class="muted small" data-testid="pr-state-at">
                  {" "}
                  {String(meta.state)} {ago(meta.stateAt)}
                </span>
              )}
              {a.type === "pr" && typeof meta.review === "string" && (
                <span class="muted small">
                  {" "}
                  · {meta.review === "changes_requested" ? "changes requested" : meta.review}
                  {typeof meta.reviewer === "string" ? ` by ${meta.reviewer}` : ""}
                </span>
              )}
              {a.type === "pr" && meta.authoredAs === "app" && <span class="muted small"> by the App</span>}
              {a.type === "media" && a.url && <MediaFigure url={a.url} caption={String(meta.caption ?? "")} />}
              {a.type === "review" && typeof meta.event === "string" && (
                <span class="muted small" data-testid="review-event">
                  {" "}
                  · {meta.event === "REQUEST_CHANGES" ? "changes requested" : meta.event === "APPROVE" ? "approved" : "commented"}
                  {typeof meta.inline === "number" ? `, ${meta.inline} inline` : ""}
                </span>
              )}
            </li>
          );
        })}
        {tunnels.map(([port, url]) => (
          <li key={port}>
            Port {port}:{" "}
            <a href={url} target="_blank" rel="noreferrer" data-testid="port-link" onClick={(e) => openPort(e, sessionId, port)}>
              {url}
            </a>
          </li>
        ))}
      </ul>
    </section>
  );
}

function PresencePanel({ state }: { state: LiveState }) {
  return (
    <section class="panel" aria-label="Who is here">
      <h2>Here now</h2>
      <ul class="presence" data-testid="presence">
        {state.presence.map((p) => (
          <li key={p.participantId} class={`presence-${p.status}`} title={`${p.name} (${p.status})`}>
            <Avatar name={p.name} src={p.avatar} />
            <span>{p.name}</span>
          </li>
        ))}
      </ul>
    </section>
  );
}

function Queue({ queue, live, me }: { queue: QueuedPrompt[]; live: LiveSession | null; me: Me }) {
  const waiting = queue.filter((q) => q.status === "pending");
  if (waiting.length === 0) return null;
  return (
    <ol class="queue" aria-label="Queued prompts" data-testid="queue">
      {waiting.map((q) => (
        <li key={q.messageId}>
          <span class="muted small">#{q.position}</span> <span class="queued-text">{q.content}</span>{" "}
          <span class="muted small">{q.authorId === me.user.userId ? "you" : q.authorName}</span>
          <button type="button" class="small" onClick={() => live?.send({ type: "cancel_prompt", messageId: q.messageId })}>
            Cancel
          </button>
        </li>
      ))}
    </ol>
  );
}

/** A file pasted or dropped into the prompt box is kept at most this big (the session's own
 * limit is 10 MiB). */
const MAX_ATTACHMENT_BYTES = 10 * 1024 * 1024;

function PromptBox({
  state,
  live,
  sessionId,
  onAttempts,
}: {
  state: LiveState;
  live: LiveSession | null;
  sessionId: string;
  onAttempts: () => void;
}) {
  const [text, setText] = useState("");
  const [model, setModel] = useState("");
  const [effort, setEffort] = useState("");
  const [files, setFiles] = useState<Attachment[]>([]);
  const [uploading, setUploading] = useState(0);
  const [error, setError] = useState("");
  const lastTyping = useRef(0);
  const input = useRef<HTMLTextAreaElement>(null);
  const send = () => {
    const content = text.trim();
    if (!content || !live || uploading > 0) return;
    const ok = live.send({
      type: "prompt",
      content,
      ...(model ? { model } : {}),
      ...(effort ? { reasoningEffort: effort } : {}),
      ...(files.length ? { attachments: files } : {}),
      clientRequestId: `web-${Date.now()}-${Math.random().toString(36).slice(2, 8)}`,
    });
    if (ok) {
      setText("");
      setFiles([]);
    }
  };
  /** Keeps pasted or dropped files with the session; they go with the next prompt. */
  const attach = (list: FileList | null | undefined) => {
    for (const file of Array.from(list ?? [])) {
      if (file.size > MAX_ATTACHMENT_BYTES) {
        setError(`${file.name} is bigger than 10 MiB`);
        continue;
      }
      setUploading((n) => n + 1);
      upload<Attachment>(`/sessions/${sessionId}/attachments?name=${encodeURIComponent(file.name || "pasted.png")}`, file)
        .then((a) => {
          setFiles((f) => [...f, a]);
          setError("");
        })
        .catch((e) => setError(errorText(e)))
        .finally(() => setUploading((n) => n - 1));
    }
  };
  const archived = state.session?.status === "archived";
  return (
    <form
      class="prompt-box"
      onSubmit={(e) => {
        e.preventDefault();
        send();
      }}
    >
      <textarea
        ref={input}
        rows={3}
        value={text}
        aria-label="Prompt"
        onPaste={(e) => {
          if (e.clipboardData?.files.length) {
            e.preventDefault();
            attach(e.clipboardData.files);
          }
        }}
        onDragOver={(e) => e.preventDefault()}
        onDrop={(e) => {
          if (e.dataTransfer?.files.length) {
            e.preventDefault();
            attach(e.dataTransfer.files);
          }
        }}
        disabled={archived}
        placeholder={archived ? "This session is archived." : "Ask the agent… (Enter sends, Shift+Enter adds a line)"}
        onInput={(e) => {
          setText(e.currentTarget.value);
          const now = Date.now();
          if (now - lastTyping.current > TYPING_EVERY_MS) {
            lastTyping.current = now;
            live?.send({ type: "typing" });
          }
        }}
        onKeyDown={(e) => {
          if (e.key === "Enter" && !e.shiftKey && !e.isComposing) {
            e.preventDefault();
            send();
          } else if (e.key === "Escape") {
            input.current?.blur();
          }
        }}
      />
      {(files.length > 0 || uploading > 0) && (
        <ul class="plain attachments" aria-label="Attached files">
          {files.map((f) => (
            <li key={f.attachmentId ?? f.name} data-testid="attached-file">
              📎 {f.name}{" "}
              <button type="button" class="link small" aria-label={`Remove ${f.name}`} onClick={() => setFiles((all) => all.filter((x) => x !== f))}>
                ×
              </button>
            </li>
          ))}
          {uploading > 0 && <li class="muted small">uploading…</li>}
        </ul>
      )}
      <ErrorNote text={error} />
      <div class="row spread">
        <span class="row">
          <ModelPicker value={model} onChange={setModel} id="prompt-model" />
          <EffortPicker model={model || state.session?.model || ""} value={effort} onChange={setEffort} />
        </span>
        <span class="row">
          {state.processing && (
            <button type="button" class="danger" onClick={() => live?.send({ type: "stop" })}>
              Stop
            </button>
          )}
          {!archived && (
            <TryWays
              sessionId={sessionId}
              text={text}
              model={model}
              onStarted={() => {
                setText("");
                onAttempts();
              }}
            />
          )}
          <button type="submit" class="primary" disabled={!text.trim() || uploading > 0 || state.connection !== "live"}>
            Send
          </button>
        </span>
      </div>
    </form>
  );
}

/** The sessions this one's agent started (attempts are shown apart, side by side). */
function ChildrenPanel({ children }: { children: ChildSummary[] }) {
  if (children.length === 0) return null;
  return (
    <section class="panel" aria-label="Child sessions">
      <h2>Child sessions</h2>
      <ul class="plain" data-testid="children">
        {children.map((c) => (
          <li key={c.sessionId}>
            <a href={`/sessions/${c.sessionId}`}>{c.title || c.sessionId}</a>{" "}
            <span class={`badge status-${c.state}`}>{c.state}</span>
            {c.pullRequests.map(([url, state]) => (
              <a href={url} target="_blank" rel="noreferrer" class="small">
                {" "}
                PR ({state})
              </a>
            ))}
          </li>
        ))}
      </ul>
    </section>
  );
}

/** The session's environment as it was when the session started, and whether it still
 * exists. */
function EnvironmentLabel({ id, name }: { id: string; name?: string | null }) {
  const [gone, setGone] = useState(false);
  useEffect(() => {
    get(`/environments/${id}`)
      .then(() => setGone(false))
      .catch(() => setGone(true));
  }, [id]);
  return (
    <span data-testid="environment">
      {" · "}environment {name ?? id}
      {gone && <span class="badge"> Environment deleted</span>}
    </span>
  );
}

export function SessionPage({ id, me }: { id: string; me: Me }) {
  const [state, live] = useLive(id);
  const [children, reloadChildren] = useChildren(id);
  const inAttempts = new Set(children.attempts.flatMap((g) => g.sessions));
  const [error, setError] = useState("");
  // Opening the session reads what the inbox held of it (and again as new items come).
  const inbox = useInbox();
  useEffect(() => {
    void readSession(id);
  }, [id, inbox.items.length]);
  const events = useMemo(() => ordered(state.timeline), [state.timeline.version]);
  const s = state.session;
  const setArchived = async (archive: boolean) => {
    try {
      await post(`/sessions/${id}/${archive ? "archive" : "unarchive"}`);
    } catch (e) {
      setError(errorText(e));
    }
  };
  return (
    <div class="session-page">
      <header class="session-head">
        <div>
          <TitleEditor id={id} title={s?.title || (s?.repositories[0] ? repoLabel(s.repositories[0]) : "Session")} />
          <p class="muted small">
            {s?.repositories.map(repoLabel).join(", ") || "no repository"}
            {s?.environmentId && <EnvironmentLabel id={s.environmentId} name={s.environmentName} />}
            {s?.parentSessionId && (
              <span data-testid="parent">
                {" · child of "}
                <a href={`/sessions/${s.parentSessionId}`}>the parent session</a>
              </span>
            )}
            {s?.branchName && ` · branch ${s.branchName}`}
            {s && ` · ${s.status}`}
          </p>
        </div>
        <div class="row">
          <span class={`conn conn-${state.connection}`} role="status" data-testid="connection">
            {state.connection === "live" ? "live" : state.connection === "reconnecting" ? "reconnecting…" : state.connection}
          </span>
          <button type="button" class="small" onClick={() => navigator.clipboard?.writeText(location.href)}>
            Copy link
          </button>
          {s && (
            <button type="button" class="small" onClick={() => setArchived(s.status !== "archived")}>
              {s.status === "archived" ? "Restore" : "Archive"}
            </button>
          )}
        </div>
      </header>
      {state.errors.map((e) => (
        <ErrorNote text={e} />
      ))}
      <ErrorNote text={error} />
      <div class="session-body">
        <div class="session-main">
          <Timeline
            events={events}
            hasOlder={state.timeline.hasOlder}
            loadingOlder={state.loadingOlder}
            onLoadOlder={() => live?.loadOlder()}
          />
          <Queue queue={state.queue} live={live} me={me} />
          <PromptBox state={state} live={live} sessionId={id} onAttempts={reloadChildren} />
          <AttemptsPanel sessionId={id} list={children} reload={reloadChildren} />
          <ChangesPanel sessionId={id} capturedAt={state.changesAt} />
          {live && <TerminalsPanel sessionId={id} live={live} state={state} />}
        </div>
        <aside class="session-side">
          <PresencePanel state={state} />
          <BootPanel state={state} />
          {state.session && (
            <p class="muted small" data-testid="session-agent">
              Agent: {state.session.agent === "claude-code" ? "Claude Code" : "OpenCode"}
            </p>
          )}
          {(state.session?.mcpServers?.length ?? 0) > 0 && (
            <section class="panel" aria-label="MCP servers">
              <h2>MCP servers</h2>
              <ul class="plain" data-testid="session-mcp">
                {state.session?.mcpServers.map((n) => (
                  <li key={n}>
                    <code>{n}</code>
                  </li>
                ))}
              </ul>
            </section>
          )}
          {(state.session?.skills?.length ?? 0) > 0 && (
            <section class="panel" aria-label="Managed skills">
              <h2>Managed skills</h2>
              <ul class="plain" data-testid="session-skills">
                {state.session?.skills.map((s) => (
                  <li key={s.name}>
                    <code>{s.name}</code> <span class="muted small">rev {s.revision}</span>
                  </li>
                ))}
              </ul>
            </section>
          )}
          <ArtifactsPanel state={state} sessionId={id} />
          <ChildrenPanel children={children.children.filter((c) => !inAttempts.has(c.sessionId))} />
        </aside>
      </div>
    </div>
  );
}

/** The session's title, renamed in place: Rename, type, Enter (Escape keeps it). */
function TitleEditor({ id, title }: { id: string; title: string }) {
  const [editing, setEditing] = useState(false);
  const [draft, setDraft] = useState(title);
  const [shown, setShown] = useState(title);
  const [error, setError] = useState("");
  useEffect(() => setShown(title), [title]);
  const save = async () => {
    const next = draft.trim();
    if (!next || next === shown) {
      setEditing(false);
      return;
    }
    try {
      await api("PATCH", `/sessions/${id}/title`, { title: next });
      setShown(next);
      setEditing(false);
      setError("");
    } catch (e) {
      setError(errorText(e));
    }
  };
  if (!editing) {
    return (
      <h1 class="title-row">
        {shown}{" "}
        <button
          type="button"
          class="small link"
          onClick={() => {
            setDraft(shown);
            setEditing(true);
          }}
        >
          Rename
        </button>
      </h1>
    );
  }
  return (
    <form
      class="inline-form"
      onSubmit={(e) => {
        e.preventDefault();
        void save();
      }}
    >
      <input
        aria-label="Session title"
        value={draft}
        maxLength={200}
        ref={(el) => el?.focus()}
        onInput={(e) => setDraft(e.currentTarget.value)}
        onKeyDown={(e) => {
          if (e.key === "Escape") setEditing(false);
        }}
      />
      <button type="submit" class="small">
        Save
      </button>
      <ErrorNote text={error} />
    </form>
  );
}
