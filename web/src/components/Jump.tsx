import { useEffect, useMemo, useRef, useState } from "preact/hooks";
import { useLocation } from "preact-iso";
import { get } from "../api";
import type { Repository, SessionList } from "../types";

type Target = { label: string; hint: string; href: string };

const PLACES: Target[] = [
  { label: "Sessions", hint: "page", href: "/" },
  { label: "New session", hint: "page", href: "/new" },
  { label: "Automations", hint: "page", href: "/automations" },
  { label: "Analytics", hint: "page", href: "/analytics" },
  { label: "Account", hint: "settings", href: "/settings/account" },
  { label: "Repositories", hint: "settings", href: "/settings/repositories" },
  { label: "Environments and secrets", hint: "settings", href: "/settings/environments" },
  { label: "Models, skills, MCP", hint: "settings", href: "/settings/models" },
  { label: "Prebuilt images", hint: "settings", href: "/settings/images" },
  { label: "Slack and Linear", hint: "settings", href: "/settings/integrations" },
];

/** ⌘K (Ctrl+K): jump to any session (found by title, repository, author or prompt), any
 *  repository's sessions, any page or settings section. */
export function Jump() {
  const { route } = useLocation();
  const [open, setOpen] = useState(false);
  const [text, setText] = useState("");
  const [sessions, setSessions] = useState<Target[]>([]);
  const [repos, setRepos] = useState<Repository[]>([]);
  const [at, setAt] = useState(0);
  const input = useRef<HTMLInputElement>(null);

  useEffect(() => {
    const onKey = (e: KeyboardEvent) => {
      if ((e.metaKey || e.ctrlKey) && e.key.toLowerCase() === "k") {
        e.preventDefault();
        // Emptied as it opens, before its box can be typed in (an effect after the first
        // render would wipe what was typed meanwhile).
        setText("");
        setAt(0);
        setOpen((o) => !o);
      }
    };
    window.addEventListener("keydown", onKey);
    return () => window.removeEventListener("keydown", onKey);
  }, []);
  useEffect(() => {
    if (!open) return;
    input.current?.focus();
    get<{ repositories: Repository[] }>("/repos")
      .then((r) => setRepos(r.repositories))
      .catch(() => undefined);
  }, [open]);
  useEffect(() => {
    if (!open) return;
    const t = setTimeout(() => {
      const q = new URLSearchParams({ limit: "8", status: "all" });
      if (text.trim()) q.set("q", text.trim());
      get<SessionList>(`/sessions?${q}`)
        .then((r) =>
          setSessions(
            r.sessions.map((s) => ({
              label: s.title || s.repositories.map((x) => `${x.owner}/${x.name}`).join(", ") || s.id,
              hint: `session · ${s.createdByName}`,
              href: `/sessions/${s.id}`,
            })),
          ),
        )
        .catch(() => setSessions([]));
    }, 150);
    return () => clearTimeout(t);
  }, [open, text]);

  const results = useMemo(() => {
    const needle = text.trim().toLowerCase();
    const matches = (t: Target) => !needle || t.label.toLowerCase().includes(needle);
    const repoTargets: Target[] = repos.map((r) => ({
      label: `${r.owner}/${r.name}`,
      hint: "repository",
      href: `/?repo=${encodeURIComponent(`${r.owner}/${r.name}`)}`,
    }));
    return [...sessions, ...repoTargets.filter(matches), ...PLACES.filter(matches)].slice(0, 20);
  }, [sessions, repos, text]);

  if (!open) return null;
  const go = (t: Target | undefined) => {
    if (!t) return;
    setOpen(false);
    route(t.href);
  };
  return (
    <div class="jump-backdrop" onClick={() => setOpen(false)}>
      <div class="jump" role="dialog" aria-label="Jump to" onClick={(e) => e.stopPropagation()}>
        <input
          ref={input}
          aria-label="Jump to"
          placeholder="Jump to a session, repository, page or setting…"
          value={text}
          onInput={(e) => {
            setText(e.currentTarget.value);
            setAt(0);
          }}
          onKeyDown={(e) => {
            if (e.key === "Escape") setOpen(false);
            if (e.key === "ArrowDown") {
              e.preventDefault();
              setAt((i) => Math.min(i + 1, results.length - 1));
            }
            if (e.key === "ArrowUp") {
              e.preventDefault();
              setAt((i) => Math.max(i - 1, 0));
            }
            if (e.key === "Enter") go(results[at]);
          }}
        />
        <ul role="listbox" aria-label="Results">
          {results.map((t, i) => (
            <li role="option" aria-selected={i === at} class={i === at ? "active" : ""} onClick={() => go(t)}>
              <span>{t.label}</span> <span class="muted small">{t.hint}</span>
            </li>
          ))}
        </ul>
      </div>
    </div>
  );
}
