//! dtlto-bridge: the entry point; everything else is in the library (`lib.rs`).

fn main() {
    std::process::exit(dtlto_bridge::main());
}
