// Settings › Skills: the deployment's managed skills (reusable instructions for the agent),
// each saved as a new revision, assigned to every session, repositories or environments.

import { useEffect, useState } from "preact/hooks";
import { del, errorText, get, post, put } from "../api";
import type { Environment, Repository, Skill, SkillAssignment, SkillProfile, SkillProfiles, SkillRequest } from "../types";
import { ErrorNote, ago } from "./bits";

type Draft = { name: string; description: string; instructions: string; enabled: boolean; targets: string[]; revision?: number };

const EMPTY: Draft = { name: "", description: "", instructions: "", enabled: true, targets: ["all"] };

function targetsOf(a: SkillAssignment[]): string[] {
  return a.map((x) => (x.kind === "all" ? "all" : x.kind === "repository" ? `repo:${x.owner}/${x.name}` : `env:${x.id}`));
}

function assignmentsOf(targets: string[]): SkillAssignment[] {
  return targets.map((t) => {
    if (t.startsWith("repo:")) {
      const [owner, name] = t.slice(5).split("/");
      return { kind: "repository", owner, name };
    }
    if (t.startsWith("env:")) return { kind: "environment", id: t.slice(4) };
    return { kind: "all" };
  });
}

export function Skills({ repos, environments }: { repos: Repository[]; environments: Environment[] }) {
  const [skills, setSkills] = useState<Skill[]>([]);
  const [draft, setDraft] = useState<Draft | null>(null);
  const [files, setFiles] = useState<Skill["files"]>([]);
  const [error, setError] = useState("");
  const load = () =>
    get<{ skills: Skill[] }>("/skills")
      .then((r) => setSkills(r.skills))
      .catch((e) => setError(errorText(e)));
  useEffect(() => {
    void load();
  }, []);
  const edit = (s: Skill) => {
    setDraft({ name: s.name, description: s.description, instructions: s.instructions, enabled: s.enabled, targets: targetsOf(s.assignments), revision: s.revision });
    setFiles(s.files);
  };
  const save = async (e: Event) => {
    e.preventDefault();
    if (!draft) return;
    const body: SkillRequest = {
      name: draft.name.trim(),
      description: draft.description,
      instructions: draft.instructions,
      files,
      enabled: draft.enabled,
      assignments: assignmentsOf(draft.targets),
      expectedRevision: draft.revision ?? null,
    };
    try {
      if (draft.revision) await put(`/skills/${draft.name}`, body);
      else await post("/skills", body);
      setDraft(null);
      setError("");
      await load();
    } catch (err) {
      setError(errorText(err));
    }
  };
  const remove = async (name: string) => {
    try {
      await del(`/skills/${name}`);
      await load();
    } catch (err) {
      setError(errorText(err));
    }
  };
  const toggle = (t: string, on: boolean) => draft && setDraft({ ...draft, targets: on ? [...draft.targets, t] : draft.targets.filter((x) => x !== t) });
  return (
    <section class="panel" aria-labelledby="skills-h">
      <h2 id="skills-h">Skills</h2>
      <p class="muted small">
        Reusable instructions for the agent. A new session takes the enabled skills that apply to it, at their current revision.
      </p>
      <ul class="plain" aria-label="Skills">
        {skills.map((s) => (
          <li key={s.name} class="row spread">
            <span>
              <code>{s.name}</code> <span class="muted small">rev {s.revision}{s.enabled ? "" : " · disabled"} · {targetsOf(s.assignments).join(", ") || "nowhere"} · {ago(s.updatedAt)}</span>
              <div class="small">{s.description}</div>
            </span>
            <span>
              <button type="button" class="link" onClick={() => edit(s)}>Edit</button>{" "}
              <button type="button" class="link danger" aria-label={`Delete ${s.name}`} onClick={() => void remove(s.name)}>Delete</button>
            </span>
          </li>
        ))}
      </ul>
      {!draft && (
        <button type="button" onClick={() => { setDraft(EMPTY); setFiles([]); }}>
          New skill
        </button>
      )}
      {draft && (
        <form onSubmit={save} aria-label="Skill">
          <label>
            Name
            <input value={draft.name} disabled={Boolean(draft.revision)} placeholder="deploy-service" onInput={(e) => setDraft({ ...draft, name: e.currentTarget.value })} />
          </label>
          <label class="wide">
            Description (when the agent should use it)
            <input value={draft.description} maxLength={1024} onInput={(e) => setDraft({ ...draft, description: e.currentTarget.value })} />
          </label>
          <label class="wide">
            Instructions (Markdown)
            <textarea rows={6} value={draft.instructions} onInput={(e) => setDraft({ ...draft, instructions: e.currentTarget.value })} />
          </label>
          {files.length > 0 && <p class="muted small">Files: {files.map((f) => f.path).join(", ")}</p>}
          <label class="check">
            <input type="checkbox" checked={draft.enabled} onChange={(e) => setDraft({ ...draft, enabled: e.currentTarget.checked })} /> Enabled
          </label>
          <fieldset class="stack">
            <legend>Applies to</legend>
            <label class="check">
              <input type="checkbox" checked={draft.targets.includes("all")} onChange={(e) => toggle("all", e.currentTarget.checked)} /> All sessions
            </label>
            {repos.map((r) => (
              <label class="check" key={`${r.owner}/${r.name}`}>
                <input type="checkbox" checked={draft.targets.includes(`repo:${r.owner}/${r.name}`)} onChange={(e) => toggle(`repo:${r.owner}/${r.name}`, e.currentTarget.checked)} /> {r.owner}/{r.name}
              </label>
            ))}
            {environments.map((env) => (
              <label class="check" key={env.id}>
                <input type="checkbox" checked={draft.targets.includes(`env:${env.id}`)} onChange={(e) => toggle(`env:${env.id}`, e.currentTarget.checked)} /> environment {env.name}
              </label>
            ))}
          </fieldset>
          <button type="submit" class="primary">{draft.revision ? "Save new revision" : "Create skill"}</button>{" "}
          <button type="button" onClick={() => setDraft(null)}>Cancel</button>
        </form>
      )}
      <Profiles skills={skills} />
      <ErrorNote text={error} />
    </section>
  );
}

/** The person's own skill profiles: saved subsets a new session may take. */
function Profiles({ skills }: { skills: Skill[] }) {
  const [profiles, setProfiles] = useState<SkillProfile[]>([]);
  const [name, setName] = useState("");
  const [chosen, setChosen] = useState<string[]>([]);
  const [error, setError] = useState("");
  const load = () =>
    get<SkillProfiles>("/skill-profiles")
      .then((r) => setProfiles(r.profiles))
      .catch((e) => setError(errorText(e)));
  useEffect(() => {
    void load();
  }, []);
  const save = async (e: Event) => {
    e.preventDefault();
    try {
      await put(`/skill-profiles/${encodeURIComponent(name.trim())}`, { skills: chosen });
      setName("");
      setChosen([]);
      setError("");
      await load();
    } catch (err) {
      setError(errorText(err));
    }
  };
  return (
    <div data-testid="skill-profiles">
      <h3 class="small">My profiles</h3>
      <p class="muted small">A profile is your own subset: a new session can take its skills (of those that apply) instead of all.</p>
      <ul class="plain">
        {profiles.map((p) => (
          <li key={p.name}>
            <strong>{p.name}</strong>: {p.skills.join(", ") || "no skills"}{" "}
            <button
              type="button"
              class="small"
              aria-label={`Delete the profile ${p.name}`}
              onClick={() => void del(`/skill-profiles/${encodeURIComponent(p.name)}`).then(load).catch((e) => setError(errorText(e)))}
            >
              ✕
            </button>
          </li>
        ))}
      </ul>
      <form onSubmit={save} aria-label="Skill profile">
        <input value={name} placeholder="profile name (lowercase-words)" onInput={(e) => setName(e.currentTarget.value)} aria-label="Profile name" required />
        {skills.map((sk) => (
          <label class="check" key={sk.name}>
            <input
              type="checkbox"
              checked={chosen.includes(sk.name)}
              onChange={(e) => setChosen(e.currentTarget.checked ? [...chosen, sk.name] : chosen.filter((x) => x !== sk.name))}
            />{" "}
            {sk.name}
          </label>
        ))}
        <button type="submit">Save profile</button>
      </form>
      <ErrorNote text={error} />
    </div>
  );
}
