//! Ldargs: ld.lld's arguments, its command line as clang's driver prints it (`-###`), response
//! files expanded, each word told apart as an option, an option's value or an input file; and the
//! ThinLTO backend options lld's DTLTO derives from that command line.
//!
//! It knows lld's ELF option spellings and clang's `-###` quoting; it does not read input files
//! or run anything.

use camino::Utf8Path;

/// Reads the commands clang's driver prints for `-###` (each line ` "arg" "arg" ...`).
pub fn driver_commands(text: &str) -> Result<Vec<Vec<String>>, String> {
    let mut commands = Vec::new();
    for line in text.lines() {
        if !line.starts_with(" \"") {
            continue;
        }
        let mut words = Vec::new();
        let mut chars = line.chars().peekable();
        loop {
            while chars.peek() == Some(&' ') {
                chars.next();
            }
            match chars.next() {
                None => break,
                Some('"') => {}
                Some(c) => return Err(format!("read clang's -### line: unexpected {c:?}")),
            }
            let mut word = String::new();
            loop {
                match chars.next() {
                    Some('"') => break,
                    Some('\\') => match chars.next() {
                        Some(c) => word.push(c),
                        None => return Err("read clang's -### line: ends in '\\'".into()),
                    },
                    Some(c) => word.push(c),
                    None => return Err("read clang's -### line: an unclosed quote".into()),
                }
            }
            words.push(word);
        }
        commands.push(words);
    }
    Ok(commands)
}

/// Replaces every `@file` word by the words of that file (recursively, as lld does), each file
/// read as LLVM reads it (`response_text`) and split by `split` (the driver's quoting rules).
pub fn expand_response_files(
    args: &[String],
    cwd: &Utf8Path,
    split: &dyn Fn(&str) -> Vec<String>,
) -> Result<Vec<String>, String> {
    fn expand(
        args: &[String],
        cwd: &Utf8Path,
        depth: usize,
        split: &dyn Fn(&str) -> Vec<String>,
        out: &mut Vec<String>,
    ) -> Result<(), String> {
        for arg in args {
            match arg.strip_prefix('@') {
                Some(file) if !file.is_empty() => {
                    if depth > 20 {
                        return Err(format!("expand response file {file}: nested too deeply"));
                    }
                    let text = std::fs::read(cwd.join(file))
                        .map_err(|e| e.to_string())
                        .and_then(|bytes| response_text(&bytes))
                        .map_err(|e| format!("read response file {file}: {e}"))?;
                    expand(&split(&text), cwd, depth + 1, split, out)?;
                }
                _ => out.push(arg.clone()),
            }
        }
        Ok(())
    }
    let mut out = Vec::with_capacity(args.len());
    expand(args, cwd, 0, split, &mut out)?;
    Ok(out)
}

/// A response file's text as LLVM reads it: UTF-16 (little- or big-endian) after its byte-order
/// mark, else UTF-8 without one.
fn response_text(bytes: &[u8]) -> Result<String, String> {
    let utf16 = |be: bool| {
        let units: Vec<u16> = bytes[2..]
            .chunks(2)
            .map(|c| {
                let pair = [c[0], *c.get(1).unwrap_or(&0)];
                if be {
                    u16::from_be_bytes(pair)
                } else {
                    u16::from_le_bytes(pair)
                }
            })
            .collect();
        String::from_utf16(&units).map_err(|e| format!("not UTF-16: {e}"))
    };
    match bytes {
        [0xFF, 0xFE, ..] => utf16(false),
        [0xFE, 0xFF, ..] => utf16(true),
        _ => {
            let b = bytes.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(bytes);
            String::from_utf8(b.to_vec()).map_err(|e| format!("not UTF-8: {e}"))
        }
    }
}

/// lld options (without their dashes) whose value may be the next word (checked against
/// ld.lld 22: each of them alone is "missing argument"; `--build-id`, `--icf=` and the like are
/// not here, their value is only ever joined).
const SEPARATE: &[&str] = &[
    "o",
    "L",
    "l",
    "m",
    "T",
    "e",
    "u",
    "y",
    "z",
    "R",
    "F",
    "f",
    "h",
    "b",
    "O",
    "G",
    "auxiliary",
    "call-graph-ordering-file",
    "defsym",
    "dependency-file",
    "dynamic-linker",
    "dynamic-list",
    "entry",
    "error-limit",
    "exclude-libs",
    "export-dynamic-symbol",
    "export-dynamic-symbol-list",
    "filter",
    "fini",
    "format",
    "hash-style",
    "image-base",
    "init",
    "just-symbols",
    "library",
    "library-path",
    "Map",
    "mllvm",
    "oformat",
    "orphan-handling",
    "pack-dyn-relocs",
    "plugin",
    "remap-inputs",
    "retain-symbols-file",
    "rpath",
    "script",
    "section-start",
    "soname",
    "sort-section",
    "symbol-ordering-file",
    "sysroot",
    "Tbss",
    "Tdata",
    "Ttext",
    "Ttext-segment",
    "trace-symbol",
    "undefined",
    "undefined-glob",
    "unresolved-symbols",
    "version-script",
    "wrap",
    "error-handling-script",
    "keep-unique",
    "chroot",
    "opt-remarks-filename",
    "opt-remarks-passes",
    "opt-remarks-format",
    "opt-remarks-hotness-threshold",
    "thinlto-cache-policy",
    "thinlto-distributor-arg",
    "thinlto-remote-compiler-arg",
    "thinlto-remote-compiler-prepend-arg",
    "compress-debug-sections",
    "threads",
    "time-trace-granularity",
    "warn-backrefs-exclude",
    "shuffle-sections",
];

/// Whether the option (without its dashes) may take the next word as its value.
pub fn takes_value(bare: &str) -> bool {
    SEPARATE.contains(&bare)
}

/// What one word of lld's command line is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Word {
    /// An option, or an option's value: passed on as it is.
    Option(String),
    /// A library by name: `-lfoo`, `-l foo`, `--library=foo` (the name, `:file` kept).
    Library(String),
    /// An input file, as written.
    Input(String),
    /// An input whose every member is linked, and the word that named it (lld-link's
    /// `/wholearchive:FILE`).
    WholeInput { path: String, word: String },
}

/// Splits lld's (expanded) arguments, the program excluded, into options, libraries and inputs.
/// An option that takes a separate value keeps its value in the same `Word::Option`, as two
/// words joined by nothing: the pair is returned as two consecutive `Option`s.
pub fn classify(args: &[String]) -> Vec<Word> {
    let mut out = Vec::with_capacity(args.len());
    let mut i = 0;
    while i < args.len() {
        let arg = &args[i];
        i += 1;
        if !arg.starts_with('-') || arg == "-" {
            out.push(Word::Input(arg.clone()));
            continue;
        }
        let name = arg.trim_start_matches('-');
        if let Some(lib) = name.strip_prefix("library=") {
            out.push(Word::Library(lib.to_string()));
            continue;
        }
        if arg.starts_with("-l") && arg.len() > 2 && !arg.starts_with("--") {
            out.push(Word::Library(arg[2..].to_string()));
            continue;
        }
        if (name == "l" || name == "library") && i < args.len() {
            out.push(Word::Library(args[i].clone()));
            i += 1;
            continue;
        }
        out.push(Word::Option(arg.clone()));
        if SEPARATE.contains(&name) && i < args.len() {
            out.push(Word::Option(args[i].clone()));
            i += 1;
        }
    }
    out
}

/// The values of an option given as `-NAME V`, `--NAME V`, `-NAME=V` or `--NAME=V`, in order.
pub fn values<'a>(args: &'a [String], name: &str) -> Vec<&'a str> {
    let mut out = Vec::new();
    let mut i = 0;
    while i < args.len() {
        let arg = args[i].as_str();
        i += 1;
        let Some(bare) = arg.strip_prefix("--").or_else(|| arg.strip_prefix('-')) else {
            continue;
        };
        if bare == name && i < args.len() {
            out.push(args[i].as_str());
            i += 1;
        } else if let Some(v) = bare.strip_prefix(name).and_then(|r| r.strip_prefix('=')) {
            out.push(v);
        } else if SEPARATE.contains(&bare) {
            i += 1;
        }
    }
    out
}

/// lld's emulation: `-m X` or `-mX`, the last one winning (lld takes no `--m`; `-mllvm` and
/// the other options spelled `-m...` are not it).
pub fn emulation(args: &[String]) -> Option<&str> {
    const OTHERS: [&str; 4] = [
        "mllvm",
        "mmap-output-file",
        "merge-exidx-entries",
        "mips-got-size",
    ];
    let mut found = None;
    let mut i = 0;
    while i < args.len() {
        let arg = args[i].as_str();
        i += 1;
        if arg == "-m" {
            found = args.get(i).map(String::as_str);
            i += 1;
        } else if let Some(v) = arg
            .strip_prefix("-m")
            .filter(|_| !OTHERS.iter().any(|o| arg[1..].starts_with(o)))
        {
            found = Some(v);
        } else if let Some(bare) = arg.strip_prefix("--").or_else(|| arg.strip_prefix('-')) {
            if SEPARATE.contains(&bare) {
                i += 1;
            }
        }
    }
    found
}

/// Whether any of the flags (spelled without dashes) is given, the last of `on`/`off` winning.
fn flag(args: &[String], on: &[&str], off: &[&str], default: bool) -> bool {
    let mut value = default;
    let mut i = 0;
    while i < args.len() {
        let bare = args[i].trim_start_matches('-');
        i += 1;
        if on.contains(&bare) {
            value = true;
        } else if off.contains(&bare) {
            value = false;
        } else if SEPARATE.contains(&bare) {
            i += 1;
        }
    }
    value
}

/// The options of a ThinLTO backend compile that lld's DTLTO (LLVM 21+) derives from the link:
/// optimisation level, position independence, sample profile, profile-mismatch warnings.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JobOptions {
    pub opt_level: String,
    pub pic: bool,
    pub sample_profile: Option<String>,
    pub pgo_warn_mismatch: bool,
}

impl JobOptions {
    /// Reads lld's arguments (the program excluded) as lld's `createConfig` does.
    pub fn from_args(args: &[String]) -> JobOptions {
        let mut opt_level = "2".to_string();
        let mut sample_profile = None;
        let mut i = 0;
        while i < args.len() {
            let arg = &args[i];
            i += 1;
            if SEPARATE.contains(&arg.trim_start_matches('-')) {
                // Its value is never an option of its own.
                i += 1;
                continue;
            }
            let plugin = arg
                .strip_prefix("-plugin-opt=")
                .or_else(|| arg.strip_prefix("--plugin-opt="));
            if let Some(o) = arg
                .strip_prefix("--lto-O")
                .or_else(|| arg.strip_prefix("-lto-O"))
                .or_else(|| plugin.and_then(|p| p.strip_prefix('O')))
            {
                opt_level = o.to_string();
            }
            if let Some(p) = plugin.and_then(|p| p.strip_prefix("sample-profile=")) {
                sample_profile = Some(p.to_string());
            }
        }
        if let Some(p) = values(args, "lto-sample-profile").last() {
            sample_profile = Some(p.to_string());
        }
        let relocatable = flag(args, &["r", "relocatable"], &[], false);
        let pie = flag(args, &["pie"], &["no-pie", "nopie"], false);
        let shared = flag(args, &["shared", "Bshareable"], &[], false);
        let pgo_warn_mismatch = flag(
            args,
            &["lto-pgo-warn-mismatch"],
            &["no-lto-pgo-warn-mismatch"],
            true,
        );
        JobOptions {
            opt_level,
            pic: !relocatable && (pie || shared),
            sample_profile,
            pgo_warn_mismatch,
        }
    }

    /// The options, in the order lld's DTLTO writes them (after `-c --target=TRIPLE`).
    pub fn options(&self) -> Vec<String> {
        let mut o = vec![
            format!("-O{}", self.opt_level),
            "-faddrsig".into(),
            "-ffunction-sections".into(),
            "-fdata-sections".into(),
        ];
        if self.pic {
            o.push("-fpic".into());
        }
        if !self.pgo_warn_mismatch {
            o.extend(["-mllvm".into(), "-no-pgo-warn-mismatch".into()]);
        }
        if let Some(p) = &self.sample_profile {
            o.push(format!("-fprofile-sample-use={p}"));
        }
        o.push("-Wno-unused-command-line-argument".into());
        o
    }
}

/// Whether `word` matches a make-style pattern: `%` stands for any text (once), as in Kbuild's
/// `$(filter-out)`; a pattern without `%` matches only itself.
pub fn pattern_matches(pattern: &str, word: &str) -> bool {
    match pattern.split_once('%') {
        None => pattern == word,
        Some((head, tail)) => {
            word.len() >= head.len() + tail.len() && word.starts_with(head) && word.ends_with(tail)
        }
    }
}

/// The first `dir/name` (over `dirs`, then `names`) that is a file under `base`, as
/// `dir/name`: how linkers search their library paths.
pub fn first_file(
    base: &Utf8Path,
    dirs: &[String],
    names: &[String],
) -> Option<camino::Utf8PathBuf> {
    dirs.iter()
        .flat_map(|dir| names.iter().map(move |n| Utf8Path::new(dir).join(n)))
        .find(|p| base.join(p).is_file())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v(words: &[&str]) -> Vec<String> {
        words.iter().map(|w| w.to_string()).collect()
    }

    #[test]
    fn the_emulation_is_separate_or_joined() {
        let e = |words: &[&str]| emulation(&v(words)).map(str::to_string);
        assert_eq!(e(&["-m", "elf_x86_64"]).as_deref(), Some("elf_x86_64"));
        assert_eq!(e(&["-melf_i386", "a.o"]).as_deref(), Some("elf_i386"));
        assert_eq!(
            e(&["-m", "elf_x86_64", "-melf_i386"]).as_deref(),
            Some("elf_i386")
        );
        assert_eq!(e(&["-mllvm", "-m", "a.o"]), None, "-mllvm's value");
        assert_eq!(
            e(&["-mllvm=-x", "--mmap-output-file", "-mips-got-size=4"]),
            None
        );
        assert_eq!(e(&["-o", "-melf_i386"]), None, "an output's name");
    }

    #[test]
    fn driver_lines_are_read_back() {
        let text = "clang version 22\n \"/usr/bin/ld.lld\" \"-o\" \"a b\" \"x\\\"y\" \"c\\\\d\" \"\\$e\"\n";
        assert_eq!(
            driver_commands(text).unwrap(),
            [v(&["/usr/bin/ld.lld", "-o", "a b", "x\"y", "c\\d", "$e"])]
        );
        assert!(driver_commands(" \"a").is_err());
    }

    #[test]
    fn inputs_options_and_libraries() {
        let args = v(&[
            "-o",
            "prog",
            "-L/usr/lib",
            "a.o",
            "-lm",
            "-l",
            "z",
            "--library=c",
            "-m",
            "elf_x86_64",
            "--start-lib",
            "b.o",
            "--end-lib",
            "-plugin-opt=O3",
            "-plugin",
            "gold.so",
            "--version-script=v.map",
            "--dynamic-linker",
            "/lib/ld.so",
            "lib a.a",
            "--build-id",
            "main.o",
            "--icf=all",
            "--threads",
            "2",
        ]);
        let inputs: Vec<_> = classify(&args)
            .into_iter()
            .filter(|w| !matches!(w, Word::Option(_)))
            .collect();
        assert_eq!(
            inputs,
            [
                Word::Input("a.o".into()),
                Word::Library("m".into()),
                Word::Library("z".into()),
                Word::Library("c".into()),
                Word::Input("b.o".into()),
                Word::Input("lib a.a".into()),
                Word::Input("main.o".into()),
            ]
        );
    }

    #[test]
    fn backend_options_as_lld_writes_them() {
        let opts = |args: &[&str]| JobOptions::from_args(&v(args)).options().join(" ");
        let base = "-faddrsig -ffunction-sections -fdata-sections";
        let tail = "-Wno-unused-command-line-argument";
        assert_eq!(
            opts(&["-pie", "-plugin-opt=O2"]),
            format!("-O2 {base} -fpic {tail}")
        );
        assert_eq!(opts(&["--lto-O3"]), format!("-O3 {base} {tail}"));
        assert_eq!(
            opts(&["-pie", "-no-pie", "--plugin-opt=O1"]),
            format!("-O1 {base} {tail}")
        );
        assert_eq!(opts(&["-shared"]), format!("-O2 {base} -fpic {tail}"));
        assert_eq!(opts(&["-shared", "-r"]), format!("-O2 {base} {tail}"));
        assert_eq!(
            opts(&["--lto-sample-profile=p.prof", "--no-lto-pgo-warn-mismatch"]),
            format!("-O2 {base} -mllvm -no-pgo-warn-mismatch -fprofile-sample-use=p.prof {tail}")
        );
        // A value is never read as a flag: an output named -pie is not -pie.
        assert_eq!(opts(&["-o", "-pie"]), format!("-O2 {base} {tail}"));
    }

    #[test]
    fn make_patterns() {
        for (p, w, m) in [
            ("-mllvm", "-mllvm", true),
            ("-mllvm", "-mllvmx", false),
            ("-fprofile%", "-fprofile-sample-use=a", true),
            ("%-sections", "-ffunction-sections", true),
            ("-O%", "-O", true),
            ("a%b", "ab", true),
            ("a%b", "b", false),
        ] {
            assert_eq!(pattern_matches(p, w), m, "{p} {w}");
        }
    }
}
