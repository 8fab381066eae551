//! No build step: this script is here for its build-dependency, which
//! aligns a host feature with the ROS workspace (see Cargo.toml).
fn main() {
    println!("cargo::rerun-if-changed=build.rs");
}
