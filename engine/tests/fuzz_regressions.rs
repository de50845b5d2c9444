//! Replays every saved fuzz input under `fuzz/regressions/<target>/` through
//! the same checks the fuzz targets run (`fuzz/checks.rs`, shared with
//! `#[path]`), so a crash found once stays fixed. Each file is one raw input
//! as libFuzzer handed it to the target named by its directory; see
//! `docs/fuzzing.md`.
//!
//! `FUZZ_REPLAY=<dir>` replays another directory laid out the same way (for
//! example `fuzz/corpus`), on a stable toolchain and without cargo-fuzz.

#[path = "../../fuzz/checks.rs"]
mod checks;

use std::path::{Path, PathBuf};

fn inputs(dir: &Path) -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = match std::fs::read_dir(dir) {
        Ok(rd) => rd
            .map(|e| e.expect("directory entry").path())
            .filter(|p| p.is_file())
            .filter(|p| {
                let name = p.file_name().and_then(|n| n.to_str()).unwrap_or("");
                !name.starts_with('.') && !name.ends_with(".md")
            })
            .collect(),
        Err(_) => Vec::new(),
    };
    files.sort();
    files
}

/// Replay every input of every target under `root`; returns how many ran.
///
/// Runs on its own thread with a large stack: the checks recurse once per level
/// of nesting (up to 1024), which a debug build's 2 MiB test thread cannot hold.
fn replay(root: &Path) -> usize {
    let root = root.to_path_buf();
    std::thread::Builder::new()
        .stack_size(256 << 20)
        .spawn(move || replay_here(&root))
        .expect("spawn the replay thread")
        .join()
        .unwrap_or_else(|e| std::panic::resume_unwind(e))
}

fn replay_here(root: &Path) -> usize {
    let mut ran = 0;
    let mut failed = Vec::new();
    for target in checks::TARGETS {
        for path in inputs(&root.join(target)) {
            let data = std::fs::read(&path).expect("read input");
            let result = std::panic::catch_unwind(|| checks::run_target(target, &data));
            ran += 1;
            if let Err(e) = result {
                let msg = e
                    .downcast_ref::<String>()
                    .cloned()
                    .or_else(|| e.downcast_ref::<&str>().map(|s| s.to_string()))
                    .unwrap_or_default();
                failed.push(format!(
                    "{}: {msg}\n{}",
                    path.display(),
                    checks::describe(target, &data)
                ));
            }
        }
    }
    assert!(
        failed.is_empty(),
        "{} input(s) failed:\n\n{}",
        failed.len(),
        failed.join("\n\n")
    );
    ran
}

#[test]
fn regressions_replay() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../fuzz/regressions");
    let expected: usize = checks::TARGETS
        .iter()
        .map(|t| inputs(&root.join(t)).len())
        .sum();
    // An empty (or missing) directory passes; the hand-picked seeds kept there
    // make sure the checks always run in practice.
    let ran = replay(&root);
    assert_eq!(ran, expected, "every saved input ran");
    eprintln!("replayed {ran} saved fuzz inputs");
}

#[test]
fn replay_dir_from_env() {
    let Some(dir) = std::env::var_os("FUZZ_REPLAY") else {
        return;
    };
    let ran = replay(Path::new(&dir));
    eprintln!("replayed {ran} inputs from {}", Path::new(&dir).display());
}

/// The guard target's checks on inputs made here, so that CI runs them on more
/// than the saved seeds: among them, that the facts the guard reads for the
/// proxy (method, id, tool name, …) equal its slow twin's, a `Walker` that
/// reads only those (`checks::walker_facts`), whole, split, and once the guard
/// is told a line is not a call; and the page-size contract against its
/// oracle (`checks::check_pages`) on the calls that give page sizes (about a
/// tenth) and run with the target's inventory (half of those), and the
/// query rule against its own (`checks::check_queries`), blank queries among
/// them.
#[test]
fn guard_checks_on_generated_lines() {
    std::thread::Builder::new()
        .stack_size(256 << 20)
        .spawn(|| {
            let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
            let mut next = move || {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                x
            };
            let (mut seen_call, mut seen_page, mut seen_blank) = (0, 0, 0);
            for _ in 0..10_000 {
                let n = 40 + (next() % 400) as usize;
                let data: Vec<u8> = (0..n).map(|_| next() as u8).collect();
                checks::guard_one(&data);
                let line = checks::describe("guard", &data);
                if line.contains("tools/call") {
                    seen_call += 1;
                    // Only the page-size arguments are named `count`.
                    if line.contains("\"count\"") || line.contains("co\\u0075nt") {
                        seen_page += 1;
                    }
                    // A query that is there but blank (`checks::check_queries`).
                    let v: Option<serde_json::Value> =
                        serde_json::from_slice(&checks::guard_line(&data)).ok();
                    let blank = v
                        .as_ref()
                        .and_then(|v| v["params"]["arguments"].as_object())
                        .is_some_and(|a| {
                            ["q", "query", "search", "term"].iter().any(|q| {
                                a.get(*q)
                                    .and_then(|s| s.as_str())
                                    .is_some_and(|s| !s.is_empty() && checks::blank_query(s))
                            })
                        });
                    seen_blank += usize::from(blank);
                }
            }
            // About a sixth of the lines name tools/call (half the inputs are
            // raw bytes): the sweep reached the calls, and page sizes.
            assert!(seen_call > 1_000, "only {seen_call} calls generated");
            assert!(seen_page > 100, "only {seen_page} calls with page sizes");
            assert!(
                seen_blank > 30,
                "only {seen_blank} calls with a blank query"
            );
        })
        .expect("spawn")
        .join()
        .unwrap_or_else(|e| std::panic::resume_unwind(e));
}
