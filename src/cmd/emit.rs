//! Emit: `dtlto-bridge emit` — a job file's build file, written where asked (whole or not at
//! all), without running it; the jobs are checked on another core while it is rendered.
//!
//! It knows where the file goes and what to say of missing inputs; rendering is `render`'s and
//! the checks are `job::validate`'s.

use crate::cmd::cli::EmitArgs;
use crate::job::util::whole::Partial;
use crate::job::validate;
use crate::link::engine::{cwd, missing_list, parse_file};
use crate::render;
use crate::report::{self, Fail};
use std::fs;

/// `dtlto-bridge emit`: the build file, written where asked, without running it.
pub fn emit(args: &EmitArgs) -> Result<(), Fail> {
    let (dir, cwd) = cwd()?;
    let path = &args.job_file;
    let mut file = parse_file(path)?;
    if let Some(line) = crate::job::relocation::follow_modules(&mut file, dir.as_ref()) {
        report::note(&line);
    }
    let Some(format) = args.format.format() else {
        return Err(Fail::bad_input(
            "write a build file: --format (or DTLTO_BRIDGE_BACKEND) is direct, which has none; \
             choose ninja or make",
        ));
    };
    let wrapper = args.wrapper.words().map_err(Fail::bad_input)?;
    let opts = render::Options {
        wrapper: &wrapper,
        source: path.as_str(),
        run: None,
        order: None,
    };
    let check = || {
        validate::check(&file, &cwd)
            .map_err(|e| Fail::bad_input(format!("check job file {path}: {e}")))?;
        Ok(validate::missing_inputs(&file, &dir, 10))
    };
    let render = |out: &mut dyn std::io::Write, to: &str| {
        render::prepare(format, &file, &opts)
            .map_err(|e| Fail::bad_input(format!("render {}: {e}", format.file_name())))?
            .write_to(out)
            .map_err(|e| Fail::environment(format!("write {to}: {e}")))
    };
    // A file is written under a temporary name, so the jobs are checked beside the rendering
    // (on another core) and the file is thrown away if they fail; elsewhere they come first.
    let missing = match args.output.as_deref() {
        Some(out) if Partial::possible(out) => {
            let partial =
                Partial::create(out).map_err(|e| Fail::environment(format!("write {out}: {e}")))?;
            let (checked, written) = std::thread::scope(|s| {
                let checker = s.spawn(check);
                let mut f = partial.file();
                let written = render(&mut f, out.as_str());
                let checked = checker
                    .join()
                    .unwrap_or_else(|_| Err(Fail::environment("check the jobs: it panicked")));
                (checked, written)
            });
            match checked.and_then(|missing| written.map(|()| missing)) {
                Ok(missing) => {
                    partial
                        .commit()
                        .map_err(|e| Fail::environment(format!("write {out}: {e}")))?;
                    missing
                }
                Err(fail) => {
                    partial.discard();
                    return Err(fail);
                }
            }
        }
        Some(out) => {
            let missing = check()?;
            let mut f = fs::OpenOptions::new()
                .write(true)
                .open(out)
                .map_err(|e| Fail::environment(format!("write {out}: {e}")))?;
            render(&mut f, out.as_str())?;
            missing
        }
        None => {
            let missing = check()?;
            render(&mut std::io::stdout().lock(), "standard output")?;
            missing
        }
    };
    let (count, shown) = missing;
    if let Some(list) = missing_list(&file, count, &shown) {
        report::warning(&format!(
            "{list}\nthe build file runs only where they exist: lld removes index shards and the \
             archive members it extracted when the link ends (keep them with -Wl,--save-temps, \
             or capture a link with --save DIR)"
        ));
    }
    Ok(())
}
