//! The layers of `src/`: each top-level module imports only those before it in `LAYERS`
//! (lib.rs says why), so there is no import cycle between them.

use std::fs;
use std::path::Path;

/// Lowest first; lib.rs and main.rs stand above all.
const LAYERS: [&str; 10] = [
    "fsutil", "bitcode", "job", "render", "report", "remote", "exec", "cli", "cmd", "link",
];

/// Every `crate::NAME` a file names, as (line number, NAME).
fn crate_paths(text: &str) -> Vec<(usize, String)> {
    let mut found = Vec::new();
    for (n, line) in text.lines().enumerate() {
        let mut rest = line;
        while let Some(at) = rest.find("crate::") {
            rest = &rest[at + "crate::".len()..];
            let name: String = rest
                .chars()
                .take_while(|c| c.is_ascii_alphanumeric() || *c == '_' || *c == '{')
                .collect();
            found.push((n + 1, name));
        }
    }
    found
}

fn rust_files(path: &Path, out: &mut Vec<std::path::PathBuf>) {
    if path.is_dir() {
        for e in fs::read_dir(path).unwrap().flatten() {
            rust_files(&e.path(), out);
        }
    } else if path.is_file() && path.extension().is_some_and(|e| e == "rs") {
        out.push(path.to_path_buf());
    }
}

#[test]
fn each_layer_imports_only_the_layers_below_it() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut wrong = Vec::new();
    let mut seen = 0;
    for (rank, layer) in LAYERS.iter().enumerate() {
        let mut files = Vec::new();
        rust_files(&src.join(layer), &mut files);
        rust_files(&src.join(format!("{layer}.rs")), &mut files);
        assert!(!files.is_empty(), "src/{layer} is missing");
        for file in files {
            let text = fs::read_to_string(&file).unwrap();
            for (line, name) in crate_paths(&text) {
                seen += 1;
                let to = LAYERS.iter().position(|l| *l == name);
                match to {
                    Some(to) if to <= rank => {}
                    _ => wrong.push(format!("{}:{line}: crate::{name}", file.display())),
                }
            }
        }
    }
    assert!(
        seen > 50,
        "found only {seen} crate:: paths: is the scan broken?"
    );
    assert!(
        wrong.is_empty(),
        "imports that go up a layer or are not checked (grouped `crate::{{..}}`):\n{}",
        wrong.join("\n")
    );
}

#[test]
fn src_has_few_entries_and_no_long_file() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let entries = fs::read_dir(&src).unwrap().count();
    assert!(entries <= 12, "src/ has {entries} entries");
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    for file in files {
        let lines = fs::read_to_string(&file).unwrap().lines().count();
        assert!(lines <= 900, "{} has {lines} lines", file.display());
    }
}
