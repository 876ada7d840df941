"""The Lambda runtime and architecture the layer is built for and the functions run on.

Plain Python (no CDK import), so the settings, the layer build and `eonce` read it without
loading CDK. One value is passed to `ExactlyOnceLayer` and `FunctionOptions` alike: a layer
whose wheels or bytecode were built for another Python or CPU than its functions' fails at the
first import, not at deploy.
"""

from __future__ import annotations

from dataclasses import dataclass

PYTHON_VERSIONS = ("3.12", "3.13", "3.14")
ARCHITECTURES = ("arm64", "x86_64")
# Lambda's name for the CPU -> the one in the manylinux wheel tags pip selects by.
_WHEEL_MACHINE = {"arm64": "aarch64", "x86_64": "x86_64"}


@dataclass(frozen=True)
class RuntimeTarget:
    """A Lambda Python runtime (`python_version`, e.g. "3.13") on an `architecture`.

    The default is Python 3.13 on arm64 because the layer ships `.pyc` files, and those must be
    compiled by the target's own minor version (the magic number differs per minor): the build
    machine this project is developed on has a 3.13 interpreter and no 3.14 one. Any of
    `PYTHON_VERSIONS` x `ARCHITECTURES` builds where that version's interpreter is installed
    (`exactly_once_cdk.bytecode`), or anywhere with bytecode off (source only).
    """

    python_version: str = "3.13"
    architecture: str = "arm64"

    def __post_init__(self) -> None:
        if self.python_version not in PYTHON_VERSIONS:
            raise ValueError(
                f"python_version {self.python_version!r}: Lambda runtimes supported here are "
                f"{', '.join(PYTHON_VERSIONS)}"
            )
        if self.architecture not in ARCHITECTURES:
            raise ValueError(
                f"architecture {self.architecture!r}: expected one of {', '.join(ARCHITECTURES)}"
            )

    @property
    def runtime_name(self) -> str:
        """Lambda's runtime identifier, e.g. "python3.13"."""
        return f"python{self.python_version}"

    @property
    def cache_tag(self) -> str:
        """The interpreter's `sys.implementation.cache_tag`: `.pyc` files are named by it."""
        return "cpython-" + self.python_version.replace(".", "")

    @property
    def slug(self) -> str:
        """For folder names: "py313-arm64" (no dot: CDK would take ".13-arm64" for a file
        extension and append it to the staged asset's name)."""
        return f"py{self.python_version.replace('.', '')}-{self.architecture}"

    def pip_args(self) -> tuple[str, ...]:
        """pip's cross-platform selection: binary wheels for this Python and CPU only.

        Lambda's python3.12+ runtimes run on Amazon Linux 2023 (glibc 2.34), so manylinux_2_28
        wheels fit as well as manylinux2014 (glibc 2.17) ones; psycopg-binary 3.3, for one,
        ships only manylinux_2_28 wheels for aarch64.
        """
        machine = _WHEEL_MACHINE[self.architecture]
        return (
            "--platform",
            f"manylinux2014_{machine}",
            "--platform",
            f"manylinux_2_28_{machine}",
            "--implementation",
            "cp",
            "--python-version",
            self.python_version,
            "--only-binary=:all:",
        )


DEFAULT_TARGET = RuntimeTarget()
