//! The shape of `src/`: each top-level module imports only those in the groups before its own
//! in `LAYERS` (lib.rs says why), the modules of one group do not import each other, no two
//! files import each other (directly or round a longer cycle), and no file or function grows
//! past what a reader can hold.

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::{Path, PathBuf};

/// Lowest first; lib.rs and main.rs stand above all. The modules of one group stand side by
/// side: `local` (execution on this machine) and `remote` (the REAPI client) meet only in `engine`.
const LAYERS: [&[&str]; 6] = [
    &["job"],
    &["render"],
    &["report"],
    &["local", "remote"],
    &["link"],
    &["cmd"],
];

/// Inside a group's folder, the layers below the rest of it, lowest first: `job/util` imports
/// nothing of the crate, `job/store` only `job/util`; the run's engine (`link/engine`) nothing
/// of the classic flow beside it; the command line (`cmd/cli`) none of the subcommands.
const INNER: [(&str, &[&str]); 3] = [
    ("job", &["util", "store"]),
    ("link", &["engine"]),
    ("cmd", &["cli"]),
];

/// The longest a file may be, in lines.
const FILE_LINES: usize = 900;
/// The longest a function of the run engine or the remote client may be, in lines.
const FN_LINES: usize = 80;
/// The longest any other function may be, in lines.
const ANY_FN_LINES: usize = 100;

fn src() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("src")
}

/// A file's text up to its unit tests (`#[cfg(test)] mod tests`), which may import anything
/// (an item of its own marked `#[cfg(test)]` earlier is code like the rest).
fn code(file: &Path) -> String {
    let text = fs::read_to_string(file).unwrap();
    match text.find("#[cfg(test)]\nmod tests") {
        Some(at) => text[..at].to_string(),
        None => text,
    }
}

/// The lines of a text, with each `use` that rustfmt spread over several lines joined into one
/// (its first line's number).
fn logical_lines(text: &str) -> Vec<(usize, String)> {
    let mut out: Vec<(usize, String)> = Vec::new();
    let mut open = false;
    for (n, line) in text.lines().enumerate() {
        let t = line.trim_start();
        if open {
            out.last_mut().expect("a use").1.push_str(t);
        } else {
            out.push((n + 1, line.to_string()));
        }
        let starts = t.starts_with("use ") || (t.starts_with("pub") && t.contains(" use "));
        if starts || open {
            open = !t.trim_end().ends_with(';');
        }
    }
    out
}

/// The paths of a group's members (`{b, c::d}` after `a::`), each after `segments`.
fn group(segments: &[String], group: &str, line: usize, found: &mut Vec<(usize, Vec<String>)>) {
    let end = group.find('}').unwrap_or(group.len());
    for member in group[..end].split(',').filter(|m| !m.trim().is_empty()) {
        let member: Vec<String> = member
            .trim()
            .split("::")
            .map(|s| s.trim().to_string())
            .filter(|s| !s.is_empty() && s != "self" && s != "*")
            .collect();
        let mut path = segments.to_vec();
        path.extend(member);
        found.push((line, path));
    }
}

/// Every path starting with `prefix` (`crate::`, `super::`) a text names, as (line number,
/// segments); a group (`a::{b, c::d}`, `crate::{a, b}`) gives one path per member.
fn paths(text: &str, prefix: &str) -> Vec<(usize, Vec<String>)> {
    let mut found = Vec::new();
    for (n, line) in logical_lines(text) {
        if line.trim_start().starts_with("//") {
            continue;
        }
        let mut rest = line.as_str();
        while let Some(at) = rest.find(prefix) {
            // Not the tail of a longer word (`self::super::`).
            let before = rest[..at].chars().last();
            rest = &rest[at + prefix.len()..];
            if before.is_some_and(|c| c.is_ascii_alphanumeric() || c == '_') {
                continue;
            }
            let mut segments = Vec::new();
            let mut tail = rest;
            loop {
                if let Some(g) = tail.strip_prefix('{') {
                    group(&segments, g, n, &mut found);
                    segments.clear();
                    break;
                }
                let word: String = tail
                    .chars()
                    .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                    .collect();
                if word.is_empty() {
                    break;
                }
                segments.push(word.clone());
                tail = &tail[word.len()..];
                match tail.strip_prefix("::") {
                    Some(t) => tail = t,
                    None => break,
                }
            }
            if !segments.is_empty() {
                found.push((n, segments));
            }
        }
    }
    found
}

fn rust_files(path: &Path, out: &mut Vec<PathBuf>) {
    if path.is_dir() {
        for e in fs::read_dir(path).unwrap().flatten() {
            rust_files(&e.path(), out);
        }
    } else if path.is_file() && path.extension().is_some_and(|e| e == "rs") {
        out.push(path.to_path_buf());
    }
}

fn all_files() -> Vec<PathBuf> {
    let mut files = Vec::new();
    rust_files(&src(), &mut files);
    files.sort();
    files
}

/// The group `LAYERS` puts a top-level module in.
fn rank(name: &str) -> Option<usize> {
    LAYERS.iter().position(|g| g.contains(&name))
}

#[test]
fn each_layer_imports_only_the_layers_below_it() {
    let mut wrong = Vec::new();
    let mut seen = 0;
    for group in LAYERS {
        for layer in group {
            let mut files = Vec::new();
            rust_files(&src().join(layer), &mut files);
            rust_files(&src().join(format!("{layer}.rs")), &mut files);
            assert!(!files.is_empty(), "src/{layer} is missing");
            let own = rank(layer).unwrap();
            for file in files {
                let text = fs::read_to_string(&file).unwrap();
                for (line, path) in paths(&text, "crate::") {
                    seen += 1;
                    let name = &path[0];
                    match rank(name) {
                        Some(to) if to < own || name == layer => {}
                        _ => wrong.push(format!("{}:{line}: crate::{name}", file.display())),
                    }
                }
            }
        }
    }
    let top: BTreeSet<String> = fs::read_dir(src())
        .unwrap()
        .flatten()
        .map(|e| {
            e.file_name()
                .to_string_lossy()
                .trim_end_matches(".rs")
                .to_string()
        })
        .filter(|n| n != "lib" && n != "main")
        .collect();
    let listed: BTreeSet<String> = LAYERS
        .iter()
        .flat_map(|g| g.iter())
        .map(|s| s.to_string())
        .collect();
    assert_eq!(top, listed, "src/ holds modules that LAYERS does not place");
    assert!(
        seen > 50,
        "found only {seen} crate:: paths: is the scan broken?"
    );
    assert!(
        wrong.is_empty(),
        "imports that go up a layer or across to a side-by-side one:\n{}",
        wrong.join("\n")
    );
}

#[test]
fn each_folder_keeps_its_inner_order() {
    let mut wrong = Vec::new();
    let mut seen = 0;
    for (group, inner) in INNER {
        for (own, sub) in inner.iter().enumerate() {
            let mut files = Vec::new();
            rust_files(&src().join(group).join(sub), &mut files);
            assert!(!files.is_empty(), "src/{group}/{sub} is missing");
            for file in files {
                let text = code(&file);
                for (line, path) in paths(&text, "crate::") {
                    seen += 1;
                    let to = match (path.first(), path.get(1)) {
                        (Some(g), Some(to)) if g == group => to,
                        _ if group == "job" && *sub == "util" => {
                            wrong.push(format!("{}:{line}: crate::{}", file.display(), path[0]));
                            continue;
                        }
                        _ => continue,
                    };
                    match inner.iter().position(|s| s == to) {
                        Some(rank) if rank <= own => {}
                        _ => wrong.push(format!("{}:{line}: crate::{group}::{to}", file.display())),
                    }
                }
            }
        }
    }
    assert!(
        seen > 20,
        "found only {seen} crate:: paths in the inner layers"
    );
    assert!(
        wrong.is_empty(),
        "imports that go up inside a folder:\n{}",
        wrong.join("\n")
    );
}

/// The file a path names from `file` (`crate::a::b::C` or `super::b`): the deepest module file
/// of its segments that exists, or None when it is the file itself or a folder's `mod.rs` (a
/// folder's face, which may re-export its files).
fn target(file: &Path, path: &[String], from: From) -> Option<PathBuf> {
    let parent = file.parent().unwrap();
    let is_face = file.file_name().is_some_and(|n| n == "mod.rs");
    let mut dir = match from {
        From::Crate => src(),
        From::Super if is_face => parent.parent().unwrap().to_path_buf(),
        From::Super | From::Child => parent.to_path_buf(),
    };
    let mut found = None;
    let mut item = None;
    for segment in path {
        let leaf = dir.join(format!("{segment}.rs"));
        let folder = dir.join(segment);
        if leaf.is_file() {
            found = Some(leaf);
            break;
        } else if folder.join("mod.rs").is_file() {
            dir = folder;
        } else {
            item = Some(segment);
            break;
        }
    }
    // A path that stops in a folder names an item of its `mod.rs`: that file, when it
    // defines the item itself (not when it passes on one of its files', `pub use`).
    let face = dir.join("mod.rs");
    if let (None, Some(item)) = (&found, item) {
        if face.is_file() && defines(&code(&face), item) {
            found = Some(face);
        }
    }
    found.filter(|f| f != file)
}

/// Whether `text` defines `name` itself (not by `use`).
fn defines(text: &str, name: &str) -> bool {
    let name = name.split(" as ").next().unwrap_or(name).trim();
    text.lines().any(|line| {
        let t = line.trim_start();
        let t = ["pub(crate) ", "pub(super) ", "pub "]
            .iter()
            .find_map(|p| t.strip_prefix(p))
            .unwrap_or(t);
        [
            "fn ",
            "struct ",
            "enum ",
            "const ",
            "static ",
            "type ",
            "trait ",
            "async fn ",
        ]
        .iter()
        .any(|kind| {
            t.strip_prefix(kind).is_some_and(|rest| {
                rest.starts_with(name)
                    && !rest[name.len()..]
                        .starts_with(|c: char| c.is_ascii_alphanumeric() || c == '_')
            })
        })
    })
}

/// Where a path starts: `crate::`, `super::`, or a module a `mod.rs` declares (`child::`).
#[derive(Clone, Copy)]
enum From {
    Crate,
    Super,
    Child,
}

/// The modules a folder's `mod.rs` declares (`mod child;`), which it names without a prefix.
fn children(text: &str) -> Vec<String> {
    text.lines()
        .filter_map(|l| {
            let t = l.trim_start();
            let t = ["pub(crate) ", "pub(super) ", "pub "]
                .iter()
                .find_map(|p| t.strip_prefix(p))
                .unwrap_or(t);
            t.strip_prefix("mod ")?
                .strip_suffix(';')
                .map(str::to_string)
        })
        .collect()
}

/// Which files each file imports, by the paths it names; a folder's `mod.rs` also by the paths
/// into its own modules (`pub use child::Item`, `child::f()`).
fn imports() -> BTreeMap<PathBuf, BTreeSet<PathBuf>> {
    let mut graph = BTreeMap::new();
    for file in all_files() {
        let text = code(&file);
        let mut to = BTreeSet::new();
        for (prefix, from) in [("crate::", From::Crate), ("super::", From::Super)] {
            for (_, path) in paths(&text, prefix) {
                to.extend(target(&file, &path, from));
            }
        }
        if file.file_name().is_some_and(|n| n == "mod.rs") {
            for child in children(&text) {
                for (_, mut path) in paths(&text, &format!("{child}::")) {
                    path.insert(0, child.clone());
                    to.extend(target(&file, &path, From::Child));
                }
            }
        }
        graph.insert(file, to);
    }
    graph
}

#[test]
fn no_two_files_import_each_other_even_round_a_longer_cycle() {
    let graph = imports();
    let edges: usize = graph.values().map(BTreeSet::len).sum();
    assert!(
        edges > 100,
        "found only {edges} imports between files: is the scan broken?"
    );
    // A depth-first walk: a file met again while still on the walk's path closes a cycle.
    fn walk(
        at: &PathBuf,
        graph: &BTreeMap<PathBuf, BTreeSet<PathBuf>>,
        on_path: &mut Vec<PathBuf>,
        done: &mut BTreeSet<PathBuf>,
        cycles: &mut Vec<String>,
    ) {
        if let Some(i) = on_path.iter().position(|p| p == at) {
            let names: Vec<String> = on_path[i..]
                .iter()
                .chain([at])
                .map(|p| p.strip_prefix(src()).unwrap().display().to_string())
                .collect();
            cycles.push(names.join(" -> "));
            return;
        }
        if !done.insert(at.clone()) {
            return;
        }
        on_path.push(at.clone());
        for next in graph.get(at).into_iter().flatten() {
            walk(next, graph, on_path, done, cycles);
        }
        on_path.pop();
    }
    let mut cycles = Vec::new();
    let mut done = BTreeSet::new();
    for file in graph.keys() {
        walk(file, &graph, &mut Vec::new(), &mut done, &mut cycles);
    }
    assert!(
        cycles.is_empty(),
        "import cycles between files:\n{}",
        cycles.join("\n")
    );
}

#[test]
fn src_has_few_entries_and_no_long_file() {
    let entries = fs::read_dir(src()).unwrap().count();
    // A folder per layer (LAYERS), lib.rs and main.rs.
    let layers: usize = LAYERS.iter().map(|group| group.len()).sum();
    assert!(entries <= layers + 2, "src/ has {entries} entries");
    for file in all_files() {
        let lines = fs::read_to_string(&file).unwrap().lines().count();
        assert!(lines <= FILE_LINES, "{} has {lines} lines", file.display());
    }
}

/// Each function of `text` (outside its unit tests) longer than `FN_LINES`, as "name: lines".
fn long_functions(text: &str) -> Vec<String> {
    functions_over(text, FN_LINES)
}

/// Each function of `text` (outside its unit tests) longer than `most`, as "name: lines".
fn functions_over(text: &str, most: usize) -> Vec<String> {
    let lines: Vec<&str> = text.lines().collect();
    let mut long = Vec::new();
    let mut i = 0;
    while i < lines.len() {
        let line = lines[i].trim_start();
        let is_fn = [
            "fn ",
            "pub fn ",
            "pub(crate) fn ",
            "pub(super) fn ",
            "async fn ",
            "const fn ",
            "pub const fn ",
            "unsafe fn ",
            "pub unsafe fn ",
        ]
        .iter()
        .chain(&[
            "pub async fn ",
            "pub(super) async fn ",
            "pub(crate) async fn ",
        ])
        .any(|p| line.starts_with(p));
        if !is_fn {
            i += 1;
            continue;
        }
        let indent = lines[i].len() - line.len();
        let name: String = line
            .split("fn ")
            .nth(1)
            .unwrap_or("")
            .chars()
            .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
            .collect();
        // The function ends at the first `}` at its own indent (rustfmt's layout), or at a
        // `;` ending a declaration without a body.
        let end = (i..lines.len()).find(|&j| {
            let l = lines[j];
            (j > i && l.len() > indent && &l[indent..] == "}" && l[..indent].trim().is_empty())
                || (j == i && l.trim_end().ends_with(';'))
        });
        let end = end.unwrap_or(i);
        if end + 1 - i > most {
            long.push(format!("{name}: {} lines", end + 1 - i));
        }
        i += 1;
    }
    long
}

#[test]
fn no_function_of_the_engine_or_the_remote_client_is_long() {
    let mut long = Vec::new();
    let mut checked = 0;
    for layer in ["link/engine", "remote"] {
        let mut files = Vec::new();
        rust_files(&src().join(layer), &mut files);
        for file in files {
            checked += 1;
            for f in long_functions(&code(&file)) {
                long.push(format!("{}: {f}", file.display()));
            }
        }
    }
    assert!(checked > 10, "checked only {checked} files");
    assert!(
        long.is_empty(),
        "functions over {FN_LINES} lines:\n{}",
        long.join("\n")
    );
}

#[test]
fn no_function_anywhere_is_over_a_hundred_lines() {
    let mut long = Vec::new();
    let files = all_files();
    for file in &files {
        for f in functions_over(&code(file), ANY_FN_LINES) {
            long.push(format!("{}: {f}", file.display()));
        }
    }
    assert!(files.len() > 100, "checked only {} files", files.len());
    assert!(
        long.is_empty(),
        "functions over {ANY_FN_LINES} lines:\n{}",
        long.join("\n")
    );
}

/// The command line sits on top: no layer below `cli` knows clap (the engine and the classic
/// flow take their own options, which `cli` fills).
#[test]
fn no_layer_below_the_command_line_knows_clap() {
    let cmd = rank("cmd").unwrap();
    let mut knows = Vec::new();
    let mut checked = 0;
    let engine = ["link/engine".to_string()];
    let below = LAYERS[..cmd]
        .iter()
        .flat_map(|g| g.iter())
        .map(|l| l.to_string());
    for layer in below.chain(engine) {
        let mut files = Vec::new();
        rust_files(&src().join(layer), &mut files);
        for file in files {
            checked += 1;
            for (n, line) in fs::read_to_string(&file).unwrap().lines().enumerate() {
                let words = line.split(|c: char| !(c.is_ascii_alphanumeric() || c == '_'));
                if !line.trim_start().starts_with("//") && words.into_iter().any(|w| w == "clap") {
                    knows.push(format!("{}:{}: {}", file.display(), n + 1, line.trim()));
                }
            }
        }
    }
    assert!(checked > 80, "checked only {checked} files");
    assert!(knows.is_empty(), "clap below cli:\n{}", knows.join("\n"));
}

/// Each module opens with a `//!` line that names it (`//! Name: what it does`), the file's
/// or, for a `mod.rs`, its folder's name: a reader finds the file by what its first line says.
#[test]
fn each_module_opens_with_its_own_name() {
    let mut wrong = Vec::new();
    let files = all_files();
    for file in &files {
        let stem = file.file_stem().unwrap().to_string_lossy().into_owned();
        if ["lib", "main", "tests"].contains(&stem.as_str()) {
            continue;
        }
        let name = match stem.as_str() {
            "mod" => file
                .parent()
                .unwrap()
                .file_name()
                .unwrap()
                .to_string_lossy()
                .into_owned(),
            _ => stem,
        };
        let text = fs::read_to_string(file).unwrap();
        let first = text.lines().next().unwrap_or("");
        let said = first
            .strip_prefix("//! ")
            .and_then(|l| l.split_once(':'))
            .map(|(n, _)| n.to_lowercase());
        if said.as_deref() != Some(&name.replace('_', " ")) {
            wrong.push(format!("{}: {first}", file.display()));
        }
    }
    assert!(files.len() > 100, "checked only {} files", files.len());
    assert!(
        wrong.is_empty(),
        "first lines naming something else:\n{}",
        wrong.join("\n")
    );
}

#[test]
fn the_path_scan_sees_grouped_and_spread_imports() {
    let text = "use crate::{engine::run as _x, util};\nuse crate::remote::{\n    a::B,\n    c,\n};\nlet x = crate::job::f();\n";
    let names: Vec<Vec<String>> = paths(text, "crate::").into_iter().map(|(_, p)| p).collect();
    let want: Vec<Vec<&str>> = vec![
        vec!["engine", "run as _x"],
        vec!["util"],
        vec!["remote", "a", "B"],
        vec!["remote", "c"],
        vec!["job", "f"],
    ];
    assert_eq!(names, want);
}

#[test]
fn the_function_measure_counts_a_body_to_its_closing_brace() {
    let body = |n: usize| "    let x = 1;\n".repeat(n);
    let text = format!(
        "fn short() {{\n{}}}\n\npub(super) async fn long(a: u8) -> u8 {{\n{}}}\n",
        body(3),
        body(FN_LINES)
    );
    assert_eq!(
        long_functions(&text),
        [format!("long: {} lines", FN_LINES + 2)]
    );
}
