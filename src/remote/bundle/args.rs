//! Args: which of a bundle's command words the host entry runs clang with. It allows what a
//! ThinLTO backend job carries, and nothing else: `-c`; one `-o` naming the bundle's object;
//! the bundle's own files as inputs; `-x ir` (or `c`, for `host check`'s probe); the target;
//! `-O`; code-generation flags (`-f`, `-m`, `-g`, `-W`, `-D`, `-U`; not `-mllvm`, some of whose
//! options run programs) whose values name no path; `-fthinlto-index=` naming one of the
//! bundle's files. Among the flags it refuses those that load code into clang (plug-ins), run
//! other tools or pass them words, or write caches and crash reports.
//!
//! It knows the words lld's DTLTO jobs have; a job with others (a `--thinlto-remote-compiler-arg`
//! outside these families) is refused, and runs on the linking machine.

use super::format::Manifest;
use std::collections::BTreeSet;

/// Flags refused though their family is allowed, as they are or as the start of a word.
const REFUSED: &[(&str, &str)] = &[
    ("-fplugin", "loads a plug-in"),
    ("-fpass-plugin", "loads a plug-in"),
    ("-Wa,", "passes words to the assembler"),
    ("-Wl,", "passes words to the linker"),
    ("-Wp,", "passes words to the preprocessor"),
    ("-load", "loads a plug-in"),
    ("-fno-integrated-as", "runs an assembler"),
    ("-fmodules", "writes a module cache"),
    ("-fimplicit-modules", "writes a module cache"),
    ("-fcrash-diagnostics", "writes crash reports"),
];

/// Flags whose value maps one path string to another in what clang writes, and reads no file.
const MAPS: &[&str] = &[
    "-fdebug-prefix-map=",
    "-ffile-prefix-map=",
    "-fmacro-prefix-map=",
    "-fprofile-prefix-map=",
    "-fcoverage-prefix-map=",
];

/// The languages an input may be read as: bitcode, or C for the probe.
const LANGUAGES: &[&str] = &["ir", "c"];

/// Why clang must not run with `m`'s arguments, if it must not.
pub fn refused(m: &Manifest) -> Option<String> {
    let files: BTreeSet<&str> = m.files.iter().map(|e| e.name.as_str()).collect();
    let mut words = m.arguments.iter().map(String::as_str);
    let (mut compile, mut outputs) = (false, 0);
    while let Some(w) = words.next() {
        let why = match w {
            "-c" => {
                compile = true;
                None
            }
            "-o" => {
                outputs += 1;
                match words.next() {
                    Some(o) if o == m.output => None,
                    o => Some(format!(
                        "its -o names {:?}, not the bundle's object {}",
                        o.unwrap_or(""),
                        m.output
                    )),
                }
            }
            "-x" => match words.next() {
                Some(l) if LANGUAGES.contains(&l) => None,
                l => Some(format!("its -x {} is not ir", l.unwrap_or(""))),
            },
            "-target" => triple(words.next().unwrap_or("")).map(|why| format!("its -target {why}")),
            // LLVM's own options reach too far (some run programs: -print-changed=dot-cfg).
            "-mllvm" => Some(format!(
                "its -mllvm {} is not a word a backend job carries here",
                words.next().unwrap_or("")
            )),
            _ => word(w, &files),
        };
        if why.is_some() {
            return why;
        }
    }
    if !compile || outputs != 1 {
        return Some("it is not one compile (-c) with one -o".to_string());
    }
    None
}

/// Why one word other than those taking the next word is refused, if it is.
fn word(w: &str, files: &BTreeSet<&str>) -> Option<String> {
    if let Some(t) = w.strip_prefix("--target=") {
        return triple(t).map(|why| format!("its argument {w}: {why}"));
    }
    if let Some(level) = w.strip_prefix("-O") {
        let known = ["", "0", "1", "2", "3", "s", "z", "g", "fast"].contains(&level);
        return (!known).then(|| format!("its argument {w} is no optimisation level"));
    }
    let family = ["-f", "-m", "-g", "-W", "-D", "-U"]
        .iter()
        .any(|f| w.starts_with(f));
    if family {
        return flag(w, files).map(|why| format!("its argument {w} {why}"));
    }
    if w.starts_with('@') {
        return Some(format!("its argument {w} is a response file"));
    }
    if w.starts_with('-') {
        return Some(format!("its argument {w} is not one a backend job carries"));
    }
    (!files.contains(w)).then(|| format!("its input {w} is not a file of the bundle"))
}

/// Why a flag of an allowed family (or an LLVM option) is refused, if it is: a plug-in or words
/// for another tool, a value naming a path (other than one of the bundle's files for
/// `-fthinlto-index=`; prefix maps only rewrite strings).
fn flag(w: &str, files: &BTreeSet<&str>) -> Option<String> {
    if let Some((_, why)) = REFUSED.iter().find(|(start, _)| w.starts_with(start)) {
        return Some(why.to_string());
    }
    if let Some(index) = w.strip_prefix("-fthinlto-index=") {
        return (!files.contains(index)).then(|| "names no file of the bundle".to_string());
    }
    if MAPS.iter().any(|m| w.starts_with(m)) {
        return None;
    }
    let path = w.contains('/') || w.split(['=', ',']).any(|part| part == "..");
    path.then(|| "names a path, and a flag's value may name none".to_string())
}

/// Why a target triple is refused: only letters, digits, `_`, `.` and `-`.
fn triple(t: &str) -> Option<String> {
    let plain = !t.is_empty()
        && t.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"_.-".contains(&b));
    (!plain).then(|| format!("{t:?} is not a target triple"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::remote::bundle::format::{Compiler, Entry};

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

    /// A job as lld 22 writes it (the words a content-keyed action gives it), and each hostile
    /// word refused with its reason.
    #[test]
    fn a_backend_job_runs_and_each_hostile_word_is_refused_with_its_reason() {
        let job = [
            "-c",
            "--target=x86_64-pc-linux-gnu",
            "-O2",
            "-faddrsig",
            "-ffunction-sections",
            "-fdata-sections",
            "-fpic",
            "-Wno-unused-command-line-argument",
            "m/a.o",
            "-fthinlto-index=s.bc",
            "-o",
            "o.o",
            "-x",
            "ir",
            "-fdebug-prefix-map=/a=/b",
            "-ffile-prefix-map=/build/x=.",
            "-g",
            "-DX=1",
        ];
        assert_eq!(refused(&manifest(&job)), None);
        for (extra, want) in [
            (&["-fplugin=x.so"][..], "loads a plug-in"),
            (&["-fpass-plugin=x.so"], "loads a plug-in"),
            (&["-Xclang", "-load"], "not one a backend job carries"),
            (&["@args.rsp"], "response file"),
            (&["--config=x.cfg"], "not one a backend job carries"),
            (&["-B/tmp"], "not one a backend job carries"),
            (&["--driver-mode=cl"], "not one a backend job carries"),
            (&["-Fa/tmp/x.asm"], "not one a backend job carries"),
            (&["-include/etc/hostname"], "not one a backend job carries"),
            (&["-save-temps=obj"], "not one a backend job carries"),
            (&["-MD"], "not one a backend job carries"),
            (&["-Wa,-I/x"], "passes words to the assembler"),
            (&["-Wl,-T,x"], "passes words to the linker"),
            (
                &["-ftime-trace=/tmp/t.json"],
                "a flag's value may name none",
            ),
            (&["-fprofile-use=../x"], "a flag's value may name none"),
            (
                &["-mllvm", "-info-output-file=x"],
                "not a word a backend job carries",
            ),
            (&["-x", "c++"], "is not ir"),
            (&["-target", "x/../y"], "is not a target triple"),
            (&["-O9"], "no optimisation level"),
            (&["/etc/passwd"], "not a file of the bundle"),
            (&["other.o"], "not a file of the bundle"),
            (&["-o", "/etc/passwd"], "not the bundle's object"),
            (&["-o/etc/passwd"], "not one a backend job carries"),
            (&["-fthinlto-index=t.bc"], "names no file of the bundle"),
        ] {
            let mut words = job.to_vec();
            words.extend_from_slice(extra);
            let why = refused(&manifest(&words)).unwrap_or_default();
            assert!(why.contains(want), "{extra:?}: {why:?}");
        }
        let why = refused(&manifest(&["-fthinlto-index=s.bc", "-o", "o.o"]));
        assert!(why.unwrap().contains("not one compile"));
    }
}
