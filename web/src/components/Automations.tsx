import { useEffect, useState } from "preact/hooks";
import { del, errorText, get, post, put } from "../api";
import type {
  Automation,
  AutomationCreated,
  AutomationRequest,
  Comparison,
  Filter,
  GithubEventKind,
  GithubTrigger,
  LinearIssueEvent,
  LinearTrigger,
  Repository,
  Run,
  RunStatus,
  SchedulePreview,
  SentryResource,
  SlackTrigger,
  TextMatch,
  TriggerType,
} from "../types";
import { ErrorNote, ago, duration } from "./bits";

// Automations: sessions that start themselves on a schedule, from an inbound webhook, a
// Sentry alert, a message in a watched Slack channel, a Linear issue created or moved, or a
// GitHub event (a failing check, a pull request or issue, a comment, a push). The list with
// status badges, a gallery of templates that fill the form, a form whose fields follow the
// trigger type (schedule presets with a live "next run" preview), and one automation's
// page: trigger now, pause/resume, edit, delete, and its run history with each
// repository's session.

const STATUS_LABEL: Record<string, string> = {
  enabled: "Enabled",
  degraded: "Degraded",
  paused: "Paused",
};

function Badge({ a }: { a: Automation }) {
  const label =
    a.status === "degraded" ? `Degraded · ${a.consecutiveFailures} failed` : STATUS_LABEL[a.status] ?? a.status;
  return (
    <span class={`badge badge-${a.status}`} data-testid="automation-status">
      {label}
    </span>
  );
}

function triggerLabel(a: Automation): string {
  const s = a.settings;
  if (s.triggerType === "schedule") return `Schedule (${s.schedule?.cron})`;
  if (s.triggerType === "sentry") return s.sentry?.resource === "issue" ? "Sentry: new issue" : "Sentry: alert rule";
  if (s.triggerType === "slack_channel") return `Slack: ${(s.slack?.channels ?? []).join(", ")}`;
  if (s.triggerType === "linear_issue") {
    const t = s.linear;
    const what = t?.event === "moved_to_state" ? `moved to ${t.state}` : "created";
    return `Linear: an issue ${what}${t?.team ? ` in ${t.team}` : ""}${t?.label ? ` labelled ${t.label}` : ""}`;
  }
  if (s.triggerType === "github_event") {
    const t = s.github;
    const actions = t?.actions.length ? ` (${t.actions.join(", ")})` : "";
    return `GitHub: ${GITHUB_EVENTS[t?.event ?? "push"]}${actions}`;
  }
  return "Inbound webhook";
}

function when(ms?: number | null): string {
  return ms ? new Date(ms).toLocaleString() : "—";
}

type Preset = "hourly" | "daily" | "weekly" | "monthly" | "custom";
const DAYS = ["Sunday", "Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday"];

function cronOf(preset: Preset, hour: number, day: number, custom: string): string {
  switch (preset) {
    case "hourly":
      return "0 * * * *";
    case "daily":
      return `0 ${hour} * * *`;
    case "weekly":
      return `0 ${hour} * * ${day}`;
    case "monthly":
      return `0 ${hour} ${Math.min(Math.max(day, 1), 28)} * *`;
    default:
      return custom.trim();
  }
}

/** Reads a cron back into the presets when it is one of theirs. */
function presetOf(cron: string): { preset: Preset; hour: number; day: number } {
  const f = cron.trim().split(/\s+/);
  const hour = Number(f[1]);
  if (cron.trim() === "0 * * * *") return { preset: "hourly", hour: 9, day: 1 };
  if (f.length === 5 && f[0] === "0" && Number.isInteger(hour)) {
    if (f[2] === "*" && f[3] === "*" && f[4] === "*") return { preset: "daily", hour, day: 1 };
    if (f[2] === "*" && f[3] === "*" && /^[0-6]$/.test(f[4])) return { preset: "weekly", hour, day: Number(f[4]) };
    if (/^\d+$/.test(f[2]) && f[3] === "*" && f[4] === "*") return { preset: "monthly", hour, day: Number(f[2]) };
  }
  return { preset: "custom", hour: 9, day: 1 };
}

function SchedulePicker({
  cron,
  timezone,
  onChange,
}: {
  cron: string;
  timezone: string;
  onChange: (cron: string, timezone: string) => void;
}) {
  const initial = presetOf(cron);
  const [preset, setPreset] = useState<Preset>(initial.preset);
  const [hour, setHour] = useState(initial.hour);
  const [day, setDay] = useState(initial.day);
  const [custom, setCustom] = useState(cron);
  const [preview, setPreview] = useState<number[]>([]);
  const [problem, setProblem] = useState("");
  const current = cronOf(preset, hour, day, custom);
  useEffect(() => {
    onChange(current, timezone);
    // The preview of what is typed last: an earlier answer arriving later is dropped.
    let last = true;
    const t = setTimeout(() => {
      const q = new URLSearchParams({ cron: current, timezone });
      get<SchedulePreview>(`/automations/schedule-preview?${q}`)
        .then((p) => {
          if (!last) return;
          setPreview(p.nextRuns);
          setProblem("");
        })
        .catch((e) => {
          if (!last) return;
          setPreview([]);
          setProblem(errorText(e));
        });
    }, 250);
    return () => {
      last = false;
      clearTimeout(t);
    };
  }, [current, timezone]);
  return (
    <fieldset class="schedule">
      <legend>Schedule</legend>
      <label>
        Repeat{" "}
        <select aria-label="Schedule preset" value={preset} onChange={(e) => setPreset(e.currentTarget.value as Preset)}>
          <option value="hourly">Every hour</option>
          <option value="daily">Daily</option>
          <option value="weekly">Weekly</option>
          <option value="monthly">Monthly</option>
          <option value="custom">Custom (cron)</option>
        </select>
      </label>
      {(preset === "daily" || preset === "weekly" || preset === "monthly") && (
        <label>
          {" at "}
          <select aria-label="Hour" value={hour} onChange={(e) => setHour(Number(e.currentTarget.value))}>
            {Array.from({ length: 24 }, (_, h) => (
              <option value={h}>{`${String(h).padStart(2, "0")}:00`}</option>
            ))}
          </select>
        </label>
      )}
      {preset === "weekly" && (
        <label>
          {" on "}
          <select aria-label="Day of the week" value={day} onChange={(e) => setDay(Number(e.currentTarget.value))}>
            {DAYS.map((d, i) => (
              <option value={i}>{d}</option>
            ))}
          </select>
        </label>
      )}
      {preset === "monthly" && (
        <label>
          {" on day "}
          <select aria-label="Day of the month" value={day} onChange={(e) => setDay(Number(e.currentTarget.value))}>
            {Array.from({ length: 28 }, (_, d) => (
              <option value={d + 1}>{d + 1}</option>
            ))}
          </select>
        </label>
      )}
      {preset === "custom" && (
        <input
          aria-label="Cron expression"
          placeholder="minute hour day-of-month month day-of-week"
          value={custom}
          onInput={(e) => setCustom(e.currentTarget.value)}
        />
      )}
      <label>
        {" Time zone "}
        <input aria-label="Time zone" value={timezone} onInput={(e) => onChange(current, e.currentTarget.value)} />
      </label>
      <p class="small" data-testid="next-run">
        {problem ? <span class="error">{problem}</span> : preview.length ? `Next run: ${when(preview[0])}` : "…"}
      </p>
    </fieldset>
  );
}

const OPS: Comparison[] = ["eq", "neq", "gt", "gte", "lt", "lte", "contains", "exists"];

function Conditions({ filters, onChange }: { filters: Filter[]; onChange: (f: Filter[]) => void }) {
  const set = (i: number, f: Filter) => onChange(filters.map((x, j) => (j === i ? f : x)));
  const valueText = (v: unknown) => (v === undefined || v === null ? "" : typeof v === "string" ? v : JSON.stringify(v));
  const parseValue = (t: string): unknown => {
    try {
      return JSON.parse(t);
    } catch {
      return t;
    }
  };
  return (
    <fieldset>
      <legend>Conditions (all must match the payload)</legend>
      {filters.map((f, i) => (
        <div class="row" key={i}>
          <input aria-label={`Condition ${i + 1} path`} placeholder="$.deploy.env" value={f.path} onInput={(e) => set(i, { ...f, path: e.currentTarget.value })} />
          <select aria-label={`Condition ${i + 1} comparison`} value={f.op} onChange={(e) => set(i, { ...f, op: e.currentTarget.value as Comparison })}>
            {OPS.map((o) => (
              <option value={o}>{o}</option>
            ))}
          </select>
          {f.op !== "exists" && (
            <input
              aria-label={`Condition ${i + 1} value`}
              placeholder="production"
              value={valueText(f.value)}
              onInput={(e) => set(i, { ...f, value: parseValue(e.currentTarget.value) })}
            />
          )}
          <button type="button" class="small" onClick={() => onChange(filters.filter((_, j) => j !== i))}>
            Remove
          </button>
        </div>
      ))}
      <button type="button" class="small" onClick={() => onChange([...filters, { path: "$.", op: "eq", value: "" }])}>
        Add condition
      </button>
    </fieldset>
  );
}

// Slack ids typed as a list: commas or spaces between them.
const ids = (text: string): string[] =>
  text
    .split(/[\s,]+/)
    .map((s) => s.trim())
    .filter(Boolean);

const BLANK_SLACK: SlackTrigger = { channels: [], textMatch: "contains", pattern: "", usersAllowed: [], usersDenied: [] };

function SlackFields({ slack, onChange }: { slack: SlackTrigger; onChange: (s: SlackTrigger) => void }) {
  // The lists are edited as text and read into ids as typed.
  const [channels, setChannels] = useState(slack.channels.join(", "));
  const [allowed, setAllowed] = useState(slack.usersAllowed.join(", "));
  const [denied, setDenied] = useState(slack.usersDenied.join(", "));
  return (
    <fieldset>
      <legend>Watched Slack channels</legend>
      <input
        aria-label="Slack channels"
        placeholder="channel ids: C0123ABCD, C0456EFGH"
        value={channels}
        onInput={(e) => {
          setChannels(e.currentTarget.value);
          onChange({ ...slack, channels: ids(e.currentTarget.value) });
        }}
        required
      />
      <div class="row">
        <select
          aria-label="Text match"
          value={slack.textMatch}
          onChange={(e) => onChange({ ...slack, textMatch: e.currentTarget.value as TextMatch })}
        >
          <option value="contains">Text contains</option>
          <option value="exact">Text is exactly</option>
          <option value="regex">Text matches the regex</option>
        </select>
        <input
          aria-label="Text pattern"
          placeholder={slack.textMatch === "contains" ? "(empty: every message)" : slack.textMatch === "regex" ? "(?i)\\bcrash" : "help"}
          maxLength={500}
          value={slack.pattern}
          onInput={(e) => onChange({ ...slack, pattern: e.currentTarget.value })}
        />
      </div>
      <input
        aria-label="Slack users allowed"
        placeholder="only these people (user ids; empty: everyone)"
        value={allowed}
        onInput={(e) => {
          setAllowed(e.currentTarget.value);
          onChange({ ...slack, usersAllowed: ids(e.currentTarget.value) });
        }}
      />
      <input
        aria-label="Slack users denied"
        placeholder="never these people (user ids)"
        value={denied}
        onInput={(e) => {
          setDenied(e.currentTarget.value);
          onChange({ ...slack, usersDenied: ids(e.currentTarget.value) });
        }}
      />
      <p class="muted small">
        A top-level message that matches starts a run; the answer goes to its thread (none when the agent answers
        NO_REPLY), and replies there continue the session for 7 days. A message that mentions the bot stays with the
        bot. The deployment must set SLACK_TRIGGERS_ENABLED=true.
      </p>
    </fieldset>
  );
}

const BLANK_LINEAR: LinearTrigger = { event: "created" };

/** A Linear trigger: the event, and optionally the team, the label and (for a move) the state. */
function LinearFields({ linear, onChange }: { linear: LinearTrigger; onChange: (t: LinearTrigger) => void }) {
  return (
    <fieldset>
      <legend>Linear issue (the Linear app must be installed: Settings › Linear)</legend>
      <select
        aria-label="Linear event"
        value={linear.event}
        onChange={(e) => onChange({ ...linear, event: e.currentTarget.value as LinearIssueEvent })}
      >
        <option value="created">An issue is created</option>
        <option value="moved_to_state">An issue moves into a state</option>
      </select>
      <input aria-label="Linear team" placeholder="team key (any team)" value={linear.team ?? ""} onInput={(e) => onChange({ ...linear, team: e.currentTarget.value })} />
      <input aria-label="Linear label" placeholder="label (any)" value={linear.label ?? ""} onInput={(e) => onChange({ ...linear, label: e.currentTarget.value })} />
      {linear.event === "moved_to_state" && (
        <input aria-label="Linear state" placeholder="state name (In Progress)" value={linear.state ?? ""} onInput={(e) => onChange({ ...linear, state: e.currentTarget.value })} required />
      )}
      <p class="muted small">Conditions can look at $.identifier, $.title, $.team, $.labels and $.state.</p>
    </fieldset>
  );
}

const GITHUB_EVENTS: Record<GithubEventKind, string> = {
  check_suite: "a check suite completes",
  check_run: "a check run completes",
  pull_request: "a pull request event",
  issues: "an issue event",
  issue_comment: "a new comment",
  push: "a push to a branch",
};

const GITHUB_ACTIONS: Record<GithubEventKind, string[]> = {
  check_suite: [],
  check_run: [],
  pull_request: ["opened", "labeled", "ready_for_review", "synchronize"],
  issues: ["opened", "labeled"],
  issue_comment: [],
  push: [],
};

const BLANK_GITHUB: GithubTrigger = {
  event: "check_suite",
  actions: [],
  branches: [],
  labels: [],
  paths: [],
  actorsAllowed: [],
  actorsDenied: [],
  conclusions: [],
  textMatch: "contains",
  pattern: "",
};

// A list typed as text: commas or spaces between entries.
function ListInput({ label, placeholder, value, onChange }: { label: string; placeholder: string; value: string[]; onChange: (v: string[]) => void }) {
  const [text, setText] = useState(value.join(", "));
  return (
    <input
      aria-label={label}
      placeholder={placeholder}
      value={text}
      onInput={(e) => {
        setText(e.currentTarget.value);
        onChange(ids(e.currentTarget.value));
      }}
    />
  );
}

/** A GitHub trigger: the event, its actions, and the conditions its kind can have. */
function GithubFields({ github, onChange }: { github: GithubTrigger; onChange: (t: GithubTrigger) => void }) {
  const e = github.event;
  const checks = e === "check_suite" || e === "check_run";
  const onBranch = checks || e === "pull_request" || e === "push";
  return (
    <fieldset>
      <legend>GitHub event (the GitHub App must be installed on the repository)</legend>
      <select
        aria-label="GitHub event"
        value={e}
        onChange={(ev) => onChange({ ...BLANK_GITHUB, event: ev.currentTarget.value as GithubEventKind })}
      >
        {(Object.keys(GITHUB_EVENTS) as GithubEventKind[]).map((k) => (
          <option value={k} key={k}>
            {GITHUB_EVENTS[k]}
          </option>
        ))}
      </select>
      {GITHUB_ACTIONS[e].length > 0 && (
        <div class="row">
          {GITHUB_ACTIONS[e].map((a) => (
            <label class="check" key={a}>
              <input
                type="checkbox"
                aria-label={`Action ${a}`}
                checked={github.actions.includes(a)}
                onChange={() =>
                  onChange({
                    ...github,
                    actions: github.actions.includes(a) ? github.actions.filter((x) => x !== a) : [...github.actions, a],
                  })
                }
              />
              {` ${a}`}
            </label>
          ))}
        </div>
      )}
      {checks && (
        <ListInput label="Conclusions" placeholder="conclusions (empty: failure, timed_out, startup_failure)" value={github.conclusions} onChange={(conclusions) => onChange({ ...github, conclusions })} />
      )}
      {onBranch && (
        <ListInput
          label="Branches"
          placeholder={e === "pull_request" ? "base branches (globs: main, release/*)" : "branches (globs: main, release/*)"}
          value={github.branches}
          onChange={(branches) => onChange({ ...github, branches })}
        />
      )}
      {e !== "push" && <ListInput label="Labels" placeholder="labels (any one of them; empty: any)" value={github.labels} onChange={(labels) => onChange({ ...github, labels })} />}
      {onBranch && <ListInput label="Paths" placeholder="changed paths (globs: src/**, *.md)" value={github.paths} onChange={(paths) => onChange({ ...github, paths })} />}
      <ListInput label="Actors allowed" placeholder="only these GitHub logins (empty: everyone)" value={github.actorsAllowed} onChange={(actorsAllowed) => onChange({ ...github, actorsAllowed })} />
      <ListInput label="Actors denied" placeholder="never these GitHub logins" value={github.actorsDenied} onChange={(actorsDenied) => onChange({ ...github, actorsDenied })} />
      {e === "issue_comment" && (
        <div class="row">
          <select aria-label="Comment match" value={github.textMatch} onChange={(ev) => onChange({ ...github, textMatch: ev.currentTarget.value as TextMatch })}>
            <option value="contains">Comment contains</option>
            <option value="exact">Comment is exactly</option>
            <option value="regex">Comment matches the regex</option>
          </select>
          <input aria-label="Comment pattern" placeholder="/fix" maxLength={500} value={github.pattern} onInput={(ev) => onChange({ ...github, pattern: ev.currentTarget.value })} />
        </div>
      )}
      <p class="muted small">
        One run per delivery; on a pull request the session works on its branch and the answer is posted as a comment.
        Events the App itself causes, and those on the sessions' own branches, never start a run.
      </p>
    </fieldset>
  );
}

/** Ready-made automations: each fills the form, to be reviewed before saving. */
const TEMPLATES: { id: string; title: string; blurb: string; form: Omit<AutomationRequest, "repositories"> }[] = [
  {
    id: "fix-ci",
    title: "Fix failing CI on a pull request",
    blurb: "A check suite fails on a pull request: the agent finds why and pushes a fix to its branch.",
    form: {
      name: "Fix failing CI",
      triggerType: "github_event",
      instructions:
        "A check failed on this pull request. Find the failing job and its cause, fix the code (not the test, unless the test is wrong), run the tests, and push the fix to the pull request's branch. Then say in a few lines what failed and what you changed.",
      conditions: [],
      github: { ...BLANK_GITHUB, event: "check_suite" },
    },
  },
  {
    id: "triage-issue",
    title: "Triage a new issue",
    blurb: "An issue is opened: the agent reads the code it touches, suggests labels and answers with a first analysis.",
    form: {
      name: "Triage new issues",
      triggerType: "github_event",
      instructions:
        "A new issue was opened. Read it and the code it is about. Answer with: a one-line summary, the likely cause with file paths, the labels it should have (bug, feature, docs, question), and how hard it looks. Do not change code.",
      conditions: [],
      github: { ...BLANK_GITHUB, event: "issues", actions: ["opened"] },
    },
  },
  {
    id: "deps",
    title: "Nightly dependency update",
    blurb: "Every night: update the dependencies, run the tests, open a pull request.",
    form: {
      name: "Nightly dependency update",
      triggerType: "schedule",
      instructions:
        "Update the project's dependencies to their latest compatible versions, run the build and the tests, fix what breaks, and open a pull request that lists what changed. If nothing is out of date, say so and open nothing.",
      conditions: [],
      schedule: { cron: "0 3 * * *", timezone: localZone() },
    },
  },
  {
    id: "sentry",
    title: "Fix a Sentry error",
    blurb: "Sentry reports a new issue: the agent finds the cause from the stack and opens a pull request with a fix.",
    form: {
      name: "Fix new Sentry errors",
      triggerType: "sentry",
      instructions:
        "Sentry reported a new error. Find where it comes from using the stack frames, write a test that reproduces it, fix it, and open a pull request that links the Sentry issue.",
      conditions: [],
      sentry: { resource: "issue" },
    },
  },
  {
    id: "weekly",
    title: "Weekly summary",
    blurb: "Every Monday morning: a summary of last week's merged pull requests and open issues.",
    form: {
      name: "Weekly summary",
      triggerType: "schedule",
      instructions:
        "Write a short summary of the past week in this repository: what was merged (from git log), what is in progress, and anything that looks risky. Keep it under 20 lines.",
      conditions: [],
      schedule: { cron: "0 9 * * 1", timezone: localZone() },
    },
  },
];

function localZone(): string {
  return Intl.DateTimeFormat().resolvedOptions().timeZone || "UTC";
}

function Templates({ onPick }: { onPick: (form: AutomationRequest) => void }) {
  return (
    <div class="templates" data-testid="automation-templates">
      {TEMPLATES.map((t) => (
        <button type="button" class="template panel" key={t.id} aria-label={`Template: ${t.title}`} onClick={() => onPick({ ...t.form, repositories: [] })}>
          <strong>{t.title}</strong>
          <span class="muted small">{t.blurb}</span>
        </button>
      ))}
    </div>
  );
}

const BLANK: AutomationRequest = {
  name: "",
  triggerType: "schedule",
  repositories: [],
  instructions: "",
  conditions: [],
  schedule: { cron: "0 9 * * *", timezone: Intl.DateTimeFormat().resolvedOptions().timeZone || "UTC" },
};

function AutomationForm({
  initial,
  template,
  onSaved,
  onCancel,
}: {
  initial?: Automation;
  template?: AutomationRequest;
  onSaved: (made: AutomationCreated | Automation) => void;
  onCancel: () => void;
}) {
  const [form, setForm] = useState<AutomationRequest>(initial?.settings ?? template ?? BLANK);
  const [repos, setRepos] = useState<Repository[]>([]);
  const [error, setError] = useState("");
  useEffect(() => {
    get<{ repositories: Repository[] }>("/repos")
      .then((r) => setRepos(r.repositories))
      .catch((e) => setError(errorText(e)));
  }, []);
  const most = form.triggerType === "schedule" ? 10 : 1;
  const chosen = new Set(form.repositories.map((r) => `${r.owner}/${r.name}`));
  const toggle = (key: string) => {
    const [owner, name] = key.split("/");
    const next = chosen.has(key)
      ? form.repositories.filter((r) => `${r.owner}/${r.name}` !== key)
      : [...form.repositories, { owner, name }];
    setForm({ ...form, repositories: next.slice(-most) });
  };
  const save = async (e: Event) => {
    e.preventDefault();
    const body: AutomationRequest = {
      ...form,
      branch: form.repositories.length === 1 ? form.branch || undefined : undefined,
      model: form.model || undefined,
      reasoningEffort: form.reasoningEffort || undefined,
      schedule: form.triggerType === "schedule" ? form.schedule : undefined,
      sentry: form.triggerType === "sentry" && form.sentry ? { resource: form.sentry.resource, clientSecret: form.sentry.clientSecret || undefined } : undefined,
      slack: form.triggerType === "slack_channel" ? form.slack ?? BLANK_SLACK : undefined,
      linear:
        form.triggerType === "linear_issue" && form.linear
          ? {
              event: form.linear.event,
              team: form.linear.team || undefined,
              label: form.linear.label || undefined,
              state: form.linear.event === "moved_to_state" ? form.linear.state || undefined : undefined,
            }
          : undefined,
      github: form.triggerType === "github_event" ? form.github ?? BLANK_GITHUB : undefined,
      conditions: ["schedule", "slack_channel", "github_event"].includes(form.triggerType) ? [] : form.conditions,
    };
    try {
      onSaved(
        initial
          ? await put<Automation>(`/automations/${initial.id}`, body)
          : await post<AutomationCreated>("/automations", body),
      );
    } catch (err) {
      setError(errorText(err));
    }
  };
  return (
    <form class="panel stack" onSubmit={save} aria-label={initial ? "Edit automation" : "New automation"}>
      <label>
        Trigger{" "}
        <select
          aria-label="Trigger type"
          value={form.triggerType}
          disabled={!!initial}
          onChange={(e) => {
            const t = e.currentTarget.value as TriggerType;
            setForm({
              ...form,
              triggerType: t,
              repositories: t === "schedule" ? form.repositories : form.repositories.slice(0, 1),
              schedule: t === "schedule" ? form.schedule ?? BLANK.schedule : undefined,
              sentry: t === "sentry" ? form.sentry ?? { resource: "event_alert" } : undefined,
              slack: t === "slack_channel" ? form.slack ?? BLANK_SLACK : undefined,
              linear: t === "linear_issue" ? form.linear ?? BLANK_LINEAR : undefined,
              github: t === "github_event" ? form.github ?? BLANK_GITHUB : undefined,
            });
          }}
        >
          <option value="schedule">Schedule</option>
          <option value="webhook">Inbound webhook</option>
          <option value="sentry">Sentry alert</option>
          <option value="slack_channel">Slack channel message</option>
          <option value="linear_issue">Linear issue</option>
          <option value="github_event">GitHub event</option>
        </select>
      </label>
      <input aria-label="Automation name" placeholder="Nightly dependency update" maxLength={200} value={form.name} onInput={(e) => setForm({ ...form, name: e.currentTarget.value })} required />
      <fieldset>
        <legend>
          {form.triggerType === "schedule"
            ? "Repositories (up to 10: one session each)"
            : form.triggerType === "github_event"
              ? "Repository (the one whose events it watches)"
              : "Repository (none or one)"}
        </legend>
        {repos.map((r) => {
          const key = `${r.owner}/${r.name}`;
          return (
            <label class="check" key={key}>
              <input type="checkbox" checked={chosen.has(key)} onChange={() => toggle(key)} aria-label={`Run on ${key}`} />
              {` ${key}`}
            </label>
          );
        })}
        {repos.length === 0 && <p class="muted small">No repositories yet: the agent starts without one.</p>}
      </fieldset>
      {form.repositories.length === 1 && (
        <input aria-label="Branch" placeholder="branch (the repository's default)" value={form.branch ?? ""} onInput={(e) => setForm({ ...form, branch: e.currentTarget.value })} />
      )}
      <div class="row">
        <input aria-label="Model" placeholder="model (the default)" value={form.model ?? ""} onInput={(e) => setForm({ ...form, model: e.currentTarget.value })} />
        <select aria-label="Reasoning" value={form.reasoningEffort ?? ""} onChange={(e) => setForm({ ...form, reasoningEffort: e.currentTarget.value })}>
          <option value="">Reasoning: default</option>
          <option value="low">low</option>
          <option value="medium">medium</option>
          <option value="high">high</option>
        </select>
      </div>
      {form.triggerType === "schedule" && form.schedule && (
        <SchedulePicker
          cron={form.schedule.cron}
          timezone={form.schedule.timezone}
          onChange={(cron, timezone) => setForm((f) => ({ ...f, schedule: { cron, timezone } }))}
        />
      )}
      {form.triggerType === "sentry" && form.sentry && (
        <fieldset>
          <legend>Sentry internal integration</legend>
          <select
            aria-label="Sentry event"
            value={form.sentry.resource}
            onChange={(e) => setForm({ ...form, sentry: { ...form.sentry!, resource: e.currentTarget.value as SentryResource } })}
          >
            <option value="event_alert">An alert rule fires (event_alert)</option>
            <option value="issue">A new issue (issue created)</option>
          </select>
          <input
            aria-label="Sentry client secret"
            type="password"
            autocomplete="off"
            placeholder={initial ? "client secret (empty: keep the saved one)" : "client secret"}
            value={form.sentry.clientSecret ?? ""}
            onInput={(e) => setForm({ ...form, sentry: { ...form.sentry!, clientSecret: e.currentTarget.value } })}
            required={!initial}
          />
          <p class="muted small">Conditions can look at $.project, $.level, $.environment, $.title and $.culprit.</p>
        </fieldset>
      )}
      {form.triggerType === "slack_channel" && form.slack && (
        <SlackFields slack={form.slack} onChange={(slack) => setForm((f) => ({ ...f, slack }))} />
      )}
      {form.triggerType === "linear_issue" && form.linear && (
        <LinearFields linear={form.linear} onChange={(linear) => setForm((f) => ({ ...f, linear }))} />
      )}
      {form.triggerType === "github_event" && form.github && (
        <GithubFields github={form.github} onChange={(github) => setForm((f) => ({ ...f, github }))} />
      )}
      {form.triggerType !== "schedule" && form.triggerType !== "slack_channel" && form.triggerType !== "github_event" && (
        <Conditions filters={form.conditions} onChange={(conditions) => setForm({ ...form, conditions })} />
      )}
      <textarea
        aria-label="Instructions"
        placeholder="What the agent does each time it runs"
        rows={6}
        maxLength={15000}
        value={form.instructions}
        onInput={(e) => setForm({ ...form, instructions: e.currentTarget.value })}
        required
      />
      <div class="row">
        <button type="submit">{initial ? "Save automation" : "Create automation"}</button>
        <button type="button" class="link" onClick={onCancel}>
          Cancel
        </button>
      </div>
      <ErrorNote text={error} />
    </form>
  );
}

export function AutomationsList() {
  const [list, setList] = useState<Automation[] | null>(null);
  const [creating, setCreating] = useState(false);
  const [template, setTemplate] = useState<AutomationRequest | undefined>(undefined);
  // A new form each time a template is picked.
  const [formKey, setFormKey] = useState(0);
  const [error, setError] = useState("");
  const load = () =>
    get<{ automations: Automation[] }>("/automations")
      .then((r) => setList(r.automations))
      .catch((e) => setError(errorText(e)));
  useEffect(() => {
    void load();
  }, []);
  const created = (made: AutomationCreated | Automation) => {
    const a = "automation" in made ? made : null;
    const id = a ? a.automation.id : (made as Automation).id;
    // A webhook's key is shown once, on its page.
    if (a?.webhookKey) sessionStorage.setItem(`key:${id}`, a.webhookKey);
    location.href = `/automations/${id}`;
  };
  return (
    <section class="page" aria-labelledby="automations-h">
      <div class="row spread">
        <h1 id="automations-h">Automations</h1>
        {!creating && (
          <button type="button" onClick={() => setCreating(true)}>
            New automation
          </button>
        )}
      </div>
      {!creating && (list?.length ?? 0) < 50 && (
        <details class="panel" open={list?.length === 0}>
          <summary>Start from a template</summary>
          <Templates
            onPick={(form) => {
              setTemplate(form);
              setFormKey((k) => k + 1);
              setCreating(true);
            }}
          />
        </details>
      )}
      {creating && (
        <AutomationForm
          key={formKey}
          template={template}
          onSaved={created}
          onCancel={() => {
            setCreating(false);
            setTemplate(undefined);
          }}
        />
      )}
      <table class="list" data-testid="automations">
        <thead>
          <tr>
            <th>Name</th>
            <th>Trigger</th>
            <th>Status</th>
            <th>Next run</th>
          </tr>
        </thead>
        <tbody>
          {(list ?? []).map((a) => (
            <tr key={a.id}>
              <td>
                <a href={`/automations/${a.id}`}>{a.settings.name}</a>
              </td>
              <td>{triggerLabel(a)}</td>
              <td>
                <Badge a={a} />
              </td>
              <td>{when(a.nextRunAt)}</td>
            </tr>
          ))}
          {list?.length === 0 && (
            <tr>
              <td colSpan={4} class="muted">
                No automations yet.
              </td>
            </tr>
          )}
        </tbody>
      </table>
      <ErrorNote text={error} />
    </section>
  );
}

const RUN_LABEL: Record<RunStatus, string> = {
  starting: "Starting",
  running: "Running",
  completed: "Completed",
  failed: "Failed",
  partial_failure: "Partial failure",
  skipped: "Skipped",
};

function RunRow({ run }: { run: Run }) {
  const many = run.sessions.length > 1;
  const counts = run.sessions.reduce<Record<string, number>>((c, s) => ({ ...c, [s.status]: (c[s.status] ?? 0) + 1 }), {});
  const summary = Object.entries(counts)
    .map(([k, n]) => `${n} ${RUN_LABEL[k as RunStatus].toLowerCase()}`)
    .join(", ");
  const sessions = (
    <ul class="plain">
      {run.sessions.map((s) => (
        <li key={s.repository}>
          {s.repository || "no repository"}: {RUN_LABEL[s.status]}
          {s.error && <span class="error small"> — {s.error}</span>}{" "}
          {s.sessionId && <a href={`/sessions/${s.sessionId}`}>View session</a>}
        </li>
      ))}
    </ul>
  );
  return (
    <li class="run" data-testid="run" data-status={run.status}>
      <span class={`badge run-${run.status}`}>{RUN_LABEL[run.status]}</span> {run.trigger} · {ago(run.createdAt)}
      {run.finishedAt && ` · took ${duration(run.finishedAt - run.createdAt)}`}
      {run.reason && <span class="muted small"> — {run.reason}</span>}
      {many ? (
        <details>
          <summary>{`${run.sessions.length} repositories — ${summary}`}</summary>
          {sessions}
        </details>
      ) : (
        sessions
      )}
    </li>
  );
}

export function AutomationPage({ id }: { id: string }) {
  const [a, setA] = useState<Automation | null>(null);
  const [runs, setRuns] = useState<Run[]>([]);
  const [editing, setEditing] = useState(false);
  const [key, setKey] = useState<string | null>(sessionStorage.getItem(`key:${id}`));
  const [error, setError] = useState("");
  const load = () =>
    Promise.all([get<Automation>(`/automations/${id}`), get<{ runs: Run[] }>(`/automations/${id}/runs`)])
      .then(([auto, r]) => {
        setA(auto);
        setRuns(r.runs);
      })
      .catch((e) => setError(errorText(e)));
  useEffect(() => {
    sessionStorage.removeItem(`key:${id}`);
    void load();
    // Runs move on while the page is open.
    const t = setInterval(() => void load(), 3000);
    return () => clearInterval(t);
  }, [id]);
  const act = async (path: string) => {
    try {
      await post(`/automations/${id}/${path}`);
      setError("");
      await load();
    } catch (e) {
      setError(errorText(e));
    }
  };
  const rotate = async () => {
    try {
      const made = await post<AutomationCreated>(`/automations/${id}/rotate-key`);
      setKey(made.webhookKey ?? null);
    } catch (e) {
      setError(errorText(e));
    }
  };
  const remove = async () => {
    if (!confirm("Delete this automation? Its run history and sessions are kept.")) return;
    try {
      await del(`/automations/${id}`);
      location.href = "/automations";
    } catch (e) {
      setError(errorText(e));
    }
  };
  if (!a) return <p class="center muted">{error || "Loading…"}</p>;
  if (editing)
    return (
      <section class="page">
        <AutomationForm
          initial={a}
          onSaved={(saved) => {
            setA(saved as Automation);
            setEditing(false);
          }}
          onCancel={() => setEditing(false)}
        />
      </section>
    );
  const s = a.settings;
  return (
    <section class="page" aria-labelledby="automation-h">
      <p>
        <a href="/automations">← Automations</a>
      </p>
      <div class="row spread">
        <h1 id="automation-h">{s.name}</h1>
        <Badge a={a} />
      </div>
      {a.pausedReason && <p class="notice">{`Paused: ${a.pausedReason}`}</p>}
      <dl class="facts">
        <dt>Trigger</dt>
        <dd>{s.triggerType === "schedule" ? `${s.schedule?.cron} (${s.schedule?.timezone})` : triggerLabel(a)}</dd>
        <dt>Repositories</dt>
        <dd>{s.repositories.length ? s.repositories.map((r) => `${r.owner}/${r.name}`).join(", ") : "none"}</dd>
        {s.triggerType === "schedule" && (
          <>
            <dt>Next run</dt>
            <dd data-testid="automation-next-run">{when(a.nextRunAt)}</dd>
          </>
        )}
        {a.webhookPath && (
          <>
            <dt>Webhook</dt>
            <dd>
              <code>{`POST ${location.origin}${a.webhookPath}`}</code>
            </dd>
          </>
        )}
      </dl>
      {key && (
        <div class="notice" role="status">
          Copy this key now; it is not shown again: <code data-testid="webhook-key">{key}</code>
        </div>
      )}
      <div class="row">
        <button type="button" onClick={() => act("trigger")}>
          Trigger now
        </button>
        {a.status === "paused" ? (
          <button type="button" onClick={() => act("resume")}>
            Resume
          </button>
        ) : (
          <button type="button" onClick={() => act("pause")}>
            Pause
          </button>
        )}
        <button type="button" onClick={() => setEditing(true)}>
          Edit
        </button>
        {s.triggerType === "webhook" && (
          <button type="button" onClick={rotate}>
            New key
          </button>
        )}
        <button type="button" class="danger" onClick={remove}>
          Delete
        </button>
      </div>
      <ErrorNote text={error} />
      <details>
        <summary>Instructions</summary>
        <pre class="wrap">{s.instructions}</pre>
      </details>
      <h2>Runs</h2>
      <ul class="plain runs" data-testid="runs">
        {runs.map((r) => (
          <RunRow key={r.id} run={r} />
        ))}
        {runs.length === 0 && <li class="muted">No runs yet.</li>}
      </ul>
    </section>
  );
}
