//! The target ratios, each measured in alternating pairs.
//!
//! The throughput bench times every implementation on its own, for seconds on
//! end, and a ratio is then two medians taken at different moments. On a
//! shared machine whose speed drifts (docs/performance.md, "Noise") the two
//! halves of a ratio can be measured at different speeds, and the ratio moves
//! with the drift. Here each ratio is measured as `chunk-ratio` measures the
//! 4 KiB one: one run of the engine, one of the baseline, again and again in
//! one process, the order swapped every pair, so drift slower than a pair
//! cancels out. Reported per ratio: the median of the per-pair ratios (with
//! quartiles) and the ratio of each side's best time.
//!
//! The ratios: the engine budgeting to a 64 KiB result against serde_json's
//! `Value` round trip with a truncation walk, against `IgnoredAny`, and against
//! struson's streaming copy, on the seven inputs (and, for reference, the
//! engine passing each input through against `IgnoredAny`); the engine skipping an
//! over-budget tail against `memcpy` of the same bytes, on the three skip
//! inputs. Every side checks its answer once before it is timed.
//!
//! `cargo bench -p resultbudget-benches --bench pairs` (full-size inputs;
//! `RB_PAIRS_SECONDS` per ratio, default 3) writes `target/rb-pairs.json`,
//! which `benches/report.py` reads; `benches/run.sh` runs it with the rest.
//! Under `cargo test --benches` it runs scaled-down inputs, a few pairs each.

mod common;

use common::{memcpy, serde_from, serde_round_trip, struson_copy};
use resultbudget_benches::{self as rbb};
use serde::de::IgnoredAny;
use std::hint::black_box;

/// One measured ratio: the engine's speed over the baseline's.
struct Row {
    input: &'static str,
    ratio: &'static str,
    pairs: usize,
    median: f64,
    q1: f64,
    q3: f64,
    best: f64,
    engine_mbps: f64,
    baseline_mbps: f64,
}

/// Alternate `engine` and `baseline` (the order swapped every pair) for
/// `secs`, at least `min_pairs` times.
fn measure(
    input: &'static str,
    ratio: &'static str,
    bytes: usize,
    secs: f64,
    min_pairs: usize,
    engine: &mut dyn FnMut(),
    baseline: &mut dyn FnMut(),
) -> Row {
    let pairs = rbb::alternate(secs, min_pairs, true, &mut |base| {
        if base {
            baseline()
        } else {
            engine()
        }
    });
    let (best_e, best_b) = rbb::bests(&pairs);
    // Speed over speed: the baseline's time over the engine's.
    let spread = rbb::Spread::of(pairs.iter().map(|&(te, tb)| tb / te).collect());
    let mbps = |t: f64| bytes as f64 / t / 1e6;
    Row {
        input,
        ratio,
        pairs: pairs.len(),
        median: spread.median,
        q1: spread.q1,
        q3: spread.q3,
        best: best_b / best_e,
        engine_mbps: mbps(best_e),
        baseline_mbps: mbps(best_b),
    }
}

fn main() {
    let bench = rbb::bench_mode();
    let secs = if bench {
        std::env::var("RB_PAIRS_SECONDS")
            .ok()
            .and_then(|s| s.parse::<f64>().ok())
            .unwrap_or(3.0)
    } else {
        0.0
    };
    let min_pairs = if bench { 7 } else { 2 };
    let mut rows = Vec::new();

    let inputs = common::inputs();
    for inp in &inputs {
        let input = inp.bytes.as_slice();
        let mut out = Vec::with_capacity(input.len() + 4096);
        let mut base_out = Vec::with_capacity(input.len() + 4096);
        let mut engine = inp.kind.budgeted();
        inp.check_budgeted(&mut engine, &mut out);
        let mut run_engine = || {
            black_box(engine.run(black_box(input), rbb::CHUNK, &mut out));
        };

        // serde_json Value + truncation walk: a cut, valid document.
        let dom = inp.kind.dom_limits();
        serde_round_trip(input, &dom, &mut base_out);
        serde_from::<IgnoredAny>(&base_out);
        assert!(!base_out.is_empty(), "{}: serde round trip", inp.name);
        rows.push(measure(
            inp.name,
            "budget_vs_serde",
            input.len(),
            secs,
            min_pairs,
            &mut run_engine,
            &mut || serde_round_trip(black_box(input), &dom, &mut base_out),
        ));
        rows.push(measure(
            inp.name,
            "budget_vs_ignored",
            input.len(),
            secs,
            min_pairs,
            &mut run_engine,
            &mut || {
                black_box(serde_from::<IgnoredAny>(black_box(input)));
            },
        ));
        // For reference, not a target: the pass-through every result under
        // its budget takes, against validating alone.
        let mut pass = inp.kind.pass();
        let mut pass_out = Vec::with_capacity(input.len() + 4096);
        inp.check_pass(&mut pass, rbb::CHUNK, &rbb::strip_ws(input), &mut pass_out);
        rows.push(measure(
            inp.name,
            "pass_vs_ignored",
            input.len(),
            secs,
            min_pairs,
            &mut || {
                black_box(pass.run(black_box(input), rbb::CHUNK, &mut pass_out));
            },
            &mut || {
                black_box(serde_from::<IgnoredAny>(black_box(input)));
            },
        ));
        // struson's copy: the same data, re-serialized.
        struson_copy(input, &mut base_out);
        assert_eq!(
            serde_from::<serde_json::Value>(&base_out),
            serde_from::<serde_json::Value>(input),
            "{}: struson copy",
            inp.name
        );
        rows.push(measure(
            inp.name,
            "budget_vs_struson",
            input.len(),
            secs,
            min_pairs,
            &mut run_engine,
            &mut || struson_copy(black_box(input), &mut base_out),
        ));
    }

    for mut sk in common::skip_inputs(&inputs) {
        let mut out = Vec::with_capacity(sk.bytes.len() + 4096);
        sk.check(&mut out);
        let input = sk.bytes.as_slice();
        let mut base_out = Vec::with_capacity(input.len() + 4096);
        memcpy(input, &mut base_out);
        assert!(base_out == input, "{}: memcpy", sk.name);
        rows.push(measure(
            sk.name,
            "skip_vs_memcpy",
            input.len(),
            secs,
            min_pairs,
            &mut || {
                black_box(sk.engine.run(black_box(input), rbb::CHUNK, &mut out));
            },
            &mut || memcpy(black_box(input), &mut base_out),
        ));
    }

    println!(
        "{:<13} {:<18} {:>5}  {:>7}  {:<15}  {:>7}  {:>10}  {:>10}",
        "input", "ratio", "pairs", "median", "(quartiles)", "best", "engine MB/s", "base MB/s"
    );
    for r in &rows {
        assert!(
            r.median > 0.0 && r.best > 0.0,
            "{} {}: no ratio",
            r.input,
            r.ratio
        );
        println!(
            "{:<13} {:<18} {:>5}  {:>7.3}  ({:.3}–{:.3})  {:>7.3}  {:>10.0}  {:>10.0}",
            r.input, r.ratio, r.pairs, r.median, r.q1, r.q3, r.best, r.engine_mbps, r.baseline_mbps
        );
    }
    if bench {
        let body: Vec<String> = rows
            .iter()
            .map(|r| {
                format!(
                    "  {{\"input\": \"{}\", \"ratio\": \"{}\", \"pairs\": {}, \"median\": {:.4}, \
                     \"q1\": {:.4}, \"q3\": {:.4}, \"best\": {:.4}, \"engine_mbps\": {:.1}, \
                     \"baseline_mbps\": {:.1}}}",
                    r.input,
                    r.ratio,
                    r.pairs,
                    r.median,
                    r.q1,
                    r.q3,
                    r.best,
                    r.engine_mbps,
                    r.baseline_mbps
                )
            })
            .collect();
        let text = format!(
            "{{\"seconds_per_ratio\": {secs}, \"rows\": [\n{}\n]}}\n",
            body.join(",\n")
        );
        let path = rbb::target_dir().join("rb-pairs.json");
        if let Err(e) = std::fs::write(&path, text) {
            eprintln!("cannot write {}: {e}", path.display());
        }
    }
}
