//! Bundle: ThinLTO backend jobs on distcc and icecream hosts. distcc and icecc ship one source
//! file and run its compiler on a host; a backend job reads a module, its index shard and its
//! imports. So each job is packed into one file (`format`, `pack`: the job as its content-keyed
//! REAPI action names its files) and sent as `dtlto-clang -c JOB.i -o JOB.o` (`send`); on the
//! host, dtlto-bridge reached as `dtlto-clang` (`entry`) checks the bundle as untrusted input
//! (`format`, `args`), unpacks it in a scratch directory (`scratch`), runs the same clang and
//! returns the object. `setup` makes a host ready.
//!
//! It knows the bundle, the entry and what distcc and icecc need of them; it does not schedule
//! jobs or know the link's other paths.

pub(crate) mod args;
pub(crate) mod entry;
pub(crate) mod format;
pub(crate) mod pack;
pub(crate) mod scratch;
pub(crate) mod send;
pub(crate) mod setup;

use std::path::Path;

/// The wrappers that send bundles: distcc (and its pump mode) and icecc.
pub fn sends_bundles(wrapper: &[String]) -> bool {
    let name = wrapper
        .first()
        .and_then(|w| Path::new(w).file_name())
        .and_then(|n| n.to_str());
    matches!(name, Some("distcc" | "pump" | "icecc"))
        && !crate::job::wrapper::has_placeholders(wrapper)
}

/// The wrapper that carries a bundle: `pump` (distcc's include server, which a bundle does not
/// need) sends through plain `distcc`.
pub fn carrier(wrapper: &[String]) -> Vec<String> {
    match wrapper.first().and_then(|w| Path::new(w).file_name()) {
        Some(name) if name == "pump" => std::iter::once("distcc".to_string())
            .chain(wrapper[1..].iter().cloned())
            .collect(),
        _ => wrapper.to_vec(),
    }
}

/// How many bundles may be on hosts at once: for distcc, what `distcc -j` says its hosts take
/// (DISTCC_HOSTS' slots); icecream's scheduler queues them itself, so `ICECC_JOBS` of them.
pub fn host_slots(wrapper: &[String]) -> usize {
    let first = Path::new(&wrapper[0]);
    let name = first.file_name().and_then(|n| n.to_str()).unwrap_or("");
    if name == "icecc" {
        return ICECC_JOBS;
    }
    let distcc = if name == "pump" {
        Path::new("distcc")
    } else {
        first
    };
    std::process::Command::new(distcc)
        .arg("-j")
        .stderr(std::process::Stdio::null())
        .output()
        .ok()
        .and_then(|o| String::from_utf8_lossy(&o.stdout).trim().parse().ok())
        .filter(|n: &usize| *n > 0)
        .unwrap_or(DISTCC_JOBS)
}

/// Bundles in flight through icecc: its scheduler holds those its hosts cannot take yet.
const ICECC_JOBS: usize = 32;
/// Bundles in flight through a distcc whose `-j` says nothing.
const DISTCC_JOBS: usize = 8;

/// The compiler a job's command names, as a bundle records it.
pub fn compiler(program: &str) -> Result<format::Compiler, String> {
    let path = if program.contains('/') {
        std::path::PathBuf::from(program)
    } else {
        which::which(program).map_err(|e| format!("find the compiler {program}: {e}"))?
    };
    Ok(format::Compiler {
        path: program.to_string(),
        version: entry::version_line(&path)?,
    })
}
