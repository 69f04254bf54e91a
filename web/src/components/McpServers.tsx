// Settings › MCP servers: tools for the agent, remote (by URL) or local (a command in the
// sandbox), for every session, a repository or an environment. Credentials are secret
// references ({secret:NAME}), resolved in the sandbox from the session's secrets.

import { useEffect, useState } from "preact/hooks";
import { del, errorText, get, post } from "../api";
import type { Environment, McpServer, McpServerRequest, Repository, SkillAssignment as McpScope } from "../types";
import { ErrorNote, ago } from "./bits";

function scopeLabel(s: McpScope): string {
  return s.kind === "all" ? "every session" : s.kind === "repository" ? `${s.owner}/${s.name}` : `environment ${s.id}`;
}

export function McpServers({ repos, environments }: { repos: Repository[]; environments: Environment[] }) {
  const [servers, setServers] = useState<McpServer[]>([]);
  const [name, setName] = useState("");
  const [kind, setKind] = useState<"remote" | "local">("remote");
  const [target, setTarget] = useState("");
  const [secretHeader, setSecretHeader] = useState("");
  const [scope, setScope] = useState("all");
  const [error, setError] = useState("");
  const load = () =>
    get<{ servers: McpServer[] }>("/mcp-servers")
      .then((r) => setServers(r.servers))
      .catch((e) => setError(errorText(e)));
  useEffect(() => {
    void load();
  }, []);
  const add = async (e: Event) => {
    e.preventDefault();
    const scoped: McpScope = scope.startsWith("repo:")
      ? { kind: "repository", owner: scope.slice(5).split("/")[0], name: scope.slice(5).split("/")[1] }
      : scope.startsWith("env:")
        ? { kind: "environment", id: scope.slice(4) }
        : { kind: "all" };
    const body: McpServerRequest = {
      name: name.trim(),
      server:
        kind === "remote"
          ? { type: "remote", url: target.trim(), headers: secretHeader ? { Authorization: `Bearer {secret:${secretHeader.trim()}}` } : {} }
          : { type: "local", command: target.trim().split(/\s+/), environment: {} },
      scope: scoped,
      enabled: true,
    };
    try {
      await post("/mcp-servers", body);
      setName("");
      setTarget("");
      setSecretHeader("");
      setError("");
      await load();
    } catch (err) {
      setError(errorText(err));
    }
  };
  const remove = async (n: string) => {
    try {
      await del(`/mcp-servers/${n}`);
      await load();
    } catch (err) {
      setError(errorText(err));
    }
  };
  return (
    <section class="panel" aria-labelledby="mcp-h">
      <h2 id="mcp-h">MCP servers</h2>
      <p class="muted small">Tools for the agent. A new session takes the enabled servers that apply to it; the sandbox resolves secret references from the session's secrets.</p>
      <ul class="plain" aria-label="MCP servers">
        {servers.map((s) => (
          <li key={s.name} class="row spread">
            <span>
              <code>{s.name}</code>{" "}
              <span class="muted small">
                {s.server.type === "remote" ? s.server.url : s.server.command.join(" ")} · {scopeLabel(s.scope)}
                {s.enabled ? "" : " · disabled"} · {ago(s.updatedAt)}
              </span>
            </span>
            <button type="button" class="link danger" aria-label={`Delete ${s.name}`} onClick={() => void remove(s.name)}>
              Delete
            </button>
          </li>
        ))}
      </ul>
      <form onSubmit={add} class="row" aria-label="New MCP server">
        <input value={name} placeholder="name" aria-label="MCP server name" onInput={(e) => setName(e.currentTarget.value)} />
        <select value={kind} aria-label="MCP server kind" onChange={(e) => setKind(e.currentTarget.value as "remote" | "local")}>
          <option value="remote">remote (URL)</option>
          <option value="local">local (command)</option>
        </select>
        <input value={target} placeholder={kind === "remote" ? "https://…/mcp" : "npx -y some-mcp-server"} aria-label="MCP server URL or command" onInput={(e) => setTarget(e.currentTarget.value)} />
        {kind === "remote" && (
          <input value={secretHeader} placeholder="bearer token secret (NAME)" aria-label="Secret holding the bearer token" onInput={(e) => setSecretHeader(e.currentTarget.value)} />
        )}
        <select value={scope} aria-label="MCP server scope" onChange={(e) => setScope(e.currentTarget.value)}>
          <option value="all">every session</option>
          {repos.map((r) => (
            <option value={`repo:${r.owner}/${r.name}`}>{`${r.owner}/${r.name}`}</option>
          ))}
          {environments.map((env) => (
            <option value={`env:${env.id}`}>{`environment ${env.name}`}</option>
          ))}
        </select>
        <button type="submit">Add</button>
      </form>
      <ErrorNote text={error} />
    </section>
  );
}
