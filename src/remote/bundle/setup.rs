//! Setup: a distcc host made ready for bundles in one idempotent step (`dtlto-bridge host
//! setup`): the `dtlto-clang` link to this binary, and a DISTCC_CMDLIST file that allows it
//! beside the compilers /usr/lib/distcc already allows (so nothing under /usr is written), and
//! the list of compilers bundles may run there; and `host check`, a probe bundle sent through
//! the wrapper that says which clang a host runs. (The icecream environment: `icecc`.)
//!
//! It says what it did; it does not start or restart distccd.

use super::entry::NAME;
use std::path::{Path, PathBuf};

/// The name of the DISTCC_CMDLIST file `setup` writes beside the entry.
pub const CMDLIST: &str = "distcc-cmdlist";

/// Makes `dir/dtlto-clang` (a link to `exe`) and `dir/distcc-cmdlist`; returns what it did,
/// one line each.
pub fn setup(exe: &Path, dir: &Path) -> Result<Vec<String>, String> {
    let mut said = Vec::new();
    std::fs::create_dir_all(dir).map_err(|e| format!("make {}: {e}", dir.display()))?;
    let entry = dir.join(NAME);
    let existing = std::fs::symlink_metadata(&entry).is_ok();
    match (existing, std::fs::read_link(&entry).ok()) {
        (true, Some(target)) if target == exe => said.push(format!(
            "{} already links to {}",
            entry.display(),
            exe.display()
        )),
        (true, None) => {
            return Err(format!(
                "{} is there and is not a link: remove it, or pick another --dir",
                entry.display()
            ))
        }
        _ => {
            let temp = dir.join(format!(".{NAME}.{}", std::process::id()));
            let _ = std::fs::remove_file(&temp);
            std::os::unix::fs::symlink(exe, &temp)
                .and_then(|()| std::fs::rename(&temp, &entry))
                .map_err(|e| format!("link {} to {}: {e}", entry.display(), exe.display()))?;
            said.push(format!("linked {} to {}", entry.display(), exe.display()));
        }
    }
    let list = cmdlist(&entry);
    let file = dir.join(CMDLIST);
    if std::fs::read_to_string(&file).is_ok_and(|t| t == list) {
        said.push(format!("{} already allows {NAME}", file.display()));
    } else {
        crate::job::util::whole::write_whole(&file, list.as_bytes(), 0o644, || Ok(()))
            .map_err(|e| format!("write {}: {e}", file.display()))?;
        said.push(format!(
            "wrote {}: {NAME} and the compilers /usr/lib/distcc allows",
            file.display()
        ));
    }
    said.push(allow_compilers(dir)?);
    said.push(format!(
        "start distccd with DISTCC_CMDLIST={} in its environment",
        file.display()
    ));
    Ok(said)
}

/// Writes the compilers the entry may run (`compilers::ALLOWED`): each clang on PATH.
fn allow_compilers(dir: &Path) -> Result<String, String> {
    use super::compilers::{on_path, ALLOWED};
    let found = on_path();
    let file = dir.join(ALLOWED);
    if found.is_empty() {
        return Ok(format!(
            "found no clang on PATH: bundles run only with {} set for distccd, or compilers \
             listed in {}",
            super::compilers::COMPILER_VAR,
            file.display()
        ));
    }
    let text: String = found.iter().map(|p| format!("{}\n", p.display())).collect();
    let names: Vec<String> = found.iter().map(|p| p.display().to_string()).collect();
    if std::fs::read_to_string(&file).is_ok_and(|t| t == text) {
        return Ok(format!(
            "{} already allows {}",
            file.display(),
            names.join(", ")
        ));
    }
    crate::job::util::whole::write_whole(&file, text.as_bytes(), 0o644, || Ok(()))
        .map_err(|e| format!("write {}: {e}", file.display()))?;
    Ok(format!(
        "wrote {}: bundles may run {}",
        file.display(),
        names.join(", ")
    ))
}

/// The DISTCC_CMDLIST text: the entry, then each compiler /usr/lib/distcc allows that is on
/// PATH (a DISTCC_CMDLIST replaces that whitelist).
fn cmdlist(entry: &Path) -> String {
    let mut lines = vec![entry.display().to_string()];
    let mut names: Vec<String> = std::fs::read_dir("/usr/lib/distcc")
        .map(|d| {
            d.flatten()
                .filter_map(|e| e.file_name().into_string().ok())
                .collect()
        })
        .unwrap_or_default();
    names.sort();
    for name in names.into_iter().filter(|n| n != NAME) {
        let real: Option<PathBuf> = ["/usr/bin", "/usr/local/bin"]
            .iter()
            .map(|d| Path::new(d).join(&name))
            .find(|p| p.is_file());
        if let Some(real) = real {
            lines.push(real.display().to_string());
        }
    }
    lines.join("\n") + "\n"
}

/// Sends a probe bundle (one C line, compiled by `compiler`) through `wrapper`, to `host` when
/// one is named (distcc: DISTCC_HOSTS=HOST); what the host said: "host H runs bundles with V",
/// or why it did not.
pub fn check(
    exe: &Path,
    wrapper: &[String],
    compiler: &str,
    host: Option<&str>,
) -> Result<String, String> {
    use super::format::{self, Entry, Manifest};
    let shown = host.unwrap_or("the wrapper's hosts");
    // By where it really is, as lld names it in a job (`/usr/lib/llvm-22/bin/clang`).
    let program = which::which(compiler)
        .map_err(|e| e.to_string())
        .and_then(|p| std::fs::canonicalize(p).map_err(|e| e.to_string()))
        .map_err(|e| format!("find the compiler {compiler}: {e}"))?;
    let program = program.to_string_lossy();
    let compiler = super::compiler(&program)?;
    let carrier = super::carrier(wrapper)?;
    let dir = tempfile::Builder::new()
        .prefix("dtlto-bridge-probe.")
        .tempdir()
        .map_err(|e| format!("make a directory for the probe: {e}"))?;
    std::os::unix::fs::symlink(exe, dir.path().join(NAME))
        .map_err(|e| format!("link {NAME} for the probe: {e}"))?;
    let source: &[u8] = b"int dtlto_bridge_probe(void) { return 42; }\n";
    let manifest = Manifest {
        compiler,
        arguments: ["-c", "-x", "c", "probe.c", "-o", "probe.o"]
            .map(String::from)
            .to_vec(),
        output: "probe.o".into(),
        files: vec![Entry::new("probe.c".into(), source)],
    };
    let bundle = dir.path().join("probe.i");
    let mut buf = Vec::new();
    format::write(&mut buf, &manifest, &[source])
        .and_then(|_| std::fs::write(&bundle, &buf))
        .map_err(|e| format!("write the probe bundle: {e}"))?;
    let env: Vec<(&str, &str)> = match host {
        Some(h) => vec![("DISTCC_HOSTS", h)],
        None => (carrier.env.iter())
            .map(|(k, v)| (k.as_str(), v.as_str()))
            .collect(),
    };
    let through = super::send::Through {
        wrapper: &carrier.words,
        entry_dir: dir.path(),
        cwd: dir.path(),
        compiler: &program,
        env: &env,
    };
    let out = dir.path().join("probe.o");
    let (code, sent) = through.run(&bundle, &out);
    match (code, sent.host, sent.refused.first()) {
        (0, Some(h), _) if std::fs::metadata(&out).is_ok_and(|m| m.len() > 0) => Ok(format!(
            "host {h} runs bundles with {}",
            manifest.compiler.version
        )),
        (_, _, Some(why)) => Err(format!("{shown} refused the probe bundle: {why}")),
        (_, _, None) if sent.here => Err(format!(
            "no host took the probe bundle ({} ran it on this machine: {shown} down, or not \
             allowing dtlto-clang; its stderr is above)",
            wrapper[0]
        )),
        (code, _, None) => Err(format!(
            "{shown} did not compile the probe bundle ({} exited {code}; its stderr is above)",
            wrapper[0]
        )),
    }
}
