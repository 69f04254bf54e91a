import { useEffect, useState } from "preact/hooks";
import { get } from "../api";
import type { SignInProviders } from "../types";

export function SignIn() {
  const returnTo = encodeURIComponent(location.pathname + location.search);
  const [offered, setOffered] = useState<SignInProviders>({ github: true, google: false });
  useEffect(() => {
    get<SignInProviders>("/auth/providers")
      .then(setOffered)
      .catch(() => undefined);
  }, []);
  return (
    <main class="signin">
      <h1>Open-Inspect</h1>
      <p>Background coding agents: send a prompt, close the laptop, come back to a pull request.</p>
      {offered.github && (
        <a class="button primary" href={`/auth/github?returnTo=${returnTo}`}>
          Sign in with GitHub
        </a>
      )}{" "}
      {offered.google && (
        <a class="button" href={`/auth/google?returnTo=${returnTo}`}>
          Sign in with Google
        </a>
      )}
      <p class="muted small">Running locally? The run command signs you in by itself.</p>
    </main>
  );
}
