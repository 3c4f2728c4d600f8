//! Emitted: `dtlto-bridge link --emit FILE` — the thin link now, with its files in FILE.dtlto/,
//! and the whole flow written to FILE, whose own rule writes it again when an archive changed.
//!
//! It knows FILE's names as the build tool gives them, the directory's lock and marker, and the
//! command that regenerates FILE; it does not know lld's options or how FILE is rendered
//! (`render::linkfile`).

use super::command::*;
use super::flow::{relative, run_ld, write_rsp, Plan};
use super::inputs::*;
use super::options::Options;
use crate::local::process::Watch;
use crate::render::escape;
use crate::report::{self, Fail};
use camino::{Utf8Path, Utf8PathBuf};
use std::collections::{BTreeMap, BTreeSet};
use std::fs;

/// After a failed `--emit`, the file and directory an earlier emit wrote (never anyone else's):
/// left there, they would build the old link.
pub(super) fn discard_emitted(cwd: &Utf8Path, file: &Utf8Path) {
    let dir = cwd.join(format!("{file}.dtlto"));
    if dir.join(EMITTED).is_file() {
        let _ = fs::remove_file(cwd.join(file));
        let _ = fs::remove_dir_all(&dir);
    }
}

/// The marker that says a directory is an emitted link's, which a later `--emit` may replace.
pub(super) const EMITTED: &str = "dtlto-bridge-link";

/// `--emit FILE`: the thin link now, with its files in FILE.dtlto/; the whole flow in FILE.
pub(super) fn emit(
    options: &Options,
    command: &LinkCommand,
    cwd: &Utf8Path,
    file: &Utf8Path,
    aliases: &[String],
    watch: &Watch,
) -> Result<(), Fail> {
    let dir = Utf8PathBuf::from(format!("{file}.dtlto"));
    let at = cwd.join(&dir);
    if at.exists() {
        if !at.join(EMITTED).is_file() {
            return Err(Fail::bad_input(format!(
                "link --emit: {dir} exists and was not written by dtlto-bridge; move it away"
            )));
        }
        // The file written with that directory goes too: without it, it would build nothing
        // right, should this emit fail.
        match fs::remove_file(cwd.join(file)) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(Fail::environment(format!("remove {file}: {e}"))),
        }
        fs::remove_dir_all(&at).map_err(|e| Fail::environment(format!("remove {dir}: {e}")))?;
    }
    let fail = |e: std::io::Error| Fail::environment(format!("create {dir}: {e}"));
    fs::create_dir_all(&at).map_err(fail)?;
    fs::write(
        at.join(EMITTED),
        "files of a link emitted by dtlto-bridge link --emit\n",
    )
    .map_err(fail)?;
    emit_in(options, command, cwd, file, aliases, &at, watch)
}

/// The thin link in `dir`, and the flow written to `file`.
pub(super) fn emit_in(
    options: &Options,
    command: &LinkCommand,
    cwd: &Utf8Path,
    file: &Utf8Path,
    aliases: &[String],
    dir: &Utf8Path,
    watch: &Watch,
) -> Result<(), Fail> {
    let abs = dir
        .canonicalize_utf8()
        .map_err(|e| Fail::environment(format!("find {dir}: {e}")))?;
    let rel = relative(cwd, &abs);
    // FILE is dated when the first archive was read, so an archive rewritten since is newer
    // and its own rule looks at it.
    let started = std::time::SystemTime::now();
    let mut prints = BTreeMap::new();
    let plan = Plan::new(command, cwd, dir, &rel, Some(&mut prints))?;
    if plan.modules.is_empty() {
        return Err(Fail::bad_input(
            "link --emit: no input is bitcode; there is no ThinLTO flow to write",
        ));
    }
    let thin = plan.thin_args();
    run_ld(command, &thin, dir, "thin.rsp", watch, "thin link")?;
    let stamp = format!("{rel}/thin.stamp");
    fs::write(cwd.join(&stamp), "")
        .map_err(|e| Fail::environment(format!("write {stamp}: {e}")))?;
    let (spec, outputs) = plan.jobs(options, command, cwd)?;
    let jobs_text = spec.to_json();
    let jobs_path = format!("{rel}/jobs.json");
    fs::write(cwd.join(&jobs_path), &jobs_text)
        .map_err(|e| Fail::environment(format!("write {jobs_path}: {e}")))?;
    write_rsp(
        command.flavor,
        &dir.join("final.rsp"),
        &plan.final_args(&outputs),
    )?;

    let (thin_inputs, mut final_inputs, archives) = inputs(&plan);
    final_inputs.splice(0..0, outputs.values().cloned());
    let skewed = fingerprints(cwd, dir, file, &archives, prints)?;
    let mut thin_outputs = vec![plan.list.clone()];
    for native in outputs.values() {
        thin_outputs.push(crate::job::files::shard_name(native));
        thin_outputs.push(format!("{native}.imports"));
    }
    let parsed = spec
        .into_file()
        .map_err(|e| Fail::environment(format!("read back {jobs_path}: {e}")))?;
    let wrapper = &options.run.wrapper;
    let format = (options
        .run
        .backend
        .and_then(crate::link::engine::Backend::format))
    .unwrap_or(crate::render::Format::Ninja);
    let output = command.output();
    let text = crate::render::linkfile::render(
        format,
        &parsed,
        wrapper,
        &jobs_path,
        &crate::render::linkfile::Steps {
            build_file: file.as_str(),
            ld: &command.ld,
            thin_rsp: &format!("{rel}/thin.rsp"),
            thin_inputs: &thin_inputs,
            thin_outputs: &thin_outputs,
            stamp: &stamp,
            final_rsp: &format!("{rel}/final.rsp"),
            final_inputs: &final_inputs,
            output: &output,
            regenerate: &regenerate(options, cwd, command, format, file)?,
            archives: &archives,
            aliases,
            check_always: !skewed.is_empty(),
        },
    )
    .map_err(|e| Fail::bad_input(format!("link --emit: render {file}: {e}")))?;
    crate::job::util::whole::write_atomically(&cwd.join(file), |f| {
        std::io::Write::write_all(f, text.as_bytes())?;
        f.set_modified(started)
    })
    .map_err(|e| Fail::environment(format!("write {file}: {e}")))?;
    if !options.run.quiet {
        let (jobs, tool) = (outputs.len(), format.tool());
        let file_word = escape::shell_word(file.as_str());
        report::note(&format!(
            "link: wrote {file} ({jobs} jobs; files in {rel}); link with: {tool} -f {file_word}"
        ));
    }
    Ok(())
}

/// What the thin link reads (every module and file, each member of an archive) and what the
/// final link reads besides the native objects (files, and members that are not bitcode), and
/// the archives whose members were extracted, each once and in order.
fn inputs(plan: &Plan) -> (Vec<String>, Vec<String>, Vec<String>) {
    let mut thin_inputs = BTreeSet::new();
    let mut archives = BTreeSet::new();
    let mut final_inputs = Vec::new();
    for item in &plan.items {
        match item {
            Item::Module { path, .. } => {
                thin_inputs.insert(path.clone());
            }
            Item::File(path) => {
                thin_inputs.insert(path.clone());
                final_inputs.push(path.clone());
            }
            Item::Members(m) => {
                archives.insert(m.archive.clone());
                for (path, bitcode, _) in &m.members {
                    thin_inputs.insert(path.clone());
                    if !bitcode {
                        final_inputs.push(path.clone());
                    }
                }
            }
            Item::Word(_) => {}
        }
    }
    let ordered = |set: BTreeSet<String>| set.into_iter().collect();
    (ordered(thin_inputs), final_inputs, ordered(archives))
}

/// Records the archives' fingerprints in `dir`; those dated in the future (clock skew), which
/// ninja and make cannot tell by dates whether they changed until then, so that the file's own
/// rule looks at every run (said once here).
fn fingerprints(
    cwd: &Utf8Path,
    dir: &Utf8Path,
    file: &Utf8Path,
    archives: &[String],
    prints: BTreeMap<String, crate::link::fingerprint::Print>,
) -> Result<Vec<String>, Fail> {
    let skewed = crate::link::fingerprint::future(cwd, archives);
    if !skewed.is_empty() {
        report::warning(&format!(
            "link --emit: {} dated in the future (clock skew?): until then, every run of {file} \
             checks whether an archive changed",
            skewed.join(", ")
        ));
    }
    crate::link::fingerprint::record(dir, prints, !skewed.is_empty()).map_err(Fail::environment)?;
    Ok(skewed)
}

/// Locks the directory that holds `file` until the returned handle is dropped (blocking).
pub(super) fn lock_directory(file: &Utf8Path) -> Result<fs::File, Fail> {
    let dir = file.parent().unwrap_or(Utf8Path::new("."));
    let handle = fs::File::open(dir).map_err(|e| Fail::environment(format!("open {dir}: {e}")))?;
    handle
        .lock()
        .map_err(|e| Fail::environment(format!("lock {dir}: {e}")))?;
    Ok(handle)
}

/// This program as it was run (absolute, found on PATH if named bare), not where a symbolic
/// link to it points: an upgrade that moves the link runs the new one.
pub(super) fn invoked_as(cwd: &Utf8Path) -> Result<String, Fail> {
    let argv0 = std::env::args_os().next();
    let found = argv0.as_ref().and_then(|a| a.to_str()).and_then(|a| {
        let path = if a.contains('/') {
            cwd.join(a)
        } else {
            Utf8PathBuf::from_path_buf(which::which(a).ok()?).ok()?
        };
        path.is_file().then(|| path.to_string())
    });
    match found {
        Some(path) => Ok(path),
        None => crate::local::process::own_exe().map_err(Fail::environment),
    }
}

/// The build file as the build tool names it from `cwd` (an absolute path inside it made
/// relative, as `ninja -f FILE` names it), and its absolute names (the physical one, and the
/// one through `$PWD` when that is a symbolic link), which `-f` may give as well.
pub(super) fn file_names(cwd: &Utf8Path, file: &Utf8Path) -> (Utf8PathBuf, Vec<String>) {
    let logical = std::env::var("PWD")
        .ok()
        .map(Utf8PathBuf::from)
        .filter(|pwd| pwd.is_absolute() && pwd.canonicalize_utf8().is_ok_and(|p| p == cwd));
    let mut roots = vec![cwd.to_owned()];
    roots.extend(logical);
    let relative = roots
        .iter()
        .find_map(|root| file.strip_prefix(root).ok())
        .filter(|inside| file.is_absolute() && !inside.as_str().is_empty())
        .map(Utf8Path::to_owned);
    let stored = relative.unwrap_or_else(|| file.to_owned());
    let mut aliases: Vec<String> = roots
        .iter()
        .map(|root| crate::job::files::identity(root.join(&stored).as_str(), "").into_owned())
        .filter(|a| a.as_str() != stored.as_str())
        .collect();
    aliases.dedup();
    (stored, aliases)
}

/// The command that writes `file` again, as this run wrote it: this program, and every option
/// that shapes the file resolved (the format, wrapper and compiler may have come from the
/// environment, which the build tool's may not be).
pub(super) fn regenerate(
    options: &Options,
    cwd: &Utf8Path,
    command: &LinkCommand,
    format: crate::render::Format,
    file: &Utf8Path,
) -> Result<Vec<String>, Fail> {
    let mut words = vec![
        invoked_as(cwd)?,
        "link".to_string(),
        "--quiet".to_string(),
        "--emit-check".to_string(),
        format!("--backend={}", format.tool()),
        format!("--wrapper={}", shell_words::join(&options.run.wrapper)),
        format!("--compiler={}", command.compiler),
    ];
    words.extend(
        options
            .backend_arg
            .iter()
            .map(|a| format!("--backend-arg={a}")),
    );
    words.extend(
        options
            .backend_remove
            .iter()
            .map(|a| format!("--backend-remove={a}")),
    );
    words.push(format!("--emit={file}"));
    words.push("--".to_string());
    words.extend(options.command.iter().cloned());
    Ok(words)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_build_file_is_named_as_the_build_tool_names_it() {
        let lexical = |p| crate::job::files::identity(p, "").into_owned();
        assert_eq!(lexical("/a/./b/../c"), "/a/c");
        assert_eq!(lexical("/a/../../c"), "/c");
        assert_eq!(lexical("../x/./y"), "../x/y");
        let cwd = Utf8Path::new("/nonexistent/w");
        let names = |f: &str| {
            let (stored, aliases) = file_names(cwd, f.into());
            (stored.to_string(), aliases)
        };
        assert_eq!(
            names("/nonexistent/w/l.ninja"),
            ("l.ninja".into(), vec!["/nonexistent/w/l.ninja".to_string()])
        );
        assert_eq!(
            names("../o/l.ninja"),
            (
                "../o/l.ninja".into(),
                vec!["/nonexistent/o/l.ninja".to_string()]
            )
        );
        assert_eq!(
            names("/elsewhere/l.ninja"),
            ("/elsewhere/l.ninja".into(), vec![])
        );
    }
}
