//! `inspect-supervisor`: one binary for the sandbox side.
//!
//! - `host`: the local sandbox provider (the embedded default). Serves an HTTP API on
//!   loopback and runs sandboxes as local process trees under a data directory.
//! - `run`: inside a sandbox, prepares the workspace, runs the agent and bridges it to the
//!   session.
//! - `build`: inside an image build's sandbox, clones and sets up the workspace.
//! - `credential-helper`: git's credential-helper protocol, answered by the control plane.

mod agent_tool;
mod credential;
mod host;
mod run;

use clap::{Parser, Subcommand};
use std::net::SocketAddr;
use std::path::PathBuf;

#[derive(Parser)]
#[command(name = "inspect-supervisor", version, about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Serve the local sandbox provider API on loopback.
    Host {
        /// Address to listen on; must be a loopback address.
        #[arg(long, env = "INSPECT_HOST_LISTEN", default_value = "127.0.0.1:8788")]
        listen: SocketAddr,
        /// Directory that holds every sandbox's workspace and state.
        #[arg(long, env = "INSPECT_HOST_DATA_DIR")]
        data_dir: PathBuf,
        /// Shared secret the control plane sends as `Authorization: Bearer <secret>`.
        #[arg(long, env = "SANDBOX_HOST_SECRET", hide_env_values = true)]
        secret: String,
    },
    /// Run inside a sandbox: boot the workspace, start the agent, connect to the session.
    Run,
    /// A cluster's shared egress proxy (`deploy/kubernetes/egress.yaml`): each request is
    /// decided by the grant its sandbox carries, signed with `K8S_EGRESS_KEY`.
    EgressProxy {
        #[arg(long, env = "INSPECT_EGRESS_LISTEN", default_value = "0.0.0.0:3128")]
        listen: SocketAddr,
        #[arg(long, env = "K8S_EGRESS_KEY", hide_env_values = true)]
        key: String,
    },
    /// Run inside an image build's sandbox: clone, run setup, write the report.
    Build,
    /// Git credential helper (`git config credential.helper`); reads the request on stdin.
    CredentialHelper {
        /// The operation git asks for: get, store or erase.
        operation: String,
    },
    /// Whether PATH is a git repository with commits (what the host checks at
    /// registration); prints the finding as JSON, exits 1 when it is not.
    CheckRepository { path: String },
    /// The agent's browser as an MCP server on standard input and output (the supervisor
    /// offers it to the agent as the server `browser`).
    BrowserMcp,
    /// What the agent runs as `open-inspect` (`pr` opens a pull request).
    #[command(disable_help_flag = true)]
    AgentTool {
        #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
        args: Vec<String>,
    },
}

/// Log lines: JSON, one event per line (the same shape as the Worker's), unless
/// `INSPECT_LOG_FORMAT=text` or, with no setting, a person watches the terminal.
fn init_logging() {
    use std::io::IsTerminal;
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    let json = match std::env::var("INSPECT_LOG_FORMAT").as_deref() {
        Ok("json") => true,
        Ok("text") => false,
        _ => !std::io::stderr().is_terminal(),
    };
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr);
    if json {
        builder
            .json()
            .flatten_event(true)
            .with_current_span(false)
            .with_span_list(true)
            .init();
    } else {
        builder.init();
    }
}

fn main() -> anyhow::Result<()> {
    init_logging();
    let cli = Cli::parse();
    // Before any other thread starts. The processes that hold secrets (a sandbox's token,
    // an image build's git token, the host's secret) cannot be read by the other processes
    // of the same user — the agent and everything it runs: no /proc/<pid>/environ, mem or
    // ptrace. Their secrets also leave the environment their children inherit.
    if matches!(
        cli.command,
        Command::Run | Command::Build | Command::Host { .. } | Command::EgressProxy { .. }
    ) {
        if let Err(e) = nix::sys::prctl::set_dumpable(false) {
            tracing::warn!("could not make this process non-dumpable: {e}");
        }
    }
    match &cli.command {
        Command::Run => run::take_sandbox_token(),
        Command::Host { .. } => std::env::remove_var("SANDBOX_HOST_SECRET"),
        Command::EgressProxy { .. } => std::env::remove_var("K8S_EGRESS_KEY"),
        _ => {}
    }
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?
        .block_on(serve(cli))
}

async fn serve(cli: Cli) -> anyhow::Result<()> {
    match cli.command {
        Command::Host {
            listen,
            data_dir,
            secret,
        } => {
            host::server::serve(host::HostConfig {
                listen,
                data_dir,
                secret,
            })
            .await
        }
        Command::EgressProxy { listen, key } => {
            host::egress::serve_granted(listen, key.into_bytes()).await
        }
        Command::Run => {
            // Every line a sandbox writes names its session and sandbox.
            use tracing::Instrument;
            let var = |n: &str| std::env::var(n).unwrap_or_default();
            let span = tracing::info_span!(
                "sandbox",
                session = %var("INSPECT_SESSION_ID"),
                sandbox = %var("INSPECT_SANDBOX_ID")
            );
            // As a container's PID 1 (a Pod's only process) the supervisor gets no default
            // action for SIGTERM: a Pod's deletion would wait out its grace period with the
            // workspace volume still attached. It ends at once instead, its agent with it.
            let mut term =
                tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())?;
            let run = run::run().instrument(span.clone());
            tokio::select! {
                ended = run => ended,
                _ = term.recv() => {
                    let _in = span.enter();
                    tracing::info!("terminated: shutting down");
                    Ok(())
                }
            }
        }
        Command::Build => {
            use tracing::Instrument;
            let span = tracing::info_span!(
                "image_build",
                build = %std::env::var("INSPECT_SANDBOX_ID").unwrap_or_default()
            );
            run::build::build().instrument(span).await
        }
        Command::CredentialHelper { operation } => credential::run(&operation).await,
        Command::AgentTool { args } => agent_tool::run(args).await,
        Command::BrowserMcp => run::browser_mcp::serve().await,
        Command::CheckRepository { path } => match host::check_path(&path).await {
            Ok(found) => {
                println!("{}", serde_json::to_string(&found)?);
                Ok(())
            }
            Err(e) => {
                println!("{}", serde_json::to_string(&e.body())?);
                std::process::exit(1)
            }
        },
    }
}
