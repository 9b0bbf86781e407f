"""GradBench's ``ba``: bundle adjustment's reprojection errors (``w_i (project(cam_i, X_i) - feat_i)`` for each
observation ``i`` of a point by a camera: Rodrigues rotation, perspective division, radial distortion) and
weight errors (``1 - w_i^2``), and their sparse Jacobian in the cameras, points and weights.

The residuals are one NumPy program over all observations at once (the cameras and points gathered per
observation, Rodrigues' two cases by ``np.where``).  Each observation's two errors depend on one camera,
one point and one weight, so its 2 x 15 block of the Jacobian is its row of 15 forward-mode JVPs
(``ad.jvp``), each seeded with one parameter in every camera (or point, or weight) at once: 15 passes over
the observations give every block.  The blocks are laid out as GradBench's ``SparseMat`` (rows by
observation, each error row holding its camera's 11 columns, its point's 3 and its weight's; then one row
per weight error), of which the eval takes the first 30 entries and the last of each list.

The input is one camera, point, weight and feature repeated (``n`` cameras, ``m`` points, ``p``
observations, observation ``i`` of camera ``i mod n`` and point ``i mod m``); the repetition is made in
``prepare`` and the work is done for every observation, as the eval asks."""
from __future__ import annotations

import numpy as np

from .. import ad
from .runs import Function

CAMERA, POINT = 11, 3
BLOCK = CAMERA + POINT + 1   # the columns of one error row: its camera's, its point's, its weight's


def rotate(rot, X):
    """Rodrigues' rotation of the points ``X`` by the angle-axis vectors ``rot`` (rows of both); a zero
    angle takes the first-order form ``X + rot x X``."""
    sqtheta = np.sum(rot * rot, axis=1, keepdims=True)
    zero = sqtheta == 0
    theta = np.sqrt(np.where(zero, 1.0, sqtheta))
    w = rot / theta
    costheta, sintheta = np.cos(theta), np.sin(theta)
    rotated = X * costheta + np.cross(w, X) * sintheta + w * (np.sum(w * X, axis=1, keepdims=True) * (1.0 - costheta))
    return np.where(zero, X + np.cross(rot, X), rotated)


def reprojection(cams, X, w, obs, feats):
    """The ``(p, 2)`` reprojection errors of the observations ``obs`` (camera and point indices)."""
    cam, pt = cams[obs[:, 0]], X[obs[:, 1]]
    Xcam = rotate(cam[:, 0:3], pt - cam[:, 3:6])
    proj = Xcam[:, 0:2] / Xcam[:, 2:3]
    rsq = np.sum(proj * proj, axis=1, keepdims=True)
    distorted = proj * (1.0 + cam[:, 9:10] * rsq + cam[:, 10:11] * rsq * rsq)
    return w[:, None] * (distorted * cam[:, 6:7] + cam[:, 7:9] - feats)


def weight_error(w):
    return 1.0 - w * w


def objective(cams, X, w, obs, feats):
    return reprojection(cams, X, w, obs, feats), weight_error(w)


def jacobian(cams, X, w, obs, feats):
    """GradBench's ``SparseMat`` of the Jacobian: ``(rows, cols, vals)``, ``rows`` the offsets of each row's
    entries (``3 p + 1`` of them)."""
    n, m, p = len(cams), len(X), len(w)
    seeds = [(np.broadcast_to(np.eye(CAMERA)[k], cams.shape), None, None) for k in range(CAMERA)] \
        + [(None, np.broadcast_to(np.eye(POINT)[k], X.shape), None) for k in range(POINT)] \
        + [(None, None, np.ones(p))]
    blocks = np.stack([ad.jvp(reprojection, (cams, X, w, obs, feats), (*seed, None, None))[1] for seed in seeds],
                      axis=2)                                                            # (p, 2, 15)
    columns = np.concatenate((CAMERA * obs[:, :1] + np.arange(CAMERA), CAMERA * n + POINT * obs[:, 1:] + np.arange(POINT),
                              CAMERA * n + POINT * m + np.arange(p)[:, None]), axis=1)    # (p, 15)
    _, w_d = ad.jvp(weight_error, (w,), (np.ones(p),))
    rows = np.concatenate((BLOCK * np.arange(2 * p + 1), 2 * p * BLOCK + np.arange(1, p + 1)))
    cols = np.concatenate((np.repeat(columns, 2, axis=0).ravel(), CAMERA * n + POINT * m + np.arange(p)))
    vals = np.concatenate((blocks.ravel(), w_d))
    return rows, cols, vals


def sparse_jacobian(cams, X, w, obs, feats):
    """The Jacobian as a ``scipy.sparse.csr_array``: rows the reprojection errors (two per observation, in
    order) then the weight errors, columns the cameras' parameters, the points' and the weights (GradBench's
    ``SparseMat`` is CSR already: its rows are the row pointers)."""
    import scipy.sparse as sp

    rows, cols, vals = jacobian(cams, X, w, obs, feats)
    return sp.csr_array((vals, cols, rows), shape=(len(rows) - 1, CAMERA * len(cams) + POINT * len(X) + len(w)))


def _inputs(raw) -> tuple:
    n, m, p = int(raw["n"]), int(raw["m"]), int(raw["p"])
    cams = np.tile(np.asarray(raw["cam"], dtype=np.float64), (n, 1))
    X = np.tile(np.asarray(raw["x"], dtype=np.float64), (m, 1))
    w = np.full(p, float(raw["w"]))
    feats = np.tile(np.asarray(raw["feat"], dtype=np.float64), (p, 1))
    obs = np.stack((np.arange(p) % n, np.arange(p) % m), axis=1)
    return cams, X, w, obs, feats


def _objective(errors) -> dict:
    reproj, w_err = errors
    return {"reproj_error": {"elements": reproj[0].tolist(), "repeated": len(reproj)},
            "w_err": {"element": float(w_err[0]), "repeated": len(w_err)}}


def _first_and_last(a, first=2 * BLOCK) -> list:
    return [*a[:first].tolist(), a[-1].item()]


def _jacobian(sparse) -> dict:
    rows, cols, vals = sparse
    return {"rows": _first_and_last(rows), "cols": _first_and_last(cols), "vals": _first_and_last(vals)}


def define() -> dict:
    return {"objective": Function(_inputs, objective, _objective), "jacobian": Function(_inputs, jacobian, _jacobian)}
