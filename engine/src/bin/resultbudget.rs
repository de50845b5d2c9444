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
    /// Run an MCP server behind the budget: resultbudget proxy [flags] -- <server command>.
    Proxy(cli::ProxyArgs),
    /// Check an inventory file, or audit a server's tools against it.
    #[command(subcommand)]
    Inventory(cli::InventoryCmd),
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let code = match cli.cmd {
        Cmd::Budget(a) => cli::run_budget(a),
        Cmd::Filter(a) => cli::run_filter(a),
        Cmd::Proxy(a) => cli::run_proxy(a),
        Cmd::Inventory(c) => cli::run_inventory(c),
    };
    ExitCode::from(code)
}
