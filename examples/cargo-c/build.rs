fn main() {
    cc::Build::new().file("csrc/mix.c").compile("mix");
    println!("cargo:rerun-if-changed=csrc/mix.c");
}
