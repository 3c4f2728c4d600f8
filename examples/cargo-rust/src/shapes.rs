pub trait Shape { fn area(&self) -> f64; }
pub struct Square(pub f64);
pub struct Circle(pub f64);
impl Shape for Square { fn area(&self) -> f64 { self.0 * self.0 } }
impl Shape for Circle { fn area(&self) -> f64 { std::f64::consts::PI * self.0 * self.0 } }
pub fn all() -> Vec<Box<dyn Shape>> { vec![Box::new(Square(2.0)), Box::new(Circle(1.0))] }
