"""The README opens with the two commands of a new user, and CI runs the second verbatim."""

import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _opening_commands():
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    opening = text.split("\n---\n", 1)[0]
    return re.findall(r"```bash\n(.*?)\n```", opening, flags=re.S)


def test_readme_opens_with_a_demo_command_and_a_test_command():
    demo, tests = _opening_commands()
    for command in (demo, tests):
        assert "\n" not in command  # one line each
        assert command.startswith('python -m pip install "torch==2.13.0" -e ".[')
    assert demo.endswith("python examples/quickstart.py")
    assert (ROOT / "examples" / "quickstart.py").is_file()
    # In parallel (pytest-xdist, in the test extra): the suite is too long for one core.
    assert tests.endswith("python -m pytest -n auto")


def test_ci_runs_the_readme_test_command_last():
    _, tests = _opening_commands()
    lines = [line for line in (ROOT / ".ci" / "run").read_text(encoding="utf-8").splitlines() if line.strip()]
    assert lines[-1] == tests


@pytest.mark.slow
def test_demo_runs_every_estimator_within_the_shared_budget():
    """The README's first command: every estimator prints a row, none is skipped, nothing overspends."""
    pytest.importorskip("torch")
    pytest.importorskip("skorch")
    out = subprocess.run(
        [sys.executable, str(ROOT / "examples" / "quickstart.py")],
        capture_output=True,
        text=True,
        timeout=600,
        check=True,
    ).stdout
    for name in (
        "DPBetaBernoulli(laplace)",
        "DPBetaBernoulli(ops)",
        "DPNaiveBayesHMM(laplace)",
        "DPGaussianMixture",
        "DPKMeans",
        "DPKernelKMeans",
        "DPSEPRegressor(linear)",
        "DPNeuralNetClassifier",
        "DPNeuralNetRegressor",
        "DPGenerativeMixture",
    ):
        assert any(line.startswith(name + " ") for line in out.splitlines()), name
    assert "skipped" not in out and "privacy_spent_" in out


def test_first_example_runs_and_prints_what_its_comments_say():
    """The README's Python example, line by line: each commented value is what the line returns."""
    code = re.findall(r"```python\n(.*?)\n```", (ROOT / "README.md").read_text(encoding="utf-8"), flags=re.S)[
        0
    ]
    namespace = {}
    for line in code.splitlines():
        statement, _, comment = line.partition("  #")
        statement, comment = statement.rstrip(), comment.strip()
        if re.match(r"^(PrivacySpent|BudgetRemaining)\(", comment):
            value = eval(statement, namespace)  # noqa: S307 (the README's own line)
            assert type(value).__name__ == comment.split("(")[0]
            shown = dict(re.findall(r"(\w+)=([-+.\de]+)", comment))
            for field, number in shown.items():
                assert float(getattr(value, field)) == pytest.approx(float(number), rel=0.01), (line, value)
        else:
            exec(statement, namespace)  # noqa: S102
    assert namespace["budget"].remaining().delta > 0  # the second fit left delta for a third
