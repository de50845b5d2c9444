//! The tool inventory: one row per tool surface, spec-owned
//! (`specs/agent-mcp-tool-inventory.json`, schema beside it). The proxy uses it
//! to pick per-tool result budgets, typed/read-only overrides, argument caps
//! and the list-versus-search contract; `inventory check` validates a file.

use crate::guard::ArgCaps;
use crate::mcp::McpLimits;
use serde_json::{Map, Value};

/// How a tool surface behaves, for the list-versus-search contract and limits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Class {
    /// A browse page (`list_*`): no query arguments.
    List,
    /// A lookup (`search_*`): a query that is not blank is required.
    Search,
    /// Discovery surfaces (like list for limits).
    Discovery,
    /// A detail read with sections.
    Detail,
    /// A local directory browse.
    Directory,
    /// One item (still budgeted).
    Single,
    /// A state-changing call.
    Mutation,
}

impl Class {
    pub fn parse(s: &str) -> Option<Class> {
        Some(match s {
            "list" => Class::List,
            "search" => Class::Search,
            "discovery" => Class::Discovery,
            "detail" => Class::Detail,
            "directory" => Class::Directory,
            "single" => Class::Single,
            "mutation" => Class::Mutation,
            _ => return None,
        })
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Class::List => "list",
            Class::Search => "search",
            Class::Discovery => "discovery",
            Class::Detail => "detail",
            Class::Directory => "directory",
            Class::Single => "single",
            Class::Mutation => "mutation",
        }
    }

    /// The seed contract's default and maximum `limit` for this class.
    pub fn default_limits(self) -> Option<(u64, u64)> {
        match self {
            Class::List | Class::Search | Class::Discovery => Some((20, 100)),
            Class::Detail => Some((10, 100)),
            Class::Directory => Some((50, 200)),
            Class::Single | Class::Mutation => None,
        }
    }

    /// Classification by name when no inventory row says otherwise.
    pub fn by_name(tool: &str) -> Option<Class> {
        if tool.starts_with("list_") {
            Some(Class::List)
        } else if tool.starts_with("search_") {
            Some(Class::Search)
        } else {
            None
        }
    }
}

/// The `limit` contract of a paged surface.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LimitRule {
    pub param: String,
    pub default: u64,
    pub max: u64,
    /// Clamp a larger limit to `max` instead of refusing the call.
    pub clamp: bool,
}

/// One inventory row.
#[derive(Debug, Clone, PartialEq)]
pub struct Row {
    pub tool: String,
    pub class: Class,
    pub read_only: bool,
    pub typed: bool,
    pub limit: Option<LimitRule>,
    pub search_twin: Option<String>,
    pub query_params: Vec<String>,
    pub result: ResultBudget,
    pub arg_caps: Option<RowArgCaps>,
}

/// Per-tool argument caps (`argument_caps`): each optional, and a cap the row
/// does not name is the proxy's own (its flag or default), as for
/// [`ResultBudget`]. An earlier reading took a cap the row left out as no cap
/// at all, so a row naming only `max_arg_bytes` lifted every other cap,
/// the request size included.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RowArgCaps {
    pub max_arg_bytes: Option<u64>,
    pub max_arg_items: Option<u64>,
    pub max_arg_string_bytes: Option<u64>,
    pub max_arg_string_chars: Option<u64>,
    pub max_arg_keys: Option<u64>,
    pub max_arg_depth: Option<u64>,
    pub max_request_bytes: Option<u64>,
}

impl RowArgCaps {
    /// The row's caps over `base`, the proxy's own.
    pub fn over(&self, base: ArgCaps) -> ArgCaps {
        ArgCaps {
            max_arg_bytes: self.max_arg_bytes.unwrap_or(base.max_arg_bytes),
            max_arg_items: self.max_arg_items.unwrap_or(base.max_arg_items),
            max_arg_string_bytes: self
                .max_arg_string_bytes
                .unwrap_or(base.max_arg_string_bytes),
            max_arg_string_chars: self
                .max_arg_string_chars
                .unwrap_or(base.max_arg_string_chars),
            max_arg_keys: self.max_arg_keys.unwrap_or(base.max_arg_keys),
            max_arg_depth: self.max_arg_depth.unwrap_or(base.max_arg_depth),
            max_request_bytes: self.max_request_bytes.unwrap_or(base.max_request_bytes),
        }
    }
}

/// Per-tool result limits (each optional: the global flag applies otherwise).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ResultBudget {
    pub max_result_bytes: Option<u64>,
    pub max_text_bytes: Option<u64>,
    pub max_text_block_bytes: Option<u64>,
    pub max_content_blocks: Option<u64>,
    pub max_list_items: Option<u64>,
    pub max_structured_bytes: Option<u64>,
}

impl Row {
    /// The global limits with this row's result budget applied.
    pub fn apply_result_limits(&self, mut lim: McpLimits) -> McpLimits {
        let r = &self.result;
        if let Some(v) = r.max_result_bytes {
            lim.max_result_bytes = v;
        }
        if let Some(v) = r.max_text_bytes {
            lim.max_text_bytes = v;
        }
        if let Some(v) = r.max_text_block_bytes {
            lim.max_text_block_bytes = v;
        }
        if let Some(v) = r.max_content_blocks {
            lim.max_content_blocks = v;
        }
        if let Some(v) = r.max_list_items {
            lim.max_list_items = v;
        }
        if let Some(v) = r.max_structured_bytes {
            lim.max_structured_bytes = v;
        }
        lim
    }

    pub fn typed(&self) -> Option<bool> {
        Some(self.typed)
    }

    pub fn read_only(&self) -> Option<bool> {
        Some(self.read_only)
    }
}

/// A loaded inventory.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Inventory {
    pub rows: Vec<Row>,
}

/// The fields every row must carry (checked by `inventory check`).
pub const ROW_FIELDS: &[&str] = &[
    "tool",
    "surface",
    "classification",
    "read_only",
    "limit",
    "cursor",
    "per_item_budget_bytes",
    "result_budget",
    "backend_query_bound",
    "structured_content_policy",
];

impl Inventory {
    pub fn row(&self, tool: &str) -> Option<&Row> {
        self.rows.iter().find(|r| r.tool == tool)
    }

    /// Load and check a file; the error lists every problem, one per line.
    pub fn load(path: &std::path::Path) -> Result<Inventory, Vec<String>> {
        let text =
            std::fs::read_to_string(path).map_err(|e| vec![format!("{}: {e}", path.display())])?;
        Inventory::parse(&text)
    }

    /// Parse and check; the error lists every problem found.
    pub fn parse(text: &str) -> Result<Inventory, Vec<String>> {
        let v: Value =
            serde_json::from_str(text).map_err(|e| vec![format!("not valid JSON: {e}")])?;
        let mut problems = Vec::new();
        let Some(tools) = v.get("tools").and_then(Value::as_array) else {
            return Err(vec![
                "the top level must be an object with a \"tools\" array".into(),
            ]);
        };
        let mut rows = Vec::new();
        for (i, t) in tools.iter().enumerate() {
            match parse_row(t) {
                Ok(r) => rows.push(r),
                Err(mut p) => {
                    let name = t.get("tool").and_then(Value::as_str).unwrap_or("?");
                    for m in p.iter_mut() {
                        *m = format!("tools[{i}] ({name}): {m}");
                    }
                    problems.extend(p);
                }
            }
        }
        // Cross-row invariants.
        for (i, r) in rows.iter().enumerate() {
            if rows.iter().take(i).any(|o| o.tool == r.tool) {
                problems.push(format!("tool {}: more than one row", r.tool));
            }
            if r.class == Class::List {
                match &r.search_twin {
                    None => problems.push(format!(
                        "tool {}: a list row must name its search twin (search_twin)",
                        r.tool
                    )),
                    Some(t) if t.is_empty() => {}
                    Some(t) => {
                        if !rows
                            .iter()
                            .any(|o| &o.tool == t && o.class == Class::Search)
                        {
                            problems.push(format!(
                                "tool {}: search twin {t} has no search row",
                                r.tool
                            ));
                        }
                    }
                }
                if !r.query_params.is_empty() {
                    problems.push(format!(
                        "tool {}: a list row may not accept query arguments",
                        r.tool
                    ));
                }
            }
            if r.class == Class::Search && r.query_params.is_empty() {
                problems.push(format!(
                    "tool {}: a search row must name its required query argument",
                    r.tool
                ));
            }
        }
        if problems.is_empty() {
            Ok(Inventory { rows })
        } else {
            Err(problems)
        }
    }
}

/// Fields a row may carry (the schema's `additionalProperties: false`).
const ROW_ALLOWED: &[&str] = &[
    "tool",
    "server",
    "surface",
    "classification",
    "read_only",
    "limit",
    "cursor",
    "search_twin",
    "query_params",
    "per_item_budget_bytes",
    "result_budget",
    "backend_query_bound",
    "structured_content_policy",
    "argument_caps",
];
const LIMIT_ALLOWED: &[&str] = &["param", "default", "max", "over_max"];
const CURSOR_ALLOWED: &[&str] = &["param", "has_more_field", "next_cursor_field"];
const RESULT_ALLOWED: &[&str] = &[
    "max_result_bytes",
    "max_text_bytes",
    "max_text_block_bytes",
    "max_content_blocks",
    "max_list_items",
    "max_structured_bytes",
];
const CAPS_ALLOWED: &[&str] = &[
    "max_arg_bytes",
    "max_arg_items",
    "max_arg_string_bytes",
    "max_arg_string_chars",
    "max_arg_keys",
    "max_arg_depth",
    "max_request_bytes",
];

/// Unknown keys and non-integer values of an object of limits.
fn check_keys(
    what: &str,
    o: &Map<String, Value>,
    allowed: &[&str],
    ints: bool,
    p: &mut Vec<String>,
) {
    for (k, v) in o {
        if !allowed.contains(&k.as_str()) {
            p.push(format!("{what} has an unknown field {k}"));
        } else if ints && !v.is_u64() {
            p.push(format!("{what}.{k} must be a non-negative integer"));
        }
    }
}

fn get_u64(o: &Map<String, Value>, k: &str) -> Option<u64> {
    o.get(k).and_then(Value::as_u64)
}

fn parse_row(t: &Value) -> Result<Row, Vec<String>> {
    let mut p = Vec::new();
    let Some(o) = t.as_object() else {
        return Err(vec!["a row must be an object".into()]);
    };
    for f in ROW_FIELDS {
        if !o.contains_key(*f) {
            p.push(format!("missing field {f}"));
        }
    }
    check_keys("the row", o, ROW_ALLOWED, false, &mut p);
    if let Some(Value::Object(l)) = o.get("limit") {
        check_keys("limit", l, LIMIT_ALLOWED, false, &mut p);
    }
    if let Some(Value::Object(c)) = o.get("cursor") {
        check_keys("cursor", c, CURSOR_ALLOWED, false, &mut p);
    }
    if let Some(Value::Object(r)) = o.get("result_budget") {
        check_keys("result_budget", r, RESULT_ALLOWED, true, &mut p);
    }
    match o.get("argument_caps") {
        Some(Value::Object(c)) => check_keys("argument_caps", c, CAPS_ALLOWED, true, &mut p),
        Some(_) => p.push("argument_caps must be an object".into()),
        None => {}
    }
    match o.get("query_params") {
        Some(Value::Array(a)) if a.iter().all(Value::is_string) => {}
        Some(_) => p.push("query_params must be an array of strings".into()),
        None => {}
    }
    match o.get("search_twin") {
        Some(Value::String(_) | Value::Null) | None => {}
        Some(_) => p.push("search_twin must be a string or null".into()),
    }
    if let Some(v) = o.get("surface") {
        if !v.is_string() {
            p.push("surface must be a string".into());
        }
    }
    let tool = o
        .get("tool")
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_string();
    if tool.is_empty() {
        p.push("tool must be a non-empty string".into());
    }
    let class = o
        .get("classification")
        .and_then(Value::as_str)
        .and_then(Class::parse);
    if class.is_none() {
        p.push("classification must be one of list, search, discovery, detail, directory, single, mutation".into());
    }
    let read_only = o.get("read_only").and_then(Value::as_bool);
    if o.contains_key("read_only") && read_only.is_none() {
        p.push("read_only must be a boolean".into());
    }
    let policy = o
        .get("structured_content_policy")
        .and_then(Value::as_str)
        .unwrap_or("");
    if o.contains_key("structured_content_policy")
        && !matches!(policy, "cut_generic" | "typed_whole_or_error" | "none")
    {
        p.push(
            "structured_content_policy must be cut_generic, typed_whole_or_error or none".into(),
        );
    }
    let limit = match o.get("limit") {
        Some(Value::Null) | None => None,
        Some(Value::Object(l)) => {
            let param = l
                .get("param")
                .and_then(Value::as_str)
                .unwrap_or("limit")
                .to_string();
            let default = get_u64(l, "default");
            let max = get_u64(l, "max");
            let over = l
                .get("over_max")
                .and_then(Value::as_str)
                .unwrap_or("refuse");
            if default.is_none() || max.is_none() {
                p.push("limit needs integer default and max".into());
            }
            if let (Some(d), Some(m)) = (default, max) {
                if d > m {
                    p.push(format!("limit default {d} is above max {m}"));
                }
                if d == 0 {
                    p.push("limit default must be at least 1".into());
                }
            }
            if !matches!(over, "refuse" | "clamp") {
                p.push("limit.over_max must be refuse or clamp".into());
            }
            Some(LimitRule {
                param,
                default: default.unwrap_or(0),
                max: max.unwrap_or(0),
                clamp: over == "clamp",
            })
        }
        Some(_) => {
            p.push("limit must be an object or null".into());
            None
        }
    };
    if let (Some(c), None) = (class, &limit) {
        if matches!(
            c,
            Class::List | Class::Search | Class::Discovery | Class::Directory
        ) {
            p.push(format!("a {} row must declare its limit", c.as_str()));
        }
    }
    match o.get("cursor") {
        Some(Value::Null) | None => {
            if matches!(class, Some(Class::List | Class::Directory)) {
                p.push("a paged row must declare its cursor/has_more contract".into());
            }
        }
        Some(Value::Object(c)) => {
            for f in ["param", "has_more_field", "next_cursor_field"] {
                if !c.contains_key(f) {
                    p.push(format!("cursor is missing {f}"));
                }
            }
        }
        Some(_) => p.push("cursor must be an object or null".into()),
    }
    let result = match o.get("result_budget") {
        Some(Value::Object(r)) => {
            let rb = ResultBudget {
                max_result_bytes: get_u64(r, "max_result_bytes"),
                max_text_bytes: get_u64(r, "max_text_bytes"),
                max_text_block_bytes: get_u64(r, "max_text_block_bytes"),
                max_content_blocks: get_u64(r, "max_content_blocks"),
                max_list_items: get_u64(r, "max_list_items"),
                max_structured_bytes: get_u64(r, "max_structured_bytes"),
            };
            if rb.max_result_bytes.is_none() {
                p.push("result_budget.max_result_bytes is required".into());
            }
            if rb
                .max_result_bytes
                .is_some_and(|v| v < crate::mcp::MIN_MCP_RESULT_BYTES)
            {
                p.push(format!(
                    "result_budget.max_result_bytes must be at least {}",
                    crate::mcp::MIN_MCP_RESULT_BYTES
                ));
            }
            rb
        }
        _ => {
            p.push("result_budget must be an object".into());
            ResultBudget::default()
        }
    };
    if !o
        .get("per_item_budget_bytes")
        .is_some_and(|v| v.is_u64() || v.is_null())
    {
        p.push("per_item_budget_bytes must be an integer or null".into());
    }
    if !o.get("backend_query_bound").is_some_and(Value::is_string) {
        p.push("backend_query_bound must be a string".into());
    }
    let search_twin = match o.get("search_twin") {
        Some(Value::String(s)) => Some(s.clone()),
        Some(Value::Null) => Some(String::new()),
        _ => None,
    };
    let query_params: Vec<String> = o
        .get("query_params")
        .and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .filter_map(Value::as_str)
                .map(String::from)
                .collect()
        })
        .unwrap_or_default();
    let arg_caps = o
        .get("argument_caps")
        .and_then(Value::as_object)
        .map(|c| RowArgCaps {
            max_arg_bytes: get_u64(c, "max_arg_bytes"),
            max_arg_items: get_u64(c, "max_arg_items"),
            max_arg_string_bytes: get_u64(c, "max_arg_string_bytes"),
            max_arg_string_chars: get_u64(c, "max_arg_string_chars"),
            max_arg_keys: get_u64(c, "max_arg_keys"),
            max_arg_depth: get_u64(c, "max_arg_depth"),
            max_request_bytes: get_u64(c, "max_request_bytes"),
        });
    if !p.is_empty() {
        return Err(p);
    }
    Ok(Row {
        tool,
        class: class.unwrap_or(Class::Single),
        read_only: read_only.unwrap_or(false),
        typed: policy == "typed_whole_or_error",
        limit,
        search_twin,
        query_params,
        result,
        arg_caps,
    })
}
