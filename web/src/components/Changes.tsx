import { useEffect, useRef, useState } from "preact/hooks";
import { errorText, get } from "../api";
import type { ChangedFile, ChangesSummary, RepoChanges } from "../types";
import { ErrorNote, ago } from "./bits";

// The workspace's change, as the sandbox captured it after the last turn: the files of
// each repository with their line counts, and one file's diff at a time, drawn by
// diff2html (split or unified) with highlight.js. Fetched again when a capture lands
// (`diff_updated`); the diff library loads only when a diff is first opened.

type Format = "line-by-line" | "side-by-side";

const KIND: Record<string, string> = {
  added: "A",
  modified: "M",
  deleted: "D",
  renamed: "R",
  copied: "C",
  type_changed: "T",
};

const OMITTED: Record<string, string> = {
  binary: "A binary file: no diff to show.",
  too_large: "This file's diff is too large to show.",
  over_total: "Not shown: the change as a whole is too large. Open it in the pull request or the repository.",
};

/** diff2html, highlight.js and a few grammars, loaded once on first use. */
let drawing: Promise<(target: HTMLElement, patch: string, format: Format) => void> | null = null;
function loadDrawing() {
  drawing ??= (async () => {
    const [{ Diff2HtmlUI }, { default: hljs }] = await Promise.all([
      import("diff2html/lib-esm/ui/js/diff2html-ui-base"),
      import("highlight.js/lib/core"),
      import("diff2html/bundles/css/diff2html.min.css"),
    ]);
    const grammars = await Promise.all([
      import("highlight.js/lib/languages/javascript"),
      import("highlight.js/lib/languages/typescript"),
      import("highlight.js/lib/languages/rust"),
      import("highlight.js/lib/languages/python"),
      import("highlight.js/lib/languages/go"),
      import("highlight.js/lib/languages/json"),
      import("highlight.js/lib/languages/css"),
      import("highlight.js/lib/languages/xml"),
      import("highlight.js/lib/languages/markdown"),
      import("highlight.js/lib/languages/bash"),
      import("highlight.js/lib/languages/yaml"),
    ]);
    const names = ["javascript", "typescript", "rust", "python", "go", "json", "css", "xml", "markdown", "bash", "yaml"];
    grammars.forEach((g, i) => hljs.registerLanguage(names[i], g.default));
    return (target: HTMLElement, patch: string, format: Format) => {
      const ui = new Diff2HtmlUI(
        target,
        patch,
        { outputFormat: format, drawFileList: false, matching: "lines", highlight: true, fileContentToggle: false },
        hljs,
      );
      ui.draw();
      ui.highlightCode();
    };
  })();
  return drawing;
}

function FileDiff({ sessionId, repo, file, format }: { sessionId: string; repo: string; file: ChangedFile; format: Format }) {
  const target = useRef<HTMLDivElement>(null);
  const [error, setError] = useState("");
  const [note, setNote] = useState(file.omitted ? OMITTED[file.omitted] : "");
  useEffect(() => {
    if (file.omitted) return;
    let gone = false;
    setError("");
    const q = `repo=${encodeURIComponent(repo)}&file=${encodeURIComponent(file.path)}`;
    Promise.all([get<ChangedFile>(`/sessions/${sessionId}/changes?${q}`), loadDrawing()])
      .then(([full, draw]) => {
        if (gone || !target.current) return;
        if (!full.patch) {
          setNote(full.omitted ? OMITTED[full.omitted] : "No diff for this file.");
          return;
        }
        draw(target.current, full.patch, format);
      })
      .catch((e) => !gone && setError(errorText(e)));
    return () => {
      gone = true;
    };
  }, [sessionId, repo, file.path, file.omitted, format]);
  return (
    <div class="file-diff" data-testid="file-diff" data-path={file.path}>
      <ErrorNote text={error} />
      {note && <p class="muted">{note}</p>}
      <div ref={target} />
    </div>
  );
}

function RepoFiles({
  repo,
  selected,
  onSelect,
}: {
  repo: RepoChanges;
  selected: string | null;
  onSelect: (path: string) => void;
}) {
  return (
    <section class="changes-repo" aria-label={`Changes in ${repo.repo}`}>
      <h3>
        {repo.repo} <span class="add">+{repo.additions}</span> <span class="del">−{repo.deletions}</span>
      </h3>
      {repo.error && <p class="muted small">{repo.error}</p>}
      <ul class="plain changes-files">
        {repo.files.map((f) => (
          <li key={f.path}>
            <button
              type="button"
              class={`link change-file${selected === f.path ? " selected" : ""}`}
              data-testid="changed-file"
              onClick={() => onSelect(f.path)}
              title={f.oldPath ? `${f.oldPath} → ${f.path}` : f.path}
            >
              <span class={`kind kind-${f.kind}`}>{KIND[f.kind] ?? "?"}</span> {f.path}
            </button>{" "}
            <span class="small">
              {f.binary ? (
                <span class="muted">binary</span>
              ) : (
                <>
                  <span class="add">+{f.additions}</span> <span class="del">−{f.deletions}</span>
                </>
              )}
            </span>
          </li>
        ))}
      </ul>
      {repo.moreFiles > 0 && <p class="muted small">{repo.moreFiles} more files</p>}
    </section>
  );
}

export function ChangesPanel({ sessionId, capturedAt }: { sessionId: string; capturedAt: number }) {
  const [summary, setSummary] = useState<ChangesSummary | null>(null);
  const [error, setError] = useState("");
  const [selected, setSelected] = useState<{ repo: string; path: string } | null>(null);
  const [format, setFormat] = useState<Format>("line-by-line");
  useEffect(() => {
    let gone = false;
    get<ChangesSummary>(`/sessions/${sessionId}/changes`)
      .then((s) => !gone && setSummary(s))
      .catch((e) => !gone && setError(errorText(e)));
    return () => {
      gone = true;
    };
  }, [sessionId, capturedAt]);
  const repos = summary?.repos ?? [];
  const file = selected && repos.find((r) => r.repo === selected.repo)?.files.find((f) => f.path === selected.path);
  return (
    <section class="panel changes" aria-label="Changes">
      <div class="row changes-head">
        <h2>Changes</h2>
        {summary?.capturedAt && <span class="muted small">as of {ago(summary.capturedAt)}</span>}
        <span class="grow" />
        <div class="row" role="group" aria-label="Diff layout">
          <button type="button" class="small" aria-pressed={format === "line-by-line"} onClick={() => setFormat("line-by-line")}>
            Unified
          </button>
          <button type="button" class="small" aria-pressed={format === "side-by-side"} onClick={() => setFormat("side-by-side")}>
            Split
          </button>
        </div>
      </div>
      <ErrorNote text={error} />
      {summary && repos.length === 0 && <p class="muted">Nothing changed yet: the list fills after the agent's first turn.</p>}
      {repos.map((r) => (
        <RepoFiles
          key={r.repo}
          repo={r}
          selected={selected?.repo === r.repo ? selected.path : null}
          onSelect={(path) => setSelected({ repo: r.repo, path })}
        />
      ))}
      {selected && file && <FileDiff key={`${selected.repo}/${selected.path}/${format}/${capturedAt}`} sessionId={sessionId} repo={selected.repo} file={file} format={format} />}
    </section>
  );
}
