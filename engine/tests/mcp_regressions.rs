//! Regressions: minimal reproductions of engine bugs found while testing the
//! MCP projection against `specs/mcp-result-contract.md`, all fixed. Each test
//! states the contract sentence it checks and the root cause it guarded.
mod mcp_support;

use mcp_support::*;
use resultbudget::mcp::McpLimits;

const OPEN: McpLimits = McpLimits {
    max_result_bytes: 1 << 40,
    ..McpLimits::UNLIMITED
};

fn s(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// "room is kept for `,"isError":false` ... An error result can therefore
/// never turn into a success because its `isError` came after a large `content`."
///
/// The key `"isError"` is written into the room reserved for it *before* the
/// reserve is released (`after_string_bytes` checks `avail() < 3` while the
/// 16-byte reserve is still counted), so when `content` used everything else
/// the key is doomed and `isError:true` is dropped (recorded as `/isError`).
#[test]
fn regression_is_error_true_lost_when_content_fills_the_ceiling() {
    let input = envelope(
        format!(
            r#"{{"content":[{{"type":"text","text":"{}"}}],"isError":true}}"#,
            "e".repeat(2000)
        )
        .as_bytes(),
        1,
    );
    let lim = McpLimits {
        max_result_bytes: 1024,
        ..McpLimits::UNLIMITED
    };
    let r = run(lim, tool(), &input, input.len());
    let v: serde_json::Value = serde_json::from_slice(&r.out).unwrap();
    assert_eq!(
        v["result"]["isError"],
        serde_json::Value::Bool(true),
        "isError lost; record: {}",
        s(&r.rec_json)
    );
    assert!(!r.rec.omitted_paths.contains(&"/isError".to_string()));
}

/// "A `_meta` that is not an object is dropped." — and nothing else.
///
/// For a literal `_meta` (`null`, `true`, `false`) the whole token is already
/// consumed when `value_start` calls `lex.skip_one(..)`, so the skip swallows
/// the *next* member's value: here `content` vanishes without being recorded.
/// (`"_meta":5` or `"_meta":"s"` work: the value is still in progress.)
#[test]
fn regression_literal_meta_swallows_the_next_member() {
    for lit in ["null", "true", "false"] {
        let input = envelope(
            format!(
                r#"{{"_meta":{lit},"content":[{{"type":"text","text":"ok"}}],"isError":false}}"#
            )
            .as_bytes(),
            1,
        );
        let r = run(McpLimits::DEFAULT, tool(), &input, input.len());
        let v: serde_json::Value = serde_json::from_slice(&r.out).unwrap();
        assert_eq!(
            v["result"]["content"][0]["text"],
            "ok",
            "_meta:{lit} dropped the following content: {}",
            s(&r.out)
        );
        assert_eq!(r.rec.omitted_paths, ["/_meta"]);
        assert_eq!(r.rec.omitted_count, 1);
    }
}

/// "A path is listed only while the record still fits inside the ceiling" —
/// the *result* ceiling. When `structuredContent` runs out of its own byte
/// scope, `add_cut`/`step` set `path_room = out.avail()`, the minimum over both
/// scopes, i.e. ~0: the path is never listed although the result has room.
#[test]
fn regression_structured_bytes_cut_path_is_never_listed() {
    let items: Vec<String> = (0..200).map(|i| i.to_string()).collect();
    let input = envelope(
        format!(
            r#"{{"content":[],"structuredContent":{{"items":[{}]}}}}"#,
            items.join(",")
        )
        .as_bytes(),
        1,
    );
    let lim = McpLimits {
        max_structured_bytes: 100,
        ..OPEN
    };
    let r = run(lim, tool(), &input, input.len());
    let doc = parse_valid(&r.out);
    let kept = doc
        .get("result")
        .unwrap()
        .get("structuredContent")
        .unwrap()
        .get("items")
        .unwrap()
        .items()
        .len();
    assert_eq!(r.rec.budget_kind.as_deref(), Some("structured_bytes"));
    assert_eq!(
        r.rec.omitted_paths,
        [format!("/structuredContent/items/{kept}")],
        "record: {}",
        s(&r.rec_json)
    );
    assert_eq!(r.rec.unlisted, 0);
}

/// "the whole block is dropped and recorded once at `/content/i`" and
/// (generic rules) "nothing inside an omitted ... value is counted again".
///
/// Cuts made inside a block before the block fails (here: its annotations
/// list cut by `max_list_items`, then its 2000-byte `data` does not fit) stay
/// in the record: count 2 instead of 1, an extra path pointing into a block
/// that is not in the output, and `budget_kind` `list_items` instead of `blob`.
#[test]
fn regression_dropped_block_still_counts_cuts_inside_it() {
    let input = envelope(
        format!(
            r#"{{"content":[{{"type":"image","annotations":{{"audience":["a","b","c"]}},"data":"{}"}},{{"type":"text","text":"after"}}]}}"#,
            "A".repeat(2000)
        )
        .as_bytes(),
        1,
    );
    let lim = McpLimits {
        max_result_bytes: 1024,
        max_list_items: 2,
        ..McpLimits::UNLIMITED
    };
    let r = run(lim, tool(), &input, input.len());
    assert!(s(&r.out).contains(r#""content":[{"type":"text","text":"after"}]"#));
    assert_eq!(
        (
            r.rec.omitted_count,
            r.rec.budget_kind.as_deref(),
            r.rec.omitted_paths.clone()
        ),
        (1, Some("blob"), vec!["/content/0".to_string()]),
        "record: {}",
        s(&r.rec_json)
    );
}

/// "Any split gives byte-identical output, the same record" (budget-semantics).
///
/// The tokenizer's decoded length of a string (`string_decoded_len`, used for
/// the marker's "X of Y bytes") undercounts a raw multi-byte UTF-8 character
/// that lies after the cut and is split across two feeds: in `unit_done` the
/// encoded size of a unit continued from the previous chunk is
/// `held_len + (i - start)`, but `held_len` only grows while the string is
/// still being kept. The marker numbers — and so the kept length — then
/// depend on the chunking.
#[test]
fn regression_marker_total_depends_on_chunking_for_split_utf8() {
    let input = envelope(
        format!(
            r#"{{"content":[{{"type":"text","text":"{}"}}]}}"#,
            "é".repeat(40)
        )
        .as_bytes(),
        1,
    );
    let lim = McpLimits {
        max_text_block_bytes: 60,
        ..OPEN
    };
    let whole = run(lim, tool(), &input, input.len());
    assert!(s(&whole.out).contains("72 of 80 bytes omitted]"));
    for chunk in [1usize, 2, 3] {
        let r = run(lim, tool(), &input, chunk);
        assert_eq!(s(&r.out), s(&whole.out), "chunks of {chunk} bytes");
    }
    // The same for 3- and 4-byte characters, and every unit kind at once.
    for text in ["中".repeat(40), "😀".repeat(40), "aé中😀".repeat(10)] {
        let input = envelope(
            format!(r#"{{"content":[{{"type":"text","text":"{text}"}}]}}"#).as_bytes(),
            1,
        );
        let whole = run(lim, tool(), &input, input.len());
        for chunk in [1usize, 2, 3] {
            let r = run(lim, tool(), &input, chunk);
            assert_eq!(s(&r.out), s(&whole.out), "{text}: chunks of {chunk} bytes");
        }
    }
}

/// The receipt's `request_id` is "the JSON-RPC id of the call"; `CallInfo`
/// says "else the response's own id is used". The TypeScript SDK writes the
/// id *after* `result`, and `write_typed_error` runs when `result` closes,
/// before the id was read: the receipt says `"request_id":null`. `filter
/// --typed --mutating` always passes `request_id: None`, so it hits this on
/// every TypeScript server.
#[test]
fn regression_receipt_request_id_is_null_when_the_id_comes_last() {
    let input = format!(
        r#"{{"result":{{"content":[{{"type":"text","text":"{}"}}]}},"jsonrpc":"2.0","id":77}}"#,
        "A".repeat(2000)
    );
    let lim = McpLimits {
        max_result_bytes: 1024,
        ..McpLimits::DEFAULT
    };
    let r = run(lim, typed("t", false, None), input.as_bytes(), input.len());
    assert!(r.typed_failed);
    let v: serde_json::Value = serde_json::from_slice(&r.out).unwrap();
    assert_eq!(
        v["result"]["_meta"]["resultbudget/receipt"]["request_id"].to_string(),
        "77",
        "{}",
        s(&r.out)
    );
}

/// "A cut text keeps the longest prefix of whole characters that leaves room
/// for a marker, then the marker, all within the per-block ... budget."
///
/// `string_end` reserves `marker_len(total)` *encoded* bytes (the `\n` escape
/// counted as 2, both numbers as wide as the total) against the *decoded*
/// allowance, so the kept text is one byte (or more) shorter than the longest
/// prefix: with a 60-byte block budget, 4 characters + a 55-byte marker = 59,
/// where 5 + 55 = 60 fits.
#[test]
fn regression_cut_text_is_shorter_than_the_longest_prefix() {
    let total = 2000u64;
    let input = envelope(
        format!(
            r#"{{"content":[{{"type":"text","text":"{}"}}]}}"#,
            "A".repeat(total as usize)
        )
        .as_bytes(),
        1,
    );
    for limit in [60u64, 100, 1000] {
        let lim = McpLimits {
            max_text_block_bytes: limit,
            ..OPEN
        };
        let r = run(lim, tool(), &input, input.len());
        let v: serde_json::Value = serde_json::from_slice(&r.out).unwrap();
        let text = v["result"]["content"][0]["text"]
            .as_str()
            .unwrap()
            .to_string();
        let want = (0..=limit)
            .rev()
            .find(|&k| k + marker(total - k, total).len() as u64 <= limit)
            .unwrap();
        let (kept, _, _) = split_marker(&text).unwrap();
        assert_eq!(
            kept.len() as u64,
            want,
            "limit {limit}: got {} bytes of text ({text:?})",
            text.len()
        );
    }
}

/// Only `annotations`, `_meta` (and the like) are free-form in a block; a
/// block's `type` is its discriminator. It is cut like free text by
/// `max_string_bytes`: `"resource_link"` becomes `"resource"`, a different
/// block kind whose required `resource` member is missing ("A block is never
/// emitted without a required member"). (`uri`, `name`, `mimeType` are cut the
/// same way, leaving a truncated URI that still looks valid.)
#[test]
fn regression_block_type_is_cut_like_free_text() {
    let input = envelope(
        br#"{"content":[{"type":"resource_link","uri":"file:///a","name":"a"}]}"#,
        1,
    );
    let lim = McpLimits {
        max_string_bytes: 8,
        ..OPEN
    };
    let r = run(lim, tool(), &input, input.len());
    let v: serde_json::Value = serde_json::from_slice(&r.out).unwrap();
    let t = &v["result"]["content"][0]["type"];
    assert!(
        t.is_null() || t == "resource_link",
        "block type rewritten: {}",
        s(&r.out)
    );
}

/// "An error result can therefore never turn into a success" — also when the
/// result holds `isError` twice. JSON parsers keep the last of duplicate
/// members, so the verdict is the input's last `isError`.
///
/// Found by the `mcp` fuzz target (fourth session): a first `isError` whose
/// value was an object took the 16 bytes kept for `isError` (kept as `{}`),
/// then `content` filled the ceiling, and the last `"isError":true` found no
/// room and was dropped: a client read `isError: {}`. Now room for one last
/// `,"isError":…` is kept to the end of the result; a boolean `isError` that
/// does not fit in place is written there, from the input's last value.
#[test]
fn regression_duplicate_is_error_true_lost_after_the_room_is_spent() {
    let big = "e".repeat(2000);
    let cases = [
        // (result members, the verdict the input ends with)
        (
            format!(
                r#""isError":{{"a":"{big}"}},"content":[{{"type":"text","text":"{big}"}}],"isError":true"#
            ),
            true,
        ),
        (
            format!(
                r#""isError":false,"content":[{{"type":"text","text":"{big}"}}],"isError":true"#
            ),
            true,
        ),
        (
            format!(
                r#""isError":true,"content":[{{"type":"text","text":"{big}"}}],"isError":false"#
            ),
            false,
        ),
        (
            format!(
                r#""content":[{{"type":"text","text":"{big}"}}],"isError":false,"isError":true,"isError":true"#
            ),
            true,
        ),
        // The last one's key does not even fit (seven escapes, and the first
        // `isError` and `resultType` took their reserves): its value still counts.
        (
            format!(
                r#""content":[{{"type":"text","text":"{big}"}}],"isError":false,"resultType":"complete","\u0069\u0073\u0045\u0072\u0072\u006f\u0072":true"#
            ),
            true,
        ),
    ];
    let lim = McpLimits {
        max_result_bytes: 1024,
        ..McpLimits::UNLIMITED
    };
    for (members, want) in cases {
        let input = envelope(format!("{{{members}}}").as_bytes(), 1);
        for chunk in [1, 7, 64, input.len()] {
            let r = run(lim, tool(), &input, chunk);
            // serde_json keeps the last of duplicate members, as JSON.parse does.
            let v: serde_json::Value = serde_json::from_slice(&r.out).unwrap();
            assert_eq!(
                v["result"]["isError"],
                serde_json::Value::Bool(want),
                "{members:.60}… in chunks of {chunk}: {}",
                s(&r.out)
            );
            let result = serde_json::to_vec(&v["result"]).unwrap();
            assert!(result.len() <= 1024, "{}", s(&r.out));
        }
    }
}

/// The same room serves a key that cannot be read in place: an `isError`
/// whose key does not fit and whose value is not a boolean is dropped and
/// recorded, and the verdict written before it stands.
#[test]
fn regression_unreadable_is_error_key_with_an_object_value_is_dropped() {
    let big = "e".repeat(2000);
    let members = format!(
        r#""content":[{{"type":"text","text":"{big}"}}],"isError":true,"resultType":"complete","\u0069\u0073\u0045\u0072\u0072\u006f\u0072":{{"x":1}}"#
    );
    let input = envelope(format!("{{{members}}}").as_bytes(), 1);
    let lim = McpLimits {
        max_result_bytes: 1024,
        ..McpLimits::UNLIMITED
    };
    let whole = run(lim, tool(), &input, input.len());
    for chunk in [1, 7, 64] {
        let r = run(lim, tool(), &input, chunk);
        assert_eq!(s(&r.out), s(&whole.out), "chunks of {chunk}");
    }
    let v: serde_json::Value = serde_json::from_slice(&whole.out).unwrap();
    assert_eq!(v["result"]["isError"], serde_json::Value::Bool(true));
    assert_eq!(v["result"]["resultType"], "complete");
    assert!(whole.rec.truncated);
    // The text is cut (one site) and the unreadable member is dropped (another).
    assert!(whole.rec.omitted_count >= 2, "{}", s(&whole.rec_json));
}

/// The same rule at every ceiling around the point where the room runs out:
/// the whole projection check holds (the moved `isError` is the only change of
/// order it allows), and the verdict is the input's last.
#[test]
fn duplicate_is_error_at_every_ceiling() {
    let text = "e".repeat(1500);
    let results = [
        format!(
            r#"{{"isError":false,"content":[{{"type":"text","text":"{text}"}}],"resultType":"complete","isError":true}}"#
        ),
        format!(
            r#"{{"content":[{{"type":"text","text":"{text}"}}],"isError":true,"resultType":"complete","isError":false,"structuredContent":{{"k":"v"}}}}"#
        ),
        format!(
            r#"{{"isError":{{"a":[1,2,3]}},"content":[{{"type":"text","text":"{text}"}}],"isError":true,"resultType":"complete"}}"#
        ),
    ];
    for result in &results {
        let input = envelope(result.as_bytes(), 1);
        let want: serde_json::Value = serde_json::from_slice(&input).unwrap();
        let want = &want["result"]["isError"];
        sweep_ceilings(&input, |ceiling, r, c| {
            assert!(c.result_len as u64 <= ceiling);
            let v: serde_json::Value = serde_json::from_slice(&r.out).unwrap();
            if want.is_boolean() {
                assert_eq!(
                    &v["result"]["isError"],
                    want,
                    "ceiling {ceiling}: {}",
                    s(&r.out)
                );
            }
        });
    }
}

/// Every `max_result_bytes` from 1024 to 2000, whole and in 7-byte chunks,
/// each run through the full projection check, then handed to `each`.
fn sweep_ceilings(input: &[u8], mut each: impl FnMut(u64, &Run, &Checked)) {
    for ceiling in 1024..=2000u64 {
        let lim = McpLimits {
            max_result_bytes: ceiling,
            ..McpLimits::UNLIMITED
        };
        for chunk in [7, input.len()] {
            let r = run(lim, tool(), input, chunk);
            let c = check_message(&lim, input, &r);
            each(ceiling, &r, &c);
        }
    }
}

/// Not an engine bug, a gap in the checker, found by sweeping the ceiling:
/// when `_meta` cannot even open, it is dropped whole (`/_meta`) and the
/// record brings its own `_meta`, which looks exactly like the input's `_meta`
/// with every member cut; and members whose keys fit but whose values do not
/// are dropped one by one, which looks like the prefix rule. Each reading is
/// checked against the record.
#[test]
fn a_meta_that_cannot_open_is_dropped_whole_at_every_ceiling() {
    let text = "e".repeat(1500);
    for meta in [r#"{"k":"v"}"#, r#"{"k":"v","l":[1,2],"m":{"n":null}}"#] {
        let result = format!(
            r#"{{"content":[{{"type":"text","text":"{text}"}}],"isError":true,"_meta":{meta}}}"#
        );
        let input = envelope(result.as_bytes(), 1);
        let mut whole = 0;
        sweep_ceilings(&input, |_, r, _| {
            whole += usize::from(r.rec.omitted_paths == ["/_meta"]);
        });
        assert!(whole > 0, "the sweep never dropped _meta whole");
    }
}
