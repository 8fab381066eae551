"""Offscreen RGB-D rendering of a MuJoCo camera, and its pinhole intrinsics.

One render pass gives both images (mujoco.Renderer would render twice for
RGB and depth). The depth buffer is converted to metric depth along the
optical axis (the z of REP-103's optical frame), the same conversion
mujoco.Renderer applies in depth mode. Pixels beyond the camera's range,
with no surface or showing the skybox (which MuJoCo draws far away, see
urdf_to_mjcf.SKYBOX_DISTANCE_FACTOR) read +inf, as REP-117 asks.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import mujoco
import numpy as np


@dataclass(frozen=True)
class Intrinsics:
    width_px: int
    height_px: int
    fx_px: float
    fy_px: float
    cx_px: float
    cy_px: float

    @classmethod
    def from_fovy(cls, width_px: int, height_px: int, fovy_deg: float) -> "Intrinsics":
        # MuJoCo's frustum spans the whole image height at fovy, pixels are
        # square; pixel centres sit at integer coordinates (ROS/OpenCV).
        focal_px = (height_px / 2.0) / math.tan(math.radians(fovy_deg) / 2.0)
        return cls(width_px, height_px, focal_px, focal_px, (width_px - 1) / 2.0, (height_px - 1) / 2.0)

    def k(self) -> list[float]:
        return [self.fx_px, 0.0, self.cx_px, 0.0, self.fy_px, self.cy_px, 0.0, 0.0, 1.0]

    def p(self) -> list[float]:
        return [self.fx_px, 0.0, self.cx_px, 0.0, 0.0, self.fy_px, self.cy_px, 0.0, 0.0, 0.0, 1.0, 0.0]


class RgbdCamera:
    """Renders one fixed MuJoCo camera into RGB (uint8 HxWx3) and depth
    (float32 HxW, metres, +inf where nothing was hit)."""

    def __init__(self, model: mujoco.MjModel, camera_name: str, width_px: int, height_px: int, max_range_m: float):
        self.model = model
        self.width_px, self.height_px = width_px, height_px
        camera_id = mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_CAMERA, camera_name)
        if camera_id < 0:
            raise ValueError(f"no camera named {camera_name}")
        self.intrinsics = Intrinsics.from_fovy(width_px, height_px, float(model.cam_fovy[camera_id]))
        self._gl = mujoco.GLContext(width_px, height_px)
        self._gl.make_current()
        self._scene = mujoco.MjvScene(model, maxgeom=1000)
        self._option = mujoco.MjvOption()
        self._camera = mujoco.MjvCamera()
        self._camera.type = mujoco.mjtCamera.mjCAMERA_FIXED
        self._camera.fixedcamid = camera_id
        self._context = mujoco.MjrContext(model, mujoco.mjtFontScale.mjFONTSCALE_100)
        mujoco.mjr_setBuffer(mujoco.mjtFramebuffer.mjFB_OFFSCREEN, self._context)
        # Reversed-Z depth buffer: 1 at the near plane, 0 at the far plane.
        self._context.readDepthMap = mujoco.mjtDepthMap.mjDEPTH_ZEROFAR
        self._rect = mujoco.MjrRect(0, 0, width_px, height_px)
        self._rgb = np.empty((height_px, width_px, 3), dtype=np.uint8)
        self._depth_buffer = np.empty((height_px, width_px), dtype=np.float32)
        self.near_m = float(model.vis.map.znear * model.stat.extent)
        self.far_m = float(model.vis.map.zfar * model.stat.extent)
        self.max_range_m = min(max_range_m, self.far_m)

    def render(self, data: mujoco.MjData) -> tuple[np.ndarray, np.ndarray]:
        self._gl.make_current()
        mujoco.mjv_updateScene(self.model, data, self._option, None, self._camera,
                               mujoco.mjtCatBit.mjCAT_ALL, self._scene)
        mujoco.mjr_render(self._rect, self._scene, self._context)
        mujoco.mjr_readPixels(self._rgb, self._depth_buffer, self._rect, self._context)
        # OpenGL rows run bottom-up; images run top-down.
        rgb = np.flipud(self._rgb).copy()
        depth_m = self.metric_depth(np.flipud(self._depth_buffer))
        return rgb, depth_m

    def metric_depth(self, buffer: np.ndarray) -> np.ndarray:
        """Reversed-Z buffer value b in [0, 1] -> distance along the optical
        axis: inverting the perspective projection gives
        depth = far * near / (b * (far - near) + near)."""
        near, far = self.near_m, self.far_m
        depth_m = (far * near) / (buffer.astype(np.float64) * (far - near) + near)
        depth_m[depth_m > self.max_range_m] = np.inf
        return depth_m.astype(np.float32)

    def close(self) -> None:
        if self._context is not None:
            self._gl.make_current()
            self._context.free()
            self._context = None
            self._gl.free()
