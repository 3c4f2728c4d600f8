//! The end-to-end tests, one binary: the real dtlto-bridge binary run as a user or a linker runs
//! it. `fast` needs only sh, make and ninja; `full` the whole toolchain (`cargo test --test e2e
//! fast::` runs the first alone).

/// A shell command that writes a minimal relocatable ELF object (its 64-byte header, no sections)
/// to its standard output: the fake compilers of the tests write it, as every output is checked
/// to be an object.
macro_rules! obj {
    () => {
        r"{ printf '\177ELF\2\1\1\0\0\0\0\0\0\0\0\0\1\0>\0\1\0\0\0'; head -c 40 /dev/zero; }"
    };
}

mod fast;
mod full;
mod space;
