"""GradBench's ``ht``: hand tracking, the distances from observed points to a skinned hand model posed by 26
parameters ``theta`` (global rotation and translation, then the finger joints' angles), and their Jacobian.

The objective is NumPy over all bones and vertices at once: ``theta`` spread to each bone's Euler angles
by a constant index (no writes), the bones' rotations as stacks of 3 x 3 matrices, their transforms
composed down the skeleton (a Python loop over the bones, each after its parent), the vertices moved by
linear blend skinning (each vertex's weighted sum of its bones' transforms), then the global angle-axis
rotation and translation.  In the simple variant each point's error is from its vertex; in the
complicated one, from the point of its triangle at barycentric coordinates ``us`` (given per point).

The Jacobian has a column per parameter of ``theta`` (``ad.jacobian``: 26 forward-mode JVPs, as there are
fewer parameters than errors) and, in the complicated variant, two columns before them for ``us``: each
point's errors depend only on its own pair, so the two columns are two JVPs seeded with ones in every
point's first (second) coordinate."""
from __future__ import annotations

import functools

import numpy as np

from .. import ad
from .runs import Function


@functools.lru_cache(maxsize=4)
def spread(n_theta: int, n_bones: int) -> np.ndarray:
    """The ``(n_bones + 3, 3)`` indices into ``theta`` extended by 0 and 1 that give each bone's Euler angles
    (after the global rotation, scale and translation rows): each finger's first joint has two angles, its
    other two joints one, and the wrist, forearm and fingertips none."""
    zero, one = n_theta, n_theta + 1
    index = np.full((n_bones + 3, 3), zero)
    index[0], index[1], index[2] = (0, 1, 2), one, (3, 4, 5)
    i_theta, row = 6, 5
    for _ in range(5):
        for joint in range(3):
            index[row, 0] = i_theta
            i_theta += 1
            if joint == 0:
                index[row, 1] = i_theta
                i_theta += 1
            row += 1
        row += 1
    return index


_E = np.eye(3)


def plane_rotations(c, s, i, j):
    """The stack of rotations by the angles of cosines ``c`` and sines ``s`` in the plane of axes ``i``, ``j``."""
    plane = np.outer(_E[i], _E[i]) + np.outer(_E[j], _E[j])
    turn = np.outer(_E[j], _E[i]) - np.outer(_E[i], _E[j])
    return (_E - plane) + c[:, None, None] * plane + s[:, None, None] * turn


def euler_rotations(xzy):
    """``Rz Ry Rx`` for each row of angles, given in the order x, z, y."""
    tx, tz, ty = xzy[:, 0], xzy[:, 1], xzy[:, 2]
    return plane_rotations(np.cos(tz), np.sin(tz), 0, 1) @ plane_rotations(np.cos(ty), np.sin(ty), 2, 0) \
        @ plane_rotations(np.cos(tx), np.sin(tx), 1, 2)


def angle_axis_rotation(angle_axis):
    norm = np.sqrt(np.sum(angle_axis * angle_axis))
    if norm < 1e-4:
        return _E
    n = angle_axis / norm
    return np.cos(norm) * _E + (1.0 - np.cos(norm)) * np.outer(n, n) + np.sin(norm) * np.cross(_E, n)


def vertex_positions(theta, model):
    pose = np.concatenate((theta, [0.0, 1.0]))[spread(len(theta), len(model["parents"]))]
    rotations = euler_rotations(pose[3:])
    base = model["base_relatives"]
    relatives = np.concatenate((base[:, :, :3] @ rotations, base[:, :, 3:]), axis=2)
    absolutes = []
    for i, parent in enumerate(model["parents"]):
        absolutes.append(relatives[i] if parent == -1 else absolutes[parent] @ relatives[i])
    transforms = (np.stack(absolutes) @ model["inverse_base_absolutes"])[:, :3, :]
    blended = (model["weights"] @ transforms.reshape(len(transforms), 12)).reshape(-1, 3, 4)
    positions = np.sum(blended * model["base_positions"][:, None, :], axis=2)
    if model["is_mirrored"]:
        positions = positions * np.array([-1.0, 1.0, 1.0])
    return positions @ (angle_axis_rotation(pose[0]) * pose[1]).T + pose[2]


def errors(theta, us, data):
    """The ``(points, 3)`` errors: of each point from its vertex (no ``us``) or its triangle's point at ``us``."""
    positions = vertex_positions(theta, data["model"])
    if data["triangles"] is None:
        return data["points"] - positions[data["correspondences"]]
    corners = positions[data["triangles"]]                                   # (points, 3 corners, 3)
    hand = us[:, 0:1] * corners[:, 0] + us[:, 1:2] * corners[:, 1] + (1.0 - us[:, 0:1] - us[:, 1:2]) * corners[:, 2]
    return data["points"] - hand


def objective(theta, us, data):
    return errors(theta, us, data).ravel()


_THETA = ad.jacobian(objective)


def jacobian(theta, us, data):
    J = _THETA(theta, us, data)
    if data["triangles"] is None:
        return J
    columns = [ad.jvp(objective, (theta, us, data), (None, np.outer(np.ones(len(us)), _E[k, :2]), None))[1]
               for k in range(2)]
    return np.concatenate((np.stack(columns, axis=1), J), axis=1)


def _inputs(raw) -> tuple:
    model, data = raw["data"]["model"], raw["data"]
    arrays = {name: np.asarray(model[name], dtype=np.float64)
              for name in ("base_relatives", "inverse_base_absolutes", "base_positions", "weights")}
    triangles = np.asarray(model["triangles"], dtype=np.intp)
    model = {**arrays, "parents": [int(p) for p in model["parents"]], "is_mirrored": bool(model["is_mirrored"])}
    correspondences = np.asarray(data["correspondences"], dtype=np.intp)
    us = np.asarray(raw["us"], dtype=np.float64).reshape(-1, 2)
    complicated = len(us) > 0
    data = {"model": model, "points": np.asarray(data["points"], dtype=np.float64), "correspondences": correspondences,
            "triangles": triangles[correspondences] if complicated else None}
    return np.asarray(raw["theta"], dtype=np.float64), us, data


def define() -> dict:
    return {"objective": Function(_inputs, objective, lambda e: e.tolist()),
            "jacobian": Function(_inputs, jacobian, lambda J: J.tolist())}
