#!/usr/bin/env python3
"""Rewrites the use_repo(go_deps, ...) list in MODULE.bazel from go.mod.

gazelle's go_deps extension creates one repository per module; MODULE.bazel
must import exactly the modules that go.mod lists as direct requirements
(those without "// indirect"). Run after `go mod tidy`:

    tools/sync-use-repo.py            # rewrite MODULE.bazel
    tools/sync-use-repo.py --check    # exit 1 if it is out of date
"""
import pathlib
import re
import sys

ROOT = pathlib.Path(__file__).resolve().parent.parent


def repo_name(module: str) -> str:
    """gazelle's default repository name for a module path."""
    host, _, rest = module.partition("/")
    parts = list(reversed(host.split("."))) + (rest.split("/") if rest else [])
    return re.sub(r"[^a-zA-Z0-9_]", "_", "_".join(parts)).lower()


def direct_modules(go_mod: str) -> list[str]:
    mods = []
    for block in re.findall(r"^require \((.*?)^\)", go_mod, re.S | re.M):
        for line in block.splitlines():
            line = line.strip()
            if line and not line.startswith("//") and "// indirect" not in line:
                mods.append(line.split()[0])
    for line in re.findall(r"^require ([^(\n].*)$", go_mod, re.M):
        if "// indirect" not in line:
            mods.append(line.split()[0])
    return mods


def main() -> int:
    check = "--check" in sys.argv[1:]
    go_mod = (ROOT / "go.mod").read_text()
    module_path = ROOT / "MODULE.bazel"
    module = module_path.read_text()
    names = sorted(repo_name(m) for m in direct_modules(go_mod))
    body = "use_repo(\n    go_deps,\n" + "".join(f'    "{n}",\n' for n in names) + ")"
    new, count = re.subn(r"use_repo\(\n    go_deps,\n.*?^\)", body, module, flags=re.S | re.M)
    if count != 1:
        print("MODULE.bazel: expected exactly one use_repo(go_deps, ...) block", file=sys.stderr)
        return 2
    if new == module:
        return 0
    if check:
        print("MODULE.bazel use_repo(go_deps, ...) is out of date; run tools/sync-use-repo.py", file=sys.stderr)
        return 1
    module_path.write_text(new)
    return 0


if __name__ == "__main__":
    sys.exit(main())
