// The session's terminals: a shell each in the sandbox, opened by a person, seen by everyone
// in the session. xterm.js is loaded on first use. A view asks for the scroll-back when it
// opens and after every reconnect, and draws from it; keys, pastes (in pieces) and its size
// go to the sandbox through the session's socket.

import { useEffect, useRef, useState } from "preact/hooks";
import { del, errorText, post } from "../api";
import type { LiveSession, LiveState } from "../live";
import type { DesktopLink, EditorLink, PortLink, TerminalInfo } from "../wire";
import { ErrorNote } from "./bits";

/** Bytes per input message (the session takes at most 64 KiB). */
const PIECE = 32 * 1024;

type Xterm = typeof import("@xterm/xterm");
type Fit = typeof import("@xterm/addon-fit");
let loading: Promise<[Xterm, Fit]> | null = null;
function xterm(): Promise<[Xterm, Fit]> {
  loading ??= Promise.all([
    import("@xterm/xterm"),
    import("@xterm/addon-fit"),
    import("@xterm/xterm/css/xterm.css"),
  ]).then(([x, f]) => [x, f]);
  return loading;
}

/**
 * One terminal. The view someone types into sets the PTY's size to its own (the one who
 * opened it does from the start); a view that only watches takes the PTY's size, so what
 * a program drew for that size reads the same everywhere, replayed scroll-back included.
 */
function TerminalView({ live, state, terminal }: { live: LiveSession; state: LiveState; terminal: TerminalInfo }) {
  const box = useRef<HTMLDivElement>(null);
  const view = useRef<{ term: import("@xterm/xterm").Terminal; fit: import("@xterm/addon-fit").FitAddon } | null>(null);
  // Until the scroll-back arrives, live bytes are in it already.
  const replaying = useRef(true);
  const driving = useRef(terminal.openedBy === state.me?.name);
  const info = useRef(terminal);
  info.current = terminal;
  const closed = terminal.closedAt != null;

  /** Fits the view to its box and gives the PTY that size (when this view drives it). */
  const drive = () => {
    const v = view.current;
    if (!v || !driving.current) return;
    try {
      v.fit.fit();
    } catch {
      return;
    }
    const { cols, rows } = v.term;
    if (cols > 0 && rows > 0 && (cols !== info.current.cols || rows !== info.current.rows)) {
      live.send({ type: "terminal_resize", terminalId: terminal.id, cols, rows });
    }
  };

  /** A watching view takes the PTY's size. */
  const follow = () => {
    const v = view.current;
    if (!v || driving.current) return;
    const { cols, rows } = info.current;
    if (v.term.cols !== cols || v.term.rows !== rows) v.term.resize(cols, rows);
  };

  const attach = () => {
    replaying.current = true;
    live.send({ type: "terminal_attach", terminalId: terminal.id });
  };

  useEffect(() => {
    let gone = false;
    let stop = () => {};
    let observer: ResizeObserver | null = null;
    let settle: ReturnType<typeof setTimeout> | null = null;
    void xterm().then(([{ Terminal }, { FitAddon }]) => {
      if (gone || !box.current) return;
      const term = new Terminal({
        cols: info.current.cols,
        rows: info.current.rows,
        cursorBlink: true,
        fontSize: 13,
        scrollback: 5000,
      });
      const fit = new FitAddon();
      term.loadAddon(fit);
      term.open(box.current);
      view.current = { term, fit };
      stop = live.onTerminal(terminal.id, (bytes, replay) => {
        if (replay) {
          if (replaying.current) {
            // The scroll-back was drawn at the PTY's size: drawn again at that size.
            term.reset();
            const { cols, rows } = info.current;
            if (term.cols !== cols || term.rows !== rows) term.resize(cols, rows);
            replaying.current = false;
          }
          term.write(bytes);
          if (settle) clearTimeout(settle);
          settle = setTimeout(drive, 200);
        } else if (!replaying.current) {
          term.write(bytes);
        }
      });
      term.onData((data) => {
        if (!driving.current) {
          driving.current = true;
          drive();
        }
        for (let i = 0; i < data.length; i += PIECE) {
          live.send({ type: "terminal_input", terminalId: terminal.id, data: data.slice(i, i + PIECE) });
        }
      });
      observer = new ResizeObserver(() => drive());
      observer.observe(box.current);
      follow();
      term.focus();
      attach();
    });
    return () => {
      gone = true;
      stop();
      if (settle) clearTimeout(settle);
      observer?.disconnect();
      view.current?.term.dispose();
      view.current = null;
    };
  }, [terminal.id]);

  // Someone else resized it: a watching view follows.
  useEffect(follow, [terminal.cols, terminal.rows]);

  // After a reconnect the view redraws from the scroll-back.
  useEffect(() => {
    if (!view.current || closed || state.connection !== "live") return;
    attach();
  }, [state.live]);

  return (
    <div class="terminal-view">
      <div ref={box} class="terminal-screen" data-testid="terminal-screen" data-terminal-id={terminal.id} />
      {closed && (
        <p class="muted small" data-testid="terminal-ended">
          This terminal ended{terminal.exitCode != null ? ` (exit ${terminal.exitCode})` : ""}.
        </p>
      )}
    </div>
  );
}

export function TerminalsPanel({ sessionId, live, state }: { sessionId: string; live: LiveSession; state: LiveState }) {
  const [chosen, setChosen] = useState<string | null>(null);
  const [error, setError] = useState("");
  const running = ["ready", "running"].includes(state.sandbox.status);
  const open = state.terminals.filter((t) => t.closedAt == null);
  const shown = state.terminals.find((t) => t.id === chosen) ?? open[0] ?? null;

  const start = async () => {
    try {
      const t = await post<TerminalInfo>(`/sessions/${sessionId}/terminals`, { cols: 80, rows: 24 });
      setChosen(t.id);
      setError("");
    } catch (e) {
      setError(errorText(e));
    }
  };
  // A link of the person's own (the editor's, the desktop's, a port's) opens once: asked
  // for on each click, in a window opened at once so no pop-up blocker stops it.
  const openLink = (path: string, body?: unknown) => {
    const w = window.open("", "_blank");
    post<EditorLink | DesktopLink | PortLink>(`/sessions/${sessionId}/${path}`, body)
      .then((link) => {
        if (w) w.location.href = link.url;
        else location.href = link.url;
        setError("");
      })
      .catch((e) => {
        w?.close();
        setError(errorText(e));
      });
  };
  // A port of the running sandbox, asked for here: exposed (behind the gate on the local
  // host), then opened through the person's link.
  const [port, setPort] = useState("");
  const openPort = (e: Event) => {
    e.preventDefault();
    const n = Number(port);
    if (!Number.isInteger(n) || n < 1 || n > 65535) {
      setError(`${port || "nothing"} is not a port (1 to 65535)`);
      return;
    }
    openLink("ports", { port: n });
  };
  const close = async (id: string) => {
    try {
      await del(`/sessions/${sessionId}/terminals/${id}`);
    } catch (e) {
      setError(errorText(e));
    }
  };

  return (
    <section class="panel terminals" aria-label="Terminals">
      <h2>Terminals</h2>
      <div class="terminal-bar">
        <button type="button" onClick={() => void start()} disabled={!running} data-testid="open-terminal">
          Open a terminal
        </button>{" "}
        <button type="button" onClick={() => openLink("editor")} disabled={!running} data-testid="open-editor">
          Open in VS Code
        </button>{" "}
        <button
          type="button"
          onClick={() => openLink("desktop", {})}
          disabled={!running}
          data-testid="open-desktop"
          title="Watch the sandbox's desktop, where the agent's browser runs"
        >
          Desktop
        </button>{" "}
        <button
          type="button"
          onClick={() => openLink("desktop", { control: true })}
          disabled={!running}
          data-testid="control-desktop"
          title="Open the desktop with your mouse and keys reaching it"
        >
          Take control
        </button>
        <form class="port-form" onSubmit={openPort}>
          <label>
            Port{" "}
            <input
              type="number"
              min={1}
              max={65535}
              size={6}
              value={port}
              onInput={(e) => setPort((e.target as HTMLInputElement).value)}
              disabled={!running}
              data-testid="port-input"
            />
          </label>{" "}
          <button type="submit" disabled={!running} data-testid="open-port">
            Open
          </button>
        </form>
        {!running && <span class="muted small"> (when the sandbox is running)</span>}
        <ul class="plain terminal-list" aria-label="Open terminals">
          {open.map((t) => (
            <li key={t.id} data-testid="terminal-item">
              <button type="button" class={`link ${shown?.id === t.id ? "active" : ""}`} onClick={() => setChosen(t.id)}>
                {t.openedBy}'s terminal
              </button>{" "}
              <button type="button" class="link small" onClick={() => void close(t.id)} aria-label="Close this terminal">
                ×
              </button>
            </li>
          ))}
        </ul>
      </div>
      {shown && <TerminalView key={shown.id} live={live} state={state} terminal={shown} />}
      <ErrorNote text={error} />
    </section>
  );
}
