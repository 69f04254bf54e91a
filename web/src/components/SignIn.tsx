export function SignIn() {
  const returnTo = encodeURIComponent(location.pathname + location.search);
  return (
    <main class="signin">
      <h1>Open-Inspect</h1>
      <p>Background coding agents: send a prompt, close the laptop, come back to a pull request.</p>
      <a class="button primary" href={`/auth/github?returnTo=${returnTo}`}>
        Sign in with GitHub
      </a>
      <p class="muted small">Running locally? The run command signs you in by itself.</p>
    </main>
  );
}
