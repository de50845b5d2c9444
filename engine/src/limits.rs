//! The generic budget's limits. Every limit documents what it protects and
//! what it does not bound.

/// Smallest accepted `max_result_bytes`: room for `false` or `null` with margin,
/// so a top-level value can always be replaced by something valid.
pub const MIN_RESULT_BYTES: u64 = 8;

/// Limits for budgeting one JSON value. `u64::MAX` / `u32::MAX` mean "no limit".
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Items kept per array (the first N).
    /// Protects: context spent on long lists. Does not bound: the size of each item.
    pub max_list_items: u64,
    /// Members kept per object (the first N in input order).
    /// Protects: context spent on wide maps. Does not bound: key or value sizes.
    pub max_map_keys: u64,
    /// Decoded UTF-8 bytes kept per string value (keys are never cut).
    /// Protects: one huge string eating the budget. Does not bound: keys, the
    /// encoded size (escapes can make it up to 6x larger; `max_result_bytes` bounds that).
    pub max_string_bytes: u64,
    /// Container nesting kept: the top-level container is level 1; a container at
    /// level `max_depth + 1` is emptied (`[]`/`{}`), never dropped.
    /// Protects: readers that recurse. Does not bound: nesting of the *input*
    /// (that is [`Limits::max_nesting`], which refuses instead of cutting).
    pub max_depth: u32,
    /// Encoded bytes of the whole output value, closing brackets included.
    /// Protects: the hard ceiling a transport or a context window has.
    /// Does not bound: the input (any size streams through).
    pub max_result_bytes: u64,
    /// Input nesting the tokenizer accepts at all; deeper input is an error.
    /// Protects: memory of every per-level stack. Does not bound: output depth.
    pub max_nesting: u32,
}

impl Limits {
    /// Defaults for the generic `budget` command: a value an agent can read.
    pub const DEFAULT: Limits = Limits {
        max_list_items: 100,
        max_map_keys: 100,
        max_string_bytes: 8 * 1024,
        max_depth: 32,
        max_result_bytes: 64 * 1024,
        max_nesting: crate::tokenizer::DEFAULT_MAX_NESTING,
    };

    /// Nothing is cut (only `max_nesting` still refuses hostile depth).
    pub const UNLIMITED: Limits = Limits {
        max_list_items: u64::MAX,
        max_map_keys: u64::MAX,
        max_string_bytes: u64::MAX,
        max_depth: u32::MAX,
        max_result_bytes: u64::MAX,
        max_nesting: crate::tokenizer::DEFAULT_MAX_NESTING,
    };

    /// Check the limits are usable; returns a message for the first bad one.
    pub fn validate(&self) -> Result<(), String> {
        if self.max_result_bytes < MIN_RESULT_BYTES {
            return Err(format!(
                "max_result_bytes must be at least {MIN_RESULT_BYTES}, got {}",
                self.max_result_bytes
            ));
        }
        if self.max_nesting == 0 {
            return Err("max_nesting must be at least 1".into());
        }
        Ok(())
    }
}

impl Default for Limits {
    fn default() -> Self {
        Limits::DEFAULT
    }
}

#[cfg(test)]
mod tests {
    use super::{Limits, MIN_RESULT_BYTES};
    use crate::mcp::{McpLimits, Projector, MIN_MCP_RESULT_BYTES};
    use crate::Budget;

    #[test]
    fn unusable_limits_are_refused_with_the_reason() {
        let small = Limits {
            max_result_bytes: MIN_RESULT_BYTES - 1,
            ..Limits::DEFAULT
        };
        let e = Budget::new(small).expect_err("refused");
        assert_eq!(e, "max_result_bytes must be at least 8, got 7");
        let flat = Limits {
            max_nesting: 0,
            ..Limits::DEFAULT
        };
        assert_eq!(
            Budget::new(flat).expect_err("refused"),
            "max_nesting must be at least 1"
        );
        let e = Projector::new(McpLimits {
            max_result_bytes: MIN_MCP_RESULT_BYTES - 1,
            ..McpLimits::DEFAULT
        })
        .expect_err("refused");
        assert!(
            e.starts_with("max_result_bytes must be at least 1024"),
            "{e}"
        );
        let e = Projector::new(McpLimits {
            max_nesting: 0,
            ..McpLimits::DEFAULT
        })
        .expect_err("refused");
        assert_eq!(e, "max_nesting must be at least 1");
        assert_eq!(Limits::default(), Limits::DEFAULT);
        assert_eq!(McpLimits::default(), McpLimits::DEFAULT);
    }

    /// At the smallest ceiling any value still comes out as one valid value.
    #[test]
    fn the_smallest_ceiling_still_gives_a_value() {
        let lim = Limits {
            max_result_bytes: MIN_RESULT_BYTES,
            ..Limits::UNLIMITED
        };
        for doc in [
            &b"{\"a\":[1,2,3],\"b\":\"long string here\"}"[..],
            b"\"a string longer than eight bytes\"",
            b"123456789012345",
            b"[[[[[[[[[[]]]]]]]]]]",
            b"true",
        ] {
            let mut b = Budget::new(lim).expect("usable");
            let mut out = Vec::new();
            b.feed(doc, &mut out).expect("valid");
            b.finish(&mut out).expect("complete");
            assert!(out.len() as u64 <= MIN_RESULT_BYTES, "{out:?}");
            serde_json::from_slice::<serde_json::Value>(&out).expect("one valid value");
        }
    }
}
