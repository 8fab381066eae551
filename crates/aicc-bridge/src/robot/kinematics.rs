//! Forward kinematics from the URDF (the single source of truth for the
//! robot's geometry): where the camera is, given the head's joint angles.
//! A movable joint between the two frames whose position is not given is
//! an error naming it, never counted as 0: a wrong pose would place
//! obstacles where they are not.
use std::collections::HashMap;

use nalgebra::{Isometry3, Translation3, Unit, UnitQuaternion, Vector3};

/// Why the URDF could not be read or a transform not be made.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum KinematicsError {
    /// The robot description is not XML.
    #[error("URDF is not valid XML: {0}")]
    NotXml(String),
    /// A joint element lacks something or holds a bad value.
    #[error("{0}")]
    BadJoint(String),
    /// A frame that no joint of the URDF connects.
    #[error("link '{0}' is not in the URDF")]
    UnknownLink(String),
    /// Following parents never reached the root.
    #[error("the URDF's joints form a loop")]
    Loop,
    /// Pointing the head: the geometry gives no direction.
    #[error("{0}")]
    NoDirection(&'static str),
    /// A movable joint between the two frames has no known position.
    #[error("joint {joint} (between '{frame}' and '{child}') has no known position")]
    UnknownJointPosition { joint: String, frame: String, child: String },
    /// The two links are in trees with different roots.
    #[error("links '{frame}' and '{child}' are not connected by the URDF's joints")]
    NotConnected { frame: String, child: String },
}

#[derive(Debug, Clone)]
struct Joint {
    name: String,
    kind: String,
    parent: String,
    origin: Isometry3<f64>,
    axis: Unit<Vector3<f64>>,
}

/// The robot's kinematic tree.
#[derive(Debug, Clone)]
pub struct Kinematics {
    /// Joint that has each link as its child.
    joint_of_child: HashMap<String, Joint>,
}

fn triple(text: Option<&str>, default: [f64; 3]) -> Result<[f64; 3], String> {
    let Some(text) = text else { return Ok(default) };
    let values: Vec<f64> = text
        .split_whitespace()
        .map(|v| v.parse::<f64>().map_err(|e| format!("'{text}': {e}")))
        .collect::<Result<_, _>>()?;
    values.try_into().map_err(|_| format!("'{text}' is not three numbers"))
}

impl Kinematics {
    pub fn from_urdf(text: &str) -> Result<Self, KinematicsError> {
        let document =
            roxmltree::Document::parse(text).map_err(|e| KinematicsError::NotXml(e.to_string()))?;
        let mut joint_of_child = HashMap::new();
        for node in document.root_element().children().filter(|n| n.has_tag_name("joint")) {
            let name = node
                .attribute("name")
                .ok_or_else(|| KinematicsError::BadJoint("a <joint> has no name".into()))?
                .to_string();
            let child_of = |tag: &str| node.children().find(|n| n.has_tag_name(tag));
            let joint_name = name.clone();
            let link = |tag: &str| {
                child_of(tag).and_then(|n| n.attribute("link")).map(str::to_owned).ok_or_else(
                    || {
                        KinematicsError::BadJoint(format!(
                            "joint {joint_name}: no <{tag} link=...>"
                        ))
                    },
                )
            };
            let origin = child_of("origin");
            let xyz = triple(origin.and_then(|o| o.attribute("xyz")), [0.0; 3])
                .map_err(|e| KinematicsError::BadJoint(format!("joint {name} origin xyz {e}")))?;
            let rpy = triple(origin.and_then(|o| o.attribute("rpy")), [0.0; 3])
                .map_err(|e| KinematicsError::BadJoint(format!("joint {name} origin rpy {e}")))?;
            let axis = triple(child_of("axis").and_then(|a| a.attribute("xyz")), [1.0, 0.0, 0.0])
                .map_err(|e| KinematicsError::BadJoint(format!("joint {name} axis {e}")))?;
            let joint = Joint {
                kind: node.attribute("type").unwrap_or("fixed").to_string(),
                parent: link("parent")?,
                origin: Isometry3::from_parts(
                    Translation3::new(xyz[0], xyz[1], xyz[2]),
                    UnitQuaternion::from_euler_angles(rpy[0], rpy[1], rpy[2]),
                ),
                axis: Unit::try_new(Vector3::new(axis[0], axis[1], axis[2]), 1e-9)
                    .ok_or_else(|| KinematicsError::BadJoint(format!("joint {name}: zero axis")))?,
                name,
            };
            joint_of_child.insert(link("child")?, joint);
        }
        Ok(Self { joint_of_child })
    }

    /// The links from `link` up to the root, `link` first.
    fn chain_to_root<'a>(&'a self, link: &'a str) -> Result<Vec<&'a str>, KinematicsError> {
        if !self.joint_of_child.contains_key(link)
            && !self.joint_of_child.values().any(|j| j.parent == link)
        {
            return Err(KinematicsError::UnknownLink(link.to_string()));
        }
        let mut chain = vec![link];
        let mut current = link;
        while let Some(joint) = self.joint_of_child.get(current) {
            current = joint.parent.as_str();
            chain.push(current);
            if chain.len() > self.joint_of_child.len() + 1 {
                return Err(KinematicsError::Loop);
            }
        }
        Ok(chain)
    }

    /// The joints from `frame` and from `child` up to the nearest link
    /// they share: the joints whose positions the transform depends on.
    fn paths<'a>(
        &'a self,
        frame: &str,
        child: &str,
    ) -> Result<(Vec<&'a Joint>, Vec<&'a Joint>), KinematicsError> {
        let up_from_frame = self.chain_to_root(frame)?;
        let up_from_child = self.chain_to_root(child)?;
        let common =
            up_from_child.iter().find(|link| up_from_frame.contains(link)).ok_or_else(|| {
                KinematicsError::NotConnected { frame: frame.to_string(), child: child.to_string() }
            })?;
        let joints_below = |chain: &[&str]| -> Vec<&'a Joint> {
            chain
                .iter()
                .take_while(|link| *link != common)
                .map(|link| &self.joint_of_child[*link])
                .collect()
        };
        Ok((joints_below(&up_from_frame), joints_below(&up_from_child)))
    }

    /// The movable joints whose positions the pose of `child` in `frame`
    /// depends on, child side first.
    pub fn movable_joints_between(
        &self,
        frame: &str,
        child: &str,
    ) -> Result<Vec<String>, KinematicsError> {
        let (from_frame, from_child) = self.paths(frame, child)?;
        Ok(from_child
            .into_iter()
            .chain(from_frame)
            .filter(|j| j.is_movable())
            .map(|j| j.name.clone())
            .collect())
    }

    /// Whether the URDF has a link of this name.
    pub fn has_link(&self, link: &str) -> bool {
        self.chain_to_root(link).is_ok()
    }

    /// The movable joints between the root and `link` (what moves it
    /// relative to the base), root first.
    pub fn joints_moving(&self, link: &str) -> Vec<String> {
        let mut joints = Vec::new();
        let mut current = link;
        while let Some(joint) = self.joint_of_child.get(current) {
            if joint.kind != "fixed" {
                joints.push(joint.name.clone());
            }
            current = &joint.parent;
            if joints.len() > 1000 {
                break;
            }
        }
        joints.reverse();
        joints
    }

    /// The limited joints (revolute, prismatic: not the wheels' continuous
    /// ones) that move `link` relative to the base.
    pub fn limited_joints_moving(&self, link: &str) -> Vec<String> {
        let continuous: Vec<&str> = self
            .joint_of_child
            .values()
            .filter(|j| j.kind == "continuous")
            .map(|j| j.name.as_str())
            .collect();
        self.joints_moving(link).into_iter().filter(|j| !continuous.contains(&j.as_str())).collect()
    }

    /// Each link that moves with a joint (a movable joint's child and what
    /// hangs from it), with its parent link, sorted: the robot's articulated
    /// parts (arm, head), for telling its own body in a depth image.
    pub fn articulated_links(&self) -> Vec<(String, String)> {
        let moves = |link: &str| {
            let mut current = link;
            let mut steps = 0;
            while let Some(joint) = self.joint_of_child.get(current) {
                if joint.kind != "fixed" {
                    return true;
                }
                current = &joint.parent;
                steps += 1;
                if steps > 1000 {
                    return false;
                }
            }
            false
        };
        let mut links: Vec<(String, String)> = self
            .joint_of_child
            .iter()
            .filter(|(child, _)| moves(child))
            .map(|(child, joint)| (joint.parent.clone(), child.clone()))
            .collect();
        links.sort();
        links
    }

    /// The pose of `child` expressed in `frame` (e.g. the camera's optical
    /// frame in base_footprint), with joint positions from `position`
    /// (radians or metres); a movable joint between them that `position`
    /// does not give is an error naming it.
    pub fn transform(
        &self,
        frame: &str,
        child: &str,
        position: &dyn Fn(&str) -> Option<f64>,
    ) -> Result<Isometry3<f64>, KinematicsError> {
        let (from_frame, from_child) = self.paths(frame, child)?;
        let pose_in_common = |joints: &[&Joint]| -> Result<Isometry3<f64>, KinematicsError> {
            let mut pose = Isometry3::identity();
            for joint in joints {
                let motion = if joint.is_movable() {
                    let q = position(&joint.name).filter(|q| q.is_finite()).ok_or_else(|| {
                        KinematicsError::UnknownJointPosition {
                            joint: joint.name.clone(),
                            frame: frame.to_string(),
                            child: child.to_string(),
                        }
                    })?;
                    joint.motion(q)
                } else {
                    Isometry3::identity()
                };
                pose = joint.origin * motion * pose;
            }
            Ok(pose)
        };
        Ok(pose_in_common(&from_frame)?.inverse() * pose_in_common(&from_child)?)
    }
}

impl Joint {
    fn is_movable(&self) -> bool {
        matches!(self.kind.as_str(), "revolute" | "continuous" | "prismatic")
    }

    /// The child's motion in the joint frame at position `q`.
    fn motion(&self, q: f64) -> Isometry3<f64> {
        match self.kind.as_str() {
            "revolute" | "continuous" => Isometry3::from_parts(
                Translation3::identity(),
                UnitQuaternion::from_axis_angle(&self.axis, q),
            ),
            "prismatic" => Isometry3::from_parts(
                Translation3::from(self.axis.into_inner() * q),
                UnitQuaternion::identity(),
            ),
            _ => Isometry3::identity(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const URDF: &str = include_str!("../../../../urdf/aicc_bot.urdf");

    #[test]
    fn the_camera_sits_on_the_head_and_looks_forward_when_the_head_is_centred() {
        let k = Kinematics::from_urdf(URDF).unwrap();
        let centred =
            k.transform("base_footprint", "camera_optical_frame", &|_| Some(0.0)).unwrap();
        // Optical z (viewing direction) is the base's +x; optical x (right) is -y.
        let view = centred.rotation * Vector3::z();
        let right = centred.rotation * Vector3::x();
        assert!((view - Vector3::x()).norm() < 1e-6, "{view}");
        assert!((right + Vector3::y()).norm() < 1e-6, "{right}");
        // Height from the URDF: 0.033 + 0.550 + 0.045 = 0.628 m.
        assert!(
            (centred.translation.vector.z - 0.628).abs() < 1e-6,
            "{}",
            centred.translation.vector
        );
    }

    #[test]
    fn the_articulated_links_are_those_a_joint_moves() {
        let links = Kinematics::from_urdf(URDF).unwrap().articulated_links();
        let children: Vec<&str> = links.iter().map(|(_, child)| child.as_str()).collect();
        for moving in [
            "head_pan_link",
            "camera_optical_frame",
            "end_effector_link",
            "gripper_left_link",
            "wheel_left_link",
        ] {
            assert!(children.contains(&moving), "{moving} missing from {children:?}");
        }
        for fixed in ["base_link", "base_scan", "bumper_link", "imu_link"] {
            assert!(!children.contains(&fixed), "{fixed} does not move: {children:?}");
        }
        let k = Kinematics::from_urdf(URDF).unwrap();
        assert_eq!(k.joints_moving("camera_optical_frame"), ["head_pan_joint", "head_tilt_joint"]);
        assert!(k.joints_moving("base_scan").is_empty());
    }

    #[test]
    fn panning_left_turns_the_view_left_and_tilting_down_looks_down() {
        let k = Kinematics::from_urdf(URDF).unwrap();
        let panned = k
            .transform("base_footprint", "camera_optical_frame", &|j| {
                Some(if j == "head_pan_joint" { std::f64::consts::FRAC_PI_2 } else { 0.0 })
            })
            .unwrap();
        assert!((panned.rotation * Vector3::z() - Vector3::y()).norm() < 1e-6);
        let tilted = k
            .transform("base_footprint", "camera_optical_frame", &|j| {
                Some(if j == "head_tilt_joint" { 0.5 } else { 0.0 })
            })
            .unwrap();
        assert!((tilted.rotation * Vector3::z()).z < -0.4, "positive tilt about +y looks down");
        assert!(k.transform("base_footprint", "no_such_link", &|_| None).is_err());
    }

    #[test]
    fn a_movable_joint_without_a_position_is_an_error_naming_it_never_zero() {
        let k = Kinematics::from_urdf(URDF).unwrap();
        let only_pan = |j: &str| (j == "head_pan_joint").then_some(0.3);
        let err = k.transform("base_footprint", "camera_optical_frame", &only_pan).unwrap_err();
        assert_eq!(
            err,
            KinematicsError::UnknownJointPosition {
                joint: "head_tilt_joint".into(),
                frame: "base_footprint".into(),
                child: "camera_optical_frame".into()
            }
        );
        assert!(err.to_string().contains("head_tilt_joint"), "{err}");
        let nan_tilt = |j: &str| Some(if j == "head_tilt_joint" { f64::NAN } else { 0.0 });
        assert!(matches!(
            k.transform("base_footprint", "camera_optical_frame", &nan_tilt),
            Err(KinematicsError::UnknownJointPosition { .. })
        ));
        // Only the joints between the two frames count: the arm and the wheels are not on the camera's way.
        assert_eq!(
            k.movable_joints_between("base_footprint", "camera_optical_frame").unwrap(),
            ["head_tilt_joint", "head_pan_joint"]
        );
        let head_only = |j: &str| j.starts_with("head_").then_some(0.0);
        assert!(k.transform("base_footprint", "camera_optical_frame", &head_only).is_ok());
        // Frames under the same moving link need no joint at all.
        assert_eq!(
            k.movable_joints_between("camera_link", "camera_optical_frame").unwrap(),
            Vec::<String>::new()
        );
        assert!(k.transform("camera_link", "camera_optical_frame", &|_| None).is_ok());
        assert!(k.has_link("camera_optical_frame") && !k.has_link("no_such_link"));
    }

    #[test]
    fn the_pose_between_two_moving_branches_needs_both_and_agrees_with_the_root_path() {
        let k = Kinematics::from_urdf(URDF).unwrap();
        let at = |j: &str| {
            Some(match j {
                "head_pan_joint" => 0.4,
                "head_tilt_joint" => -0.2,
                "joint1" => 0.7,
                "joint2" => 0.3,
                _ => 0.1,
            })
        };
        let direct = k.transform("camera_optical_frame", "end_effector_link", &at).unwrap();
        let via_base =
            k.transform("base_footprint", "camera_optical_frame", &at).unwrap().inverse()
                * k.transform("base_footprint", "end_effector_link", &at).unwrap();
        assert!(
            (direct.translation.vector - via_base.translation.vector).norm() < 1e-12
                && direct.rotation.angle_to(&via_base.rotation) < 1e-12
        );
        let joints = k.movable_joints_between("camera_optical_frame", "end_effector_link").unwrap();
        assert_eq!(
            joints,
            ["joint4", "joint3", "joint2", "joint1", "head_tilt_joint", "head_pan_joint"]
        );
    }
}
