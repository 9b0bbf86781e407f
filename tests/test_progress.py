"""Long work says what it is doing through ``logging`` (the logger ``tensorlang``): the stages of a
derivation and of a kernel's build with their times, at INFO once the call has run ``progress.SLOW``
seconds, and nothing at INFO for a quick call."""
import logging
import uuid

import tensorlang as tl
from tensorlang import progress


def _fresh_program():
    # a constant of its own, so that the kernel is not in the cache and the C compiler runs
    return tl.parse(f"x : [n]R; sum(i:n) x[i] * x[i] * {uuid.uuid4().int % 10**9}.5")


def test_a_slow_call_logs_its_stages_with_their_times(caplog, monkeypatch):
    monkeypatch.setattr(progress, "SLOW", 0.0)   # every call counts as slow
    caplog.set_level(logging.INFO, logger="tensorlang")
    e = _fresh_program()
    tl.compile(tl.grad(e, "x"))
    records = [r for r in caplog.records if r.name == "tensorlang" and r.levelno == logging.INFO]
    messages = [r.getMessage() for r in records]
    for stage in ("normalising to Tensor SSA", "deriving the adjoint", "simplifying", "generating c code",
                  "building kernel"):
        assert any(m.startswith(stage) and m.endswith(" ...") for m in messages), (stage, messages)
        assert any(m.startswith(stage) and m.endswith(" s") for m in messages), (stage, messages)
    assert any(m.startswith("tl.grad: done in ") for m in messages), messages
    assert any(m.startswith("tl.compile: done in ") for m in messages), messages
    assert any("C compiler" in m for m in messages if m.startswith("building kernel")), messages


def test_a_quick_call_logs_nothing_at_info(caplog):
    caplog.set_level(logging.INFO, logger="tensorlang")
    tl.grad(tl.parse("x : [n]R; sum(i:n) x[i] * x[i]"), "x")
    assert not [r for r in caplog.records if r.name == "tensorlang"]


def test_nested_public_calls_log_the_outermost_only(caplog, monkeypatch):
    monkeypatch.setattr(progress, "SLOW", 0.0)
    caplog.set_level(logging.INFO, logger="tensorlang")
    tl.certify(tl.parse("x : [n]R; sum(i:n) x[i] * x[i]"), "x", n=10)
    done = [r.getMessage() for r in caplog.records if "done in" in r.getMessage()]
    assert len(done) == 1 and done[0].startswith("tl.certify"), done
