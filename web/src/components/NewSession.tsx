import { useEffect, useRef, useState } from "preact/hooks";
import { useLocation } from "preact-iso";
import { del, errorText, get, post } from "../api";
import { socketUrl } from "../live";
import type { AgentKind, SkillProfiles, BranchList, Environment, Me, Repository, RepositoryRef } from "../types";
import { ErrorNote } from "./bits";
import { ModelPicker } from "./ModelPicker";

type Mode = "environment" | "one" | "several" | "none";
const MAX_REPOS = 10;

/** Throttles `typing` so a sandbox warms while the first prompt is written. */
const TYPING_EVERY_MS = 3000;

export function NewSession({ me }: { me: Me }) {
  const { route } = useLocation();
  const [repos, setRepos] = useState<Repository[]>([]);
  const [environments, setEnvironments] = useState<Environment[]>([]);
  const [environmentId, setEnvironmentId] = useState("");
  const [saved, setSaved] = useState("");
  const [search, setSearch] = useState("");
  const [branches, setBranches] = useState<string[]>([]);
  const [mode, setMode] = useState<Mode>("one");
  const [one, setOne] = useState("");
  const [branch, setBranch] = useState("");
  const [several, setSeveral] = useState<string[]>([]);
  const [model, setModel] = useState("");
  // "all", "none", or "profile:<name>" (one of the person's skill profiles).
  const [skills, setSkills] = useState<string>("all");
  const [profiles, setProfiles] = useState<string[]>([]);
  // Empty: the repository's default agent (OpenCode unless its settings say otherwise).
  const [agent, setAgent] = useState<"" | AgentKind>("");
  const [prompt, setPrompt] = useState("");
  const [error, setError] = useState("");
  const [busy, setBusy] = useState(false);
  // A session made when typing starts (so its sandbox warms), bound to the target it was
  // made for.
  const draft = useRef<{ id: string; target: string } | null>(null);
  const creating = useRef<Promise<string> | null>(null);
  const lastTyping = useRef(0);

  useEffect(() => {
    get<{ repositories: Repository[] }>("/repos")
      .then((r) => {
        setRepos(r.repositories);
        if (r.repositories[0]) setOne(`${r.repositories[0].owner}/${r.repositories[0].name}`);
      })
      .catch((e) => setError(errorText(e)));
    get<{ environments: Environment[] }>("/environments")
      .then((r) => {
        setEnvironments(r.environments);
        // Environments come first: with any, the picker starts on them.
        if (r.environments[0]) {
          setEnvironmentId(r.environments[0].id);
          setMode("environment");
        }
      })
      .catch(() => undefined);
    get<SkillProfiles>("/skill-profiles")
      .then((r) => setProfiles(r.profiles.map((p) => p.name)))
      .catch(() => undefined);
  }, []);

  /** Saves the ad-hoc selection of several repositories as an environment. */
  const saveAsEnvironment = async () => {
    const name = window.prompt("Name the environment", several.map((s) => s.split("/")[1]).join(" + "));
    if (!name?.trim()) return;
    try {
      const made = await post<Environment>("/environments", { name: name.trim(), repositories: target() });
      setEnvironments([...environments, made].sort((a, b) => a.name.localeCompare(b.name)));
      setSaved(`Saved as the environment “${made.name}”.`);
    } catch (err) {
      setError(errorText(err));
    }
  };

  const target = (): RepositoryRef[] => {
    const ref = (s: string, b?: string): RepositoryRef => {
      const [owner, name] = s.split("/");
      return b ? { owner, name, branch: b } : { owner, name };
    };
    if (mode === "one") return one ? [ref(one, branch.trim() || undefined)] : [];
    if (mode === "several") return several.map((s) => ref(s));
    return [];
  };
  const targetKey = () => JSON.stringify([mode, target(), environmentId, model, skills, agent]);

  const ensureSession = async (): Promise<string> => {
    const key = targetKey();
    if (draft.current && draft.current.target !== key) {
      // The target changed after typing began: the warm session was for another one.
      const stale = draft.current.id;
      draft.current = null;
      creating.current = null;
      void del(`/sessions/${stale}`).catch(() => undefined);
    }
    if (draft.current) return draft.current.id;
    if (!creating.current) {
      const body =
        mode === "environment" ? { environmentId } : { repositories: target() };
      creating.current = post<{ sessionId: string }>("/sessions", {
        ...body,
        ...(model ? { model } : {}),
        ...(agent ? { agent } : {}),
        skills: skills.startsWith("profile:") ? { profile: skills.slice(8) } : skills,
      }).then((r) => {
        draft.current = { id: r.sessionId, target: key };
        return r.sessionId;
      });
      creating.current.catch(() => {
        creating.current = null;
      });
    }
    return creating.current;
  };

  const onType = async (text: string) => {
    setPrompt(text);
    const now = Date.now();
    if (!text.trim() || now - lastTyping.current < TYPING_EVERY_MS) return;
    lastTyping.current = now;
    try {
      const id = await ensureSession();
      await warm(id);
    } catch (e) {
      setError(errorText(e));
    }
  };

  const start = async (e?: Event) => {
    e?.preventDefault();
    if (!prompt.trim()) {
      setError("Write the first prompt.");
      return;
    }
    if (mode === "several" && several.length === 0) {
      setError("Add at least one repository, or choose another target.");
      return;
    }
    setBusy(true);
    try {
      const id = await ensureSession();
      await post(`/sessions/${id}/prompt`, {
        content: prompt,
        ...(model ? { model } : {}),
        clientRequestId: `new-${id}`,
      });
      route(`/sessions/${id}`);
    } catch (err) {
      setError(errorText(err));
      setBusy(false);
    }
  };

  const names = repos.map((r) => `${r.owner}/${r.name}`);
  const label = (n: string) => {
    const r = repos.find((x) => `${x.owner}/${x.name}` === n);
    return r?.private ? `${n} (private)` : n;
  };
  const q = search.trim().toLowerCase();
  const shown = names.filter((n) => !q || n.toLowerCase().includes(q) || n === one);
  const move = (i: number, by: number) => {
    const next = [...several];
    const [x] = next.splice(i, 1);
    next.splice(i + by, 0, x);
    setSeveral(next);
  };

  return (
    <section class="narrow">
      <h1>New session</h1>
      <form class="new-session" onSubmit={start}>
        <label class="wide" for="first-prompt">
          First prompt
        </label>
        <textarea
          id="first-prompt"
          rows={6}
          value={prompt}
          placeholder="What should the agent do?"
          onInput={(e) => void onType(e.currentTarget.value)}
          onKeyDown={(e) => {
            if (e.key === "Enter" && !e.shiftKey && !e.isComposing) void start(e);
          }}
        />
        <fieldset>
          <legend>Target</legend>
          {environments.length > 0 && (
            <label class="check">
              <input type="radio" name="mode" checked={mode === "environment"} onChange={() => setMode("environment")} /> An
              environment
            </label>
          )}
          <label class="check">
            <input type="radio" name="mode" checked={mode === "one"} onChange={() => setMode("one")} /> One repository
          </label>
          <label class="check">
            <input type="radio" name="mode" checked={mode === "several"} onChange={() => setMode("several")} /> Several
            repositories
          </label>
          <label class="check">
            <input type="radio" name="mode" checked={mode === "none"} onChange={() => setMode("none")} /> No repository
          </label>
          {mode === "environment" && (
            <div>
              <label>
                Environment
                <select value={environmentId} onChange={(e) => setEnvironmentId(e.currentTarget.value)} aria-label="Environment">
                  {environments.map((env) => (
                    <option value={env.id}>{env.name}</option>
                  ))}
                </select>
              </label>
              {(() => {
                const env = environments.find((x) => x.id === environmentId);
                return env ? (
                  <p class="muted small">
                    {env.description ? `${env.description} · ` : ""}
                    {env.repositories.map((r) => `${r.owner}/${r.name}${r.branch ? `@${r.branch}` : ""}`).join(", ")}
                  </p>
                ) : null;
              })()}
            </div>
          )}
          {mode === "one" && (
            <div class="grid2">
              {names.length > 8 && (
                <label>
                  Find
                  <input
                    type="search"
                    value={search}
                    placeholder="name or owner"
                    aria-label="Find a repository"
                    onInput={(e) => {
                      const v = e.currentTarget.value;
                      setSearch(v);
                      const first = names.find((n) => n.toLowerCase().includes(v.trim().toLowerCase()));
                      if (first) setOne(first);
                    }}
                  />
                </label>
              )}
              <label>
                Repository
                <select value={one} onChange={(e) => setOne(e.currentTarget.value)} aria-label="Repository">
                  {shown.map((n) => (
                    <option value={n}>{label(n)}</option>
                  ))}
                </select>
              </label>
              <label>
                Branch
                <input
                  value={branch}
                  list="branches"
                  placeholder="default branch"
                  onFocus={() => {
                    if (!one) return;
                    get<BranchList>(`/repos/${one}/branches`)
                      .then((b) => setBranches(b.branches))
                      .catch(() => setBranches([]));
                  }}
                  onInput={(e) => setBranch(e.currentTarget.value)}
                />
                <datalist id="branches">
                  {branches.map((b) => (
                    <option value={b} />
                  ))}
                </datalist>
              </label>
            </div>
          )}
          {mode === "several" && (
            <div>
              <ol class="repo-order">
                {several.map((s, i) => (
                  <li key={s}>
                    <span>
                      {s}
                      {i === 0 && <span class="badge">primary</span>}
                    </span>
                    <span>
                      <button type="button" class="small" disabled={i === 0} onClick={() => move(i, -1)} aria-label={`Move ${s} up`}>
                        ↑
                      </button>
                      <button
                        type="button"
                        class="small"
                        disabled={i === several.length - 1}
                        onClick={() => move(i, 1)}
                        aria-label={`Move ${s} down`}
                      >
                        ↓
                      </button>
                      <button type="button" class="small" onClick={() => setSeveral(several.filter((x) => x !== s))} aria-label={`Remove ${s}`}>
                        ✕
                      </button>
                    </span>
                  </li>
                ))}
              </ol>
              <select
                aria-label="Add a repository"
                value=""
                disabled={several.length >= MAX_REPOS}
                onChange={(e) => {
                  const v = e.currentTarget.value;
                  if (v && !several.includes(v)) setSeveral([...several, v]);
                }}
              >
                <option value="">{several.length >= MAX_REPOS ? `At most ${MAX_REPOS}` : "Add a repository…"}</option>
                {names
                  .filter((n) => !several.includes(n))
                  .map((n) => (
                    <option value={n}>{label(n)}</option>
                  ))}
              </select>
              {several.length > 1 && (
                <p>
                  <button type="button" class="small" onClick={() => void saveAsEnvironment()}>
                    Save as an environment
                  </button>{" "}
                  {saved && <span class="muted small">{saved}</span>}
                </p>
              )}
            </div>
          )}
          {repos.length === 0 && mode !== "none" && mode !== "environment" && (
            <p class="muted small">
              No repositories yet: {me.via === "local" ? <a href="/settings/repositories">register a local one</a> : "ask an admin to add one"}.
            </p>
          )}
        </fieldset>
        <fieldset>
          <legend>Options</legend>
          <div class="options-grid">
            <ModelPicker value={model} onChange={setModel} id="new-model" />
            <label>
              Agent{" "}
              <select value={agent} onChange={(e) => setAgent(e.currentTarget.value as "" | AgentKind)} aria-label="Agent">
                <option value="">the repository&apos;s default</option>
                <option value="opencode">OpenCode</option>
                <option value="claude-code">Claude Code</option>
              </select>
            </label>
            <label>
              Skills{" "}
              <select value={skills} onChange={(e) => setSkills(e.currentTarget.value)} aria-label="Skills">
                <option value="all">all applicable</option>
                <option value="none">none</option>
                {profiles.map((p) => (
                  <option value={`profile:${p}`}>profile: {p}</option>
                ))}
              </select>
            </label>
          </div>
        </fieldset>
        <ErrorNote text={error} />
        <button type="submit" class="primary" disabled={busy}>
          {busy ? "Starting…" : "Start"}
        </button>
        <p class="muted small">Enter starts, Shift+Enter adds a line. The sandbox warms up while you type.</p>
      </form>
    </section>
  );
}

/** Sends one `typing` over a short-lived socket (the session page keeps its own). */
async function warm(sessionId: string) {
  const { token } = await post<{ token: string }>(`/sessions/${sessionId}/ws-token`);
  await new Promise<void>((resolve) => {
    const ws = new WebSocket(socketUrl(sessionId));
    const done = () => {
      ws.close(1000);
      resolve();
    };
    ws.onopen = () => ws.send(JSON.stringify({ type: "subscribe", token, clientId: `warm-${sessionId.slice(0, 6)}` }));
    ws.onmessage = (m) => {
      if (String(m.data).includes('"subscribed"')) {
        ws.send(JSON.stringify({ type: "typing" }));
        setTimeout(done, 200);
      }
    };
    ws.onerror = done;
    setTimeout(done, 5000);
  });
}
