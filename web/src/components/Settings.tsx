import { useEffect, useState } from "preact/hooks";
import { del, errorText, get, post, put } from "../api";
import type { ApiTokenSummary, Environment, Me, RepoSettings, Repository, RepositoryRef, SecretSummary } from "../types";
import { ErrorNote, ago } from "./bits";

function Secrets({ repos, environments }: { repos: Repository[]; environments: Environment[] }) {
  const [scope, setScope] = useState("");
  const [secrets, setSecrets] = useState<SecretSummary[]>([]);
  const [name, setName] = useState("");
  const [value, setValue] = useState("");
  const [error, setError] = useState("");
  const base = scope.startsWith("env:")
    ? `/environments/${scope.slice(4)}/secrets`
    : scope
      ? `/repos/${scope}/secrets`
      : "/secrets";
  const load = () =>
    get<{ secrets: SecretSummary[] }>(base)
      .then((r) => {
        setSecrets(r.secrets);
        setError("");
      })
      .catch((e) => setError(errorText(e)));
  useEffect(() => {
    void load();
  }, [scope]);
  const save = async (e: Event) => {
    e.preventDefault();
    try {
      await put(base, { secrets: { [name.trim()]: value } });
      setName("");
      setValue("");
      await load();
    } catch (err) {
      setError(errorText(err));
    }
  };
  const remove = async (key: string) => {
    try {
      await del(`${base}/${encodeURIComponent(key)}`);
      await load();
    } catch (err) {
      setError(errorText(err));
    }
  };
  return (
    <section class="panel" aria-labelledby="secrets-h">
      <h2 id="secrets-h">Secrets</h2>
      <p class="muted small">
        Sandboxes get these as environment variables; a repository's secret wins over a global one of the same name. Values
        are sealed and never shown again.
      </p>
      <label>
        Scope{" "}
        <select value={scope} onChange={(e) => setScope(e.currentTarget.value)} aria-label="Secret scope">
          <option value="">Global</option>
          {environments.map((env) => (
            <option value={`env:${env.id}`}>{`Environment: ${env.name}`}</option>
          ))}
          {repos.map((r) => (
            <option value={`${r.owner}/${r.name}`}>{`${r.owner}/${r.name}`}</option>
          ))}
        </select>
      </label>
      <table class="list" data-testid="secrets">
        <thead>
          <tr>
            <th>Name</th>
            <th>Updated</th>
            <th />
          </tr>
        </thead>
        <tbody>
          {secrets.map((s) => (
            <tr key={s.key}>
              <td>
                <code>{s.key}</code>
              </td>
              <td>{ago(s.updatedAt)}</td>
              <td>
                <button type="button" class="small" onClick={() => remove(s.key)} aria-label={`Delete ${s.key}`}>
                  Delete
                </button>
              </td>
            </tr>
          ))}
          {secrets.length === 0 && (
            <tr>
              <td colSpan={3} class="muted">
                None yet.
              </td>
            </tr>
          )}
        </tbody>
      </table>
      <form class="inline-form" onSubmit={save}>
        <input aria-label="Secret name" placeholder="NAME" value={name} onInput={(e) => setName(e.currentTarget.value)} required />
        <input
          aria-label="Secret value"
          placeholder="value"
          type="password"
          autocomplete="off"
          value={value}
          onInput={(e) => setValue(e.currentTarget.value)}
          required
        />
        <button type="submit">Set</button>
      </form>
      <ErrorNote text={error} />
    </section>
  );
}

function LocalRepos({ repos, reload }: { repos: Repository[]; reload: () => void }) {
  const [path, setPath] = useState("");
  const [name, setName] = useState("");
  const [error, setError] = useState("");
  const add = async (e: Event) => {
    e.preventDefault();
    const guess = path.replace(/\/+$/, "").split("/").pop() ?? "";
    try {
      await post("/repos", { path: path.trim(), name: (name.trim() || guess).replace(/[^A-Za-z0-9._-]/g, "-") });
      setPath("");
      setName("");
      reload();
    } catch (err) {
      setError(errorText(err));
    }
  };
  const remove = async (r: Repository) => {
    try {
      await del(`/repos/${r.owner}/${r.name}`);
      reload();
    } catch (err) {
      setError(errorText(err));
    }
  };
  return (
    <section class="panel" aria-labelledby="repos-h">
      <h2 id="repos-h">Local repositories</h2>
      <ul class="plain" data-testid="repos">
        {repos.map((r) => (
          <li key={`${r.owner}/${r.name}`} class="row spread">
            <span>
              <strong>{`${r.owner}/${r.name}`}</strong> <span class="muted small">{r.source}</span>
            </span>
            <button type="button" class="small" onClick={() => remove(r)}>
              Remove
            </button>
          </li>
        ))}
      </ul>
      <form class="inline-form" onSubmit={add}>
        <input aria-label="Repository path" placeholder="/path/to/repo" value={path} onInput={(e) => setPath(e.currentTarget.value)} required />
        <input aria-label="Repository name" placeholder="name (optional)" value={name} onInput={(e) => setName(e.currentTarget.value)} />
        <button type="submit">Register</button>
      </form>
      <ErrorNote text={error} />
    </section>
  );
}

function Tokens() {
  const [tokens, setTokens] = useState<ApiTokenSummary[]>([]);
  const [name, setName] = useState("");
  const [fresh, setFresh] = useState<string | null>(null);
  const [error, setError] = useState("");
  const load = () =>
    get<{ tokens: ApiTokenSummary[] }>("/tokens")
      .then((r) => setTokens(r.tokens))
      .catch((e) => setError(errorText(e)));
  useEffect(() => {
    void load();
  }, []);
  const create = async (e: Event) => {
    e.preventDefault();
    try {
      const t = await post<{ token: string }>("/tokens", { name: name.trim() });
      setFresh(t.token);
      setName("");
      await load();
    } catch (err) {
      setError(errorText(err));
    }
  };
  const revoke = async (id: string) => {
    try {
      await del(`/tokens/${id}`);
      await load();
    } catch (err) {
      setError(errorText(err));
    }
  };
  return (
    <section class="panel" aria-labelledby="tokens-h">
      <h2 id="tokens-h">API tokens</h2>
      {fresh && (
        <div class="notice" role="status">
          Copy this token now; it is not shown again: <code data-testid="new-token">{fresh}</code>
        </div>
      )}
      <ul class="plain">
        {tokens.map((t) => (
          <li key={t.id} class="row spread">
            <span>
              <strong>{t.name}</strong> <span class="muted small">made {ago(t.createdAt)}{t.lastUsedAt ? `, used ${ago(t.lastUsedAt)}` : ""}</span>
            </span>
            <button type="button" class="small" onClick={() => revoke(t.id)}>
              Revoke
            </button>
          </li>
        ))}
      </ul>
      <form class="inline-form" onSubmit={create}>
        <input aria-label="Token name" placeholder="what it is for" value={name} onInput={(e) => setName(e.currentTarget.value)} required />
        <button type="submit">Create token</button>
      </form>
      <ErrorNote text={error} />
    </section>
  );
}

/** Settings › Environments: named, ordered sets of repositories (the first is primary). */
function Environments({
  repos,
  environments,
  reload,
}: {
  repos: Repository[];
  environments: Environment[];
  reload: () => void;
}) {
  const [editing, setEditing] = useState<string | null>(null);
  const [name, setName] = useState("");
  const [description, setDescription] = useState("");
  const [members, setMembers] = useState<RepositoryRef[]>([]);
  const [error, setError] = useState("");
  const names = repos.map((r) => `${r.owner}/${r.name}`);
  const open = (env?: Environment) => {
    setEditing(env ? env.id : "new");
    setName(env?.name ?? "");
    setDescription(env?.description ?? "");
    setMembers(env ? env.repositories.map((r) => ({ owner: r.owner, name: r.name, branch: r.branch })) : []);
    setError("");
  };
  const save = async (e: Event) => {
    e.preventDefault();
    const body = {
      name: name.trim(),
      description: description.trim() || undefined,
      repositories: members.map((m) => (m.branch?.trim() ? { ...m, branch: m.branch.trim() } : { owner: m.owner, name: m.name })),
    };
    try {
      if (editing === "new") await post("/environments", body);
      else await put(`/environments/${editing}`, body);
      setEditing(null);
      reload();
    } catch (err) {
      setError(errorText(err));
    }
  };
  const remove = async (env: Environment) => {
    try {
      await del(`/environments/${env.id}`);
      reload();
    } catch (err) {
      setError(errorText(err));
    }
  };
  return (
    <section class="panel" aria-labelledby="environments-h">
      <h2 id="environments-h">Environments</h2>
      <p class="muted small">
        A named set of up to 10 repositories, the first primary, with secrets of its own. Sessions keep the environment as it
        was when they started.
      </p>
      <ul class="plain" data-testid="environments">
        {environments.map((env) => (
          <li key={env.id}>
            <strong>{env.name}</strong>{" "}
            <span class="muted small">
              {env.repositories.map((r) => `${r.owner}/${r.name}${r.branch ? `@${r.branch}` : ""}`).join(", ")}
            </span>{" "}
            <button type="button" class="small" onClick={() => open(env)} aria-label={`Edit ${env.name}`}>
              Edit
            </button>
            <button type="button" class="small" onClick={() => void remove(env)} aria-label={`Delete ${env.name}`}>
              Delete
            </button>
          </li>
        ))}
      </ul>
      {editing === null ? (
        <button type="button" onClick={() => open()} disabled={repos.length === 0}>
          New environment
        </button>
      ) : (
        <form onSubmit={save} aria-label="Environment">
          <label>
            Name
            <input value={name} onInput={(e) => setName(e.currentTarget.value)} aria-label="Environment name" />
          </label>
          <label class="wide">
            Description
            <input value={description} onInput={(e) => setDescription(e.currentTarget.value)} aria-label="Environment description" />
          </label>
          <ol class="repo-order">
            {members.map((m, i) => (
              <li key={`${m.owner}/${m.name}`}>
                <span>
                  {m.owner}/{m.name}
                  {i === 0 && <span class="badge">primary</span>}
                </span>
                <input
                  value={m.branch ?? ""}
                  placeholder="default branch"
                  aria-label={`Branch of ${m.owner}/${m.name}`}
                  onInput={(e) => {
                    const v = e.currentTarget.value;
                    setMembers(members.map((x, j) => (j === i ? { ...x, branch: v } : x)));
                  }}
                />
                <button type="button" class="small" onClick={() => setMembers(members.filter((_, j) => j !== i))} aria-label={`Remove ${m.owner}/${m.name}`}>
                  ✕
                </button>
              </li>
            ))}
          </ol>
          <select
            aria-label="Add a repository to the environment"
            value=""
            disabled={members.length >= 10}
            onChange={(e) => {
              const v = e.currentTarget.value;
              if (!v) return;
              const [owner, repo] = v.split("/");
              setMembers([...members, { owner, name: repo }]);
            }}
          >
            <option value="">{members.length >= 10 ? "At most 10" : "Add a repository…"}</option>
            {names
              .filter((n) => !members.some((m) => `${m.owner}/${m.name}` === n))
              .map((n) => (
                <option value={n}>{n}</option>
              ))}
          </select>{" "}
          <button type="submit">Save environment</button>{" "}
          <button type="button" class="small" onClick={() => setEditing(null)}>
            Cancel
          </button>
        </form>
      )}
      <ErrorNote text={error} />
    </section>
  );
}

const NO_SETTINGS: RepoSettings = { alwaysDraft: false, botEnabled: false, autoReviewOnOpen: false };

/** Per-repository settings: the bot, pull requests, the default model. */
function RepositorySettings({ repos }: { repos: Repository[] }) {
  const [repo, setRepo] = useState("");
  const [settings, setSettings] = useState<RepoSettings>(NO_SETTINGS);
  const [users, setUsers] = useState("");
  const [note, setNote] = useState("");
  const [error, setError] = useState("");
  useEffect(() => {
    if (!repo && repos[0]) setRepo(`${repos[0].owner}/${repos[0].name}`);
  }, [repos]);
  useEffect(() => {
    if (!repo) return;
    get<RepoSettings>(`/repos/${repo}/settings`)
      .then((r) => {
        setSettings(r);
        setUsers((r.allowedTriggerUsers ?? []).join(", "));
        setError("");
        setNote("");
      })
      .catch((e) => setError(errorText(e)));
  }, [repo]);
  const save = async (e: Event) => {
    e.preventDefault();
    const body: RepoSettings = {
      ...settings,
      prLabel: settings.prLabel?.trim() || null,
      defaultModel: settings.defaultModel?.trim() || null,
      allowedTriggerUsers: users
        .split(",")
        .map((u) => u.trim())
        .filter(Boolean),
    };
    if (!body.prLabel) delete body.prLabel;
    if (!body.defaultModel) delete body.defaultModel;
    if (!body.defaultEnvironmentId) delete body.defaultEnvironmentId;
    try {
      setSettings(await put<RepoSettings>(`/repos/${repo}/settings`, body));
      setNote("Saved.");
      setError("");
    } catch (err) {
      setError(errorText(err));
    }
  };
  if (repos.length === 0) return null;
  const flag = (key: "botEnabled" | "autoReviewOnOpen" | "alwaysDraft", text: string) => (
    <label class="check">
      <input
        type="checkbox"
        checked={settings[key]}
        onChange={(e) => setSettings({ ...settings, [key]: e.currentTarget.checked })}
      />{" "}
      {text}
    </label>
  );
  return (
    <section class="panel" aria-labelledby="repo-settings-h">
      <h2 id="repo-settings-h">Repository settings</h2>
      <form onSubmit={save}>
        <label>
          Repository{" "}
          <select value={repo} onChange={(e) => setRepo(e.currentTarget.value)} aria-label="Repository to configure">
            {repos.map((r) => (
              <option value={`${r.owner}/${r.name}`}>
                {`${r.owner}/${r.name}`}
                {r.private ? " (private)" : ""}
              </option>
            ))}
          </select>
        </label>
        <div class="stack">
          {flag("botEnabled", "The GitHub bot answers in this repository")}
          {flag("autoReviewOnOpen", "Review every new pull request")}
          {flag("alwaysDraft", "Open pull requests as drafts")}
        </div>
        <label>
          Pull request label
          <input value={settings.prLabel ?? ""} onInput={(e) => setSettings({ ...settings, prLabel: e.currentTarget.value })} />
        </label>
        <label>
          Default model
          <input
            value={settings.defaultModel ?? ""}
            placeholder="provider/model"
            onInput={(e) => setSettings({ ...settings, defaultModel: e.currentTarget.value })}
          />
        </label>
        <label class="wide">
          Who may trigger the bot (GitHub logins, comma-separated; empty: anyone with write access)
          <input value={users} onInput={(e) => setUsers(e.currentTarget.value)} />
        </label>
        <button type="submit">Save</button> {note && <span class="muted">{note}</span>}
      </form>
      <ErrorNote text={error} />
    </section>
  );
}

export function Settings({ me }: { me: Me }) {
  const [repos, setRepos] = useState<Repository[]>([]);
  const [environments, setEnvironments] = useState<Environment[]>([]);
  const reloadEnvironments = () =>
    get<{ environments: Environment[] }>("/environments")
      .then((r) => setEnvironments(r.environments))
      .catch(() => undefined);
  const reload = () => {
    void reloadEnvironments();
    return get<{ repositories: Repository[] }>("/repos")
      .then((r) => setRepos(r.repositories))
      .catch(() => undefined);
  };
  useEffect(() => {
    void reload();
  }, []);
  return (
    <section class="narrow">
      <h1>Settings</h1>
      <Environments repos={repos} environments={environments} reload={() => void reloadEnvironments()} />
      <Secrets repos={repos} environments={environments} />
      <RepositorySettings repos={repos} />
      {me.via === "local" && <LocalRepos repos={repos.filter((r) => r.kind === "local")} reload={reload} />}
      <Tokens />
    </section>
  );
}
