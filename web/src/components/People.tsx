import { useEffect, useState } from "preact/hooks";
import { del, errorText, get, post, put } from "../api";
import type { Identities, LinkedIdentity, Me, People as PeopleList, Role } from "../types";
import { ErrorNote, ago } from "./bits";

const ruleText = (l: LinkedIdentity) =>
  l.rule === "email" ? "your verified address matched" : "a one-time link you opened";

/** Settings › Account: who you sign in as, the identities linked to you, and a link code to
 *  confirm when you arrived from the bot's link (`?link=…`). */
export function Account({ me }: { me: Me }) {
  const [ids, setIds] = useState<Identities | null>(null);
  const [error, setError] = useState("");
  const [note, setNote] = useState("");
  const [code, setCode] = useState(() => new URLSearchParams(location.search).get("link") ?? "");
  const load = () =>
    get<Identities>("/auth/identities")
      .then(setIds)
      .catch((e) => setError(errorText(e)));
  useEffect(() => {
    void load();
  }, []);
  const link = async (e: Event) => {
    e.preventDefault();
    try {
      const linked = await post<LinkedIdentity>("/auth/identities/link", { code: code.trim() });
      setNote(`${linked.name} (${linked.provider}) is now you.`);
      setCode("");
      setError("");
      history.replaceState(null, "", location.pathname);
      await load();
    } catch (err) {
      setError(errorText(err));
    }
  };
  const unlink = async (identity: string) => {
    try {
      await del(`/auth/identities/${identity}`);
      await load();
    } catch (err) {
      setError(errorText(err));
    }
  };
  return (
    <section data-testid="account">
      <h2>Account</h2>
      <p>
        You sign in as <strong>{me.user.name}</strong> ({ids?.signIn ?? me.user.userId}), a{" "}
        <strong>{me.role}</strong>.
      </p>
      <table class="list" data-testid="identities">
        <tbody>
          {(ids?.linked ?? []).map((l) => (
            <tr>
              <td>
                {l.provider} · {l.name}
              </td>
              <td class="muted">
                {ruleText(l)}, {ago(l.linkedAt)}
              </td>
              <td>
                <button type="button" class="link" onClick={() => void unlink(l.identity)}>
                  Unlink
                </button>
              </td>
            </tr>
          ))}
          {ids && ids.linked.length === 0 && (
            <tr>
              <td class="muted">Nothing linked yet: type /inspect link in Slack.</td>
            </tr>
          )}
        </tbody>
      </table>
      <form onSubmit={link}>
        <label>
          Link code
          <input
            value={code}
            onInput={(e) => setCode((e.target as HTMLInputElement).value)}
            placeholder="from the bot's link"
            autocomplete="off"
          />
        </label>{" "}
        <button type="submit" disabled={!code.trim()}>
          Link to me
        </button>{" "}
        {note && <span class="muted">{note}</span>}
      </form>
      <ErrorNote text={error} />
    </section>
  );
}

/** Settings › People (admins): everyone who signed in, and their roles. */
export function PeopleRoles() {
  const [people, setPeople] = useState<PeopleList["people"]>([]);
  const [error, setError] = useState("");
  const load = () =>
    get<PeopleList>("/people")
      .then((r) => setPeople(r.people))
      .catch((e) => setError(errorText(e)));
  useEffect(() => {
    void load();
  }, []);
  const setRole = async (userId: string, role: Role) => {
    try {
      await put(`/people/${userId}/role`, { role });
      setError("");
      await load();
    } catch (err) {
      setError(errorText(err));
    }
  };
  return (
    <section data-testid="people">
      <h2>People</h2>
      <table class="list">
        <tbody>
          {people.map((p) => (
            <tr>
              <td>
                {p.name}
                {p.linked.length > 0 && <span class="muted"> · {p.linked.join(", ")}</span>}
              </td>
              <td>
                <select
                  value={p.role}
                  disabled={p.roleSource === "setting"}
                  title={p.roleSource === "setting" ? "named by ADMIN_USERS" : undefined}
                  onChange={(e) => void setRole(p.userId, (e.target as HTMLSelectElement).value as Role)}
                >
                  <option value="admin">admin</option>
                  <option value="member">member</option>
                </select>
              </td>
              <td class="muted">{p.roleSource}</td>
            </tr>
          ))}
        </tbody>
      </table>
      <ErrorNote text={error} />
    </section>
  );
}
