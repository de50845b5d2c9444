//! The whole engine (`Budget`, unlimited limits, default `max_nesting`) against
//! JSONTestSuite's `test_parsing` corpus.
//!
//! * `y_` files must be accepted, and the output must be the input with the
//!   insignificant whitespace removed (byte-identical for a file without any),
//!   with an untruncated record.
//! * `n_` files must be rejected.
//! * `i_` files get the verdict recorded in [`I_VERDICTS`]; the policy behind it
//!   is written up in `specs/jsontestsuite-i-policy.md`.
//!
//! Every file is run whole, split into two chunks at every split point, and in
//! 1-byte chunks; output, record and error (kind and offset) must not depend on
//! the split.
#[path = "common/strip.rs"]
mod strip;
#[path = "common/suite.rs"]
mod suite;
use resultbudget::{Budget, Error, ErrorKind, Limits};
use strip::strip_ws;
use suite::files;

/// The record of a budget that cut nothing.
const CLEAN_RECORD: &str = r#"{"truncated":false,"budget_kind":null,"omitted_count":0,"omitted_paths":[],"omitted_paths_unlisted":0}"#;

/// Output and record JSON, or the error.
type Outcome = Result<(Vec<u8>, Vec<u8>), Error>;

/// Run `doc` through a fresh unlimited `Budget`, fed as the chunks that end at
/// each of `bounds` (the last bound is `doc.len()`). Stops at the first error.
fn run_chunks(doc: &[u8], bounds: impl IntoIterator<Item = usize>) -> Outcome {
    let mut b = Budget::new(Limits::UNLIMITED).unwrap();
    let mut out = Vec::new();
    let mut prev = 0;
    for end in bounds {
        b.feed(&doc[prev..end], &mut out)?;
        prev = end;
    }
    assert_eq!(prev, doc.len(), "the chunks must cover the input");
    let rec = b.finish(&mut out)?.to_json();
    Ok((out, rec))
}

fn run_whole(doc: &[u8]) -> Outcome {
    run_chunks(doc, [doc.len()])
}

fn run_split(doc: &[u8], at: usize) -> Outcome {
    run_chunks(doc, [at, doc.len()])
}

fn run_bytewise(doc: &[u8]) -> Outcome {
    run_chunks(doc, 1..=doc.len())
}

/// Assert that every split of `doc` (two chunks at every split point, 1-byte
/// chunks) gives exactly `whole`, and return it.
fn assert_split_invariant(name: &str, doc: &[u8]) -> Outcome {
    let whole = run_whole(doc);
    for at in 0..=doc.len() {
        let split = run_split(doc, at);
        assert_eq!(split, whole, "{name}: split at {at} differs from whole");
    }
    let bytewise = run_bytewise(doc);
    assert_eq!(bytewise, whole, "{name}: 1-byte chunks differ from whole");
    whole
}

#[test]
fn suite_file_counts() {
    assert_eq!(files("y_").len(), 95, "y_ files");
    assert_eq!(files("n_").len(), 188, "n_ files");
    assert_eq!(files("i_").len(), 35, "i_ files");
}

#[test]
fn y_files_pass_through_minus_whitespace() {
    let ys = files("y_");
    assert_eq!(ys.len(), 95);
    let mut identical = 0;
    for (name, doc) in &ys {
        let (out, rec) = assert_split_invariant(name, doc)
            .unwrap_or_else(|e| panic!("{name}: rejected with {e} ({:?})", e.kind()));
        let expected = strip_ws(doc);
        assert_eq!(
            out,
            expected,
            "{name}: output {:?} is not the input without whitespace {:?}",
            String::from_utf8_lossy(&out),
            String::from_utf8_lossy(&expected)
        );
        if expected == *doc {
            // No insignificant whitespace: byte-identical.
            assert_eq!(out, *doc, "{name}");
            identical += 1;
        }
        assert_eq!(
            String::from_utf8(rec).unwrap(),
            CLEAN_RECORD,
            "{name}: record"
        );
        // The output is one valid JSON value, and the same value as the input.
        let a: serde_json::Value = serde_json::from_slice(&out)
            .unwrap_or_else(|e| panic!("{name}: output does not parse: {e}"));
        let b: serde_json::Value = serde_json::from_slice(doc).unwrap();
        assert_eq!(a, b, "{name}");
    }
    // Most of the suite has no insignificant whitespace at all.
    assert!(identical > 60, "only {identical} byte-identical files");
}

/// `n_` files up to this size are run at every split point. Past the error
/// offset the first chunk already holds the whole prefix that proves the input
/// invalid, and every such run costs that whole prefix: for the two 100 KB and
/// 250 KB `n_structure_*` files (refused as `TooDeep` after ~1 KB and ~5 KB)
/// that is ~90 s in a debug build. So for files above this size, the split
/// points after `offset + STRIDE_FROM` are taken every `STRIDE` bytes (plus the
/// last few); `n_large_files_at_every_split_point` (ignored by default) runs
/// them all.
const FULL_SPLIT_MAX: usize = 16 * 1024;
const STRIDE_FROM: usize = 4096;
const STRIDE: usize = 61;

/// Check the `n_` files: rejected whole, in 1-byte chunks and at the split
/// points (see [`FULL_SPLIT_MAX`]), with one error (kind, offset) each way.
/// Returns how many files were checked.
fn check_n_files(dense: bool, which: impl Fn(&[u8]) -> bool) -> usize {
    let ns = files("n_");
    assert_eq!(ns.len(), 188);
    let mut checked = 0;
    for (name, doc) in ns.iter().filter(|(_, d)| which(d)) {
        let whole = run_whole(doc);
        let err = match &whole {
            Ok((out, _)) => panic!(
                "{name}: accepted, output {:?}",
                String::from_utf8_lossy(out)
            ),
            Err(e) => *e,
        };
        assert!(
            err.offset() <= doc.len() as u64,
            "{name}: error offset {} past the input ({} bytes)",
            err.offset(),
            doc.len()
        );
        if err.kind() == ErrorKind::UnexpectedEnd {
            assert!(err.is_incomplete(), "{name}");
            assert_eq!(err.offset(), doc.len() as u64, "{name}: incomplete offset");
        } else {
            assert!(!err.is_incomplete(), "{name}");
            assert!(err.offset() < doc.len() as u64, "{name}: {err}");
        }
        let bytewise = run_bytewise(doc);
        assert_eq!(bytewise, whole, "{name}: 1-byte chunks");
        let dense_until = if dense || doc.len() <= FULL_SPLIT_MAX {
            doc.len()
        } else {
            (err.offset() as usize + STRIDE_FROM).min(doc.len())
        };
        let sparse = (dense_until..doc.len())
            .step_by(STRIDE)
            .chain(doc.len().saturating_sub(3)..=doc.len());
        for at in (0..=dense_until).chain(sparse) {
            let split = run_split(doc, at);
            assert_eq!(split, whole, "{name}: split at {at}");
        }
        checked += 1;
    }
    checked
}

#[test]
fn n_files_rejected_the_same_way_at_every_split() {
    assert_eq!(check_n_files(false, |_| true), 188);
}

/// What a streaming caller that hit an error is left holding: everything the
/// feeds appended to its `Vec` (the caller's own bytes included) plus what
/// `abort` closes it with.
fn aborted(doc: &[u8], chunk: usize, prefix: &[u8]) -> Option<Vec<u8>> {
    let mut b = Budget::new(Limits::UNLIMITED).unwrap();
    let mut out = prefix.to_vec();
    for c in doc.chunks(chunk.max(1)) {
        if b.feed(c, &mut out).is_err() {
            b.abort(&mut out);
            return Some(out);
        }
    }
    if b.finish(&mut out).is_err() {
        b.abort(&mut out);
        return Some(out);
    }
    None
}

/// After a rejected feed, `abort` leaves one valid JSON value: a kept byte
/// committed in the failing feed is neither lost nor duplicated, whatever the
/// chunk size (the feed writes straight into the caller's `Vec` and must hand
/// back what it wrote on error), and bytes the caller had in its `Vec` stay
/// in front untouched.
#[test]
fn aborted_output_is_one_value_for_any_chunk_size() {
    // The outputs nest as deep as `max_nesting`; parsing them with serde_json
    // in a debug build needs more than a test thread's default stack.
    std::thread::Builder::new()
        .stack_size(256 << 20)
        .spawn(check_aborted_outputs)
        .unwrap()
        .join()
        .unwrap();
}

fn check_aborted_outputs() {
    let prefix = b"caller:";
    let mut checked = 0;
    for (name, doc) in files("n_") {
        let mut seen: Vec<Vec<u8>> = Vec::new();
        for chunk in [1, 2, 3, 7, 64, 4096, doc.len()] {
            let Some(out) = aborted(&doc, chunk, prefix) else {
                panic!("{name}: accepted in {chunk}-byte chunks");
            };
            let Some(value) = out.strip_prefix(prefix) else {
                panic!("{name}: the caller's bytes were touched");
            };
            let mut de = serde_json::Deserializer::from_slice(value);
            de.disable_recursion_limit();
            let parsed =
                serde::Deserialize::deserialize(&mut de).and_then(|v: serde_json::Value| {
                    de.end()?;
                    Ok(v)
                });
            if let Err(e) = parsed {
                panic!(
                    "{name}, {chunk}-byte chunks: {e}: {:?}",
                    String::from_utf8_lossy(value)
                );
            }
            seen.push(value.to_vec());
        }
        checked += 1;
        // Outside a string, what was kept before the error does not depend on
        // the chunks. Inside one, the text before the bad byte may or may not
        // have been handed out already (`docs/library.md`, "Errors after
        // output began"), so only validity is asserted there.
        let in_string = matches!(
            run_whole(&doc).map_err(|e| e.kind()),
            Err(ErrorKind::InvalidUtf8
                | ErrorKind::ControlInString
                | ErrorKind::InvalidEscape
                | ErrorKind::LoneSurrogate)
        );
        if !in_string {
            for v in &seen {
                assert_eq!(
                    v,
                    &seen[0],
                    "{name}: abort output depends on the chunks: {:?} vs {:?}",
                    String::from_utf8_lossy(v),
                    String::from_utf8_lossy(&seen[0])
                );
            }
        }
    }
    assert_eq!(checked, 188);
}

#[test]
#[ignore = "~90 s in debug: every split point of the two 100 KB+ n_structure files"]
fn n_large_files_at_every_split_point() {
    assert_eq!(check_n_files(true, |d| d.len() > FULL_SPLIT_MAX), 2);
}

/// The engine's verdict on each `i_` file: `None` = accepted (then the output
/// is the input without whitespace), `Some((kind, offset))` = rejected there.
/// See `specs/jsontestsuite-i-policy.md`. A change here is a policy change.
const I_VERDICTS: &[(&str, Option<(ErrorKind, u64)>)] = &[
    ("i_number_double_huge_neg_exp.json", None),
    ("i_number_huge_exp.json", None),
    ("i_number_neg_int_huge_exp.json", None),
    ("i_number_pos_double_huge_exp.json", None),
    ("i_number_real_neg_overflow.json", None),
    ("i_number_real_pos_overflow.json", None),
    ("i_number_real_underflow.json", None),
    ("i_number_too_big_neg_int.json", None),
    ("i_number_too_big_pos_int.json", None),
    ("i_number_very_big_negative_int.json", None),
    (
        "i_object_key_lone_2nd_surrogate.json",
        Some((ErrorKind::LoneSurrogate, 7)),
    ),
    (
        "i_string_1st_surrogate_but_2nd_missing.json",
        Some((ErrorKind::LoneSurrogate, 8)),
    ),
    (
        "i_string_1st_valid_surrogate_2nd_invalid.json",
        Some((ErrorKind::LoneSurrogate, 13)),
    ),
    (
        "i_string_UTF-16LE_with_BOM.json",
        Some((ErrorKind::UnexpectedByte, 0)),
    ),
    (
        "i_string_UTF-8_invalid_sequence.json",
        Some((ErrorKind::InvalidUtf8, 7)),
    ),
    (
        "i_string_UTF8_surrogate_U+D800.json",
        Some((ErrorKind::InvalidUtf8, 3)),
    ),
    (
        "i_string_incomplete_surrogate_and_escape_valid.json",
        Some((ErrorKind::LoneSurrogate, 9)),
    ),
    (
        "i_string_incomplete_surrogate_pair.json",
        Some((ErrorKind::LoneSurrogate, 7)),
    ),
    (
        "i_string_incomplete_surrogates_escape_valid.json",
        Some((ErrorKind::LoneSurrogate, 13)),
    ),
    (
        "i_string_invalid_lonely_surrogate.json",
        Some((ErrorKind::LoneSurrogate, 8)),
    ),
    (
        "i_string_invalid_surrogate.json",
        Some((ErrorKind::LoneSurrogate, 8)),
    ),
    (
        "i_string_invalid_utf-8.json",
        Some((ErrorKind::InvalidUtf8, 2)),
    ),
    (
        "i_string_inverted_surrogates_U+1D11E.json",
        Some((ErrorKind::LoneSurrogate, 7)),
    ),
    (
        "i_string_iso_latin_1.json",
        Some((ErrorKind::InvalidUtf8, 3)),
    ),
    (
        "i_string_lone_second_surrogate.json",
        Some((ErrorKind::LoneSurrogate, 7)),
    ),
    (
        "i_string_lone_utf8_continuation_byte.json",
        Some((ErrorKind::InvalidUtf8, 2)),
    ),
    (
        "i_string_not_in_unicode_range.json",
        Some((ErrorKind::InvalidUtf8, 3)),
    ),
    (
        "i_string_overlong_sequence_2_bytes.json",
        Some((ErrorKind::InvalidUtf8, 2)),
    ),
    (
        "i_string_overlong_sequence_6_bytes.json",
        Some((ErrorKind::InvalidUtf8, 2)),
    ),
    (
        "i_string_overlong_sequence_6_bytes_null.json",
        Some((ErrorKind::InvalidUtf8, 2)),
    ),
    (
        "i_string_truncated-utf-8.json",
        Some((ErrorKind::InvalidUtf8, 3)),
    ),
    (
        "i_string_utf16BE_no_BOM.json",
        Some((ErrorKind::UnexpectedByte, 0)),
    ),
    (
        "i_string_utf16LE_no_BOM.json",
        Some((ErrorKind::UnexpectedByte, 1)),
    ),
    ("i_structure_500_nested_arrays.json", None),
    (
        "i_structure_UTF-8_BOM_empty_object.json",
        Some((ErrorKind::UnexpectedByte, 0)),
    ),
];

#[test]
fn i_files_verdicts_are_the_documented_policy() {
    let is = files("i_");
    assert_eq!(is.len(), 35);
    assert_eq!(I_VERDICTS.len(), 35, "one verdict per i_ file");
    let mut accepted = 0;
    for (name, doc) in &is {
        let expected = I_VERDICTS
            .iter()
            .find(|(n, _)| n == name)
            .unwrap_or_else(|| panic!("{name}: no verdict in the table"))
            .1;
        let got = assert_split_invariant(name, doc);
        match (expected, got) {
            (None, Ok((out, rec))) => {
                assert_eq!(out, strip_ws(doc), "{name}: output");
                assert_eq!(String::from_utf8(rec).unwrap(), CLEAN_RECORD, "{name}");
                accepted += 1;
            }
            (Some((kind, offset)), Err(e)) => {
                assert_eq!((e.kind(), e.offset()), (kind, offset), "{name}: error");
                assert!(!e.is_incomplete(), "{name}");
            }
            (exp, got) => panic!(
                "{name}: verdict changed: expected {exp:?}, got {:?}",
                got.map(|(o, _)| String::from_utf8_lossy(&o).into_owned())
            ),
        }
    }
    // Ten huge numbers and the 500-deep nesting are accepted; the rest refused.
    assert_eq!(accepted, 11);
    let refused = |k: ErrorKind| {
        I_VERDICTS
            .iter()
            .filter(|(_, v)| v.is_some_and(|(kind, _)| kind == k))
            .count()
    };
    assert_eq!(refused(ErrorKind::LoneSurrogate), 10);
    assert_eq!(refused(ErrorKind::InvalidUtf8), 10);
    assert_eq!(refused(ErrorKind::UnexpectedByte), 4);
}

/// `max_nesting` is the only limit that refuses: the 500-deep file is refused
/// when the nesting limit is below 500, at the offset of the first bracket too
/// deep, however the input is split.
#[test]
fn nesting_limit_refuses_500_nested_arrays_when_lower() {
    let (_, doc) = files("i_structure_500_nested_arrays.json")
        .pop()
        .expect("the 500-deep file");
    for (nest, ok) in [(500u32, true), (499, false), (1, false)] {
        let lim = Limits {
            max_nesting: nest,
            ..Limits::UNLIMITED
        };
        for split in [0, 1, 250, 499, 500, 501, doc.len()] {
            let mut b = Budget::new(lim).unwrap();
            let mut out = Vec::new();
            let r = b
                .feed(&doc[..split], &mut out)
                .and_then(|_| b.feed(&doc[split..], &mut out))
                .and_then(|_| b.finish(&mut out).map(|_| ()));
            if ok {
                assert!(r.is_ok(), "nesting {nest}, split {split}: {r:?}");
                assert_eq!(out, doc, "nesting {nest}");
            } else {
                let e = r.expect_err("too deep");
                assert_eq!(e.kind(), ErrorKind::TooDeep);
                assert_eq!(e.offset(), nest as u64, "nesting {nest}, split {split}");
            }
        }
    }
}

/// Limits that cut almost everything: the skipped parts are still validated.
const TIGHT: [Limits; 4] = [
    Limits {
        max_list_items: 0,
        max_map_keys: 0,
        max_string_bytes: 0,
        max_depth: 0,
        max_result_bytes: 8,
        max_nesting: 1024,
    },
    Limits {
        max_list_items: 1,
        max_map_keys: 1,
        max_string_bytes: 1,
        max_depth: 1,
        max_result_bytes: 16,
        max_nesting: 1024,
    },
    Limits {
        max_result_bytes: 8,
        ..Limits::UNLIMITED
    },
    Limits::DEFAULT,
];

fn run_with(lim: Limits, doc: &[u8], bytewise: bool) -> Result<Vec<u8>, Error> {
    let mut b = Budget::new(lim).unwrap();
    let mut out = Vec::new();
    if bytewise {
        for c in doc.chunks(1) {
            b.feed(c, &mut out)?;
        }
    } else {
        b.feed(doc, &mut out)?;
    }
    b.finish(&mut out)?;
    Ok(out)
}

/// Cutting never hides an error: under tight limits every `n_` file (and every
/// refused `i_` file) is refused with the same kind and offset as without
/// limits, and every `y_` file (and accepted `i_` file) is accepted with a
/// valid, bounded output.
#[test]
fn verdicts_do_not_depend_on_the_limits() {
    for (name, doc) in files("n_") {
        let unlimited = run_with(Limits::UNLIMITED, &doc, false).expect_err(&name);
        for lim in TIGHT {
            for bytewise in [false, true] {
                let e = run_with(lim, &doc, bytewise).expect_err(&name);
                assert_eq!(e, unlimited, "{name}: {lim:?}, bytewise {bytewise}");
            }
        }
    }
    for (name, doc) in files("i_") {
        let unlimited = run_with(Limits::UNLIMITED, &doc, false);
        for lim in TIGHT {
            for bytewise in [false, true] {
                let r = run_with(lim, &doc, bytewise);
                assert_eq!(r.is_ok(), unlimited.is_ok(), "{name}: {lim:?}");
                if let (Err(a), Err(b)) = (&r, &unlimited) {
                    assert_eq!(a, b, "{name}: {lim:?}, bytewise {bytewise}");
                }
            }
        }
    }
    for (name, doc) in files("y_") {
        for lim in TIGHT {
            let whole = run_with(lim, &doc, false).unwrap_or_else(|e| panic!("{name}: {e}"));
            let bytewise = run_with(lim, &doc, true).unwrap();
            assert_eq!(whole, bytewise, "{name}: {lim:?}");
            assert!(whole.len() as u64 <= lim.max_result_bytes, "{name}");
            serde_json::from_slice::<serde_json::Value>(&whole)
                .unwrap_or_else(|e| panic!("{name}: {lim:?}: output does not parse: {e}"));
        }
    }
}
