//! Link settings for running against the ROS 2 wheels prefix (.deps/ros2)
//! with no environment at all. With a user's sourced ROS 2 this does nothing:
//! their setup.bash provides LD_LIBRARY_PATH as usual.
use std::env;
use std::path::Path;

fn main() {
    println!("cargo:rerun-if-env-changed=AMENT_PREFIX_PATH");
    println!("cargo:rerun-if-changed=build.rs");
    let ament = env::var("AMENT_PREFIX_PATH").unwrap_or_default();
    for prefix in ament.split(':').filter(|p| !p.is_empty()) {
        let lib = Path::new(prefix).join("lib");
        // The wheels prefix is recognisable by the libpython link setup.sh makes.
        if !lib.join("libpython3.11.so").exists() {
            continue;
        }
        let lib = lib.display();
        println!("cargo:rustc-link-search=native={lib}");
        // The wheels' librcl pulls *_rosidl_generator_py libraries that need
        // Python symbols; a plain -l is dropped by the linker's --as-needed.
        println!("cargo:rustc-link-arg=-Wl,--no-as-needed");
        println!("cargo:rustc-link-arg=-lpython3.11");
        println!("cargo:rustc-link-arg=-Wl,--as-needed");
        // The run path itself comes from scripts/linker (see .cargo/config.toml).
    }
}
