//! Entry: the link's own entry in the action cache — one key made of every job's action, whose
//! result names every job's outputs (`INDEX/PATH`), so that a relink asks one question first.
//!
//! It knows the entry's layout and how it is written; it does not decide when (the runner does:
//! every job's outputs held by the server, none from the disk cache, the entry not already the
//! answer) or read it (the lookup does).

use super::action::JobAction;
use super::reapi::{digest_of, Client};
use bazel_remote_apis::build::bazel::remote::execution::v2 as re;

/// The link entry's command; a new layout takes a new number.
const ENTRY: [&str; 3] = ["dtlto-bridge", "link-entry", "1"];
/// The largest link entry written: servers take gRPC messages of 4 MiB by default.
const MAX_ENTRY: usize = 3 << 20;
/// The link entry's action digest, and its messages: an Action whose input root holds every
/// job's Action, by its index in the job file (servers read the Action of an action-cache
/// key). None when some job has no action.
pub(super) fn entry_key(jobs: &[Option<JobAction>]) -> Option<Entry> {
    use prost::Message;
    let width = jobs.len().to_string().len();
    let files = jobs
        .iter()
        .enumerate()
        .map(|(i, job)| {
            Some(re::FileNode {
                // Zero-padded, so the names are sorted as the protocol wants.
                name: format!("{i:0width$}"),
                digest: Some(job.as_ref()?.action_digest.clone()),
                ..Default::default()
            })
        })
        .collect::<Option<Vec<_>>>()?;
    let root = re::Directory {
        files,
        ..Default::default()
    }
    .encode_to_vec();
    let command = re::Command {
        arguments: ENTRY.iter().map(|w| w.to_string()).collect(),
        ..Default::default()
    }
    .encode_to_vec();
    let action = re::Action {
        command_digest: Some(digest_of(&command)),
        input_root_digest: Some(digest_of(&root)),
        ..Default::default()
    }
    .encode_to_vec();
    let key = digest_of(&action);
    let blobs = [command, root, action]
        .into_iter()
        .map(|b| (digest_of(&b), b))
        .collect();
    Some(Entry { key, blobs })
}

/// The link's entry in the action cache: its key, and the messages the key is the digest of.
pub(super) struct Entry {
    pub(super) key: re::Digest,
    blobs: Vec<(re::Digest, Vec<u8>)>,
}

/// Writes the link's entry, naming each job's outputs as the server holds them (`results`),
/// when every job has them and the entry is not too large.
pub(super) async fn remember(
    client: &Client,
    entry: &Entry,
    results: &[Option<Vec<re::OutputFile>>],
) -> Result<(), tonic::Status> {
    let Entry { key, blobs } = entry;
    let output_files: Option<Vec<re::OutputFile>> = results
        .iter()
        .enumerate()
        .map(|(i, files)| {
            Some(files.as_ref()?.iter().map(move |f| re::OutputFile {
                path: format!("{i}/{}", f.path),
                ..f.clone()
            }))
        })
        .collect::<Option<Vec<_>>>()
        .map(|jobs| jobs.into_iter().flatten().collect());
    let Some(output_files) = output_files else {
        return Ok(());
    };
    let result = re::ActionResult {
        output_files,
        exit_code: 0,
        ..Default::default()
    };
    if prost::Message::encoded_len(&result) > MAX_ENTRY {
        return Ok(());
    }
    let mut client = client.clone();
    // Its messages in as few batch calls as the server's limit allows (one, but for links of
    // thousands of jobs), then the update: two round trips while lld waits.
    let (small, large): (Vec<_>, Vec<_>) =
        blobs.iter().partition(|(_, b)| client.batchable(b.len()));
    let what = |s: tonic::Status| {
        let message = format!("upload the link's action: {}", s.message());
        tonic::Status::new(s.code(), message)
    };
    client
        .batch_upload(small.into_iter().cloned().collect())
        .await
        .map_err(what)?;
    for (digest, bytes) in large {
        client.stream_upload(digest, bytes).await.map_err(what)?;
    }
    client.update_result(key, result).await
}
