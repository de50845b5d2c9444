use resultbudget::{Budget, Limits};

fn run(doc: &str, lim: Limits) -> (String, String) {
    let mut b = Budget::new(lim).unwrap();
    let mut out = Vec::new();
    b.feed(doc.as_bytes(), &mut out).unwrap();
    let rec = b.finish(&mut out).unwrap().to_json();
    (
        String::from_utf8(out).unwrap(),
        String::from_utf8(rec).unwrap(),
    )
}

#[test]
fn smoke() {
    let u = Limits::UNLIMITED;
    for (doc, lim) in [
        (
            r#"[1,2,3,4]"#,
            Limits {
                max_list_items: 2,
                ..u
            },
        ),
        (
            r#"{"a":1,"b":[1,2,3],"c":"hello world"}"#,
            Limits {
                max_map_keys: 2,
                ..u
            },
        ),
        (
            r#"{"a":1,"b":[1,2,3],"c":"hello world"}"#,
            Limits {
                max_string_bytes: 3,
                ..u
            },
        ),
        (
            r#"{"a":1,"b":[1,[2],3],"c":{"x":{}}}"#,
            Limits { max_depth: 1, ..u },
        ),
        (
            r#"{"a":1,"b":[1,2,3],"c":"hello world"}"#,
            Limits {
                max_result_bytes: 20,
                ..u
            },
        ),
        (
            r#"{"a":1,"b":[1,2,3],"c":"hello world"}"#,
            Limits {
                max_result_bytes: 30,
                ..u
            },
        ),
        (
            r#"12345678901234567890"#,
            Limits {
                max_result_bytes: 10,
                ..u
            },
        ),
        (
            r#"["\uD83D\uDE00\u00e9abc"]"#,
            Limits {
                max_string_bytes: 5,
                ..u
            },
        ),
    ] {
        let (o, r) = run(doc, lim);
        println!("{doc} -> {o}  {r}");
        assert!(serde_json::from_str::<serde_json::Value>(&o).is_ok());
    }
}
