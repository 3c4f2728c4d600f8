//! Coffargs: lld-link's arguments, its command line read as lld-link reads it — `/` and `-`
//! spellings, option names in any case, values after `:`, a `/` word that names no option taken as
//! an input (a Unix path), response files with Windows quoting (or `--rsp-quoting=posix`), the
//! `LINK` and `_LINK_` variables, `/libpath:` and `LIB` search — and the backend options lld-link's
//! DTLTO derives from it.
//!
//! It knows lld-link's option spellings; it does not read input files (beyond finding them) or
//! run anything.

use crate::link::ldargs::{JobOptions, Word};
use camino::{Utf8Path, Utf8PathBuf};

/// lld-link 22's option names (`lld-link -help`, and the hidden ones a build may use).
const OPTIONS: &[&str] = &[
    "align",
    "aligncomm",
    "allowbind",
    "allowisolation",
    "alternatename",
    "appcontainer",
    "arm64xsameaddress",
    "auto-import",
    "base",
    "brepro",
    "build-id",
    "call-graph-ordering-file",
    "call-graph-profile-sort",
    "cetcompat",
    "cetcompatstrict",
    "cetdynamicapisinproc",
    "cetipvalidationrelaxed",
    "debug",
    "debugtype",
    "def",
    "defarm64native",
    "defaultlib",
    "delayload",
    "demangle",
    "dependentloadflag",
    "diasdkdir",
    "dll",
    "driver",
    "dwodir",
    "dynamicbase",
    "emittoolversioninfo",
    "end-lib",
    "entry",
    "errorlimit",
    "exclude-symbols",
    "export",
    "export-all-symbols",
    "failifmismatch",
    "fat-lto-objects",
    "filealign",
    "fixed",
    "force",
    "functionpadmin",
    "guard",
    "heap",
    "highentropyva",
    "hotpatchcompatible",
    "ignore",
    "implib",
    "include",
    "includeglob",
    "includeoptional",
    "incremental",
    "inferasanlibs",
    "integritycheck",
    "kill-at",
    "largeaddressaware",
    "lib",
    "libpath",
    "link",
    "linkrepro",
    "linkreprofullpathrsp",
    "lldemit",
    "lldignoreenv",
    "lldltocache",
    "lldltocachepolicy",
    "lldmap",
    "lldmingw",
    "lldsavetemps",
    "lto-cs-profile-file",
    "lto-cs-profile-generate",
    "lto-obj-path",
    "lto-pgo-warn-mismatch",
    "lto-sample-profile",
    "machine",
    "manifest",
    "manifestdependency",
    "manifestfile",
    "manifestinput",
    "manifestuac",
    "map",
    "mapinfo",
    "merge",
    "mllvm",
    "natvis",
    "nodbgdirmerge",
    "nodefaultlib",
    "noentry",
    "noimplib",
    "nologo",
    "nxcompat",
    "opt",
    "order",
    "osversion",
    "out",
    "pdb",
    "pdbaltpath",
    "pdbpagesize",
    "pdbsourcepath",
    "pdbstream",
    "pdbstripped",
    "prefetch-inputs",
    "print-symbol-order",
    "profile",
    "release",
    "reproduce",
    "runtime-pseudo-reloc",
    "safeseh",
    "section",
    "sectionlayout",
    "stack",
    "start-lib",
    "stub",
    "subsystem",
    "swaprun",
    "thinlto-distributor",
    "thinlto-distributor-arg",
    "thinlto-emit-imports-files",
    "thinlto-index-only",
    "thinlto-object-suffix-replace",
    "thinlto-prefix-replace",
    "thinlto-remote-compiler",
    "thinlto-remote-compiler-arg",
    "thinlto-remote-compiler-prepend-arg",
    "threads",
    "time",
    "timestamp",
    "tsaware",
    "vctoolsdir",
    "vctoolsversion",
    "verbose",
    "version",
    "vfsoverlay",
    "wholearchive",
    "winsdkdir",
    "winsdkversion",
    "winsysroot",
    "wrap",
    "wx",
];

/// A word's option name (lowercase, without its `/` or `-`) and value (after the first `:`);
/// None for an input. A `-` word is always an option (lld-link ignores unknown ones with a
/// warning); a `/` word only when it names one, else lld-link reads it as a path.
pub fn option(word: &str) -> Option<(String, Option<&str>)> {
    let rest = word.strip_prefix('-').or_else(|| word.strip_prefix('/'))?;
    let (name, value) = match rest.split_once(':') {
        Some((n, v)) => (n, Some(v)),
        None => (rest, None),
    };
    let name = name.to_ascii_lowercase();
    if word.starts_with('/') && !OPTIONS.contains(&name.as_str()) {
        return None;
    }
    Some((name, value))
}

/// The arguments lld-link reads: `_LINK_`'s words, then `LINK`'s (Windows quoting), then the
/// command line, unless it has `/lldignoreenv`; every `@file` replaced by its words
/// (recursively), quoted as the last `--rsp-quoting=` says.
pub fn expand(
    args: &[String],
    cwd: &Utf8Path,
    link: Option<&str>,
    link_first: Option<&str>,
) -> Result<Vec<String>, String> {
    let posix = args
        .iter()
        .rev()
        .find_map(|a| a.strip_prefix("--rsp-quoting="))
        .is_some_and(|q| q == "posix");
    let split = |text: &str| {
        if posix {
            super::rsp::response_split(text)
        } else {
            super::rsp::windows_split(text)
        }
    };
    let mut all: Vec<String> = Vec::new();
    if !flag(args, "lldignoreenv") {
        for env in [link_first, link].into_iter().flatten() {
            all.extend(super::rsp::windows_split(env));
        }
    }
    all.extend(args.iter().cloned());
    crate::link::ldargs::expand_response_files(&all, cwd, &split)
}

/// Splits lld-link's (expanded) arguments into options, libraries (`/defaultlib:`), inputs and
/// whole-archive inputs (`/wholearchive:FILE`, which is an input as well).
pub fn classify(args: &[String]) -> Vec<Word> {
    args.iter()
        .map(|arg| match option(arg) {
            None => Word::Input(arg.clone()),
            Some((name, Some(v))) if name == "defaultlib" => Word::Library(v.to_string()),
            Some((name, Some(v))) if name == "wholearchive" => Word::WholeInput {
                path: v.to_string(),
                word: arg.clone(),
            },
            Some(_) => Word::Option(arg.clone()),
        })
        .collect()
}

/// The values of option `name`, in order.
pub fn values<'a>(args: &'a [String], name: &str) -> Vec<&'a str> {
    args.iter()
        .filter_map(|a| option(a).and_then(|(n, v)| v.filter(|_| n == name)))
        .collect()
}

/// Whether the flag `name` (given without a value) is there.
pub fn flag(args: &[String], name: &str) -> bool {
    args.iter()
        .any(|a| option(a).is_some_and(|(n, v)| n == name && v.is_none()))
}

/// The link's output, as lld-link names it: the last `/out:`, else the first input's file stem
/// with `.exe` (`.dll` for `/dll`), in this directory.
pub fn output(args: &[String]) -> String {
    if let Some(out) = values(args, "out").last() {
        return out.to_string();
    }
    let ext = if flag(args, "dll") { "dll" } else { "exe" };
    let first = classify(args).into_iter().find_map(|w| match w {
        Word::Input(p) | Word::WholeInput { path: p, .. } => Some(p),
        _ => None,
    });
    let stem = first
        .as_deref()
        .and_then(|p| Utf8Path::new(p).file_stem().map(str::to_string));
    format!("{}.{ext}", stem.as_deref().unwrap_or("a"))
}

/// Whether `/nodefaultlib` (every default library) or `/nodefaultlib:NAME` leaves out the
/// default library `name` (compared as lld-link does: in any case, `.lib` optional).
pub fn no_default(args: &[String], name: &str) -> bool {
    let plain = |n: &str| {
        let n = n.to_ascii_lowercase();
        n.strip_suffix(".lib").map(str::to_string).unwrap_or(n)
    };
    flag(args, "nodefaultlib")
        || values(args, "nodefaultlib")
            .iter()
            .any(|n| plain(n) == plain(name))
}

/// Where lld-link looks for a file named without a directory: here, each `/libpath:` in order,
/// then `LIB`'s directories (`;`-separated) unless `/lldignoreenv`.
pub fn search_paths(args: &[String], lib: Option<&str>) -> Vec<String> {
    let mut out = vec![String::new()];
    out.extend(values(args, "libpath").into_iter().map(str::to_string));
    if !flag(args, "lldignoreenv") {
        if let Some(lib) = lib {
            out.extend(lib.split(';').filter(|d| !d.is_empty()).map(str::to_string));
        }
    }
    out
}

/// The file lld-link opens for an input or library `name`: an absolute path is itself; else the
/// first directory of `search` holding it (with `.obj` added to an input's name without an
/// extension, `.lib` to a library's).
pub fn find_file(
    name: &str,
    search: &[String],
    library: bool,
    cwd: &Utf8Path,
) -> Option<Utf8PathBuf> {
    if Utf8Path::new(name).is_absolute() {
        return Some(Utf8PathBuf::from(name));
    }
    let bare = Utf8Path::new(name).extension().is_none();
    let names: Vec<String> = match (bare, library) {
        (true, true) => vec![format!("{name}.lib")],
        (true, false) => vec![name.to_string(), format!("{name}.obj")],
        (false, _) => vec![name.to_string()],
    };
    crate::link::ldargs::first_file(cwd, search, &names)
}

/// The options of a ThinLTO backend compile that lld-link's DTLTO derives from the link: the
/// optimisation level (`/opt:lldlto=N`), sample profile, profile-mismatch warnings; never PIC.
pub fn job_options(args: &[String]) -> JobOptions {
    let mut opt_level = "2".to_string();
    for value in values(args, "opt") {
        for part in value.split(',') {
            if let Some(n) = part.to_ascii_lowercase().strip_prefix("lldlto=") {
                opt_level = n.to_string();
            }
        }
    }
    let mut pgo_warn_mismatch = true;
    for arg in args {
        if let Some((name, value)) = option(arg) {
            if name == "lto-pgo-warn-mismatch" {
                pgo_warn_mismatch = !value.is_some_and(|v| v.eq_ignore_ascii_case("no"));
            }
        }
    }
    JobOptions {
        opt_level,
        pic: false,
        sample_profile: values(args, "lto-sample-profile")
            .last()
            .map(|p| p.to_string()),
        pgo_warn_mismatch,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v(words: &[&str]) -> Vec<String> {
        words.iter().map(|w| w.to_string()).collect()
    }

    #[test]
    fn options_in_any_spelling_and_unix_paths_as_inputs() {
        let words = classify(&v(&[
            "/OUT:a.exe",
            "-out:b.exe",
            "/home/u/main.obj",
            "/DefaultLib:kernel32",
            "-defaultlib:libcmt.lib",
            "/wholearchive:lib x.lib",
            "/WHOLEARCHIVE",
            "/start-lib",
            "m.obj",
            "/End-Lib",
            "-nologo",
            "-unknownthing",
            "/out/dir/x.obj",
        ]));
        let inputs: Vec<&Word> = words
            .iter()
            .filter(|w| !matches!(w, Word::Option(_)))
            .collect();
        assert_eq!(
            inputs,
            [
                &Word::Input("/home/u/main.obj".into()),
                &Word::Library("kernel32".into()),
                &Word::Library("libcmt.lib".into()),
                &Word::WholeInput {
                    path: "lib x.lib".into(),
                    word: "/wholearchive:lib x.lib".into()
                },
                &Word::Input("m.obj".into()),
                &Word::Input("/out/dir/x.obj".into()),
            ]
        );
        assert_eq!(option("/Start-Lib"), Some(("start-lib".into(), None)));
        assert_eq!(option("/usr/lib/x.lib"), None);
    }

    #[test]
    fn outputs_as_lld_link_names_them() {
        assert_eq!(output(&v(&["a.obj", "/out:x.exe", "-OUT:y.exe"])), "y.exe");
        assert_eq!(
            output(&v(&["/nologo", "dir/main.obj", "b.obj"])),
            "main.exe"
        );
        assert_eq!(output(&v(&["/wholearchive:x/l.lib", "b.obj"])), "l.exe");
        assert_eq!(output(&v(&["/DLL", "m.obj"])), "m.dll");
    }

    #[test]
    fn backend_options_as_lld_link_writes_them() {
        let opts = |args: &[&str]| job_options(&v(args)).options().join(" ");
        let base = "-faddrsig -ffunction-sections -fdata-sections";
        let tail = "-Wno-unused-command-line-argument";
        assert_eq!(opts(&["/opt:ref,LLDLTO=3"]), format!("-O3 {base} {tail}"));
        assert_eq!(
            opts(&["/lto-pgo-warn-mismatch:no", "/lto-sample-profile:p.prof"]),
            format!("-O2 {base} -mllvm -no-pgo-warn-mismatch -fprofile-sample-use=p.prof {tail}")
        );
        assert_eq!(
            opts(&["-lto-pgo-warn-mismatch:no", "/lto-pgo-warn-mismatch"]),
            format!("-O2 {base} {tail}")
        );
    }

    #[test]
    fn response_files_and_the_link_variables() {
        let dir = tempfile::tempdir().unwrap();
        let cwd = Utf8Path::from_path(dir.path()).unwrap();
        std::fs::write(
            cwd.join("a.rsp"),
            "\"lib odd #1.lib\" C:\\dir\\x.obj @b.rsp\r\n",
        )
        .unwrap();
        std::fs::write(cwd.join("b.rsp"), "/out:\"p q.exe\"").unwrap();
        assert_eq!(
            expand(
                &v(&["@a.rsp"]),
                cwd,
                Some("/nologo"),
                Some("/debug \"x y\"")
            )
            .unwrap(),
            [
                "/debug",
                "x y",
                "/nologo",
                "lib odd #1.lib",
                "C:\\dir\\x.obj",
                "/out:p q.exe",
            ]
        );
        assert_eq!(
            expand(&v(&["/LLDIGNOREENV"]), cwd, Some("/nologo"), Some("/debug")).unwrap(),
            ["/LLDIGNOREENV"]
        );
        // Byte-order marks, as MSBuild writes response files.
        std::fs::write(cwd.join("bom8.rsp"), b"\xEF\xBB\xBFmain.obj").unwrap();
        let mut utf16 = vec![0xFF, 0xFE];
        utf16.extend("a b.obj".encode_utf16().flat_map(u16::to_le_bytes));
        std::fs::write(cwd.join("bom16.rsp"), utf16).unwrap();
        assert_eq!(
            expand(&v(&["@bom8.rsp", "@bom16.rsp"]), cwd, None, None).unwrap(),
            ["main.obj", "a", "b.obj"]
        );
        std::fs::write(cwd.join("c.rsp"), "'a b' c\\ d").unwrap();
        assert_eq!(
            expand(&v(&["--rsp-quoting=posix", "@c.rsp"]), cwd, None, None).unwrap(),
            ["--rsp-quoting=posix", "a b", "c d"]
        );
        assert!(expand(&v(&["@none.rsp"]), cwd, None, None).is_err());
    }

    #[test]
    fn files_and_libraries_are_found_as_lld_link_finds_them() {
        let dir = tempfile::tempdir().unwrap();
        let cwd = Utf8Path::from_path(dir.path()).unwrap();
        for d in ["l1", "l2", "env"] {
            std::fs::create_dir(cwd.join(d)).unwrap();
        }
        std::fs::write(cwd.join("l2/k.lib"), "").unwrap();
        std::fs::write(cwd.join("l1/m.obj"), "").unwrap();
        std::fs::write(cwd.join("env/e.lib"), "").unwrap();
        let args = v(&["/libpath:l1", "-LIBPATH:l2"]);
        let search = search_paths(&args, Some("env;"));
        assert_eq!(search, ["", "l1", "l2", "env"]);
        let find = |n: &str, lib: bool| find_file(n, &search, lib, cwd).map(|p| p.to_string());
        assert_eq!(find("k", true).as_deref(), Some("l2/k.lib"));
        assert_eq!(find("k.lib", false).as_deref(), Some("l2/k.lib"));
        assert_eq!(find("m", false).as_deref(), Some("l1/m.obj"));
        assert_eq!(find("e", true).as_deref(), Some("env/e.lib"));
        std::fs::create_dir(cwd.join("l2/sub")).unwrap();
        std::fs::write(cwd.join("l2/sub/s.lib"), "").unwrap();
        assert_eq!(find("sub/s.lib", false).as_deref(), Some("l2/sub/s.lib"));
        assert_eq!(find("sub/s", true).as_deref(), Some("l2/sub/s.lib"));
        assert_eq!(
            find("/abs/none.lib", true).as_deref(),
            Some("/abs/none.lib")
        );
        assert_eq!(find("none", true), None);
        assert!(no_default(&v(&["/NODEFAULTLIB:K.LIB"]), "k"));
        assert!(no_default(&v(&["/nodefaultlib"]), "x.lib"));
        assert!(!no_default(&v(&["/nodefaultlib:y"]), "x.lib"));
        let ignored = search_paths(&v(&["/lldignoreenv"]), Some("env"));
        assert_eq!(ignored, [""]);
    }
}
