import { render } from "preact";
import { useEffect, useState } from "preact/hooks";
import { LocationProvider, Route, Router, lazy, useLocation } from "preact-iso";
import { ApiError, get, post } from "./api";
import { AutomationPage, AutomationsList } from "./components/Automations";
import { NewSession } from "./components/NewSession";
import { SessionsList } from "./components/SessionsList";
import { Jump } from "./components/Jump";
import { Settings } from "./components/Settings";
import { SignIn } from "./components/SignIn";
import { Avatar } from "./components/bits";
import { Inbox } from "./components/Inbox";
import { CliLogin } from "./components/CliLogin";
import { startInbox, useInbox } from "./inbox";
import type { Me } from "./types";
import "./style.css";

// The session page carries the markdown and highlighting code: loaded when first needed.
const SessionPage = lazy(() => import("./components/SessionPage").then((m) => m.SessionPage));
// The analytics page carries the chart library: loaded when first opened.
const Analytics = lazy(() => import("./components/Analytics").then((m) => m.Analytics));

function Header({ me }: { me: Me }) {
  const { path } = useLocation();
  const inbox = useInbox();
  const signOut = async () => {
    await post("/auth/logout").catch(() => undefined);
    location.href = "/";
  };
  const link = (href: string, label: string) => (
    <a href={href} aria-current={path === href || (href !== "/" && path.startsWith(href + "/")) ? "page" : undefined}>
      {label}
    </a>
  );
  return (
    <header class="top">
      <a class="brand" href="/">
        Open-Inspect
      </a>
      <nav aria-label="Main">
        {link("/", "Sessions")}
        <a href="/inbox" aria-current={path === "/inbox" ? "page" : undefined} data-testid="inbox-link">
          Inbox
          {inbox.unread > 0 && (
            <span class="count" data-testid="inbox-badge" aria-label={`${inbox.unread} unread`}>
              {inbox.unread}
            </span>
          )}
        </a>
        {link("/new", "New session")}
        {link("/automations", "Automations")}
        {link("/analytics", "Analytics")}
        {link("/settings", "Settings")}
      </nav>
      <span class="who">
        <Avatar name={me.user.name} src={me.user.avatar} />
        <span class="who-name">{me.user.name}</span>
        {me.via === "browser" && (
          <button type="button" class="link" onClick={signOut}>
            Sign out
          </button>
        )}
      </span>
    </header>
  );
}

function App() {
  const [me, setMe] = useState<Me | null>(null);
  const [state, setState] = useState<"loading" | "signed-out" | "ready" | "error">("loading");
  const [error, setError] = useState("");
  useEffect(() => {
    get<Me>("/auth/me")
      .then((m) => {
        setMe(m);
        setState("ready");
        startInbox();
      })
      .catch((e: unknown) => {
        if (e instanceof ApiError && e.status === 401) setState("signed-out");
        else {
          setError(String(e));
          setState("error");
        }
      });
  }, []);
  if (state === "loading") return <p class="center muted">Loading…</p>;
  if (state === "signed-out") return <SignIn />;
  if (state === "error" || !me) return <p class="center error">The control plane is not answering: {error}</p>;
  return (
    <LocationProvider>
      <Header me={me} />
      <Jump />
      <main>
        <Router>
          <Route path="/" component={() => <SessionsList me={me} />} />
          <Route path="/inbox" component={() => <Inbox />} />
          <Route path="/new" component={() => <NewSession me={me} />} />
          <Route path="/settings" component={() => <Settings me={me} />} />
          <Route path="/settings/cli" component={() => <CliLogin me={me} />} />
          <Route path="/settings/:section" component={({ section }: { section: string }) => <Settings me={me} section={section} />} />
          <Route path="/automations" component={() => <AutomationsList />} />
          <Route path="/analytics" component={() => <Analytics />} />
          <Route path="/automations/:id" component={({ id }: { id: string }) => <AutomationPage id={id} />} />
          <Route path="/sessions/:id" component={({ id }: { id: string }) => <SessionPage id={id} me={me} />} />
          <Route default component={() => <p class="center">Nothing here. <a href="/">Back to sessions</a></p>} />
        </Router>
      </main>
    </LocationProvider>
  );
}

const root = document.getElementById("app");
if (root) render(<App />, root);
