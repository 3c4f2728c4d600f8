//! Host: `host setup` (this machine made a distcc host for bundles) and `host check` (a probe
//! bundle through the wrapper, per host), printing what each did or found, one line each.
//!
//! It is glue: the work is `bundle::setup`'s and `bundle::icecc`'s.

use crate::cmd::cli::HostCommand;
use crate::remote::bundle::setup;
use crate::report::Fail;
use std::path::PathBuf;

pub fn host(command: &HostCommand) -> Result<(), Fail> {
    let exe = PathBuf::from(crate::local::process::own_exe().map_err(Fail::environment)?);
    match command {
        HostCommand::Setup { dir, icecc } => {
            let dir = match dir {
                Some(d) => d.clone().into_std_path_buf(),
                None => exe.parent().map(PathBuf::from).unwrap_or_default(),
            };
            let said = setup::setup(&exe, &dir)
                .map_err(|e| Fail::environment(format!("set up this host: {e}")))?;
            for line in said {
                println!("{line}");
            }
            if let Some(clang) = icecc {
                let said = crate::remote::bundle::icecc::env(&exe, &dir, clang).map_err(|e| {
                    Fail::environment(format!("write the icecream environment: {e}"))
                })?;
                for line in said {
                    println!("{line}");
                }
            }
            Ok(())
        }
        HostCommand::Check {
            hosts,
            compiler,
            wrapper,
        } => {
            let words = wrapper.words().map_err(Fail::bad_input)?;
            if !crate::remote::bundle::sends_bundles(&words) {
                return Err(Fail::bad_input(
                    "check hosts: give --wrapper distcc (or pump, icecc), or DTLTO_BRIDGE_WRAPPER",
                ));
            }
            let hosts: Vec<Option<&str>> = match hosts.is_empty() {
                true => vec![None],
                false => hosts.iter().map(|h| Some(h.as_str())).collect(),
            };
            let mut failed = Vec::new();
            for host in hosts {
                match setup::check(&exe, &words, compiler, host) {
                    Ok(line) => println!("{line}"),
                    Err(e) => failed.push(e),
                }
            }
            match failed.is_empty() {
                true => Ok(()),
                false => Err(Fail::failed(format!("check hosts: {}", failed.join("; ")))),
            }
        }
    }
}
