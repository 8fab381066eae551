//! Coordinate frames: the transforms the robot publishes (ROS `/tf` and
//! `/tf_static`), and the bundled URDF as the fallback for a robot that
//! publishes none.
//!
//! [`FrameGraph`] is the TF tree as received: for each child frame its
//! latest transform from its parent. Lookups use the latest transform of
//! each edge (no interpolation at a stamp): the bridge asks "where is the
//! camera now", and a dynamic edge older than the configured maximum makes
//! the lookup fail, naming the edge, rather than answer from old data.
//! [`Frames`] decides between TF and the URDF: once any transform has
//! arrived, TF is the only source, so a frame missing from it is an error
//! that names the frame, never a silent guess from the model. From the
//! URDF, a movable joint between the two frames must have a position in
//! joint states no older than `sensors.joint_states.max_age_s`: stale or
//! missing, the lookup fails naming the joint and the age (unknown, not 0).
use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::{Duration, Instant};

use nalgebra::Isometry3;
use parking_lot::RwLock;

use super::age::{Age, Now};
use super::kinematics::{Kinematics, KinematicsError};
use super::{JointStates, Stamped};

/// The robot's base frame (REP-105), in which obstacles and head aims are given.
pub(crate) const BASE_FRAME: &str = "base_footprint";

/// Why a transform between two frames is not known.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum FrameError {
    /// No transform names this frame (as parent or child).
    #[error("frame '{frame}' is not in the TF tree (frames known: {})", known_list(known))]
    UnknownFrame { frame: String, known: Vec<String> },
    /// Both frames exist but belong to trees with different roots.
    #[error("frames '{target}' and '{source_frame}' are not connected in the TF tree ('{target}' is under '{target_root}', '{source_frame}' under '{source_root}')")]
    NotConnected { target: String, source_frame: String, target_root: String, source_root: String },
    /// Following parents came back to a frame already visited.
    #[error("the TF tree has a loop: {}", frames.join(" -> "))]
    Loop { frames: Vec<String> },
    /// A transform on the path is older than allowed.
    #[error("transform {parent} -> {child} is stale: {age_s:.2} s old (max {max_age_s:.2} s)")]
    Stale { parent: String, child: String, age_s: f64, max_age_s: f64 },
    /// The URDF fallback could not answer.
    #[error("robot description (no TF received): {0}")]
    Urdf(#[from] KinematicsError),
    /// The URDF fallback needs a joint's position and the joint states
    /// cannot give it fresh: none received (`age_s` None: unknown), or
    /// older than allowed.
    #[error("robot description (no TF received): joint {joint} between '{target}' and '{source_frame}' has no fresh position: {}", joint_age_text(*age_s, *max_age_s))]
    StaleJoint {
        joint: String,
        target: String,
        source_frame: String,
        age_s: Option<f64>,
        max_age_s: f64,
    },
}

fn joint_age_text(age_s: Option<f64>, max_age_s: f64) -> String {
    match age_s {
        Some(age_s) => format!("joint states are {age_s:.2} s old (max {max_age_s:.2} s)"),
        None => "no joint states received (age unknown)".into(),
    }
}

fn known_list(known: &[String]) -> String {
    if known.is_empty() {
        "none".into()
    } else {
        known.join(", ")
    }
}

/// How many known frames an [`FrameError::UnknownFrame`] lists.
const KNOWN_FRAMES_LISTED: usize = 16;

/// One edge of the tree: the child's pose in its parent frame.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Edge {
    pub parent: String,
    pub transform: Isometry3<f64>,
    /// The message's stamp, node clock seconds.
    pub stamp_s: f64,
    pub received: Instant,
    /// From `/tf_static`: valid until replaced, never stale.
    pub is_static: bool,
}

/// A transform as received (one entry of a `tf2_msgs/TFMessage`).
#[derive(Debug, Clone, PartialEq)]
pub struct TransformSample {
    pub parent: String,
    pub child: String,
    pub transform: Isometry3<f64>,
    pub stamp_s: f64,
}

/// The TF tree as received: the latest transform to each child frame.
#[derive(Debug, Clone, Default)]
pub struct FrameGraph {
    by_child: HashMap<String, Edge>,
    received: u64,
    /// Transforms refused on arrival (a frame its own parent, a non-finite
    /// number), with the last reason, for diagnostics.
    refused: u64,
    last_refusal: Option<String>,
}

impl FrameGraph {
    /// Takes one received transform. Like tf2, the newest transform to a
    /// child replaces the one before, whatever its parent.
    pub fn insert(&mut self, sample: TransformSample, is_static: bool, received: Instant) {
        let TransformSample { parent, child, transform, stamp_s } = sample;
        let finite = transform
            .translation
            .vector
            .iter()
            .chain(transform.rotation.coords.iter())
            .all(|v| v.is_finite());
        let refusal = if parent.is_empty() || child.is_empty() {
            Some(format!("a transform with an empty frame name ('{parent}' -> '{child}')"))
        } else if parent == child {
            Some(format!("a transform from frame '{child}' to itself"))
        } else if !finite {
            Some(format!("transform {parent} -> {child} holds a non-finite number"))
        } else {
            None
        };
        if let Some(reason) = refusal {
            self.refused += 1;
            self.last_refusal = Some(reason);
            return;
        }
        self.received += 1;
        self.by_child.insert(child, Edge { parent, transform, stamp_s, received, is_static });
    }

    /// Whether any transform has been received.
    pub fn is_empty(&self) -> bool {
        self.by_child.is_empty()
    }

    fn knows(&self, frame: &str) -> bool {
        self.by_child.contains_key(frame) || self.by_child.values().any(|e| e.parent == frame)
    }

    /// Every frame named, sorted (for messages and diagnostics).
    pub fn frames(&self) -> Vec<String> {
        let mut frames: Vec<String> = self
            .by_child
            .keys()
            .cloned()
            .chain(self.by_child.values().map(|e| e.parent.clone()))
            .collect::<HashSet<_>>()
            .into_iter()
            .collect();
        frames.sort();
        frames
    }

    /// The frames from `frame` up to its root, `frame` first.
    fn chain_to_root(&self, frame: &str) -> Result<Vec<String>, FrameError> {
        let mut chain = vec![frame.to_string()];
        let mut seen: HashSet<&str> = HashSet::from([frame]);
        let mut current = frame;
        while let Some(edge) = self.by_child.get(current) {
            chain.push(edge.parent.clone());
            if !seen.insert(edge.parent.as_str()) {
                return Err(FrameError::Loop { frames: chain });
            }
            current = edge.parent.as_str();
        }
        Ok(chain)
    }

    /// The pose of `source` expressed in `target` (a point in `source`
    /// maps to `target` by it), from the latest transform of each edge on
    /// the path; a dynamic edge older than `max_age` fails the lookup.
    pub fn lookup(
        &self,
        target: &str,
        source: &str,
        now: Now,
        max_age: Duration,
    ) -> Result<Isometry3<f64>, FrameError> {
        for frame in [target, source] {
            if !self.knows(frame) {
                let mut known = self.frames();
                known.truncate(KNOWN_FRAMES_LISTED);
                return Err(FrameError::UnknownFrame { frame: frame.to_string(), known });
            }
        }
        let from_target = self.chain_to_root(target)?;
        let from_source = self.chain_to_root(source)?;
        let on_target_side: HashSet<&str> = from_target.iter().map(String::as_str).collect();
        let Some(common) = from_source.iter().find(|f| on_target_side.contains(f.as_str())) else {
            return Err(FrameError::NotConnected {
                target: target.into(),
                source_frame: source.into(),
                target_root: from_target.last().cloned().unwrap_or_default(),
                source_root: from_source.last().cloned().unwrap_or_default(),
            });
        };
        let target_in_common = self.pose_in_ancestor(&from_target, common, now, max_age)?;
        let source_in_common = self.pose_in_ancestor(&from_source, common, now, max_age)?;
        Ok(target_in_common.inverse() * source_in_common)
    }

    /// The pose of `chain[0]` in `ancestor`, which is on `chain`.
    fn pose_in_ancestor(
        &self,
        chain: &[String],
        ancestor: &str,
        now: Now,
        max_age: Duration,
    ) -> Result<Isometry3<f64>, FrameError> {
        let mut pose = Isometry3::identity();
        for child in chain.iter().take_while(|f| f.as_str() != ancestor) {
            let edge = &self.by_child[child];
            if !edge.is_static {
                let age = Age::of(edge.stamp_s, edge.received, now).effective();
                if age > max_age {
                    return Err(FrameError::Stale {
                        parent: edge.parent.clone(),
                        child: child.clone(),
                        age_s: age.as_secs_f64(),
                        max_age_s: max_age.as_secs_f64(),
                    });
                }
            }
            pose = edge.transform * pose;
        }
        Ok(pose)
    }

    /// What the tree holds, for diagnostics.
    pub fn summary(&self) -> FrameSummary {
        FrameSummary {
            frames: self.frames().len(),
            static_edges: self.by_child.values().filter(|e| e.is_static).count(),
            dynamic_edges: self.by_child.values().filter(|e| !e.is_static).count(),
            received: self.received,
            refused: self.refused,
            last_refusal: self.last_refusal.clone(),
        }
    }
}

/// The TF tree's size and health, for diagnostics and `bridge_status`.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct FrameSummary {
    pub frames: usize,
    pub static_edges: usize,
    pub dynamic_edges: usize,
    pub received: u64,
    pub refused: u64,
    pub last_refusal: Option<String>,
}

/// The TF tree shared between the adapter that fills it and the bridge.
#[derive(Debug, Clone, Default)]
pub struct SharedFrames(Arc<RwLock<FrameGraph>>);

impl SharedFrames {
    /// Takes the transforms of one `/tf` (or `/tf_static`) message.
    pub fn insert_all(
        &self,
        samples: impl IntoIterator<Item = TransformSample>,
        is_static: bool,
        received: Instant,
    ) {
        let mut graph = self.0.write();
        for sample in samples {
            graph.insert(sample, is_static, received);
        }
    }

    pub fn read(&self) -> parking_lot::RwLockReadGuard<'_, FrameGraph> {
        self.0.read()
    }
}

/// Where a transform came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum FrameSource {
    /// The robot's `/tf` and `/tf_static`.
    Tf,
    /// The bundled URDF with the latest joint states (no TF received).
    Urdf,
}

/// The bridge's view of frames: TF when the robot publishes it, else the URDF.
#[derive(Clone)]
pub(crate) struct Frames {
    pub tf: SharedFrames,
    pub urdf: Arc<Kinematics>,
    /// The age past which a dynamic transform is not used.
    pub max_age: Duration,
    /// The age past which joint states do not place frames (URDF fallback).
    pub joint_states_max_age: Duration,
}

impl Frames {
    /// Which source a lookup uses now.
    pub fn source(&self) -> FrameSource {
        if self.tf.read().is_empty() {
            FrameSource::Urdf
        } else {
            FrameSource::Tf
        }
    }

    /// The pose of `source` in `target` now, from TF, or (no TF received)
    /// from the URDF at the positions of `joints` (the latest joint states:
    /// `&Option<Stamped<JointStates>>` as the sensor port gives them, or
    /// `Some(&sample)`), which must be fresh wherever a movable joint lies
    /// between the two frames.
    pub fn lookup<'a>(
        &self,
        target: &str,
        source: &str,
        joints: impl Into<Option<&'a Stamped<JointStates>>>,
        now: Now,
    ) -> Result<(Isometry3<f64>, FrameSource), FrameError> {
        let graph = self.tf.read();
        if graph.is_empty() {
            drop(graph);
            let joints = joints.into();
            let needed = self.urdf.movable_joints_between(target, source)?;
            if let Some(joint) = needed.first() {
                let age_s = joints.map(|j| j.age(now).effective().as_secs_f64());
                let max_age_s = self.joint_states_max_age.as_secs_f64();
                if age_s.is_none_or(|age_s| age_s > max_age_s) {
                    return Err(FrameError::StaleJoint {
                        joint: joint.clone(),
                        target: target.into(),
                        source_frame: source.into(),
                        age_s,
                        max_age_s,
                    });
                }
            }
            let pose = self
                .urdf
                .transform(target, source, &|joint| joints.and_then(|j| j.value.position(joint)))?;
            return Ok((pose, FrameSource::Urdf));
        }
        Ok((graph.lookup(target, source, now, self.max_age)?, FrameSource::Tf))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use nalgebra::{Point3, Translation3, UnitQuaternion};

    fn now_at(t0: Instant, clock_s: f64) -> Now {
        Now { instant: t0, clock_s: Some(clock_s) }
    }

    fn edge(parent: &str, child: &str, xyz: [f64; 3], yaw: f64, stamp_s: f64) -> TransformSample {
        TransformSample {
            parent: parent.into(),
            child: child.into(),
            transform: Isometry3::from_parts(
                Translation3::new(xyz[0], xyz[1], xyz[2]),
                UnitQuaternion::from_euler_angles(0.0, 0.0, yaw),
            ),
            stamp_s,
        }
    }

    /// odom -> base_footprint (dynamic) -> base_link -> head (dynamic) -> camera; plus an arm branch.
    fn robot(t0: Instant) -> FrameGraph {
        let mut g = FrameGraph::default();
        g.insert(
            edge("odom", "base_footprint", [1.0, 0.0, 0.0], std::f64::consts::FRAC_PI_2, 10.0),
            false,
            t0,
        );
        g.insert(edge("base_footprint", "base_link", [0.0, 0.0, 0.1], 0.0, 0.0), true, t0);
        g.insert(
            edge("base_link", "head", [0.1, 0.0, 0.3], std::f64::consts::FRAC_PI_2, 10.0),
            false,
            t0,
        );
        g.insert(edge("head", "camera", [0.05, 0.0, 0.0], 0.0, 0.0), true, t0);
        g.insert(edge("base_link", "arm", [-0.1, 0.0, 0.2], 0.0, 0.0), true, t0);
        g
    }

    #[test]
    fn a_chain_composes_parent_to_child() {
        let t0 = Instant::now();
        let g = robot(t0);
        let pose =
            g.lookup("base_footprint", "camera", now_at(t0, 10.1), Duration::from_secs(1)).unwrap();
        // camera origin: head at (0.1, 0, 0.4), then 0.05 along the head's x, which is yawed to +y.
        let origin = pose * Point3::origin();
        assert!((origin - Point3::new(0.1, 0.05, 0.4)).norm() < 1e-9, "{origin}");
        let in_odom = g.lookup("odom", "camera", now_at(t0, 10.1), Duration::from_secs(1)).unwrap()
            * Point3::origin();
        // base yawed +90 degrees in odom at (1, 0): base +x is odom +y, base +y is odom -x.
        assert!((in_odom - Point3::new(1.0 - 0.05, 0.1, 0.4)).norm() < 1e-9, "{in_odom}");
    }

    #[test]
    fn a_lookup_across_branches_goes_through_the_common_ancestor() {
        let t0 = Instant::now();
        let g = robot(t0);
        let camera_in_arm =
            g.lookup("arm", "camera", now_at(t0, 10.0), Duration::from_secs(1)).unwrap();
        let arm_in_camera =
            g.lookup("camera", "arm", now_at(t0, 10.0), Duration::from_secs(1)).unwrap();
        assert!(
            (camera_in_arm * arm_in_camera).translation.vector.norm() < 1e-9,
            "inverse lookups compose to identity"
        );
        let p = camera_in_arm * Point3::origin();
        assert!((p - Point3::new(0.2, 0.05, 0.1)).norm() < 1e-9, "{p}");
        assert_eq!(
            g.lookup("camera", "camera", now_at(t0, 10.0), Duration::from_secs(1)).unwrap(),
            Isometry3::identity()
        );
    }

    #[test]
    fn an_unknown_frame_is_named_with_the_frames_known() {
        let t0 = Instant::now();
        let err = robot(t0)
            .lookup(
                "base_footprint",
                "oakd_rgb_camera_optical_frame",
                now_at(t0, 10.0),
                Duration::from_secs(1),
            )
            .unwrap_err();
        let text = err.to_string();
        assert!(text.starts_with("frame 'oakd_rgb_camera_optical_frame' is not in the TF tree (frames known: arm, base_footprint, base_link, camera, head, odom)"), "{text}");
    }

    #[test]
    fn disconnected_trees_name_both_roots() {
        let t0 = Instant::now();
        let mut g = robot(t0);
        g.insert(edge("map", "marker", [0.0; 3], 0.0, 0.0), true, t0);
        let err =
            g.lookup("camera", "marker", now_at(t0, 10.0), Duration::from_secs(1)).unwrap_err();
        assert_eq!(
            err,
            FrameError::NotConnected {
                target: "camera".into(),
                source_frame: "marker".into(),
                target_root: "odom".into(),
                source_root: "map".into()
            }
        );
    }

    #[test]
    fn a_loop_is_reported_by_its_frames() {
        let t0 = Instant::now();
        let mut g = robot(t0);
        // odom re-parented under the camera: odom -> base_footprint -> ... -> camera -> odom.
        g.insert(edge("camera", "odom", [0.0; 3], 0.0, 10.0), false, t0);
        let err = g
            .lookup("base_footprint", "camera", now_at(t0, 10.0), Duration::from_secs(1))
            .unwrap_err();
        let FrameError::Loop { frames } = &err else { panic!("{err}") };
        assert_eq!(frames.first(), frames.last(), "{frames:?}");
        assert!(err.to_string().contains("odom -> camera -> head -> base_link"), "{err}");
    }

    #[test]
    fn a_stale_dynamic_edge_fails_the_lookup_and_static_edges_never_age() {
        let t0 = Instant::now();
        let g = robot(t0);
        let err = g
            .lookup("base_footprint", "camera", now_at(t0, 11.5), Duration::from_secs(1))
            .unwrap_err();
        assert_eq!(
            err.to_string(),
            "transform base_link -> head is stale: 1.50 s old (max 1.00 s)"
        );
        // Only static edges between base_link and the arm: no age applies.
        assert!(g.lookup("base_link", "arm", now_at(t0, 1000.0), Duration::from_secs(1)).is_ok());
        // The edge not on the path does not matter: odom is stale, head is not needed.
        let mut fresh_head = robot(t0);
        fresh_head.insert(edge("base_link", "head", [0.1, 0.0, 0.3], 0.0, 11.4), false, t0);
        assert!(fresh_head
            .lookup("base_link", "camera", now_at(t0, 11.5), Duration::from_secs(1))
            .is_ok());
        assert!(fresh_head
            .lookup("odom", "camera", now_at(t0, 11.5), Duration::from_secs(1))
            .is_err());
    }

    #[test]
    fn bad_transforms_are_refused_and_counted() {
        let t0 = Instant::now();
        let mut g = FrameGraph::default();
        g.insert(edge("a", "a", [0.0; 3], 0.0, 0.0), false, t0);
        g.insert(edge("a", "b", [f64::NAN, 0.0, 0.0], 0.0, 0.0), false, t0);
        g.insert(edge("", "b", [0.0; 3], 0.0, 0.0), false, t0);
        assert!(g.is_empty());
        let s = g.summary();
        assert_eq!((s.received, s.refused), (0, 3));
        assert!(s.last_refusal.unwrap().contains("empty frame name"));
    }

    #[test]
    fn frames_fall_back_to_the_urdf_only_while_no_tf_has_arrived() {
        let frames = urdf_frames();
        let t0 = Instant::now();
        let joints = Some(head_states(1.0, t0));
        let (pose, via) = frames
            .lookup("base_footprint", "camera_optical_frame", &joints, now_at(t0, 1.0))
            .unwrap();
        assert_eq!(via, FrameSource::Urdf);
        assert!(pose.translation.vector.z > 0.1, "the camera is above the floor");
        frames.tf.insert_all([edge("odom", "base_footprint", [0.0; 3], 0.0, 1.0)], false, t0);
        let err = frames
            .lookup("base_footprint", "camera_optical_frame", &joints, now_at(t0, 1.0))
            .unwrap_err();
        assert!(
            matches!(err, FrameError::UnknownFrame { ref frame, .. } if frame == "camera_optical_frame"),
            "{err}"
        );
        assert_eq!(frames.source(), FrameSource::Tf);
    }

    fn urdf_frames() -> Frames {
        let urdf = Arc::new(
            Kinematics::from_urdf(include_str!("../../../../urdf/aicc_bot.urdf")).unwrap(),
        );
        Frames {
            tf: SharedFrames::default(),
            urdf,
            max_age: Duration::from_secs(1),
            joint_states_max_age: Duration::from_millis(500),
        }
    }

    /// The head's joints at zero, stamped `stamp_s` (node clock), received at `received`.
    fn head_states(stamp_s: f64, received: Instant) -> Stamped<JointStates> {
        let value = JointStates {
            names: vec!["head_pan_joint".into(), "head_tilt_joint".into()],
            positions: vec![0.0, 0.0],
            ..JointStates::default()
        };
        Stamped { value, frame_id: String::new(), stamp_s, received }
    }

    #[test]
    fn without_tf_stale_or_missing_joint_states_fail_the_lookup_naming_the_joint_and_the_age() {
        let frames = urdf_frames();
        let t0 = Instant::now();
        let fresh = head_states(10.0, t0);
        assert!(frames
            .lookup("base_footprint", "camera_optical_frame", Some(&fresh), now_at(t0, 10.4))
            .is_ok());
        // Captured 0.8 s ago: too old to place the camera.
        let err = frames
            .lookup("base_footprint", "camera_optical_frame", Some(&fresh), now_at(t0, 10.8))
            .unwrap_err();
        assert!(
            matches!(err, FrameError::StaleJoint { ref joint, age_s: Some(age_s), .. } if joint == "head_tilt_joint" && (age_s - 0.8).abs() < 1e-9),
            "{err}"
        );
        assert!(
            err.to_string().contains("head_tilt_joint")
                && err.to_string().contains("0.80 s old (max 0.50 s)"),
            "{err}"
        );
        // None received: the age is unknown, never a pose at zero.
        let err = frames
            .lookup(
                "base_footprint",
                "camera_optical_frame",
                None::<&Stamped<JointStates>>,
                now_at(t0, 10.0),
            )
            .unwrap_err();
        assert!(matches!(err, FrameError::StaleJoint { age_s: None, .. }), "{err}");
        assert!(err.to_string().contains("no joint states received (age unknown)"), "{err}");
        // Fresh but without the tilt joint: named, not counted as 0.
        let pan_only = Stamped {
            value: JointStates {
                names: vec!["head_pan_joint".into()],
                positions: vec![0.0],
                ..JointStates::default()
            },
            ..fresh.clone()
        };
        let err = frames
            .lookup("base_footprint", "camera_optical_frame", Some(&pan_only), now_at(t0, 10.1))
            .unwrap_err();
        assert!(
            matches!(err, FrameError::Urdf(KinematicsError::UnknownJointPosition { ref joint, .. }) if joint == "head_tilt_joint"),
            "{err}"
        );
        // No movable joint between the frames: joint states do not matter.
        assert!(frames
            .lookup("base_footprint", "base_scan", None::<&Stamped<JointStates>>, now_at(t0, 10.0))
            .is_ok());
    }
}
