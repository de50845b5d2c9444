//! Insignificant whitespace removal: the independent oracle of what the engine's
//! pass-through output is (every other byte copied as it stands). Shared by the
//! engine's tests and the benchmarks' answer checks (`#[path]`).

/// `doc` without insignificant whitespace (space, tab, LF, CR outside strings).
/// Only meaningful for valid JSON.
pub fn strip_ws(doc: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(doc.len());
    let mut in_str = false;
    let mut esc = false;
    for &b in doc {
        if in_str {
            out.push(b);
            if esc {
                esc = false;
            } else if b == b'\\' {
                esc = true;
            } else if b == b'"' {
                in_str = false;
            }
        } else if !matches!(b, b' ' | b'\t' | b'\n' | b'\r') {
            out.push(b);
            in_str = b == b'"';
        }
    }
    out
}

#[test]
fn strip_ws_respects_strings() {
    assert_eq!(
        strip_ws(b" [ 1 , \"a b\\\" \\\\\" ,\t{ \"k\" : \"\\\\\" } ]\n"),
        b"[1,\"a b\\\" \\\\\",{\"k\":\"\\\\\"}]".to_vec()
    );
    assert_eq!(strip_ws(b"\"  \""), b"\"  \"".to_vec());
    assert_eq!(
        strip_ws(b" { \"a b\" : [1, \"\\\" x\"] }\n"),
        b"{\"a b\":[1,\"\\\" x\"]}".to_vec()
    );
}
