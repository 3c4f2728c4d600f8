//! Object: whether a file is a whole relocatable object of a format dtlto-bridge knows — ELF
//! (32- and 64-bit, either byte order) and COFF (regular and bigobj; x86-64, i386, arm64 and
//! the other Windows machines) — its header, section table, section contents, relocations and
//! symbol and string tables all inside the file.
//!
//! It reads formats through the `object` crate; it does not know jobs, paths or how a file was
//! written. Anything else (bitcode, Mach-O, text) is "a format it does not know", never fine.

use object::read::coff::{CoffFile, CoffHeader};
use object::read::elf::{ElfFile, FileHeader};
use object::{pe, FileKind, Object, ObjectSection};

/// Why `data` is not a whole object: "a truncated COFF object (...)", "...", or None.
pub fn problem(data: &[u8]) -> Option<String> {
    let kind = match FileKind::parse(data) {
        Ok(kind) => kind,
        Err(_) if data.len() < 16 => {
            return Some(format!(
                "a file too short to be an object ({} bytes)",
                data.len()
            ))
        }
        Err(_) => return Some(unknown(data)),
    };
    let checked = match kind {
        FileKind::Elf32 => elf::<object::elf::FileHeader32<object::Endianness>>(data),
        FileKind::Elf64 => elf::<object::elf::FileHeader64<object::Endianness>>(data),
        FileKind::Coff => coff::<pe::ImageFileHeader>(data),
        FileKind::CoffBig => coff::<pe::AnonObjectHeaderBigobj>(data),
        _ => return Some(unknown(data)),
    };
    checked.err()
}

/// The kinds of relocatable object a linker takes from an archive.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Relocatable {
    /// A relocatable ELF object (ET_REL).
    Elf,
    /// A COFF object, regular or bigobj.
    Coff,
    /// A COFF short import object (what import libraries hold).
    CoffImport,
}

/// What relocatable object `head` (a file's first 64 bytes, or all of a shorter one) starts, if
/// any.
pub fn relocatable(head: &[u8]) -> Option<Relocatable> {
    match FileKind::parse(head) {
        Ok(FileKind::Elf32 | FileKind::Elf64) => {
            // e_type, in the byte order EI_DATA names: 1 is ET_REL.
            let rel = match (head.get(5), head.get(16..18)) {
                (Some(1), Some(t)) => t == [1, 0],
                (Some(2), Some(t)) => t == [0, 1],
                _ => false,
            };
            rel.then_some(Relocatable::Elf)
        }
        Ok(FileKind::Coff | FileKind::CoffBig) => Some(Relocatable::Coff),
        Ok(FileKind::CoffImport) => Some(Relocatable::CoffImport),
        _ => None,
    }
}

/// "a file of a format dtlto-bridge does not know (it starts 42 43 c0 de ...)".
fn unknown(data: &[u8]) -> String {
    let head: Vec<String> = data.iter().take(8).map(|b| format!("{b:02x}")).collect();
    format!(
        "a file that is no object of a format dtlto-bridge knows (ELF or COFF; it starts {})",
        head.join(" ")
    )
}

fn elf<H: FileHeader<Endian = object::Endianness>>(data: &[u8]) -> Result<(), String> {
    let bad = |e: &dyn std::fmt::Display| format!("a truncated or damaged ELF object ({e})");
    let file = ElfFile::<H>::parse(data).map_err(|e| bad(&e))?;
    let header = file.elf_header();
    let kind = header.e_type(file.endian());
    if kind != object::elf::ET_REL {
        return Err(format!(
            "an ELF file that is not a relocatable object (e_type {kind})"
        ));
    }
    sections(&file).map_err(|e| bad(&e))
}

fn coff<H: CoffHeader>(data: &[u8]) -> Result<(), String> {
    let bad = |e: &dyn std::fmt::Display| format!("a truncated or damaged COFF object ({e})");
    let file = CoffFile::<&[u8], H>::parse(data).map_err(|e| bad(&e))?;
    let header = file.coff_header();
    for section in file.coff_section_table().iter() {
        section.coff_relocations(data).map_err(|e| {
            bad(&format!(
                "{e} in {}",
                String::from_utf8_lossy(section.raw_name())
            ))
        })?;
    }
    // The string table follows the symbols: its first four bytes give its size, themselves
    // included (`object` does not check that it ends inside the file).
    let symbols = u64::from(header.pointer_to_symbol_table());
    if symbols != 0 {
        let size = if H::is_type_bigobj() { 20 } else { 18 };
        let at = symbols + u64::from(header.number_of_symbols()) * size;
        let length = data
            .get(at as usize..at as usize + 4)
            .map(|b| u64::from(u32::from_le_bytes([b[0], b[1], b[2], b[3]])));
        match length {
            Some(length) if length >= 4 && at + length <= data.len() as u64 => {}
            _ => return Err(bad(&"its string table lies past the end of the file")),
        }
    }
    sections(&file).map_err(|e| bad(&e))
}

/// Every section's contents inside the file.
fn sections<'data>(file: &impl Object<'data>) -> Result<(), String> {
    for section in file.sections() {
        if section.data().is_err() {
            return Err(format!(
                "section {} lies past the end of the file",
                section.name().unwrap_or("?")
            ));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A COFF object of one section (4 bytes of contents, one relocation) and one symbol, for
    /// `machine`; bigobj when `big`.
    fn coff(machine: u16, big: bool) -> Vec<u8> {
        let mut out = Vec::new();
        let header = if big { 56 } else { 20 };
        let section_at = header;
        let data_at = section_at + 40;
        let relocs_at = data_at + 4;
        let symbols_at = relocs_at + 10;
        if big {
            out.extend(0u16.to_le_bytes());
            out.extend(0xffffu16.to_le_bytes());
            out.extend(2u16.to_le_bytes());
            out.extend(machine.to_le_bytes());
            out.extend(0u32.to_le_bytes());
            out.extend(pe::ANON_OBJECT_HEADER_BIGOBJ_CLASS_ID.0);
            out.extend([0u8; 16]);
            out.extend(1u32.to_le_bytes());
            out.extend((symbols_at as u32).to_le_bytes());
            out.extend(1u32.to_le_bytes());
        } else {
            out.extend(machine.to_le_bytes());
            out.extend(1u16.to_le_bytes());
            out.extend(0u32.to_le_bytes());
            out.extend((symbols_at as u32).to_le_bytes());
            out.extend(1u32.to_le_bytes());
            out.extend(0u16.to_le_bytes());
            out.extend(0u16.to_le_bytes());
        }
        assert_eq!(out.len(), header);
        out.extend(b".text\0\0\0");
        out.extend([0u8; 8]);
        out.extend(4u32.to_le_bytes());
        out.extend((data_at as u32).to_le_bytes());
        out.extend((relocs_at as u32).to_le_bytes());
        out.extend(0u32.to_le_bytes());
        out.extend(1u16.to_le_bytes());
        out.extend(0u16.to_le_bytes());
        out.extend(0x6000_0020u32.to_le_bytes());
        out.extend([0xc3, 0xc3, 0xc3, 0xc3]);
        out.extend([0u8; 10]);
        out.extend(b"main\0\0\0\0");
        out.extend([0u8; 4]);
        out.extend(if big {
            1u32.to_le_bytes().to_vec()
        } else {
            1u16.to_le_bytes().to_vec()
        });
        out.extend([0u8, 0, 2, 0]);
        // A string table of one name.
        out.extend(9u32.to_le_bytes());
        out.extend(b"long\0");
        out
    }

    /// Real objects from clang-22 (tests/data/objects/README), whole and cut short.
    #[test]
    fn real_objects_whole_and_cut() {
        let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/objects");
        for name in [
            "x86_64.obj",
            "i386.obj",
            "arm64.obj",
            "x86_64.o",
            "i386.o",
            "aarch64_be.o",
        ] {
            let whole = std::fs::read(format!("{dir}/{name}")).unwrap();
            assert_eq!(problem(&whole), None, "{name}");
            for cut in [whole.len() - 1, whole.len() / 2, 40] {
                let got = problem(&whole[..cut]).unwrap_or_default();
                assert!(got.contains("a truncated"), "{name} cut at {cut}: {got:?}");
            }
        }
    }

    #[test]
    fn coff_objects_of_each_machine_whole_and_cut() {
        for machine in [
            pe::IMAGE_FILE_MACHINE_AMD64,
            pe::IMAGE_FILE_MACHINE_I386,
            pe::IMAGE_FILE_MACHINE_ARM64,
        ] {
            for big in [false, true] {
                let whole = coff(machine, big);
                assert_eq!(problem(&whole), None, "{machine:#x} big={big}");
                for cut in [whole.len() - 1, whole.len() - 6, whole.len() / 2, 10] {
                    let got = problem(&whole[..cut]).unwrap_or_default();
                    assert!(
                        got.contains("a truncated") || got.contains("too short to be an object"),
                        "{machine:#x} big={big} cut at {cut}: {got:?}"
                    );
                }
            }
        }
    }

    #[test]
    fn relocatable_objects_are_told_from_other_files() {
        let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/objects");
        for name in ["x86_64.obj", "arm64.obj", "x86_64.o", "aarch64_be.o"] {
            let whole = std::fs::read(format!("{dir}/{name}")).unwrap();
            let want = if name.ends_with(".obj") {
                Relocatable::Coff
            } else {
                Relocatable::Elf
            };
            assert_eq!(relocatable(&whole[..64]), Some(want), "{name}");
        }
        let big = coff(pe::IMAGE_FILE_MACHINE_AMD64, true);
        assert_eq!(relocatable(&big[..64]), Some(Relocatable::Coff));
        let elf = |data: u8, t: [u8; 2]| {
            let mut h = b"\x7fELF\x02".to_vec();
            h.push(data);
            h.push(1);
            h.resize(16, 0);
            h.extend(t);
            h
        };
        assert_eq!(relocatable(&elf(1, [1, 0])), Some(Relocatable::Elf));
        assert_eq!(relocatable(&elf(2, [0, 1])), Some(Relocatable::Elf));
        assert_eq!(relocatable(&elf(1, [3, 0])), None, "a shared object");
        assert_eq!(relocatable(&elf(2, [1, 0])), None);
        assert_eq!(relocatable(b"\x7fELF"), None);
        assert_eq!(relocatable(b"README text\n......"), None);
        let import = b"\0\0\xff\xff\0\0\x64\x86\0\0\0\0\x10\0\0\0";
        assert_eq!(relocatable(import), Some(Relocatable::CoffImport));
    }

    #[test]
    fn what_is_not_a_known_object_is_said_to_be_so() {
        for (data, want) in [
            (
                &b"BC\xc0\xde\x35\x14\x00\x00\x05\x00\x00\x00\x62\x0c\x30\x24"[..],
                "42 43 c0 de",
            ),
            (
                &b"\xcf\xfa\xed\xfe\x07\x00\x00\x01\x03\x00\x00\x00\x01\x00\x00\x00"[..],
                "cf fa ed fe",
            ),
            (&b"int main(void) {}\n"[..], "69 6e 74 20"),
        ] {
            let got = problem(data).unwrap();
            assert!(
                got.contains("no object of a format dtlto-bridge knows"),
                "{got}"
            );
            assert!(got.contains(want), "{got}");
        }
    }
}
