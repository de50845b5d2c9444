//! The tokenizer alone against JSONTestSuite: verdicts and offsets, whole and chunked.
use resultbudget::tokenizer::{Tok, Tokenizer};
use resultbudget::Error;
#[path = "common/suite.rs"]
mod suite;
use suite::files;

/// Feed `doc` split at `cuts` to `t`, then announce the end; every token but
/// `NeedMore` and `Eof` goes to `on` with the chunk its spans index.
fn drive(
    t: &mut Tokenizer,
    doc: &[u8],
    cuts: &[usize],
    on: impl FnMut(&mut Tokenizer, Tok, &[u8]),
) -> Result<(), Error> {
    drive_with(t, doc, cuts, false, on)
}

/// [`drive`], and with `early` ask [`Tokenizer::try_end_chunk`] after every
/// token, as the budget drivers do.
fn drive_with(
    t: &mut Tokenizer,
    doc: &[u8],
    cuts: &[usize],
    early: bool,
    mut on: impl FnMut(&mut Tokenizer, Tok, &[u8]),
) -> Result<(), Error> {
    let mut prev = 0;
    for &b in cuts.iter().chain([doc.len()].iter()) {
        let chunk = &doc[prev..b];
        prev = b;
        let mut pos = 0;
        loop {
            let tok = t.next(chunk, &mut pos)?;
            if tok == Tok::NeedMore {
                break;
            }
            on(t, tok, chunk);
            if early && t.try_end_chunk(chunk, pos) {
                break;
            }
        }
    }
    loop {
        let tok = t.next_eof()?;
        if tok == Tok::Eof {
            return Ok(());
        }
        on(t, tok, &[]);
    }
}

/// Run the tokenizer over `doc` split into the given chunks; rebuild the value's
/// bytes without insignificant whitespace.
fn run(doc: &[u8], cuts: &[usize]) -> Result<Vec<u8>, Error> {
    let mut out = Vec::new();
    drive(&mut Tokenizer::default(), doc, cuts, |t, tok, chunk| {
        emit(t, tok, chunk, &mut out, &mut false)
    })?;
    Ok(out)
}

fn emit(t: &Tokenizer, tok: Tok, chunk: &[u8], out: &mut Vec<u8>, _sep: &mut bool) {
    match tok {
        Tok::BeginObject => out.push(b'{'),
        Tok::EndObject => out.push(b'}'),
        Tok::BeginArray => out.push(b'['),
        Tok::EndArray => out.push(b']'),
        Tok::StrBegin { .. } => out.push(b'"'),
        Tok::StrSpan(a, b) | Tok::NumSpan(a, b) => out.extend_from_slice(&chunk[a..b]),
        Tok::StrHeld => out.extend_from_slice(t.held()),
        Tok::StrEnd => out.push(b'"'),
        Tok::NumEnd => out.push(b' '),
        Tok::Lit(l) => out.extend_from_slice(l.text()),
        other => panic!("unexpected token {other:?}"),
    }
}

#[test]
fn suite_verdicts_whole_and_one_byte() {
    let mut n = 0;
    for (name, doc) in files("") {
        let whole = run(&doc, &[]);
        let ones: Vec<usize> = (1..doc.len()).collect();
        let bytewise = run(&doc, &ones);
        assert_eq!(whole, bytewise, "{name}: chunking changed the result");
        if name.starts_with("y_") {
            assert!(whole.is_ok(), "{name} rejected: {:?}", whole);
        } else if name.starts_with("n_") {
            assert!(whole.is_err(), "{name} accepted");
        }
        n += 1;
    }
    assert!(n > 300);
}

/// How a skipping run asks the tokenizer to skip.
#[derive(Debug, Clone, Copy)]
enum SkipMode {
    /// `skip_one(0)` before the first token: the whole document.
    Whole,
    /// `skip_rest(1, 0)` right after the top-level container opens.
    RestOfTop,
    /// `skip_one(1)` right after the top-level container opens: its first value.
    FirstInside,
}

/// Asks `t` for the skip `mode` names, at its moment: `Whole` before the first
/// token (call with `tok` = `None`), the others when the top-level container
/// opens. `asked` keeps it to once.
fn ask_skip(t: &mut Tokenizer, tok: Option<Tok>, mode: SkipMode, asked: &mut bool) {
    if *asked {
        return;
    }
    match (mode, tok) {
        (SkipMode::Whole, None) => t.skip_one(0),
        (SkipMode::RestOfTop, Some(Tok::BeginArray | Tok::BeginObject)) => t.skip_rest(1, 0),
        (SkipMode::FirstInside, Some(Tok::BeginArray | Tok::BeginObject)) => t.skip_one(1),
        _ => return,
    }
    *asked = true;
}

/// The tokenizer's verdict (and, when accepted, the tokens' shape) with a skip.
fn run_skip(doc: &[u8], cuts: &[usize], mode: SkipMode) -> Result<Vec<u8>, Error> {
    let mut t = Tokenizer::default();
    let mut out = Vec::new();
    let mut asked = false;
    ask_skip(&mut t, None, mode, &mut asked);
    drive(&mut t, doc, cuts, |t, tok, chunk| {
        match tok {
            Tok::Skipped(n) => out.extend_from_slice(format!("<skipped {n}>").as_bytes()),
            _ => emit(t, tok, chunk, &mut out, &mut false),
        }
        ask_skip(t, Some(tok), mode, &mut asked);
    })?;
    Ok(out)
}

/// Skipped bytes are validated exactly like tokenized ones: same verdict, same
/// error kind and offset, whatever the skip and the chunking.
fn assert_skip_agrees(name: &str, doc: &[u8], cuts: &[usize]) {
    let plain = run(doc, cuts).map(|_| ());
    for mode in [SkipMode::Whole, SkipMode::RestOfTop, SkipMode::FirstInside] {
        let skipped = run_skip(doc, cuts, mode);
        assert_eq!(
            skipped.as_ref().map(|_| ()),
            plain.as_ref().map(|_| ()),
            "{name} {mode:?} cuts {cuts:?}: skipping changed the verdict"
        );
        if let (SkipMode::Whole, Ok(toks)) = (mode, &skipped) {
            assert_eq!(toks.as_slice(), b"<skipped 1>", "{name}");
        }
    }
}

#[test]
fn skipping_validates_like_tokenizing_on_the_suite() {
    let mut n = 0;
    for (name, doc) in files("") {
        assert_skip_agrees(&name, &doc, &[]);
        let ones: Vec<usize> = (1..doc.len()).collect();
        assert_skip_agrees(&name, &doc, &ones);
        n += 1;
    }
    assert!(n > 300);
}

/// Documents long enough to cross several 64-byte blocks, with every kind of
/// unit near block edges.
fn block_docs() -> Vec<Vec<u8>> {
    let pieces: [&[u8]; 14] = [
        b"plain words ",
        b"\\n",
        b"\\\"",
        b"\\\\",
        b"\\u00e9",
        b"\\uD83D\\uDE00",
        "é".as_bytes(),
        "日本".as_bytes(),
        "😀".as_bytes(),
        b"x",
        b"\\/",
        b"\\u0041",
        b"0123456789abcdef",
        b"\\t",
    ];
    let mut docs = Vec::new();
    let mut x: u64 = 0xC0FF_EE00_1234_5678;
    for k in 0..12 {
        let mut s = Vec::new();
        let target = 10 + (k * 61) % 300;
        while s.len() < target {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            s.extend_from_slice(pieces[(x % pieces.len() as u64) as usize]);
        }
        let s = String::from_utf8(s).unwrap();
        docs.push(
            format!(
                "{{\"k{k}\":\"{s}\",\"list\":[1,-0.5e+3,0,true,false,null,\"{s}\",{{\"deep\":[[{k}],{{}}]}}],\"n\":-12.75E-2}}"
            )
            .into_bytes(),
        );
        docs.push(format!("[\"{s}\",{k},[\"{s}\"],{{\"{s}\":null}}]").into_bytes());
    }
    docs
}

/// Each byte of `doc` (document `d`) replaced by each of `subs`: skipping
/// agrees with tokenizing, whole and with one split, moved around by
/// `stride` so that it lands on every kind of byte. Returns the variants
/// checked.
fn substitutions_agree(kind: &str, d: usize, doc: &[u8], subs: &[&[u8]], stride: usize) -> usize {
    let mut checked = 0;
    for at in 0..doc.len() {
        for sub in subs {
            let mut m = doc[..at].to_vec();
            m.extend_from_slice(sub);
            m.extend_from_slice(&doc[at + 1..]);
            let name = format!("{kind} {d} byte {at} -> {sub:?}");
            assert_skip_agrees(&name, &m, &[]);
            let cut = (at * stride + d) % m.len().max(1);
            assert_skip_agrees(&name, &m, &[cut]);
            checked += 1;
        }
    }
    checked
}

#[test]
fn skipping_validates_like_tokenizing_on_mutated_documents() {
    let subs: [&[u8]; 14] = [
        b"\"",
        b"\\",
        b"}",
        b"]",
        b"\x00",
        b"\x1f",
        b"\xc3",
        b"\xff",
        b"0",
        b"e",
        b".",
        b"",
        b"\\u",
        b"\xed\xa0\x80",
    ];
    let mut checked = 0;
    for (d, doc) in block_docs().iter().enumerate() {
        assert_skip_agrees("block doc", doc, &[]);
        checked += substitutions_agree("doc", d, doc, &subs, 7);
    }
    assert!(checked > 50_000, "{checked}");
}

/// Compact structure several blocks long, as the skip loop's block skim
/// takes it (on a CPU with AVX-512): a list of small objects, numbers of
/// every shape, the list pretty-printed and the numbers deeply indented.
fn structure_docs() -> Vec<Vec<u8>> {
    let mut list = String::from("[");
    for i in 0..6 {
        if i > 0 {
            list.push(',');
        }
        list.push_str(&format!(
            "{{\"id\":{i},\"name\":\"item-{i}\",\"price\":{}.{:02},\"tags\":[\"red\",\"blue\"],\"active\":{},\"owner\":null}}",
            i * 37 % 1000,
            i * 7 % 100,
            i % 3 == 0
        ));
    }
    list.push(']');
    let lists = format!("[{}0]", "[1,2.5,-3e3,true],".repeat(8));
    let numbers = format!(
        "{{\"a\":[0,-0,1.5,-2e10,3E+2,4e-2,0.001,-0.0e0,12345678901234567890,1E400],\"b\":{{\"c\":[true,false,null,[],{{}}],\"d\":\"text \\n \\\" \\/ \\\\ café\"}},\"e\":[[[[{{\"f\":[[[]]]}}]]]],\"g\":{}}}",
        lists
    );
    let pretty = list
        .replace(",", ",\n  ")
        .replace(":", ": ")
        .replace("{", "{ ");
    // Indented deep enough that a block holds few tokens: the skim goes on
    // in dense windows, the whitespace left out.
    let indent = format!("\n{}", " ".repeat(16));
    let indented = numbers
        .replace(",", &format!(",{indent}"))
        .replace(":", ":\t")
        .replace("[", &format!("[\r{indent}"));
    // Deep nesting after a skip long enough for the skim, its closers in one
    // run with values between them (the skim takes such a run at once).
    let mut deep = format!("[{}", "0,".repeat(40));
    let mut closers = Vec::new();
    for i in 0..24 {
        if i % 3 == 1 {
            deep.push_str("{\"k\":");
            closers.push('}');
        } else {
            deep.push('[');
            closers.push(']');
        }
    }
    deep.push_str("\"pad-pad\",null");
    for (idx, &c) in closers.iter().enumerate().rev() {
        deep.push(c);
        if idx % 4 == 1 && closers.get(idx - 1) == Some(&']') {
            deep.push_str(",5");
        }
    }
    deep.push_str(&format!(",7,\"{}\"]", "x".repeat(70)));
    vec![
        list.into_bytes(),
        numbers.into_bytes(),
        pretty.into_bytes(),
        indented.into_bytes(),
        deep.into_bytes(),
    ]
}

#[test]
fn skipping_structure_validates_like_tokenizing() {
    let subs: [&[u8]; 18] = [
        b"\"", b"\\", b"}", b"]", b"{", b"[", b",", b":", b"\x00", b"\xc3", b"0", b"-", b"e", b".",
        b"", b"t", b"\\u", b" ",
    ];
    let mut checked = 0;
    for (d, doc) in structure_docs().iter().enumerate() {
        // Valid as written, and the skip counts what serde_json counts.
        let value: serde_json::Value = serde_json::from_slice(doc).expect("valid");
        let items = match &value {
            serde_json::Value::Array(a) => a.len(),
            serde_json::Value::Object(o) => o.len(),
            _ => unreachable!(),
        };
        let cuts: &[&[usize]] = &[&[], &[doc.len() / 3, doc.len() * 2 / 3]];
        for c in cuts {
            let toks = run_skip(doc, c, SkipMode::RestOfTop).expect("valid");
            let want = format!("<skipped {items}>");
            let toks = String::from_utf8_lossy(&toks);
            assert!(toks.contains(&want), "doc {d}: {toks}");
        }
        checked += substitutions_agree("structure doc", d, doc, &subs, 13);
    }
    assert!(checked > 20_000, "{checked}");
}

#[test]
fn fast_paths_agree_with_every_single_split() {
    // Long strings of multi-byte characters and escapes: every split point lands
    // once inside a sequence, an escape, a surrogate pair and a block edge.
    for doc in block_docs().iter().skip(14).take(6) {
        let whole = run(doc, &[]);
        assert!(whole.is_ok(), "{}", String::from_utf8_lossy(doc));
        for cut in 1..doc.len() {
            assert_eq!(run(doc, &[cut]), whole, "split at {cut}");
            assert_skip_agrees("split doc", doc, &[cut]);
        }
    }
}

/// Every token with where its chunk starts (and a span's bytes), then the
/// verdict with the error's kind and offset; skipping as `mode` asks.
fn trace(doc: &[u8], cuts: &[usize], early: bool, mode: Option<SkipMode>) -> Vec<String> {
    let mut t = Tokenizer::default();
    let mut log = Vec::new();
    let mut asked = false;
    if let Some(mode) = mode {
        ask_skip(&mut t, None, mode, &mut asked);
    }
    let res = drive_with(&mut t, doc, cuts, early, |t, tok, chunk| {
        let bytes = match tok {
            Tok::StrSpan(a, b) | Tok::NumSpan(a, b) => &chunk[a..b],
            Tok::StrHeld => t.held(),
            _ => &[],
        };
        log.push(format!(
            "{tok:?} @{} {}",
            t.chunk_base(),
            String::from_utf8_lossy(bytes)
        ));
        if let Some(mode) = mode {
            ask_skip(t, Some(tok), mode, &mut asked);
        }
    });
    log.push(match res {
        Ok(()) => "accepted".to_string(),
        Err(e) => format!("{:?} at {}", e.kind(), e.offset()),
    });
    log
}

/// Ending a used-up chunk through `try_end_chunk` instead of one more `next`
/// changes nothing: the same tokens from chunks at the same offsets, the same
/// verdict, the same error at the same offset, with and without skips, in
/// 1-byte chunks and at every single split of the suite's files.
#[test]
fn ending_a_chunk_early_changes_nothing() {
    let mut n = 0;
    for (name, doc) in files("") {
        let ones: Vec<usize> = (1..doc.len()).collect();
        let mut splits: Vec<Vec<usize>> = vec![vec![], ones];
        if doc.len() <= 200 {
            splits.extend((1..doc.len()).map(|k| vec![k]));
        }
        for cuts in &splits {
            for mode in [
                None,
                Some(SkipMode::Whole),
                Some(SkipMode::RestOfTop),
                Some(SkipMode::FirstInside),
            ] {
                assert_eq!(
                    trace(&doc, cuts, true, mode),
                    trace(&doc, cuts, false, mode),
                    "{name} {mode:?} cuts {cuts:?}"
                );
            }
        }
        n += 1;
    }
    assert!(n > 300);
}
