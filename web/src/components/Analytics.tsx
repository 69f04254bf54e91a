import { useEffect, useRef, useState } from "preact/hooks";
import { errorText, get } from "../api";
import type { UsageGroup, UsageReport } from "../types";
import { ErrorNote } from "./bits";

const DAY = 24 * 60 * 60 * 1000;

const dollars = (micros: number) => `$${(micros / 1_000_000).toFixed(2)}`;
const hours = (ms: number) => (ms / 3_600_000).toFixed(2);

/** What sessions used, by person, repository, week or source: a chart, the table, and its CSV. An
 *  admin sees everyone's; anyone else their own. */
export function Analytics() {
  const [by, setBy] = useState<UsageGroup>("week");
  const [days, setDays] = useState(90);
  const [since] = useState(() => Date.now());
  const [report, setReport] = useState<UsageReport | null>(null);
  const [error, setError] = useState("");
  const canvas = useRef<HTMLCanvasElement>(null);
  const query = `by=${by}&since=${since - days * DAY}`;
  useEffect(() => {
    // A report asked for before the grouping changed may answer after the new one: only
    // the latest question's answer is shown.
    let stale = false;
    get<UsageReport>(`/usage?${query}`)
      .then((r) => {
        if (stale) return;
        setReport(r);
        setError("");
      })
      .catch((e) => {
        if (!stale) setError(errorText(e));
      });
    return () => {
      stale = true;
    };
  }, [query]);
  useEffect(() => {
    const el = canvas.current;
    if (!report || !el) return;
    let cancelled = false;
    let chart: { destroy: () => void } | undefined;
    // The chart library is loaded with the page that draws it, not before.
    void import("chart.js/auto").then(({ default: Chart }) => {
      if (cancelled) return;
      const rows = report.rows;
      chart = new Chart(el, {
        type: "bar",
        data: {
          labels: rows.map((r) => r.label),
          datasets: [
            { label: "Sessions", data: rows.map((r) => r.sessions), yAxisID: "y" },
            { label: "Cost ($)", data: rows.map((r) => r.costMicros / 1_000_000), yAxisID: "y1", type: "line" },
            { label: "Sandbox hours", data: rows.map((r) => r.sandboxMs / 3_600_000), yAxisID: "y1", type: "line" },
          ],
        },
        options: {
          animation: false,
          responsive: true,
          maintainAspectRatio: false,
          scales: {
            y: { beginAtZero: true, title: { display: true, text: "sessions" } },
            y1: { beginAtZero: true, position: "right", grid: { drawOnChartArea: false } },
          },
        },
      });
      el.dataset.drawn = String(rows.length);
    });
    return () => {
      cancelled = true;
      chart?.destroy();
      delete el.dataset.drawn;
    };
  }, [report]);
  return (
    <section class="analytics">
      <h1>Analytics</h1>
      <form class="inline-form" aria-label="Usage report" onSubmit={(e) => e.preventDefault()}>
        <label>
          Group by
          <select value={by} onChange={(e) => setBy(e.currentTarget.value as UsageGroup)}>
            <option value="week">week</option>
            <option value="person">person</option>
            <option value="repository">repository</option>
            <option value="source">source (web, Slack, GitHub, Linear, automation…)</option>
          </select>
        </label>
        <label>
          Sessions made in
          <select value={days} onChange={(e) => setDays(Number(e.currentTarget.value))}>
            <option value={30}>the last 30 days</option>
            <option value={90}>the last 90 days</option>
            <option value={365}>the last year</option>
          </select>
        </label>
        <a class="button" href={`/usage?${query}&format=csv`} download="usage.csv">
          Export CSV
        </a>
      </form>
      {report && !report.everyone && <p class="muted small">Your own sessions (an admin sees everyone's).</p>}
      <div class="chart-box">
        <canvas ref={canvas} aria-label="Usage chart" data-testid="usage-chart" />
      </div>
      <table class="list" data-testid="usage-table">
        <thead>
          <tr>
            <th>{by}</th>
            <th>sessions</th>
            <th>prompts</th>
            <th>tool calls</th>
            <th>tokens in / out</th>
            <th>cost</th>
            <th>sandbox hours</th>
            <th>PRs (merged)</th>
          </tr>
        </thead>
        <tbody>
          {(report?.rows ?? []).map((r) => (
            <tr>
              <td>{r.label}</td>
              <td>{r.sessions}</td>
              <td>{r.prompts}</td>
              <td>{r.toolCalls}</td>
              <td>
                {r.tokensIn} / {r.tokensOut}
              </td>
              <td>{dollars(r.costMicros)}</td>
              <td>{hours(r.sandboxMs)}</td>
              <td>
                {r.pullRequests} ({r.merged})
              </td>
            </tr>
          ))}
          {report && report.rows.length === 0 && (
            <tr>
              <td class="muted">No sessions in this stretch.</td>
            </tr>
          )}
        </tbody>
      </table>
      <ErrorNote text={error} />
    </section>
  );
}
