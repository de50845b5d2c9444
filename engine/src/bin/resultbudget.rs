//! The `resultbudget` command: `budget`, `filter`, `proxy`, `inventory`.
use clap::{Parser, Subcommand};
use resultbudget::cli;
use std::process::ExitCode;

#[derive(Parser)]
#[command(
    name = "resultbudget",
    version,
    about = "Streaming budgets for MCP tool results"
)]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    /// Budget one JSON value from stdin to stdout; the truncation record goes to stderr.
    Budget(cli::BudgetArgs),
    /// Budget every tools/call result in newline-delimited JSON-RPC from stdin.
    Filter(cli::FilterArgs),
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let code = match cli.cmd {
        Cmd::Budget(a) => cli::run_budget(a),
        Cmd::Filter(a) => cli::run_filter(a),
    };
    ExitCode::from(code)
}
