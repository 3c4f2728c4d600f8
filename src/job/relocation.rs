//! Relocation: the relocation model — a job whose command names none compiles its module as the
//! module was built (its "PIC Level" and "PIE Level" flags), as lld's in-process backend does for a
//! relocatable (`-r`) link, instead of as the compiler's default (PIE on many distributions: a
//! kernel's `-fno-PIE` module then fails on an `"i"` asm operand). lld's DTLTO names a model only
//! for `-pie` and `-shared` links. The code model needs nothing: clang's backend takes it from the
//! module when the command names none.
//!
//! It knows clang's relocation-model options and ELF targets; it reads modules through
//! `bitcode` and runs nothing. A module it cannot read keeps lld's command, and says why.

use super::parse::{JobFile, Str};
use crate::job::bitcode::module;
use std::collections::BTreeMap;
use std::path::Path;

/// Options that name a relocation model (clang's driver; cc1's through `-Xclang`).
const MODEL_OPTIONS: [&str; 10] = [
    "-fpic",
    "-fPIC",
    "-fpie",
    "-fPIE",
    "-fno-pic",
    "-fno-PIC",
    "-fno-pie",
    "-fno-PIE",
    "-mdynamic-no-pic",
    "-mrelocation-model",
];

/// Gives each job that names no relocation model its module's; returns the one line to say of
/// it (None when every job named one).
pub fn follow_modules(file: &mut JobFile<'_>, cwd: &Path) -> Option<String> {
    // The jobs that need their module's model: ThinLTO backend compiles (a job file's other
    // commands are not clang's) that name no model.
    let wanted: Vec<(usize, String)> = (file.jobs.iter().enumerate())
        .filter_map(|(i, job)| {
            let (mut backend, mut names_one) = (false, false);
            for w in job.command.words() {
                backend |= w.starts_with("-fthinlto-index=");
                names_one |=
                    MODEL_OPTIONS.contains(&w.as_ref()) || w.starts_with("-mrelocation-model=");
            }
            let module = job.inputs.first().filter(|_| backend && !names_one)?;
            Some((i, module.to_string()))
        })
        .collect();
    // Read on every core: a link of thousands of modules reads them all.
    let read: Vec<_> = {
        use rayon::prelude::*;
        wanted
            .par_iter()
            .map(|(_, module)| {
                module::read_file(&cwd.join(module)).and_then(|m| match is_elf(&m.triple) {
                    true => m.model.map(Some),
                    false => Ok(None),
                })
            })
            .collect()
    };
    let mut added: BTreeMap<&'static str, usize> = BTreeMap::new();
    let mut unread: Vec<String> = Vec::new();
    let mut other_format = 0;
    for ((i, module), read) in wanted.iter().zip(read) {
        match read {
            Ok(None) => other_format += 1,
            Ok(Some(model)) => {
                let option = model.option();
                *added.entry(option).or_default() += 1;
                file.jobs[*i].command.own.push(Str::Borrowed(option));
            }
            Err(e) => unread.push(format!("read the module {module}: {e}")),
        }
    }
    if added.is_empty() && unread.is_empty() {
        return None;
    }
    let total: usize = added.values().sum::<usize>() + unread.len() + other_format;
    let mut line = format!(
        "{total} job(s) name no relocation model (lld's DTLTO names one only for -pie and \
         -shared links, and the compiler's default may not be the modules')"
    );
    if !added.is_empty() {
        let each: Vec<String> = added.iter().map(|(o, n)| format!("{o} for {n}")).collect();
        line += &format!(
            "; each compiles its module as it was built, as lld's in-process backend does for \
             -r links: {}",
            each.join(", ")
        );
    }
    if other_format > 0 {
        line += &format!("; {other_format} not for ELF keep lld's command");
    }
    if let Some(first) = unread.first() {
        line += &format!(
            "; {} keep lld's command, the compiler's default: {first}{}",
            unread.len(),
            match unread.len() {
                1 => String::new(),
                n => format!(" (and {} more)", n - 1),
            }
        );
    }
    Some(line)
}

/// Whether the triple's objects are ELF, as LLVM picks a triple's default format: Windows and
/// UEFI are COFF, Apple's systems Mach-O, WebAssembly Wasm, AIX XCOFF, z/OS GOFF.
fn is_elf(triple: &str) -> bool {
    const OTHER: [&str; 12] = [
        "windows", "cygwin", "mingw", "uefi", "apple", "darwin", "macos", "ios", "wasm", "aix",
        "zos", "spirv",
    ];
    let parts: Vec<&str> = triple.split('-').collect();
    !parts.iter().any(|p| OTHER.iter().any(|o| p.starts_with(o))) || parts.last() == Some(&"elf")
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A job file of one job per module of tests/data/module, with `common` words.
    fn file(common: &str, modules: &[&str]) -> String {
        let jobs: Vec<String> = modules
            .iter()
            .map(|m| {
                format!(
                    r#"{{"args": ["{m}", "-fthinlto-index={m}.thinlto.bc", "-o", "{m}.o"],
                        "inputs": ["{m}", "{m}.thinlto.bc"], "outputs": ["{m}.o"]}}"#
                )
            })
            .collect();
        format!(
            r#"{{"common": {{"linker_output": "o", "inputs": [],
                "args": ["clang", "-c", "-O2"{common}]}}, "jobs": [{}]}}"#,
            jobs.join(",")
        )
    }

    #[test]
    fn jobs_without_a_model_follow_their_modules() {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/module");
        let modules = [
            "m-22-nopic.bc",
            "m-14-pie.bc",
            "m-19-nopic.bc",
            "gone.bc",
            "m.c",
        ];
        let text = file("", &modules);
        let mut jobs = crate::job::parse(&text).unwrap();
        let line = follow_modules(&mut jobs, &dir).unwrap();
        let last: Vec<String> = jobs
            .jobs
            .iter()
            .map(|j| j.command.to_vec().last().unwrap().clone())
            .collect();
        assert_eq!(
            last,
            ["-fno-pic", "-fPIE", "-fno-pic", "gone.bc.o", "m.c.o"]
        );
        assert!(
            line.starts_with("5 job(s) name no relocation model"),
            "{line}"
        );
        assert!(line.contains("-fPIE for 1, -fno-pic for 2"), "{line}");
        assert!(
            line.contains("2 keep lld's command, the compiler's default: read the module gone.bc"),
            "{line}"
        );
        assert!(line.contains("(and 1 more)"), "{line}");

        // A command that names a model (lld's -fpic; the user's -fno-PIE) is left alone.
        for named in [
            r#", "-fpic""#,
            r#", "-fno-PIE""#,
            r#", "-mrelocation-model=static""#,
        ] {
            let text = file(named, &modules);
            let mut jobs = crate::job::parse(&text).unwrap();
            let before = jobs.clone();
            assert_eq!(follow_modules(&mut jobs, &dir), None);
            assert_eq!(jobs, before);
        }
    }

    #[test]
    fn elf_triples() {
        for (t, elf) in [
            ("x86_64-unknown-linux-gnu", true),
            ("aarch64-none-elf", true),
            ("riscv64-unknown-freebsd14", true),
            ("x86_64-pc-windows-msvc", false),
            ("x86_64-w64-windows-gnu", false),
            ("i686-w64-mingw32", false),
            ("arm64-apple-macosx14.0.0", false),
            ("wasm32-unknown-unknown", false),
            ("powerpc64-ibm-aix7.2", false),
            ("x86_64-pc-windows-elf", true),
        ] {
            assert_eq!(is_elf(t), elf, "{t}");
        }
    }
}
