//! Bundle: ThinLTO backend jobs on distcc and icecream hosts. distcc and icecc ship one source
//! file and run its compiler on a host; a backend job reads a module, its index shard and its
//! imports. So each job is packed into one file (`format`, `pack`: the job as its content-keyed
//! REAPI action names its files) and sent as `dtlto-clang -c JOB.i -o JOB.o` (`send`); on the
//! host, dtlto-bridge reached as `dtlto-clang` (`entry`) checks the bundle as untrusted input
//! (`format`, `args`), unpacks it in a scratch directory (`scratch`), runs the same clang, as
//! the host allows (`compilers`) and confined to the bundle's files (`confine`), and returns
//! the object. `setup` makes a distcc host ready,
//! `icecc` an icecream environment.
//!
//! It knows the bundle, the entry and what distcc and icecc need of them; it does not schedule
//! jobs or know the link's other paths.

pub(crate) mod args;
pub(crate) mod compilers;
pub(crate) mod confine;
pub(crate) mod entry;
pub(crate) mod format;
pub(crate) mod icecc;
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

/// How bundles go through the wrapper: its words, and the environment it needs.
pub struct Carrier {
    pub words: Vec<String>,
    pub env: Vec<(String, String)>,
    /// How many bundles may be on hosts at once.
    pub slots: usize,
}

/// The carrier of `wrapper`'s bundles, or why there is none. `pump` (distcc's include server,
/// which a bundle does not need) sends through plain distcc. distcc's `localhost` entries are
/// left out of its hosts (a bundle there would run on this machine, outside the link's slots),
/// and the slots are what `distcc -j` says of the rest; icecream's scheduler queues bundles
/// itself, so `ICECC_JOBS` of them.
pub fn carrier(wrapper: &[String]) -> Result<Carrier, String> {
    let name =
        |w: Option<&String>| w.and_then(|w| Path::new(w).file_name()?.to_str().map(String::from));
    let mut words = wrapper.to_vec();
    if name(words.first()).as_deref() == Some("pump") {
        words.remove(0);
        if name(words.first()).as_deref() != Some("distcc") {
            words.insert(0, "distcc".into());
        }
    }
    if name(words.first()).as_deref() == Some("icecc") {
        let (env, slots) = (Vec::new(), ICECC_JOBS);
        return Ok(Carrier { words, env, slots });
    }
    let (hosts, dropped) = distcc_hosts();
    if hosts.split_whitespace().all(|h| h.starts_with("--")) && dropped {
        return Err("its hosts (DISTCC_HOSTS) name no machine but this one (localhost)".into());
    }
    let env: Vec<(String, String)> = match dropped {
        true => vec![("DISTCC_HOSTS".into(), hosts)],
        false => Vec::new(),
    };
    let slots = std::process::Command::new(&words[0])
        .arg("-j")
        .envs(env.iter().map(|(k, v)| (k, v)))
        .stderr(std::process::Stdio::null())
        .output()
        .ok()
        .and_then(|o| String::from_utf8_lossy(&o.stdout).trim().parse().ok())
        .filter(|n: &usize| *n > 0)
        .unwrap_or(DISTCC_JOBS);
    Ok(Carrier { words, env, slots })
}

/// distcc's hosts as it reads them (DISTCC_HOSTS, else `$DISTCC_DIR/hosts` or
/// `~/.distcc/hosts`, else `/etc/distcc/hosts`) without its `localhost` entries, and whether
/// there were any.
fn distcc_hosts() -> (String, bool) {
    let dir = std::env::var_os("DISTCC_DIR")
        .map(std::path::PathBuf::from)
        .or_else(|| std::env::home_dir().map(|h| h.join(".distcc")));
    let text = std::env::var("DISTCC_HOSTS").ok().or_else(|| {
        let files = dir.map(|d| d.join("hosts")).into_iter();
        files
            .chain([std::path::PathBuf::from("/etc/distcc/hosts")])
            .find_map(|f| std::fs::read_to_string(f).ok())
    });
    without_localhost(&text.unwrap_or_default())
}

/// distcc's host list `text` without its `localhost` entries, and whether it had any.
fn without_localhost(text: &str) -> (String, bool) {
    let words: Vec<&str> = text
        .lines()
        .map(|l| l.split('#').next().unwrap_or(""))
        .flat_map(str::split_whitespace)
        .collect();
    let local = |w: &&str| *w == "localhost" || w.starts_with("localhost/");
    let kept: Vec<&str> = words.iter().copied().filter(|w| !local(w)).collect();
    (kept.join(" "), kept.len() != words.len())
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
        version: compilers::version_line(&path)?,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pump_sends_through_distcc_and_localhost_is_no_host() {
        let words = |w: &[&str]| carrier(&w.iter().map(|s| s.to_string()).collect::<Vec<_>>());
        assert_eq!(words(&["pump", "distcc"]).unwrap().words, ["distcc"]);
        assert_eq!(words(&["/usr/bin/pump"]).unwrap().words, ["distcc"]);
        assert_eq!(words(&["icecc"]).unwrap().slots, ICECC_JOBS);
        let hosts = "localhost/2 a:3632/8,lzo # build farm\nlocalhost b/4 --localslots=2\n";
        assert_eq!(
            without_localhost(hosts),
            ("a:3632/8,lzo b/4 --localslots=2".to_string(), true)
        );
        assert_eq!(without_localhost("a b"), ("a b".to_string(), false));
    }
}
