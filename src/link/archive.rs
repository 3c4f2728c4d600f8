//! Archive: what a linker input file is (bitcode, a regular or thin archive, anything else) and
//! which members of an archive are bitcode, extracted or named where a thin archive keeps them.
//!
//! It knows the magic numbers and, through the `object` crate, the ar formats; it does not know
//! the link's command line or where extracted members belong.

use crate::job::object::{relocatable, Relocatable};
use camino::{Utf8Path, Utf8PathBuf};
use object::read::archive::ArchiveFile;
use std::fs;
use std::io::Read;

/// What a file given to the linker holds, judged by its first bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Bitcode,
    Archive,
    ThinArchive,
    /// A native object, a shared library, a linker script: passed through as it is.
    Other,
    /// Not there, or unreadable: the linker will say so.
    Missing,
}

/// Whether `head` starts like LLVM bitcode: raw (`BC` 0xC0DE) or in the bitcode wrapper.
pub fn is_bitcode(head: &[u8]) -> bool {
    head.starts_with(b"BC\xC0\xDE") || head.starts_with(&[0xDE, 0xC0, 0x17, 0x0B])
}

/// The first bytes of the file at `path` (fewer if it is shorter; none if it cannot be read).
fn head_of(path: &Utf8Path) -> Vec<u8> {
    let mut head = [0u8; 64];
    match fs::File::open(path).and_then(|mut f| read_head(&mut f, &mut head)) {
        Ok(n) => head[..n].to_vec(),
        Err(_) => Vec::new(),
    }
}

pub fn kind(path: &Utf8Path) -> Kind {
    let mut head = [0u8; 8];
    let n = match fs::File::open(path).and_then(|mut f| read_head(&mut f, &mut head)) {
        Ok(n) => n,
        Err(_) => return Kind::Missing,
    };
    let head = &head[..n];
    if is_bitcode(head) {
        Kind::Bitcode
    } else if head == b"!<arch>\n" {
        Kind::Archive
    } else if head == b"!<thin>\n" {
        Kind::ThinArchive
    } else {
        Kind::Other
    }
}

fn read_head(f: &mut fs::File, head: &mut [u8]) -> std::io::Result<usize> {
    let mut n = 0;
    while n < head.len() {
        match f.read(&mut head[n..])? {
            0 => break,
            k => n += k,
        }
    }
    Ok(n)
}

/// One member of an archive, in archive order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Member {
    /// The name the archive gives it (a path, for a thin archive's member).
    pub name: String,
    pub bitcode: bool,
    /// A thin archive's member that is not there (lld's to report).
    pub missing: bool,
    /// The relocatable object it is, if it is one.
    pub object: Option<Relocatable>,
    /// Where a regular archive's member lies in the archive's bytes.
    range: Option<(usize, usize)>,
    /// Where a thin archive's member is: the archive's directory joined with its name.
    pub path: Option<Utf8PathBuf>,
}

/// An archive read whole: its members, and the bytes a regular archive's members are cut from.
pub struct Archive {
    pub members: Vec<Member>,
    bytes: Vec<u8>,
}

impl Archive {
    /// The archive's bytes, as read.
    pub fn bytes(&self) -> &[u8] {
        &self.bytes
    }

    /// Reads the archive at `path` as the link names it, relative to `cwd`: a thin archive's
    /// members are named relative to that path's directory, as lld names them.
    pub fn read(path: &Utf8Path, cwd: &Utf8Path) -> Result<Archive, String> {
        let bytes = fs::read(cwd.join(path)).map_err(|e| format!("read archive {path}: {e}"))?;
        let archive =
            ArchiveFile::parse(&*bytes).map_err(|e| format!("read archive {path}: {e}"))?;
        let dir = path.parent().unwrap_or(Utf8Path::new(""));
        let mut members = Vec::new();
        for member in archive.members() {
            let member = member.map_err(|e| format!("read archive {path}: {e}"))?;
            let name = String::from_utf8(member.name().to_vec())
                .map_err(|_| format!("read archive {path}: a member's name is not UTF-8"))?;
            if archive.is_thin() {
                let at = if Utf8Path::new(&name).is_absolute() || dir.as_str().is_empty() {
                    Utf8PathBuf::from(&name)
                } else {
                    dir.join(&name)
                };
                let head = head_of(&cwd.join(&at));
                members.push(Member {
                    name,
                    bitcode: is_bitcode(&head),
                    // A missing member is lld's to report.
                    missing: head.is_empty(),
                    object: relocatable(&head),
                    range: None,
                    path: Some(at),
                });
            } else {
                let (offset, size) = member.file_range();
                let data = member
                    .data(&*bytes)
                    .map_err(|e| format!("read archive {path}: member {name}: {e}"))?;
                members.push(Member {
                    name,
                    bitcode: is_bitcode(data),
                    missing: false,
                    object: relocatable(data),
                    range: Some((offset as usize, size as usize)),
                    path: None,
                });
            }
        }
        Ok(Archive { members, bytes })
    }

    pub fn has_bitcode(&self) -> bool {
        self.members.iter().any(|m| m.bitcode)
    }

    /// A regular archive's member's contents; empty for a thin archive's.
    pub fn data(&self, member: &Member) -> &[u8] {
        match member.range {
            Some((offset, size)) => &self.bytes[offset..offset + size],
            None => &[],
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn magic_numbers() {
        assert!(is_bitcode(b"BC\xC0\xDE\x35\x14"));
        assert!(is_bitcode(&[0xDE, 0xC0, 0x17, 0x0B, 0, 0]));
        assert!(!is_bitcode(b"\x7fELF\x02\x01"));
        assert!(!is_bitcode(b"BC"));
    }
}
