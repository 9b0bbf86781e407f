"""``tl-cost`` (docs/derive.md): the certificate, JSON, symbolic costs, exit codes 0/1/2 and the
caret on bad input."""
import json
import os
import shutil
import subprocess
import sys

import pytest

from tensorlang.cli import main
from tensorlang.derive.api import Certificate

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CONV = os.path.join(ROOT, "examples", "conv.tl")


def test_conv_certificate_exits_0(capsys):
    assert main([CONV, "--wrt", "x", "--size", "n=1000", "--size", "m=16"]) == 0
    out = capsys.readouterr().out
    assert "certificate for wrt x at n = 1000, m = 16: ok" in out
    for row in ("primal cost", "forward cost", "adjoint cost", "$_IO(primal)", "$_IO(adjoint)",
                "forward / primal", "$_IO(adjoint) / $_IO(primal)", "Theorem 6.1", "Theorem 6.35"):
        assert row in out
    assert "31000" in out  # the primal cost n (2m - 1)


def test_json_has_every_number(capsys):
    assert main([CONV, "--wrt", "x,c", "--size", "n=10", "--size", "m=3", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["wrt"] == ["x", "c"] and data["sizes"] == {"n": 10, "m": 3} and data["ok"] is True
    assert data["primal"] == 10 * (2 * 3 - 1)
    for key in ("forward", "adjoint", "io_primal", "io_adjoint", "forward_ratio", "adjoint_ratio"):
        assert isinstance(data[key], (int, float))
    assert data["io_primal"] == data["primal"] + (10 + 3 - 1) + 3 + 10
    assert data["forward_ratio"] == pytest.approx(data["forward"] / data["primal"])
    assert data["adjoint_ratio"] == pytest.approx(data["io_adjoint"] / data["io_primal"])


def test_symbolic_costs_without_sizes(capsys):
    assert main([CONV, "--wrt", "x"]) == 0
    out = capsys.readouterr().out
    assert "symbolic costs for wrt x (in n, m): ok" in out
    assert "2*m*n - n if m >= 1" in out  # the primal cost as a polynomial
    assert "bounds decided at sample sizes n, m in {1, 2, 5, 16, 100, 1000}" in out
    assert main([CONV, "--wrt", "x", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["symbolic"] is True and data["sizes"] is None and len(data["samples"]) == 36
    assert "n*(2*m - 1)" in data["primal"]


def test_a_bound_that_does_not_hold_exits_1(capsys, monkeypatch):
    # No program we know of breaks Theorems 6.1 and 6.35 (they are proved, and proofs/ checks every
    # rule), so the bound itself is lowered here to see the failing path.
    monkeypatch.setattr(Certificate, "BOUND", 0.5)
    assert main([CONV, "--wrt", "x", "--size", "n=10", "--size", "m=3"]) == 1
    assert "BOUND VIOLATED" in capsys.readouterr().out
    assert main([CONV, "--wrt", "x"]) == 1
    assert "VIOLATED" in capsys.readouterr().out


def test_parse_error_has_file_line_col_and_caret(tmp_path, capsys):
    bad = tmp_path / "bad.tl"
    bad.write_text("x : [n]R\nsum(i:n) x[i] +* 2\n")
    assert main([str(bad), "--wrt", "x"]) == 2
    err = capsys.readouterr().err
    lines = err.splitlines()
    assert lines[0].startswith(f"{bad}:2:16: ")
    assert lines[1].strip() == "sum(i:n) x[i] +* 2"
    assert lines[2].index("^") == lines[1].index("*")


def test_type_and_bounds_errors_exit_2(tmp_path, capsys):
    bad = tmp_path / "oob.tl"
    bad.write_text("x : [n]R\ngen(i:n) x[i + 1]\n")
    assert main([str(bad), "--wrt", "x", "--size", "n=4"]) == 2
    assert f"{bad}:2:" in capsys.readouterr().err


@pytest.mark.parametrize("args, message", [
    (["--wrt", "q"], "q is not an input"),
    (["--wrt", "x", "--size", "n=abc"], "must be an integer"),
    (["--wrt", "x", "--size", "n"], "expected NAME=INT"),
    (["--wrt", "x", "--size", "k=3"], "has no size k"),
    (["--wrt", "x", "--size", "n=3"], "missing: m"),
])
def test_bad_arguments_exit_2(args, message, capsys):
    assert main([CONV] + args) == 2
    assert message in capsys.readouterr().err


def test_missing_file_and_relations_exit_2(tmp_path, capsys):
    assert main([str(tmp_path / "nope.tl"), "--wrt", "x"]) == 2
    assert "nope.tl" in capsys.readouterr().err
    rel = tmp_path / "rel.tl"
    rel.write_text("x : [n]R\nE : rel[n, n]\nsum(i:n, j:n) [E(i, j)] * x[i] * x[j]\n")
    assert main([str(rel), "--wrt", "x", "--size", "n=3"]) == 2
    assert "relation" in capsys.readouterr().err


def test_installed_script():
    exe = shutil.which("tl-cost") or os.path.join(os.path.dirname(sys.executable), "tl-cost")
    if not os.path.exists(exe):
        pytest.skip("the tl-cost console script is not installed (pip install -e .)")
    done = subprocess.run([exe, CONV, "--wrt", "x", "--size", "n=1000", "--size", "m=16"],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert "certificate for wrt x at n = 1000, m = 16: ok" in done.stdout


def test_example_shipped_with_the_package(capsys):
    assert main(["--example", "conv", "--wrt", "x", "--size", "n=1000", "--size", "m=16"]) == 0
    assert "certificate for wrt x at n = 1000, m = 16: ok" in capsys.readouterr().out
    assert main(["--list-examples"]) == 0
    listing = capsys.readouterr().out
    assert "conv " in listing and "deconv_loss" in listing and "1-D convolution" in listing


def test_a_missing_file_named_like_an_example_says_how_to_run_it(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)  # outside the clone, as a user runs the README's commands
    assert main(["examples/conv.tl", "--wrt", "x"]) == 2
    err = capsys.readouterr().err
    assert "examples/conv.tl: No such file or directory" in err and "tl-cost --example conv" in err
    assert main(["mine.tl", "--wrt", "x"]) == 2
    assert "--example" not in capsys.readouterr().err


def test_example_list_gives_whole_sentences(capsys):
    assert main(["--list-examples"]) == 0
    listing = capsys.readouterr().out
    assert "the let of dy is nested in the batch loop" in listing  # the comment's second line
    assert "(examples/deconv_loss.tl" not in listing  # only the first sentence
    assert max(map(len, listing.splitlines())) <= 100


def test_unknown_example_suggests_the_closest(capsys):
    assert main(["--example", "cnov", "--wrt", "x"]) == 2
    err = capsys.readouterr().err
    assert "there is no example 'cnov'; did you mean conv?" in err and "deconv_loss" in err


def test_a_file_or_an_example_and_wrt(capsys):
    assert main(["--wrt", "x"]) == 2
    assert "FILE or --example NAME" in capsys.readouterr().err
    assert main([CONV, "--example", "conv", "--wrt", "x"]) == 2
    assert main([CONV]) == 2
    assert "--wrt is required" in capsys.readouterr().err
