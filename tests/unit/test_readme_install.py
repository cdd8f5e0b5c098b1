"""README's install path (issue 37): right for CPU-only Linux, macOS/Windows and CUDA users, and the command
.ci/run runs is README's second command."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
README = (ROOT / "README.md").read_text()


def bash_blocks(section: str) -> list[str]:
    part = README[README.index(section):]
    part = part[: part.index("\n## ", 1)]
    return re.findall(r"```bash\n(.*?)```", part, flags=re.S)


def test_ci_runs_readmes_second_command():
    commands = [block.strip() for block in bash_blocks("## The two commands")]
    tests_command = next(c for c in commands if "requirements-dev.txt" in c)
    ci = (ROOT / ".ci" / "run").read_text()
    assert tests_command.replace("pip install -r", "pip install -q -r") in ci


def test_no_hard_coded_interpreter_and_a_note_for_other_pythons():
    section = README[README.index("## The two commands"): README.index("## Pages")]
    assert not any(block.startswith("python3.11") for block in bash_blocks("## The two commands"))
    assert "python -m venv" in section and "`python3.11`" in section and "`py -3.11`" in section


def test_cpu_only_linux_gets_the_cpu_wheel_before_the_requirements():
    section = README[README.index("## The two commands"): README.index("## Pages")]
    cpu = "pip install torch==2.13.0 --index-url https://download.pytorch.org/whl/cpu"
    assert cpu in section
    one_line = next(b for b in bash_blocks("## The two commands") if cpu in b)
    assert one_line.index(cpu) < one_line.index("pip install -r requirements.txt")
    pin = re.search(r"^torch==([\d.]+)", (ROOT / "requirements.txt").read_text(), flags=re.M).group(1)
    assert f"torch=={pin} --index-url" in section  # the same version as the pin, so the pin installs nothing more


def test_the_server_opens_no_browser_so_readme_says_open_the_address():
    assert "headless = true" in (ROOT / ".streamlit" / "config.toml").read_text()
    assert "opens on http://localhost:8501" not in README
    assert "open http://localhost:8501" in README


def test_offline_first_run_and_local_model_folders_are_explained():
    assert "First run without internet" in README
    assert "$BERTLENS_DATA/models/" in README and "No such folder" in README
