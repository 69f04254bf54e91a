// The agent's text as markdown: parsed by marked, sanitized by DOMPurify, code blocks
// highlighted by highlight.js. The three load after the page has drawn, one per task (so
// none of them blocks a frame for long); until then text shows as plain text.

import type { HLJSApi, LanguageFn } from "highlight.js";

interface Engine {
  parse: (text: string) => string;
  sanitize: (html: string) => string;
  hljs: HLJSApi;
}

let engine: Engine | null = null;
let loading: Promise<void> | null = null;
const waiting = new Set<() => void>();

/** Calls `f` once markdown is ready (at once if it is). */
export function whenMarkdownReady(f: () => void): () => void {
  if (engine) {
    f();
    return () => undefined;
  }
  waiting.add(f);
  void loadMarkdown();
  return () => waiting.delete(f);
}

export function markdownReady(): boolean {
  return engine !== null;
}

const nextTask = () => new Promise<void>((r) => setTimeout(r, 0));

export function loadMarkdown(): Promise<void> {
  loading ??= (async () => {
    const { default: hljs } = await import("highlight.js/lib/core");
    await nextTask();
    const { Marked } = await import("marked");
    await nextTask();
    const { default: DOMPurify } = await import("dompurify");
    await nextTask();
    const marked = new Marked({
      gfm: true,
      renderer: {
        code({ text, lang }) {
          return `<pre><code class="hljs">${highlightWith(hljs, text, (lang ?? "").split(/\s/)[0])}</code></pre>`;
        },
      },
    });
    engine = {
      parse: (text) => marked.parse(text, { async: false }) as string,
      sanitize: (html) => DOMPurify.sanitize(html),
      hljs,
    };
    // Warm the parser in a task of its own, then wake the views.
    engine.sanitize(engine.parse("*warm* `up`"));
    await nextTask();
    for (const f of [...waiting]) f();
    waiting.clear();
  })();
  return loading;
}

/** Grammars, loaded and registered on first use (each its own small chunk). */
const GRAMMARS: Record<string, () => Promise<{ default: LanguageFn }>> = {
  bash: () => import("highlight.js/lib/languages/bash"),
  css: () => import("highlight.js/lib/languages/css"),
  diff: () => import("highlight.js/lib/languages/diff"),
  go: () => import("highlight.js/lib/languages/go"),
  javascript: () => import("highlight.js/lib/languages/javascript"),
  json: () => import("highlight.js/lib/languages/json"),
  markdown: () => import("highlight.js/lib/languages/markdown"),
  python: () => import("highlight.js/lib/languages/python"),
  rust: () => import("highlight.js/lib/languages/rust"),
  sql: () => import("highlight.js/lib/languages/sql"),
  typescript: () => import("highlight.js/lib/languages/typescript"),
  xml: () => import("highlight.js/lib/languages/xml"),
  yaml: () => import("highlight.js/lib/languages/yaml"),
};
const ALIASES: Record<string, string> = { sh: "bash", shell: "bash", js: "javascript", ts: "typescript", tsx: "typescript", jsx: "javascript", py: "python", rs: "rust", html: "xml", yml: "yaml", md: "markdown" };
const pendingGrammars = new Set<string>();

function highlightWith(hljs: HLJSApi, code: string, lang: string): string {
  const name = ALIASES[lang.toLowerCase()] ?? lang.toLowerCase();
  if (name && hljs.getLanguage(name)) return hljs.highlight(code, { language: name }).value;
  const load = GRAMMARS[name];
  if (load && !pendingGrammars.has(name)) {
    // Plain now; highlighted when the grammar has loaded and the view draws again.
    pendingGrammars.add(name);
    void load().then((g) => {
      hljs.registerLanguage(name, g.default);
      cache.clear();
      for (const f of [...grammarListeners]) f();
    });
  }
  return escapeHtml(code);
}

const grammarListeners = new Set<() => void>();
/** Calls `f` whenever a grammar arrives (code can then be highlighted). */
export function onGrammarLoaded(f: () => void): () => void {
  grammarListeners.add(f);
  return () => grammarListeners.delete(f);
}

const cache = new Map<string, string>();

/** Safe HTML for a markdown text, or null until the engine has loaded. */
export function renderMarkdown(text: string): string | null {
  if (!engine) return null;
  const hit = cache.get(text);
  if (hit !== undefined) return hit;
  const html = engine.sanitize(engine.parse(text));
  if (cache.size > 500) cache.clear();
  cache.set(text, html);
  return html;
}

/** Highlighted HTML for tool input and output (escaped text until ready). */
export function renderCode(code: string, lang?: string): string {
  if (!engine) return escapeHtml(code);
  if (lang === "diff" || /^(---|\+\+\+|@@) /m.test(code)) return highlightWith(engine.hljs, code, "diff");
  return highlightWith(engine.hljs, code, lang ?? "");
}

export function escapeHtml(s: string): string {
  return s.replace(/[&<>"']/g, (c) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" })[c] ?? c);
}
