//! Summary: puts the summary block of a ThinLTO index shard (GLOBALVAL_SUMMARY_BLOCK) in a
//! canonical form. lld numbers the block's values and orders its records in an order that
//! follows the modules' names; the same summaries under other names must give the same bytes.
//!
//! Values are renumbered in the order of their GUIDs, modules as the caller numbered them, and
//! the summaries written in the order (module, value), aliases last (the reader looks up an
//! alias's aliasee among the summaries already read). It knows the records of the summary
//! versions LLVM 14 to 22 write into a shard when nothing but plain ThinLTO is in use
//! (values, functions, variables, aliases, original names, the block count). Any other record
//! (type tests, parameter accesses, memory profiles, CFI) or another version is an error: the
//! caller then keeps the block as lld wrote it. It does not know what a summary means, and
//! relies on what LLVM's reader does: values and modules are numbered only within the file,
//! and a backend does not depend on the order of the summaries.

use crate::job::bitcode::bitstream::{Reader, Record, Writer};
use crate::job::util::digest::Words;

/// Ids, old to new: a shard's modules', or its summaries' values'.
pub type Ids = rustc_hash::FxHashMap<u64, u64>;

const FS_COMBINED: u64 = 4;
const FS_COMBINED_PROFILE: u64 = 5;
const FS_COMBINED_GLOBALVAR_INIT_REFS: u64 = 6;
const FS_COMBINED_ALIAS: u64 = 8;
const FS_COMBINED_ORIGINAL_NAME: u64 = 9;
const FS_VERSION: u64 = 10;
const FS_VALUE_GUID: u64 = 16;
const FS_FLAGS: u64 = 20;
const FS_BLOCK_COUNT: u64 = 24;
/// The record codes this module knows.
const KNOWN: [u64; 9] = [
    FS_COMBINED,
    FS_COMBINED_PROFILE,
    FS_COMBINED_GLOBALVAR_INIT_REFS,
    FS_COMBINED_ALIAS,
    FS_COMBINED_ORIGINAL_NAME,
    FS_VERSION,
    FS_VALUE_GUID,
    FS_FLAGS,
    FS_BLOCK_COUNT,
];

/// The summary versions whose records this module knows, read in LLVM's writer and reader:
/// LLVM 14 to 18 write 9, 19 writes 10, 20 to 22 write 12. (11 was written only by
/// development builds between 19 and 20.)
const VERSIONS: [u64; 3] = [9, 10, 12];

/// One summary (a function, variable or alias in one module) with the original-name records
/// that follow it.
struct Summary {
    record: Record,
    names: Vec<Record>,
}

/// A summary block in canonical form, read and put in order but not yet written.
pub struct Canonical {
    width: u32,
    block: Block,
}

/// The block whose body (what follows its length word) is `body`, read and put in canonical
/// form, its modules renumbered by `modules` (old id → new id); an error names the first thing
/// it does not know.
pub fn canonical(body: &[u8], width: u32, modules: &Ids) -> Result<Canonical, String> {
    let mut r = Reader {
        bytes: body,
        bit: 0,
    };
    let records = r.records(width, "summary block")?;
    if r.bit != body.len() * 8 {
        return Err("the summary block does not end where its length says".into());
    }
    let version = match records.first() {
        Some(Record {
            code: FS_VERSION,
            ops,
            ..
        }) if ops.len() == 1 => ops[0],
        _ => return Err("the summary block does not start with its version".into()),
    };
    if !VERSIONS.contains(&version) {
        return Err(format!(
            "summary version {version} is not one whose records are known ({VERSIONS:?})"
        ));
    }
    let mut block = Block::sort(records, version)?;
    // Values in the order of their GUIDs, from 1 as LLVM numbers them.
    block.guids.sort_unstable_by_key(|(guid, _)| *guid);
    if let Some(w) = block.guids.windows(2).find(|w| w[0].0 == w[1].0) {
        return Err(format!("GUID {} twice", w[0].0));
    }
    let mut values = Ids::default();
    for (new, (_, record)) in block.guids.iter_mut().enumerate() {
        if values.insert(record.ops[0], new as u64 + 1).is_some() {
            return Err(format!("value id {} twice", record.ops[0]));
        }
        record.ops[0] = new as u64 + 1;
    }
    for s in &mut block.summaries {
        renumber(&mut s.record, &values, modules)?;
    }
    let key = |s: &Summary| {
        let ops = &s.record.ops;
        (s.record.code == FS_COMBINED_ALIAS, ops[1], ops[0])
    };
    // Each key once (checked next), so an unstable sort gives one order.
    block.summaries.sort_unstable_by_key(key);
    if block.summaries.windows(2).any(|w| key(&w[0]) == key(&w[1])) {
        return Err("two summaries of one value in one module".into());
    }
    Ok(Canonical { width, block })
}

impl Canonical {
    /// The records in the order they are written.
    fn records(&self) -> impl Iterator<Item = &Record> {
        let b = &self.block;
        (b.header.iter())
            .chain(b.guids.iter().map(|(_, record)| record))
            .chain((b.summaries.iter()).flat_map(|s| std::iter::once(&s.record).chain(&s.names)))
            .chain(&b.counts)
    }

    /// Feeds `h` what the written block is made of (its width, and each record's code,
    /// operand count and operands, each number as LEB128), without writing it: the same bytes
    /// fed, the same block written.
    pub fn identity(&self, h: &mut Words) {
        let mut bytes: Vec<u8> = Vec::with_capacity(4096);
        let mut number = |mut n: u64| loop {
            let low = (n & 0x7f) as u8;
            n >>= 7;
            if n == 0 {
                bytes.push(low);
                break;
            }
            bytes.push(low | 0x80);
        };
        number(u64::from(self.width));
        for record in self.records() {
            number(record.code);
            number(record.ops.len() as u64);
            record.ops.iter().for_each(|&op| number(op));
        }
        h.bytes(&bytes);
    }

    /// The block's body, written (what follows its length word).
    pub fn write(&self, capacity: usize) -> Vec<u8> {
        let mut w = Writer::with_capacity(capacity);
        for record in self.records() {
            w.unabbreviated(self.width, record.code, &record.ops);
        }
        w.end_block(self.width);
        w.into_bytes()
    }
}

/// The records of a summary block, sorted by what they hold.
struct Block {
    header: Vec<Record>,
    /// Each value's GUID and record.
    guids: Vec<(u64, Record)>,
    summaries: Vec<Summary>,
    counts: Vec<Record>,
}

impl Block {
    /// Sorts `records`, which must come in the order LLVM writes them.
    fn sort(records: Vec<Record>, version: u64) -> Result<Block, String> {
        let mut b = Block {
            header: Vec::new(),
            guids: Vec::new(),
            summaries: Vec::new(),
            counts: Vec::new(),
        };
        for record in records {
            let code = record.code;
            if record.blob {
                return Err(format!("record code {code} ({}) holds a blob", name(code)));
            }
            match code {
                FS_VERSION | FS_FLAGS if b.guids.is_empty() && b.summaries.is_empty() => {
                    b.header.push(record)
                }
                FS_VALUE_GUID if b.summaries.is_empty() => {
                    b.guids.push((guid(&record.ops, version)?, record));
                }
                FS_COMBINED
                | FS_COMBINED_PROFILE
                | FS_COMBINED_GLOBALVAR_INIT_REFS
                | FS_COMBINED_ALIAS
                    if b.counts.is_empty() =>
                {
                    b.summaries.push(Summary {
                        record,
                        names: Vec::new(),
                    })
                }
                FS_COMBINED_ORIGINAL_NAME if b.counts.is_empty() => b
                    .summaries
                    .last_mut()
                    .ok_or("an original name before any summary")?
                    .names
                    .push(record),
                FS_BLOCK_COUNT => b.counts.push(record),
                code if KNOWN.contains(&code) => {
                    return Err(format!("record code {code} ({}) out of place", name(code)))
                }
                _ => {
                    return Err(format!(
                        "record code {code} ({}) is not supported",
                        name(code)
                    ))
                }
            }
        }
        Ok(b)
    }
}

/// What a record code of the summary block holds, for messages (LLVMBitCodes.h).
fn name(code: u64) -> &'static str {
    match code {
        FS_COMBINED | FS_COMBINED_PROFILE => "a function",
        FS_COMBINED_GLOBALVAR_INIT_REFS => "a variable",
        FS_COMBINED_ALIAS => "an alias",
        FS_COMBINED_ORIGINAL_NAME => "an original name",
        FS_VERSION => "the version",
        FS_FLAGS => "the flags",
        FS_VALUE_GUID => "a value's GUID",
        FS_BLOCK_COUNT => "the block count",
        11..=15 => "type tests, for CFI or devirtualization",
        17 | 18 => "CFI functions",
        21 | 22 => "a type id",
        25 => "parameter accesses",
        28..=33 => "memory profile",
        _ => "unknown",
    }
}

/// A VALUE_GUID record's GUID: `[id, guid]` up to version 10, `[id, high, low]` from 11 on.
fn guid(ops: &[u64], version: u64) -> Result<u64, String> {
    match *ops {
        [_, guid] if version <= 10 => Ok(guid),
        [_, high, low] if version >= 11 && high >> 32 == 0 && low >> 32 == 0 => {
            Ok(high << 32 | low)
        }
        _ => Err(format!(
            "a value GUID record of {} operands in version {version}",
            ops.len()
        )),
    }
}

/// A summary record with its value ids and module id renumbered. Layouts (value ids marked):
/// - function, `[*value, module, flags, instructions, function flags, entry count, refs,
///   read-only refs, write-only refs, refs x *value, calls x (*value[, hotness])]`, a call
///   with its hotness in FS_COMBINED_PROFILE;
/// - variable, `[*value, module, flags, variable flags, refs x *value]`;
/// - alias, `[*value, module, flags, *aliasee]` (aliasee 0: not in the shard, kept).
fn renumber(record: &mut Record, values: &Ids, modules: &Ids) -> Result<(), String> {
    let code = record.code;
    let len = record.ops.len();
    let wrong = || format!("record code {code} ({}) of {len} operands", name(code));
    // The positions that hold value ids: the summary's own (0), a run of references, and
    // calls every `stride` operands.
    let (refs, calls, stride) = match code {
        FS_COMBINED | FS_COMBINED_PROFILE => {
            let refs = record.ops.get(6).ok_or_else(wrong)?;
            let calls_at = usize::try_from(*refs)
                .ok()
                .and_then(|r| r.checked_add(9))
                .filter(|at| *at <= len)
                .ok_or_else(wrong)?;
            let stride = if code == FS_COMBINED_PROFILE { 2 } else { 1 };
            if !(len - calls_at).is_multiple_of(stride) {
                return Err(wrong());
            }
            (9..calls_at, calls_at..len, stride)
        }
        FS_COMBINED_GLOBALVAR_INIT_REFS if len >= 4 => (4..len, len..len, 1),
        // LLVM 22 writes aliasee 0 for an alias whose aliasee is not in the shard.
        FS_COMBINED_ALIAS if len == 4 && record.ops[3] == 0 => (len..len, len..len, 1),
        FS_COMBINED_ALIAS if len == 4 => (3..4, len..len, 1),
        _ => return Err(wrong()),
    };
    for at in std::iter::once(0).chain(refs).chain(calls.step_by(stride)) {
        let v = record.ops[at];
        record.ops[at] = *values
            .get(&v)
            .ok_or_else(|| format!("value id {v} without a GUID in record code {code}"))?;
    }
    let m = record.ops[1];
    record.ops[1] = *modules
        .get(&m)
        .ok_or_else(|| format!("module id {m} not in the module path table"))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(code: u64, ops: &[u64]) -> Record {
        Record {
            code,
            ops: ops.to_vec(),
            blob: false,
        }
    }

    /// The positions of value ids as the first version of `renumber` listed them, one Vec per
    /// record: None where it refused the record.
    fn positions_listed(code: u64, ops: &[u64]) -> Option<Vec<usize>> {
        let len = ops.len();
        Some(match code {
            FS_COMBINED | FS_COMBINED_PROFILE => {
                let refs = usize::try_from(*ops.get(6)?).ok()?;
                let at = refs.checked_add(9).filter(|a| *a <= len)?;
                let stride = if code == FS_COMBINED_PROFILE { 2 } else { 1 };
                if !(len - at).is_multiple_of(stride) {
                    return None;
                }
                std::iter::once(0)
                    .chain(9..at)
                    .chain((at..len).step_by(stride))
                    .collect()
            }
            FS_COMBINED_GLOBALVAR_INIT_REFS if len >= 4 => {
                std::iter::once(0).chain(4..len).collect()
            }
            FS_COMBINED_ALIAS if len == 4 && ops[3] == 0 => vec![0],
            FS_COMBINED_ALIAS if len == 4 => vec![0, 3],
            _ => return None,
        })
    }

    #[test]
    fn records_are_renumbered_at_the_positions_their_layouts_give() {
        let values: Ids = (0..64).map(|v| (v, v + 1000)).collect();
        let modules = Ids::from_iter([(7, 3)]);
        let codes = [
            FS_COMBINED,
            FS_COMBINED_PROFILE,
            FS_COMBINED_GLOBALVAR_INIT_REFS,
            FS_COMBINED_ALIAS,
            FS_VERSION,
        ];
        for code in codes {
            for len in 0..16usize {
                for refs in [0u64, 1, 2, 3, 6, 7, u64::MAX] {
                    for aliasee in [0u64, 5] {
                        let mut ops: Vec<u64> = (0..len as u64).map(|i| 10 + i).collect();
                        if len > 1 {
                            ops[1] = 7;
                        }
                        if len > 6 && matches!(code, FS_COMBINED | FS_COMBINED_PROFILE) {
                            ops[6] = refs;
                        }
                        if len > 3 && code == FS_COMBINED_ALIAS {
                            ops[3] = aliasee;
                        }
                        let mut r = record(code, &ops);
                        let got = renumber(&mut r, &values, &modules);
                        let Some(at) = positions_listed(code, &ops) else {
                            assert!(got.is_err(), "{code} {ops:?}");
                            continue;
                        };
                        got.unwrap();
                        let mut want = ops.clone();
                        for i in at {
                            want[i] += 1000;
                        }
                        want[1] = 3;
                        assert_eq!(r.ops, want, "{code} {ops:?}");
                    }
                }
            }
        }
    }

    fn body(records: &[Record]) -> Vec<u8> {
        let mut w = Writer::default();
        for r in records {
            w.unabbreviated(4, r.code, &r.ops);
        }
        w.end_block(4);
        w.into_bytes()
    }

    fn written(body: &[u8], modules: &Ids) -> Result<Vec<u8>, String> {
        canonical(body, 4, modules).map(|c| c.write(0))
    }

    fn identity(body: &[u8], modules: &Ids) -> String {
        let mut h = Words::default();
        canonical(body, 4, modules).unwrap().identity(&mut h);
        h.finish()
    }

    fn read(body: &[u8]) -> Vec<(u64, Vec<u64>)> {
        let mut r = Reader {
            bytes: body,
            bit: 0,
        };
        let records = r.records(4, "test").unwrap();
        records.into_iter().map(|r| (r.code, r.ops)).collect()
    }

    /// A block as LLVM 22 would write it: two modules, four values, a function in module 1
    /// referring to a variable and calling a function of module 0, an alias of the variable.
    /// `v` gives each value's id (by GUID 0x10, 0x20, 0x30), `m` each module's id.
    fn block(v: [u64; 3], m: [u64; 2]) -> Vec<Record> {
        let mut summaries = vec![
            record(
                FS_COMBINED_PROFILE,
                &[v[0], m[1], 96, 5, 64, 0, 1, 0, 0, v[1], v[2], 8],
            ),
            record(FS_COMBINED_GLOBALVAR_INIT_REFS, &[v[1], m[1], 97, 4]),
            record(FS_COMBINED_PROFILE, &[v[2], m[0], 96, 2, 64, 0, 0, 0, 0]),
        ];
        // lld's order follows its numbers.
        summaries.sort_by_key(|r| (r.ops[1], r.ops[0]));
        let mut records = vec![
            record(FS_VERSION, &[12]),
            record(FS_FLAGS, &[1121]),
            record(FS_VALUE_GUID, &[v[0], 0, 0x10]),
            record(FS_VALUE_GUID, &[v[1], 0, 0x20]),
            record(FS_VALUE_GUID, &[v[2], 0, 0x30]),
            record(FS_VALUE_GUID, &[v[0] + 10, 0, 0x40]),
        ];
        records.extend(summaries);
        records.push(record(FS_COMBINED_ALIAS, &[v[0] + 10, m[1], 0, v[1]]));
        records
    }

    fn identity_modules() -> Ids {
        Ids::from_iter([(0, 0), (1, 1)])
    }

    #[test]
    fn the_same_summaries_under_other_numbers_give_the_same_bytes() {
        let first = block([1, 2, 3], [0, 1]);
        let second = block([3, 1, 2], [1, 0]);
        let same = identity_modules();
        let swap = Ids::from_iter([(0, 1), (1, 0)]);
        let a = written(&body(&first), &same).unwrap();
        let b = written(&body(&second), &swap).unwrap();
        assert_eq!(a, b);
        // Values by GUID; summaries by (module, value), the alias last; operands in place.
        assert_eq!(
            read(&a),
            [
                (FS_VERSION, vec![12]),
                (FS_FLAGS, vec![1121]),
                (FS_VALUE_GUID, vec![1, 0, 0x10]),
                (FS_VALUE_GUID, vec![2, 0, 0x20]),
                (FS_VALUE_GUID, vec![3, 0, 0x30]),
                (FS_VALUE_GUID, vec![4, 0, 0x40]),
                (FS_COMBINED_PROFILE, vec![3, 0, 96, 2, 64, 0, 0, 0, 0]),
                (
                    FS_COMBINED_PROFILE,
                    vec![1, 1, 96, 5, 64, 0, 1, 0, 0, 2, 3, 8]
                ),
                (FS_COMBINED_GLOBALVAR_INIT_REFS, vec![2, 1, 97, 4]),
                (FS_COMBINED_ALIAS, vec![4, 1, 0, 2]),
            ]
        );
        // The same identity, without writing; another one for another operand.
        assert_eq!(
            identity(&body(&first), &identity_modules()),
            identity(&body(&second), &swap)
        );
        let mut hotter = first.clone();
        hotter[7].ops[11] = 9;
        assert_ne!(
            identity(&body(&first), &identity_modules()),
            identity(&body(&hotter), &identity_modules())
        );
        // Canonical is a fixed point.
        assert_eq!(written(&a, &same).unwrap(), a);
    }

    #[test]
    fn what_it_does_not_know_is_an_error() {
        let identity = Ids::from_iter([(0, 0), (1, 1)]);
        let refused = |records: &[Record]| written(&body(records), &identity).unwrap_err();
        let good = block([1, 2, 3], [0, 1]);
        let with = |at: usize, r: Record| {
            let mut records = good.clone();
            records.insert(at, r);
            records
        };
        // A type test (CFI), before the function it belongs to.
        assert!(refused(&with(6, record(11, &[7])))
            .contains("record code 11 (type tests, for CFI or devirtualization) is not supported"));
        // Another summary version (11: only development builds between LLVM 19 and 20).
        for version in [8, 11, 13] {
            let mut other = good.clone();
            other[0] = record(FS_VERSION, &[version]);
            assert!(refused(&other).contains("version"), "{version}");
        }
        // An alias whose aliasee is not in the shard (0) is known, and keeps its 0.
        let mut alone = good.clone();
        alone[9].ops[3] = 0;
        let read_back = read(&written(&body(&alone), &identity).unwrap());
        assert_eq!(
            read_back.last().unwrap(),
            &(FS_COMBINED_ALIAS, vec![4, 1, 0, 0])
        );
        // A call to a value with no GUID; a module not in the table.
        let mut dangling = good.clone();
        dangling[7].ops[10] = 99;
        assert!(refused(&dangling).contains("value id 99"));
        let mut stray = good.clone();
        stray[8].ops[1] = 5;
        assert!(refused(&stray).contains("module id 5"));
        // A call without its hotness in a profile record.
        let mut odd = good.clone();
        odd[7].ops.pop();
        assert!(refused(&odd).contains("operands"));
        // A value GUID after the summaries.
        assert!(refused(&with(9, record(FS_VALUE_GUID, &[9, 0, 0x50]))).contains("out of place"));
        // No version first (a block count before it); a GUID of the wrong shape for its version.
        assert!(refused(&with(0, record(FS_BLOCK_COUNT, &[3]))).contains("start with its version"));
        let mut old = good.clone();
        old[0] = record(FS_VERSION, &[10]);
        assert!(refused(&old).contains("3 operands in version 10"));
        // A count of refs past the end of the record.
        let mut past = good.clone();
        past[7].ops[6] = u64::MAX;
        assert!(refused(&past).contains("of 12 operands"));
    }
}
