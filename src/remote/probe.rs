//! Probe: `doctor --remote`'s check of a server — its capabilities, and one tiny action
//! executed there (never from the cache), timed.
//!
//! It knows what a server must offer a link; it runs no job of a link.

use crate::remote::action::{self, Common};
use crate::remote::options::Options;
use crate::remote::reapi::{self, Client, Executed};
use crate::remote::session::worker_name;
use std::path::PathBuf;
use std::time::Duration;

/// For `doctor --remote`: the server's capabilities, and one tiny action executed (never from
/// the cache) with its latency; or what is wrong.
pub fn probe(options: &Options) -> Result<String, String> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| format!("start the remote client: {e}"))?;
    let target = options.target.clone();
    let platform = options.platform.clone();
    rt.block_on(async move {
        let start = std::time::Instant::now();
        let (mut client, caps) =
            tokio::time::timeout(Duration::from_secs(15), Client::connect(&target))
                .await
                .unwrap_or_else(|_| Err(format!("connect to {}: timed out", target.url)))?;
        let connected = start.elapsed().as_secs_f64();
        let text =
            format!(
            "{} (instance {:?}): REAPI {}, SHA-256 {}, execution {}, cache updates {}, max batch \
             {:.1} MB, connected in {:.3}s",
            target.url,
            target.instance,
            caps.api,
            if caps.sha256 { "yes" } else { "NO" },
            if caps.exec_enabled { "enabled" } else { "DISABLED" },
            if caps.cache_updates { "yes" } else { "no" },
            caps.max_batch as f64 / 1e6,
            connected
        );
        if !caps.sha256 || !caps.exec_enabled {
            return Err(text);
        }
        test_action(&mut client, platform, text).await
    })
}

/// Runs one small action on the server (`/bin/sh -c 'echo ... > doctor.txt'`, never cached):
/// `text` with its round trip added, or what went wrong.
async fn test_action(
    client: &mut Client,
    platform: Vec<(String, String)>,
    mut text: String,
) -> Result<String, String> {
    let common = Common {
        cwd: PathBuf::from("/"),
        root_is_slash: false,
        identity: "doctor".into(),
        platform,
        cache: false,
        by_content: false,
    };
    let argv = ["/bin/sh", "-c", "echo dtlto-bridge > doctor.txt"];
    let job = action::build(
        &common,
        &argv,
        &[],
        &["doctor.txt"],
        &|_| reapi::digest_of(b""),
        None,
    )?;
    client
        .batch_upload(job.blobs.clone())
        .await
        .map_err(|s| format!("{text}; upload a test action: {}", reapi::describe(&s)))?;
    let t = std::time::Instant::now();
    let r = match client.execute(&job.action_digest, true, None, |_| {}).await {
        Executed::Done(r) => r,
        Executed::Broken { status, .. } => {
            return Err(format!(
                "{text}; a test action failed: {}",
                reapi::describe(&status)
            ))
        }
        Executed::Ended { .. } => {
            return Err(format!(
                "{text}; a test action's stream ended before the action did"
            ))
        }
    };
    let worker = r
        .result
        .as_ref()
        .map(worker_name)
        .unwrap_or_else(|| "the worker".into());
    match (&r.status, &r.result) {
        (Some(s), _) if s.code != 0 => Err(format!(
            "{text}; a test action (/bin/sh -c 'echo ... > doctor.txt') failed: {}",
            s.message
        )),
        (_, Some(result)) if result.exit_code == 0 => {
            text.push_str(&format!(
                "; a test action's round trip took {:.2}s on {worker}",
                t.elapsed().as_secs_f64()
            ));
            Ok(text)
        }
        _ => Err(format!(
            "{text}; a test action (/bin/sh -c 'echo ... > doctor.txt') did not \
             succeed on {worker}"
        )),
    }
}
