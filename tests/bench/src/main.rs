//! The benchmarks (`scripts/bench.sh`): one program, each benchmark a subcommand, that drives
//! the real stack and the real sandboxes through the test harness and prints what it
//! measured. One program, not nine: each would compile and link its own copy of the
//! harness's generic code (~100 CPU-s of every build that includes them).
//!
//! Run: `cargo run --release -p inspect-bench -- <benchmark>`; `--help` lists them. Each
//! module's own comment says what it measures and which settings it reads.

mod automations;
mod changes;
mod echo;
mod egress;
mod inbox;
mod sandbox;
mod scale;
mod session;
mod terminal;

use anyhow::Result;
use clap::{Parser, ValueEnum};

#[derive(Parser)]
#[command(about = "The benchmarks: drive the real stack and print what was measured")]
struct Args {
    /// Which benchmark to run.
    benchmark: Benchmark,
}

/// Each is also known by its old program's name (`session-bench`, …), as the benchmark
/// records call them.
#[derive(Clone, Copy, PartialEq, Eq, ValueEnum)]
enum Benchmark {
    /// The hot path: events through one session to its clients, fan-out, tails.
    #[value(alias = "session-bench")]
    Session,
    /// A sandbox's start, resume and turns through the local host.
    #[value(alias = "sandbox-bench")]
    Sandbox,
    /// Many active sessions at once: the scale curve.
    #[value(alias = "scale-bench")]
    Scale,
    /// A burst of prompts: each prompt's own echo.
    #[value(alias = "echo-bench")]
    Echo,
    /// The inbox under load.
    #[value(alias = "inbox-bench")]
    Inbox,
    /// Schedules due in one tick.
    #[value(alias = "automations-bench")]
    Automations,
    /// The review's changes on a large repository.
    #[value(alias = "changes-bench")]
    Changes,
    /// A terminal's round trip.
    #[value(alias = "terminal-bench")]
    Terminal,
    /// The sandbox's egress guard.
    #[value(alias = "egress-bench")]
    Egress,
}

fn main() -> Result<()> {
    let args = Args::parse();
    let mut runtime = tokio::runtime::Builder::new_multi_thread();
    // The hot path's client side on two threads, as it was measured since the first wave.
    if args.benchmark == Benchmark::Session {
        runtime.worker_threads(2);
    }
    runtime.enable_all().build()?.block_on(async {
        match args.benchmark {
            Benchmark::Session => session::benchmark().await,
            Benchmark::Sandbox => sandbox::benchmark().await,
            Benchmark::Scale => scale::benchmark().await,
            Benchmark::Echo => echo::benchmark().await,
            Benchmark::Inbox => inbox::benchmark().await,
            Benchmark::Automations => automations::benchmark().await,
            Benchmark::Changes => changes::benchmark().await,
            Benchmark::Terminal => terminal::benchmark().await,
            Benchmark::Egress => egress::benchmark().await,
        }
    })
}
