//! Bitstream: reads and writes the LLVM bitstream container (fixed and variable-width numbers,
//! blocks with their length words, abbreviations, records), as the LLVM bitcode format
//! documents it.
//!
//! It knows the container only: not what a block or a record means. BLOCKINFO blocks are read
//! for callers that meet them (a module has one; index shards have none).

use std::collections::HashMap;

/// The bitcode magic: 'B', 'C', 0xC0DE.
pub const MAGIC: [u8; 4] = [0x42, 0x43, 0xC0, 0xDE];
pub const END_BLOCK: u64 = 0;
pub const ENTER_SUBBLOCK: u64 = 1;
pub const DEFINE_ABBREV: u64 = 2;
pub const UNABBREV_RECORD: u64 = 3;
/// The BLOCKINFO block's id, and its record that names the block the next abbreviations are for.
pub const BLOCKINFO_BLOCK: u64 = 0;
const BLOCKINFO_SETBID: u64 = 1;

/// An abbreviation operand.
#[derive(Debug, Clone, Copy)]
pub enum Op {
    Literal(u64),
    Fixed(u32),
    Vbr(u32),
    Array,
    Char6,
    Blob,
}

/// One record: its code and operands (a blob's bytes become operands, and `blob` says so).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Record {
    pub code: u64,
    pub ops: Vec<u64>,
    pub blob: bool,
}

pub struct Reader<'a> {
    pub bytes: &'a [u8],
    pub bit: usize,
}

impl Reader<'_> {
    pub fn fixed(&mut self, width: u32) -> Result<u64, String> {
        if self.bit + width as usize > self.bytes.len() * 8 {
            return Err("truncated".into());
        }
        if width > 56 {
            // Wider than one load can hold past a byte boundary: two halves.
            let low = self.fixed(32)?;
            return Ok(low | self.fixed(width - 32)? << 32);
        }
        // The eight bytes from the one holding the next bit (zeros past the end), as one word.
        let at = self.bit / 8;
        let word = match self.bytes.get(at..at + 8) {
            Some(eight) => u64::from_le_bytes(eight.try_into().expect("8 bytes")),
            None => {
                let mut eight = [0u8; 8];
                let rest = &self.bytes[at..];
                eight[..rest.len()].copy_from_slice(rest);
                u64::from_le_bytes(eight)
            }
        };
        let offset = self.bit % 8;
        self.bit += width as usize;
        Ok((word >> offset) & low_bits(width))
    }

    pub fn vbr(&mut self, width: u32) -> Result<u64, String> {
        let high = 1u64 << (width - 1);
        // Most numbers end within the next eight bytes: read from one word.
        let at = self.bit / 8;
        if let Some(eight) = self.bytes.get(at..at + 8) {
            let offset = self.bit % 8;
            let word = u64::from_le_bytes(eight.try_into().expect("8 bytes")) >> offset;
            let (mut v, mut shift, mut used) = (0u64, 0, 0);
            while used + width as usize <= 64 - offset {
                let chunk = (word >> used) & low_bits(width);
                v |= (chunk & (high - 1)) << shift;
                used += width as usize;
                if chunk & high == 0 {
                    self.bit += used;
                    return Ok(v);
                }
                shift += width - 1;
            }
        }
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

    pub fn align32(&mut self) {
        self.bit = self.bit.div_ceil(32) * 32;
    }

    /// After ENTER_SUBBLOCK: the block, its reader just past the block's length word.
    pub fn enter(&mut self) -> Result<Block, String> {
        let id = self.vbr(8)?;
        let width = self.vbr(4)?;
        if !(1..=32).contains(&width) {
            return Err(format!("block {id} has abbreviation width {width}"));
        }
        self.align32();
        let len_at = self.bit / 8;
        let words = self.fixed(32)? as usize;
        let end = self.bit / 8 + words * 4;
        if end > self.bytes.len() {
            return Err(format!("block {id} runs past the end of the file"));
        }
        Ok(Block {
            id,
            width: width as u32,
            len_at,
            end,
        })
    }

    pub fn define_abbrev(&mut self) -> Result<Vec<Op>, String> {
        let n = self.vbr(5)?;
        let mut ops = Vec::new();
        for _ in 0..n {
            let literal = self.fixed(1)? == 1;
            ops.push(if literal {
                Op::Literal(self.vbr(8)?)
            } else {
                match self.fixed(3)? {
                    e @ (1 | 2) => match (e, self.vbr(5)?) {
                        // As LLVM reads them: a field of no bits is a literal zero.
                        (_, 0) => Op::Literal(0),
                        (1, w @ 1..=32) => Op::Fixed(w as u32),
                        (_, w @ 1..=32) => Op::Vbr(w as u32),
                        (_, w) => return Err(format!("an abbreviation operand of width {w}")),
                    },
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

    /// The record that abbreviation `id` starts.
    pub fn record(&mut self, id: u64, width: u32, abbrevs: &[Vec<Op>]) -> Result<Record, String> {
        if id == UNABBREV_RECORD {
            let code = self.vbr(6)?;
            let n = self.vbr(6)?;
            // Room for the operands the rest of the bytes can hold (a number takes 6 bits).
            let left = (self.bytes.len() * 8).saturating_sub(self.bit) / 6;
            let mut ops = Vec::with_capacity(usize::try_from(n).unwrap_or(usize::MAX).min(left));
            for _ in 0..n {
                ops.push(self.vbr(6)?);
            }
            return Ok(Record {
                code,
                ops,
                blob: false,
            });
        }
        let abbrev = abbrevs
            .get((id - 4) as usize)
            .ok_or_else(|| format!("undefined abbreviation {id} (width {width})"))?;
        // The first value is the record's code, the others its operands.
        let mut code = None;
        let mut values = Vec::with_capacity(abbrev.len().min(16));
        let put = |code: &mut Option<u64>, values: &mut Vec<u64>, v: u64| match code {
            None => *code = Some(v),
            Some(_) => values.push(v),
        };
        let mut blob = false;
        let mut i = 0;
        while i < abbrev.len() {
            match abbrev[i] {
                Op::Array => {
                    let element = *abbrev.get(i + 1).ok_or("an array without its element")?;
                    // As LLVM reads them: an element is an encoding (a literal would let a
                    // count read no bits for any number of elements).
                    if matches!(element, Op::Literal(_)) {
                        return Err("an array of literals".into());
                    }
                    let n = self.vbr(6)?;
                    // Room at once for the elements of a usual array; more as they are read.
                    values.reserve(usize::try_from(n).unwrap_or(usize::MAX).min(4096));
                    for _ in 0..n {
                        put(&mut code, &mut values, self.scalar(element)?);
                    }
                    i += 2;
                    continue;
                }
                Op::Blob => {
                    blob = true;
                    let n = self.vbr(6)? as usize;
                    self.align32();
                    for _ in 0..n {
                        put(&mut code, &mut values, self.fixed(8)?);
                    }
                    self.align32();
                }
                op => put(&mut code, &mut values, self.scalar(op)?),
            }
            i += 1;
        }
        let code = code.ok_or_else(|| format!("abbreviation {id} gives no record code"))?;
        Ok(Record {
            code,
            ops: values,
            blob,
        })
    }

    /// Every record of a block that holds no blocks, up to its END_BLOCK; `what` names the
    /// block in errors.
    pub fn records(&mut self, width: u32, what: &str) -> Result<Vec<Record>, String> {
        self.records_after(width, Vec::new(), what)
    }

    /// As `records`, the block's abbreviations starting with those a BLOCKINFO block gave it.
    pub fn records_after(
        &mut self,
        width: u32,
        abbrevs: Vec<Vec<Op>>,
        what: &str,
    ) -> Result<Vec<Record>, String> {
        let mut records = Vec::new();
        self.walk(width, abbrevs, |_, entry| match entry {
            Entry::Block(_) => Err(format!("a block inside the {what}")),
            Entry::Record(record) => {
                records.push(record);
                Ok(())
            }
        })?;
        Ok(records)
    }

    /// Every entry of a block up to its END_BLOCK, the block's abbreviations kept here (starting
    /// with `abbrevs`): `visit` gets each record, and each sub-block just entered, which it may
    /// read; the walk then goes on from that sub-block's end.
    pub fn walk(
        &mut self,
        width: u32,
        mut abbrevs: Vec<Vec<Op>>,
        mut visit: impl FnMut(&mut Self, Entry) -> Result<(), String>,
    ) -> Result<(), String> {
        loop {
            match self.fixed(width)? {
                END_BLOCK => {
                    self.align32();
                    return Ok(());
                }
                ENTER_SUBBLOCK => {
                    let block = self.enter()?;
                    visit(self, Entry::Block(block))?;
                    self.bit = block.end * 8;
                }
                DEFINE_ABBREV => abbrevs.push(self.define_abbrev()?),
                id => {
                    let record = self.record(id, width, &abbrevs)?;
                    visit(self, Entry::Record(record))?;
                }
            }
        }
    }
}

/// A block just entered: its id, its abbreviation width, the byte offset of its length word
/// and the byte offset of its end.
#[derive(Debug, Clone, Copy)]
pub struct Block {
    pub id: u64,
    pub width: u32,
    pub len_at: usize,
    pub end: usize,
}

/// What a block holds, one at a time.
pub enum Entry {
    Block(Block),
    Record(Record),
}

/// After ENTER_SUBBLOCK of a BLOCKINFO block (its width given): the abbreviations it defines for
/// each block id (SETBID names the block; the names it may give are skipped).
pub fn blockinfo(r: &mut Reader<'_>, width: u32) -> Result<HashMap<u64, Vec<Vec<Op>>>, String> {
    let mut out: HashMap<u64, Vec<Vec<Op>>> = HashMap::new();
    let mut current = None;
    loop {
        match r.fixed(width)? {
            END_BLOCK => {
                r.align32();
                return Ok(out);
            }
            ENTER_SUBBLOCK => return Err("a block inside the BLOCKINFO block".into()),
            DEFINE_ABBREV => {
                let block = current.ok_or("a BLOCKINFO abbreviation before SETBID")?;
                let abbrev = r.define_abbrev()?;
                out.entry(block).or_default().push(abbrev);
            }
            // BLOCKINFO records are never abbreviated.
            UNABBREV_RECORD => {
                let record = r.record(UNABBREV_RECORD, width, &[])?;
                if record.code == BLOCKINFO_SETBID {
                    current = Some(*record.ops.first().ok_or("SETBID without a block id")?);
                }
            }
            id => return Err(format!("abbreviation {id} in the BLOCKINFO block")),
        }
    }
}

/// A mask of the low `width` bits (none for 0, all for 64 or more).
fn low_bits(width: u32) -> u64 {
    match width {
        0 => 0,
        w if w >= 64 => u64::MAX,
        w => u64::MAX >> (64 - w),
    }
}

/// Bits, least significant first, into little-endian bytes.
#[derive(Default)]
pub struct Writer {
    bytes: Vec<u8>,
    /// The bits not yet in `bytes` (`count` of them, at most 64), the first one lowest.
    pending: u64,
    count: u32,
}

impl Writer {
    /// A writer with room for `bytes` bytes.
    pub fn with_capacity(bytes: usize) -> Writer {
        Writer {
            bytes: Vec::with_capacity(bytes),
            ..Writer::default()
        }
    }

    /// The bytes written, the last one filled up with zero bits.
    pub fn into_bytes(mut self) -> Vec<u8> {
        self.flush();
        self.bytes
    }

    /// The pending bits out, the last byte filled up with zero bits.
    fn flush(&mut self) {
        let n = self.count.div_ceil(8) as usize;
        self.bytes
            .extend_from_slice(&self.pending.to_le_bytes()[..n]);
        (self.pending, self.count) = (0, 0);
    }

    pub fn fixed(&mut self, value: u64, width: u32) {
        if width == 0 {
            return;
        }
        if width > 32 {
            self.fixed(value, 32);
            self.fixed(value >> 32, width - 32);
            return;
        }
        // Up to 64 bits pending; four bytes go out when the next number would not fit.
        if self.count + width > 64 {
            self.bytes
                .extend_from_slice(&(self.pending as u32).to_le_bytes());
            self.pending >>= 32;
            self.count -= 32;
        }
        self.pending |= (value & low_bits(width)) << self.count;
        self.count += width;
    }

    pub fn vbr(&mut self, mut value: u64, width: u32) {
        let high = 1u64 << (width - 1);
        // The chunks gathered while they fit in 32 bits, written at once.
        let (mut bits, mut n) = (0u64, 0);
        loop {
            if n + width > 32 {
                self.fixed(bits, n);
                (bits, n) = (0, 0);
            }
            if value < high {
                bits |= value << n;
                n += width;
                break;
            }
            bits |= ((value & (high - 1)) | high) << n;
            n += width;
            value >>= width - 1;
        }
        self.fixed(bits, n);
    }

    pub fn unabbreviated(&mut self, width: u32, code: u64, ops: &[u64]) {
        self.fixed(UNABBREV_RECORD, width);
        self.vbr(code, 6);
        self.vbr(ops.len() as u64, 6);
        for &op in ops {
            self.vbr(op, 6);
        }
    }

    /// END_BLOCK and the padding to a 32-bit word: a block's body is complete.
    pub fn end_block(&mut self, width: u32) {
        self.fixed(END_BLOCK, width);
        self.align32();
    }

    pub fn align32(&mut self) {
        self.flush();
        self.bytes.resize(self.bytes.len().div_ceil(4) * 4, 0);
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
        w.vbr(u64::MAX, 6);
        w.align32();
        let bytes = w.into_bytes();
        let mut r = Reader {
            bytes: &bytes,
            bit: 0,
        };
        for (v, width) in NUMBERS {
            assert_eq!(r.vbr(width.max(2)).unwrap(), v);
            assert_eq!(r.fixed(width).unwrap(), v & ((1 << width) - 1));
        }
        assert_eq!(r.vbr(6).unwrap(), u64::MAX);
        assert_eq!(bytes.len() % 4, 0);
    }

    proptest::proptest! {
        #[test]
        fn any_numbers_of_any_width_round_trip(
            items in proptest::collection::vec(
                (proptest::prelude::any::<u64>(), 0u32..=64, 2u32..=32), 0..48),
        ) {
            let mut w = Writer::default();
            for &(v, width, vbr) in &items {
                w.fixed(v, width);
                w.vbr(v, vbr);
            }
            let bytes = w.into_bytes();
            let mut r = Reader { bytes: &bytes, bit: 0 };
            for &(v, width, vbr) in &items {
                proptest::prop_assert_eq!(r.fixed(width).unwrap(), v & low_bits(width));
                proptest::prop_assert_eq!(r.vbr(vbr).unwrap(), v);
            }
            // The bytes end with the last bit written.
            proptest::prop_assert_eq!(bytes.len(), r.bit.div_ceil(8));
        }

        #[test]
        fn any_unabbreviated_records_read_back(
            width in 2u32..=32,
            records in proptest::collection::vec(
                (4u64..1 << 20, proptest::collection::vec(proptest::prelude::any::<u64>(), 0..40)),
                0..24),
        ) {
            let mut w = Writer::default();
            for (code, ops) in &records {
                w.unabbreviated(width, *code, ops);
            }
            w.end_block(width);
            let bytes = w.into_bytes();
            let mut r = Reader { bytes: &bytes, bit: 0 };
            let back: Vec<(u64, Vec<u64>)> = r
                .records(width, "test block")
                .unwrap()
                .into_iter()
                .map(|r| (r.code, r.ops))
                .collect();
            proptest::prop_assert_eq!(back, records);
            proptest::prop_assert_eq!(r.bit, bytes.len() * 8);
        }
    }

    #[test]
    fn an_array_of_literals_is_refused_whatever_its_count() {
        // A count of 2^40 elements that would read no bits each.
        let mut w = Writer::default();
        w.vbr(1 << 40, 6);
        let bytes = w.into_bytes();
        let mut r = Reader {
            bytes: &bytes,
            bit: 0,
        };
        let abbrev = vec![Op::Literal(1), Op::Array, Op::Literal(0)];
        assert_eq!(
            r.record(4, 4, &[abbrev]).unwrap_err(),
            "an array of literals"
        );
    }

    #[test]
    fn unabbreviated_records_read_back() {
        let mut w = Writer::default();
        w.unabbreviated(3, 16, &[7, u64::MAX]);
        w.unabbreviated(3, 1, &[]);
        w.end_block(3);
        let bytes = w.into_bytes();
        let mut r = Reader {
            bytes: &bytes,
            bit: 0,
        };
        let records = r.records(3, "test block").unwrap();
        let codes: Vec<(u64, Vec<u64>)> = records.into_iter().map(|r| (r.code, r.ops)).collect();
        assert_eq!(codes, [(16, vec![7, u64::MAX]), (1, vec![])]);
        assert_eq!(r.bit, bytes.len() * 8);
    }
}
