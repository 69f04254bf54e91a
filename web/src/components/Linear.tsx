import { useEffect, useState } from "preact/hooks";
import { errorText, get, post, put } from "../api";
import type { Environment, LinearInstallStart, LinearSettings, LinearStatus, Repository } from "../types";
import { ErrorNote, ago } from "./bits";

/**
 * Settings › Linear: the app's installation, which team or project works where, and
 * whether issues move to In Progress when the agent starts.
 */
export function Linear({ repos, environments }: { repos: Repository[]; environments: Environment[] }) {
  const [status, setStatus] = useState<LinearStatus | null>(null);
  const [team, setTeam] = useState("");
  const [label, setLabel] = useState("");
  const [teamTarget, setTeamTarget] = useState("");
  const [project, setProject] = useState("");
  const [projectTarget, setProjectTarget] = useState("");
  const [note, setNote] = useState("");
  const [error, setError] = useState("");
  const targets = [
    ...repos.map((r) => ({ value: `${r.owner}/${r.name}`, label: `${r.owner}/${r.name}` })),
    ...environments.map((e) => ({ value: `env:${e.id}`, label: `Environment: ${e.name}` })),
  ];
  const named = (t: string) => targets.find((x) => x.value.toLowerCase() === t.toLowerCase())?.label ?? t;
  useEffect(() => {
    get<LinearStatus>("/integrations/linear")
      .then(setStatus)
      .catch((e) => setError(errorText(e)));
  }, []);
  if (!status) return <ErrorNote text={error} />;
  const settings = status.settings;
  const save = async (next: LinearSettings) => {
    try {
      const saved = await put<LinearSettings>("/integrations/linear/settings", next);
      setStatus({ ...status, settings: saved });
      setNote("Saved.");
      setError("");
    } catch (err) {
      setError(errorText(err));
    }
  };
  const install = async () => {
    try {
      const start = await post<LinearInstallStart>("/integrations/linear/install", {});
      window.location.assign(start.url);
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
    <section class="panel" aria-labelledby="linear-h">
      <h2 id="linear-h">Linear</h2>
      <p class="muted small">
        Assign an issue to the agent or mention it in Linear: it works the issue in a session, reports in the agent panel
        and ends with a pull request. Where it works: the project&apos;s mapping, then the team&apos;s (a labelled one first), an{" "}
        <code>owner/repo</code> in the comment, Linear&apos;s suggestion, the classifier; when unsure it asks.
      </p>
      {!status.configured && (
        <p class="small" data-testid="linear-unconfigured">
          Not set up: set <code>LINEAR_CLIENT_ID</code>, <code>LINEAR_CLIENT_SECRET</code> and <code>LINEAR_WEBHOOK_SECRET</code> (see the
          README).
        </p>
      )}
      <ul class="plain" data-testid="linear-installations">
        {status.installations.map((i) => (
          <li key={i.organizationId}>
            Installed in <strong>{i.organizationName || i.organizationId}</strong> {ago(i.installedAt)}
            {i.installedBy ? ` by ${i.installedBy}` : ""}
          </li>
        ))}
      </ul>
      {status.configured && (
        <button type="button" onClick={() => void install()}>
          {status.installations.length ? "Install again" : "Install the Linear app"}
        </button>
      )}
      <h3 class="small">Teams</h3>
      <ul class="plain" data-testid="linear-teams">
        {settings.teamMappings.map((m, i) => (
          <li key={`${m.team}-${m.label ?? ""}-${i}`}>
            <code>{m.team}</code>
            {m.label ? ` labelled ${m.label}` : ""} → {named(m.target)}{" "}
            <button
              type="button"
              class="small"
              aria-label={`Remove the team mapping ${m.team}`}
              onClick={() => void save({ ...settings, teamMappings: settings.teamMappings.filter((_, j) => j !== i) })}
            >
              ✕
            </button>
          </li>
        ))}
      </ul>
      <form
        aria-label="Team mapping"
        onSubmit={(e) => {
          e.preventDefault();
          if (!team.trim() || !teamTarget) return;
          const mapping = { team: team.trim(), target: teamTarget, ...(label.trim() ? { label: label.trim() } : {}) };
          void save({ ...settings, teamMappings: [...settings.teamMappings, mapping] });
          setTeam("");
          setLabel("");
        }}
      >
        <input value={team} placeholder="team key (ENG)" onInput={(e) => setTeam(e.currentTarget.value)} aria-label="Team key" />
        <input value={label} placeholder="label (optional)" onInput={(e) => setLabel(e.currentTarget.value)} aria-label="Label" />
        {pick(teamTarget, setTeamTarget, "Team target")} <button type="submit">Add team</button>
      </form>
      <h3 class="small">Projects</h3>
      <ul class="plain" data-testid="linear-projects">
        {settings.projectMappings.map((m, i) => (
          <li key={`${m.project}-${i}`}>
            <code>{m.project}</code> → {named(m.target)}{" "}
            <button
              type="button"
              class="small"
              aria-label={`Remove the project mapping ${m.project}`}
              onClick={() => void save({ ...settings, projectMappings: settings.projectMappings.filter((_, j) => j !== i) })}
            >
              ✕
            </button>
          </li>
        ))}
      </ul>
      <form
        aria-label="Project mapping"
        onSubmit={(e) => {
          e.preventDefault();
          if (!project.trim() || !projectTarget) return;
          void save({ ...settings, projectMappings: [...settings.projectMappings, { project: project.trim(), target: projectTarget }] });
          setProject("");
        }}
      >
        <input value={project} placeholder="project name or id" onInput={(e) => setProject(e.currentTarget.value)} aria-label="Project" />
        {pick(projectTarget, setProjectTarget, "Project target")} <button type="submit">Add project</button>
      </form>
      <label class="check">
        <input
          type="checkbox"
          checked={settings.moveIssueOnStart}
          onChange={(e) => void save({ ...settings, moveIssueOnStart: e.currentTarget.checked })}
        />{" "}
        Move an issue to its team&apos;s first started state when the agent starts
      </label>
      <label class="check">
        <input
          type="checkbox"
          checked={settings.toolProgress}
          onChange={(e) => void save({ ...settings, toolProgress: e.currentTarget.checked })}
        />{" "}
        Show each tool the agent runs in Linear&apos;s agent panel
      </label>
      {note && <span class="muted small">{note}</span>}
      <ErrorNote text={error} />
    </section>
  );
}
