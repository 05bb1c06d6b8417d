"""The README opens with the two commands of a new user, and CI runs the second verbatim."""

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


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
    assert tests.endswith("python -m pytest")


def test_ci_runs_the_readme_test_command_last():
    _, tests = _opening_commands()
    lines = [line for line in (ROOT / ".ci" / "run").read_text(encoding="utf-8").splitlines() if line.strip()]
    assert lines[-1] == tests
