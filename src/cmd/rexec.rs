//! Rexec: one command run on a Remote Execution API server with the inputs and outputs it is
//! given — the wrapper (`DIST_CC`) that makes an emitted build file run remotely.
//!
//! It knows how to turn its arguments into a one-job link for `remote`, and when to run the
//! command here instead; it does not schedule (each job is its own process and connection, so
//! a link run by dtlto-bridge itself shares one connection and uploads less).

use crate::cmd::cli::RexecArgs;
use crate::job::outcome::RemoteEnd as End;
use crate::job::parse::{Command, Job, JobFile, Schema};
use crate::remote::Remote;
use crate::report::{self, Fail};
use std::borrow::Cow;
use std::sync::Arc;

/// Runs the command remotely, else here; returns the exit code.
pub fn rexec(args: &RexecArgs) -> Result<i32, Fail> {
    let Some(options) = args.remote.options().map_err(Fail::bad_input)? else {
        return Err(Fail::bad_input(
            "rexec: no server: give --remote URL or DTLTO_BRIDGE_REMOTE",
        ));
    };
    let owned = |v: &[String]| -> Vec<Cow<'static, str>> {
        v.iter().map(|s| Cow::Owned(s.clone())).collect()
    };
    let file = Arc::new(JobFile {
        schema: Schema::Current,
        linker_output: args.outputs.first().cloned().unwrap_or_default(),
        jobs: vec![Job {
            command: Command {
                common: Arc::from(Vec::new()),
                own: owned(&args.command),
            },
            inputs: owned(&args.inputs),
            outputs: owned(&args.outputs),
            imports: 0,
        }],
    });
    let cwd = std::env::current_dir()
        .map_err(|e| Fail::environment(format!("find the current directory: {e}")))?;
    let name = &args.outputs[0];
    let asked = crate::remote::AskedCompiler::start(&file, None);
    let why = match Remote::start(&options, &file, &cwd, asked, &Default::default(), &[]) {
        Ok((remote, why)) => match &why[0] {
            Some(reason) => reason.clone(),
            None => {
                let (tx, rx) = std::sync::mpsc::channel::<End>();
                remote.submit(0, Box::new(move |end| drop(tx.send(end))));
                let end = rx.recv();
                let (_, warnings) = remote.finish();
                warnings.iter().for_each(|w| report::warning(w));
                match end {
                    Ok(end) if end.problem.is_none() => {
                        let _ = std::io::Write::write_all(&mut std::io::stderr(), &end.stderr);
                        return Ok(0);
                    }
                    Ok(end) => {
                        let text = String::from_utf8_lossy(&end.stderr);
                        let problem = end.problem.clone().unwrap_or_default();
                        if text.trim().is_empty() {
                            problem
                        } else {
                            format!("{problem}; its stderr:\n{}", text.trim_end())
                        }
                    }
                    Err(_) => "the remote client stopped".into(),
                }
            }
        },
        Err(e) => e,
    };
    if args.no_fallback {
        return Err(Fail::failed(format!(
            "run {name} remotely: {why} (--no-fallback)"
        )));
    }
    report::warning(&format!("run {name} here, not remotely: {why}"));
    let status = std::process::Command::new(&args.command[0])
        .args(&args.command[1..])
        .status()
        .map_err(|e| Fail::failed(format!("run {}: {e}", args.command[0])))?;
    Ok(status.code().unwrap_or(1))
}
