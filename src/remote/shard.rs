//! Shard: reads and rewrites the module path table of a ThinLTO index shard (the
//! `*.thinlto.bc` file lld writes for each backend job), so that a remote action can name the
//! job's modules by content instead of by lld's per-link names.
//!
//! It knows the LLVM bitstream container (abbreviations, blocks, records) and the layout lld 14
//! to 22 write: a MODULE_BLOCK holding a VERSION record, one MODULE_STRTAB_BLOCK of ENTRY
//! `[id, chars...]` and HASH `[5 x i32]` records, and the summary block; then a STRTAB block.
//! Anything else it does not understand (a wrapper header, a BLOCKINFO block, a record code
//! it does not know in the table, a second table, an offset record) is an error, never a guess.
//! It does not know what the summaries say.

/// The bitcode magic: 'B', 'C', 0xC0DE.
const MAGIC: [u8; 4] = [0x42, 0x43, 0xC0, 0xDE];
const BLOCKINFO_BLOCK: u64 = 0;
const MODULE_BLOCK: u64 = 8;
const MODULE_STRTAB_BLOCK: u64 = 19;
/// MODULE_CODE_VSTOFFSET: a word offset into the file, which a rewrite would break.
const MODULE_CODE_VSTOFFSET: u64 = 13;
const MST_CODE_ENTRY: u64 = 1;
const MST_CODE_HASH: u64 = 2;

const END_BLOCK: u64 = 0;
const ENTER_SUBBLOCK: u64 = 1;
const DEFINE_ABBREV: u64 = 2;
const UNABBREV_RECORD: u64 = 3;

/// One record of the module path table.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Record {
    /// A module's id and path.
    Entry { id: u64, path: String },
    /// The module's hash (five 32-bit words), kept as read.
    Hash(Vec<u64>),
}

/// Where the table is in the file, and what it holds.
#[derive(Debug)]
struct Table {
    /// Byte offset of the MODULE_BLOCK's length word.
    module_len_at: usize,
    /// Byte offset of the table's length word; its body follows and ends at `end`.
    len_at: usize,
    end: usize,
    /// The table's abbreviation width, from its header.
    width: u32,
    records: Vec<Record>,
}

/// The module paths a shard names, in its order.
pub fn module_paths(shard: &[u8]) -> Result<Vec<String>, String> {
    Ok(read_table(shard)?
        .records
        .into_iter()
        .filter_map(|r| match r {
            Record::Entry { path, .. } => Some(path),
            Record::Hash(_) => None,
        })
        .collect())
}

/// The shard with each module path `p` replaced by `rename(p)`; an error when the shard's
/// layout is not the one this module knows, or when `rename` has no name for a path.
pub fn rename(shard: &[u8], rename: &dyn Fn(&str) -> Option<String>) -> Result<Vec<u8>, String> {
    let table = read_table(shard)?;
    // Each entry with the hash record that follows it, in the order of their new names: lld
    // writes them in an order that follows the old names, which the reader does not need
    // (it keys modules by the ids the records carry).
    let mut entries: Vec<(String, u64, Option<&Vec<u64>>)> = Vec::new();
    let mut seen = std::collections::HashSet::new();
    for r in &table.records {
        match r {
            Record::Entry { id, path } => {
                let new = rename(path).ok_or_else(|| format!("no name for module {path}"))?;
                if !seen.insert(new.clone()) {
                    return Err(format!("two modules would be named {new}"));
                }
                entries.push((new, *id, None));
            }
            Record::Hash(words) => match entries.last_mut() {
                Some((_, _, hash @ None)) => *hash = Some(words),
                _ => return Err("a module hash without its module".into()),
            },
        }
    }
    entries.sort();
    let mut w = Writer::default();
    for (name, id, hash) in &entries {
        let mut ops = vec![*id];
        ops.extend(name.bytes().map(u64::from));
        w.unabbreviated(table.width, MST_CODE_ENTRY, &ops);
        if let Some(words) = hash {
            w.unabbreviated(table.width, MST_CODE_HASH, words);
        }
    }
    w.fixed(END_BLOCK, table.width);
    w.align32();
    let body = w.bytes;
    let old_words = (table.end - table.len_at - 4) / 4;
    let new_words = body.len() / 4;
    let mut out = Vec::with_capacity(shard.len() + body.len());
    out.extend_from_slice(&shard[..table.len_at]);
    out.extend_from_slice(&(new_words as u32).to_le_bytes());
    out.extend_from_slice(&body);
    out.extend_from_slice(&shard[table.end..]);
    // The enclosing MODULE_BLOCK grows or shrinks by the same number of words.
    let at = table.module_len_at;
    let module_words = u32::from_le_bytes(out[at..at + 4].try_into().expect("4 bytes"));
    let module_words = (i64::from(module_words) + new_words as i64 - old_words as i64)
        .try_into()
        .map_err(|_| "the module block's length does not fit".to_string())?;
    out[at..at + 4].copy_from_slice(&u32::to_le_bytes(module_words));
    // Read back what was written: the same records, renamed.
    let check = read_table(&out)?;
    if check.records.len() != table.records.len() {
        return Err("the rewritten table does not read back".into());
    }
    Ok(out)
}

/// An abbreviation operand.
#[derive(Debug, Clone, Copy)]
enum Op {
    Literal(u64),
    Fixed(u32),
    Vbr(u32),
    Array,
    Char6,
    Blob,
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
        let (block, width, len_at, end) = r.enter()?;
        match block {
            BLOCKINFO_BLOCK => return Err("a BLOCKINFO block (not written in shards)".into()),
            MODULE_BLOCK => {
                if found.is_some() {
                    return Err("two module blocks".into());
                }
                found = Some(r.module_block(width, len_at, end)?);
            }
            _ => r.bit = end * 8,
        }
        if r.bit != end * 8 {
            return Err(format!("block {block} does not end where its length says"));
        }
    }
    found.ok_or_else(|| "no module path table".to_string())
}

struct Reader<'a> {
    bytes: &'a [u8],
    bit: usize,
}

impl Reader<'_> {
    fn fixed(&mut self, width: u32) -> Result<u64, String> {
        let mut v = 0u64;
        for i in 0..width {
            let byte = self
                .bytes
                .get(self.bit / 8)
                .ok_or_else(|| "truncated".to_string())?;
            v |= u64::from((byte >> (self.bit % 8)) & 1) << i;
            self.bit += 1;
        }
        Ok(v)
    }

    fn vbr(&mut self, width: u32) -> Result<u64, String> {
        let high = 1u64 << (width - 1);
        let mut v = 0u64;
        let mut shift = 0;
        loop {
            let chunk = self.fixed(width)?;
            if shift >= 64 {
                return Err("a variable-width number is too long".into());
            }
            v |= (chunk & (high - 1)) << shift;
            shift += width - 1;
            if chunk & high == 0 {
                return Ok(v);
            }
        }
    }

    fn align32(&mut self) {
        self.bit = self.bit.div_ceil(32) * 32;
    }

    /// After ENTER_SUBBLOCK: the block id, its abbreviation width, the byte offset of its
    /// length word and the byte offset of its end.
    fn enter(&mut self) -> Result<(u64, u32, usize, usize), String> {
        let block = self.vbr(8)?;
        let width = self.vbr(4)?;
        if !(1..=32).contains(&width) {
            return Err(format!("block {block} has abbreviation width {width}"));
        }
        self.align32();
        let len_at = self.bit / 8;
        let words = self.fixed(32)? as usize;
        let end = self.bit / 8 + words * 4;
        if end > self.bytes.len() {
            return Err(format!("block {block} runs past the end of the file"));
        }
        Ok((block, width as u32, len_at, end))
    }

    fn define_abbrev(&mut self) -> Result<Vec<Op>, String> {
        let n = self.vbr(5)?;
        let mut ops = Vec::new();
        for _ in 0..n {
            let literal = self.fixed(1)? == 1;
            ops.push(if literal {
                Op::Literal(self.vbr(8)?)
            } else {
                let width = |w: u64| match w {
                    1..=32 => Ok(w as u32),
                    _ => Err(format!("an abbreviation operand of width {w}")),
                };
                match self.fixed(3)? {
                    1 => Op::Fixed(width(self.vbr(5)?)?),
                    2 => Op::Vbr(width(self.vbr(5)?)?),
                    3 => Op::Array,
                    4 => Op::Char6,
                    5 => Op::Blob,
                    e => return Err(format!("unknown abbreviation encoding {e}")),
                }
            });
        }
        Ok(ops)
    }

    fn scalar(&mut self, op: Op) -> Result<u64, String> {
        match op {
            Op::Literal(v) => Ok(v),
            Op::Fixed(w) => self.fixed(w),
            Op::Vbr(w) if w >= 2 => self.vbr(w),
            Op::Char6 => {
                let v = self.fixed(6)? as u8;
                Ok(u64::from(match v {
                    0..=25 => b'a' + v,
                    26..=51 => b'A' + v - 26,
                    52..=61 => b'0' + v - 52,
                    62 => b'.',
                    _ => b'_',
                }))
            }
            _ => Err("an array or blob where a scalar belongs".into()),
        }
    }

    /// A record: its code and operands (a blob's bytes become operands).
    fn record(
        &mut self,
        id: u64,
        width: u32,
        abbrevs: &[Vec<Op>],
    ) -> Result<(u64, Vec<u64>), String> {
        if id == UNABBREV_RECORD {
            let code = self.vbr(6)?;
            let n = self.vbr(6)?;
            let ops = (0..n).map(|_| self.vbr(6)).collect::<Result<_, _>>()?;
            return Ok((code, ops));
        }
        let abbrev = abbrevs
            .get((id - 4) as usize)
            .ok_or_else(|| format!("undefined abbreviation {id} (width {width})"))?
            .clone();
        let mut values = Vec::new();
        let mut i = 0;
        while i < abbrev.len() {
            match abbrev[i] {
                Op::Array => {
                    let element = *abbrev.get(i + 1).ok_or("an array without its element")?;
                    let n = self.vbr(6)?;
                    for _ in 0..n {
                        values.push(self.scalar(element)?);
                    }
                    i += 2;
                    continue;
                }
                Op::Blob => {
                    let n = self.vbr(6)? as usize;
                    self.align32();
                    for _ in 0..n {
                        values.push(self.fixed(8)?);
                    }
                    self.align32();
                }
                op => values.push(self.scalar(op)?),
            }
            i += 1;
        }
        if values.is_empty() {
            return Err(format!("abbreviation {id} gives no record code"));
        }
        let code = values.remove(0);
        Ok((code, values))
    }

    fn module_block(
        &mut self,
        width: u32,
        module_len_at: usize,
        end: usize,
    ) -> Result<Table, String> {
        let mut abbrevs = Vec::new();
        let mut table = None;
        loop {
            match self.fixed(width)? {
                END_BLOCK => {
                    self.align32();
                    break;
                }
                ENTER_SUBBLOCK => {
                    let (block, w, len_at, block_end) = self.enter()?;
                    if block == BLOCKINFO_BLOCK {
                        return Err("a BLOCKINFO block (not written in shards)".into());
                    }
                    if block == MODULE_STRTAB_BLOCK {
                        if table.is_some() {
                            return Err("two module path tables".into());
                        }
                        let records = self.strtab_block(w)?;
                        if self.bit != block_end * 8 {
                            return Err(
                                "the module path table does not end where its length says".into()
                            );
                        }
                        table = Some(Table {
                            module_len_at,
                            len_at,
                            end: block_end,
                            width: w,
                            records,
                        });
                    } else {
                        self.bit = block_end * 8;
                    }
                }
                DEFINE_ABBREV => abbrevs.push(self.define_abbrev()?),
                id => {
                    let (code, _) = self.record(id, width, &abbrevs)?;
                    if code == MODULE_CODE_VSTOFFSET {
                        return Err(
                            "a value symbol table offset (a per-module file, not a shard)".into(),
                        );
                    }
                }
            }
        }
        if self.bit != end * 8 {
            return Err("the module block does not end where its length says".into());
        }
        table.ok_or_else(|| "no module path table in the module block".to_string())
    }

    fn strtab_block(&mut self, width: u32) -> Result<Vec<Record>, String> {
        let mut abbrevs = Vec::new();
        let mut records = Vec::new();
        loop {
            match self.fixed(width)? {
                END_BLOCK => {
                    self.align32();
                    return Ok(records);
                }
                ENTER_SUBBLOCK => return Err("a block inside the module path table".into()),
                DEFINE_ABBREV => abbrevs.push(self.define_abbrev()?),
                id => {
                    let (code, ops) = self.record(id, width, &abbrevs)?;
                    records.push(match code {
                        MST_CODE_ENTRY if !ops.is_empty() => {
                            let bytes = ops[1..]
                                .iter()
                                .map(|&c| u8::try_from(c).map_err(|_| "a path character over 255"))
                                .collect::<Result<Vec<u8>, _>>()?;
                            let path = String::from_utf8(bytes)
                                .map_err(|_| "a module path that is not UTF-8".to_string())?;
                            Record::Entry { id: ops[0], path }
                        }
                        MST_CODE_HASH if ops.len() == 5 => Record::Hash(ops),
                        code => {
                            return Err(format!(
                                "record code {code} with {} operands in the module path table",
                                ops.len()
                            ))
                        }
                    });
                }
            }
        }
    }
}

/// Bits, least significant first, into little-endian bytes.
#[derive(Default)]
struct Writer {
    bytes: Vec<u8>,
    bit: usize,
}

impl Writer {
    fn fixed(&mut self, value: u64, width: u32) {
        for i in 0..width {
            if self.bit / 8 == self.bytes.len() {
                self.bytes.push(0);
            }
            let b = ((value >> i) & 1) as u8;
            self.bytes[self.bit / 8] |= b << (self.bit % 8);
            self.bit += 1;
        }
    }

    fn vbr(&mut self, mut value: u64, width: u32) {
        let high = 1u64 << (width - 1);
        while value >= high {
            self.fixed((value & (high - 1)) | high, width);
            value >>= width - 1;
        }
        self.fixed(value, width);
    }

    fn unabbreviated(&mut self, width: u32, code: u64, ops: &[u64]) {
        self.fixed(UNABBREV_RECORD, width);
        self.vbr(code, 6);
        self.vbr(ops.len() as u64, 6);
        for &op in ops {
            self.vbr(op, 6);
        }
    }

    fn align32(&mut self) {
        self.bit = self.bit.div_ceil(32) * 32;
        self.bytes.resize(self.bit / 8, 0);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_round_trip_through_the_writer_and_reader() {
        const NUMBERS: [(u64, u32); 6] = [(5, 3), (0, 6), (63, 6), (1 << 40, 6), (300, 8), (1, 1)];
        let mut w = Writer::default();
        for (v, width) in NUMBERS {
            w.vbr(v, width.max(2));
            w.fixed(v & ((1 << width) - 1), width);
        }
        w.align32();
        let mut r = Reader {
            bytes: &w.bytes,
            bit: 0,
        };
        for (v, width) in NUMBERS {
            assert_eq!(r.vbr(width.max(2)).unwrap(), v);
            assert_eq!(r.fixed(width).unwrap(), v & ((1 << width) - 1));
        }
        assert_eq!(w.bytes.len() % 4, 0);
    }

    /// A shard clang-22/lld-22 wrote for examples/hello's main.o, with a regular archive's
    /// members named by lld (pid 0x2481).
    const SHARD: &[u8] = include_bytes!("../../tests/data/main.thinlto.bc");

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
        // In the order of the new names.
        assert_eq!(
            module_paths(&renamed).unwrap(),
            ["m/10.o", "m/30.o", "m/31.o", "m/5.o", "m/6.o"]
        );
        // Whatever order the old names gave, the same bytes.
        let reversed = rename(SHARD, &|p| Some(format!("z/{}", 100 - p.len()))).unwrap();
        let back = rename(&reversed, &|p| {
            let n: usize = p[2..].parse().unwrap();
            Some(format!("m/{}.o", 100 - n))
        })
        .unwrap();
        assert_eq!(back, renamed);
        // Everything after the table is unchanged, and so is the table's hash records' content.
        let tail = &SHARD[SHARD.len() - 40..];
        assert!(renamed.ends_with(tail));
        let again = rename(&renamed, &|p| Some(p.to_string())).unwrap();
        assert_eq!(again, renamed);
        // No name for a module, or two modules under one name: refused.
        assert!(rename(SHARD, &|p| (p != "main.o").then(|| p.to_string())).is_err());
        assert!(rename(SHARD, &|_| Some("same.o".into()))
            .unwrap_err()
            .contains("two modules"));
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
        bytes.extend(w.bytes);
        assert!(module_paths(&bytes).unwrap_err().contains("past the end"));
    }
}
