"""Load a Kubernetes/Docker-format seccomp profile into this process with libseccomp, then
exec a command under it: what the kubelet's runtime does with a Localhost profile, for tests.

    python seccomp_loader.py PROFILE.json [--without NAME,...] -- COMMAND ...

Only the native architecture's rules are loaded (``includes.arches`` compared with it);
``includes.caps`` rules are skipped (the trial container has no capabilities). ``--without``
leaves out rules naming those system calls, to show that a profile needs them.
"""

from __future__ import annotations

import ctypes
import json
import os
import platform
import sys

_ACT_ALLOW = 0x7FFF0000
_ACT_ERRNO = 0x00050000
_OPS = {
    "SCMP_CMP_NE": 1,
    "SCMP_CMP_LT": 2,
    "SCMP_CMP_LE": 3,
    "SCMP_CMP_EQ": 4,
    "SCMP_CMP_GE": 5,
    "SCMP_CMP_GT": 6,
    "SCMP_CMP_MASKED_EQ": 7,
}
_GOARCH = {"x86_64": "amd64", "aarch64": "arm64"}.get(platform.machine(), platform.machine())


class _ArgCmp(ctypes.Structure):
    _fields_ = [
        ("arg", ctypes.c_uint),
        ("op", ctypes.c_int),
        ("datum_a", ctypes.c_uint64),
        ("datum_b", ctypes.c_uint64),
    ]


def _action(name: str, errno_ret: int) -> int:
    if name == "SCMP_ACT_ALLOW":
        return _ACT_ALLOW
    if name == "SCMP_ACT_ERRNO":
        return _ACT_ERRNO | errno_ret
    raise SystemExit(f"seccomp_loader: unsupported action {name}")


def load(profile: dict, without: set[str]) -> None:
    lib = ctypes.CDLL("libseccomp.so.2", use_errno=True)
    lib.seccomp_init.restype = ctypes.c_void_p
    lib.seccomp_init.argtypes = [ctypes.c_uint32]
    lib.seccomp_syscall_resolve_name.argtypes = [ctypes.c_char_p]
    lib.seccomp_rule_add_array.argtypes = [
        ctypes.c_void_p,
        ctypes.c_uint32,
        ctypes.c_int,
        ctypes.c_uint,
        ctypes.POINTER(_ArgCmp),
    ]
    lib.seccomp_load.argtypes = [ctypes.c_void_p]
    default = _action(profile["defaultAction"], profile.get("defaultErrnoRet", 1))
    ctx = lib.seccomp_init(default)
    if not ctx:
        raise SystemExit("seccomp_loader: seccomp_init failed")
    for rule in profile["syscalls"]:
        includes = rule.get("includes") or {}
        if includes.get("caps") or (includes.get("arches") and _GOARCH not in includes["arches"]):
            continue
        if set(rule["names"]) & without:
            continue
        action = _action(rule["action"], rule.get("errnoRet", 1))
        args = rule.get("args") or []
        array = (_ArgCmp * max(1, len(args)))(
            *[_ArgCmp(a["index"], _OPS[a["op"]], a["value"], a.get("valueTwo", 0)) for a in args]
        )
        for name in rule["names"]:
            number = lib.seccomp_syscall_resolve_name(name.encode())
            if number < 0:  # not a system call of this architecture
                continue
            if lib.seccomp_rule_add_array(ctx, action, number, len(args), array) != 0:
                raise SystemExit(f"seccomp_loader: cannot add a rule for {name}")
    if lib.seccomp_load(ctx) != 0:
        raise SystemExit("seccomp_loader: seccomp_load failed")


def main(argv: list[str]) -> None:
    separator = argv.index("--")
    options, command = argv[:separator], argv[separator + 1 :]
    without: set[str] = set()
    if "--without" in options:
        without = set(options[options.index("--without") + 1].split(","))
    with open(options[0], encoding="utf-8") as handle:
        load(json.load(handle), without)
    os.execvp(command[0], command)


if __name__ == "__main__":
    main(sys.argv[1:])
