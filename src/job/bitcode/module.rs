//! Module: what a bitcode module says of itself that its backend compile must follow — its
//! target triple and its relocation model (the "PIC Level" and "PIE Level" module flags) — read
//! from the module block's records, its module-level constants and its module-level metadata.
//!
//! It knows those records as LLVM 14 to 22 write them (metadata ids numbered strings first,
//! then one per record that defines a node, as LLVM's reader numbers them); it does not know
//! functions, types or debug information, and a record it does not know is an error, never a
//! guess.

use super::bitstream::{
    blockinfo, Entry, Op, Reader, Record, BLOCKINFO_BLOCK, ENTER_SUBBLOCK, MAGIC,
};
use std::collections::HashMap;

const MODULE_BLOCK: u64 = 8;
const CONSTANTS_BLOCK: u64 = 11;
const METADATA_BLOCK: u64 = 15;
const MODULE_CODE_TRIPLE: u64 = 2;
/// GLOBALVAR, FUNCTION, ALIAS_OLD, ALIAS, IFUNC: each defines a global value, numbered before
/// the module-level constants.
const GLOBAL_VALUES: [u64; 5] = [7, 8, 9, 14, 18];
const CST_CODE_SETTYPE: u64 = 1;
const CST_CODE_NULL: u64 = 2;
const CST_CODE_INTEGER: u64 = 4;
const METADATA_STRING_OLD: u64 = 1;
const METADATA_VALUE: u64 = 2;
const METADATA_NODE: u64 = 3;
const METADATA_NAME: u64 = 4;
const METADATA_DISTINCT_NODE: u64 = 5;
const METADATA_NAMED_NODE: u64 = 10;
const METADATA_STRINGS: u64 = 35;
/// Metadata records that define no node: NAME, KIND, NAMED_NODE, ATTACHMENT, STRINGS (its
/// strings are counted apart), GLOBAL_DECL_ATTACHMENT, INDEX_OFFSET, INDEX.
const METADATA_NO_NODE: [u64; 8] = [4, 6, 10, 11, 35, 36, 38, 39];
/// The highest metadata record code LLVM 22 writes (FIXED_POINT_TYPE).
const METADATA_LAST: u64 = 49;

/// How a module was compiled: not position-independent (static), or PIC or PIE at a level
/// (1 small, 2 large), as its module flags say.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Model {
    Static,
    Pic(u64),
    Pie(u64),
}

impl Model {
    /// The compiler option that names this model.
    pub fn option(self) -> &'static str {
        match self {
            Model::Static => "-fno-pic",
            Model::Pic(1) => "-fpic",
            Model::Pic(_) => "-fPIC",
            Model::Pie(1) => "-fpie",
            Model::Pie(_) => "-fPIE",
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Module {
    pub triple: String,
    /// Why it could not be read, where it could not.
    pub model: Result<Model, String>,
}

/// Reads the module of the file at `path` (as `read`).
pub fn read_file(path: &std::path::Path) -> Result<Module, String> {
    read(&std::fs::read(path).map_err(|e| e.to_string())?)
}

/// Reads the first module of a bitcode file; a file with more modules (a split LTO unit) must
/// say the same in each.
pub fn read(bytes: &[u8]) -> Result<Module, String> {
    let body = unwrap(bytes)?;
    let mut r = Reader {
        bytes: body,
        bit: 32,
    };
    let mut found: Option<Module> = None;
    // As LLVM's reader: what follows a module in the last 8 bytes is padding, not a block.
    while r.bit / 8 + 8 < body.len() {
        match r.fixed(2)? {
            ENTER_SUBBLOCK => {}
            other => return Err(format!("top-level abbreviation {other}, not a block")),
        }
        let block = r.enter()?;
        if block.id == MODULE_BLOCK {
            let module = module_block(&mut r, block.width)?;
            match &found {
                Some(first) if *first != module => {
                    return Err(format!(
                        "its modules differ: {first:?} and {module:?} (a split LTO unit whose \
                         parts were compiled apart?)"
                    ))
                }
                Some(_) => {}
                None => found = Some(module),
            }
        }
        r.bit = block.end * 8;
    }
    found.ok_or_else(|| "no module block".to_string())
}

/// The bitcode after the magic: as it is, or inside the wrapper header some targets write.
fn unwrap(bytes: &[u8]) -> Result<&[u8], String> {
    const WRAPPER: [u8; 4] = [0xDE, 0xC0, 0x17, 0x0B];
    let word = |at: usize| {
        bytes
            .get(at..at + 4)
            .map(|b| u32::from_le_bytes([b[0], b[1], b[2], b[3]]) as usize)
    };
    let body = if bytes.get(..4) == Some(&WRAPPER[..]) {
        let (Some(offset), Some(size)) = (word(8), word(12)) else {
            return Err("a truncated wrapper header".into());
        };
        offset
            .checked_add(size)
            .and_then(|end| bytes.get(offset..end))
            .ok_or("a wrapper header that points past the end")?
    } else {
        bytes
    };
    if body.get(..4) != Some(&MAGIC[..]) {
        return Err("not LLVM bitcode".into());
    }
    Ok(body)
}

/// What the module block says, its reader just past the block's length word.
fn module_block(r: &mut Reader<'_>, width: u32) -> Result<Module, String> {
    let mut infos: HashMap<u64, Vec<Vec<Op>>> = HashMap::new();
    let mut triple = None;
    let mut globals = 0u64;
    let mut constants: Vec<Option<(u64, i64)>> = Vec::new();
    let mut flags = None;
    r.walk(width, Vec::new(), |r, entry| {
        match entry {
            Entry::Block(block) => {
                let given = infos.get(&block.id).cloned().unwrap_or_default();
                match block.id {
                    BLOCKINFO_BLOCK => infos.extend(blockinfo(r, block.width)?),
                    CONSTANTS_BLOCK => constants.extend(integers(&r.records_after(
                        block.width,
                        given,
                        "constants",
                    )?)),
                    METADATA_BLOCK => {
                        let records = r.records_after(block.width, given, "metadata block")?;
                        flags = Some(module_flags(&records));
                    }
                    _ => {}
                }
            }
            Entry::Record(record) if record.code == MODULE_CODE_TRIPLE => {
                triple = Some(chars(&record.ops)?)
            }
            Entry::Record(record) if GLOBAL_VALUES.contains(&record.code) => globals += 1,
            Entry::Record(_) => {}
        }
        Ok(())
    })?;
    let triple = triple.ok_or("no target triple")?;
    let model = flags
        .unwrap_or_else(|| Ok(HashMap::new()))
        .and_then(|flags| {
            // A flag's value: a module-level constant, numbered after the global values, of the
            // type its metadata names.
            let value = |name: &str| -> Result<Option<u64>, String> {
                let Some(&(ty, id)) = flags.get(name) else {
                    return Ok(None);
                };
                let constant = id
                    .checked_sub(globals)
                    .and_then(|i| constants.get(i as usize).copied().flatten());
                match constant {
                    Some((t, v)) if t == ty && (0..=2).contains(&v) => Ok(Some(v as u64)),
                    Some((t, v)) if t == ty => {
                        Err(format!("the module flag {name:?} is {v}, not 0, 1 or 2"))
                    }
                    _ => Err(format!(
                        "the module flag {name:?} is not an integer constant of its type"
                    )),
                }
            };
            Ok(match (value("PIC Level")?, value("PIE Level")?) {
                (None | Some(0), _) => Model::Static,
                (Some(_), Some(level @ 1..)) => Model::Pie(level),
                (Some(level), _) => Model::Pic(level),
            })
        });
    Ok(Module { triple, model })
}

/// Each value a constants block defines: an integer's type id and value (a null integer is
/// 0), or None for any other constant.
fn integers(records: &[Record]) -> Vec<Option<(u64, i64)>> {
    let mut ty = None;
    let mut out = Vec::new();
    for r in records {
        let value = match (r.code, r.ops.first()) {
            (CST_CODE_SETTYPE, t) => {
                ty = t.copied();
                continue;
            }
            (CST_CODE_NULL, _) => Some(0),
            // Signed VBR: the sign in the lowest bit.
            (CST_CODE_INTEGER, Some(&v)) if v & 1 == 0 => Some((v >> 1) as i64),
            (CST_CODE_INTEGER, Some(&v)) => Some(-((v >> 1) as i64)),
            _ => None,
        };
        out.push(value.and_then(|v| Some((ty?, v))));
    }
    out
}

/// The module flags of a module-level metadata block: each flag's name and the type id and
/// value id of its value.
fn module_flags(records: &[Record]) -> Result<HashMap<String, (u64, u64)>, String> {
    let mut strings: HashMap<u64, String> = HashMap::new();
    let mut values: HashMap<u64, (u64, u64)> = HashMap::new();
    let mut nodes: HashMap<u64, &[u64]> = HashMap::new();
    let mut named: HashMap<String, &[u64]> = HashMap::new();
    let mut next = 0u64;
    let mut name: Option<String> = None;
    for record in records {
        let ops = &record.ops;
        match record.code {
            METADATA_STRINGS => {
                for s in metadata_strings(ops)? {
                    strings.insert(next, s);
                    next += 1;
                }
            }
            METADATA_NAME => name = Some(chars(ops)?),
            METADATA_NAMED_NODE => {
                let n = name.take().ok_or("a named node without its name")?;
                named.insert(n, ops);
            }
            code if METADATA_NO_NODE.contains(&code) => {}
            // 42 and 43 are reserved: LLVM's reader skips them.
            code if code == 0 || code > METADATA_LAST || code == 42 || code == 43 => {
                return Err(format!(
                    "metadata record code {code} is not one LLVM 22 writes"
                ))
            }
            code => {
                match code {
                    METADATA_STRING_OLD => {
                        strings.insert(next, chars(ops)?);
                    }
                    METADATA_VALUE if ops.len() == 2 => {
                        values.insert(next, (ops[0], ops[1]));
                    }
                    METADATA_NODE | METADATA_DISTINCT_NODE => {
                        nodes.insert(next, ops);
                    }
                    _ => {}
                }
                next += 1;
            }
        }
    }
    let mut flags = HashMap::new();
    for &id in named.get("llvm.module.flags").copied().unwrap_or_default() {
        // !{i32 behaviour, !"name", value}, each operand its id + 1.
        let flag = nodes
            .get(&id)
            .filter(|ops| ops.len() == 3)
            .ok_or_else(|| format!("module flag {id} is not a node of three operands"))?;
        let Some(name) = flag[1].checked_sub(1).and_then(|s| strings.get(&s)) else {
            return Err(format!("module flag {id} has no name"));
        };
        if let Some(&value) = flag[2].checked_sub(1).and_then(|v| values.get(&v)) {
            flags.insert(name.clone(), value);
        }
    }
    Ok(flags)
}

/// METADATA_STRINGS `[count, offset, blob]`: the blob holds `count` lengths (VBR6), then at
/// `offset` the strings' bytes one after another.
fn metadata_strings(ops: &[u64]) -> Result<Vec<String>, String> {
    let (Some(&count), Some(&offset)) = (ops.first(), ops.get(1)) else {
        return Err("METADATA_STRINGS without its count and offset".into());
    };
    let blob: Vec<u8> = ops[2..].iter().map(|&b| b as u8).collect();
    let mut lengths = Reader {
        bytes: &blob,
        bit: 0,
    };
    let mut at = offset as usize;
    let mut out = Vec::new();
    for _ in 0..count {
        let n = lengths.vbr(6)? as usize;
        let bytes = at
            .checked_add(n)
            .and_then(|end| blob.get(at..end))
            .ok_or("METADATA_STRINGS runs past its blob")?;
        out.push(String::from_utf8_lossy(bytes).into_owned());
        at += n;
    }
    Ok(out)
}

/// A record's operands as the characters of a string.
fn chars(ops: &[u64]) -> Result<String, String> {
    ops.iter()
        .map(|&c| u8::try_from(c).map_err(|_| format!("a character {c} in a string record")))
        .collect::<Result<Vec<u8>, _>>()
        .map(|b| String::from_utf8_lossy(&b).into_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn data(name: &str) -> Vec<u8> {
        let path = format!("{}/tests/data/module/{name}", env!("CARGO_MANIFEST_DIR"));
        std::fs::read(&path).unwrap_or_else(|e| panic!("read {path}: {e}"))
    }

    #[test]
    fn real_modules_of_llvm_14_19_and_22_name_their_model_and_target() {
        let x86 = "x86_64-unknown-linux-gnu";
        for v in [14, 19, 22] {
            for (name, model) in [
                ("nopic", Model::Static),
                ("pie", Model::Pie(2)),
                ("pic", Model::Pic(1)),
            ] {
                let name = format!("m-{v}-{name}.bc");
                let module = read(&data(&name)).unwrap_or_else(|e| panic!("{name}: {e}"));
                assert_eq!(module.triple, x86, "{name}");
                assert_eq!(module.model, Ok(model), "{name}");
            }
        }
        // An ifunc is a global value too: the flags' constants are numbered after it.
        for (name, model) in [
            ("tc-22-fpic.bc", Model::Pic(1)),
            ("tc-22-fPIE.bc", Model::Pie(2)),
        ] {
            assert_eq!(read(&data(name)).unwrap().model, Ok(model), "{name}");
        }
        let arm = read(&data("m-22-arm-g.bc")).unwrap();
        assert_eq!(arm.triple, "aarch64-unknown-linux-gnu");
        assert_eq!(arm.model, Ok(Model::Pic(2)));
        let split = read(&data("m-22-split.bc")).unwrap();
        assert_eq!(split.model, Ok(Model::Static));
        assert_eq!(
            [Model::Static, Model::Pic(1), Model::Pie(2)].map(Model::option),
            ["-fno-pic", "-fpic", "-fPIE"]
        );
    }

    #[test]
    fn what_is_not_a_module_is_refused() {
        let module = data("m-22-nopic.bc");
        let shard = std::fs::read(format!(
            "{}/tests/data/main.thinlto.bc",
            env!("CARGO_MANIFEST_DIR")
        ))
        .unwrap();
        for (bytes, why) in [
            (&b"\x7fELF\x02\x01\x01"[..], "not LLVM bitcode"),
            (&module[..module.len() / 2], "past the end"),
            (
                &b"\xde\xc0\x17\x0b\0\0\0\0\xff\0\0\0\x10\0\0\0"[..],
                "points past the end",
            ),
        ] {
            let e = read(bytes).unwrap_err();
            assert!(e.contains(why), "{e}");
        }
        // An index shard's module block has no triple.
        assert!(read(&shard).unwrap_err().contains("no target triple"));
        // Padding after the module, as LLVM's reader allows it.
        let mut padded = module.clone();
        padded.extend([0; 4]);
        assert_eq!(read(&padded).unwrap(), read(&module).unwrap());
        // Inside a wrapper header, the same module.
        let mut wrapped = vec![0xde, 0xc0, 0x17, 0x0b, 0, 0, 0, 0, 20, 0, 0, 0];
        wrapped.extend((module.len() as u32).to_le_bytes());
        wrapped.extend([7, 0, 0, 1]);
        wrapped.extend(&module);
        assert_eq!(read(&wrapped).unwrap(), read(&module).unwrap());
    }
}
