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

for (const [name, lang] of Object.entries({ bash, css, diff, go, javascript, json, markdown, python, rust, sql, typescript, xml, yaml })) {
  hljs.registerLanguage(name, lang);
}

function highlight(code: string, lang: string): string {
  if (lang && hljs.getLanguage(lang)) return hljs.highlight(code, { language: lang }).value;
  return hljs.highlightAuto(code).value;
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
  if (lang === "diff" || /^(---|\+\+\+|@@) /m.test(code)) return hljs.highlight(code, { language: "diff" }).value;
  if (lang && hljs.getLanguage(lang)) return hljs.highlight(code, { language: lang }).value;
  return escapeHtml(code);
}

export function escapeHtml(s: string): string {
  return s.replace(/[&<>"']/g, (c) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" })[c] ?? c);
}
