//! The 4 KiB / 64 KiB pass-through ratio, measured in pairs.
//!
//! Criterion times each chunk size for seconds on end, so on a shared
//! machine whose speed drifts (docs/performance.md, "Noise") the two halves of
//! the ratio can be taken at different speeds. This driver alternates: one
//! pass-through run in 64 KiB chunks, then the same input in 4 KiB chunks,
//! again and again in one process. It reports the median of the per-pair
//! ratios (drift slower than one pair, milliseconds, cancels out) and the
//! ratio of the best times of each size (what each costs when nothing
//! disturbs it; on a small input, where a pair takes well under a
//! millisecond, this is the steadier of the two).
//!
//! For each input it also times the floor under the ratio: a plain copy of
//! the input into one buffer (`extend_from_slice`, so `memcpy`) in the same
//! 64 KiB and 4 KiB pieces, alternately in the same way. A pass-through run
//! copies every byte it keeps, so where the engine's own work is small (a
//! base64 image) its ratio can be no better than the copy's.
//!
//! Both of those write into one buffer that grows to the input's size,
//! as a caller that collects a whole message does. A third alternation
//! runs the engine as a streaming writer does (the proxy, the `Write`
//! adapter): each feed's output handed on and the buffer cleared, so it
//! stays small and in cache (`Engine::run_drained`).
//!
//! `cargo run --release -p resultbudget-benches --bin chunk-ratio -- [SECONDS] [--json FILE] [INPUT...]`
//! (SECONDS per input, default 5; INPUT among the throughput bench's inputs,
//! default all; `--json` also writes the results to FILE, which
//! `benches/report.py` reads: `benches/run.sh` does both).

use resultbudget::mcp::McpLimits;
use resultbudget::Limits;
use resultbudget_benches::{self as rbb, Engine, CHUNK, SMALL_CHUNK};

/// Builds one generated input.
type Make = fn() -> Vec<u8>;

fn main() {
    let mut secs = 5.0;
    let mut json = None;
    let mut wanted: Vec<String> = Vec::new();
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        if a == "--json" {
            json = Some(args.next().expect("--json needs a file"));
        } else if let Ok(s) = a.parse::<f64>() {
            secs = s;
        } else {
            wanted.push(a);
        }
    }
    let want = |name: &str| wanted.is_empty() || wanted.iter().any(|w| w == name);

    let mut inputs: Vec<(&str, Vec<u8>, bool)> = Vec::new();
    for name in ["twitter", "citm_catalog", "canada"] {
        if want(name) {
            match rbb::corpus(&format!("{name}.json")) {
                Some(bytes) => inputs.push((name, bytes, false)),
                None => eprintln!("{name}: corpus file not found, skipped"),
            }
        }
    }
    // The throughput bench's generated inputs, at its full sizes.
    let generated: [(&str, Make); 4] = [
        ("mcp_text", || rbb::mcp_text(rbb::TEXT_BYTES)),
        ("mcp_list", || rbb::mcp_list(rbb::LIST_ITEMS)),
        ("mcp_deep", || rbb::mcp_deep(rbb::DEEP, rbb::DEEP_TREES)),
        ("mcp_image", || rbb::mcp_image(rbb::IMAGE_RAW)),
    ];
    for (name, make) in generated {
        if want(name) {
            inputs.push((name, make(), true));
        }
    }

    let mut rows = Vec::new();
    println!(
        "input         pairs  median 4k/64k  (quartiles)      best 64k MB/s  best 4k MB/s  best 4k/64k  memcpy 4k/64k  (quartiles)      drained 4k/64k  (quartiles)      best"
    );
    for (name, input, mcp) in &inputs {
        let mut engine = if *mcp {
            Engine::mcp(McpLimits::UNLIMITED)
        } else {
            Engine::generic(Limits::UNLIMITED)
        };
        let mut out = Vec::with_capacity(input.len() + 4096);
        let pairs = rbb::alternate(secs, 10, false, &mut |small| {
            let chunk = if small { SMALL_CHUNK } else { CHUNK };
            std::hint::black_box(engine.run(input, chunk, &mut out));
        });
        let n = pairs.len();
        let (best64, best4) = rbb::bests(&pairs);
        let rbb::Spread {
            median: med,
            q1,
            q3,
        } = rbb::Spread::of(pairs.iter().map(|&(t64, t4)| t64 / t4).collect());
        // The copy floor: the same bytes, the same pieces, no engine.
        let copies = rbb::alternate(secs * 0.4, 10, false, &mut |small| {
            let chunk = if small { SMALL_CHUNK } else { CHUNK };
            out.clear();
            for piece in input.chunks(chunk) {
                out.extend_from_slice(std::hint::black_box(piece));
            }
            std::hint::black_box(&out);
        });
        let copy = rbb::Spread::of(copies.iter().map(|&(t64, t4)| t64 / t4).collect());
        // The engine again, each feed's output handed on at once.
        let want_out = engine.run_drained(input, CHUNK, &mut out);
        let drained = rbb::alternate(secs * 0.6, 10, false, &mut |small| {
            let chunk = if small { SMALL_CHUNK } else { CHUNK };
            let n = engine.run_drained(input, chunk, &mut out);
            assert_eq!(
                n, want_out,
                "{name}: the same bytes out in either chunk size"
            );
        });
        let (dbest64, dbest4) = rbb::bests(&drained);
        let dr = rbb::Spread::of(drained.iter().map(|&(t64, t4)| t64 / t4).collect());
        let mbs = |t: f64| input.len() as f64 / t / 1e6;
        println!(
            "{name:<13} {n:>5}  {med:>13.3}  ({q1:.3}–{q3:.3})  {:>13.0}  {:>12.0}  {:>11.3}  {:>13.3}  ({:.3}–{:.3})  {:>14.3}  ({:.3}–{:.3})  {:.3}",
            mbs(best64),
            mbs(best4),
            best64 / best4,
            copy.median,
            copy.q1,
            copy.q3,
            dr.median,
            dr.q1,
            dr.q3,
            dbest64 / dbest4
        );
        rows.push(format!(
            "  {{\"name\": \"{name}\", \"pairs\": {n}, \"median\": {med:.4}, \"q1\": {q1:.4}, \
             \"q3\": {q3:.4}, \"best64_mbps\": {:.1}, \"best4_mbps\": {:.1}, \"best_ratio\": {:.4}, \
             \"copy_pairs\": {}, \"copy_median\": {:.4}, \"copy_q1\": {:.4}, \"copy_q3\": {:.4}, \
             \"drained_pairs\": {}, \"drained_median\": {:.4}, \"drained_q1\": {:.4}, \
             \"drained_q3\": {:.4}, \"drained_best_ratio\": {:.4}}}",
            mbs(best64),
            mbs(best4),
            best64 / best4,
            copies.len(),
            copy.median,
            copy.q1,
            copy.q3,
            drained.len(),
            dr.median,
            dr.q1,
            dr.q3,
            dbest64 / dbest4
        ));
    }
    if let Some(path) = json {
        let text = format!(
            "{{\"seconds_per_input\": {secs}, \"inputs\": [\n{}\n]}}\n",
            rows.join(",\n")
        );
        std::fs::write(&path, text).expect("write the --json file");
    }
}
