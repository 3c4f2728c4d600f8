//! Hosts: a link whose wrapper is distcc or icecc sends each job as a bundle to the wrapper's
//! hosts (`bundle`): the compiler's version asked once, the `dtlto-clang` link and each job's
//! spec written in the private directory, and how many bundles the hosts take at once.
//!
//! It knows what the scheduler and `__send` need to start; what a bundle is, is `bundle`'s.

use super::prepare::Prepared;
use crate::local::rundir;
use crate::remote::bundle::{self, send::Spec};
use crate::report;
use camino::Utf8Path;
use rayon::prelude::*;
use std::path::PathBuf;

/// Jobs going to the hosts: how many at once, and the program `__send` is.
pub(super) struct Hosts {
    pub slots: usize,
    pub exe: PathBuf,
}

/// Sets up sending the jobs of `order` as bundles, when the wrapper sends them; None (said
/// once, the jobs then run through the wrapper here) when it cannot.
pub(super) fn start(p: &Prepared<'_>, dir: &Utf8Path, order: &[usize]) -> Option<Hosts> {
    if !bundle::sends_bundles(&p.wrapper) {
        return None;
    }
    let skip = |why: String| {
        report::warning(&format!(
            "{} runs ThinLTO backend jobs on this machine: {why}",
            p.wrapper[0]
        ));
        None
    };
    let carrier = match bundle::carrier(&p.wrapper) {
        Ok(c) => c,
        Err(why) => return skip(why),
    };
    let program = p.file.jobs.first()?.command.words().next()?.to_string();
    let compiler = match bundle::compiler(&program) {
        Ok(c) => c,
        Err(e) => return skip(format!("its bundles need the compiler's version: {e}")),
    };
    let exe = match crate::local::process::own_exe() {
        Ok(e) => PathBuf::from(e),
        Err(e) => return skip(format!("find dtlto-bridge itself: {e}")),
    };
    let entry_dir = dir.join("bin");
    let made = std::fs::create_dir_all(&entry_dir)
        .and_then(|()| std::os::unix::fs::symlink(&exe, entry_dir.join(bundle::entry::NAME)));
    if let Err(e) = made {
        return skip(format!("link {} in {entry_dir}: {e}", bundle::entry::NAME));
    }
    // Each job's spec, on every core: a link of a thousand jobs writes them before any starts.
    let written = order.par_iter().try_for_each(|&index| {
        let job = &p.file.jobs[index];
        let spec = Spec {
            cwd: p.cwd.clone(),
            command: job.command.to_vec(),
            inputs: job.inputs.iter().map(|s| s.to_string()).collect(),
            outputs: job.outputs.iter().map(|s| s.to_string()).collect(),
            compiler: compiler.clone(),
            wrapper: carrier.words.clone(),
            env: carrier.env.clone(),
            entry_dir: entry_dir.clone().into(),
        };
        let path = rundir::send_spec(dir, index);
        serde_json::to_vec(&spec)
            .map_err(std::io::Error::other)
            .and_then(|json| std::fs::write(&path, json))
            .map_err(|e| format!("write {path}: {e}"))
    });
    if let Err(e) = written {
        return skip(e);
    }
    Some(Hosts {
        slots: carrier.slots,
        exe,
    })
}
