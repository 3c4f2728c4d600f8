//! Entry: the host side, dtlto-bridge reached as `dtlto-clang` (a link to the binary) by distccd
//! or iceccd. It reads one bundle from the file its arguments name (distccd: `-c X.i -o Y.o`)
//! or from standard input (iceccd: `... - -o Y.o`), checks it as untrusted input (`format`,
//! `args`), unpacks it into a scratch directory, runs the compiler the bundle names when this
//! host's has the same version, checks that the object is one, and writes only that object to
//! `-o`. Every end is one line on stderr that `send` reads: compiled, or refused and why.
//!
//! It knows one job; it does not know the link, the daemon that started it, or the network.

use super::compilers::{BESIDE, COMPILER_VAR};
use super::format::{self, Bundle};
use super::scratch::Scratch;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// The name the entry is reached by.
pub const NAME: &str = "dtlto-clang";
/// Set by `send` for the wrapper it runs: an entry that sees it runs on the linking machine
/// (the wrapper found no host), and leaves the job to the link's own fallback.
pub const HERE_VAR: &str = "DTLTO_CLANG_HERE";
/// A host's name for the reports, when not its hostname (several daemons on one machine).
pub const HOST_VAR: &str = "DTLTO_CLANG_HOST";
/// How every line the entry writes for `send` starts.
pub const MARK: &str = "dtlto-clang: ";
/// What follows MARK when the job compiled on a host.
pub const COMPILED: &str = "compiled on ";
/// What follows MARK when a host refused the job (then `HOST: reason`).
pub const REFUSED: &str = "refused on ";
/// What follows MARK when the wrapper ran the bundle on the linking machine.
pub const NOT_SENT: &str = "not sent: ";

/// Whether the program reached as `argv0` is the entry: named `dtlto-clang`, or `clang` with
/// the real compiler beside it (an icecream environment).
pub fn reached(argv0: &str) -> bool {
    let path = Path::new(argv0);
    match path.file_name().and_then(|n| n.to_str()) {
        Some(NAME) => true,
        Some("clang") => path.with_file_name(BESIDE).is_file(),
        _ => false,
    }
}

/// The entry reached as `me`, with the daemon's arguments `args`: returns the exit code.
pub fn main(me: &Path, args: &[String]) -> i32 {
    let host = host_name();
    // icecc asks the compiler its target before it sends a job, on the linking machine.
    if args == ["-dumpmachine"] {
        return dumpmachine(me);
    }
    if std::env::var_os(HERE_VAR).is_some() {
        eprintln!(
            "{MARK}{NOT_SENT}the wrapper ran the bundle on the linking machine: no host took \
             it, or a host failed it"
        );
        return 1;
    }
    match run(me, args) {
        Ok((version, 0)) => {
            eprintln!("{MARK}{COMPILED}{host} with {version}");
            0
        }
        Ok((_, code)) => {
            eprintln!("{MARK}{REFUSED}{host}: the compiler exited with {code}");
            code
        }
        Err(why) => {
            eprintln!("{MARK}{REFUSED}{host}: {why}");
            // A wrapper runs a job that failed on a host again on the linking machine and
            // drops the host's stderr (distcc 3.4): a refusal ends well, its reason in the
            // object's place, which `send` reads and removes.
            match daemon_args(args) {
                Ok((_, out))
                    if std::fs::write(&out, format!("{REFUSAL}{host}: {why}\n")).is_ok() =>
                {
                    0
                }
                _ => 1,
            }
        }
    }
}

/// How the text a refusing entry writes in the object's place starts.
pub const REFUSAL: &str = "dtlto-clang refusal: ";

/// This host's name in reports.
pub fn host_name() -> String {
    match std::env::var(HOST_VAR) {
        Ok(name) if !name.is_empty() => name,
        _ => rustix::system::uname()
            .nodename()
            .to_string_lossy()
            .into_owned(),
    }
}

/// Where the bundle comes from and where the object goes, from the daemon's arguments: `-o
/// OUT`, and the last word that is `-` or ends in `.i`; every other word (iceccd's `-x c`,
/// `-target`, `-Xclang -main-file-name`) is the daemon's, and ignored.
pub fn daemon_args(args: &[String]) -> Result<(Option<PathBuf>, PathBuf), String> {
    let mut out = None;
    let mut input = None;
    let mut k = 0;
    while k < args.len() {
        let w = &args[k];
        if w == "-o" {
            out = args.get(k + 1).map(PathBuf::from);
            k += 2;
            continue;
        }
        if w == "-" {
            input = Some(None);
        } else if w.ends_with(".i") && !w.starts_with('-') {
            input = Some(Some(PathBuf::from(w)));
        }
        k += 1;
    }
    match (input, out) {
        (Some(input), Some(out)) => Ok((input, out)),
        _ => Err("expected `-c BUNDLE.i -o OBJECT` (or the bundle on stdin as `-`)".into()),
    }
}

/// Reads at most MAX_BUNDLE bytes from `from`.
fn read_bundle(input: Option<&Path>) -> Result<Vec<u8>, String> {
    let mut data = Vec::new();
    let limit = format::MAX_BUNDLE + 1;
    let read = match input {
        Some(p) => std::fs::File::open(p)
            .and_then(|f| f.take(limit).read_to_end(&mut data))
            .map_err(|e| format!("read the bundle {}: {e}", p.display())),
        None => (std::io::stdin().lock().take(limit).read_to_end(&mut data))
            .map_err(|e| format!("read the bundle from stdin: {e}")),
    };
    read?;
    if data.len() as u64 > format::MAX_BUNDLE {
        return Err(format!(
            "the bundle is larger than {} bytes",
            format::MAX_BUNDLE
        ));
    }
    Ok(data)
}

/// What the compiler says its target is (`-dumpmachine`), for icecc on the linking machine.
fn dumpmachine(me: &Path) -> i32 {
    let compiler = super::compilers::allowed(me, None)
        .ok()
        .and_then(|all| all.into_iter().next());
    let status = compiler.map(|c| Command::new(c).arg("-dumpmachine").status());
    match status {
        Some(Ok(s)) => s.code().unwrap_or(1),
        _ => {
            eprintln!("{MARK}no compiler here to ask its target (set {COMPILER_VAR})");
            1
        }
    }
}

/// Checks, unpacks and compiles; the compiler's version and exit code.
fn run(me: &Path, args: &[String]) -> Result<(String, i32), String> {
    let (input, out) = daemon_args(args)?;
    let data = read_bundle(input.as_deref())?;
    let bundle = format::read(&data).map_err(|e| format!("bad bundle: {e}"))?;
    if let Some(why) = super::args::refused(&bundle.manifest) {
        return Err(format!("bad bundle: {why}"));
    }
    let compiler = super::compilers::find(me, &bundle.manifest)?;
    let scratch = Scratch::create(&scratch_base())?;
    unpack(&bundle, scratch.path())?;
    let confined = super::confine::prepare(scratch.path(), &compiler)?;
    // Stdin a pipe closed at once, not /dev/null: an icecream environment's chroot has no /dev.
    let mut cmd = Command::new(&compiler);
    cmd.args(&bundle.manifest.arguments)
        .arg("-fno-crash-diagnostics")
        .current_dir(scratch.path())
        .stdin(Stdio::piped());
    confined.apply(&mut cmd, scratch.path());
    let status = cmd
        .spawn()
        .and_then(|mut child| {
            drop(child.stdin.take());
            child.wait()
        })
        .map_err(|e| format!("run {}: {e}", compiler.display()))?;
    let version = bundle.manifest.compiler.version.clone();
    if !status.success() {
        return Ok((version, status.code().unwrap_or(1).max(1)));
    }
    let object = scratch.path().join(&bundle.manifest.output);
    if let Some(p) = crate::job::files::problem(&object) {
        return Err(format!("clang: {}", p.describe(&bundle.manifest.output)));
    }
    std::fs::copy(&object, &out).map_err(|e| format!("write {}: {e}", out.display()))?;
    Ok((version, 0))
}

/// Writes every file of the bundle under `dir`, each new (never through anything there).
fn unpack(bundle: &Bundle<'_>, dir: &Path) -> Result<(), String> {
    use std::io::Write;
    for (entry, bytes) in bundle.manifest.files.iter().zip(&bundle.files) {
        let path = dir.join(&entry.name);
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent)
                .map_err(|e| format!("make the directory of {}: {e}", entry.name))?;
        }
        std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&path)
            .and_then(|mut f| f.write_all(bytes))
            .map_err(|e| format!("unpack {}: {e}", entry.name))?;
    }
    Ok(())
}

/// Where scratch directories go: TMPDIR when it is there (inside an icecream environment's
/// chroot, the daemon's TMPDIR may not be), else /tmp, else the working directory.
fn scratch_base() -> PathBuf {
    [std::env::temp_dir(), PathBuf::from("/tmp")]
        .into_iter()
        .find(|d| d.is_dir())
        .unwrap_or_else(|| PathBuf::from("."))
}
