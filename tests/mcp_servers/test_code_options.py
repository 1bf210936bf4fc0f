"""The code server's settings: one typed model (CodeOptions) read in one place; a server option
wins over ``ATOLL_CODE_<NAME>``, which wins over the default; anything unknown or mistyped is
an error naming the option or the variable."""

import pytest

from mcp_servers import create_server
from mcp_servers._core.options import InvalidOption
from mcp_servers.code.config import CodeOptions, SandboxLimits
from mcp_servers.code.sandbox import sandbox_status
from tests.mcp_servers.helpers import make_world, open_session


def test_an_option_wins_over_the_variable_which_wins_over_the_default():
    environ = {
        "ATOLL_CODE_MEMORY_MB": "2048",
        "ATOLL_CODE_TRUST_OUTER_SANDBOX": "yes",
        "ATOLL_CODE_CPU_S": "",  # empty: unset
        "ATOLL_CODE_TIMEOUT_S": "30",
        "ATOLL_ENV_TOKEN": "not the code server's",
    }
    settings = CodeOptions.resolve({"memory_mb": 512, "cpu_s": None}, environ=environ)
    assert settings.memory_mb == 512  # the option
    assert settings.trust_outer_sandbox is True and settings.timeout_s == 30  # the variables
    assert settings.cpu_s == SandboxLimits().cpu_s and settings.proc_mode == "auto"  # the defaults
    assert CodeOptions.resolve({}, environ=environ).memory_mb == 2048
    # A call's own timeout may shorten the configured one, never lengthen it.
    assert settings.limits(5).timeout_s == 5 and settings.limits(600).timeout_s == 30
    assert settings.limits().memory_mb == 512 and settings.limits().tmp_mb == SandboxLimits().tmp_mb
    assert CodeOptions.resolve(environ={}).limits() == SandboxLimits()


def test_os_environ_is_read_when_no_environ_is_given(monkeypatch):
    monkeypatch.setenv("ATOLL_CODE_BWRAP_PATH", "/opt/bwrap")
    assert CodeOptions.resolve().bwrap_path == "/opt/bwrap"
    assert CodeOptions.resolve({"bwrap_path": "/usr/bin/bwrap"}).bwrap_path == "/usr/bin/bwrap"


@pytest.mark.parametrize(
    ("variable", "value", "problem"),
    [
        ("ATOLL_CODE_TIMEOUT", "10", "unknown setting"),  # misspelled: timeout_s
        ("ATOLL_CODE_MEMORY_MB", "lots", "valid integer"),
        ("ATOLL_CODE_PROC_MODE", "fast", "'auto', 'procfs' or 'minimal-proc'"),
        ("ATOLL_CODE_TRUST_OUTER_SANDBOX", "maybe", "valid boolean"),
        ("ATOLL_CODE_SANDBOX_UID", "0", "greater than or equal to 1"),
        ("ATOLL_CODE_USER_EMAIL", "a@b.c", "unknown setting"),  # the world's user is an option only
    ],
)
def test_a_misspelled_or_mistyped_variable_is_an_error_naming_it(variable, value, problem):
    with pytest.raises(InvalidOption) as caught:
        CodeOptions.resolve({}, environ={variable: value})
    assert caught.value.option == variable
    assert variable in caught.value.message and problem in caught.value.message


@pytest.mark.parametrize(
    ("option", "value", "problem"),
    [
        ("timeout", 10, "unknown option"),
        ("memory_mb", "lots", "valid integer"),
        ("proc_mode", "fast", "'auto', 'procfs' or 'minimal-proc'"),
        ("max_concurrent", 0, "greater than or equal to 1"),
    ],
)
def test_a_misspelled_or_mistyped_option_is_refused_where_it_enters(tmp_path, option, value, problem):
    world = make_world(tmp_path)
    with pytest.raises(InvalidOption) as caught:
        create_server("code", fs_root=world.fs_root, apps_data_root=world.apps_root, options={option: value})
    assert caught.value.option == option and problem in caught.value.message
    with pytest.raises(InvalidOption) as caught:
        CodeOptions.resolve({option: value}, environ={})
    assert caught.value.option == option and "options of code: bwrap_path, cpu_s" in caught.value.message


def test_the_tool_and_the_health_report_name_a_bad_variable(tmp_path, monkeypatch):
    monkeypatch.setenv("ATOLL_CODE_MAX_CONCURRENT", "many")
    status = sandbox_status()
    assert status.available is False and "ATOLL_CODE_MAX_CONCURRENT" in (status.reason or "")
    world = make_world(tmp_path)
    with open_session("code", world) as session:
        error = session.error("code_exec", {"code": "echo hi"})
    assert error["code"] == "unsupported"
    assert "misconfigured" in error["message"] and "ATOLL_CODE_MAX_CONCURRENT" in error["message"]
