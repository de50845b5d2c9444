//! Throughput of the budget engine against what a gateway would otherwise use.
//!
//! For every input, in one run: the engine passing everything through (64 KiB
//! and 4 KiB chunks), the engine budgeting to a 64 KiB result, serde_json's
//! `Value` round trip (with and without a truncation walk), serde_json
//! `IgnoredAny` (validation only, without the UTF-8 and surrogate checks the
//! engine makes), simd-json's DOM round trip, simd-json's
//! validating parse without a DOM (`simd_tape`), struson's streaming copy, and
//! `memcpy`. The `skip_*` groups measure how fast an over-budget tail is
//! skipped, next to simd-json validating and `memcpy` copying the same bytes:
//! a list, the escape-rich text, and text with only one-character escapes
//! (`skip_code`, escaped as `JSON.stringify` or pydantic write it). The
//! `cut_*` groups are results a little over budget, at the sizes a gateway
//! sees most (128 KiB to 2 MiB): the budgeted engine next to serde_json's
//! truncation walk and `IgnoredAny`, where a cut's fixed costs (the kept
//! part, the marker, the record) weigh most. They are for reference; the
//! issue's targets are on the inputs above.
//!
//! Every bench checks its answer once before it is measured, so
//! `cargo test --benches` (criterion's test mode, run by CI on scaled-down
//! inputs) proves each one measures real work. `docs/performance.md` has the
//! numbers; `benches/report.py` turns criterion's output into them.

mod common;

use common::{
    memcpy, serde_from, serde_round_trip, struson_copy, DomLimits, Input, Kind, SkipInput,
};
use criterion::measurement::WallTime;
use criterion::{
    black_box, criterion_group, criterion_main, BenchmarkGroup, Criterion, SamplingMode, Throughput,
};
use resultbudget_benches::{self as rbb};
use serde::de::IgnoredAny;
use serde_json::Value;
use simd_json::prelude::Writable;

const DOM_UNLIMITED: DomLimits = DomLimits {
    list: usize::MAX,
    keys: usize::MAX,
    string: usize::MAX,
    depth: usize::MAX,
    blob: usize::MAX,
};

/// Every array, object and string of `v` is within `lim`.
fn within(v: &Value, lim: &DomLimits, depth: usize) -> bool {
    match v {
        Value::Array(a) => {
            (a.is_empty() || depth <= lim.depth)
                && a.len() <= lim.list
                && a.iter().all(|x| within(x, lim, depth + 1))
        }
        Value::Object(m) => {
            (m.is_empty() || depth <= lim.depth)
                && m.len() <= lim.keys
                && m.values().all(|x| within(x, lim, depth + 1))
        }
        Value::String(s) => s.len() <= lim.string,
        _ => true,
    }
}

/// The same JSON data (floats equal to 1e-12, relative: parsers round differently).
fn same_data(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => {
            if x == y {
                return true;
            }
            match (x.as_f64(), y.as_f64()) {
                (Some(p), Some(q)) => (p - q).abs() <= 1e-12 * p.abs().max(q.abs()),
                _ => false,
            }
        }
        (Value::Array(x), Value::Array(y)) => {
            x.len() == y.len() && x.iter().zip(y).all(|(p, q)| same_data(p, q))
        }
        (Value::Object(x), Value::Object(y)) => {
            x.len() == y.len()
                && x.iter()
                    .all(|(k, p)| y.get(k).is_some_and(|q| same_data(p, q)))
        }
        _ => a == b,
    }
}

fn parse(bytes: &[u8]) -> Value {
    serde_from(bytes)
}

/// simd-json's DOM round trip on a copy of the input (it parses in place).
fn simd_round_trip(input: &[u8], scratch: &mut Vec<u8>, out: &mut Vec<u8>) {
    scratch.clear();
    scratch.extend_from_slice(input);
    let v = simd_json::to_borrowed_value(scratch).expect("valid JSON");
    out.clear();
    v.write(&mut *out).expect("serializable");
}

/// simd-json's validating parse without a DOM: stage 1 and stage 2 into a
/// tape, on a copy of the input (it parses in place), with reused buffers.
/// The fastest full validation available to a Rust gateway; returns the
/// tape's length so the work cannot be optimised away.
fn simd_tape(input: &[u8], scratch: &mut Vec<u8>, buffers: &mut simd_json::Buffers) -> usize {
    scratch.clear();
    scratch.extend_from_slice(input);
    simd_json::to_tape_with_buffers(scratch, buffers)
        .expect("valid JSON")
        .0
        .len()
}

fn group<'a>(c: &'a mut Criterion, name: &str, bytes: usize) -> BenchmarkGroup<'a, WallTime> {
    let mut g = c.benchmark_group(name);
    g.throughput(Throughput::Bytes(bytes as u64));
    if bytes > 4 << 20 {
        g.sample_size(10).sampling_mode(SamplingMode::Flat);
    } else {
        g.sample_size(20);
    }
    g
}

fn bench_input(c: &mut Criterion, inp: &Input) {
    let input = inp.bytes.as_slice();
    let mut out = Vec::with_capacity(input.len() + 4096);
    let mut g = group(c, inp.name, input.len());

    // The engine, budgets wide open: output is the input without insignificant whitespace.
    let compact = rbb::strip_ws(input);
    let mut pass = inp.kind.pass();
    for (id, chunk) in [
        ("rb_pass_64k", rbb::CHUNK),
        ("rb_pass_4k", rbb::SMALL_CHUNK),
    ] {
        inp.check_pass(&mut pass, chunk, &compact, &mut out);
        g.bench_function(id, |b| {
            b.iter(|| black_box(pass.run(black_box(input), chunk, &mut out)))
        });
    }

    bench_budgeted(&mut g, inp, &mut out);

    // serde_json Value round trip, nothing cut: the same data comes back.
    let original = parse(input);
    serde_round_trip(input, &DOM_UNLIMITED, &mut out);
    assert!(
        same_data(&parse(&out), &original),
        "{}: serde round trip",
        inp.name
    );
    g.bench_function("serde_value_pass", |b| {
        b.iter(|| serde_round_trip(black_box(input), &DOM_UNLIMITED, &mut out))
    });

    bench_truncation_walk(&mut g, inp, &original, compact.len(), &mut out);
    bench_ignored(&mut g, input);

    // simd-json DOM round trip.
    let mut scratch = Vec::with_capacity(input.len());
    simd_round_trip(input, &mut scratch, &mut out);
    assert!(
        same_data(&parse(&out), &original),
        "{}: simd-json round trip",
        inp.name
    );
    g.bench_function("simd_dom", |b| {
        b.iter(|| simd_round_trip(black_box(input), &mut scratch, &mut out))
    });

    // simd-json validation only (stage 1 + stage 2 into a tape, no DOM).
    let mut buffers = simd_json::Buffers::new(input.len());
    assert!(simd_tape(input, &mut scratch, &mut buffers) > 0);
    g.bench_function("simd_tape", |b| {
        b.iter(|| simd_tape(black_box(input), &mut scratch, &mut buffers))
    });

    // struson streaming copy.
    struson_copy(input, &mut out);
    assert!(
        same_data(&parse(&out), &original),
        "{}: struson copy",
        inp.name
    );
    drop(original);
    g.bench_function("struson_copy", |b| {
        b.iter(|| struson_copy(black_box(input), &mut out))
    });

    // memcpy into a preallocated buffer.
    memcpy(input, &mut out);
    assert!(out == input);
    g.bench_function("memcpy", |b| b.iter(|| memcpy(black_box(input), &mut out)));
    g.finish();
}

/// Skipping an over-budget tail, next to memcpy of the same input.
fn bench_skip(c: &mut Criterion, sk: &mut SkipInput) {
    let mut out = Vec::with_capacity(sk.bytes.len() + 4096);
    sk.check(&mut out);
    let (name, input, engine) = (sk.name, sk.bytes.as_slice(), &mut sk.engine);
    let mut g = group(c, name, input.len());
    g.bench_function("rb_skip", |b| {
        b.iter(|| black_box(engine.run(black_box(input), rbb::CHUNK, &mut out)))
    });
    // The same bytes validated by simd-json (no budget: the whole input).
    let mut scratch = Vec::with_capacity(input.len());
    let mut buffers = simd_json::Buffers::new(input.len());
    assert!(simd_tape(input, &mut scratch, &mut buffers) > 0);
    g.bench_function("simd_tape", |b| {
        b.iter(|| simd_tape(black_box(input), &mut scratch, &mut buffers))
    });
    memcpy(input, &mut out);
    assert!(out == input);
    g.bench_function("memcpy", |b| b.iter(|| memcpy(black_box(input), &mut out)));
    g.finish();
}

/// The engine, budgeted to a 64 KiB result (checked once).
fn bench_budgeted(g: &mut BenchmarkGroup<'_, WallTime>, inp: &Input, out: &mut Vec<u8>) {
    let input = inp.bytes.as_slice();
    let mut budget = inp.kind.budgeted();
    inp.check_budgeted(&mut budget, out);
    g.bench_function("rb_budget_64k", |b| {
        b.iter(|| black_box(budget.run(black_box(input), rbb::CHUNK, out)))
    });
}

/// serde_json Value + truncation walk to the input kind's element limits,
/// checked once: the result is within them, and shorter than `uncut_len`
/// (the input without insignificant whitespace) when `original` is not.
fn bench_truncation_walk(
    g: &mut BenchmarkGroup<'_, WallTime>,
    inp: &Input,
    original: &Value,
    uncut_len: usize,
    out: &mut Vec<u8>,
) {
    let input = inp.bytes.as_slice();
    let dom_lim = inp.kind.dom_limits();
    serde_round_trip(input, &dom_lim, out);
    let cut = parse(out);
    assert!(within(&cut, &dom_lim, 1), "{}: truncation walk", inp.name);
    if !within(original, &dom_lim, 1) {
        assert!(out.len() < uncut_len, "{}: the walk cut nothing", inp.name);
    }
    drop(cut);
    g.bench_function("serde_value_budget", |b| {
        b.iter(|| serde_round_trip(black_box(input), &dom_lim, out))
    });
}

/// serde_json `IgnoredAny`: validation only, and less of it than the engine
/// does: a string's UTF-8 and the pairing of its surrogate escapes are left
/// unchecked (serde_json checks them when it decodes a string, which
/// `IgnoredAny` skips).
fn bench_ignored(g: &mut BenchmarkGroup<'_, WallTime>, input: &[u8]) {
    serde_from::<IgnoredAny>(input);
    g.bench_function("serde_ignored", |b| {
        b.iter(|| serde_from::<IgnoredAny>(black_box(input)))
    });
}

/// A result a little over budget: the budgeted engine, serde_json's
/// truncation walk and `IgnoredAny`, on one `cut_*` input.
fn bench_cut(c: &mut Criterion, inp: &Input) {
    let input = inp.bytes.as_slice();
    let mut out = Vec::with_capacity(input.len() + 4096);
    let mut g = group(c, inp.name, input.len());
    bench_budgeted(&mut g, inp, &mut out);
    // Over the DOM's limits too, so its walk must cut.
    let original = parse(input);
    assert!(
        !within(&original, &inp.kind.dom_limits(), 1),
        "{}: within the truncation walk's limits",
        inp.name
    );
    bench_truncation_walk(&mut g, inp, &original, input.len(), &mut out);
    drop(original);
    bench_ignored(&mut g, input);
    g.finish();
}

/// The `cut_*` inputs: the escape-rich text and the structuredContent list
/// at about 128 KiB, 512 KiB and 2 MiB, each over the 64 KiB budget. Full
/// size in test mode too: they are small.
fn cut_inputs() -> Vec<Input> {
    let mut v = Vec::new();
    for (name, text) in [
        ("cut_text_128k", 128 << 10),
        ("cut_text_512k", 512 << 10),
        ("cut_text_2m", 2 << 20),
    ] {
        v.push(Input {
            name,
            kind: Kind::Mcp,
            bytes: rbb::mcp_text(text),
            // The one text block is cut at max_text_block_bytes.
            budget_omitted: 1,
            budget_len: None,
        });
    }
    // About 98 bytes an item.
    for (name, items) in [
        ("cut_list_128k", 1_340),
        ("cut_list_512k", 5_350),
        ("cut_list_2m", 21_400),
    ] {
        v.push(Input {
            name,
            kind: Kind::Mcp,
            bytes: rbb::mcp_list(items),
            // Every item past the 100th.
            budget_omitted: items as u64 - 100,
            budget_len: None,
        });
    }
    v
}

fn all(c: &mut Criterion) {
    let inputs = common::inputs();
    for inp in &inputs {
        bench_input(c, inp);
    }
    for mut sk in common::skip_inputs(&inputs) {
        bench_skip(c, &mut sk);
    }
    for inp in &cut_inputs() {
        bench_cut(c, inp);
    }
}

criterion_group!(benches, all);
criterion_main!(benches);
