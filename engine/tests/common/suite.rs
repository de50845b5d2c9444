//! JSONTestSuite's `test_parsing` corpus, read from `../shared`. Shared by the
//! engine's suite tests (`#[path]`).

use std::path::{Path, PathBuf};

pub const SUITE: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/../../shared/corpora/JSONTestSuite/test_parsing"
);

/// Files of the suite whose name starts with `prefix`, sorted by name.
pub fn files(prefix: &str) -> Vec<(String, Vec<u8>)> {
    let mut v: Vec<(String, Vec<u8>)> = std::fs::read_dir(Path::new(SUITE))
        .unwrap_or_else(|e| panic!("reading {SUITE}: {e}"))
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "json"))
        .filter_map(|p: PathBuf| {
            let name = p.file_name()?.to_str()?.to_string();
            name.starts_with(prefix).then(|| {
                let doc = std::fs::read(&p).unwrap();
                (name, doc)
            })
        })
        .collect();
    v.sort();
    v
}
