//! What `resultbudget proxy` costs, without a network: a small stdio server
//! (`rb-bench-server`, this crate's binary) driven directly, behind a plain
//! relay (`rb-bench-relay`, which copies bytes and reads no JSON: the floor
//! under any stdio proxy), and behind the proxy binary. The peers run side by
//! side and take turns, so that the machine's drift falls on all alike.
//!
//! - latency: p50/p99 of small `tools/call` round trips, in rounds of 50 a
//!   peer, then again with every process on one CPU (Linux);
//! - calls in flight: 20 000 small calls written at once while the answers
//!   are read, server alone, through the relay and through the proxy;
//! - throughput: one 100 MB `tools/call` result, server alone, through the
//!   relay, through the proxy with its default budget (64 KiB result: the
//!   text is skipped), and through the proxy with every budget off (the
//!   100 MB are copied).
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
const RELAY: &str = env!("CARGO_BIN_EXE_rb-bench-relay");

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
    fn call_counting(&mut self, line: &[u8]) -> usize {
        self.send(line);
        let mut n = 0usize;
        loop {
            let buf = self.stdout.fill_buf().expect("read");
            assert!(!buf.is_empty(), "the response line ended early");
            if let Some(i) = buf.iter().position(|&b| b == b'\n') {
                n += i;
                self.stdout.consume(i + 1);
                return n;
            }
            let len = buf.len();
            n += len;
            self.stdout.consume(len);
        }
    }

    /// `n` small calls written at once (by a thread) while their answers are
    /// read, as a client with many calls in flight does; seconds from the
    /// first write to the last answer.
    fn pipelined(&mut self, n: usize, first_id: u64) -> f64 {
        let mut reqs = Vec::with_capacity(n * 110);
        for i in 0..n as u64 {
            reqs.extend_from_slice(&small_call(first_id + i));
            reqs.push(b'\n');
        }
        let t = Instant::now();
        let (stdin, stdout) = (&mut self.stdin, &mut self.stdout);
        std::thread::scope(|s| {
            s.spawn(move || {
                stdin.write_all(&reqs).expect("write");
                stdin.flush().expect("flush");
            });
            let mut line = Vec::new();
            for _ in 0..n {
                line.clear();
                stdout.read_until(b'\n', &mut line).expect("read");
                assert!(
                    line.starts_with(b"{\"jsonrpc\":\"2.0\",\"id\":") && line.ends_with(b"\n"),
                    "an answer to a pipelined call"
                );
            }
        });
        t.elapsed().as_secs_f64()
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

/// One timed small round trip; the response is checked.
fn small_trip(peer: &mut Peer, id: u64, expect: &[u8]) -> Duration {
    let req = small_call(id);
    let t = Instant::now();
    let resp = peer.call(&req);
    let d = t.elapsed();
    let want = format!("{{\"jsonrpc\":\"2.0\",\"id\":{id},");
    assert!(resp.starts_with(want.as_bytes()) && resp.ends_with(&expect[expect.len() - 40..]));
    d
}

/// `n` small round trips on each peer after 50 warm-up calls each, taken in
/// rounds of `ROUND` calls, the peers in turn, so that the machine's drift
/// falls on all of them alike.
fn latencies(peers: &mut [&mut Peer], n: usize, expect: &[u8]) -> Vec<Latency> {
    const ROUND: usize = 50;
    for p in peers.iter_mut() {
        for i in 0..50 {
            small_trip(p, 1_000_000 + i, expect);
        }
    }
    let mut times = vec![Vec::with_capacity(n); peers.len()];
    let mut id = 1u64;
    while times[0].len() < n {
        for (p, t) in peers.iter_mut().zip(times.iter_mut()) {
            for _ in 0..ROUND.min(n - t.len()) {
                t.push(small_trip(p, id, expect));
                id += 1;
            }
        }
    }
    times
        .into_iter()
        .map(|mut t| {
            let mean = t.iter().sum::<Duration>() / t.len() as u32;
            t.sort();
            Latency {
                p50: percentile(&t, 0.50),
                p99: percentile(&t, 0.99),
                mean,
            }
        })
        .collect()
}

/// `runs` rounds of `trial` (seconds, and what it saw) on each peer, the
/// peers in turn; per peer the median seconds and the last round's result.
fn in_turns<T: Default + Clone>(
    peers: &mut [&mut Peer],
    runs: usize,
    mut trial: impl FnMut(&mut Peer, u64) -> (f64, T),
) -> Vec<(f64, T)> {
    let mut secs = vec![Vec::with_capacity(runs); peers.len()];
    let mut last = vec![T::default(); peers.len()];
    for i in 0..runs as u64 {
        for ((p, s), l) in peers.iter_mut().zip(secs.iter_mut()).zip(last.iter_mut()) {
            let (t, seen) = trial(p, i);
            s.push(t);
            *l = seen;
        }
    }
    secs.into_iter()
        .zip(last)
        .map(|(mut s, seen)| {
            s.sort_by(f64::total_cmp);
            (s[s.len() / 2], seen)
        })
        .collect()
}

/// `runs` big round trips on each peer, in turns; per peer the median
/// seconds and the response's bytes.
fn bigs(peers: &mut [&mut Peer], runs: usize) -> Vec<(f64, usize)> {
    in_turns(peers, runs, |p, i| {
        let t = Instant::now();
        let n = p.call_counting(&big_call(5_000_000 + i));
        (t.elapsed().as_secs_f64(), n)
    })
}

/// Run `f` with this thread, and so every process it starts, on one CPU
/// (the first it may run on), then undo that; `None` where that cannot be
/// done (not Linux, or the call refused).
#[cfg(target_os = "linux")]
fn on_one_cpu<T>(f: impl FnOnce() -> T) -> Option<T> {
    use rustix::thread::{sched_getaffinity, sched_setaffinity, CpuSet};
    let before = sched_getaffinity(None).ok()?;
    let cpu = (0..CpuSet::MAX_CPU).find(|&c| before.is_set(c))?;
    let mut one = CpuSet::new();
    one.set(cpu);
    sched_setaffinity(None, &one).ok()?;
    let r = f();
    let _ = sched_setaffinity(None, &before);
    Some(r)
}

#[cfg(not(target_os = "linux"))]
fn on_one_cpu<T>(_f: impl FnOnce() -> T) -> Option<T> {
    None
}

fn lat_json(l: &Latency) -> String {
    format!(
        "{{\"p50\":{:.2},\"p99\":{:.2},\"mean\":{:.2}}}",
        us(l.p50),
        us(l.p99),
        us(l.mean)
    )
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
    let (n_small, big_bytes, runs, n_piped) = if bench {
        (2000, 100_000_000usize, 5, 20_000)
    } else {
        (50, 2_000_000, 1, 200)
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

    let via_relay = || {
        let mut c = Command::new(RELAY);
        c.arg(SERVER).arg("--big-bytes").arg(big_bytes.to_string());
        c
    };

    let mut alone = Peer::start(&mut server());
    let expect = alone.call(&small_call(7));
    let mut relay = Peer::start(&mut via_relay());
    assert_eq!(
        relay.call(&small_call(7)),
        expect,
        "the relay changes nothing"
    );
    let mut prox = Peer::start(&mut via_proxy(&[]));
    // The first tools/call makes the proxy fetch tools/list itself.
    assert_eq!(
        prox.call(&small_call(7)),
        expect,
        "a small result passes the proxy byte for byte"
    );
    let mut open = Peer::start(&mut via_proxy(&unlimited));
    let _ = open.call(&small_call(7));

    // Small round trips: the server alone, behind the plain relay, behind the proxy.
    let lat = latencies(&mut [&mut alone, &mut relay, &mut prox], n_small, &expect);
    let [lat_alone, lat_relay, lat_proxy] = &lat[..] else {
        unreachable!("three peers")
    };
    // Many small calls in flight at once: the server alone, behind the relay,
    // behind the proxy, in turns.
    let piped: Vec<f64> = in_turns(&mut [&mut alone, &mut relay, &mut prox], runs, |p, r| {
        (p.pipelined(n_piped, 10_000_000 + r * n_piped as u64), ())
    })
    .into_iter()
    .map(|(t, ())| t)
    .collect();
    // The big result through all four.
    let big = bigs(&mut [&mut alone, &mut relay, &mut prox, &mut open], runs);
    let [(t_alone, bytes_alone), (t_relay, bytes_relay), (t_cut, bytes_cut), (t_open, bytes_open)] =
        big[..]
    else {
        unreachable!("four peers")
    };
    for p in [alone, relay, prox, open] {
        p.stop();
    }
    // The small round trips again with every process on one CPU: the hops then
    // cost no wake-up on another CPU (about 25 us each on this VM), and what is
    // left between the rows is the relay's and the proxy's own work.
    let one_cpu = on_one_cpu(|| {
        let mut alone = Peer::start(&mut server());
        let _ = alone.call(&small_call(7));
        let mut relay = Peer::start(&mut via_relay());
        let _ = relay.call(&small_call(7));
        let mut prox = Peer::start(&mut via_proxy(&[]));
        let _ = prox.call(&small_call(7));
        let lat = latencies(&mut [&mut alone, &mut relay, &mut prox], n_small, &expect);
        for p in [alone, relay, prox] {
            p.stop();
        }
        lat
    });
    assert_eq!(
        bytes_relay, bytes_alone,
        "the relay passes the result whole"
    );
    assert!(
        bytes_cut < 70_000,
        "the default budget cuts the 100 MB result"
    );
    assert_eq!(
        bytes_open, bytes_alone,
        "with budgets off the result passes whole"
    );

    let mbps = |secs: f64| bytes_alone as f64 / secs / 1e6;
    println!("proxy bench: {n_small} small round trips, a {bytes_alone}-byte result ({runs} runs, median)");
    println!("binary: {}", proxy.display());
    for (name, l) in [
        ("server alone:", lat_alone),
        ("through a plain relay:", lat_relay),
        ("through the proxy:", lat_proxy),
    ] {
        println!(
            "latency {name:<24} p50 {:>8.1} us  p99 {:>8.1} us  mean {:>8.1} us",
            us(l.p50),
            us(l.p99),
            us(l.mean)
        );
    }
    println!(
        "added by the proxy:              p50 {:>8.1} us  p99 {:>8.1} us (by the relay: p50 {:.1} us)",
        us(lat_proxy.p50) - us(lat_alone.p50),
        us(lat_proxy.p99) - us(lat_alone.p99),
        us(lat_relay.p50) - us(lat_alone.p50)
    );
    if let Some([a, r, p]) = one_cpu.as_deref() {
        for (name, l) in [
            ("server alone:", a),
            ("a plain relay:", r),
            ("the proxy:", p),
        ] {
            println!(
                "on one CPU, {name:<17} p50 {:>8.1} us  p99 {:>8.1} us  mean {:>8.1} us",
                us(l.p50),
                us(l.p99),
                us(l.mean)
            );
        }
    }
    for (name, t) in ["server alone", "plain relay", "proxy"].iter().zip(&piped) {
        println!(
            "{n_piped} calls in flight, {name:<13} {:>8.3} s ({:>9.0} calls/s)",
            t,
            n_piped as f64 / t
        );
    }
    for (name, t, n) in [
        ("server alone", t_alone, bytes_alone),
        ("plain relay", t_relay, bytes_relay),
        ("proxy default budget", t_cut, bytes_cut),
        ("proxy budgets off", t_open, bytes_open),
    ] {
        println!(
            "big result, {name:<22} {:>8.1} MB/s ({t:.3} s, {n} bytes out)",
            mbps(t)
        );
    }

    let json = format!(
        concat!(
            "{{\"small_round_trips\":{},\"big_bytes\":{},\"big_runs\":{},\"binary\":\"{}\",",
            "\"latency_us\":{{\"alone\":{{\"p50\":{:.2},\"p99\":{:.2},\"mean\":{:.2}}},",
            "\"relay\":{{\"p50\":{:.2},\"p99\":{:.2},\"mean\":{:.2}}},",
            "\"proxy\":{{\"p50\":{:.2},\"p99\":{:.2},\"mean\":{:.2}}}}},",
            "\"big_seconds\":{{\"alone\":{:.5},\"relay\":{:.5},\"proxy_default\":{:.5},\"proxy_unlimited\":{:.5}}},",
            "\"big_out_bytes\":{{\"alone\":{},\"relay\":{},\"proxy_default\":{},\"proxy_unlimited\":{}}},",
            "\"latency_one_cpu_us\":{},",
            "\"pipelined\":{{\"calls\":{},\"runs\":{},\"seconds\":{{\"alone\":{:.5},\"relay\":{:.5},\"proxy\":{:.5}}}}},",
            "\"bench_mode\":{}}}\n"
        ),
        n_small,
        bytes_alone,
        runs,
        proxy.display().to_string().replace('\\', "/"),
        us(lat_alone.p50),
        us(lat_alone.p99),
        us(lat_alone.mean),
        us(lat_relay.p50),
        us(lat_relay.p99),
        us(lat_relay.mean),
        us(lat_proxy.p50),
        us(lat_proxy.p99),
        us(lat_proxy.mean),
        t_alone,
        t_relay,
        t_cut,
        t_open,
        bytes_alone,
        bytes_relay,
        bytes_cut,
        bytes_open,
        match one_cpu.as_deref() {
            Some([a, r, p]) => format!(
                "{{\"alone\":{},\"relay\":{},\"proxy\":{}}}",
                lat_json(a),
                lat_json(r),
                lat_json(p)
            ),
            _ => "null".to_string(),
        },
        n_piped,
        runs,
        piped[0],
        piped[1],
        piped[2],
        bench
    );
    if bench {
        let path = rbb::target_dir().join("rb-proxy-bench.json");
        if let Err(e) = std::fs::write(&path, json) {
            eprintln!("cannot write {}: {e}", path.display());
        }
    }
}
