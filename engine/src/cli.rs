//! Command-line front ends (kept in the library so tests can call them).
use crate::guard::{ArgCaps, Guard};
use crate::inventory::Inventory;
use crate::mcp::{CallInfo, McpLimits, Projector, Treat};
use crate::proxy::{LogLevel, ProxyConfig};
use crate::{Budget, Limits};
use clap::Args;
use std::io::{Read, Write};

/// Parse a limit: a number, or `none` / `unlimited` for no limit.
pub fn parse_limit(s: &str) -> Result<u64, String> {
    match s {
        "none" | "unlimited" => Ok(u64::MAX),
        _ => parse_size(s),
    }
}

/// A byte size: plain digits, or with a `k`/`KiB`/`m`/`MiB` suffix (powers of 1024).
pub fn parse_size(s: &str) -> Result<u64, String> {
    let t = s.trim();
    let lower = t.to_ascii_lowercase();
    let (num, mult) = if let Some(n) = lower
        .strip_suffix("kib")
        .or_else(|| lower.strip_suffix('k'))
    {
        (n, 1024u64)
    } else if let Some(n) = lower
        .strip_suffix("mib")
        .or_else(|| lower.strip_suffix('m'))
    {
        (n, 1024 * 1024)
    } else {
        (lower.as_str(), 1)
    };
    let v: u64 = num
        .trim()
        .parse()
        .map_err(|_| format!("not a size: {s:?}"))?;
    v.checked_mul(mult)
        .ok_or_else(|| format!("size too large: {s:?}"))
}

/// What to do with a `\u` escape of a surrogate outside a pair (`"\\ud83d"`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum LoneSurrogates {
    /// Read it as one character (U+FFFD, 3 bytes), as `JSON.parse` and
    /// Python's `json` do; its bytes are kept or cut, never changed.
    Pass,
    /// Refuse the input as not valid JSON (RFC 8259 leaves it to the reader).
    Refuse,
}

impl LoneSurrogates {
    pub fn on(self) -> bool {
        self == LoneSurrogates::Pass
    }
}

fn parse_depth(s: &str) -> Result<u32, String> {
    parse_limit(s).map(|v| v.min(u32::MAX as u64) as u32)
}

#[derive(Args, Debug, Clone)]
pub struct BudgetArgs {
    /// Items kept per array ("none" for no limit).
    #[arg(long, value_parser = parse_limit, default_value_t = Limits::DEFAULT.max_list_items)]
    pub max_list_items: u64,
    /// Members kept per object.
    #[arg(long, value_parser = parse_limit, default_value_t = Limits::DEFAULT.max_map_keys)]
    pub max_map_keys: u64,
    /// Decoded UTF-8 bytes kept per string value.
    #[arg(long, value_parser = parse_limit, default_value_t = Limits::DEFAULT.max_string_bytes)]
    pub max_string_bytes: u64,
    /// Nesting kept; deeper containers are emptied.
    #[arg(long, value_parser = parse_depth, default_value_t = Limits::DEFAULT.max_depth)]
    pub max_depth: u32,
    /// Encoded bytes of the whole output ("none" streams with no ceiling).
    #[arg(long, value_parser = parse_limit, default_value_t = Limits::DEFAULT.max_result_bytes)]
    pub max_result_bytes: u64,
    /// Input nesting refused as an error beyond this.
    #[arg(long, default_value_t = Limits::DEFAULT.max_nesting)]
    pub max_nesting: u32,
    /// Write the truncation record to this file instead of stderr.
    #[arg(long)]
    pub report: Option<std::path::PathBuf>,
    /// A surrogate escape outside a pair: refused (the default here, for
    /// generic JSON) or read as U+FFFD and passed.
    #[arg(long, value_enum, default_value = "refuse")]
    pub lone_surrogates: LoneSurrogates,
}

impl BudgetArgs {
    pub fn limits(&self) -> Limits {
        Limits {
            max_list_items: self.max_list_items,
            max_map_keys: self.max_map_keys,
            max_string_bytes: self.max_string_bytes,
            max_depth: self.max_depth,
            max_result_bytes: self.max_result_bytes,
            max_nesting: self.max_nesting,
        }
    }
}

/// Output of one line `filter` holds before it streams it on (only reached
/// without a byte ceiling): the writers' hold.
pub use crate::transport::MAX_HOLD;

/// Size of the chunks read from stdin.
pub const READ_CHUNK: usize = 64 * 1024;

/// `resultbudget budget`: stdin → stdout, record → stderr or `--report`.
/// With a byte ceiling the output is held (it is bounded by the ceiling) and
/// written only when the input proved valid, so an error never leaves a partial
/// value. With `--max-result-bytes none` output streams; after an error the open
/// containers are closed so stdout still holds one valid value.
pub fn run_budget(args: BudgetArgs) -> u8 {
    let lim = args.limits();
    let mut b = match Budget::new(lim) {
        Ok(b) => b,
        Err(e) => {
            eprintln!("resultbudget: {e}");
            return 2;
        }
    };
    b.set_lone_surrogates(args.lone_surrogates.on());
    let stream = lim.max_result_bytes == u64::MAX;
    let stdin = std::io::stdin();
    // When stdin is a pipe: room for the writer to go on while we budget.
    crate::framing::widen_pipe(&stdin);
    let mut input = stdin.lock();
    let stdout = std::io::stdout();
    let mut stdout = stdout.lock();
    let mut buf = vec![0u8; READ_CHUNK];
    let mut out = Vec::with_capacity(READ_CHUNK + 1024);
    let result: Result<(), String> = (|| {
        loop {
            let n = match input.read(&mut buf) {
                Ok(0) => break,
                Ok(n) => n,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(format!("reading stdin: {e}")),
            };
            b.feed(buf.get(..n).unwrap_or(&[]), &mut out)
                .map_err(|e| e.to_string())?;
            if stream {
                stdout.write_all(&out).map_err(|e| e.to_string())?;
                out.clear();
            }
        }
        b.finish(&mut out).map_err(|e| e.to_string())?;
        Ok(())
    })();
    if let Err(msg) = result {
        if stream {
            out.clear();
            b.abort(&mut out);
            let _ = stdout.write_all(&out);
            let _ = stdout.write_all(b"\n");
        }
        eprintln!("resultbudget: invalid input: {msg}");
        return 1;
    }
    out.push(b'\n');
    if let Err(e) = stdout.write_all(&out).and_then(|_| stdout.flush()) {
        eprintln!("resultbudget: writing stdout: {e}");
        return 1;
    }
    let mut rec = b.record().to_json();
    rec.push(b'\n');
    let written = match &args.report {
        Some(p) => std::fs::write(p, &rec).map_err(|e| e.to_string()),
        None => std::io::stderr().write_all(&rec).map_err(|e| e.to_string()),
    };
    if let Err(e) = written {
        eprintln!("resultbudget: writing the record: {e}");
        return 1;
    }
    0
}

/// Flags of the MCP projection, shared by `filter` and `proxy`.
#[derive(Args, Debug, Clone)]
pub struct McpArgs {
    /// Encoded bytes of the whole `result`, truncation record included (min 1024).
    #[arg(long, value_parser = parse_limit, default_value_t = McpLimits::DEFAULT.max_result_bytes)]
    pub max_result_bytes: u64,
    /// Decoded text bytes kept across all text blocks (markers included).
    #[arg(long, value_parser = parse_limit, default_value_t = McpLimits::DEFAULT.max_text_bytes)]
    pub max_text_bytes: u64,
    /// Decoded text bytes kept per text block (marker included).
    #[arg(long, value_parser = parse_limit, default_value_t = McpLimits::DEFAULT.max_text_block_bytes)]
    pub max_text_block_bytes: u64,
    /// Content blocks kept.
    #[arg(long, value_parser = parse_limit, default_value_t = McpLimits::DEFAULT.max_content_blocks)]
    pub max_content_blocks: u64,
    /// Items per array in structuredContent and other free-form values.
    #[arg(long, value_parser = parse_limit, default_value_t = McpLimits::DEFAULT.max_list_items)]
    pub max_list_items: u64,
    /// Members per object in free-form values.
    #[arg(long, value_parser = parse_limit, default_value_t = McpLimits::DEFAULT.max_map_keys)]
    pub max_map_keys: u64,
    /// Decoded bytes per string in free-form values.
    #[arg(long, value_parser = parse_limit, default_value_t = McpLimits::DEFAULT.max_string_bytes)]
    pub max_string_bytes: u64,
    /// Nesting kept in free-form values (structuredContent is level 1).
    #[arg(long, value_parser = parse_depth, default_value_t = McpLimits::DEFAULT.max_depth)]
    pub max_depth: u32,
    /// Encoded bytes of structuredContent.
    #[arg(long, value_parser = parse_limit, default_value_t = McpLimits::DEFAULT.max_structured_bytes)]
    pub max_structured_bytes: u64,
    /// Input nesting refused as an error beyond this.
    #[arg(long, default_value_t = McpLimits::DEFAULT.max_nesting)]
    pub max_nesting: u32,
}

impl McpArgs {
    pub fn limits(&self) -> McpLimits {
        McpLimits {
            max_result_bytes: self.max_result_bytes,
            max_text_bytes: self.max_text_bytes,
            max_text_block_bytes: self.max_text_block_bytes,
            max_content_blocks: self.max_content_blocks,
            max_list_items: self.max_list_items,
            max_map_keys: self.max_map_keys,
            max_string_bytes: self.max_string_bytes,
            max_depth: self.max_depth,
            max_structured_bytes: self.max_structured_bytes,
            max_nesting: self.max_nesting,
        }
    }
}

#[derive(Args, Debug, Clone)]
pub struct FilterArgs {
    #[command(flatten)]
    pub mcp: McpArgs,
    /// Treat every result as typed (all or nothing), as for a tool with an outputSchema.
    #[arg(long)]
    pub typed: bool,
    /// With --typed: the tool may change state (an over-budget result yields a receipt).
    #[arg(long)]
    pub mutating: bool,
    /// Print each message's truncation record (when something was cut) to stderr, as JSON.
    #[arg(long)]
    pub records: bool,
    /// Print one human-readable line per message to stderr: kept as is, or what was cut.
    #[arg(long)]
    pub summary: bool,
    /// Tool inventory; with --tool, that tool's row sets the budget, typed and read-only.
    #[arg(long)]
    pub inventory: Option<std::path::PathBuf>,
    /// The tool whose results these are (a filter has no request to read it from).
    #[arg(long)]
    pub tool: Option<String>,
    /// A surrogate escape outside a pair, which JavaScript writes for a string
    /// cut inside a pair: read as U+FFFD and passed (the default), or refused.
    #[arg(long, value_enum, default_value = "pass")]
    pub lone_surrogates: LoneSurrogates,
}

/// `resultbudget filter`: newline-delimited JSON-RPC on stdin; every response
/// with a `result` is budgeted as a `tools/call` result; one output line per
/// input line. A line that is not valid JSON becomes a JSON-RPC error line
/// (`-32700`, with the id when it could be read) and the stream goes on.
pub fn run_filter(args: FilterArgs) -> u8 {
    let inventory = match load_inventory(args.inventory.as_deref()) {
        Ok(i) => i,
        Err(code) => return code,
    };
    let row = match (&inventory, &args.tool) {
        (Some(inv), Some(t)) => match inv.row(t) {
            Some(r) => Some(r.clone()),
            None => {
                eprintln!("resultbudget: the inventory has no row for tool {t}");
                return 2;
            }
        },
        (Some(_), None) => {
            eprintln!(
                "resultbudget: --inventory needs --tool NAME in filter (which tool's row applies)"
            );
            return 2;
        }
        _ => None,
    };
    let lim = match &row {
        Some(r) => r.apply_result_limits(args.mcp.limits()),
        None => args.mcp.limits(),
    };
    let mut p = match Projector::new(lim) {
        Ok(p) => p,
        Err(e) => {
            eprintln!("resultbudget: {e}");
            return 2;
        }
    };
    p.set_lone_surrogates(args.lone_surrogates.on());
    let call = CallInfo {
        tool: args.tool.clone(),
        typed: args.typed || row.as_ref().is_some_and(|r| r.typed),
        read_only: row.as_ref().map_or(!args.mutating, |r| r.read_only),
        request_id: None,
        modern: false,
    };
    let stdin = std::io::stdin();
    // When stdin is a pipe: room for the writer to go on while we budget.
    crate::framing::widen_pipe(&stdin);
    let stdout = std::io::stdout();
    let mut lines = crate::framing::LineReader::new(stdin.lock());
    let mut stdout = std::io::BufWriter::new(stdout.lock());
    let mut out = Vec::with_capacity(READ_CHUNK);
    let mut failed = false;
    let mut line_no = 0u64;
    let mut in_bytes = 0u64;
    let mut out_bytes = 0u64;
    let mut streamed = false;
    p.begin(Treat::ToolResult(call.clone()));
    // The line's first byte that is not whitespace (`None`: a blank line so
    // far); any other than `{` makes it something other than one message (a
    // batch, a bare value). Whether it is one answer, the projector says
    // (`Projector::repeated`).
    let mut first: Option<u8> = None;
    loop {
        let ev = match lines.next_piece() {
            Ok(ev) => ev,
            Err(e) => {
                eprintln!("resultbudget: reading stdin: {e}");
                return 1;
            }
        };
        match ev {
            crate::framing::Piece::Data(bytes) => {
                in_bytes += bytes.len() as u64;
                if first.is_none() {
                    first = crate::framing::first_content(bytes);
                }
                // A batch's results would pass unbudgeted (the projector
                // budgets one message): the line is answered as the proxy
                // answers it (`docs/proxy.md`).
                let not_message = crate::framing::not_one_object(first);
                if !failed {
                    let was_one_answer = p.repeated().is_none();
                    if let Err(e) = p.feed(bytes, &mut out) {
                        failed = true;
                        eprintln!("resultbudget: line {}: {e}", line_no + 1);
                    }
                    // Readers keep the last of duplicate members, which
                    // need not be the `id` or `result` the projector read
                    // (`docs/proxy.md`). Said once, where it shows.
                    if let (true, Some(what)) = (was_one_answer, p.repeated()) {
                        eprintln!("resultbudget: line {}: {what}", line_no + 1);
                    }
                }
                if not_message || p.repeated().is_some() {
                    // Still read to the end (a broken one is answered as
                    // broken, and the error names the last `id`), but none
                    // of it is kept.
                    out.clear();
                }
                // A line is held so a broken one can be replaced whole; past
                // MAX_HOLD (only without a ceiling) it streams instead, and
                // from then on each piece goes out as soon as it is final
                // (batching more would only stall the pipes in turn).
                if !failed
                    && !not_message
                    && p.repeated().is_none()
                    && !out.is_empty()
                    && (streamed || out.len() > MAX_HOLD)
                {
                    if stdout.write_all(&out).is_err() {
                        return 1;
                    }
                    out_bytes += out.len() as u64;
                    out.clear();
                    streamed = true;
                }
            }
            crate::framing::Piece::End | crate::framing::Piece::Eof { partial: true } => {
                line_no += 1;
                if first.is_none() {
                    out.clear();
                } else {
                    if !failed {
                        if let Err(e) = p.finish(&mut out) {
                            failed = true;
                            eprintln!("resultbudget: line {line_no}: {e}");
                        }
                    }
                    failed |= p.repeated().is_some();
                    if failed && streamed {
                        // Part of the line is out: end it, so the next line
                        // stays a line, then answer it as a held one is.
                        out.clear();
                        out.push(b'\n');
                        crate::jsonrpc::parse_error_line(&mut out, p.id());
                        eprintln!("resultbudget: line {line_no}: broken after {out_bytes} bytes were written");
                    } else if crate::framing::not_one_object(first) && !failed {
                        out.clear();
                        eprintln!(
                            "resultbudget: line {line_no}: not one JSON-RPC message (a batch, or a bare value)"
                        );
                        crate::jsonrpc::not_one_message_line(&mut out);
                    } else if failed {
                        out.clear();
                        crate::jsonrpc::parse_error_line(&mut out, p.id());
                    } else {
                        if args.records && p.record().truncated() {
                            let rec = p.record().to_json();
                            eprintln!("line {line_no}: {}", String::from_utf8_lossy(&rec));
                        }
                        if args.summary {
                            eprintln!(
                                "line {line_no}: {}",
                                summarize(
                                    p.record(),
                                    p.omitted_members(),
                                    in_bytes,
                                    out_bytes + out.len() as u64
                                )
                            );
                        }
                    }
                    out.push(b'\n');
                    if stdout.write_all(&out).is_err() {
                        return 1;
                    }
                }
                out.clear();
                failed = false;
                first = None;
                in_bytes = 0;
                out_bytes = 0;
                streamed = false;
                p.begin(Treat::ToolResult(call.clone()));
                if matches!(ev, crate::framing::Piece::Eof { .. }) {
                    break;
                }
            }
            crate::framing::Piece::Eof { partial: false } => break,
        }
    }
    if stdout.flush().is_err() {
        return 1;
    }
    0
}

/// Request-guard flags (caps on `tools/call` arguments).
#[derive(Args, Debug, Clone)]
pub struct GuardArgs {
    /// Encoded bytes of params.arguments.
    #[arg(long, value_parser = parse_limit, default_value_t = ArgCaps::DEFAULT.max_arg_bytes)]
    pub max_arg_bytes: u64,
    /// Items in any array of the arguments.
    #[arg(long, value_parser = parse_limit, default_value_t = ArgCaps::DEFAULT.max_arg_items)]
    pub max_arg_items: u64,
    /// UTF-8 bytes of any string of the arguments.
    #[arg(long, value_parser = parse_limit, default_value_t = ArgCaps::DEFAULT.max_arg_string_bytes)]
    pub max_arg_string_bytes: u64,
    /// Characters of any string of the arguments.
    #[arg(long, value_parser = parse_limit, default_value_t = ArgCaps::DEFAULT.max_arg_string_chars)]
    pub max_arg_string_chars: u64,
    /// Members of any object of the arguments.
    #[arg(long, value_parser = parse_limit, default_value_t = ArgCaps::DEFAULT.max_arg_keys)]
    pub max_arg_keys: u64,
    /// Nesting of the arguments (the arguments object is level 1).
    #[arg(long, value_parser = parse_limit, default_value_t = ArgCaps::DEFAULT.max_arg_depth)]
    pub max_arg_depth: u64,
    /// Bytes of a whole tools/call request line.
    #[arg(long, value_parser = parse_limit, default_value_t = ArgCaps::DEFAULT.max_request_bytes)]
    pub max_request_bytes: u64,
}

impl GuardArgs {
    pub fn caps(&self) -> ArgCaps {
        ArgCaps {
            max_arg_bytes: self.max_arg_bytes,
            max_arg_items: self.max_arg_items,
            max_arg_string_bytes: self.max_arg_string_bytes,
            max_arg_string_chars: self.max_arg_string_chars,
            max_arg_keys: self.max_arg_keys,
            max_arg_depth: self.max_arg_depth,
            max_request_bytes: self.max_request_bytes,
        }
    }
}

#[derive(Args, Debug, Clone)]
pub struct ProxyArgs {
    #[command(flatten)]
    pub mcp: McpArgs,
    #[command(flatten)]
    pub guard: GuardArgs,
    /// Tool inventory (per-tool budgets, classification, caps).
    #[arg(long)]
    pub inventory: Option<std::path::PathBuf>,
    /// Log verbosity (logs go to stderr only).
    #[arg(long, value_enum, default_value = "warn")]
    pub log_level: LogLevel,
    /// A surrogate escape outside a pair, in a result or a call, which
    /// JavaScript writes for a string cut inside a pair: read as U+FFFD and
    /// passed (the default, as the SDKs read it), or the line refused.
    #[arg(long, value_enum, default_value = "pass")]
    pub lone_surrogates: LoneSurrogates,
    /// The server command and its arguments.
    #[arg(last = true, required = true)]
    pub command: Vec<String>,
}

fn load_inventory(path: Option<&std::path::Path>) -> Result<Option<Inventory>, u8> {
    let Some(p) = path else { return Ok(None) };
    match Inventory::load(p) {
        Ok(inv) => Ok(Some(inv)),
        Err(problems) => {
            for m in problems {
                eprintln!("resultbudget: inventory {}: {m}", p.display());
            }
            Err(2)
        }
    }
}

/// `resultbudget proxy [flags] -- server command`.
pub fn run_proxy(args: ProxyArgs) -> u8 {
    let lim = args.mcp.limits();
    if let Err(e) = lim.validate() {
        eprintln!("resultbudget: {e}");
        return 2;
    }
    let inventory = match load_inventory(args.inventory.as_deref()) {
        Ok(i) => i,
        Err(code) => return code,
    };
    let cfg = ProxyConfig {
        limits: lim,
        inventory,
        guard: Guard::new(args.guard.caps()),
        log_level: args.log_level,
        lone_surrogates: args.lone_surrogates.on(),
        ..ProxyConfig::default()
    };
    crate::proxy::run(cfg, &args.command)
}

#[derive(clap::Subcommand, Debug, Clone)]
pub enum InventoryCmd {
    /// Validate an inventory file against its schema and invariants.
    Check { file: std::path::PathBuf },
    /// Start a server, read every page of tools/list, and report what breaks the contract.
    Audit(crate::audit::AuditArgs),
}

pub fn run_inventory(cmd: InventoryCmd) -> u8 {
    match cmd {
        InventoryCmd::Check { file } => match Inventory::load(&file) {
            Ok(inv) => {
                println!("{}: ok, {} row(s)", file.display(), inv.rows.len());
                0
            }
            Err(problems) => {
                for m in problems {
                    println!("{}: {m}", file.display());
                }
                1
            }
        },
        InventoryCmd::Audit(a) => crate::audit::run(a),
    }
}

/// One line for a person: what happened to a message.
/// `omitted`: envelope members dropped ([`crate::mcp::Projector::omitted_members`]).
pub fn summarize(rec: &crate::Record, omitted: u64, in_bytes: u64, out_bytes: u64) -> String {
    let members = if omitted > 0 {
        format!("; {omitted} envelope member(s) JSON-RPC does not define dropped")
    } else {
        String::new()
    };
    if !rec.truncated() {
        if omitted > 0 {
            return format!("{in_bytes} -> {out_bytes} bytes{members}");
        }
        return format!("{in_bytes} bytes, nothing cut (passed unchanged)");
    }
    let json = rec.to_json();
    let v: serde_json::Value = serde_json::from_slice(&json).unwrap_or_default();
    let paths: Vec<String> = v["omitted_paths"]
        .as_array()
        .map(|a| {
            a.iter()
                .filter_map(|p| p.as_str().map(String::from))
                .collect()
        })
        .unwrap_or_default();
    let more = rec.omitted_paths_unlisted();
    format!(
        "{in_bytes} -> {out_bytes} bytes; {} value(s) omitted, first cut by {}; at {}{}",
        rec.omitted_count(),
        rec.budget_kind().map_or("?", |k| k.as_str()),
        if paths.is_empty() {
            "(no path listed)".to_string()
        } else {
            paths.join(", ")
        },
        if more > 0 {
            format!(" and {more} more")
        } else {
            String::new()
        }
    ) + &members
}

#[cfg(test)]
mod tests {
    use super::{parse_limit, parse_size};

    #[test]
    fn sizes_take_binary_suffixes_and_refuse_the_rest() {
        for (s, want) in [
            ("0", 0),
            ("65536", 65536),
            ("64k", 64 << 10),
            ("64K", 64 << 10),
            ("64KiB", 64 << 10),
            (" 2 MiB ", 2 << 20),
            ("2m", 2 << 20),
            ("17592186044415m", 17_592_186_044_415 << 20),
        ] {
            assert_eq!(parse_size(s), Ok(want), "{s:?}");
        }
        for s in ["", "k", "1.5m", "-1", "64kb", "64 gib", "17592186044416m"] {
            assert!(parse_size(s).is_err(), "{s:?} accepted");
        }
        assert_eq!(
            parse_size("17592186044416m"),
            Err("size too large: \"17592186044416m\"".to_string())
        );
        assert_eq!(parse_limit("none"), Ok(u64::MAX));
        assert_eq!(parse_limit("unlimited"), Ok(u64::MAX));
        assert_eq!(parse_limit("8k"), Ok(8192));
    }
}
