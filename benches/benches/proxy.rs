//! What `resultbudget proxy` costs, without a network: a small stdio server
//! (`rb-bench-server`, this crate's binary) driven directly, then through the
//! proxy binary.
//!
//! - latency: p50/p99 of small `tools/call` round trips, server alone and
//!   through the proxy;
//! - throughput: one 100 MB `tools/call` result, server alone, through the
//!   proxy with its default budget (64 KiB result: the text is skipped), and
//!   through the proxy with every budget off (the 100 MB are copied).
//!
//! The proxy binary: `$RB_BIN`, else `target/release/resultbudget` (build it
//! with `cargo build --release -p resultbudget`; in test mode the debug one is
//! taken first). Results go to stdout and to `target/rb-proxy-bench.json`,
//! which `benches/report.py` reads. In test mode (`cargo test --benches`) the
//! counts and sizes are small; a missing proxy binary then skips the bench.

use std::io::{BufRead, BufReader, Write};
use std::path::PathBuf;
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::time::{Duration, Instant};

use resultbudget_benches as rbb;

const SERVER: &str = env!("CARGO_BIN_EXE_rb-bench-server");

fn proxy_bin(bench: bool) -> Option<PathBuf> {
    if let Some(p) = std::env::var_os("RB_BIN") {
        return Some(PathBuf::from(p));
    }
    let t = rbb::target_dir();
    let order = if bench {
        ["release", "debug"]
    } else {
        ["debug", "release"]
    };
    order
        .iter()
        .map(|p| t.join(p).join("resultbudget"))
        .find(|p| p.is_file())
}

struct Peer {
    child: Child,
    stdin: ChildStdin,
    stdout: BufReader<ChildStdout>,
}

impl Peer {
    fn start(cmd: &mut Command) -> Peer {
        let mut child = cmd
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("start the server");
        let stdin = child.stdin.take().expect("stdin");
        let stdout = BufReader::with_capacity(1 << 20, child.stdout.take().expect("stdout"));
        let mut p = Peer {
            child,
            stdin,
            stdout,
        };
        let init = p.call(
            br#"{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"rb-proxy-bench","version":"0"}}}"#,
        );
        assert!(init.starts_with(b"{\"jsonrpc\":\"2.0\",\"id\":0,\"result\":{"));
        p.send(br#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#);
        p
    }

    fn send(&mut self, line: &[u8]) {
        self.stdin.write_all(line).expect("write");
        self.stdin.write_all(b"\n").expect("write");
        self.stdin.flush().expect("flush");
    }

    /// Send one request line and read one response line (without its newline).
    fn call(&mut self, line: &[u8]) -> Vec<u8> {
        self.send(line);
        let mut resp = Vec::new();
        self.stdout.read_until(b'\n', &mut resp).expect("read");
        assert_eq!(resp.pop(), Some(b'\n'), "the response line ended early");
        resp
    }

    /// Send one request and count the bytes of its response line (not kept).
    fn call_counting(&mut self, line: &[u8]) -> (usize, Vec<u8>) {
        self.send(line);
        let mut n = 0usize;
        let mut head = Vec::new();
        loop {
            let buf = self.stdout.fill_buf().expect("read");
            assert!(!buf.is_empty(), "the response line ended early");
            if head.len() < 256 {
                head.extend_from_slice(buf.get(..(256 - head.len()).min(buf.len())).unwrap_or(&[]));
            }
            if let Some(i) = buf.iter().position(|&b| b == b'\n') {
                n += i;
                self.stdout.consume(i + 1);
                return (n, head);
            }
            let len = buf.len();
            n += len;
            self.stdout.consume(len);
        }
    }

    fn stop(mut self) {
        drop(self.stdin);
        let _ = self.child.wait();
    }
}

fn small_call(id: u64) -> Vec<u8> {
    format!(
        r#"{{"jsonrpc":"2.0","id":{id},"method":"tools/call","params":{{"name":"echo","arguments":{{"message":"hello"}}}}}}"#
    )
    .into_bytes()
}

fn big_call(id: u64) -> Vec<u8> {
    format!(
        r#"{{"jsonrpc":"2.0","id":{id},"method":"tools/call","params":{{"name":"big","arguments":{{}}}}}}"#
    )
    .into_bytes()
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted.get(i).copied().unwrap_or_default()
}

struct Latency {
    p50: Duration,
    p99: Duration,
    mean: Duration,
}

/// `n` small round trips after a warm-up; each response checked.
fn latency(peer: &mut Peer, n: usize, expect: &[u8]) -> Latency {
    for i in 0..50 {
        let resp = peer.call(&small_call(1_000_000 + i));
        assert!(resp.ends_with(&expect[expect.len() - 40..]));
    }
    let mut times = Vec::with_capacity(n);
    for i in 0..n as u64 {
        let req = small_call(i + 1);
        let t = Instant::now();
        let resp = peer.call(&req);
        times.push(t.elapsed());
        let want = format!("{{\"jsonrpc\":\"2.0\",\"id\":{},", i + 1);
        assert!(resp.starts_with(want.as_bytes()) && resp.ends_with(&expect[expect.len() - 40..]));
    }
    let mean = times.iter().sum::<Duration>() / n as u32;
    times.sort();
    Latency {
        p50: percentile(&times, 0.50),
        p99: percentile(&times, 0.99),
        mean,
    }
}

/// Median seconds of `runs` big round trips; returns (seconds, response bytes, head).
fn big(peer: &mut Peer, runs: usize) -> (f64, usize, Vec<u8>) {
    let mut secs = Vec::with_capacity(runs);
    let mut last = (0, Vec::new());
    for i in 0..runs as u64 {
        let t = Instant::now();
        last = peer.call_counting(&big_call(5_000_000 + i));
        secs.push(t.elapsed().as_secs_f64());
    }
    secs.sort_by(f64::total_cmp);
    (secs[secs.len() / 2], last.0, last.1)
}

fn us(d: Duration) -> f64 {
    d.as_secs_f64() * 1e6
}

fn main() {
    let bench = rbb::bench_mode();
    let Some(proxy) = proxy_bin(bench) else {
        if bench {
            panic!("no proxy binary: run `cargo build --release -p resultbudget` first (or set RB_BIN)");
        }
        eprintln!("proxy bench skipped: no resultbudget binary under target/ (set RB_BIN)");
        return;
    };
    let (n_small, big_bytes, runs) = if bench {
        (2000, 100_000_000usize, 5)
    } else {
        (50, 2_000_000, 1)
    };
    let server = || {
        let mut c = Command::new(SERVER);
        c.arg("--big-bytes").arg(big_bytes.to_string());
        c
    };
    let via_proxy = |flags: &[&str]| {
        let mut c = Command::new(&proxy);
        c.arg("proxy").args(flags).arg("--").arg(SERVER);
        c.arg("--big-bytes").arg(big_bytes.to_string());
        c
    };
    let unlimited = [
        "--max-result-bytes",
        "none",
        "--max-text-bytes",
        "none",
        "--max-text-block-bytes",
        "none",
    ];

    // Small round trips.
    let mut alone = Peer::start(&mut server());
    let expect = alone.call(&small_call(7));
    let lat_alone = latency(&mut alone, n_small, &expect);
    let (t_alone, bytes_alone, _) = big(&mut alone, runs);
    alone.stop();

    let mut prox = Peer::start(&mut via_proxy(&[]));
    // The first tools/call makes the proxy fetch tools/list itself.
    let first = prox.call(&small_call(7));
    assert_eq!(
        first, expect,
        "a small result passes the proxy byte for byte"
    );
    let lat_proxy = latency(&mut prox, n_small, &expect);
    let (t_cut, bytes_cut, head_cut) = big(&mut prox, runs);
    prox.stop();
    assert!(
        bytes_cut < 70_000,
        "the default budget cuts the 100 MB result"
    );
    let _ = head_cut;

    let mut open = Peer::start(&mut via_proxy(&unlimited));
    let _ = open.call(&small_call(7));
    let (t_open, bytes_open, _) = big(&mut open, runs);
    open.stop();
    assert_eq!(
        bytes_open, bytes_alone,
        "with budgets off the result passes whole"
    );

    let mbps = |secs: f64| bytes_alone as f64 / secs / 1e6;
    println!("proxy bench: {n_small} small round trips, a {bytes_alone}-byte result ({runs} runs, median)");
    println!("binary: {}", proxy.display());
    println!(
        "latency server alone:   p50 {:>8.1} us  p99 {:>8.1} us  mean {:>8.1} us",
        us(lat_alone.p50),
        us(lat_alone.p99),
        us(lat_alone.mean)
    );
    println!(
        "latency through proxy:  p50 {:>8.1} us  p99 {:>8.1} us  mean {:>8.1} us",
        us(lat_proxy.p50),
        us(lat_proxy.p99),
        us(lat_proxy.mean)
    );
    println!(
        "added by the proxy:     p50 {:>8.1} us  p99 {:>8.1} us",
        us(lat_proxy.p50) - us(lat_alone.p50),
        us(lat_proxy.p99) - us(lat_alone.p99)
    );
    println!(
        "big result, server alone:            {:>8.1} MB/s ({t_alone:.3} s)",
        mbps(t_alone)
    );
    println!(
        "big result, proxy default budget:    {:>8.1} MB/s ({t_cut:.3} s, {bytes_cut} bytes out)",
        mbps(t_cut)
    );
    println!(
        "big result, proxy budgets off:       {:>8.1} MB/s ({t_open:.3} s, {bytes_open} bytes out)",
        mbps(t_open)
    );

    let json = format!(
        concat!(
            "{{\"small_round_trips\":{},\"big_bytes\":{},\"big_runs\":{},\"binary\":\"{}\",",
            "\"latency_us\":{{\"alone\":{{\"p50\":{:.2},\"p99\":{:.2},\"mean\":{:.2}}},",
            "\"proxy\":{{\"p50\":{:.2},\"p99\":{:.2},\"mean\":{:.2}}}}},",
            "\"big_seconds\":{{\"alone\":{:.5},\"proxy_default\":{:.5},\"proxy_unlimited\":{:.5}}},",
            "\"big_out_bytes\":{{\"alone\":{},\"proxy_default\":{},\"proxy_unlimited\":{}}},",
            "\"bench_mode\":{}}}\n"
        ),
        n_small,
        bytes_alone,
        runs,
        proxy.display().to_string().replace('\\', "/"),
        us(lat_alone.p50),
        us(lat_alone.p99),
        us(lat_alone.mean),
        us(lat_proxy.p50),
        us(lat_proxy.p99),
        us(lat_proxy.mean),
        t_alone,
        t_cut,
        t_open,
        bytes_alone,
        bytes_cut,
        bytes_open,
        bench
    );
    if bench {
        let path = rbb::target_dir().join("rb-proxy-bench.json");
        if let Err(e) = std::fs::write(&path, json) {
            eprintln!("cannot write {}: {e}", path.display());
        }
    }
}
