import { useEffect, useState } from "preact/hooks";
import { errorText, get, post } from "../api";
import type { AttemptChosen, AttemptGroup, ChangesSummary, ChildList, ChildSummary } from "../wire";
import { ErrorNote } from "./bits";

/** "Try N ways": the same prompt in 2–4 child sessions side by side. */
export function TryWays({ sessionId, text, model, onStarted }: { sessionId: string; text: string; model: string; onStarted: () => void }) {
  const [count, setCount] = useState(3);
  const [mix, setMix] = useState(false);
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState("");
  const start = async () => {
    const content = text.trim();
    if (!content) return;
    setBusy(true);
    try {
      await post<AttemptGroup>(`/sessions/${sessionId}/attempts`, {
        content,
        count,
        ...(model ? { models: Array.from({ length: count }, () => model) } : {}),
        ...(mix ? { agents: Array.from({ length: count }, (_, i) => (i % 2 === 0 ? "opencode" : "claude-code")) } : {}),
      });
      setError("");
      onStarted();
    } catch (e) {
      setError(errorText(e));
    } finally {
      setBusy(false);
    }
  };
  return (
    <span class="row try-ways">
      <select aria-label="How many ways" value={count} onChange={(e) => setCount(Number(e.currentTarget.value))}>
        {[2, 3, 4].map((n) => (
          <option value={n}>{n}</option>
        ))}
      </select>
      <label class="small" title="Alternate OpenCode and Claude Code across the attempts">
        <input type="checkbox" checked={mix} onChange={(e) => setMix(e.currentTarget.checked)} /> Mix agents
      </label>
      <button type="button" disabled={busy || !text.trim()} onClick={start} title="Start the prompt in several child sessions and pick the best">
        Try {count} ways
      </button>
      {error && <ErrorNote text={error} />}
    </span>
  );
}

/** The children and attempt groups of a session, polled while the page is open. */
export function useChildren(id: string): [ChildList, () => void] {
  const [list, setList] = useState<ChildList>({ children: [], attempts: [] });
  const [tick, setTick] = useState(0);
  useEffect(() => {
    let stop = false;
    const load = () =>
      get<ChildList>(`/sessions/${id}/children`)
        .then((r) => !stop && setList({ children: r.children, attempts: r.attempts ?? [] }))
        .catch(() => undefined);
    void load();
    const timer = setInterval(load, 5000);
    return () => {
      stop = true;
      clearInterval(timer);
    };
  }, [id, tick]);
  return [list, () => setTick((t) => t + 1)];
}

/** Each group of attempts side by side: state, last words, changed files; "Use this one". */
export function AttemptsPanel({ sessionId, list, reload }: { sessionId: string; list: ChildList; reload: () => void }) {
  if (list.attempts.length === 0) return null;
  const byId = new Map(list.children.map((c) => [c.sessionId, c]));
  return (
    <section class="panel" aria-label="Attempts">
      <h2>Attempts</h2>
      {list.attempts.map((g) => (
        <AttemptGroupView key={g.group} sessionId={sessionId} group={g} byId={byId} reload={reload} />
      ))}
    </section>
  );
}

function AttemptGroupView({ sessionId, group, byId, reload }: { sessionId: string; group: AttemptGroup; byId: Map<string, ChildSummary>; reload: () => void }) {
  const [error, setError] = useState("");
  const [choosing, setChoosing] = useState("");
  const [opened, setOpened] = useState<AttemptChosen | null>(null);
  const choose = async (child: string) => {
    setChoosing(child);
    try {
      setOpened(await post<AttemptChosen>(`/sessions/${sessionId}/attempts/choose`, { sessionId: child }));
      setError("");
      reload();
    } catch (e) {
      setError(errorText(e));
    } finally {
      setChoosing("");
    }
  };
  const prompt = group.prompt.length > 120 ? `${group.prompt.slice(0, 117)}…` : group.prompt;
  return (
    <div class="attempt-group" data-testid="attempt-group">
      <p class="small">
        {group.sessions.length} ways: <q>{prompt}</q>
      </p>
      <div class="attempts" style={{ gridTemplateColumns: `repeat(${group.sessions.length}, minmax(0, 1fr))` }}>
        {group.sessions.map((id, i) => (
          <Attempt
            key={id}
            n={i + 1}
            id={id}
            child={byId.get(id)}
            chosen={group.chosen ?? null}
            choosing={choosing}
            onChoose={() => choose(id)}
          />
        ))}
      </div>
      {opened?.pullRequests.map((pr) => (
        <p class="small" data-testid="attempt-pr">
          {pr.prUrl ? (
            <>
              {pr.updated ? "Updated" : "Opened"}{" "}
              <a href={pr.prUrl} target="_blank" rel="noreferrer">
                {pr.repoOwner}/{pr.repoName}#{pr.prNumber}
              </a>
            </>
          ) : (
            <>Pushed {pr.headBranch}</>
          )}
          {pr.message ? ` — ${pr.message}` : ""}
        </p>
      ))}
      <ErrorNote text={error} />
    </div>
  );
}

function Attempt({
  n,
  id,
  child,
  chosen,
  choosing,
  onChoose,
}: {
  n: number;
  id: string;
  child?: ChildSummary;
  chosen: string | null;
  choosing: string;
  onChoose: () => void;
}) {
  const [changes, setChanges] = useState<ChangesSummary | null>(null);
  const state = child?.state ?? "idle";
  useEffect(() => {
    // The attempt's change as of its latest state: an earlier answer arriving later is dropped.
    let latest = true;
    get<ChangesSummary>(`/sessions/${id}/changes`)
      .then((c) => latest && setChanges(c))
      .catch(() => undefined);
    return () => {
      latest = false;
    };
  }, [id, state]);
  const files = changes?.repos.flatMap((r) => r.files.map((f) => ({ ...f, repo: r.repo }))) ?? [];
  const words = child?.lastOutput ?? "";
  return (
    <article class={`attempt${chosen === id ? " chosen" : ""}`} data-testid="attempt">
      <header class="row spread">
        <a href={`/sessions/${id}`}>Way {n}</a>
        <span class={`badge status-${state}`}>{chosen === id ? "chosen" : chosen ? "not chosen" : state}</span>
      </header>
      {words && <p class="small muted attempt-words">{words.length > 240 ? `${words.slice(0, 237)}…` : words}</p>}
      <ul class="plain small" aria-label={`Way ${n}'s changes`}>
        {files.length === 0 && <li class="muted">no changes yet</li>}
        {files.map((f) => (
          <li key={`${f.repo}/${f.path}`}>
            <code>{f.path}</code> <span class="added">+{f.additions}</span> <span class="removed">−{f.deletions}</span>
          </li>
        ))}
      </ul>
      {!chosen && (
        <button type="button" class="primary small" disabled={state !== "completed" || choosing !== ""} onClick={onChoose}>
          {choosing === id ? "Opening the PR…" : "Use this one"}
        </button>
      )}
    </article>
  );
}
