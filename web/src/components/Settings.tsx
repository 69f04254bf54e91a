import { NotificationSettings } from "./Inbox";
import { useEffect, useState } from "preact/hooks";
import { del, errorText, get, post, put } from "../api";
import type {
  AgentKind,
  ApiTokenSummary,
  EgressMode,
  EgressPolicy,
  EgressRule,
  Environment,
  ImageBuild,
  ImageList,
  ImageScope,
  Me,
  ModelCatalog,
  ModelSettings,
  RepoSettings,
  Repository,
  RepositoryRef,
  SecretSummary,
  SlackSettings,
} from "../types";
import { ErrorNote, ago } from "./bits";
import { ModelPicker, useModels } from "./ModelPicker";
import { Skills } from "./Skills";
import { McpServers } from "./McpServers";
import { Linear } from "./Linear";
import { Account, PeopleRoles } from "./People";

function Secrets({ repos, environments }: { repos: Repository[]; environments: Environment[] }) {
  const [scope, setScope] = useState("");
  const [secrets, setSecrets] = useState<SecretSummary[]>([]);
  const [name, setName] = useState("");
  const [value, setValue] = useState("");
  const [setupOnly, setSetupOnly] = useState(false);
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
      await put(base, { secrets: { [name.trim()]: value }, setup: setupOnly ? [name.trim()] : [] });
      setName("");
      setValue("");
      setSetupOnly(false);
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
        are sealed and never shown again. A set-up-only secret is given to the repository's set-up and start hooks alone:
        the agent, the terminals and the sandbox's files never see it.
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
                {s.setup && <span class="badge small">set-up only</span>}
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
        <label class="check">
          <input type="checkbox" aria-label="Set-up only" checked={setupOnly} onChange={(e) => setSetupOnly(e.currentTarget.checked)} />
          {" set-up only"}
        </label>
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

/** An environment's egress policy from the form: the allow-list a line an entry. */
function egressPolicy(mode: EgressMode, allowText: string, registries: boolean): EgressPolicy {
  if (mode === "open") return { mode, allow: [], presets: [] };
  const allow: EgressRule[] = allowText
    .split("\n")
    .map((l) => l.trim())
    .filter((l) => l)
    .map((l) => {
      const [host, methods] = l.split(/\s+/, 2);
      return methods ? { host, methods: methods.split(",").map((m) => m.trim().toUpperCase()).filter((m) => m) } : { host, methods: [] };
    });
  return { mode, allow, presets: registries ? ["package_registries"] : [] };
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
  const [envModel, setEnvModel] = useState("");
  const [members, setMembers] = useState<RepositoryRef[]>([]);
  const [egressMode, setEgressMode] = useState<EgressMode>("open");
  const [allowText, setAllowText] = useState("");
  const [registries, setRegistries] = useState(false);
  const [error, setError] = useState("");
  const names = repos.map((r) => `${r.owner}/${r.name}`);
  const open = (env?: Environment) => {
    setEditing(env ? env.id : "new");
    setName(env?.name ?? "");
    setDescription(env?.description ?? "");
    setEnvModel(env?.defaultModel ?? "");
    setEgressMode(env?.egress?.mode ?? "open");
    setAllowText(
      (env?.egress?.allow ?? []).map((r) => (r.methods?.length ? `${r.host} ${r.methods.join(",")}` : r.host)).join("\n"),
    );
    setRegistries((env?.egress?.presets ?? []).includes("package_registries"));
    setMembers(env ? env.repositories.map((r) => ({ owner: r.owner, name: r.name, branch: r.branch })) : []);
    setError("");
  };
  const save = async (e: Event) => {
    e.preventDefault();
    const body = {
      name: name.trim(),
      description: description.trim() || undefined,
      defaultModel: envModel || undefined,
      egress: egressPolicy(egressMode, allowText, registries),
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
          <ModelPicker value={envModel} onChange={setEnvModel} id="environment-model" />
          <fieldset class="wide">
            <legend>Network</legend>
            <label>
              Sandboxes reach
              <select
                aria-label="Network access"
                value={egressMode}
                onChange={(e) => setEgressMode(e.currentTarget.value as EgressMode)}
              >
                <option value="open">anything (open)</option>
                <option value="off">only the session's services and the hosts below</option>
              </select>
            </label>
            {egressMode === "off" && (
              <>
                <label class="wide">
                  Allowed hosts, one a line (<code>host</code>, <code>*.domain</code>, <code>host:port</code>, then optionally the
                  methods: <code>api.example.com GET,HEAD</code>)
                  <textarea
                    rows={3}
                    value={allowText}
                    onInput={(e) => setAllowText(e.currentTarget.value)}
                    aria-label="Allowed hosts"
                  />
                </label>
                <label>
                  <input type="checkbox" checked={registries} onChange={(e) => setRegistries(e.currentTarget.checked)} /> Package
                  registries (npm, PyPI, crates.io, Go, RubyGems, Maven, Debian)
                </label>
              </>
            )}
          </fieldset>
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

/** The scope a picker value names: `env:<id>` or `owner/name`. */
function imageScope(value: string): ImageScope {
  if (value.startsWith("env:")) return { kind: "environment", environmentId: value.slice(4) };
  const [owner, name] = value.split("/");
  return { kind: "repository", owner, name };
}

function imageQuery(value: string): string {
  return value.startsWith("env:")
    ? `environmentId=${encodeURIComponent(value.slice(4))}`
    : `repository=${encodeURIComponent(value)}`;
}

function BuildRow({ build }: { build: ImageBuild }) {
  const commits = build.repositories.map((r) => `${r.name}@${r.commit.slice(0, 8)}`).join(", ");
  return (
    <li data-testid="image-build" data-status={build.status}>
      <span class={`badge image-${build.status}`}>{build.status}</span>{" "}
      <span class="muted small">
        {build.trigger === "schedule" ? "scheduled" : "by hand"}, started {ago(build.startedAt)}
        {build.finishedAt ? `, finished ${ago(build.finishedAt)}` : ""}
      </span>
      {build.status === "ready" && (
        <div class="small">
          {commits} <span class="muted">runtime {build.runtimeVersion}</span>
        </div>
      )}
      {build.error && <div class="small error">{build.error}</div>}
      {build.status === "failed" && build.output && (
        <details>
          <summary class="small">Setup output</summary>
          <pre class="hook-output">{build.output}</pre>
        </details>
      )}
    </li>
  );
}

/** Settings › Prebuilt images: a repository's or environment's workspace set up ahead. */
function Images({ repos, environments }: { repos: Repository[]; environments: Environment[] }) {
  const [scope, setScope] = useState("");
  const [list, setList] = useState<ImageList | null>(null);
  const [interval, setIntervalText] = useState("");
  const [keep, setKeep] = useState("2");
  const [error, setError] = useState("");
  useEffect(() => {
    if (!scope && repos[0]) setScope(`${repos[0].owner}/${repos[0].name}`);
  }, [repos]);
  const load = () =>
    scope
      ? get<ImageList>(`/images?${imageQuery(scope)}`)
          .then((r) => {
            setList(r);
            setError("");
            return r;
          })
          .catch((e) => {
            setError(errorText(e));
            return null;
          })
      : Promise.resolve(null);
  useEffect(() => {
    void load().then((r) => {
      setIntervalText(r?.schedule.intervalMinutes ? String(r.schedule.intervalMinutes) : "");
      setKeep(String(r?.schedule.keep ?? 2));
    });
  }, [scope]);
  const building = list?.builds.some((b) => b.status === "building") ?? false;
  useEffect(() => {
    if (!building) return;
    const t = setInterval(() => void load(), 2000);
    return () => clearInterval(t);
  }, [building, scope]);
  const buildNow = async () => {
    try {
      await post("/images/builds", { scope: imageScope(scope) });
      await load();
    } catch (err) {
      setError(errorText(err));
    }
  };
  const saveSchedule = async (e: Event) => {
    e.preventDefault();
    const minutes = interval.trim() ? Number(interval.trim()) : null;
    try {
      setList(
        await put<ImageList>("/images/schedule", {
          scope: imageScope(scope),
          schedule: { intervalMinutes: minutes, keep: Number(keep) || 2 },
        }),
      );
      setError("");
    } catch (err) {
      setError(errorText(err));
    }
  };
  if (repos.length === 0) return null;
  return (
    <section class="panel" aria-labelledby="images-h">
      <h2 id="images-h">Prebuilt images</h2>
      <p class="muted small">
        The workspace cloned and <code>.openinspect/setup.sh</code> run ahead of time: a new session starts from the newest
        image and only syncs newer commits.
      </p>
      <label>
        For{" "}
        <select value={scope} onChange={(e) => setScope(e.currentTarget.value)} aria-label="Image scope">
          {repos.map((r) => (
            <option value={`${r.owner}/${r.name}`}>{`${r.owner}/${r.name}`}</option>
          ))}
          {environments.map((env) => (
            <option value={`env:${env.id}`}>{`Environment: ${env.name}`}</option>
          ))}
        </select>
      </label>{" "}
      <button type="button" onClick={() => void buildNow()} disabled={building || !scope}>
        {building ? "Building…" : "Build now"}
      </button>
      <form onSubmit={saveSchedule} aria-label="Image schedule">
        <label>
          Rebuild every (minutes, empty: by hand only)
          <input value={interval} inputMode="numeric" placeholder="e.g. 360" onInput={(e) => setIntervalText(e.currentTarget.value)} aria-label="Rebuild interval in minutes" />
        </label>
        <label>
          Images kept
          <input value={keep} inputMode="numeric" onInput={(e) => setKeep(e.currentTarget.value)} aria-label="Images kept" />
        </label>
        <button type="submit">Save schedule</button>
      </form>
      <ul class="plain" data-testid="image-builds">
        {list?.builds.length === 0 && <li class="muted small">No images yet.</li>}
        {list?.builds.map((b) => (
          <BuildRow key={b.id} build={b} />
        ))}
      </ul>
      <ErrorNote text={error} />
    </section>
  );
}

/** Settings › Slack: which repository or environment a Slack request goes to. */
function Slack({ repos, environments }: { repos: Repository[]; environments: Environment[] }) {
  const [settings, setSettings] = useState<SlackSettings>({ routingRules: [], channelAssociations: [] });
  const [keyword, setKeyword] = useState("");
  const [channel, setChannel] = useState("");
  const [ruleTarget, setRuleTarget] = useState("");
  const [channelTarget, setChannelTarget] = useState("");
  const [note, setNote] = useState("");
  const [error, setError] = useState("");
  const targets = [
    ...repos.map((r) => ({ value: `${r.owner}/${r.name}`, label: `${r.owner}/${r.name}` })),
    ...environments.map((e) => ({ value: `env:${e.id}`, label: `Environment: ${e.name}` })),
  ];
  const label = (t: string) => targets.find((x) => x.value.toLowerCase() === t.toLowerCase())?.label ?? t;
  useEffect(() => {
    get<SlackSettings>("/integrations/slack/settings")
      .then(setSettings)
      .catch((e) => setError(errorText(e)));
  }, []);
  const save = async (next: SlackSettings) => {
    try {
      setSettings(await put<SlackSettings>("/integrations/slack/settings", next));
      setNote("Saved.");
      setError("");
    } catch (err) {
      setError(errorText(err));
    }
  };
  const pick = (value: string, set: (v: string) => void, name: string) => (
    <select value={value} onChange={(e) => set(e.currentTarget.value)} aria-label={name}>
      <option value="">Choose…</option>
      {targets.map((t) => (
        <option value={t.value}>{t.label}</option>
      ))}
    </select>
  );
  return (
    <section class="panel" aria-labelledby="slack-h">
      <h2 id="slack-h">Slack</h2>
      <p class="muted small">
        Where <code>@inspect</code> requests go: a keyword in the message (a whole word), then the channel&apos;s association,
        then the only repository; otherwise the model classifies and, when unsure, the person picks.
      </p>
      <h3 class="small">Routing rules</h3>
      <ul class="plain" data-testid="slack-rules">
        {settings.routingRules.map((r, i) => (
          <li key={`${r.keyword}-${i}`}>
            <code>{r.keyword}</code> → {label(r.target)}{" "}
            <button
              type="button"
              class="small"
              aria-label={`Remove the rule ${r.keyword}`}
              onClick={() => void save({ ...settings, routingRules: settings.routingRules.filter((_, j) => j !== i) })}
            >
              ✕
            </button>
          </li>
        ))}
      </ul>
      <form
        onSubmit={(e) => {
          e.preventDefault();
          if (!keyword.trim() || !ruleTarget) return;
          void save({ ...settings, routingRules: [...settings.routingRules, { keyword: keyword.trim(), target: ruleTarget }] });
          setKeyword("");
        }}
        aria-label="Routing rule"
      >
        <input value={keyword} placeholder="keyword" onInput={(e) => setKeyword(e.currentTarget.value)} aria-label="Keyword" />
        {pick(ruleTarget, setRuleTarget, "Rule target")} <button type="submit">Add rule</button>
      </form>
      <h3 class="small">Channels</h3>
      <ul class="plain" data-testid="slack-channels">
        {settings.channelAssociations.map((a, i) => (
          <li key={`${a.channel}-${i}`}>
            <code>{a.channel}</code> → {label(a.target)}{" "}
            <button
              type="button"
              class="small"
              aria-label={`Remove the channel ${a.channel}`}
              onClick={() =>
                void save({ ...settings, channelAssociations: settings.channelAssociations.filter((_, j) => j !== i) })
              }
            >
              ✕
            </button>
          </li>
        ))}
      </ul>
      <form
        onSubmit={(e) => {
          e.preventDefault();
          if (!channel.trim() || !channelTarget) return;
          void save({
            ...settings,
            channelAssociations: [...settings.channelAssociations, { channel: channel.trim(), target: channelTarget }],
          });
          setChannel("");
        }}
        aria-label="Channel association"
      >
        <input value={channel} placeholder="channel id (C…)" onInput={(e) => setChannel(e.currentTarget.value)} aria-label="Channel id" />
        {pick(channelTarget, setChannelTarget, "Channel target")} <button type="submit">Add channel</button>
      </form>
      {note && <span class="muted small">{note}</span>}
      <ErrorNote text={error} />
    </section>
  );
}

const NO_SETTINGS: RepoSettings = { alwaysDraft: false, botEnabled: false, autoReviewOnOpen: false, signCommits: false };

/** Per-repository settings: the bot, pull requests, the default model. */
function RepositorySettings({ repos }: { repos: Repository[] }) {
  const [repo, setRepo] = useState("");
  const [settings, setSettings] = useState<RepoSettings>(NO_SETTINGS);
  const [users, setUsers] = useState("");
  const [ports, setPorts] = useState("");
  const [note, setNote] = useState("");
  const [error, setError] = useState("");
  useEffect(() => {
    if (!repo && repos[0]) setRepo(`${repos[0].owner}/${repos[0].name}`);
  }, [repos]);
  useEffect(() => {
    if (!repo) return;
    // Only the repository chosen last: an earlier choice's answer arriving later (the first
    // repository's, asked while the list loaded) must not overwrite it.
    let chosen = true;
    get<RepoSettings>(`/repos/${repo}/settings`)
      .then((r) => {
        if (!chosen) return;
        setSettings(r);
        setUsers((r.allowedTriggerUsers ?? []).join(", "));
        setPorts((r.tunnelPorts ?? []).join(", "));
        setError("");
        setNote("");
      })
      .catch((e) => chosen && setError(errorText(e)));
    return () => {
      chosen = false;
    };
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
      tunnelPorts: ports
        .split(",")
        .map((p) => p.trim())
        .filter(Boolean)
        .map(Number),
    };
    if (!body.prLabel) delete body.prLabel;
    if (!body.defaultModel) delete body.defaultModel;
    if (!body.defaultAgent) delete body.defaultAgent;
    if (!body.defaultEnvironmentId) delete body.defaultEnvironmentId;
    if (!body.reviewInstructions?.trim()) delete body.reviewInstructions;
    try {
      setSettings(await put<RepoSettings>(`/repos/${repo}/settings`, body));
      setNote("Saved.");
      setError("");
    } catch (err) {
      setError(errorText(err));
    }
  };
  if (repos.length === 0) return null;
  const flag = (key: "botEnabled" | "autoReviewOnOpen" | "alwaysDraft" | "signCommits", text: string) => (
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
          {flag("signCommits", "Signed commits (GitHub makes the pull request's commits again, signed)")}
        </div>
        <label>
          Pull request label
          <input value={settings.prLabel ?? ""} onInput={(e) => setSettings({ ...settings, prLabel: e.currentTarget.value })} />
        </label>
        <span>
          Default
          <ModelPicker value={settings.defaultModel ?? ""} onChange={(v) => setSettings({ ...settings, defaultModel: v })} id="repo-model" />
        </span>
        <label>
          Agent{" "}
          <select
            aria-label="Default agent"
            value={settings.defaultAgent ?? ""}
            onChange={(e) => setSettings({ ...settings, defaultAgent: (e.currentTarget.value || null) as AgentKind | null })}
          >
            <option value="">OpenCode (the default)</option>
            <option value="opencode">OpenCode</option>
            <option value="claude-code">Claude Code</option>
          </select>
        </label>
        <fieldset class="stack">
          <legend>What the bot's review may be besides a comment</legend>
          {(["APPROVE", "REQUEST_CHANGES"] as const).map((v) => (
            <label class="check">
              <input
                type="checkbox"
                checked={(settings.reviewVerdicts ?? []).includes(v)}
                onChange={(e) => {
                  const rest = (settings.reviewVerdicts ?? []).filter((x) => x !== v);
                  setSettings({ ...settings, reviewVerdicts: e.currentTarget.checked ? [...rest, v] : rest });
                }}
              />{" "}
              {v === "APPROVE" ? "Approve" : "Request changes"}
            </label>
          ))}
        </fieldset>
        <label class="wide">
          Review instructions (Markdown; the base branch's <code>.openinspect/review.md</code> is read too)
          <textarea
            rows={4}
            maxLength={8000}
            value={settings.reviewInstructions ?? ""}
            onInput={(e) => setSettings({ ...settings, reviewInstructions: e.currentTarget.value })}
          />
        </label>
        <label class="wide">
          Ports a session exposes (comma-separated; each behind a login)
          <input value={ports} placeholder="3000, 5173" onInput={(e) => setPorts(e.currentTarget.value)} />
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

/** Settings › Models: which of the catalog's models sessions may use, and the default. An
 * opt-in provider's models are listed once its key is a global secret. */
function Models() {
  const [reload, setReload] = useState(0);
  const models = useModels(reload);
  const [enabled, setEnabled] = useState<string[]>([]);
  const [fallback, setFallback] = useState("");
  const [note, setNote] = useState("");
  const [error, setError] = useState("");
  useEffect(() => {
    if (!models) return;
    setEnabled(models.models.filter((m) => m.enabled).map((m) => m.id));
    setFallback(models.defaultModel ?? "");
  }, [models]);
  if (!models) return null;
  const save = async (e: Event) => {
    e.preventDefault();
    const body: ModelSettings = { enabled, defaultModel: fallback && enabled.includes(fallback) ? fallback : null };
    try {
      await put<ModelCatalog>("/settings/models", body);
      setReload((n) => n + 1);
      setNote("Saved.");
      setError("");
    } catch (err) {
      setError(errorText(err));
    }
  };
  return (
    <section class="panel" aria-labelledby="models-h">
      <h2 id="models-h">Models</h2>
      <form onSubmit={save}>
        {models.providers.map((p) => {
          const mine = models.models.filter((m) => m.provider === p.id);
          return (
            <fieldset class="stack" key={p.id}>
              <legend>
                {p.label}{" "}
                <span class="muted small">
                  {p.keySecret ? (p.configured ? `${p.keySecret} is set` : `set ${p.keySecret} as a global secret`) : "the deployment's server"}
                  {p.optIn && !p.configured ? " to list its models" : ""}
                </span>
              </legend>
              {mine.map((m) => (
                <label class="check" key={m.id}>
                  <input
                    type="checkbox"
                    aria-label={`Enable ${m.id}`}
                    checked={enabled.includes(m.id)}
                    onChange={(e) =>
                      setEnabled(e.currentTarget.checked ? [...enabled, m.id] : enabled.filter((x) => x !== m.id))
                    }
                  />{" "}
                  {m.label} <code class="small">{m.id}</code>{" "}
                  <span class="muted small">
                    {Math.round(m.context / 1000)}k{m.efforts.length ? ` · ${m.efforts.join(", ")}` : ""}
                  </span>
                </label>
              ))}
            </fieldset>
          );
        })}
        <label>
          Default model{" "}
          <select value={fallback} onChange={(e) => setFallback(e.currentTarget.value)} aria-label="Default model">
            <option value="">DEFAULT_MODEL (the deployment's setting)</option>
            {enabled.map((id) => (
              <option value={id}>{id}</option>
            ))}
          </select>
        </label>
        <button type="submit">Save models</button> {note && <span class="muted">{note}</span>}
      </form>
      <ErrorNote text={error} />
    </section>
  );
}

/** The sections of Settings, each at its own URL (`/settings/<id>`). */
const SECTIONS = [
  { id: "account", label: "Account" },
  { id: "notifications", label: "Notifications" },
  { id: "repositories", label: "Repositories" },
  { id: "environments", label: "Environments and secrets" },
  { id: "models", label: "Models, skills, MCP" },
  { id: "images", label: "Prebuilt images" },
  { id: "integrations", label: "Slack and Linear" },
] as const;

export function Settings({ me, section }: { me: Me; section?: string }) {
  const current = SECTIONS.find((s) => s.id === section)?.id ?? "account";
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
    <section class="settings">
      <h1>Settings</h1>
      <div class="settings-layout">
        <nav class="settings-nav" aria-label="Settings sections">
          {SECTIONS.map((s) => (
            <a href={`/settings/${s.id}`} aria-current={s.id === current ? "page" : undefined}>
              {s.label}
            </a>
          ))}
        </nav>
        <div class="settings-body" data-section={current}>
          {current === "account" && (
            <>
              {me.via !== "service" && <Account me={me} />}
              {me.role === "admin" && me.via !== "local" && <PeopleRoles />}
              <Tokens />
            </>
          )}
          {current === "notifications" && <NotificationSettings />}
          {current === "repositories" && (
            <>
              {me.via === "local" && <LocalRepos repos={repos.filter((r) => r.kind === "local")} reload={reload} />}
              <RepositorySettings repos={repos} />
            </>
          )}
          {current === "environments" && (
            <>
              <Environments repos={repos} environments={environments} reload={() => void reloadEnvironments()} />
              <Secrets repos={repos} environments={environments} />
            </>
          )}
          {current === "models" && (
            <>
              <Models />
              <Skills repos={repos} environments={environments} />
              <McpServers repos={repos} environments={environments} />
            </>
          )}
          {current === "images" && <Images repos={repos} environments={environments} />}
          {current === "integrations" && (
            <>
              <Slack repos={repos} environments={environments} />
              <Linear repos={repos} environments={environments} />
            </>
          )}
        </div>
      </div>
    </section>
  );
}
