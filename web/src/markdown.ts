// The agent's text as markdown: parsed by marked, sanitized by DOMPurify, code blocks
// highlighted by highlight.js (a fixed set of languages keeps the bundle small).

import DOMPurify from "dompurify";
import hljs from "highlight.js/lib/core";
import bash from "highlight.js/lib/languages/bash";
import css from "highlight.js/lib/languages/css";
import diff from "highlight.js/lib/languages/diff";
import go from "highlight.js/lib/languages/go";
import javascript from "highlight.js/lib/languages/javascript";
import json from "highlight.js/lib/languages/json";
import markdown from "highlight.js/lib/languages/markdown";
import python from "highlight.js/lib/languages/python";
import rust from "highlight.js/lib/languages/rust";
import sql from "highlight.js/lib/languages/sql";
import typescript from "highlight.js/lib/languages/typescript";
import xml from "highlight.js/lib/languages/xml";
import yaml from "highlight.js/lib/languages/yaml";
import { Marked } from "marked";

type Grammar = Parameters<typeof hljs.registerLanguage>[1];
const GRAMMARS: Record<string, Grammar> = { bash, css, diff, go, javascript, json, markdown, python, rust, sql, typescript, xml, yaml };
const ALIASES: Record<string, string> = { sh: "bash", shell: "bash", js: "javascript", ts: "typescript", tsx: "typescript", jsx: "javascript", py: "python", rs: "rust", html: "xml", yml: "yaml", md: "markdown" };

/** The language, registered on first use (grammars compile lazily, one at a time). */
function language(lang: string | undefined): string | null {
  if (!lang) return null;
  const name = ALIASES[lang.toLowerCase()] ?? lang.toLowerCase();
  if (!hljs.getLanguage(name)) {
    const grammar = GRAMMARS[name];
    if (!grammar) return null;
    hljs.registerLanguage(name, grammar);
  }
  return name;
}

function highlight(code: string, lang: string): string {
  const name = language(lang);
  return name ? hljs.highlight(code, { language: name }).value : escapeHtml(code);
}

const marked = new Marked({
  gfm: true,
  breaks: false,
  renderer: {
    code({ text, lang }) {
      const language = (lang ?? "").split(/\s/)[0];
      return `<pre><code class="hljs">${highlight(text, language)}</code></pre>`;
    },
  },
});

const cache = new Map<string, string>();

/** Safe HTML for a markdown text (memoized: streamed parts re-render often). */
export function renderMarkdown(text: string): string {
  const hit = cache.get(text);
  if (hit !== undefined) return hit;
  const html = DOMPurify.sanitize(marked.parse(text, { async: false }) as string, {
    ADD_ATTR: ["target"],
  });
  if (cache.size > 500) cache.clear();
  cache.set(text, html);
  return html;
}

/** Highlighted HTML for a code block of a known language (tool input and output). */
export function renderCode(code: string, lang?: string): string {
  if (lang === "diff" || /^(---|\+\+\+|@@) /m.test(code)) return highlight(code, "diff");
  return highlight(code, lang ?? "");
}

export function escapeHtml(s: string): string {
  return s.replace(/[&<>"']/g, (c) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" })[c] ?? c);
}

// The first parse compiles marked's and highlight.js's rules and sets DOMPurify up: do it
// while the page waits for its socket, not inside the first timeline render.
// (A language's grammar compiles on its first code block, one language at a time.)
const warm = () => renderMarkdown("*warm* `up`");
if (typeof window !== "undefined") {
  const idle = (window as { requestIdleCallback?: (f: () => void) => void }).requestIdleCallback;
  if (idle) idle(warm);
  else setTimeout(warm, 0);
}
