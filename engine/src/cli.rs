//! Command-line front ends (kept in the library so tests can call them).
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
    let stream = lim.max_result_bytes == u64::MAX;
    let stdin = std::io::stdin();
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
