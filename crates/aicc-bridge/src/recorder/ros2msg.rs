//! ROS 2 message schemas in the `ros2msg` form MCAP readers (Foxglove,
//! rosbag2, the mcap-ros2 libraries) decode CDR with: the type's .msg text,
//! then for each type it uses (transitively, once each) a separator line of
//! 80 `=`, `MSG: pkg/Type` and that type's .msg text.
//!
//! The texts are read at run time from the installed interface packages
//! (`<prefix>/share/<pkg>/msg/<Type>.msg` under each ament prefix): they
//! are the definitions of the messages the robot side actually exchanges,
//! and a robot with other message packages needs no rebuild of the bridge.
use std::collections::{HashSet, VecDeque};
use std::path::{Path, PathBuf};

/// The separator line between a type's text and each dependency's.
pub const SEPARATOR: &str =
    "================================================================================";

const PRIMITIVES: [&str; 17] = [
    "bool", "byte", "char", "float32", "float64", "int8", "uint8", "int16", "uint16", "int32",
    "uint32", "int64", "uint64", "string", "wstring", "time", "duration",
];

/// `sensor_msgs/msg/Image` or `sensor_msgs/Image` as (package, name).
pub(crate) fn split_type(type_name: &str) -> Option<(&str, &str)> {
    let mut parts = type_name.split('/');
    let package = parts.next().filter(|p| !p.is_empty())?;
    let name = match (parts.next(), parts.next(), parts.next()) {
        (Some(name), None, None) => name,
        (Some("msg"), Some(name), None) => name,
        _ => return None,
    };
    (!name.is_empty()).then_some((package, name))
}

/// The message types a .msg text's fields use, as `pkg/Type` (a bare
/// `Type` is of `package`; `Header` is `std_msgs/Header`), in order of
/// first use. Constants and primitive fields name none.
pub(crate) fn dependencies(text: &str, package: &str) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for line in text.lines() {
        let line = line.split('#').next().unwrap_or("").trim();
        let Some(field_type) = line.split_whitespace().next() else { continue };
        // Arrays (`T[]`, `T[3]`, `T[<=5]`) and bounded strings (`string<=8`).
        let base = field_type.split(['[', '<']).next().unwrap_or(field_type);
        if base.is_empty() || PRIMITIVES.contains(&base) {
            continue;
        }
        let full = match base {
            "Header" => "std_msgs/Header".to_string(),
            _ if base.contains('/') => match split_type(base) {
                Some((p, n)) => format!("{p}/{n}"),
                None => continue,
            },
            _ => format!("{package}/{base}"),
        };
        if !out.contains(&full) {
            out.push(full);
        }
    }
    out
}

/// The ros2msg schema of `type_name`, with `read(package, name)` giving a
/// type's .msg text. Err names the first type whose text is missing.
pub(crate) fn schema_text(
    type_name: &str,
    read: impl Fn(&str, &str) -> Option<String>,
) -> Result<String, String> {
    let (package, name) = split_type(type_name)
        .ok_or_else(|| format!("'{type_name}' is not a message type name (pkg/msg/Type)"))?;
    let main = read(package, name)
        .ok_or_else(|| format!("no definition of {package}/msg/{name} found"))?;
    let mut out = main.trim_end().to_string();
    out.push('\n');
    let mut seen: HashSet<String> = HashSet::from([format!("{package}/{name}")]);
    let mut queue: VecDeque<String> = dependencies(&main, package).into();
    while let Some(dependency) = queue.pop_front() {
        if !seen.insert(dependency.clone()) {
            continue;
        }
        let (dep_package, dep_name) = split_type(&dependency).expect("dependencies are pkg/Type");
        let text = read(dep_package, dep_name).ok_or_else(|| {
            format!("no definition of {dep_package}/msg/{dep_name} (used by {type_name}) found")
        })?;
        out.push_str(SEPARATOR);
        out.push_str(&format!("\nMSG: {dependency}\n"));
        out.push_str(text.trim_end());
        out.push('\n');
        queue.extend(dependencies(&text, dep_package));
    }
    Ok(out)
}

/// The ament prefixes to look in: `AMENT_PREFIX_PATH` (a sourced ROS, or
/// the node's environment), then `fallback` (the prefix the bridge was
/// built against), each once.
pub fn prefixes(fallback: Option<&str>) -> Vec<PathBuf> {
    let mut out: Vec<PathBuf> = Vec::new();
    let from_env = std::env::var("AMENT_PREFIX_PATH").unwrap_or_default();
    for prefix in from_env.split(':').chain(fallback.unwrap_or("").split(':')) {
        let prefix = PathBuf::from(prefix);
        if !prefix.as_os_str().is_empty() && !out.contains(&prefix) {
            out.push(prefix);
        }
    }
    out
}

/// Reads `<prefix>/share/<package>/msg/<name>.msg` from the first prefix that has it.
pub(crate) fn read_installed(prefixes: &[PathBuf], package: &str, name: &str) -> Option<String> {
    prefixes.iter().find_map(|prefix| {
        std::fs::read_to_string(
            Path::new(prefix).join("share").join(package).join("msg").join(format!("{name}.msg")),
        )
        .ok()
    })
}

/// The ros2msg schema of `type_name` from the installed packages.
pub fn installed_schema(type_name: &str, prefixes: &[PathBuf]) -> Result<String, String> {
    schema_text(type_name, |package, name| read_installed(prefixes, package, name)).map_err(|e| {
        format!(
            "{e} (looked in {})",
            prefixes.iter().map(|p| p.display().to_string()).collect::<Vec<_>>().join(":")
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn texts(package: &str, name: &str) -> Option<String> {
        let text = match (package, name) {
            ("sensor_msgs", "Image") => {
                "# An image\nstd_msgs/Header header # stamp\nuint32 height\nuint8[] data\n"
            }
            ("std_msgs", "Header") => "builtin_interfaces/Time stamp\nstring frame_id\n",
            ("builtin_interfaces", "Time") => "int32 sec\nuint32 nanosec\n",
            ("geo", "Pose") => "Point position\nPoint[<=3] others\nstring<=8 name\nuint8 KIND=1\n",
            ("geo", "Point") => "float64 x\n",
            _ => return None,
        };
        Some(text.to_string())
    }

    #[test]
    fn type_names_split_with_or_without_msg() {
        assert_eq!(split_type("sensor_msgs/msg/Image"), Some(("sensor_msgs", "Image")));
        assert_eq!(split_type("std_msgs/Header"), Some(("std_msgs", "Header")));
        assert_eq!(split_type("Image"), None);
        assert_eq!(split_type("a/srv/B"), None);
    }

    #[test]
    fn dependencies_skip_primitives_constants_and_comments_and_resolve_bare_names() {
        assert_eq!(dependencies(&texts("geo", "Pose").unwrap(), "geo"), vec!["geo/Point"]);
        assert_eq!(
            dependencies("Header h\n# geo/Comment c\nbuiltin_interfaces/msg/Time t\n", "x"),
            vec!["std_msgs/Header", "builtin_interfaces/Time"]
        );
    }

    #[test]
    fn the_schema_is_the_text_then_each_dependency_once_after_a_separator() {
        let schema = schema_text("sensor_msgs/msg/Image", texts).unwrap();
        let expected = format!(
            "# An image\nstd_msgs/Header header # stamp\nuint32 height\nuint8[] data\n{SEPARATOR}\nMSG: std_msgs/Header\nbuiltin_interfaces/Time stamp\nstring frame_id\n{SEPARATOR}\nMSG: builtin_interfaces/Time\nint32 sec\nuint32 nanosec\n"
        );
        assert_eq!(schema, expected);
        assert_eq!(SEPARATOR.len(), 80);
    }

    #[test]
    fn a_missing_definition_is_named() {
        let error = schema_text("geo/msg/Missing", texts).unwrap_err();
        assert!(error.contains("geo/msg/Missing"), "{error}");
        let error =
            schema_text(
                "sensor_msgs/msg/Image",
                |p, n| if n == "Time" { None } else { texts(p, n) },
            )
            .unwrap_err();
        assert!(
            error.contains("builtin_interfaces/msg/Time")
                && error.contains("sensor_msgs/msg/Image"),
            "{error}"
        );
    }
}
