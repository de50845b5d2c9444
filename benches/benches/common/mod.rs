//! What the throughput bench and the paired-ratio bench share: the inputs,
//! the engine's budgets, and the baselines a gateway would otherwise run.
//! Every item here is used by both benches.

use resultbudget::mcp::McpLimits;
use resultbudget::Limits;
use resultbudget_benches::{self as rbb, Engine};
use serde::de::IgnoredAny;
use serde_json::Value;
use struson::reader::{JsonReader, JsonStreamReader, ReaderSettings};
use struson::writer::{JsonStreamWriter, JsonWriter};

/// The budgeted runs' result ceiling.
pub const CEILING: u64 = 64 * 1024;

/// The generic budget of the benches: the `budget` command's defaults, 64 KiB result.
pub const GENERIC_BUDGET: Limits = Limits {
    max_result_bytes: CEILING,
    ..Limits::DEFAULT
};

#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// One JSON document: `Budget` with `Limits`.
    Generic,
    /// One tools/call response line: `Projector` with `McpLimits`.
    Mcp,
}

impl Kind {
    /// The engine budgeting to a 64 KiB result.
    pub fn budgeted(self) -> Engine {
        match self {
            Kind::Generic => Engine::generic(GENERIC_BUDGET),
            Kind::Mcp => Engine::mcp(McpLimits::DEFAULT),
        }
    }

    /// The engine with its budgets wide open: the output is the input without
    /// insignificant whitespace (the pass-through every result under its
    /// budget takes).
    pub fn pass(self) -> Engine {
        match self {
            Kind::Generic => Engine::generic(Limits::UNLIMITED),
            Kind::Mcp => Engine::mcp(McpLimits::UNLIMITED),
        }
    }

    /// The element limits a DOM gateway applies for the same budget.
    pub fn dom_limits(self) -> DomLimits {
        match self {
            Kind::Generic => DOM_GENERIC,
            Kind::Mcp => DOM_MCP,
        }
    }
}

/// What a DOM gateway cuts: element limits applied to a parsed `Value`.
/// (No byte ceiling: enforcing one on a DOM takes further passes, so this
/// baseline is, if anything, flattering to the DOM.)
#[derive(Clone, Copy)]
pub struct DomLimits {
    pub list: usize,
    pub keys: usize,
    pub string: usize,
    pub depth: usize,
    /// Content blocks whose base64 `data` is longer than this are dropped.
    pub blob: usize,
}

/// The generic budget's element limits.
const DOM_GENERIC: DomLimits = DomLimits {
    list: 100,
    keys: 100,
    string: 8 * 1024,
    depth: 32,
    blob: usize::MAX,
};

/// `McpLimits::DEFAULT`, approximately: texts at the per-block cap, depth
/// counted from the envelope (structuredContent is at level 3 there).
const DOM_MCP: DomLimits = DomLimits {
    list: 100,
    keys: 100,
    string: 16 * 1024,
    depth: 16 + 2,
    blob: CEILING as usize,
};

fn is_big_blob(v: &Value, max: usize) -> bool {
    v.get("data")
        .and_then(Value::as_str)
        .is_some_and(|d| d.len() > max)
}

/// Cut `v` to `lim` in place (`depth` is the level of `v` if it is a container).
fn truncate_walk(v: &mut Value, lim: &DomLimits, depth: usize) {
    match v {
        Value::Array(a) => {
            if depth > lim.depth {
                a.clear();
                return;
            }
            if lim.blob != usize::MAX {
                a.retain(|x| !is_big_blob(x, lim.blob));
            }
            a.truncate(lim.list);
            for x in a {
                truncate_walk(x, lim, depth + 1);
            }
        }
        Value::Object(m) => {
            if depth > lim.depth {
                m.clear();
                return;
            }
            if m.len() > lim.keys {
                let mut i = 0;
                m.retain(|_, _| {
                    i += 1;
                    i <= lim.keys
                });
            }
            for x in m.values_mut() {
                truncate_walk(x, lim, depth + 1);
            }
        }
        Value::String(s) if s.len() > lim.string => {
            let mut n = lim.string;
            while !s.is_char_boundary(n) {
                n -= 1;
            }
            s.truncate(n);
        }
        _ => {}
    }
}

/// serde_json with its recursion limit (128) lifted: the 200-deep input needs it.
pub fn serde_from<'de, T: serde::Deserialize<'de>>(bytes: &'de [u8]) -> T {
    let mut de = serde_json::Deserializer::from_slice(bytes);
    de.disable_recursion_limit();
    let v = T::deserialize(&mut de).expect("valid JSON");
    de.end().expect("one value");
    v
}

/// serde_json's DOM round trip: parse, cut, serialize.
pub fn serde_round_trip(input: &[u8], lim: &DomLimits, out: &mut Vec<u8>) {
    let mut v: Value = serde_from(input);
    if lim.list != usize::MAX || lim.depth != usize::MAX {
        truncate_walk(&mut v, lim, 1);
    }
    out.clear();
    serde_json::to_writer(&mut *out, &v).expect("serializable");
}

/// struson: read every token and write it again (a streaming copy).
pub fn struson_copy(input: &[u8], out: &mut Vec<u8>) {
    out.clear();
    let settings = ReaderSettings {
        max_nesting_depth: Some(1024),
        track_path: false,
        ..Default::default()
    };
    let mut r = JsonStreamReader::new_custom(input, settings);
    let mut w = JsonStreamWriter::new(&mut *out);
    r.transfer_to(&mut w).expect("valid JSON");
    w.finish_document().expect("written");
    r.consume_trailing_whitespace().expect("one value");
}

pub fn memcpy(input: &[u8], out: &mut Vec<u8>) {
    out.clear();
    out.extend_from_slice(input);
}

/// One input and what the engine must answer when it budgets it.
pub struct Input {
    pub name: &'static str,
    pub kind: Kind,
    pub bytes: Vec<u8>,
    /// `omitted_count` of the budgeted run (64 KiB result).
    pub budget_omitted: u64,
    /// Length of the budgeted output, where pinned.
    pub budget_len: Option<usize>,
}

impl Input {
    /// Run the budgeted engine once into `out` and check its answer: the
    /// pinned record, within the ceiling (plus the MCP envelope), the pinned
    /// length where there is one, valid JSON.
    pub fn check_budgeted(&self, engine: &mut Engine, out: &mut Vec<u8>) {
        let omitted = engine.run(&self.bytes, rbb::CHUNK, out);
        assert_eq!(omitted, self.budget_omitted, "{}: omitted_count", self.name);
        let envelope = if self.kind == Kind::Mcp { 64 } else { 0 };
        assert!(
            out.len() as u64 <= CEILING + envelope,
            "{}: over the ceiling",
            self.name
        );
        if let Some(len) = self.budget_len {
            assert_eq!(out.len(), len, "{}: output length", self.name);
        }
        serde_from::<IgnoredAny>(out);
    }

    /// Run the pass-through engine ([`Kind::pass`]) once into `out` in
    /// `chunk`-byte feeds and check its answer: nothing omitted, and exactly
    /// `compact`, the input without insignificant whitespace.
    pub fn check_pass(&self, engine: &mut Engine, chunk: usize, compact: &[u8], out: &mut Vec<u8>) {
        let omitted = engine.run(&self.bytes, chunk, out);
        assert_eq!(omitted, 0, "{}: pass-through omitted", self.name);
        assert!(
            out.as_slice() == compact,
            "{}: pass-through in {chunk}-byte chunks is not a byte-exact copy",
            self.name
        );
    }
}

/// Pinned answers for the json-benchmark corpus under `GENERIC_BUDGET`
/// (`omitted_count`, output length); checked independently by the benches'
/// assertions (valid JSON, within the 64 KiB ceiling).
const CORPUS: [(&str, u64, usize); 3] = [
    ("twitter", 116, 65536),
    ("citm_catalog", 341, 65536),
    ("canada", 1118, 65534),
];

/// The json-benchmark corpus (where `../shared` has it) and the generated
/// MCP results, at full size under `cargo bench`, scaled down in test mode.
pub fn inputs() -> Vec<Input> {
    let mut inputs = Vec::new();
    for (name, omitted, len) in CORPUS {
        if let Some(bytes) = rbb::corpus(&format!("{name}.json")) {
            inputs.push(Input {
                name,
                kind: Kind::Generic,
                bytes,
                budget_omitted: omitted,
                budget_len: Some(len),
            });
        }
    }
    let text = rbb::scaled(rbb::TEXT_BYTES, 256 << 10);
    inputs.push(Input {
        name: "mcp_text",
        kind: Kind::Mcp,
        bytes: rbb::mcp_text(text),
        // The one text block is cut at max_text_block_bytes.
        budget_omitted: 1,
        budget_len: None,
    });
    let items = rbb::scaled(rbb::LIST_ITEMS, 1_000);
    inputs.push(Input {
        name: "mcp_list",
        kind: Kind::Mcp,
        bytes: rbb::mcp_list(items),
        // Every item past the 100th.
        budget_omitted: items as u64 - 100,
        budget_len: None,
    });
    let trees = rbb::scaled(rbb::DEEP_TREES, 150);
    inputs.push(Input {
        name: "mcp_deep",
        kind: Kind::Mcp,
        bytes: rbb::mcp_deep(rbb::DEEP, trees),
        // Trees past the 100th, plus each kept tree emptied at max_depth.
        budget_omitted: trees as u64,
        budget_len: None,
    });
    inputs.push(Input {
        name: "mcp_image",
        kind: Kind::Mcp,
        // Never below the ceiling, or the image would fit.
        bytes: rbb::mcp_image(rbb::scaled(rbb::IMAGE_RAW, 96 << 10)),
        // The image block is dropped whole.
        budget_omitted: 1,
        budget_len: None,
    });
    inputs
}

/// An input whose over-budget tail is skipped, with the engine that skips it.
pub struct SkipInput {
    pub name: &'static str,
    pub bytes: Vec<u8>,
    pub engine: Engine,
    /// The record's `omitted_count`.
    pub omitted: u64,
}

impl SkipInput {
    /// Run the engine once into `out` and check its answer: the pinned
    /// record, a short output, valid JSON.
    pub fn check(&mut self, out: &mut Vec<u8>) {
        let omitted = self.engine.run(&self.bytes, rbb::CHUNK, out);
        assert_eq!(omitted, self.omitted, "{}: omitted_count", self.name);
        assert!(
            out.len() as u64 <= CEILING + 64,
            "{}: output too long",
            self.name
        );
        serde_from::<IgnoredAny>(out);
    }
}

/// Full-size item count of `skip_list` (scaled down in test mode).
const SKIP_LIST_ITEMS: usize = 220_000; // ≈ 20 MB

/// The three skip inputs: a 20 MB list budgeted to 10 items, and `mcp_text`
/// (from `inputs`) and the same text escaped the common way, each budgeted
/// to about 60 KiB of text.
pub fn skip_inputs(inputs: &[Input]) -> Vec<SkipInput> {
    let n = rbb::scaled(SKIP_LIST_ITEMS, 1_000);
    let list_lim = Limits {
        max_list_items: 10,
        ..Limits::UNLIMITED
    };
    // Only the text limits raised.
    let text_lim = McpLimits {
        max_text_bytes: 60 << 10,
        max_text_block_bytes: 60 << 10,
        ..McpLimits::DEFAULT
    };
    let text = inputs
        .iter()
        .find(|i| i.name == "mcp_text")
        .map(|i| i.bytes.clone())
        .unwrap_or_default();
    vec![
        SkipInput {
            name: "skip_list",
            bytes: rbb::json_list(n),
            engine: Engine::generic(list_lim),
            omitted: n as u64 - 10,
        },
        SkipInput {
            name: "skip_text",
            bytes: text,
            engine: Engine::mcp(text_lim),
            omitted: 1,
        },
        SkipInput {
            name: "skip_code",
            // Text with one-character escapes only (`JSON.stringify`, pydantic).
            bytes: rbb::mcp_code_text(rbb::scaled(rbb::TEXT_BYTES, 256 << 10)),
            engine: Engine::mcp(text_lim),
            omitted: 1,
        },
    ]
}
