"""The differential fuzzer (``tests/fuzz.py``), a fixed-seed slice: random program text through parse ->
evaluate -> compile -> grad, every outcome the same in the evaluator and in a kernel."""
import fuzz


def test_a_fixed_slice_of_the_differential_fuzzer():
    report = fuzz.run(seed=11, count=24)
    assert report.parsed >= 20, report.not_parsed[:3]
    assert report.runs >= 100 and report.gradients >= 5 and not report.slow, str(report)
    assert not report.mismatches, "\n".join(
        f"{what}\n{src}\ninputs {ins}\nevaluator {ref}\nkernel    {got}"
        for what, src, ins, ref, got in report.mismatches[:3])
