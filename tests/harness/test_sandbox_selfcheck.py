"""The sandbox self-check: one suite run against every registered provider that can run here.

Each isolated provider must show the program only /in (read-only) and /out (writable), none of the
host's files (secrets by absolute path, the repo, /root, /etc/shadow), an environment without the
harness's variables, an unprivileged uid without capabilities, and no network but `lo`. The `none`
provider runs only the checks that need no isolation, and must say it is not isolated.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest

import datafarm
from datafarm.errors import InputError
from datafarm.harness import sandbox
from datafarm.harness.sandbox import EndCause, SandboxError
from tests.harness.sandbox_helpers import SMALL_LIMITS, provider_or_skip, statuses, write_program

CANARY = "sk-canary-do-not-leak-7f3a"

ECHO = """
import sys
for line in sys.stdin:
    if line.strip() == "quit":
        break
    sys.stdout.write("echo " + line)
    sys.stdout.flush()
"""

PROBE = """
import errno, json, os, socket, sys

request = json.loads(sys.stdin.readline())

def attempt(action):
    try:
        action()
        return "ok"
    except OSError as error:
        return errno.errorcode.get(error.errno, str(error.errno))

def read(path):
    with open(path, "rb") as f:
        f.read(1)

def write(path):
    with open(path, "w") as f:
        f.write("written inside the sandbox")

status = dict(line.split(":", 1) for line in open("/proc/self/status").read().splitlines() if ":" in line)
facts = {
    "uid": os.getuid(),
    "gid": os.getgid(),
    "euid": os.geteuid(),
    "cap_eff": int(status["CapEff"].strip(), 16),
    "cap_prm": int(status["CapPrm"].strip(), 16),
    "env": dict(os.environ),
    "cwd": os.getcwd(),
    "in_listing": sorted(os.listdir("/in")),
    "in_data": open("/in/data.txt").read(),
    "write_in": attempt(lambda: write("/in/planted.txt")),
    "write_out": attempt(lambda: write("/out/result.txt")),
    "exists": {p: os.path.lexists(p) for p in request["must_not_exist"]},
    "read": {p: attempt(lambda p=p: read(p)) for p in request["must_not_read"]},
    "interfaces": sorted(name for _, name in socket.if_nameindex()),
    "routes": [l for l in open("/proc/net/route").read().splitlines()[1:] if l.strip()],
}
print(json.dumps(facts))
"""


@pytest.fixture(scope="module", params=sandbox.names())
def provider(request):
    """Each registered provider, skipped with its own reason where it cannot run."""
    return provider_or_skip(request.param)


def host_paths_to_hide(secret: Path) -> list[str]:
    """Host paths that exist here and must not exist inside an isolated sandbox."""
    repo = Path(datafarm.__file__).resolve().parents[1]
    mounted = [Path(sys.prefix).resolve(), Path(sys.base_prefix).resolve()]
    paths = [secret, secret.parent, repo / "pyproject.toml", repo / "datafarm", Path(__file__).resolve()]
    shared = Path("/work/shared")
    if shared.exists():
        paths.append(shared)
    # Everything in /root except the way down to the interpreter, which is mounted read-only.
    if os.access("/root", os.R_OK):
        for entry in Path("/root").iterdir():
            if not any(entry == m or entry in m.parents for m in mounted):
                paths.append(entry)
    return [str(p) for p in paths if p.exists()]


@pytest.fixture(scope="module")
def facts(provider, tmp_path_factory):
    """What the probe program saw inside an isolated provider's sandbox (one run per provider)."""
    if not provider.isolated:
        pytest.skip("the 'none' provider gives no isolation (isolated=False); only the echo check applies")
    root = tmp_path_factory.mktemp(f"selfcheck-{provider.name}")
    secret = root / "outside" / "secret.txt"
    secret.parent.mkdir()
    secret.write_text("the admission seed is 1234")
    program_dir = root / "program"
    script = write_program(program_dir, PROBE)
    (program_dir / "data.txt").write_text("input data")
    out_dir = root / "out"
    must_not_exist = host_paths_to_hide(secret)
    request = {"must_not_exist": must_not_exist, "must_not_read": ["/etc/shadow", str(secret)]}
    with pytest.MonkeyPatch.context() as env:
        env.setenv("OPENAI_API_KEY", CANARY)
        env.setenv("DATAFARM_CANARY", CANARY)
        stdout, result = provider.run(
            program_dir, ["python", script], out_dir=out_dir, limits=SMALL_LIMITS,
            input=json.dumps(request).encode() + b"\n",
        )
    assert result.ok, result
    return {
        "seen": json.loads(stdout),
        "must_not_exist": must_not_exist,
        "program_dir": program_dir,
        "out_dir": out_dir,
        "script": script,
        "result": result,
    }


def test_echo_over_the_pipe(provider, tmp_path):
    script = write_program(tmp_path / "program", ECHO)
    with provider.start(tmp_path / "program", ["python", script], out_dir=tmp_path / "out", limits=SMALL_LIMITS) as process:
        for word in (b"one", b"two", b"three"):
            process.stdin.write(word + b"\n")
            assert process.stdout.readline() == b"echo " + word + b"\n"
        process.stdin.write(b"quit\n")
        result = process.wait(timeout=10)
    assert result.ok
    assert result.ended_by is EndCause.EXITED and result.reason == "exited normally (code 0)"
    assert result.provider == provider.name
    assert result.isolated is provider.isolated is statuses()[provider.name].isolated


def test_program_folder_is_read_only_at_in(facts):
    seen = facts["seen"]
    assert seen["in_data"] == "input data"
    assert seen["in_listing"] == sorted(["data.txt", facts["script"].removeprefix("/in/")])
    assert seen["write_in"] in ("EROFS", "EACCES")
    assert not (facts["program_dir"] / "planted.txt").exists()


def test_out_is_the_writable_working_folder(facts):
    seen = facts["seen"]
    assert seen["cwd"] == "/out"
    assert seen["write_out"] == "ok"
    assert (facts["out_dir"] / "result.txt").read_text() == "written inside the sandbox"


def test_host_files_are_invisible(facts):
    seen = facts["seen"]
    assert facts["must_not_exist"], "the test found no host paths to look for"
    visible = [path for path, exists in seen["exists"].items() if exists]
    assert visible == [], f"host paths visible inside the sandbox: {visible}"
    assert seen["read"]["/etc/shadow"] in ("ENOENT", "EACCES")
    secret = [p for p in seen["read"] if p != "/etc/shadow"][0]
    assert seen["read"][secret] == "ENOENT"


def test_environment_is_cleared(facts):
    env = facts["seen"]["env"]
    assert CANARY not in json.dumps(env)
    assert "OPENAI_API_KEY" not in env and "DATAFARM_CANARY" not in env
    expected = sandbox.base_environment()
    assert set(env) <= set(expected) | {"PWD"}, f"unexpected variables: {set(env) - set(expected)}"
    assert {k: env[k] for k in expected} == expected


def test_unprivileged_without_capabilities(facts):
    seen = facts["seen"]
    assert seen["uid"] != 0 and seen["euid"] != 0 and seen["gid"] != 0
    assert seen["uid"] == sandbox.SANDBOX_UID
    assert seen["cap_eff"] == 0 and seen["cap_prm"] == 0


def test_no_network_but_loopback(facts):
    seen = facts["seen"]
    assert seen["interfaces"] == ["lo"]
    assert seen["routes"] == []


def test_none_requires_unsafe_and_says_it_is_not_isolated(tmp_path):
    with pytest.raises(InputError, match="without any isolation"):
        sandbox.get("none")
    status = statuses()["none"]
    assert status.available and status.isolated is False
    provider = sandbox.get("none", unsafe=True)
    assert provider.isolated is False
    script = write_program(tmp_path / "program", "print('plain')")
    stdout, result = provider.run(tmp_path / "program", ["python", script], out_dir=tmp_path / "out", limits=SMALL_LIMITS)
    assert stdout == b"plain\n" and result.ok and result.isolated is False


def test_registry_names_reasons_and_unknown_names():
    assert sandbox.names()[:3] == ["bwrap", "docker", "none"]
    assert sandbox.DEFAULT_PROVIDER == "bwrap"
    for name, status in statuses().items():
        assert status.name == name and status.reason
    with pytest.raises(InputError, match="unknown sandbox provider 'bwrapp'") as caught:
        sandbox.get("bwrapp")
    assert "did you mean 'bwrap'" in str(caught.value)


def test_unavailable_provider_is_refused_with_its_reason():
    unavailable = [name for name, status in statuses().items() if not status.available]
    if not unavailable:
        pytest.skip("every provider is available here")
    name = unavailable[0]
    with pytest.raises(SandboxError, match="unavailable") as caught:
        sandbox.get(name)
    assert statuses()[name].reason in str(caught.value)
