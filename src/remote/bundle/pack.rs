//! Pack: one job of the link as a bundle, named as its content-keyed REAPI action names its
//! files (`remote::action::content_files`: modules by digest, the index shard rewritten to
//! match, the object under a fixed name), so a bundle and an action are one plan of a job.
//!
//! It reads the job's files; it does not know where the bundle goes.

use super::format::{self, Compiler, Entry, Manifest};
use std::collections::HashMap;
use std::path::{Path, PathBuf};

/// Writes job `words` (run in `cwd`) as a bundle to `to`; its size, or why the job cannot be
/// one (a job remote::action keys by names only, an input that cannot be read).
pub fn pack(
    cwd: &Path,
    words: [&[&str]; 3],
    compiler: &Compiler,
    to: &Path,
) -> Result<u64, String> {
    let [_, inputs, outputs] = words;
    let [out] = outputs else {
        return Err(format!("it has {} outputs, not one", outputs.len()));
    };
    let shard_name = crate::job::output::shard_name(out);
    let mut bytes: HashMap<PathBuf, Vec<u8>> = HashMap::new();
    let mut shard = None;
    for input in inputs {
        let path = crate::remote::action::absolute(cwd, input);
        let data = std::fs::read(cwd.join(input)).map_err(|e| format!("read {input}: {e}"))?;
        if *input == shard_name {
            shard = Some(data);
        } else {
            bytes.insert(path, data);
        }
    }
    let shard =
        shard.ok_or_else(|| format!("its index shard {shard_name} is not among its inputs"))?;
    let hash_of = |p: &Path| {
        let data = bytes.get(p).map(Vec::as_slice).unwrap_or_default();
        (crate::util::fsutil::sha256_hex(data), data.len() as i64)
    };
    let plan = crate::remote::action::content_files(cwd, words, &hash_of, &shard)?;
    let mut files: Vec<(String, &[u8])> = Vec::with_capacity(plan.modules.len() + 1);
    for (name, real) in &plan.modules {
        files.push((
            name.clone(),
            bytes.get(real).map(Vec::as_slice).unwrap_or_default(),
        ));
    }
    files.push((plan.shard.0.clone(), &plan.shard.1));
    files.sort_by(|a, b| a.0.cmp(&b.0));
    let manifest = Manifest {
        compiler: compiler.clone(),
        arguments: plan.arguments,
        output: plan.output,
        files: files
            .iter()
            .map(|(n, b)| Entry::new(n.clone(), b))
            .collect(),
    };
    let datas: Vec<&[u8]> = files.iter().map(|(_, b)| *b).collect();
    let mut buf = Vec::new();
    format::write(&mut buf, &manifest, &datas).map_err(|e| format!("pack: {e}"))?;
    std::fs::write(to, &buf).map_err(|e| format!("write the bundle {}: {e}", to.display()))?;
    Ok(buf.len() as u64)
}
