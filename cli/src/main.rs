//! `inspect`: Open-Inspect sessions from the terminal. Start one (and follow it), attach to
//! one live, list and read them, stop or archive them, and bring a session's change home:
//! as a patch on this clone (`apply`) or as its branch (`handoff`).

mod api;
mod commands;
mod complete;
mod config;
mod follow;
mod render;
mod screen;
mod signin;

use api::{exit, Failure};
use clap::{Args, CommandFactory, Parser, Subcommand};
use clap_complete::engine::ArgValueCompleter;

const EXIT_CODES: &str = "\
Exit codes:
  0   done (with --wait: the prompt finished)
  1   the prompt failed (--wait), or the server refused what was asked
  2   not signed in, or the token was refused (revoked, expired): run `inspect login`
  3   no such session
  4   the server could not be reached
  64  the command line was wrong

The server and token come from `inspect login` (kept in ~/.config/inspect/config.json,
mode 0600); INSPECT_URL and INSPECT_TOKEN override them. A server in local mode
(./scripts/dev.sh) needs no token.";

#[derive(Parser)]
#[command(
    name = "inspect",
    version,
    about = "Background coding sessions from the terminal: start, follow, apply, hand off.",
    after_help = EXIT_CODES
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Sign in to a server: the browser hands this command a new API token (or paste one,
    /// or give it with --token-stdin); kept with the server's URL.
    Login {
        /// The server (default: the local one, http://127.0.0.1:8787).
        url: Option<String>,
        /// The token itself (visible in your shell's history: prefer --token-stdin).
        #[arg(long, conflicts_with = "token_stdin")]
        token: Option<String>,
        /// Read the token from stdin.
        #[arg(long)]
        token_stdin: bool,
        /// Print the sign-in page's address instead of opening a browser.
        #[arg(long)]
        no_browser: bool,
    },
    /// Forget the kept token.
    Logout,
    /// Start a session; with a prompt (or `-` for stdin), send it and follow it.
    New(NewArgs),
    /// Follow a session live; each line you type is sent as a prompt (Ctrl-C detaches,
    /// the session keeps running).
    Attach {
        #[arg(add = ArgValueCompleter::new(complete::sessions))]
        session: String,
    },
    /// List sessions, newest first.
    Ls {
        /// Only the sessions you made.
        #[arg(long)]
        mine: bool,
        /// created, active, archived or all.
        #[arg(long)]
        status: Option<String>,
        /// owner/name.
        #[arg(long, add = ArgValueCompleter::new(complete::repos))]
        repo: Option<String>,
        #[arg(long)]
        json: bool,
    },
    /// A session's state.
    Show {
        #[arg(add = ArgValueCompleter::new(complete::sessions))]
        session: String,
        #[arg(long)]
        json: bool,
    },
    /// A session's timeline, start to end (as lines, or JSON one event a line).
    Log {
        #[arg(add = ArgValueCompleter::new(complete::sessions))]
        session: String,
        #[arg(long)]
        json: bool,
    },
    /// What the session made: pull requests, pictures, reviews.
    Artifacts {
        #[arg(add = ArgValueCompleter::new(complete::sessions))]
        session: String,
        #[arg(long)]
        json: bool,
    },
    /// Stop the running prompt.
    Stop {
        #[arg(add = ArgValueCompleter::new(complete::sessions))]
        session: String,
    },
    /// Archive a session.
    Archive {
        #[arg(add = ArgValueCompleter::new(complete::sessions))]
        session: String,
    },
    /// The session's change: a unified diff of each repository.
    Diff {
        #[arg(add = ArgValueCompleter::new(complete::sessions))]
        session: String,
        /// owner/name, when the session has several repositories.
        #[arg(long, add = ArgValueCompleter::new(complete::repos))]
        repo: Option<String>,
    },
    /// Apply the session's change to this clone's working tree (refuses a dirty tree
    /// unless --force).
    Apply {
        #[arg(add = ArgValueCompleter::new(complete::sessions))]
        session: String,
        #[arg(long)]
        repo: Option<String>,
        #[arg(long)]
        force: bool,
    },
    /// Fetch the session's branch from where it was pushed and check it out.
    Handoff {
        #[arg(add = ArgValueCompleter::new(complete::sessions))]
        session: String,
        /// The remote it was pushed to.
        #[arg(long, default_value = "origin")]
        remote: String,
    },
    /// Secrets given to sandboxes: everywhere, for a repository, or for an environment.
    Secrets {
        #[command(subcommand)]
        op: SecretsOp,
        /// owner/name: the repository's secrets.
        #[arg(long, global = true, conflicts_with = "env", add = ArgValueCompleter::new(complete::repos))]
        repo: Option<String>,
        /// An environment's secrets, by name.
        #[arg(long, global = true)]
        env: Option<String>,
    },
    /// Automations: list them, run one now, pause or resume one.
    Automations {
        #[command(subcommand)]
        op: AutomationsOp,
    },
    /// Print a shell's completions (bash, zsh, fish, elvish, powershell): e.g.
    /// `source <(inspect completions bash)`; repository names and sessions come from the
    /// server as you type.
    Completions { shell: clap_complete::Shell },
}

#[derive(Subcommand)]
pub enum SecretsOp {
    /// Set a secret; its value is read from stdin (never from the command line, never
    /// echoed).
    Set { name: String },
    /// The names set (never the values).
    Ls {
        #[arg(long)]
        json: bool,
    },
    /// Remove a secret.
    Rm { name: String },
}

#[derive(Subcommand)]
pub enum AutomationsOp {
    Ls {
        #[arg(long)]
        json: bool,
    },
    /// Start a run now.
    Run {
        id: String,
    },
    Pause {
        id: String,
    },
    Resume {
        id: String,
    },
}

#[derive(Args)]
pub struct NewArgs {
    /// owner/name[@branch]; more than once for several repositories.
    #[arg(long = "repo", add = ArgValueCompleter::new(complete::repos))]
    pub repos: Vec<String>,
    /// An environment, by name.
    #[arg(long)]
    pub env: Option<String>,
    #[arg(long)]
    pub model: Option<String>,
    /// The reasoning effort (low, medium, high…).
    #[arg(long)]
    pub effort: Option<String>,
    /// opencode or claude-code.
    #[arg(long)]
    pub agent: Option<String>,
    #[arg(long)]
    pub title: Option<String>,
    /// Exit when the prompt ends: 0 if it finished, 1 if it failed.
    #[arg(long)]
    pub wait: bool,
    /// The first prompt; `-` reads it from stdin.
    pub prompt: Option<String>,
}

fn main() {
    // A shell asking for completions (`COMPLETE=bash inspect …`) is answered here.
    clap_complete::CompleteEnv::with_factory(Cli::command)
        .bin("inspect")
        .complete();
    let code = match tokio::runtime::Runtime::new() {
        Ok(runtime) => runtime.block_on(start()),
        Err(e) => {
            eprintln!("inspect: {e}");
            exit::FAILED
        }
    };
    std::process::exit(code);
}

async fn start() -> i32 {
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => {
            let code = if e.use_stderr() { exit::USAGE } else { 0 };
            let _ = e.print();
            return code;
        }
    };
    let outcome = match cli.command {
        Command::Completions { shell } => completions(shell),
        Command::Login {
            url,
            token,
            token_stdin,
            no_browser,
        } => commands::login(url, token, token_stdin, !no_browser).await,
        Command::Logout => commands::logout(),
        other => match commands::api() {
            Ok(api) => run(&api, other).await,
            Err(e) => Err(e),
        },
    };
    match outcome {
        Ok(code) => code,
        Err(Failure { code, message }) => {
            eprintln!("inspect: {message}");
            code
        }
    }
}

/// The shell's registration: it calls `inspect` back for each completion, so repository
/// names and sessions come from the server.
fn completions(shell: clap_complete::Shell) -> api::Result<i32> {
    let shells = clap_complete::env::Shells::builtins();
    let completer = shells
        .completer(&shell.to_string())
        .ok_or_else(|| Failure::new(exit::USAGE, format!("no completions for {shell}")))?;
    let me = std::env::current_exe()
        .map(|p| p.to_string_lossy().into_owned())
        .unwrap_or_else(|_| "inspect".to_owned());
    completer
        .write_registration(
            "COMPLETE",
            "inspect",
            "inspect",
            &me,
            &mut std::io::stdout(),
        )
        .map_err(|e| Failure::failed(e.to_string()))?;
    Ok(0)
}

async fn run(api: &api::Api, command: Command) -> api::Result<i32> {
    match command {
        Command::New(args) => commands::new(api, args).await,
        Command::Attach { session } => commands::attach(api, &session).await,
        Command::Ls {
            mine,
            status,
            repo,
            json,
        } => commands::ls(api, mine, status, repo, json).await,
        Command::Show { session, json } => commands::show(api, &session, json).await,
        Command::Log { session, json } => commands::log(api, &session, json).await,
        Command::Artifacts { session, json } => commands::artifacts(api, &session, json).await,
        Command::Stop { session } => commands::act(api, &session, "stop").await,
        Command::Archive { session } => commands::act(api, &session, "archive").await,
        Command::Diff { session, repo } => commands::diff(api, &session, repo).await,
        Command::Apply {
            session,
            repo,
            force,
        } => commands::apply(api, &session, repo, force).await,
        Command::Handoff { session, remote } => commands::handoff(api, &session, &remote).await,
        Command::Secrets { op, repo, env } => commands::secrets(api, op, repo, env).await,
        Command::Automations { op } => commands::automations(api, op).await,
        Command::Login { .. } | Command::Logout | Command::Completions { .. } => Err(Failure::new(
            exit::USAGE,
            "handled before the server is asked",
        )),
    }
}
