mod mcp_support;
use mcp_support::*;
use resultbudget::mcp::*;

fn show(lim: McpLimits, treat: resultbudget::mcp::Treat, input: &str) {
    let r = run(lim, treat, input.as_bytes(), 1 << 20);
    println!(
        "IN : {input}\nOUT: {}\nREC: {}\n",
        String::from_utf8_lossy(&r.out),
        String::from_utf8_lossy(&r.rec_json)
    );
}

#[test]
fn scratch() {
    show(
        McpLimits::DEFAULT,
        tool(),
        r#"{"jsonrpc":"2.0","id":1,"result":{"_meta":"str","content":[{"type":"text","text":"ok"}]}}"#,
    );
    show(
        McpLimits::DEFAULT,
        tool(),
        r#"{"jsonrpc":"2.0","id":1,"result":{"_meta":[1,2],"content":[{"type":"text","text":"ok"}]}}"#,
    );
    show(
        McpLimits::DEFAULT,
        tool(),
        r#"{"jsonrpc":"2.0","id":1,"result":{"_meta":null,"content":[{"type":"text","text":"ok"}]}}"#,
    );
    let mut b = resultbudget::Budget::new(resultbudget::Limits {
        max_map_keys: 3,
        ..resultbudget::Limits::UNLIMITED
    })
    .unwrap();
    let mut out = Vec::new();
    b.feed(br#"{"a":1,"b":2,"c":3,"d":4}"#, &mut out).unwrap();
    let rec = b.finish(&mut out).unwrap().to_json();
    println!(
        "{} {}",
        String::from_utf8_lossy(&out),
        String::from_utf8_lossy(&rec)
    );
}
