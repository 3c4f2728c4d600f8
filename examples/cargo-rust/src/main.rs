mod shapes;
fn main() {
    let total: f64 = shapes::all().iter().map(|s| s.area()).sum();
    println!("total area {total:.2}");
}
