extern "C" {
    fn mix(a: i32, b: i32) -> i32;
}

fn main() {
    // SAFETY: mix is a plain C function of two ints.
    println!("mix = {}", unsafe { mix(2, 3) });
}
