"""Random compositions of the supported constructs, written as Python source text from a small grammar
(assignments, arithmetic, math calls, if/elif/else, conditional expressions, for over range and over
lists, while with break/continue, early return, list append, tuples, dicts, closures and helper calls),
executed, differentiated, and compared with central finite differences."""
import itertools
import linecache
import math

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tensorlang import ad

_COUNT = itertools.count()
VARS = ["x", "y", "a", "b"]


def helper(u, v):
    return u * math.tanh(v) + 0.5 * v


class Program:
    """Draws one function ``f(x, y)`` as source text."""

    def __init__(self, data):
        self.data = data
        self.lines = []

    def draw(self, strategy):
        return self.data.draw(strategy)

    def atom(self):
        if self.draw(st.booleans()):
            return self.draw(st.sampled_from(VARS))
        return repr(self.draw(st.sampled_from([0.5, 1.5, -0.75, 2.0])))

    def expr(self, depth=0):
        kind = self.draw(st.integers(0, 7 if depth < 2 else 0))
        if kind == 0:
            return self.atom()
        a, b = self.expr(depth + 1), self.expr(depth + 1)
        if kind == 1:
            return f"({a} + {b})"
        if kind == 2:
            return f"({a} - {b})"
        if kind == 3:
            return f"({a} * {b})"
        if kind == 4:
            return f"({a} / (1.0 + {b} * {b}))"
        if kind == 5:
            fn = self.draw(st.sampled_from(["math.sin", "math.cos", "math.tanh", "np.tanh"]))
            return f"{fn}({a})"
        if kind == 6:
            return f"({a} if {b} > 0.3 else {self.atom()})"
        return f"helper({a}, {b})"

    def stmt(self, indent, depth, in_loop):
        pad = "    " * indent
        v = self.draw(st.sampled_from(VARS[2:] + VARS[:1]))
        kind = self.draw(st.integers(0, 9 if depth < 2 else 1))
        if kind <= 1:
            self.lines.append(f"{pad}{v} = {self.expr()}")
        elif kind == 2:
            self.lines.append(f"{pad}if {self.expr()} > {self.atom()}:")
            self.block(indent + 1, depth + 1, in_loop)
            if self.draw(st.booleans()):
                self.lines.append(f"{pad}elif {self.expr()} < 0.2:")
                self.block(indent + 1, depth + 1, in_loop)
            self.lines.append(f"{pad}else:")
            self.block(indent + 1, depth + 1, in_loop)
        elif kind == 3:
            i = f"i{depth}"
            self.lines.append(f"{pad}for {i} in range({self.draw(st.integers(0, 3))}):")
            self.lines.append(f"{pad}    {v} = {v} * 0.5 + {i} * {self.expr()}")
            self.block(indent + 1, depth + 1, True)
        elif kind == 4:
            c = f"c{depth}"
            self.lines.append(f"{pad}{c} = 0")
            self.lines.append(f"{pad}while {c} < {self.draw(st.integers(1, 3))}:")
            self.lines.append(f"{pad}    {c} += 1")
            self.block(indent + 1, depth + 1, True)
        elif kind == 5 and in_loop:
            word = self.draw(st.sampled_from(["break", "continue"]))
            self.lines.append(f"{pad}if {self.expr()} > 0.8:")
            self.lines.append(f"{pad}    {word}")
        elif kind == 6:
            self.lines.append(f"{pad}if {self.expr()} > 1.2:")
            self.lines.append(f"{pad}    return {self.expr()}")
        elif kind == 7:
            self.lines.append(f"{pad}acc.append({self.expr()})")
        elif kind == 8:
            self.lines.append(f"{pad}t = ({self.expr()}, {v})")
            self.lines.append(f"{pad}d = {{'p': t[1], 'q': t[0]}}")
            self.lines.append(f"{pad}{v} = d['p'] * d['q']")
        elif kind == 9 and depth == 0 and not in_loop and f"g{len(self.lines)}" not in self.lines:
            g, k = f"g{len(self.lines)}", f"k{len(self.lines)}"
            self.lines.append(f"{pad}{k} = {v}")
            self.lines.append(f"{pad}{g} = lambda u: u * {self.draw(st.sampled_from([0.5, 1.5]))} + {k}")
            self.lines.append(f"{pad}for e in [x, {v}]:")
            self.lines.append(f"{pad}    {v} = {g}(e) * 0.5")
        else:
            self.lines.append(f"{pad}{v} = {self.expr()}")

    def block(self, indent, depth, in_loop):
        for _ in range(self.draw(st.integers(1, 3))):
            self.stmt(indent, depth, in_loop)

    def source(self):
        self.lines = ["def f(x, y):", "    a = x * 0.5", "    b = y + 0.25", "    acc = [x]"]
        self.block(1, 0, False)
        self.lines.append(f"    return {self.expr()} + sum(acc) * 0.1 + a * b")
        return "\n".join(self.lines) + "\n"


def compile_program(src):
    import numpy as np
    filename = f"<generated program {next(_COUNT)}>"
    linecache.cache[filename] = (len(src), None, src.splitlines(True), filename)
    env = {"math": math, "np": np, "helper": helper}
    exec(compile(src, filename, "exec"), env)
    return env["f"]


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data(), st.floats(-1.5, 1.5), st.floats(-1.5, 1.5))
def test_generated_programs_match_finite_differences(data, x, y):
    src = Program(data).source()
    assert_matches_differences(compile_program(src), x, y, src)


def assert_matches_differences(f, x, y, src):
    """``ad.gradient(f, x, y)`` against central differences, where f is smooth near the point."""
    gx, gy = ad.gradient(f, x, y)
    h = 1e-6
    for g, (up, down) in ((gx, ((x + h, y), (x - h, y))), (gy, ((x, y + h), (x, y - h)))):
        num = (f(*up) - f(*down)) / (2 * h)
        if abs(num) > 1e4:
            continue
        # a branch boundary within h of the point makes the difference quotient meaningless
        assert abs(g - num) <= 1e-4 * (1 + abs(num)) or _kinked(f, x, y), src


def _kinked(f, x, y):
    """Whether f is non-smooth near (x, y): one-sided differences with two step sizes disagree."""
    def slopes(h):
        return [(f(x + h, y) - f(x, y)) / h, (f(x, y) - f(x - h, y)) / h,
                (f(x, y + h) - f(x, y)) / h, (f(x, y) - f(x, y - h)) / h]
    a, b = slopes(1e-4), slopes(1e-7)
    return any(abs(p - q) > 1e-2 * (1 + abs(q)) for p, q in zip(a, b)) or abs(a[0] - a[1]) > 1e-2 * (1 + abs(a[0]))
