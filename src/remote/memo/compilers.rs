//! Compilers: each compiler's identity (a digest of its binary and its version line), remembered
//! for a clang binary that did not change.
//!
//! It knows how to ask a compiler its version, and what the compilers' file of the cache
//! directory (`store::CacheDir::compilers`) holds, a line per compiler asked: `KEY IDENTITY`. The key is a digest of the
//! compiler's path and the identities (device, inode, size, modification and change times) of
//! its file, its directory, and each library it needs found on its run path (the file a
//! symlink there names: a package upgrade replaces it), and `LD_LIBRARY_PATH`, searched first.
//! Only a clang binary is remembered: an ELF file named `clang…` that says it is installed
//! where it is (`InstalledDir:`), whose libraries clang's and LLVM's are found there, run
//! without `LD_PRELOAD`. A script or any other program (ccache or a launcher in the compiler's
//! place, copied or linked) may run whichever compiler its environment selects, which only its
//! version line tells, so it is asked at every link. It does not know actions or servers.

use super::inputs::{trusted, Key};
use crate::job::store::Kept;
use std::path::{Path, PathBuf};
use std::thread::JoinHandle;

/// The most compilers remembered: the newest stay.
const MAX_LINES: usize = 64;

/// The compiler's identity, asked on a thread of its own as soon as the job file is read: the
/// compiler starts in tens of milliseconds, which the link's other work hides.
/// Dropped unanswered (a link that fails first), it waits for the compiler, which never
/// outlives the link.
pub struct AskedCompiler(State);

enum State {
    Asking(JoinHandle<Result<String, String>>),
    /// Answered at once: no thread could be started.
    Answered(Result<String, String>),
    Taken,
}

impl AskedCompiler {
    /// Asks the compiler of `file`'s first job, or remembers it from `kept`.
    pub fn start(file: &crate::job::parse::JobFile<'_>, kept: Option<Kept>) -> AskedCompiler {
        let program = file
            .jobs
            .first()
            .and_then(|j| j.command.words().next())
            .map(|w| w.to_string())
            .unwrap_or_default();
        let (p, k) = (program.clone(), kept.clone());
        AskedCompiler(
            match std::thread::Builder::new().spawn(move || compiler(&p, k.as_ref())) {
                Ok(thread) => State::Asking(thread),
                Err(_) => State::Answered(compiler(&program, kept.as_ref())),
            },
        )
    }

    /// The answer, waited for.
    pub fn answer(mut self) -> Result<String, String> {
        match std::mem::replace(&mut self.0, State::Taken) {
            State::Asking(thread) => thread.join().unwrap_or_else(|_| {
                Err("ask the compiler its version: the thread panicked".into())
            }),
            State::Answered(answer) => answer,
            State::Taken => unreachable!("answered once"),
        }
    }
}

impl Drop for AskedCompiler {
    fn drop(&mut self) {
        if let State::Asking(thread) = std::mem::replace(&mut self.0, State::Taken) {
            let _ = thread.join();
        }
    }
}

/// The compiler's identity: a digest of its binary and its version text, so that a compiler
/// replaced at the same path changes every action. Remembered in `kept` when it may be.
pub fn compiler(program: &str, kept: Option<&Kept>) -> Result<String, String> {
    let path = if program.contains('/') {
        PathBuf::from(program)
    } else {
        which::which(program).map_err(|e| format!("find the compiler {program}: {e}"))?
    };
    let real = std::fs::canonicalize(&path)
        .map_err(|e| format!("find the compiler {}: {e}", path.display()))?;
    let memo = kept.and_then(|kept| Some((kept, key(&real)?)));
    if let Some((file, key)) = &memo {
        if let Some(identity) = remembered(file, key) {
            return Ok(identity);
        }
    }
    let (identity, installed) = ask(&path, &real)?;
    // Only a compiler that says it is installed where it is: a program in its place that runs
    // another compiler (a copy of ccache named clang) names that one's directory.
    let itself = installed.is_some_and(|d| Some(d.as_path()) == real.parent());
    if let Some((file, key)) = memo.filter(|_| itself) {
        // Best effort: not remembered only means asked again.
        let _ = remember(file, &key, &identity);
    }
    Ok(identity)
}

/// Asks the compiler: its binary's digest and its version line, digested; and the directory
/// it says it is installed in, when it says.
fn ask(path: &Path, real: &Path) -> Result<(String, Option<PathBuf>), String> {
    let digest = std::fs::File::open(real)
        .and_then(|mut f| super::inputs::read_digest(&mut f))
        .map_err(|e| format!("read the compiler {}: {e}", real.display()))?;
    let text = std::process::Command::new(path)
        .arg("--version")
        .stdin(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
        .unwrap_or_default();
    let version = text.lines().next().unwrap_or("");
    let installed = text
        .lines()
        .find_map(|l| l.strip_prefix("InstalledDir: "))
        .and_then(|d| std::fs::canonicalize(d.trim()).ok());
    let mut h = crate::job::util::digest::Sha256::default();
    h.update(digest.hash.as_bytes());
    h.update(version.as_bytes());
    Ok((format!("sha256:{}", h.finish()), installed))
}

/// The key the compiler at `real` (its canonical path) is remembered by, when it may be: a
/// clang binary, settled (not changed in the last second), on a file system whose identities
/// tell a file's content, that loads clang's and LLVM's libraries from its run path.
fn key(real: &Path) -> Option<String> {
    let name = real.file_name()?.to_str()?;
    let preloaded = std::env::var_os("LD_PRELOAD").is_some_and(|s| !s.is_empty());
    if !name.starts_with("clang") || preloaded || !trusted(real) {
        return None;
    }
    let dir = real.parent()?;
    // Only its headers and dynamic section are read: a clang linked statically is 100 MB.
    let binary = object::read::ReadCache::new(std::fs::File::open(real).ok()?);
    let library_path = std::env::var("LD_LIBRARY_PATH").unwrap_or_default();
    let libraries = run_path_libraries(&binary, dir, &library_path)?;
    let now = std::time::SystemTime::now();
    let mut text = format!("{}\nLD_LIBRARY_PATH={library_path}", real.to_str()?);
    let paths = [real, dir]
        .into_iter()
        .chain(libraries.iter().map(PathBuf::as_path));
    for (k, p) in paths.enumerate() {
        // A library's identity is its file's, through the symlink the run path holds.
        let seen = std::fs::metadata(p).ok().map(|m| Key::of(&m));
        if k == 0 && !seen.is_some_and(|s| s.settled(now)) {
            return None;
        }
        text.push_str(&format!("\n{}\n{seen:?}", p.display()));
    }
    Some(crate::job::util::digest::sha256_hex(text.as_bytes()))
}

/// The libraries the ELF binary `binary` (in `dir`) needs that `library_path` (as
/// `LD_LIBRARY_PATH`, searched first) or its run path (`$ORIGIN` expanded) holds, in its order;
/// None when it is not such a binary, or when a library of clang's or LLVM's is on neither (the
/// loader finds it elsewhere).
fn run_path_libraries(
    binary: &object::read::ReadCache<std::fs::File>,
    dir: &Path,
    library_path: &str,
) -> Option<Vec<PathBuf>> {
    use object::read::elf::{Dyn, ElfFile64};
    let file = ElfFile64::<object::Endianness, _>::parse(binary).ok()?;
    let endian = file.endian();
    let sections = file.elf_section_table();
    let (entries, link) = sections.dynamic(endian, binary).ok()??;
    let strings = sections.strings(endian, binary, link).ok()?;
    let mut needed = Vec::new();
    let mut run_path: Vec<PathBuf> = (library_path.split(':'))
        .filter(|d| !d.is_empty())
        .map(PathBuf::from)
        .collect();
    for entry in entries {
        let text = || {
            let s = strings.get(entry.val32(endian)?).ok()?;
            Some(String::from_utf8_lossy(s).into_owned())
        };
        match entry.tag32(endian) {
            Some(object::elf::DT_NEEDED) => needed.push(text()?),
            Some(object::elf::DT_RUNPATH | object::elf::DT_RPATH) => {
                let origin = dir.to_str()?;
                for d in text()?.split(':').filter(|d| !d.is_empty()) {
                    run_path.push(PathBuf::from(
                        d.replace("${ORIGIN}", origin).replace("$ORIGIN", origin),
                    ));
                }
            }
            _ => {}
        }
    }
    let mut found = Vec::new();
    for library in needed {
        match run_path
            .iter()
            .map(|d| d.join(&library))
            .find(|p| p.exists())
        {
            Some(p) => found.push(p),
            None if library.starts_with("libclang") || library.starts_with("libLLVM") => {
                return None
            }
            None => {}
        }
    }
    Some(found)
}

/// The identity remembered under `key` in `file`.
fn remembered(file: &Kept, key: &str) -> Option<String> {
    file.read()?
        .lines()
        .filter_map(|l| l.split_once(' '))
        .find(|(k, _)| *k == key)
        .map(|(_, identity)| identity.to_string())
}

/// Remembers `identity` under `key` in `file`, first, with at most `MAX_LINES` others.
fn remember(file: &Kept, key: &str, identity: &str) -> std::io::Result<()> {
    let others = file.read().unwrap_or_default();
    // The newest first: the oldest go when there are too many.
    let lines = std::iter::once(format!("{key} {identity}")).chain(
        others
            .lines()
            .filter(|l| l.split_once(' ').is_some_and(|(k, _)| k != key))
            .take(MAX_LINES - 1)
            .map(str::to_string),
    );
    file.keep(false, || Ok(lines.collect())).map(drop)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;
    use std::process::Command;

    fn lines(file: &Path) -> usize {
        std::fs::read_to_string(file).map_or(0, |t| t.lines().count())
    }

    /// Builds with cc (Rust's own linker driver) a program that answers `--version` as clang
    /// does, from `bin`, needing `lib/libLLVMx.so` by its run path; `installed` is the
    /// directory it says it is installed in (its own when None).
    fn fake_clang(bin: &Path, lib: &Path, name: &str, installed: Option<&str>) -> PathBuf {
        let src = bin.join(format!("{name}.c"));
        let dir = match installed {
            Some(d) => format!("\"{d}\""),
            None => "dirname(realpath(\"/proc/self/exe\", buf))".into(),
        };
        std::fs::write(
            &src,
            format!(
                "#include <libgen.h>\n#include <limits.h>\n#include <stdio.h>\n#include <stdlib.h>\n\
                 int llvm(void);\nint main(void) {{ char buf[PATH_MAX];\n\
                 printf(\"fake clang version %d\\nInstalledDir: %s\\n\", llvm(), {dir});\n\
                 return 0; }}\n"
            ),
        )
        .unwrap();
        let exe = bin.join(name);
        let built = Command::new("cc")
            .arg(&src)
            .arg("-o")
            .arg(&exe)
            .arg(format!("-L{}", lib.display()))
            .args(["-lLLVMx", "-Wl,--enable-new-dtags,-rpath,$ORIGIN/../lib"])
            .status()
            .unwrap();
        assert!(built.success());
        exe
    }

    fn fake_llvm(lib: &Path, version: u32) {
        let src = lib.join("llvm.c");
        std::fs::write(&src, format!("int llvm(void) {{ return {version}; }}\n")).unwrap();
        // Built aside and renamed into place, as a package upgrade does.
        let new = lib.join("libLLVMx.so.new");
        let built = Command::new("cc")
            .args(["-shared", "-fPIC", "-o"])
            .arg(&new)
            .arg(&src)
            .status()
            .unwrap();
        assert!(built.success());
        std::fs::rename(&new, lib.join("libLLVMx.so")).unwrap();
    }

    #[test]
    fn a_clang_binary_is_remembered_until_it_or_its_libraries_change_a_stand_in_never() {
        let dir = tempfile::tempdir().unwrap();
        let (bin, lib, history) = (
            dir.path().join("bin"),
            dir.path().join("lib"),
            dir.path().join("h"),
        );
        std::fs::create_dir_all(&bin).unwrap();
        std::fs::create_dir_all(&lib).unwrap();
        fake_llvm(&lib, 1);
        let clang = fake_clang(&bin, &lib, "clang-x", None);
        let copy = fake_clang(&bin, &lib, "clang-copy", Some("/usr/bin"));
        let script = bin.join("clang-script");
        std::fs::write(&script, "#!/bin/sh\necho 'fake clang version 1'\n").unwrap();
        std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
        let cache = camino::Utf8PathBuf::from_path_buf(history.clone()).unwrap();
        let kept = crate::job::store::CacheDir::open(cache)
            .unwrap()
            .compilers();
        let memo = kept.path().to_path_buf();
        let (clang, copy) = (clang.to_str().unwrap(), copy.to_str().unwrap());
        // Just written: not settled, so asked and not remembered.
        let asked = compiler(clang, Some(&kept)).unwrap();
        assert_eq!(lines(&memo), 0);
        std::thread::sleep(std::time::Duration::from_millis(1100));
        assert_eq!(compiler(clang, Some(&kept)).unwrap(), asked);
        assert_eq!(lines(&memo), 2, "the header and the compiler");
        // Remembered: the answer comes from the file, not from the compiler.
        let text = std::fs::read_to_string(&memo).unwrap();
        std::fs::write(&memo, text.replace(&asked, "sha256:remembered")).unwrap();
        assert_eq!(compiler(clang, Some(&kept)).unwrap(), "sha256:remembered");
        assert_eq!(compiler(clang, None).unwrap(), asked, "no history");
        // Its library replaced (the binary and its directory as they were): asked again, and
        // the new version line makes a new identity.
        fake_llvm(&lib, 2);
        let upgraded = compiler(clang, Some(&kept)).unwrap();
        assert_ne!(upgraded, asked);
        assert_ne!(upgraded, "sha256:remembered");
        // A stand-in that says it is installed elsewhere, or a script: asked at every link,
        // never remembered.
        let before = lines(&memo);
        compiler(copy, Some(&kept)).unwrap();
        let one = compiler(script.to_str().unwrap(), Some(&kept)).unwrap();
        assert_eq!(lines(&memo), before);
        std::fs::write(&script, "#!/bin/sh\necho 'fake clang version 2'\n").unwrap();
        assert_ne!(
            compiler(script.to_str().unwrap(), Some(&kept)).unwrap(),
            one
        );
    }
}
