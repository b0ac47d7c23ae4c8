//! The layering of `src/` (`docs/architecture.md`): every import of a top-level module
//! points down the list below, and no function in `src/` or `examples/` is over 80
//! lines; and the claims table of `docs/testing.md` names only tests that exist
//! (`support/claims.rs`). Reads the source as text; needs no Redis.

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::{Path, PathBuf};

/// The top-level modules of `src/`, from the bottom layer up; the modules of one layer
/// may import each other only without a cycle, and each may import any layer below.
const LAYERS: &[&[&str]] = &[
    &[
        "drift",
        "error",
        "guide",
        "leader",
        "lock_state",
        "mode",
        "reason",
        "spawner",
        "util",
    ],
    &["observe"],
    &["protocol", "sentinel"],
    &["notify"],
    &["settings"],
    &["backend"],
    &["lease"],
    &["wait"],
    &["engine"],
    &["guard"],
    &["request"],
    &["mutex", "semaphore"],
    // Above the handles: `Builder<C>`'s default type parameter names the mutex.
    &["builder"],
    &["election"],
    // The blocking API (feature `blocking`), over the async handles.
    &["blocking"],
];

/// The longest function allowed, in lines from its `fn` to its closing brace.
const MAX_FUNCTION_LINES: usize = 80;

fn src() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("src")
}

fn examples() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("examples")
}

/// Every `.rs` file under `dir`.
fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|ext| ext == "rs") {
            out.push(path);
        }
    }
}

// The claims table of docs/testing.md against the suite, read as text too.
#[path = "support/claims.rs"]
mod claims;

/// The library's files (not the command's) with the top-level module each belongs to.
fn library() -> Vec<(String, PathBuf)> {
    let mut files = Vec::new();
    rust_files(&src(), &mut files);
    files
        .into_iter()
        .filter(|path| !path.starts_with(src().join("bin")))
        .filter_map(|path| {
            let first = path.strip_prefix(src()).unwrap().components().next()?;
            let unit = first
                .as_os_str()
                .to_str()?
                .trim_end_matches(".rs")
                .to_owned();
            (unit != "lib").then_some((unit, path))
        })
        .collect()
}

/// The code of a file without its unit tests and without comments.
fn code(path: &Path) -> Vec<String> {
    let text = fs::read_to_string(path).unwrap();
    let text = text.split("#[cfg(test)]\nmod tests").next().unwrap();
    text.lines()
        .filter(|line| !line.trim_start().starts_with("//"))
        .map(str::to_owned)
        .collect()
}

/// The top-level modules a line names as `crate::<module>`.
fn imports(line: &str) -> Vec<String> {
    line.match_indices("crate::")
        .filter(|(at, _)| !line[..*at].ends_with(|c: char| c.is_alphanumeric() || c == '_'))
        .map(|(at, _)| {
            line[at + "crate::".len()..]
                .chars()
                .take_while(|c| c.is_alphanumeric() || *c == '_')
                .collect()
        })
        .collect()
}

fn layer_of(unit: &str) -> usize {
    LAYERS
        .iter()
        .position(|layer| layer.contains(&unit))
        .unwrap_or_else(|| panic!("src/{unit} is in no layer of tests/layers.rs"))
}

/// The items lib.rs re-exports at the crate root (`crate::Guard`), with the top-level
/// module each comes from.
fn root_items() -> BTreeMap<String, String> {
    let lib = fs::read_to_string(src().join("lib.rs")).unwrap();
    let mut items = BTreeMap::new();
    for line in lib.lines() {
        let Some(path) = line.strip_prefix("pub use ") else {
            continue;
        };
        let Some((module, rest)) = path.split_once("::") else {
            continue; // `pub use redis;`: another crate
        };
        let names = rest.rsplit("::").next().unwrap();
        for name in names.trim_matches(|c| "{};".contains(c)).split(',') {
            items.insert(name.trim().to_owned(), module.to_owned());
        }
    }
    items
}

/// Every import of a top-level module by another, as `from -> {to}`.
fn import_graph() -> BTreeMap<String, BTreeSet<String>> {
    let root = root_items();
    let mut edges: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for (unit, path) in library() {
        for line in code(&path) {
            for target in imports(&line) {
                let target = match root.get(&target) {
                    Some(module) => module.clone(),
                    None if target.starts_with(char::is_uppercase) => {
                        panic!(
                            "{}: crate::{target} is not re-exported by lib.rs",
                            path.display()
                        )
                    }
                    None => target,
                };
                if target != unit {
                    edges.entry(unit.clone()).or_default().insert(target);
                }
            }
        }
    }
    edges
}

/// A cycle in `edges`, if there is one.
fn cycle(edges: &BTreeMap<String, BTreeSet<String>>) -> Option<Vec<String>> {
    fn visit(
        node: &str,
        edges: &BTreeMap<String, BTreeSet<String>>,
        path: &mut Vec<String>,
        done: &mut BTreeSet<String>,
    ) -> Option<Vec<String>> {
        if let Some(at) = path.iter().position(|seen| seen == node) {
            return Some(path[at..].to_vec());
        }
        if !done.insert(node.to_owned()) {
            return None;
        }
        path.push(node.to_owned());
        for next in edges.get(node).into_iter().flatten() {
            if let Some(found) = visit(next, edges, path, done) {
                return Some(found);
            }
        }
        path.pop();
        None
    }
    let mut done = BTreeSet::new();
    edges
        .keys()
        .find_map(|node| visit(node, edges, &mut Vec::new(), &mut done))
}

#[test]
fn every_import_points_down_or_within_its_layer_without_a_cycle() {
    let edges = import_graph();
    assert!(edges.len() > 10, "the check read the imports: {edges:?}");
    let wrong: Vec<String> = edges
        .iter()
        .flat_map(|(from, to)| to.iter().map(move |to| (from, to)))
        .filter(|(from, to)| layer_of(to) > layer_of(from))
        .map(|(from, to)| format!("{from} imports {to}"))
        .collect();
    assert!(
        wrong.is_empty(),
        "imports pointing up:\n{}",
        wrong.join("\n")
    );
    assert_eq!(cycle(&edges), None, "an import cycle");
}

/// The first line of every function over [`MAX_FUNCTION_LINES`] in `lines`.
fn long_functions(lines: &[String]) -> Vec<(usize, usize)> {
    let mut long = Vec::new();
    for (start, line) in lines.iter().enumerate() {
        let trimmed = line.trim_start();
        let indent = &line[..line.len() - trimmed.len()];
        let signature = trimmed
            .trim_start_matches("pub(crate) ")
            .trim_start_matches("pub(super) ")
            .trim_start_matches("pub ")
            .trim_start_matches("const ")
            .trim_start_matches("async ");
        if !signature.starts_with("fn ") {
            continue;
        }
        // A declaration without a body (a trait's) ends with `;` before any `{`.
        let body = lines[start..]
            .iter()
            .position(|l| l.trim_end().ends_with('{') || l.trim_end().ends_with(';'));
        if body.is_none_or(|at| lines[start + at].trim_end().ends_with(';')) {
            continue;
        }
        let close = format!("{indent}}}");
        if let Some(end) = lines[start..].iter().position(|l| *l == close) {
            if end + 1 > MAX_FUNCTION_LINES {
                long.push((start + 1, end + 1));
            }
        }
    }
    long
}

/// Every function over [`MAX_FUNCTION_LINES`] in the `.rs` files under `dir`, as
/// `<path>:<line>: <count> lines`.
fn long_functions_under(dir: &Path) -> Vec<String> {
    let mut files = Vec::new();
    rust_files(dir, &mut files);
    assert!(!files.is_empty(), "no .rs file under {}", dir.display());
    let mut long = Vec::new();
    for path in &files {
        let text = fs::read_to_string(path).unwrap();
        let lines: Vec<String> = text.lines().map(str::to_owned).collect();
        for (line, count) in long_functions(&lines) {
            long.push(format!("{}:{line}: {count} lines", path.display()));
        }
    }
    long
}

#[test]
fn no_function_in_src_is_over_80_lines() {
    let long = long_functions_under(&src());
    assert!(
        long.is_empty(),
        "functions over {MAX_FUNCTION_LINES} lines:\n{}",
        long.join("\n")
    );
}

/// The examples are read as much as the library: the same rule.
#[test]
fn no_function_in_examples_is_over_80_lines() {
    let long = long_functions_under(&examples());
    assert!(
        long.is_empty(),
        "functions over {MAX_FUNCTION_LINES} lines in examples/:\n{}",
        long.join("\n")
    );
}

#[test]
fn the_checks_see_what_they_look_for() {
    assert_eq!(imports("use crate::lease::Lease;"), ["lease"]);
    assert_eq!(root_items().get("Guard").map(String::as_str), Some("guard"));
    let circle: BTreeMap<String, BTreeSet<String>> = [("a", "b"), ("b", "c"), ("c", "a")]
        .into_iter()
        .map(|(from, to)| (from.to_owned(), BTreeSet::from([to.to_owned()])))
        .collect();
    assert_eq!(cycle(&circle).map(|found| found.len()), Some(3));
    assert_eq!(
        imports("let x = redismutex_crate::a;"),
        Vec::<String>::new()
    );
    let mut body: Vec<String> = vec!["    async fn f() {".into()];
    body.extend((0..MAX_FUNCTION_LINES).map(|_| "        x();".to_owned()));
    body.push("    }".into());
    assert_eq!(long_functions(&body), [(1, MAX_FUNCTION_LINES + 2)]);
    body.truncate(MAX_FUNCTION_LINES - 1);
    body.push("    }".into());
    assert!(long_functions(&body).is_empty());
    let declaration: Vec<String> = vec!["    fn g(&self) -> u8;".into(), "    }".into()];
    assert!(long_functions(&declaration).is_empty());
}
