//! Setup: a distcc host made ready for bundles in one idempotent step (`dtlto-bridge host
//! setup`): the `dtlto-clang` link to this binary, and a DISTCC_CMDLIST file that allows it
//! beside the compilers /usr/lib/distcc already allows (so nothing under /usr is written); and
//! `host check`, a probe bundle sent through the wrapper that says which clang a host runs.
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
        let temp = dir.join(format!(".{CMDLIST}.{}", std::process::id()));
        std::fs::write(&temp, &list)
            .and_then(|()| std::fs::rename(&temp, &file))
            .map_err(|e| format!("write {}: {e}", file.display()))?;
        said.push(format!(
            "wrote {}: {NAME} and the compilers /usr/lib/distcc allows",
            file.display()
        ));
    }
    said.push(format!(
        "start distccd with DISTCC_CMDLIST={} in its environment (and {} beside it if the \
         compiler is elsewhere than the links' path)",
        file.display(),
        super::entry::COMPILER_VAR
    ));
    Ok(said)
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
    let program = compiler;
    let compiler = super::compiler(compiler)?;
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
        .and_then(|()| std::fs::write(&bundle, &buf))
        .map_err(|e| format!("write the probe bundle: {e}"))?;
    let env: Vec<(&str, &str)> = host.map(|h| ("DISTCC_HOSTS", h)).into_iter().collect();
    let through = super::send::Through {
        wrapper,
        entry_dir: dir.path(),
        cwd: dir.path(),
        compiler: program,
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
        (code, _, None) => Err(format!(
            "{shown} did not compile the probe bundle ({} exited {code}; its stderr is above)",
            wrapper[0]
        )),
    }
}

/// Writes an icecream environment for bundles into `dir`: `icecc-create-env --clang` of
/// `compiler`, with the real compiler renamed `clang.real` and this binary as `/usr/bin/clang`
/// (iceccd runs the environment's `/usr/bin/clang` for every job whose compiler is a clang),
/// repacked in one order with fixed times and named by its content, since iceccd keeps
/// environments by name. Returns what it did, the ICECC_VERSION value last.
pub fn icecc_env(exe: &Path, dir: &Path, compiler: &str) -> Result<Vec<String>, String> {
    let clang = which::which(compiler).map_err(|e| format!("find the compiler {compiler}: {e}"))?;
    let work = tempfile::Builder::new()
        .prefix(".dtlto-clang-icecc.")
        .tempdir_in(dir)
        .map_err(|e| format!("make a directory in {}: {e}", dir.display()))?;
    let made = std::process::Command::new("icecc-create-env")
        .arg("--clang")
        .arg(&clang)
        .current_dir(work.path())
        .output()
        .map_err(|e| format!("run icecc-create-env (is icecream installed?): {e}"))?;
    let tarball = std::fs::read_dir(work.path())
        .map_err(|e| e.to_string())?
        .flatten()
        .map(|e| e.path())
        .find(|p| p.to_string_lossy().ends_with(".tar.gz"))
        .ok_or_else(|| {
            format!(
                "icecc-create-env --clang {} wrote no environment: {}",
                clang.display(),
                String::from_utf8_lossy(&made.stderr).trim()
            )
        })?;
    let tree = work.path().join("tree");
    std::fs::create_dir(&tree).map_err(|e| e.to_string())?;
    tar(&["-xzf"], &tarball, &tree)?;
    let bin = tree.join("usr/bin");
    std::fs::rename(bin.join("clang"), bin.join(super::entry::BESIDE))
        .map_err(|e| format!("rename the environment's clang: {e}"))?;
    std::fs::copy(exe, bin.join("clang")).map_err(|e| format!("copy {}: {e}", exe.display()))?;
    let packed = work.path().join("env.tar.gz");
    let made = std::process::Command::new("sh")
        .arg("-c")
        .arg("tar -C \"$1\" --sort=name --mtime=@0 --owner=0 --group=0 --numeric-owner -cf - . | gzip -n -1 > \"$2\"")
        .arg("sh")
        .arg(&tree)
        .arg(&packed)
        .status()
        .map_err(|e| format!("run tar: {e}"))?;
    if !made.success() {
        return Err(format!("pack the environment: tar exited {made}"));
    }
    let bytes = std::fs::read(&packed).map_err(|e| format!("read {}: {e}", packed.display()))?;
    let name = format!(
        "dtlto-clang-icecc-{}.tar.gz",
        &crate::util::fsutil::sha256_hex(&bytes)[..16]
    );
    let out = dir.join(&name);
    let said = if out.is_file() {
        format!("{} is already there", out.display())
    } else {
        std::fs::rename(&packed, &out).map_err(|e| format!("write {}: {e}", out.display()))?;
        format!(
            "wrote {}: {} as clang.real, {} as clang",
            out.display(),
            clang.display(),
            exe.display()
        )
    };
    let version = format!("{}:{}", std::env::consts::ARCH, out.display());
    Ok(vec![
        said,
        format!("on the linking machine: ICECC_VERSION={version}"),
    ])
}

/// Runs `tar FLAGS FILE -C DIR`.
fn tar(flags: &[&str], file: &Path, dir: &Path) -> Result<(), String> {
    let status = std::process::Command::new("tar")
        .args(flags)
        .arg(file)
        .arg("-C")
        .arg(dir)
        .status()
        .map_err(|e| format!("run tar: {e}"))?;
    match status.success() {
        true => Ok(()),
        false => Err(format!(
            "tar {} {} exited {status}",
            flags.join(" "),
            file.display()
        )),
    }
}
