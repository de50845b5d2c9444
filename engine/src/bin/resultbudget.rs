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
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let code = match cli.cmd {
        Cmd::Budget(a) => cli::run_budget(a),
    };
    ExitCode::from(code)
}
