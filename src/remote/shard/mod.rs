//! Shard: rewrites a ThinLTO index shard (the `*.thinlto.bc` file lld writes for each backend
//! job) so that a remote action names the job's modules by content and holds the same bytes
//! whatever names and order lld gave them in this link.
//!
//! It knows the layout lld 14 to 22 write: a MODULE_BLOCK holding a VERSION record, one
//! MODULE_STRTAB_BLOCK of ENTRY `[id, chars...]` and HASH `[5 x i32]` records, and the summary
//! block (summary.rs puts that one in order); then a STRTAB block. Anything else in or around
//! the module path table (a wrapper header, a BLOCKINFO block, a record code it does not know,
//! a second table, an offset record) is an error, never a guess; anything else in the module
//! block keeps the summaries and the modules' numbers as lld wrote them.

mod summary;

use crate::job::bitcode::bitstream::{Block, Entry, Reader, Record, Writer, ENTER_SUBBLOCK};
use crate::job::util::digest::Words;

use crate::job::bitcode::bitstream::{BLOCKINFO_BLOCK, MAGIC};
const MODULE_BLOCK: u64 = 8;
const MODULE_STRTAB_BLOCK: u64 = 19;
const GLOBALVAL_SUMMARY_BLOCK: u64 = 20;
const MODULE_CODE_VERSION: u64 = 1;
/// MODULE_CODE_VSTOFFSET: a word offset into the file, which a rewrite would break.
const MODULE_CODE_VSTOFFSET: u64 = 13;
const MST_CODE_ENTRY: u64 = 1;
const MST_CODE_HASH: u64 = 2;

/// A module of the module path table: its id, path and hash (five 32-bit words, kept as read).
#[derive(Debug, Clone, PartialEq, Eq)]
struct Module {
    id: u64,
    path: String,
    hash: Option<Vec<u64>>,
}

/// Where the module path table and the summary block are in the file, and the modules.
#[derive(Debug)]
struct Table {
    /// Byte offset of the MODULE_BLOCK's length word.
    module_len_at: usize,
    strtab: Block,
    summary: Option<Block>,
    /// The first block or record of the module block that is neither of those nor its
    /// version, which could name modules by their numbers.
    other: Option<String>,
    modules: Vec<Module>,
}

/// The module paths a shard names, in its order.
#[cfg(test)]
pub fn module_paths(shard: &[u8]) -> Result<Vec<String>, String> {
    Ok(ModuleTable::read(shard)?.paths())
}

/// A shard with its module path table read (once: for its paths, then for its rewrite).
pub struct ModuleTable<'a> {
    shard: &'a [u8],
    table: Table,
}

impl<'a> ModuleTable<'a> {
    /// The shard's module path table; an error when its layout is not the one this module knows.
    pub fn read(shard: &'a [u8]) -> Result<ModuleTable<'a>, String> {
        Ok(ModuleTable {
            shard,
            table: read_table(shard)?,
        })
    }

    /// The module paths the shard names, in its order.
    pub fn paths(&self) -> Vec<String> {
        self.table.modules.iter().map(|m| m.path.clone()).collect()
    }

    /// The rewrite of the shard with each module path `p` renamed `rename(p)`: an error when
    /// `rename` has no name for a path, or gives two modules one name.
    pub fn plan(self, rename: &dyn Fn(&str) -> Option<String>) -> Result<Plan<'a>, String> {
        let ModuleTable { shard, table } = self;
        let mut modules = Vec::with_capacity(table.modules.len());
        let mut seen = std::collections::HashSet::new();
        for m in &table.modules {
            let path = rename(&m.path).ok_or_else(|| format!("no name for module {}", m.path))?;
            if !seen.insert(path.clone()) {
                return Err(format!("two modules would be named {path}"));
            }
            modules.push(Module { path, ..m.clone() });
        }
        // lld numbers the modules by their old names (19, 22) or their place in the link (14).
        modules.sort_by(|a, b| a.path.cmp(&b.path));
        let numbers: summary::Ids = modules
            .iter()
            .enumerate()
            .map(|(new, m)| (m.id, new as u64))
            .collect();
        if numbers.len() != modules.len() {
            return Err("two modules with one id".into());
        }
        let summary = match (&table.other, table.summary) {
            (Some(other), _) => Err(format!("the module block holds {other}")),
            (None, None) => Err("no summary block".into()),
            (None, Some(s)) => summary::canonical(&shard[s.len_at + 4..s.end], s.width, &numbers)
                .map(|canonical| (s, canonical))
                .map_err(|e| format!("read the summary block: {e}")),
        };
        if summary.is_ok() {
            for m in &mut modules {
                m.id = numbers[&m.id];
            }
        }
        Ok(Plan {
            shard,
            table,
            modules,
            summary,
        })
    }
}

/// A rewritten shard, and why its summaries are as lld wrote them (when they are).
#[derive(Debug)]
pub struct Renamed {
    pub bytes: Vec<u8>,
    pub summaries_kept: Option<String>,
}

/// The shard with each module path `p` replaced by `rename(p)`, the modules numbered in the
/// order of their new names, and the summary block in the canonical order summary.rs gives.
/// The summary block and the modules' numbers are kept as lld wrote them, and
/// `summaries_kept` says why, when summary.rs cannot be sure of the block or the module block
/// holds something else that could number modules. An error when the module table's layout
/// is not the one this module knows, or when `rename` has no name for a path.
#[cfg(test)]
pub fn rename(shard: &[u8], rename: &dyn Fn(&str) -> Option<String>) -> Result<Renamed, String> {
    ModuleTable::read(shard)?.plan(rename)?.finish()
}

/// A rewrite of a shard, read but not written: its module table renamed, and its summary
/// block read and put in canonical order (or why it is kept as lld wrote it).
pub struct Plan<'a> {
    shard: &'a [u8],
    table: Table,
    /// The modules renamed, in the order of their new names, with their new ids (lld's when
    /// the summary block is kept).
    modules: Vec<Module>,
    summary: Result<(Block, summary::Canonical), String>,
}

impl Plan<'_> {
    /// What the rewritten shard is made of, as a digest (BLAKE3), without writing it: every
    /// byte of the shard but its module path table, its summary block and their enclosing
    /// blocks' length words; the renamed table; the summary block in canonical form (or as
    /// lld wrote it, when kept). Two shards with the same identity are rewritten to the same
    /// bytes, whatever paths, module numbers, value numbers and summary order lld gave them.
    pub fn identity(&self) -> String {
        let (shard, t) = (self.shard, &self.table);
        let mut h = Words::default();
        h.word("dtlto-bridge shard rewrite 2");
        h.bytes(&shard[..t.module_len_at]);
        h.bytes(&shard[t.module_len_at + 4..t.strtab.len_at]);
        match &self.summary {
            Ok((s, canonical)) => {
                h.word("canonical");
                h.bytes(&shard[t.strtab.end..s.len_at]);
                canonical.identity(&mut h);
                h.bytes(&shard[s.end..]);
            }
            Err(_) => {
                h.word("kept");
                h.bytes(&shard[t.strtab.end..]);
            }
        }
        h.bytes(&t.strtab.width.to_le_bytes());
        for m in &self.modules {
            h.bytes(&m.id.to_le_bytes());
            h.word(&m.path);
            let hash = m.hash.as_deref().unwrap_or_default();
            h.bytes(
                &hash
                    .iter()
                    .flat_map(|w| w.to_le_bytes())
                    .collect::<Vec<u8>>(),
            );
        }
        h.finish()
    }

    /// The rewritten shard: the modules renamed and numbered in the order of their new names,
    /// the summary block in canonical form (see the module's documentation).
    pub fn finish(self) -> Result<Renamed, String> {
        let Plan {
            shard,
            table,
            modules,
            summary,
        } = self;
        let mut w = Writer::default();
        for m in &modules {
            let mut ops = vec![m.id];
            ops.extend(m.path.bytes().map(u64::from));
            w.unabbreviated(table.strtab.width, MST_CODE_ENTRY, &ops);
            if let Some(words) = &m.hash {
                w.unabbreviated(table.strtab.width, MST_CODE_HASH, words);
            }
        }
        w.end_block(table.strtab.width);
        let mut splices = vec![(table.strtab, w.into_bytes())];
        let summaries_kept = match summary {
            Ok((s, canonical)) => {
                splices.push((s, canonical.write(s.end - s.len_at)));
                None
            }
            Err(why) => Some(why),
        };
        let bytes = splice(shard, table.module_len_at, splices)?;
        // Read back what was written: the same modules, renamed. (The summary block's records
        // are written by the writer the bitstream's tests read back, any records of any
        // width.)
        let back = read_table(&bytes)?;
        if back.modules != modules {
            return Err("the rewritten table does not read back".into());
        }
        Ok(Renamed {
            bytes,
            summaries_kept,
        })
    }
}

/// The file with each block's body replaced (blocks in file order, none inside another), its
/// length word and the enclosing MODULE_BLOCK's length word set to match.
fn splice(
    shard: &[u8],
    module_len_at: usize,
    mut blocks: Vec<(Block, Vec<u8>)>,
) -> Result<Vec<u8>, String> {
    blocks.sort_by_key(|(span, _)| span.len_at);
    let mut out = Vec::with_capacity(shard.len() * 2);
    let mut from = 0;
    let mut delta: i64 = 0;
    for (span, body) in &blocks {
        out.extend_from_slice(&shard[from..span.len_at]);
        out.extend_from_slice(&((body.len() / 4) as u32).to_le_bytes());
        out.extend_from_slice(body);
        from = span.end;
        delta += (body.len() / 4) as i64 - ((span.end - span.len_at - 4) / 4) as i64;
    }
    out.extend_from_slice(&shard[from..]);
    let at = module_len_at;
    let words = u32::from_le_bytes(out[at..at + 4].try_into().expect("4 bytes"));
    let words: u32 = (i64::from(words) + delta)
        .try_into()
        .map_err(|_| "the module block's length does not fit".to_string())?;
    out[at..at + 4].copy_from_slice(&words.to_le_bytes());
    Ok(out)
}

fn read_table(shard: &[u8]) -> Result<Table, String> {
    if shard.get(..4) != Some(&MAGIC[..]) {
        return Err("not a raw bitcode file (no 'BC' 0xC0DE magic)".into());
    }
    let mut r = Reader {
        bytes: shard,
        bit: 32,
    };
    let mut found = None;
    while r.bit / 8 < shard.len() {
        // Top level: abbreviation width 2, only blocks.
        let id = r.fixed(2)?;
        if id != ENTER_SUBBLOCK {
            return Err(format!("unexpected abbreviation {id} at the top level"));
        }
        let block = r.enter()?;
        let end = block.end;
        match block.id {
            BLOCKINFO_BLOCK => return Err("a BLOCKINFO block (not written in shards)".into()),
            MODULE_BLOCK => {
                if found.is_some() {
                    return Err("two module blocks".into());
                }
                found = Some(module_block(&mut r, block)?);
            }
            _ => r.bit = end * 8,
        }
        if r.bit != end * 8 {
            return Err(format!(
                "block {} does not end where its length says",
                block.id
            ));
        }
    }
    found.ok_or_else(|| "no module path table".to_string())
}

fn module_block(r: &mut Reader, module: Block) -> Result<Table, String> {
    let mut table: Option<(Block, Vec<Module>)> = None;
    let mut summary = None;
    let mut other = None;
    r.walk(module.width, Vec::new(), |r, entry| {
        match entry {
            Entry::Block(block) => match block.id {
                BLOCKINFO_BLOCK => return Err("a BLOCKINFO block (not written in shards)".into()),
                MODULE_STRTAB_BLOCK if table.is_some() => {
                    return Err("two module path tables".into())
                }
                MODULE_STRTAB_BLOCK => {
                    let records = r.records(block.width, "module path table")?;
                    if r.bit != block.end * 8 {
                        return Err(
                            "the module path table does not end where its length says".into()
                        );
                    }
                    table = Some((block, modules(records)?));
                }
                GLOBALVAL_SUMMARY_BLOCK if summary.is_some() => {
                    return Err("two summary blocks".into())
                }
                GLOBALVAL_SUMMARY_BLOCK => summary = Some(block),
                id => {
                    other.get_or_insert(format!("block {id}"));
                }
            },
            Entry::Record(record) => match record.code {
                MODULE_CODE_VERSION => {}
                MODULE_CODE_VSTOFFSET => {
                    return Err(
                        "a value symbol table offset (a per-module file, not a shard)".into(),
                    )
                }
                code => {
                    other.get_or_insert(format!("record code {code}"));
                }
            },
        }
        Ok(())
    })?;
    let end = module.end;
    if r.bit != end * 8 {
        return Err("the module block does not end where its length says".into());
    }
    let (strtab, modules) =
        table.ok_or_else(|| "no module path table in the module block".to_string())?;
    if summary.is_some_and(|s| s.len_at < strtab.end) {
        return Err("the summary block before the module path table".into());
    }
    Ok(Table {
        module_len_at: module.len_at,
        strtab,
        summary,
        other,
        modules,
    })
}

/// The module path table's records as modules, each ENTRY with the HASH that follows it.
fn modules(records: Vec<Record>) -> Result<Vec<Module>, String> {
    let mut modules: Vec<Module> = Vec::new();
    for Record { code, ops, blob } in records {
        match code {
            MST_CODE_ENTRY if !ops.is_empty() && !blob => {
                let bytes = ops[1..]
                    .iter()
                    .map(|&c| u8::try_from(c).map_err(|_| "a path character over 255"))
                    .collect::<Result<Vec<u8>, _>>()?;
                let path = String::from_utf8(bytes)
                    .map_err(|_| "a module path that is not UTF-8".to_string())?;
                modules.push(Module {
                    id: ops[0],
                    path,
                    hash: None,
                });
            }
            MST_CODE_HASH if ops.len() == 5 => match modules.last_mut() {
                Some(m @ Module { hash: None, .. }) => m.hash = Some(ops),
                _ => return Err("a module hash without its module".into()),
            },
            code => {
                return Err(format!(
                    "record code {code} with {} operands in the module path table",
                    ops.len()
                ))
            }
        }
    }
    Ok(modules)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    /// A shard clang-22/lld-22 wrote for examples/hello's main.o, with a regular archive's
    /// members named by lld (pid 0x2481).
    const SHARD: &[u8] = include_bytes!("../../../tests/data/main.thinlto.bc");

    #[test]
    fn a_real_shard_is_read_and_renamed_and_reads_back() {
        let paths = module_paths(SHARD).unwrap();
        assert_eq!(
            paths,
            [
                "add.o",
                "greeting.o",
                "libmul.a(mul.o at 92).4.2481.o",
                "libmul.a(sq.o at 2812).5.2481.o",
                "main.o"
            ]
        );
        let renamed = rename(SHARD, &|p| Some(format!("m/{}.o", p.len()))).unwrap();
        assert_eq!(renamed.summaries_kept, None);
        let renamed = renamed.bytes;
        // In the order of the new names.
        assert_eq!(
            module_paths(&renamed).unwrap(),
            ["m/10.o", "m/30.o", "m/31.o", "m/5.o", "m/6.o"]
        );
        // Whatever order the old names gave, the same bytes.
        let reversed = rename(SHARD, &|p| Some(format!("z/{}", 100 - p.len()))).unwrap();
        let back = rename(&reversed.bytes, &|p| {
            let n: usize = p[2..].parse().unwrap();
            Some(format!("m/{}.o", 100 - n))
        })
        .unwrap();
        assert_eq!(back.bytes, renamed);
        // The STRTAB block after the module block is unchanged.
        let tail = &SHARD[SHARD.len() - 16..];
        assert!(renamed.ends_with(tail));
        let again = rename(&renamed, &|p| Some(p.to_string())).unwrap();
        assert_eq!(again.bytes, renamed);
        // No name for a module, or two modules under one name: refused.
        assert!(rename(SHARD, &|p| (p != "main.o").then(|| p.to_string())).is_err());
        assert!(rename(SHARD, &|_| Some("same.o".into()))
            .unwrap_err()
            .contains("two modules"));
    }

    /// examples/hello's main job as lld 14, 19 and 22 wrote it (`--thinlto-index-only`) in two
    /// links of the same objects under other names, in the opposite order: `a` names main,
    /// add, greeting, mul and sq `a1.o` to `a5.o`, `b` names them `b5.o` to `b1.o`, and lld
    /// numbered the values of each pair differently.
    const PAIRS: [(u32, &[u8], &[u8]); 3] = [
        (
            14,
            include_bytes!("../../../tests/data/main-14-a.thinlto.bc"),
            include_bytes!("../../../tests/data/main-14-b.thinlto.bc"),
        ),
        (
            19,
            include_bytes!("../../../tests/data/main-19-a.thinlto.bc"),
            include_bytes!("../../../tests/data/main-19-b.thinlto.bc"),
        ),
        (
            22,
            include_bytes!("../../../tests/data/main-22-a.thinlto.bc"),
            include_bytes!("../../../tests/data/main-22-b.thinlto.bc"),
        ),
    ];

    #[test]
    fn one_job_of_two_links_gives_the_same_shard_on_llvm_14_19_and_22() {
        const MODULES: [&str; 5] = ["main", "add", "greeting", "mul", "sq"];
        for (version, a, b) in PAIRS {
            assert_ne!(a, b, "{version}");
            let names = |prefix: char, number: fn(usize) -> usize| -> HashMap<String, String> {
                (MODULES.iter().enumerate())
                    .map(|(i, m)| (format!("{prefix}{}.o", number(i)), format!("m/{m}.o")))
                    .collect()
            };
            let (in_a, in_b) = (names('a', |i| i + 1), names('b', |i| 5 - i));
            // The same identity, found without writing either (lld numbered their modules and
            // values otherwise).
            let plan = |shard, names: &HashMap<String, String>| {
                let table = ModuleTable::read(shard).unwrap();
                table.plan(&|p| names.get(p).cloned()).unwrap()
            };
            let (plan_a, plan_b) = (plan(a, &in_a), plan(b, &in_b));
            assert_eq!(plan_a.identity(), plan_b.identity(), "{version}");
            let elsewhere: HashMap<String, String> = in_a
                .iter()
                .map(|(k, v)| (k.clone(), format!("n/{v}")))
                .collect();
            assert_ne!(plan_a.identity(), plan(a, &elsewhere).identity());
            assert_eq!(
                plan_a.finish().unwrap().bytes,
                plan_b.finish().unwrap().bytes
            );
            let a = rename(a, &|p| in_a.get(p).cloned()).unwrap();
            let b = rename(b, &|p| in_b.get(p).cloned()).unwrap();
            assert_eq!(a.summaries_kept, None, "{version}");
            assert_eq!(b.summaries_kept, None, "{version}");
            assert!(a.bytes == b.bytes, "{version}: the shards differ");
        }
    }

    #[test]
    fn summaries_it_does_not_know_are_kept_as_lld_wrote_them_and_say_why() {
        // b.c's job of a `-fsanitize=cfi-icall` link (lld-22): a type test before a function.
        const CFI: &[u8] = include_bytes!("../../../tests/data/cfi.thinlto.bc");
        assert_eq!(module_paths(CFI).unwrap(), ["b.o"]);
        let renamed = rename(CFI, &|_| Some("m/b.o".into())).unwrap();
        assert_eq!(module_paths(&renamed.bytes).unwrap(), ["m/b.o"]);
        let why = renamed.summaries_kept.unwrap();
        assert!(
            why.starts_with("read the summary block: record code 11 (type tests"),
            "{why}"
        );
        // The summary block and everything after it as lld wrote them.
        let table = read_table(CFI).unwrap();
        let summary = table.summary.unwrap();
        let moved = read_table(&renamed.bytes).unwrap().summary.unwrap();
        assert_eq!(
            &renamed.bytes[moved.len_at..],
            &CFI[summary.len_at..],
            "the summary block and what follows"
        );
    }

    #[test]
    fn what_is_not_a_shard_is_refused() {
        assert!(module_paths(b"").is_err());
        assert!(module_paths(b"\x7fELF....").unwrap_err().contains("magic"));
        // The magic and then a block that runs past the end.
        let mut bytes = MAGIC.to_vec();
        let mut w = Writer::default();
        w.fixed(ENTER_SUBBLOCK, 2);
        w.vbr(MODULE_BLOCK, 8);
        w.vbr(3, 4);
        w.align32();
        w.fixed(1000, 32);
        bytes.extend(w.into_bytes());
        assert!(module_paths(&bytes).unwrap_err().contains("past the end"));
    }
}
