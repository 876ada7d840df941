"""The distribution as a user gets it: the sdist, the wheel built from it, a fresh install.

One session fixture builds both (`python -m build` without flags makes the sdist and then the
wheel *from the sdist*, so a file missing from the sdist breaks the wheel); another installs the
wheel into a new venv, with dependencies from the package index, and nothing of this repository
on the path.
"""

from __future__ import annotations

import configparser
import json
import tarfile
import zipfile
from dataclasses import dataclass
from email.parser import Parser
from pathlib import Path, PurePosixPath

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from tests.packaging.dists import Dists  # built once per session: conftest.py's `dists`
from tests.packaging.support import (
    DEV_BIN,
    PACKAGE_SOURCES,
    PACKAGES,
    REPO,
    clean_env,
    relative_files,
    run,
)

# Modules a runtime import must not load: the [cdk] and [cli] extras and their machinery.
HEAVY = ("aws_cdk", "constructs", "jsii", "cdk_nag", "typer", "rich")
CLI_EXTRA = "exactly-once-sqs[cli]"
# Commands that drive this repository's example app and fault_injection, which only a checkout
# has (the local stack itself, local_aws with `up` and `down`, ships).
CHECKOUT_ONLY = {"exactly_once_cli": {"run.py", "chaos.py", "demo.py"}}


@dataclass(frozen=True)
class Venv:
    root: Path
    python: Path
    site_packages: Path
    workdir: Path  # a cwd outside the repository


def make_venv(base: Path, requirement: str) -> Venv:
    """A new venv (no system site packages) with `requirement` installed by pip."""
    root, workdir = base / "venv", base / "work"
    workdir.mkdir()
    run([DEV_BIN / "python", "-m", "venv", root], cwd=workdir)
    python = root / "bin" / "python"
    run(
        [python, "-m", "pip", "install", "--disable-pip-version-check", "-q", requirement],
        cwd=workdir,
    )
    purelib = run(
        [python, "-I", "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"],
        cwd=workdir,
    ).stdout.strip()
    return Venv(root=root, python=python, site_packages=Path(purelib), workdir=workdir)


@pytest.fixture(scope="session")
def fresh_venv(tmp_path_factory: pytest.TempPathFactory, dists: Dists) -> Venv:
    return make_venv(tmp_path_factory.mktemp("fresh"), str(dists.wheel))


@pytest.fixture(scope="session")
def cli_venv(tmp_path_factory: pytest.TempPathFactory, dists: Dists) -> Venv:
    return make_venv(tmp_path_factory.mktemp("fresh-cli"), f"{dists.wheel}[cli]")


def wheel_files(dists: Dists) -> list[str]:
    with zipfile.ZipFile(dists.wheel) as wheel:
        return wheel.namelist()


def dist_info_text(dists: Dists, name: str) -> str:
    with zipfile.ZipFile(dists.wheel) as wheel:
        (path,) = [n for n in wheel.namelist() if n.endswith(f".dist-info/{name}")]
        return wheel.read(path).decode()


def probe(venv: Venv, code: str) -> dict[str, object]:
    """Run `code` isolated (-I: no PYTHON* variables, no cwd or script dir on sys.path)."""
    out = run([venv.python, "-I", "-c", code], cwd=venv.workdir, env=clean_env()).stdout
    result: dict[str, object] = json.loads(out)
    return result


# --- the sdist and the wheel -------------------------------------------------------------------


def test_wheel_is_built_from_the_sdist(dists: Dists) -> None:
    """So the sdist alone is enough to rebuild the product (nothing read from the checkout)."""
    assert "Building wheel from sdist" in dists.log
    assert dists.wheel.name.endswith("-py3-none-any.whl")


def test_sdist_holds_the_packages_and_nothing_else(dists: Dists) -> None:
    with tarfile.open(dists.sdist) as sdist:
        names = [PurePosixPath(m.name) for m in sdist.getmembers() if m.isfile()]
    roots = {n.parts[0] for n in names}
    assert roots == {dists.sdist.name.removesuffix(".tar.gz")}
    inside = [PurePosixPath(*n.parts[1:]) for n in names]
    tops = {p.parts[0] for p in inside}
    required = {
        "layers",
        "exactly_once_cdk",
        "exactly_once_ops",
        "exactly_once_cli",
        "local_aws",
        "README.md",
        "pyproject.toml",
        "PKG-INFO",
    }
    assert required <= tops
    # hatchling always adds .gitignore to an sdist; anything else is a leak from the checkout.
    assert tops - required <= {".gitignore"}, sorted(tops - required)
    layer_files = [p.as_posix() for p in inside if p.parts[0] == "layers"]
    assert layer_files
    assert all(f.startswith("layers/shared/python/exactly_once/") for f in layer_files)
    forbidden = {"tests", "infra", "node_modules", "cdk.out", "build", ".venv", "__pycache__"}
    templates = PurePosixPath("exactly_once_cli", "templates")  # `eonce init`'s, tests/ and all
    assert not [
        p
        for p in inside
        if (forbidden & set(p.parts) and not p.is_relative_to(templates)) or p.suffix == ".pyc"
    ]
    for package in PACKAGES:
        source = PACKAGE_SOURCES[package].relative_to(REPO).as_posix()
        assert PurePosixPath(source, "__init__.py") in inside, package


def test_wheel_holds_exactly_the_five_packages(dists: Dists) -> None:
    names = wheel_files(dists)
    by_top: dict[str, set[str]] = {}
    for name in names:
        top, _, rest = name.partition("/")
        by_top.setdefault(top, set()).add(rest)
    dist_info = [top for top in by_top if top.endswith(".dist-info")]
    assert len(dist_info) == 1
    assert set(by_top) == {*PACKAGES, *dist_info}
    for package in PACKAGES:
        # Every file of the source folder, data files included (layer_requirements.txt and
        # monitor_function/handler.py are read at synth time), and no bytecode.
        expected = relative_files(PACKAGE_SOURCES[package]) - CHECKOUT_ONLY.get(package, set())
        assert by_top[package] == expected, package
        assert "py.typed" in by_top[package], package


def test_wheel_metadata_runtime_dependencies_and_extras(dists: Dists) -> None:
    meta = Parser().parsestr(dist_info_text(dists, "METADATA"))
    assert meta["Name"] == "exactly-once-sqs"
    assert meta["Requires-Python"] == ">=3.11"
    requirements = [Requirement(r) for r in meta.get_all("Requires-Dist", [])]
    unconditional = {canonicalize_name(r.name) for r in requirements if r.marker is None}
    assert unconditional == {"boto3", "aws-lambda-powertools"}
    assert set(meta.get_all("Provides-Extra", [])) == {"cdk", "cli", "postgres", "local"}

    def extra(name: str) -> set[str]:
        return {
            canonicalize_name(r.name)
            for r in requirements
            if r.marker is not None and r.marker.evaluate({"extra": name})
        }

    assert extra("cdk") == {"aws-cdk-lib", "constructs"}
    assert extra("cli") == {"typer", "rich"}
    assert extra("postgres") == {"psycopg", "psycopg-pool"}
    # The local stack: moto, and every other extra (hatchling spells the self-reference out).
    assert extra("local") == extra("cdk") | extra("cli") | extra("postgres") | {"moto"}


def test_wheel_declares_the_eonce_console_script(dists: Dists) -> None:
    entry_points = configparser.ConfigParser()
    entry_points.read_string(dist_info_text(dists, "entry_points.txt"))
    assert dict(entry_points["console_scripts"]) == {"eonce": "exactly_once_cli.console:main"}


# --- a fresh install of the wheel --------------------------------------------------------------


def test_fresh_venv_has_no_system_site_packages(fresh_venv: Venv) -> None:
    """Guards the tests below: they mean nothing if the dev venv's packages leak in."""
    config = (fresh_venv.root / "pyvenv.cfg").read_text()
    assert "include-system-site-packages = false" in config
    paths = probe(fresh_venv, "import json, sys; print(json.dumps({'path': sys.path}))")["path"]
    assert isinstance(paths, list)
    assert not [p for p in paths if str(REPO) in p], paths


def test_runtime_imports_from_the_installed_wheel(fresh_venv: Venv) -> None:
    found = probe(
        fresh_venv,
        "import json, sys, exactly_once\n"
        "from exactly_once import sqs_consumer\n"
        "print(json.dumps({'file': exactly_once.__file__,"
        " 'loaded': sorted({m.split('.')[0] for m in sys.modules})}))",
    )
    assert isinstance(found["file"], str)
    file = Path(found["file"]).resolve()
    assert file == (fresh_venv.site_packages / "exactly_once" / "__init__.py").resolve()
    assert not file.is_relative_to(REPO)
    assert isinstance(found["loaded"], list)
    assert not set(HEAVY) & set(found["loaded"])


def test_runtime_install_pulls_no_cdk_or_cli(fresh_venv: Venv) -> None:
    names = [
        "exactly-once-sqs",
        "boto3",
        "aws-lambda-powertools",
        "aws-cdk-lib",
        "constructs",
        "jsii",
        "cdk-nag",
        "typer",
        "rich",
    ]
    versions = probe(
        fresh_venv,
        "import json\n"
        "from importlib import metadata\n"
        "def version(name):\n"
        "    try:\n"
        "        return metadata.version(name)\n"
        "    except metadata.PackageNotFoundError:\n"
        "        return None\n"
        f"print(json.dumps({{n: version(n) for n in {names!r}}}))",
    )
    # The positive controls prove the probe sees installed distributions at all.
    assert versions["exactly-once-sqs"] is not None
    assert versions["boto3"] is not None
    assert versions["aws-lambda-powertools"] is not None
    absent = {"aws-cdk-lib", "constructs", "jsii", "cdk-nag", "typer", "rich"}
    assert {name: versions[name] for name in absent} == dict.fromkeys(absent)


def test_cdk_package_plain_modules_work_without_the_cdk_extra(fresh_venv: Venv) -> None:
    """The constructs load lazily: the package and its plain-Python rules import without CDK;
    asking for a construct says which module is missing."""
    found = probe(
        fresh_venv,
        "import json, sys\n"
        "import exactly_once_cdk, exactly_once_cdk.consumer_rules, exactly_once_cdk.layer_build\n"
        "try:\n"
        "    exactly_once_cdk.IdempotentConsumer\n"
        "    missing = None\n"
        "except ModuleNotFoundError as exc:\n"
        "    missing = exc.name\n"
        "    hint = str(exc)\n"
        "print(json.dumps({'missing': missing, 'hint': hint,"
        " 'window': exactly_once_cdk.consumer_rules.visibility_timeout_seconds(30, 0)}))",
    )
    assert found == {
        "missing": "aws_cdk",
        "hint": "IdempotentConsumer needs aws_cdk, which is not installed: "
        "pip install 'exactly-once-sqs[cdk]'",
        "window": 180,
    }


def test_eonce_without_the_cli_extra_says_what_to_install(fresh_venv: Venv) -> None:
    script = fresh_venv.root / "bin" / "eonce"
    assert script.is_file()
    result = run([script, "--help"], cwd=fresh_venv.workdir, check=False)
    assert result.returncode == 2
    assert result.stdout == ""
    lines = result.stderr.splitlines()
    assert len(lines) == 1, result.stderr
    assert CLI_EXTRA in lines[0]
    assert "Traceback" not in result.stderr


def test_eonce_with_the_cli_extra_runs_and_needs_no_cdk(cli_venv: Venv) -> None:
    script = cli_venv.root / "bin" / "eonce"
    result = run([script, "--help"], cwd=cli_venv.workdir, env=clean_env())
    for command in ("consumers", "send", "replay", "invoke", "locks", "layer"):
        assert command in result.stdout
    found = probe(
        cli_venv,
        "import importlib.util, json\n"
        "print(json.dumps({m: bool(importlib.util.find_spec(m))"
        " for m in ('typer', 'rich', 'aws_cdk', 'local_aws')}))",
    )
    assert found == {"typer": True, "rich": True, "aws_cdk": False, "local_aws": True}


@pytest.mark.parametrize(
    ("args", "needs"),
    [
        (["run"], "checkout of the repository"),
        (["chaos", "--messages", "5"], "checkout of the repository"),
        (["up", "--app", "x"], 'pip install "exactly-once-sqs[local]"'),
        (["down"], 'pip install "exactly-once-sqs[local]"'),
    ],
)
def test_installed_eonce_says_what_a_command_needs(
    cli_venv: Venv, args: list[str], needs: str
) -> None:
    """`run` and `chaos` drive this repository's example app and chaos harness, which are not
    in the wheel; `up` and `down` need the `local` extra (moto), which the `cli` extra lacks: one
    line naming what they need, whatever options came with them, and exit 2."""
    script = cli_venv.root / "bin" / "eonce"
    result = run([script, *args], cwd=cli_venv.workdir, env=clean_env(), check=False)
    assert result.returncode == 2
    lines = (result.stdout + result.stderr).strip().splitlines()
    assert len(lines) == 1, result.stdout + result.stderr
    assert needs in lines[0]


def test_installed_runtime_is_byte_identical_to_the_layer_source(fresh_venv: Venv) -> None:
    """ExactlyOnceLayer copies the imported `exactly_once` folder: installed from the wheel it
    must give the same layer as the repository's `layers/shared/python/exactly_once`."""
    installed = fresh_venv.site_packages / "exactly_once"
    source = PACKAGE_SOURCES["exactly_once"]
    files = relative_files(source)
    assert relative_files(installed) == files
    differing = [
        f for f in sorted(files) if (installed / f).read_bytes() != (source / f).read_bytes()
    ]
    assert differing == []


# --- the dev venv's editable install -----------------------------------------------------------


def test_editable_install_works_without_pythonpath(tmp_path: Path) -> None:
    env = clean_env()
    assert "PYTHONPATH" not in env
    found = run(
        [DEV_BIN / "python", "-c", "import exactly_once; print(exactly_once.__file__)"],
        cwd=tmp_path,
        env=env,
    ).stdout.strip()
    assert Path(found) == PACKAGE_SOURCES["exactly_once"] / "__init__.py"
    result = run([DEV_BIN / "eonce", "--help"], cwd=tmp_path, env=env)
    assert "Usage: eonce" in result.stdout


def test_runtime_import_loads_no_cdk_or_cli_even_when_installed(tmp_path: Path) -> None:
    """In the dev venv the extras are installed, so their absence from sys.modules is real."""
    found = run(
        [
            DEV_BIN / "python",
            "-I",
            "-c",
            "import importlib.util, json, sys\n"
            "import exactly_once, exactly_once_cdk, exactly_once_cdk.layer_build\n"
            f"heavy = {HEAVY!r}\n"
            "print(json.dumps({"
            "'installed': [m for m in heavy if importlib.util.find_spec(m) is not None],"
            " 'loaded': [m for m in heavy if m in sys.modules]}))",
        ],
        cwd=tmp_path,
    ).stdout
    assert json.loads(found) == {"installed": list(HEAVY), "loaded": []}
