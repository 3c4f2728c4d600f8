//! Link: one link's jobs — the run's engine (`engine`: a DTLTO link's job file to verified objects)
//! and, on top of it, the classic distributed ThinLTO flow (`dtlto-bridge link`) for any LLVM with
//! lld (14+), ELF (ld.lld) and COFF (lld-link) — the link command and its target, lld's inputs read
//! as lld reads them, archives and their members, the thin link, the backend jobs through the same
//! engine as a DTLTO link's, the final link, and `--emit`.
//!
//! It knows lld's options and the flow's files; it does not know how jobs are scheduled or run
//! (`engine` and `local` do) or how build files are written (`render` does).

mod archive;
mod coffargs;
mod command;
mod emitted;
pub(crate) mod engine;
mod fingerprint;
mod flow;
mod inputs;
mod ldargs;
mod options;
mod rsp;

use crate::local::process::Watch;
use crate::local::rundir::RunDir;
use crate::report::{self, Fail};
use camino::Utf8PathBuf;
use command::checked;
use emitted::{discard_emitted, emit, file_names, lock_directory};
use flow::flow;
pub(crate) use options::Options;

/// The linker's directory (this one).
fn cwd() -> Result<Utf8PathBuf, Fail> {
    let cwd = std::env::current_dir()
        .map_err(|e| Fail::environment(format!("find the current directory: {e}")))?;
    Utf8PathBuf::from_path_buf(cwd)
        .map_err(|p| Fail::environment(format!("use {}: not UTF-8", p.display())))
}

/// `link --emit FILE --emit-check`, the command of FILE's own rule: whether FILE stands as it
/// is (none of its archives changed), asked before the options are made (their files are not
/// read by a rule that does nothing). When not, `link` checks again and writes FILE.
pub(crate) fn emit_unchanged(file: &camino::Utf8Path) -> Result<bool, Fail> {
    let cwd = cwd()?;
    let (file, _) = file_names(&cwd, file);
    let _one = lock_directory(&cwd.join(&file))?;
    Ok(!crate::link::fingerprint::changed(
        &cwd.join(format!("{file}.dtlto")),
        &cwd,
    ))
}

/// `dtlto-bridge link`: with `--emit`, writes the build file of the link; else runs it.
pub(crate) fn link(
    options: &Options,
    jobserver: jobserver::FromEnv,
    watch: &Watch,
) -> Result<(), Fail> {
    let cwd = cwd()?;
    if let Some(file) = &options.emit {
        // As the build tool will name it (`ninja -f` runs from here), so that the rule that
        // writes it again is its own.
        let (file, aliases) = file_names(&cwd, file);
        let file = &file;
        // One emit at a time in FILE's directory (two runs of its own rule at once would
        // each replace FILE.dtlto/); the second then finds nothing changed.
        let _one = lock_directory(&cwd.join(file))?;
        if options.emit_check
            && !crate::link::fingerprint::changed(&cwd.join(format!("{file}.dtlto")), &cwd)
        {
            return Ok(());
        }
        let result = checked(options, &cwd)
            .and_then(|command| emit(options, &command, &cwd, file, &aliases, watch));
        if result.is_err() {
            discard_emitted(&cwd, file);
        }
        return result;
    }
    let command = checked(options, &cwd)?;
    crate::local::rundir::remove_dead(&std::env::temp_dir());
    // Named after the link, so that a relink writes the same paths into the index shards and
    // a remote action cache knows its jobs.
    let uid = rustix::process::getuid().as_raw();
    let name = crate::job::util::digest::stable_name(&[
        cwd.as_str().as_bytes(),
        command.output().as_bytes(),
    ]);
    let (state, why) =
        RunDir::create_named(&format!("link-{uid}-{name}")).map_err(Fail::environment)?;
    if let Some(why) = why {
        report::warning(&format!(
            "link: {why}; this run's files are in {} instead (a remote action cache knows \
             none of its jobs by those paths)",
            state.path()
        ));
    }
    let result = flow(options, &command, &cwd, state.path(), jobserver, watch);
    if options.run.keep {
        let kept = state.keep();
        report::note(&format!("link: kept {kept}"));
    }
    result
}
