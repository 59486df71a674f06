"""README.md starts with the two commands a newcomer runs, and CI runs exactly those."""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def readme_commands() -> list[str]:
    """The lines of README.md's first code block."""
    text = (ROOT / "README.md").read_text()
    block = text.split("```", 2)[1]
    return [line for line in block.splitlines() if line.strip()]


def test_readme_starts_with_install_and_test_commands():
    commands = readme_commands()
    assert commands == ['python3 -m pip install -e ".[dev,compile,tools,torch,triton,plot]" -c '
                        'constraints/cuda-13.5.37.txt -c constraints/torch-cpu.txt -c constraints/triton.txt && '
                        'kcontract check', "python3 -m pytest -q -n auto --dist loadfile"]
    assert (ROOT / "README.md").read_text().index("```") < 20  # right under the title


def test_ci_runs_the_readme_commands_word_for_word():
    lines = (ROOT / ".ci" / "run").read_text().splitlines()
    body = [line for line in lines if line and not line.startswith(("#", "set ", "cd "))]
    assert body == readme_commands()
