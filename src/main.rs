//! dtlto-bridge: the entry point; everything else is in the library (`lib.rs`).

fn main() {
    std::process::exit(dtlto_bridge::main());
}

/// mimalloc: a link of thousands of jobs makes and frees hundreds of thousands of small
/// strings and maps; glibc's allocator spent a tenth of a cached relink on them.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;
