"""The notebook as a user meets it: ``examples/tour.ipynb`` runs headless without an error, programs
display in the paper's notation (``text/latex``) and the cost as LaTeX, certificates and kernels as
tables, the timing, the fit and the cost against size as plots (``image/png``); and the rich displays
themselves."""
import base64
from pathlib import Path

import nbformat
import numpy as np
from nbclient import NotebookClient

import tensorlang as tl

TOUR = Path(__file__).resolve().parents[1] / "examples" / "tour.ipynb"


def _outputs(cell, kind: str) -> list:
    return [o["data"][kind] for o in cell.get("outputs", []) if kind in o.get("data", {})]


def test_tour_runs_and_displays_programs_in_latex(tmp_path):
    nb = nbformat.read(TOUR, as_version=4)
    NotebookClient(nb, timeout=300, kernel_name="python3", resources={"metadata": {"path": str(tmp_path)}}).execute()
    errors = [o for c in nb.cells for o in c.get("outputs", []) if o.get("output_type") == "error"]
    assert not errors, errors
    tagged = {}
    for cell in nb.cells:
        for tag in cell.get("metadata", {}).get("tags", []):
            tagged.setdefault(tag, []).append(cell)
    assert len(tagged["expr"]) == 2
    for cell in tagged["expr"]:
        (latex,) = _outputs(cell, "text/latex")
        assert latex.startswith(r"$\displaystyle ") and r"\boxplus" in latex
        assert r"_{i=0}^{n - 1}" in latex or r"_{i_{0}=0}^{n - 1}" in latex, latex  # i:n runs to n - 1
        assert "^{n}" not in latex and "^{m}" not in latex
    (cert,) = _outputs(tagged["certificate"][0], "text/html")
    assert "certificate for wrt x at n = 1000, m = 16: ok" in cert and "Theorem 6.35" in cert
    (kernel,) = _outputs(tagged["kernel"][0], "text/html")
    assert "Kernel (C, float64)" in kernel and "x : [m + n - 1]R" in kernel
    assert " in\nlet dX8 = gen(t0:n) X8[t0] + X8[t0] in\ngen(k0:m + n - 1) " in kernel  # one statement a line
    (cost,) = _outputs(tagged["cost"][0], "text/latex")
    assert cost.startswith(r"$\displaystyle \operatorname{work}(\text{loss}) = \begin{cases} 2 m n + 5 n - 1")
    assert "$" not in cost[1:-1]  # a notebook's $...$ holds no other $
    assert len(tagged["plot"]) == 3
    for cell in tagged["plot"]:
        (png,) = _outputs(cell, "image/png")
        assert base64.b64decode(png).startswith(b"\x89PNG")
    printed = "".join(o.get("text", "") for c in nb.cells for o in c.get("outputs", []))
    assert "compiled loss" in printed and "NumPy" in printed and "CONVERGENCE" in printed


def test_certificate_as_a_table():
    cert = tl.certify(tl.parse("x : [n]R; sum(i:n) x[i] * x[i]"), "x", n=10)
    page, text = cert._repr_html_(), cert._repr_markdown_()
    assert page.startswith("<table>") and f"<b>{cert.title()}</b>" in page
    assert text.startswith(f"**{cert.title()}**")
    for name, value, note in cert.rows():
        assert f"<td style=\"text-align: left\">{value}</td>" in page
        assert f"| {value} |" in text
    assert "$_IO(adjoint)" in page and r"\$_IO(adjoint)" in text  # a bare $ would start math in Markdown


def test_kernel_as_a_table_shows_program_and_inputs():
    expr = tl.parse("R : rel[n, n]; x : [n]R; gen(i:n) sum(j:n) [R(i, j) and i != j] * x[j]")
    kernel = tl.compile(expr)
    page, text = kernel._repr_html_(), kernel._repr_markdown_()
    assert "<pre" in page and "[R(i, j) and i != j] * x[j]" in page and "x : [n]R" in page
    assert "R : rel[n, n]" in page and "lines of C (kernel.source)" in page
    assert "`x : [n]R`" in text and "| sizes | n " in text
    assert np.allclose(kernel(x=np.ones(3), R=np.ones((3, 3), bool)), [2, 2, 2])  # the table changes nothing
