//! The tokenizer alone against JSONTestSuite: verdicts and offsets, whole and chunked.
use resultbudget::tokenizer::{Tok, Tokenizer};
use resultbudget::Error;
use std::path::PathBuf;

fn suite_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../shared/corpora/JSONTestSuite/test_parsing")
}

/// Run the tokenizer over `doc` split into the given chunks; rebuild the value's
/// bytes without insignificant whitespace.
fn run(doc: &[u8], cuts: &[usize]) -> Result<Vec<u8>, Error> {
    let mut t = Tokenizer::default();
    let mut out = Vec::new();
    let mut prev = 0;
    let mut bounds: Vec<usize> = cuts.to_vec();
    bounds.push(doc.len());
    let mut need_sep = false;
    for &b in &bounds {
        let chunk = &doc[prev..b];
        prev = b;
        let mut pos = 0;
        loop {
            let tok = t.next(chunk, &mut pos)?;
            match tok {
                Tok::NeedMore => break,
                _ => emit(&t, tok, chunk, &mut out, &mut need_sep),
            }
        }
    }
    loop {
        let tok = t.next_eof()?;
        if tok == Tok::Eof {
            break;
        }
        emit(&t, tok, &[], &mut out, &mut need_sep);
    }
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
    for e in std::fs::read_dir(suite_dir()).unwrap() {
        let p = e.unwrap().path();
        let name = p.file_name().unwrap().to_string_lossy().to_string();
        let doc = std::fs::read(&p).unwrap();
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
