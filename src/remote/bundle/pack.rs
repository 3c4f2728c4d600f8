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
    let shard_name = crate::job::files::shard_name(out);
    // Each input read and hashed once: the plan names modules by digest, the manifest lists it.
    let mut read: HashMap<PathBuf, (Vec<u8>, String)> = HashMap::new();
    let mut shard = None;
    for input in inputs {
        let data = std::fs::read(cwd.join(input)).map_err(|e| format!("read {input}: {e}"))?;
        if *input == shard_name {
            shard = Some(data);
        } else {
            let hash = crate::job::util::digest::sha256_hex(&data);
            read.insert(crate::remote::action::absolute(cwd, input), (data, hash));
        }
    }
    let shard =
        shard.ok_or_else(|| format!("its index shard {shard_name} is not among its inputs"))?;
    let hash_of = |p: &Path| match read.get(p) {
        Some((data, hash)) => (hash.clone(), data.len() as i64),
        None => (crate::job::util::digest::sha256_hex(&[]), 0),
    };
    let plan = crate::remote::action::content_files(cwd, words, &hash_of, &shard)?;
    let mut files: Vec<Entry> = Vec::with_capacity(plan.modules.len() + 1);
    let mut datas: Vec<&[u8]> = Vec::with_capacity(plan.modules.len() + 1);
    for (name, real) in &plan.modules {
        let (data, hash) = (read.get(real)).ok_or_else(|| format!("find the module {name}"))?;
        files.push(Entry::hashed(name.clone(), data, hash.clone()));
        datas.push(data);
    }
    files.push(Entry::new(plan.shard.0.clone(), &plan.shard.1));
    datas.push(&plan.shard.1);
    let manifest = Manifest {
        compiler: compiler.clone(),
        arguments: plan.arguments,
        output: plan.output,
        files,
    };
    let write = |file: std::fs::File| {
        let mut out = std::io::BufWriter::new(file);
        let size = format::write(&mut out, &manifest, &datas)?;
        std::io::Write::flush(&mut out)?;
        Ok::<u64, std::io::Error>(size)
    };
    (std::fs::File::create(to).and_then(write))
        .map_err(|e| format!("write the bundle {}: {e}", to.display()))
}
