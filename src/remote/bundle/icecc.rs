//! Icecc: an icecream environment for bundles (`host setup --icecc`). iceccd runs the
//! environment's `/usr/bin/clang` for every job whose compiler is a clang, whatever the client
//! named; so the environment `icecc-create-env --clang` makes gets this binary as its clang and
//! the real one beside it as `clang.real` (`entry::BESIDE`), and is packed again in one order
//! with fixed times and named by its content, since iceccd keeps environments by name.
//!
//! It runs icecc-create-env, tar and gzip; it does not talk to icecream's daemons.

use std::path::{Path, PathBuf};
use std::process::Command;

/// Writes the environment of `compiler` with `exe` as its clang into `dir`; what it did, the
/// ICECC_VERSION value last.
pub fn env(exe: &Path, dir: &Path, compiler: &str) -> Result<Vec<String>, String> {
    let clang = which::which(compiler).map_err(|e| format!("find the compiler {compiler}: {e}"))?;
    let work = tempfile::Builder::new()
        .prefix(".dtlto-clang-icecc.")
        .tempdir_in(dir)
        .map_err(|e| format!("make a directory in {}: {e}", dir.display()))?;
    let made = create(&clang, work.path())?;
    let packed = repack(exe, &made, work.path())?;
    let bytes = std::fs::read(&packed).map_err(|e| format!("read {}: {e}", packed.display()))?;
    let name = format!(
        "dtlto-clang-icecc-{}.tar.gz",
        &crate::job::util::digest::sha256_hex(&bytes)[..16]
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

/// `icecc-create-env --clang CLANG` run in `work`: the tarball it wrote.
fn create(clang: &Path, work: &Path) -> Result<PathBuf, String> {
    let made = Command::new("icecc-create-env")
        .arg("--clang")
        .arg(clang)
        .current_dir(work)
        .output()
        .map_err(|e| format!("run icecc-create-env (is icecream installed?): {e}"))?;
    let listed = std::fs::read_dir(work).map_err(|e| format!("list {}: {e}", work.display()))?;
    let found =
        (listed.flatten().map(|e| e.path())).find(|p| p.to_string_lossy().ends_with(".tar.gz"));
    found.ok_or_else(|| {
        format!(
            "icecc-create-env --clang {} wrote no environment: {}",
            clang.display(),
            String::from_utf8_lossy(&made.stderr).trim()
        )
    })
}

/// The environment `made` unpacked in `work`, its clang renamed `clang.real` and `exe` put in
/// its place, packed again in one order with fixed times: the new tarball.
fn repack(exe: &Path, made: &Path, work: &Path) -> Result<PathBuf, String> {
    let tree = work.join("tree");
    std::fs::create_dir(&tree).map_err(|e| format!("make {}: {e}", tree.display()))?;
    tar(&["-xzf"], made, &tree)?;
    let bin = tree.join("usr/bin");
    std::fs::rename(bin.join("clang"), bin.join(super::compilers::BESIDE))
        .map_err(|e| format!("rename the environment's clang: {e}"))?;
    std::fs::copy(exe, bin.join("clang")).map_err(|e| format!("copy {}: {e}", exe.display()))?;
    let packed = work.join("env.tar.gz");
    let status = Command::new("sh")
        .arg("-c")
        .arg(
            "tar -C \"$1\" --sort=name --mtime=@0 --owner=0 --group=0 --numeric-owner -cf - . \
             | gzip -n -1 > \"$2\"",
        )
        .arg("sh")
        .arg(&tree)
        .arg(&packed)
        .status()
        .map_err(|e| format!("run tar: {e}"))?;
    match status.success() {
        true => Ok(packed),
        false => Err(format!("pack the environment: tar exited {status}")),
    }
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
