//! The spec-owned inventory, its schema, `inventory check`, and `inventory audit`
//! against the real reference servers.
mod peers_support;

use peers_support::*;
use serde_json::{json, Value};
use std::path::PathBuf;
use std::process::Command;

fn spec(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../specs")
        .join(name)
}

fn spec_inventory() -> Value {
    serde_json::from_slice(&std::fs::read(spec("agent-mcp-tool-inventory.json")).unwrap()).unwrap()
}

/// Validate with the Python `jsonschema` package (an independent implementation of the schema).
fn schema_valid(doc: &Value) -> bool {
    let dir = tmpdir(&format!("schema-{}", rand_id()));
    let f = dir.join("doc.json");
    std::fs::write(&f, serde_json::to_vec(doc).unwrap()).unwrap();
    let code = "import json,sys,jsonschema\n\
                s=json.load(open(sys.argv[1])); d=json.load(open(sys.argv[2]))\n\
                v=jsonschema.Draft202012Validator(s)\n\
                errs=list(v.iter_errors(d))\n\
                print(len(errs))";
    let out = Command::new(python())
        .args(["-c", code])
        .arg(spec("agent-mcp-tool-inventory.schema.json"))
        .arg(&f)
        .output()
        .expect("python runs");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).trim() == "0"
}

fn rand_id() -> u64 {
    use std::sync::atomic::{AtomicU64, Ordering};
    static N: AtomicU64 = AtomicU64::new(0);
    N.fetch_add(1, Ordering::Relaxed) + u64::from(std::process::id()) * 1000
}

/// `resultbudget inventory check` on a document: (exit code, problem lines).
fn check(doc: &Value) -> (i32, Vec<String>) {
    let dir = tmpdir(&format!("check-{}", rand_id()));
    let f = dir.join("inv.json");
    std::fs::write(&f, serde_json::to_vec_pretty(doc).unwrap()).unwrap();
    let out = Command::new(bin())
        .args(["inventory", "check"])
        .arg(&f)
        .output()
        .unwrap();
    let lines = String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(String::from)
        .collect();
    (out.status.code().unwrap_or(-1), lines)
}

#[test]
fn spec_inventory_is_valid_for_the_schema_and_the_checker() {
    let inv = spec_inventory();
    assert!(
        schema_valid(&inv),
        "the spec inventory breaks its own schema"
    );
    let (code, lines) = check(&inv);
    assert_eq!(code, 0, "{lines:?}");
    assert_eq!(lines, [format!("{}: ok, 27 row(s)", tmp_path_hint(&lines))]);
    // Every row has every contract field.
    for row in inv["tools"].as_array().unwrap() {
        for f in resultbudget::inventory::ROW_FIELDS {
            assert!(row.get(*f).is_some(), "{} lacks {f}", row["tool"]);
        }
    }
}

fn tmp_path_hint(lines: &[String]) -> String {
    lines
        .first()
        .and_then(|l| l.split(": ok").next())
        .unwrap_or_default()
        .to_string()
}

#[test]
fn broken_inventories_are_refused_by_both_with_one_line_per_problem() {
    let base = spec_inventory();
    let row = |tool: &str| -> usize {
        base["tools"]
            .as_array()
            .unwrap()
            .iter()
            .position(|r| r["tool"] == tool)
            .unwrap()
    };
    type Mutation = Box<dyn Fn(&mut Value)>;
    let cases: Vec<(&str, Mutation, &str)> = vec![
        (
            "missing field",
            Box::new(move |v: &mut Value| {
                v["tools"][0]
                    .as_object_mut()
                    .unwrap()
                    .remove("backend_query_bound");
            }),
            "missing field backend_query_bound",
        ),
        (
            "bad classification",
            Box::new(|v: &mut Value| v["tools"][0]["classification"] = json!("browse")),
            "classification must be one of",
        ),
        (
            "unknown field",
            Box::new(|v: &mut Value| v["tools"][0]["colour"] = json!("red")),
            "unknown field colour",
        ),
        (
            "result budget too small",
            Box::new(|v: &mut Value| {
                v["tools"][0]["result_budget"]["max_result_bytes"] = json!(10)
            }),
            "max_result_bytes must be at least 1024",
        ),
        (
            "search row without query",
            Box::new({
                let i = row("search_files");
                move |v: &mut Value| v["tools"][i]["query_params"] = json!([])
            }),
            "a search row must name its required query argument",
        ),
        (
            "directory row without limit",
            Box::new({
                let i = row("list_directory");
                move |v: &mut Value| v["tools"][i]["limit"] = Value::Null
            }),
            "a directory row must declare its limit",
        ),
        (
            "list row without twin",
            Box::new({
                let i = row("list_directory");
                move |v: &mut Value| {
                    v["tools"][i]["classification"] = json!("list");
                    v["tools"][i]["limit"] = json!({"default": 20, "max": 100});
                    v["tools"][i].as_object_mut().unwrap().remove("search_twin");
                }
            }),
            "a list row must name its search twin",
        ),
        (
            "list row with query args",
            Box::new({
                let i = row("list_directory");
                move |v: &mut Value| {
                    v["tools"][i]["classification"] = json!("list");
                    v["tools"][i]["limit"] = json!({"default": 20, "max": 100});
                    v["tools"][i]["query_params"] = json!(["q"]);
                }
            }),
            "a list row may not accept query arguments",
        ),
    ];
    // Each field's wrong type or value, refused by both (one mutation each).
    type Set = (&'static str, &'static str, Value, &'static str);
    let fields: Vec<Set> = vec![
        (
            "argument_caps not an object",
            "read_file",
            json!({"argument_caps": 5}),
            "argument_caps must be an object",
        ),
        (
            "a negative argument cap",
            "read_file",
            json!({"argument_caps": {"max_arg_bytes": -1}}),
            "argument_caps.max_arg_bytes must be a non-negative integer",
        ),
        (
            "an unknown argument cap",
            "read_file",
            json!({"argument_caps": {"max_bytes": 10}}),
            "argument_caps has an unknown field max_bytes",
        ),
        (
            "query_params not strings",
            "search_files",
            json!({"query_params": [1]}),
            "query_params must be an array of strings",
        ),
        (
            "search_twin a number",
            "list_directory",
            json!({"search_twin": 5}),
            "search_twin must be a string or null",
        ),
        (
            "surface a number",
            "read_file",
            json!({"surface": 1}),
            "surface must be a string",
        ),
        (
            "tool empty",
            "read_file",
            json!({"tool": ""}),
            "tool must be a non-empty string",
        ),
        (
            "read_only a string",
            "read_file",
            json!({"read_only": "yes"}),
            "read_only must be a boolean",
        ),
        (
            "an unknown policy",
            "read_file",
            json!({"structured_content_policy": "drop"}),
            "structured_content_policy must be",
        ),
        (
            "limit without max",
            "list_directory",
            json!({"limit": {"param": "limit", "default": 50}}),
            "limit needs integer default and max",
        ),
        (
            "limit default 0",
            "list_directory",
            json!({"limit": {"param": "limit", "default": 0, "max": 200}}),
            "limit default must be at least 1",
        ),
        (
            "an unknown over_max",
            "list_directory",
            json!({"limit": {"param": "limit", "default": 50, "max": 200, "over_max": "truncate"}}),
            "limit.over_max must be refuse or clamp",
        ),
        (
            "an unknown limit field",
            "list_directory",
            json!({"limit": {"param": "limit", "default": 50, "max": 200, "step": 1}}),
            "limit has an unknown field step",
        ),
        (
            "limit a number",
            "list_directory",
            json!({"limit": 5}),
            "limit must be an object or null",
        ),
        (
            "a paged row without cursor",
            "list_directory",
            json!({"cursor": null}),
            "a paged row must declare its cursor/has_more contract",
        ),
        (
            "a cursor without next_cursor_field",
            "list_directory",
            json!({"cursor": {"param": "cursor", "has_more_field": "has_more"}}),
            "cursor is missing next_cursor_field",
        ),
        (
            "cursor a string",
            "list_directory",
            json!({"cursor": "cursor"}),
            "cursor must be an object or null",
        ),
        (
            "result_budget without max_result_bytes",
            "read_file",
            json!({"result_budget": {"max_text_bytes": 1000}}),
            "result_budget.max_result_bytes is required",
        ),
        (
            "result_budget a number",
            "read_file",
            json!({"result_budget": 65536}),
            "result_budget must be an object",
        ),
        (
            "a result limit as text",
            "read_file",
            json!({"result_budget": {"max_result_bytes": 65536, "max_text_bytes": "big"}}),
            "result_budget.max_text_bytes must be a non-negative integer",
        ),
        (
            "per_item_budget_bytes a string",
            "read_file",
            json!({"per_item_budget_bytes": "lots"}),
            "per_item_budget_bytes must be an integer or null",
        ),
        (
            "backend_query_bound a number",
            "read_file",
            json!({"backend_query_bound": 1}),
            "backend_query_bound must be a string",
        ),
    ];
    let mut cases = cases;
    for (name, tool, set, expect) in fields {
        let i = row(tool);
        cases.push((
            name,
            Box::new(move |v: &mut Value| {
                for (k, x) in set.as_object().expect("fields") {
                    v["tools"][i][k] = x.clone();
                }
            }),
            expect,
        ));
    }
    cases.push((
        "a row that is not an object",
        Box::new(|v: &mut Value| v["tools"][0] = json!("read_file")),
        "a row must be an object",
    ));
    cases.push((
        "a top level that is not an object",
        Box::new(|v: &mut Value| *v = json!([])),
        "the top level must be an object",
    ));
    // The checker refuses the broken document with a line naming the problem.
    let refused = |name: &str, mutate: &Mutation, expect: &str| -> Value {
        let mut doc = base.clone();
        mutate(&mut doc);
        let (code, lines) = check(&doc);
        assert_eq!(code, 1, "{name}: {lines:?}");
        assert!(
            lines.iter().any(|l| l.contains(expect)),
            "{name}: {lines:?}"
        );
        doc
    };
    for (name, mutate, expect) in cases {
        let doc = refused(name, &mutate, expect);
        assert!(
            !schema_valid(&doc),
            "{name}: the schema accepts what the checker refuses"
        );
    }
    // Invariants beyond the schema: only the checker sees them.
    let invariants: Vec<(&str, Mutation, &str)> = vec![
        (
            "default above max",
            Box::new({
                let i = row("search_files");
                move |v: &mut Value| {
                    v["tools"][i]["limit"] = json!({"param":"limit","default": 150, "max": 100})
                }
            }),
            "limit default 150 is above max 100",
        ),
        (
            "twin without a search row",
            Box::new({
                let i = row("list_directory");
                move |v: &mut Value| {
                    v["tools"][i]["classification"] = json!("list");
                    v["tools"][i]["search_twin"] = json!("find_things");
                }
            }),
            "search twin find_things has no search row",
        ),
        (
            "duplicate row",
            Box::new(|v: &mut Value| {
                let r = v["tools"][0].clone();
                v["tools"].as_array_mut().unwrap().push(r);
            }),
            "more than one row",
        ),
    ];
    for (name, mutate, expect) in invariants {
        refused(name, &mutate, expect);
    }
    // Two problems, two lines.
    let mut doc = base.clone();
    doc["tools"][0]["classification"] = json!("nope");
    doc["tools"][1]["read_only"] = json!("yes");
    let (_, lines) = check(&doc);
    assert_eq!(lines.len(), 2, "{lines:?}");
}

fn audit(server: &[String], inventory: Option<&PathBuf>) -> (i32, Value) {
    let mut cmd = Command::new(bin());
    cmd.args(["inventory", "audit", "--json"]);
    if let Some(i) = inventory {
        cmd.arg("--inventory").arg(i);
    }
    cmd.arg("--").args(server).current_dir(peers_dir());
    let out = cmd.output().unwrap();
    let v: Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "audit --json output ({e}): {}",
            String::from_utf8_lossy(&out.stdout)
        )
    });
    (out.status.code().unwrap_or(-1), v)
}

#[test]
fn audit_reads_every_page_of_tools_list() {
    // The same server, its tools/list in pages of two: the same tools.
    let whole = audit(&pyserver_cmd(), None).1;
    let paged_cmd: Vec<String> = ["env".to_string(), "RB_TOOLS_PAGE=2".to_string()]
        .into_iter()
        .chain(pyserver_cmd())
        .collect();
    let paged = audit(&paged_cmd, None).1;
    let names = |v: &Value| {
        let mut n: Vec<String> = v["tools"]
            .as_array()
            .expect("tools")
            .iter()
            .map(|t| t.as_str().expect("name").to_string())
            .collect();
        n.sort();
        n
    };
    assert!(names(&whole).len() > 8, "{whole}");
    assert_eq!(names(&paged), names(&whole));
    assert_eq!(findings(&paged), findings(&whole));
}

/// A server that writes stray lines on its stdout before it answers: one
/// that is not UTF-8, and one of 70 MB (over the audit's 64 MiB line cap).
/// The audit reads past both and audits the same tools. Earlier builds read
/// the server by `lines()`, which ended at the first line not UTF-8: the
/// audit then waited out its timeout and failed.
#[test]
fn audit_reads_past_stray_lines_not_utf8_or_over_its_cap() {
    let (want, whole) = audit(&pyserver_cmd(), None);
    let script = "printf 'log: \\377\\376 not UTF-8\\n'; \
        head -c 70000000 /dev/zero | tr '\\0' x; printf '\\n'; exec \"$@\"";
    let cmd: Vec<String> = ["sh", "-c", script, "stray"]
        .iter()
        .map(|s| s.to_string())
        .chain(pyserver_cmd())
        .collect();
    let (code, stray) = audit(&cmd, None);
    assert_eq!(code, want, "{stray}");
    assert_eq!(stray["tools"], whole["tools"]);
    assert_eq!(findings(&stray), findings(&whole));
}

/// A server that ends its output without answering: the audit says so
/// at once (exit 2), rather than that the wait ran out.
#[test]
fn audit_names_a_server_that_ends_before_it_answers() {
    let out = Command::new(bin())
        .args(["inventory", "audit", "--", "sh", "-c"])
        // The shell ends its output and exits; `cat` (its stdin kept on fd
        // 3, as a job in the background reads /dev/null) goes on reading,
        // so the audit's request is written before the output is seen to end.
        .arg("exec 3<&0; cat <&3 > /dev/null 2>&1 & echo 'not an answer'; exit 0")
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(
        err.contains("the server's output ended before it answered request 1"),
        "{err}"
    );
}

/// A server that does not read its input: the audit says so (exit 2),
/// rather than "Broken pipe", and stops the server, which would otherwise
/// go on running after the audit has given up.
#[test]
fn audit_names_a_server_that_stops_reading_and_stops_it() {
    let dir = tmpdir(&format!("audit-stops-{}", rand_id()));
    let pidfile = dir.join("server.pid");
    // It reads the first request, closes its input, and only then answers:
    // the audit's next message finds no reader.
    let script = "read -r request; exec 0<&- 2>/dev/null; echo $$ > \"$1\"; \
        echo '{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{}}'; exec sleep 600";
    let out = Command::new(bin())
        .args(["inventory", "audit", "--", "sh", "-c", script, "server"])
        .arg(&pidfile)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    let pid = std::fs::read_to_string(&pidfile).unwrap();
    let stat = std::fs::read_to_string(format!("/proc/{}/stat", pid.trim()));
    if stat.is_ok() {
        let _ = Command::new("kill").arg(pid.trim()).status();
    }
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(
        err.contains(
            "the server stopped reading its input before notifications/initialized was sent"
        ),
        "{err}"
    );
    // Gone, or at most a zombie its parent has not reaped.
    assert!(
        stat.as_deref().map_or(true, |s| s.contains(") Z ")),
        "the server still runs after the audit: {stat:?}"
    );
}

fn findings(v: &Value) -> Vec<(String, String)> {
    let mut f: Vec<(String, String)> = v["findings"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| {
            (
                f["tool"].as_str().unwrap().to_string(),
                f["kind"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    f.sort();
    f
}

fn pairs(items: &[(&str, &str)]) -> Vec<(String, String)> {
    let mut v: Vec<(String, String)> = items
        .iter()
        .map(|(a, b)| (a.to_string(), b.to_string()))
        .collect();
    v.sort();
    v
}

#[test]
fn audit_server_filesystem_against_the_spec_inventory() {
    let dir = tmpdir("audit-fs");
    let inv = spec("agent-mcp-tool-inventory.json");
    let (code, v) = audit(&filesystem_cmd(&dir), Some(&inv));
    assert_eq!(code, 1, "findings mean a non-zero exit");
    assert_eq!(v["tools"].as_array().unwrap().len(), 14);
    // The reference filesystem server pages nothing: every browse and search surface lacks limit and cursor.
    assert_eq!(
        findings(&v),
        pairs(&[
            ("directory_tree", "paged_without_cursor"),
            ("directory_tree", "paged_without_limit"),
            ("list_directory", "paged_without_cursor"),
            ("list_directory", "paged_without_limit"),
            ("list_directory_with_sizes", "paged_without_cursor"),
            ("list_directory_with_sizes", "paged_without_limit"),
            ("search_files", "paged_without_cursor"),
            ("search_files", "paged_without_limit"),
        ])
    );
}

#[test]
fn audit_server_everything_against_the_spec_inventory_and_without_one() {
    let inv = spec("agent-mcp-tool-inventory.json");
    let (code, v) = audit(&everything_cmd(), Some(&inv));
    assert_eq!(code, 1);
    assert_eq!(v["tools"].as_array().unwrap().len(), 13);
    assert_eq!(
        findings(&v),
        pairs(&[("get-resource-links", "paged_without_cursor")])
    );

    // Without an inventory every tool lacks a row.
    let (code, v) = audit(&everything_cmd(), None);
    assert_eq!(code, 1);
    let f = findings(&v);
    assert_eq!(
        f.iter().filter(|(_, k)| k == "no_inventory_row").count(),
        13,
        "{f:?}"
    );
}

#[test]
fn audit_reports_query_contract_breaks() {
    // The Python SDK server has a list/search pair; an inventory that calls a tool with
    // an optional query a search tool, and one that lists with a query argument, are caught.
    let dir = tmpdir("audit-py");
    let inv = dir.join("inv.json");
    let base = |tool: &str, class: &str| {
        json!({"tool": tool, "surface": tool, "classification": class, "read_only": true,
               "limit": {"param":"limit","default":20,"max":100}, "cursor": {"param":"cursor","has_more_field":"has_more","next_cursor_field":"next_cursor"},
               "per_item_budget_bytes": 256, "result_budget": {"max_result_bytes": 65536},
               "backend_query_bound": "limit+1", "structured_content_policy": "cut_generic"})
    };
    let mut list = base("list_things", "list");
    list["search_twin"] = json!("search_things");
    let mut search = base("search_things", "search");
    search["query_params"] = json!(["query"]);
    // big_text claims to be a search tool with a query it does not have.
    let mut fake = base("big_text", "search");
    fake["query_params"] = json!(["q"]);
    std::fs::write(
        &inv,
        serde_json::to_vec(&json!({"tools": [list, search, fake]})).unwrap(),
    )
    .unwrap();
    let (code, v) = audit(&pyserver_cmd(), Some(&inv));
    assert_eq!(code, 1);
    let f = findings(&v);
    assert!(
        f.contains(&("big_text".into(), "search_query_optional".into())),
        "{f:?}"
    );
    assert!(
        f.contains(&("big_text".into(), "paged_without_limit".into())),
        "{f:?}"
    );
    assert!(
        !f.iter()
            .any(|(t, k)| t == "search_things" && k == "search_query_optional"),
        "{f:?}"
    );
    assert!(
        !f.iter()
            .any(|(t, k)| t == "list_things" && k == "list_accepts_query"),
        "{f:?}"
    );
    assert!(f.contains(&("rows".into(), "no_inventory_row".into())));
}

#[test]
fn the_proxy_applies_inventory_limits_and_clamps() {
    // A row with `over_max: clamp` rewrites the limit instead of refusing the call.
    let dir = tmpdir("clamp");
    let inv = dir.join("inv.json");
    let log = dir.join("server.log");
    std::fs::write(
        &inv,
        serde_json::to_vec(&json!({"tools": [
            {"tool":"list_things","surface":"things","classification":"list","read_only":true,
             "limit":{"param":"limit","default":20,"max":30,"over_max":"clamp"},
             "cursor":{"param":"cursor","has_more_field":"has_more","next_cursor_field":"next_cursor"},
             "search_twin":"search_things","per_item_budget_bytes":256,
             "result_budget":{"max_result_bytes":65536},"backend_query_bound":"limit+1","structured_content_policy":"cut_generic"},
            {"tool":"search_things","surface":"things","classification":"search","read_only":true,"query_params":["query"],
             "limit":{"param":"limit","default":20,"max":40},
             "cursor":{"param":"cursor","has_more_field":"has_more","next_cursor_field":"next_cursor"},
             "per_item_budget_bytes":256,"result_budget":{"max_result_bytes":2048},
             "backend_query_bound":"limit+1","structured_content_policy":"cut_generic"},
            {"tool":"big_text","surface":"text","classification":"single","read_only":true,"limit":null,"cursor":null,
             "per_item_budget_bytes":null,"result_budget":{"max_result_bytes":4096,"max_text_block_bytes":500},
             "backend_query_bound":"n bytes","structured_content_policy":"cut_generic"},
            {"tool":"recent_events","surface":"events","classification":"discovery","read_only":true,
             "limit":{"param":"count","default":5,"max":10,"over_max":"refuse"},"cursor":null,
             "per_item_budget_bytes":256,"result_budget":{"max_result_bytes":4096},
             "backend_query_bound":"count","structured_content_policy":"cut_generic"}
        ]}))
        .unwrap(),
    )
    .unwrap();
    let inv_s = inv.to_string_lossy().into_owned();
    let log_s = log.to_string_lossy().into_owned();
    let mut s = Raw::spawn(
        &proxied(&["--inventory", &inv_s], &pyserver_cmd()),
        &[("RB_SERVER_LOG", &log_s)],
    );
    s.initialize();
    let r = s.call(1, "list_things", json!({"limit": 500}));
    assert_eq!(
        r["result"]["content"][0]["text"], "30 things",
        "clamped to the row's max: {r}"
    );
    let r = s.call(2, "search_things", json!({"query": "x", "limit": 41}));
    assert_eq!(
        r["result"]["_meta"]["resultbudget/refusal"]["max"], 40,
        "{r}"
    );
    let r = s.call(3, "big_text", json!({"n_bytes": 100000}));
    let t = r["result"]["content"][0]["text"].as_str().unwrap();
    assert!(
        t.len() <= 500,
        "the row's text block budget applies: {}",
        t.len()
    );
    assert!(serde_json::to_vec(&r["result"]).unwrap().len() <= 4096);
    // A page size is read by value, as the server reads it: `5e2` and the
    // string "500" are 500 to the Python server, so they are clamped (the
    // string stays a string) or refused like 500. (Earlier builds read only
    // the digits of an integer and passed these on unchanged.)
    let r = s.call(4, "list_things", json!({"limit": 5e2}));
    assert_eq!(r["result"]["content"][0]["text"], "30 things", "{r}");
    let r = s.call(5, "list_things", json!({"limit": "500"}));
    assert_eq!(r["result"]["content"][0]["text"], "30 things", "{r}");
    let r = s.call(6, "search_things", json!({"query": "x", "limit": "41"}));
    assert_eq!(
        r["result"]["_meta"]["resultbudget/refusal"]["reason"], "limit_above_max",
        "{r}"
    );
    let r = s.call(7, "search_things", json!({"query": "x", "limit": 40.5}));
    assert_eq!(
        r["result"]["_meta"]["resultbudget/refusal"]["limit"], "40.5",
        "{r}"
    );
    let r = s.call(8, "list_things", json!({"limit": "lots"}));
    let refusal = &r["result"]["_meta"]["resultbudget/refusal"];
    assert_eq!(refusal["reason"], "limit_not_a_number", "{r}");
    assert_eq!(refusal["value"], "lots", "{r}");
    // A row names its page size: `count` here, and `limit` is another
    // argument of that tool, passed as it is. (Earlier builds read `limit`
    // as the page size of every tool: they refused the second call and
    // passed the first.)
    let r = s.call(9, "recent_events", json!({"count": 50}));
    let refusal = &r["result"]["_meta"]["resultbudget/refusal"];
    assert_eq!(refusal["reason"], "limit_above_max", "{r}");
    assert_eq!(refusal["param"], "count", "{r}");
    assert_eq!(refusal["max"], 10, "{r}");
    let r = s.call(10, "recent_events", json!({"count": 3, "limit": 500}));
    assert_eq!(r["result"]["content"][0]["text"], "3 events", "{r}");
    let _ = s.wait(20);
    let seen = std::fs::read_to_string(&log).unwrap();
    assert_eq!(
        seen.lines().collect::<Vec<_>>(),
        [
            "list_things limit=30",
            "big_text 100000",
            "list_things limit=30",
            "list_things limit=30",
            "recent_events count=3 limit=500"
        ]
    );
}

#[test]
fn filter_applies_a_named_tools_row() {
    use std::io::Write;
    let inv = spec("agent-mcp-tool-inventory.json");
    let big = "x".repeat(200_000);
    let line = format!(
        "{{\"result\":{{\"content\":[{{\"type\":\"text\",\"text\":\"{big}\"}}],\"structuredContent\":{{\"content\":\"{big}\"}}}},\"jsonrpc\":\"2.0\",\"id\":4}}\n"
    );
    let run = |extra: &[&str]| -> (i32, String, String) {
        let mut child = Command::new(bin())
            .arg("filter")
            .args(extra)
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        // The filter may refuse its flags before reading: a broken pipe is fine then.
        let _ = child.stdin.take().unwrap().write_all(line.as_bytes());
        let out = child.wait_with_output().unwrap();
        (
            out.status.code().unwrap_or(-1),
            String::from_utf8_lossy(&out.stdout).into_owned(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    };
    let inv_s = inv.to_string_lossy().into_owned();
    // read_text_file is typed and read-only in the spec inventory: whole or an error.
    let (code, out, _) = run(&["--inventory", &inv_s, "--tool", "read_text_file"]);
    assert_eq!(code, 0);
    let v: Value = serde_json::from_str(out.trim()).unwrap();
    assert_eq!(v["result"]["isError"], true, "{out:.300}");
    assert!(v["result"]["content"][0]["text"]
        .as_str()
        .unwrap()
        .contains("read_text_file"));
    assert_eq!(v["id"], 4);
    // echo is untyped: cut text.
    let (_, out, _) = run(&["--inventory", &inv_s, "--tool", "echo"]);
    let v: Value = serde_json::from_str(out.trim()).unwrap();
    assert!(v["result"].get("isError").is_none());
    assert!(v["result"]["content"][0]["text"]
        .as_str()
        .unwrap()
        .ends_with(" bytes omitted]"));
    // An inventory needs a tool name, and the tool needs a row.
    let (code, _, err) = run(&["--inventory", &inv_s]);
    assert_eq!(code, 2, "{err}");
    let (code, _, err) = run(&["--inventory", &inv_s, "--tool", "nope"]);
    assert_eq!(code, 2);
    assert!(err.contains("no row for tool nope"), "{err}");
}

#[test]
fn a_rows_argument_caps_leave_the_caps_it_does_not_name_in_force() {
    use resultbudget::guard::{ArgCaps, Guard, GuardVerdict};
    use resultbudget::inventory::Inventory;
    let inv = Inventory::load(&spec("agent-mcp-tool-inventory.json")).expect("the spec inventory");
    let guard = || {
        let mut g = Guard::new(ArgCaps::DEFAULT);
        g.set_inventory(Some(inv.clone()));
        g
    };
    let call = |params: String| {
        format!("{{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/call\",\"params\":{params}}}")
    };
    // edit_file's row names max_arg_bytes (1 MiB) and max_arg_items only: a
    // 600 000-byte string is under the first and over the default string cap.
    let line = call(format!(
        "{{\"name\":\"edit_file\",\"arguments\":{{\"path\":\"a\",\"edits\":[],\"note\":\"{}\"}}}}",
        "e".repeat(600_000)
    ));
    let mut g = guard();
    for c in line.as_bytes().chunks(65536) {
        g.feed(c);
    }
    match g.finish("edit_file") {
        Some(GuardVerdict::Cap { cap, limit, .. }) => {
            assert_eq!((cap, limit), ("max_arg_string_bytes", 512 * 1024));
        }
        v => panic!("no string-cap verdict: {v:?}"),
    }
    // While a call's tool is not known (its name may come last), the loosest
    // request cap of any row holds: write_file's 4 325 376 bytes, not none.
    let mut g = guard();
    assert_eq!(g.max_hold(), 4_325_376);
    let line = call(format!(
        "{{\"arguments\":{{\"content\":\"{}\"}},\"name\":\"write_file\"}}",
        "w".repeat(5_000_000)
    ));
    let mut early_at = None;
    let mut fed = 0;
    for c in line.as_bytes().chunks(65536) {
        fed += c.len();
        if g.feed(c).is_some() && early_at.is_none() {
            early_at = Some(fed);
        }
    }
    let at = early_at.expect("an early verdict while the tool is unknown");
    assert!(at <= 4_325_376 + 65536, "refused only after {at} bytes");
}
