import { useState } from "preact/hooks";
import { errorText, post } from "../api";
import type { Me } from "../types";
import { ErrorNote } from "./bits";

/** What `inspect login` put in the link: its loopback port and its one-time state. */
export function cliRequest(search: string): { port: number; state: string } | null {
  const q = new URLSearchParams(search);
  const port = Number(q.get("port") ?? "");
  const state = q.get("state") ?? "";
  if (!Number.isInteger(port) || port < 1024 || port > 65535) return null;
  if (!/^[A-Za-z0-9_-]{16,128}$/.test(state)) return null;
  return { port, state };
}

/** Posts the answer to the command line's loopback listener (a form: a navigation, so the
 * token travels in the body, not in a URL the browser keeps). */
function answer(port: number, fields: Record<string, string>) {
  const form = document.createElement("form");
  form.method = "POST";
  form.action = `http://127.0.0.1:${port}/callback`;
  for (const [name, value] of Object.entries(fields)) {
    const input = document.createElement("input");
    input.type = "hidden";
    input.name = name;
    input.value = value;
    form.append(input);
  }
  document.body.append(form);
  form.submit();
}

/** Settings › Command line: `inspect login`'s browser hand-off. */
export function CliLogin({ me }: { me: Me }) {
  const request = cliRequest(location.search);
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState("");
  if (!request) {
    return (
      <section class="panel narrow" aria-labelledby="cli-h">
        <h1 id="cli-h">Sign in the command line</h1>
        <p class="error">This link is not one `inspect login` made. Run `inspect login` again.</p>
      </section>
    );
  }
  const allow = async () => {
    setBusy(true);
    try {
      const day = new Date().toISOString().slice(0, 10);
      const made = await post<{ token: string }>("/tokens", { name: `inspect CLI (${day})` });
      answer(request.port, { state: request.state, token: made.token });
    } catch (e) {
      setError(errorText(e));
      setBusy(false);
    }
  };
  return (
    <section class="panel narrow" aria-labelledby="cli-h">
      <h1 id="cli-h">Sign in the command line</h1>
      <p>
        <code>inspect</code> on this computer (waiting on port {request.port}) asks for a personal API token to act as{" "}
        <strong>{me.user.name}</strong>. Allow it only if you just ran <code>inspect login</code>.
      </p>
      <p class="muted small">The token is listed under Settings › Account › API tokens, where you can revoke it.</p>
      <div class="row">
        <button type="button" class="primary" disabled={busy} onClick={() => void allow()}>
          Allow
        </button>
        <button type="button" disabled={busy} onClick={() => answer(request.port, { state: request.state, error: "denied" })}>
          Deny
        </button>
      </div>
      <ErrorNote text={error} />
    </section>
  );
}
