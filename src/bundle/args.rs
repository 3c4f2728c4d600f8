//! Args: which of a bundle's command words the host entry runs clang with. A backend job is
//! `-c`, one `-o` naming the bundle's object, `-fthinlto-index=` naming one of its files, and
//! code-generation options; words that load code into clang (plug-ins), read more words from a
//! file (response files, configuration files), search for other programs, or write files other
//! than the object are refused.
//!
//! No word may name a path outside the scratch directory clang runs in (absolute, or climbing
//! out with `..`), but for prefix maps, which only rewrite strings. Beyond that it is a list of
//! what is refused, not of what is allowed: an option clang adds later that writes elsewhere
//! under a name inside the directory is not known here.

use super::format::Manifest;

/// Words refused as they are, or as the start of a word (`-fplugin=x.so`).
const REFUSED: &[(&str, &str)] = &[
    ("-fplugin", "loads a plug-in"),
    ("-fpass-plugin", "loads a plug-in"),
    ("-load", "loads a plug-in"),
    ("-plugin", "runs a plug-in"),
    ("-add-plugin", "runs a plug-in"),
    ("--config", "reads a configuration file"),
    ("-B", "searches other directories for programs"),
    ("--prefix", "searches other directories for programs"),
    ("-save-temps", "writes files other than the object"),
    ("-ftime-trace", "writes files other than the object"),
    ("-fproc-stat-report", "writes files other than the object"),
    ("-fcrash-diagnostics", "writes files other than the object"),
    ("-dumpdir", "writes files other than the object"),
    ("-info-output-file", "writes files other than the object"),
    ("-fmodules-cache-path", "writes files other than the object"),
    ("-M", "writes a dependency file"),
    ("-fdepfile", "writes a dependency file"),
    ("-dependency-file", "writes a dependency file"),
    (
        "-fsave-optimization-record",
        "writes files other than the object",
    ),
    (
        "-foptimization-record-file",
        "writes files other than the object",
    ),
    ("-fstack-usage", "writes files other than the object"),
    ("-fprofile-list", "reads a file by its path"),
    ("-fsanitize-ignorelist", "reads a file by its path"),
    ("-fsanitize-blacklist", "reads a file by its path"),
    ("-fsanitize-system-ignorelist", "reads a file by its path"),
    ("-ivfsoverlay", "reads a file by its path"),
];

/// Options whose value maps one path string to another in what clang writes, and reads no file.
const MAPS: &[&str] = &[
    "-fdebug-prefix-map=",
    "-ffile-prefix-map=",
    "-fmacro-prefix-map=",
    "-fprofile-prefix-map=",
    "-fcoverage-prefix-map=",
];

/// Why the word `w` may name a file outside the scratch directory, if it may: it, or its value
/// after `=`, is an absolute path or climbs out with `..` (`-include /etc/passwd`,
/// `-fprofile-use=../../x`). Prefix maps only rewrite strings.
fn outside(w: &str) -> Option<&'static str> {
    if MAPS.iter().any(|m| w.starts_with(m)) {
        return None;
    }
    let value = match w.split_once('=') {
        Some((flag, value)) if flag.starts_with('-') => value,
        _ => w,
    };
    let climbs = value.split(['/', ',']).any(|part| part == "..");
    match (value.starts_with('/'), climbs) {
        (true, _) => Some("names an absolute path, outside the bundle"),
        (_, true) => Some("climbs out of the bundle with .."),
        _ => None,
    }
}

/// Why clang must not run with `m`'s arguments, if it must not.
pub fn refused(m: &Manifest) -> Option<String> {
    let files: std::collections::BTreeSet<&str> = m.files.iter().map(|e| e.name.as_str()).collect();
    let args = &m.arguments;
    let mut outputs = 0;
    let mut compile = false;
    for (k, w) in args.iter().enumerate() {
        let w = w.as_str();
        if w.starts_with('@') {
            return Some(format!("its argument {w} is a response file"));
        }
        // `-Xclang -load`, `-mllvm -info-output-file=` and the like are caught as the next word.
        let flag = w.split('=').next().unwrap_or(w);
        let bare = flag.trim_start_matches('-');
        for (start, why) in REFUSED {
            let start_bare = start.trim_start_matches('-');
            let matches = if *start == "-M" || *start == "-B" {
                flag.starts_with(start) && flag.len() >= start.len()
            } else {
                bare == start_bare || (bare.starts_with(start_bare) && w.starts_with('-'))
            };
            if w.starts_with('-') && matches {
                return Some(format!("its argument {w} {why}"));
            }
        }
        if let Some(why) = outside(w) {
            return Some(format!("its argument {w} {why}"));
        }
        match w {
            "-c" => compile = true,
            "-o" => {
                outputs += 1;
                if args.get(k + 1) != Some(&m.output) {
                    return Some(format!(
                        "its -o names {:?}, not the bundle's object {}",
                        args.get(k + 1).map(String::as_str).unwrap_or(""),
                        m.output
                    ));
                }
            }
            _ if w.starts_with("-o") => {
                return Some(format!(
                    "its argument {w} names an output other than -o OBJECT"
                ))
            }
            _ => {}
        }
        if let Some(index) = w.strip_prefix("-fthinlto-index=") {
            if !files.contains(index) {
                return Some(format!("its {w} names no file of the bundle"));
            }
        }
    }
    if !compile || outputs != 1 {
        return Some("it is not one compile (-c) with one -o".to_string());
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bundle::format::{Compiler, Entry};

    fn manifest(args: &[&str]) -> Manifest {
        Manifest {
            compiler: Compiler {
                path: "/usr/bin/clang-22".into(),
                version: "clang version 22".into(),
            },
            arguments: args.iter().map(|s| s.to_string()).collect(),
            output: "o.o".into(),
            files: vec![
                Entry::new("s.bc".into(), b"x"),
                Entry::new("m/a.o".into(), b"y"),
            ],
        }
    }

    #[test]
    fn a_backend_job_runs_and_each_hostile_word_is_refused_with_its_reason() {
        let job = [
            "-c",
            "-O2",
            "--target=x86_64-linux-gnu",
            "-fthinlto-index=s.bc",
            "-x",
            "ir",
            "m/a.o",
            "-o",
            "o.o",
            "-mllvm",
            "-enable-foo",
            "-fdebug-prefix-map=/a=/b",
        ];
        assert_eq!(refused(&manifest(&job)), None);
        for (extra, want) in [
            (&["-fplugin=/tmp/x.so"][..], "loads a plug-in"),
            (&["-fpass-plugin=x.so"], "loads a plug-in"),
            (&["-Xclang", "-load", "-Xclang", "x.so"], "loads a plug-in"),
            (&["-Xclang", "-plugin"], "runs a plug-in"),
            (&["@args.rsp"], "response file"),
            (&["--config=x.cfg"], "configuration file"),
            (&["-B/tmp"], "other directories for programs"),
            (&["-save-temps=obj"], "other than the object"),
            (&["-MD"], "dependency file"),
            (&["-MF", "x.d"], "dependency file"),
            (&["-ftime-trace=/tmp/t.json"], "other than the object"),
            (
                &["-mllvm", "-info-output-file=/etc/x"],
                "other than the object",
            ),
            (&["-o", "/etc/passwd"], "not the bundle's object"),
            (&["-o/etc/passwd"], "an output other than -o OBJECT"),
            (&["-include", "/etc/passwd"], "an absolute path"),
            (&["-fprofile-use=/etc/x.prof"], "an absolute path"),
            (
                &["-fprofile-sample-use=../../x"],
                "climbs out of the bundle",
            ),
            (&["-I", "m/../../etc"], "climbs out of the bundle"),
        ] {
            let mut words = job.to_vec();
            words.extend_from_slice(extra);
            let why = refused(&manifest(&words)).unwrap_or_default();
            assert!(why.contains(want), "{extra:?}: {why:?}");
        }
        let why = refused(&manifest(&["-c", "-fthinlto-index=t.bc", "-o", "o.o"]));
        assert!(why.unwrap().contains("names no file of the bundle"));
        let why = refused(&manifest(&["-fthinlto-index=s.bc", "-o", "o.o"]));
        assert!(why.unwrap().contains("not one compile"));
    }
}
