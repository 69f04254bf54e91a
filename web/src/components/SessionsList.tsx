import { useEffect, useState } from "preact/hooks";
import { errorText, get, post } from "../api";
import { useInbox } from "../inbox";
import type { Me, Repository, SessionList, SessionSummary } from "../types";
import { ErrorNote, ago, repoLabel } from "./bits";

const PAGE = 25;

export function SessionsList({ me }: { me: Me }) {
  const [status, setStatus] = useState("");
  const [repo, setRepo] = useState(() => new URLSearchParams(location.search).get("repo") ?? "");
  const [mine, setMine] = useState(false);
  const [text, setText] = useState(() => new URLSearchParams(location.search).get("q") ?? "");
  const [searched, setSearched] = useState(text);
  const [sessions, setSessions] = useState<SessionSummary[]>([]);
  const [cursor, setCursor] = useState<string | null>(null);
  const [hasMore, setHasMore] = useState(false);
  const [repos, setRepos] = useState<Repository[]>([]);
  const [error, setError] = useState("");
  const [loading, setLoading] = useState(true);
  const inbox = useInbox();
  const unreadIn = new Set(inbox.items.map((i) => i.sessionId));

  const query = (after: string | null) => {
    const q = new URLSearchParams({ limit: String(PAGE) });
    if (status) q.set("status", status);
    if (repo) q.set("repo", repo);
    if (mine) q.set("mine", "true");
    if (searched.trim()) q.set("q", searched.trim());
    if (after) q.set("cursor", after);
    return `/sessions?${q}`;
  };

  const load = async (after: string | null) => {
    setLoading(true);
    try {
      const page = await get<SessionList>(query(after));
      setSessions((prev) => (after ? [...prev, ...page.sessions] : page.sessions));
      setCursor(page.cursor);
      setHasMore(page.hasMore);
      setError("");
    } catch (e) {
      setError(errorText(e));
    } finally {
      setLoading(false);
    }
  };

  useEffect(() => {
    void load(null);
  }, [status, repo, mine, searched]);
  // Searched as the person types, once they pause.
  useEffect(() => {
    const t = setTimeout(() => setSearched(text), 250);
    return () => clearTimeout(t);
  }, [text]);
  useEffect(() => {
    get<{ repositories: Repository[] }>("/repos")
      .then((r) => setRepos(r.repositories))
      .catch(() => undefined);
  }, []);

  const setArchived = async (s: SessionSummary, archive: boolean) => {
    try {
      await post(`/sessions/${s.id}/${archive ? "archive" : "unarchive"}`);
      await load(null);
    } catch (e) {
      setError(errorText(e));
    }
  };

  return (
    <section>
      <div class="row spread">
        <h1>Sessions</h1>
        <a class="button primary" href="/new">
          New session
        </a>
      </div>
      {inbox.unread > 0 && (
        <p class="inbox-note" data-testid="sessions-unread">
          <a href="/inbox">
            {inbox.unread} unread in your inbox
          </a>
        </p>
      )}
      <form class="filters" onSubmit={(e) => e.preventDefault()} aria-label="Filter sessions">
        <label>
          Search{" "}
          <input
            type="search"
            value={text}
            placeholder="title, repository, author, prompt…"
            onInput={(e) => setText(e.currentTarget.value)}
            data-testid="session-search"
          />
        </label>
        <label>
          Status{" "}
          <select value={status} onChange={(e) => setStatus(e.currentTarget.value)}>
            <option value="">Not archived</option>
            <option value="all">All</option>
            <option value="active">Active</option>
            <option value="created">New</option>
            <option value="archived">Archived</option>
          </select>
        </label>
        <label>
          Repository{" "}
          <select value={repo} onChange={(e) => setRepo(e.currentTarget.value)}>
            <option value="">Any</option>
            {repos.map((r) => (
              <option value={`${r.owner}/${r.name}`}>{`${r.owner}/${r.name}`}</option>
            ))}
          </select>
        </label>
        <label class="check">
          <input type="checkbox" checked={mine} onChange={(e) => setMine(e.currentTarget.checked)} /> Mine
        </label>
      </form>
      <ErrorNote text={error} />
      {!loading && sessions.length === 0 && (
        <p class="muted">
          {searched.trim() ? "No session matches." : <>No sessions yet. <a href="/new">Start one</a>.</>}
        </p>
      )}
      <ul class="sessions" aria-busy={loading}>
        {sessions.map((s) => (
          <li key={s.id} class="session-row">
            <a href={`/sessions/${s.id}`} class="session-link">
              {unreadIn.has(s.id) && <span class="dot" aria-label="unread" title="Unread in your inbox" />}
              <span class="title">{s.title || (s.repositories[0] ? repoLabel(s.repositories[0]) : "Untitled session")}</span>
              <span class="meta">
                <span class={`badge status-${s.status}`}>{s.status}</span>
                {s.prUrl && (
                  <span class={`badge pr-${s.prState ?? "open"}`} title={s.prUrl}>
                    PR {s.prState ?? "open"}
                  </span>
                )}
                {s.repositories.length > 0 && <span>{s.repositories.map(repoLabel).join(", ")}</span>}
                <span>by {s.createdBy === me.user.userId ? "you" : s.createdByName}</span>
                <span>
                  {s.messageCount} {s.messageCount === 1 ? "prompt" : "prompts"}
                </span>
                <span title={new Date(s.updatedAt).toLocaleString()}>{ago(s.updatedAt)}</span>
              </span>
            </a>
            <button type="button" class="small" onClick={() => setArchived(s, s.status !== "archived")}>
              {s.status === "archived" ? "Restore" : "Archive"}
            </button>
          </li>
        ))}
      </ul>
      {hasMore && (
        <button type="button" onClick={() => load(cursor)} disabled={loading}>
          {loading ? "Loading…" : "Load more"}
        </button>
      )}
    </section>
  );
}
