// Small shared pieces.

export function Avatar({ name, src, size = 24 }: { name: string; src?: string | null; size?: number }) {
  if (src) return <img class="avatar" src={src} alt="" width={size} height={size} loading="lazy" />;
  const initials = name
    .split(/[\s._-]+/)
    .filter(Boolean)
    .slice(0, 2)
    .map((w) => w[0]?.toUpperCase())
    .join("");
  let hue = 0;
  for (const c of name) hue = (hue * 31 + c.charCodeAt(0)) % 360;
  return (
    <span class="avatar initials" style={{ width: size, height: size, background: `hsl(${hue} 45% 40%)` }} aria-hidden="true">
      {initials || "?"}
    </span>
  );
}

export function ago(ms: number, now = Date.now()): string {
  const s = Math.max(0, Math.round((now - ms) / 1000));
  if (s < 60) return "just now";
  if (s < 3600) return `${Math.floor(s / 60)} min ago`;
  if (s < 86400) return `${Math.floor(s / 3600)} h ago`;
  return new Date(ms).toLocaleDateString();
}

export function duration(ms?: number | null): string {
  if (ms === undefined || ms === null) return "";
  if (ms < 1000) return `${ms} ms`;
  if (ms < 60_000) return `${(ms / 1000).toFixed(1)} s`;
  return `${Math.floor(ms / 60_000)} min ${Math.round((ms % 60_000) / 1000)} s`;
}

export function repoLabel(r: { owner: string; name: string; branch?: string | null }): string {
  return `${r.owner}/${r.name}${r.branch ? `@${r.branch}` : ""}`;
}

export function ErrorNote({ text }: { text: string }) {
  return text ? (
    <p class="error" role="alert">
      {text}
    </p>
  ) : null;
}
