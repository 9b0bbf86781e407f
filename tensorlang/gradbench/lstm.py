"""GradBench's ``lstm``: the loss of a stacked LSTM (ADBench's, whose weight matrices are diagonal: each gate is
an elementwise affine function of the input or the hidden state) predicting each character of a text from
the one before, and its gradient in the layers' weights and biases (``main_params``, one row of weights
and one of biases per layer) and in the input, output weights and output bias (``extra_params``).

The loss is NumPy, the layers one after another, each over the whole text (each character's step reads
the layer below at that character and the layer's own state at the one before, so this is ADBench's order
of work regrouped); the predictions and their log-softmax are computed for all characters at once.  ADBench's
log-sum-exp has a quirk kept here: ``log(2 + sum(exp(y)))``.  The gradient is ``ad.grad`` of the loss in
both parameter arrays (reverse mode through the loops, their values kept on a stack): written as a loop
over the characters with the layers inside it, it took 4x as long (1.7 s against 6.9 s at 2 layers and
1,024 characters), the per-operation cost of the generated code being paid on 7-entry vectors."""
from __future__ import annotations

import numpy as np

from .. import ad
from .runs import Function


def sigmoid(x):
    return 1.0 / (1.0 + np.exp(-x))


def layer(weight, bias, hidden, memory, xs):
    """One layer over the whole sequence of its inputs ``xs`` (a row per character): its hidden states.
    The forget and output gates read only the input, so they are computed for every character at once;
    the input and change gates read the hidden state, a Python loop over the characters."""
    b = len(hidden)
    forget = sigmoid(xs * weight[:b] + bias[:b])
    outgate = sigmoid(xs * weight[2 * b:3 * b] + bias[2 * b:3 * b])
    w_in, b_in, w_change, b_change = weight[b:2 * b], bias[b:2 * b], weight[3 * b:], bias[3 * b:]
    hiddens = []
    for t in range(len(xs)):
        memory = memory * forget[t] + sigmoid(hidden * w_in + b_in) * np.tanh(hidden * w_change + b_change)
        hidden = outgate[t] * np.tanh(memory)
        hiddens.append(hidden)
    return np.stack(hiddens)


def loss(main_params, extra_params, state, sequence):
    xs = sequence[:-1] * extra_params[0]
    for i in range(len(main_params) // 2):
        xs = layer(main_params[2 * i], main_params[2 * i + 1], state[2 * i], state[2 * i + 1], xs)
    ypred = xs * extra_params[1] + extra_params[2]
    ynorm = ypred - np.log(2.0 + np.sum(np.exp(ypred), axis=1, keepdims=True))
    return -np.sum(sequence[1:] * ynorm) / sequence[1:].size


_GRADIENT = ad.grad(loss, argnums=(0, 1))


def _inputs(raw) -> tuple:
    return tuple(np.asarray(raw[name], dtype=np.float64) for name in ("main_params", "extra_params", "state", "sequence"))


def define() -> dict:
    return {"objective": Function(_inputs, loss, float),
            "jacobian": Function(_inputs, _GRADIENT, lambda g: np.concatenate((g[0].ravel(), g[1].ravel())).tolist())}
