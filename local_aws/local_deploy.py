"""Deploy the CDK app into a local endpoint (moto) with the pinned CDK CLI; return the stack's
name, outputs and cloud assembly (which `local_aws.cloud_assembly` reads).

Used by the infra smoke test and by `make run`. The app is synthesized with `localStack=true`:
no bootstrap stack (the CLI's own credentials upload assets to a bucket created here), no
bootstrap-version rule, and event source mappings created disabled so that moto never runs a
function (the local poller does). `--method=direct` because moto's change sets cannot update.
The layer is deployed source only (`layerBytecode=false`, unless the caller's context says
otherwise): nothing here runs it (the workers import the functions' code with this process's
own `exactly_once`), so a local run needs no interpreter of the Lambda target's version.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import boto3

from local_aws.app_source import AppSource
from local_aws.moto_server import ACCOUNT_ID, REGION, aws_env
from local_aws.node_tools import ToolMissing, find_cdk
from local_aws.store_environment import PROFILE_VARIABLES

ROOT = Path(__file__).resolve().parent.parent  # the checkout (site-packages when installed)
QUALIFIER = "hnb659fds"  # the CDK's default bootstrap qualifier
ASSETS_BUCKET = f"cdk-{QUALIFIER}-assets-{ACCOUNT_ID}-{REGION}"
BUILD_DIR = Path("build")  # below the app's folder, like the CDK's own cdk.out
# Context a local deploy starts from; the caller's context overrides it.
LOCAL_DEFAULTS: dict[str, Any] = {"layerBytecode": False}


class DeployError(RuntimeError):
    """`cdk deploy` failed. The message is one line with the CLI's own reason (`failure_reason`),
    what `run` and `up` print; `output` is the end of what the CLI printed, for a log."""

    def __init__(self, message: str, output: str = "") -> None:
        super().__init__(message)
        self.output = output


TRACEBACK = "Traceback (most recent call last):"
CLI_ERROR_MARKS = ("❌", "‣")  # the CDK CLI's failure line, and each cause it prints below it
SUBPROCESS_EXIT = re.compile(r": Subprocess exited with error \d+$")  # says only "the app failed"
NAMED_ERROR = re.compile(r"^(?:[\w.]+\.)?(\w+(?:Error|Exception)\b:.*)")
QUALIFIED = re.compile(r"^[A-Za-z_][\w]*(?:\.[A-Za-z_]\w*)+\.(?=[A-Za-z_]\w*:)")


def failure_reason(output: str) -> str:
    """Why `cdk deploy` failed, in one line, from everything it printed.

    In order: the exception that ended the app at synth (the last Python traceback's exception
    line(s), at most five, named without its module), else the CLI's own error lines (`❌ Shop
    failed to deploy`, `‣ ToolkitError: ... ROLLBACK_COMPLETE: ...`), else the last line naming
    an error, else the last line. The whole output is read, not a tail: a deep traceback would
    push its first line out of one. A traceback the app printed and survived (a logged
    exception) is no reason: the CLI's error lines after it, without its "Subprocess exited",
    say the deploy failed later.
    """
    lines = [line.rstrip() for line in output.splitlines()]
    after = len(lines) - lines[::-1].index(TRACEBACK) if TRACEBACK in lines else None
    if after is not None and _ended_the_app(lines[after:]):
        start = after
        while start < len(lines) and lines[start][:1] in (" ", "\t"):  # frames, code, carets
            start += 1
        exception: list[str] = []
        for line in lines[start:]:
            if SUBPROCESS_EXIT.search(line) or line.lstrip().startswith(CLI_ERROR_MARKS):
                break
            if line.strip() and not line.strip().startswith("at "):  # a jsii error's JS stack
                exception.append(line.strip())
        if exception:
            return " ".join([QUALIFIED.sub("", exception[0]), *exception[1:5]])
    marked = [
        line.strip().lstrip("".join(CLI_ERROR_MARKS)).strip()
        for line in lines
        if line.lstrip().startswith(CLI_ERROR_MARKS)
    ]
    if marked:
        return ": ".join(dict.fromkeys(marked))
    texts = [line.strip() for line in lines if line.strip()]
    named = [m.group(1) for line in texts if (m := NAMED_ERROR.search(line))]
    if named:
        return named[-1]
    useful = [line for line in texts if not SUBPROCESS_EXIT.search(line)]
    return (useful or texts or ["no output"])[-1]


def _ended_the_app(after: list[str]) -> bool:
    """Whether the traceback followed by `after` ended the app: the CLI says its subprocess
    exited, or prints no error of its own after it."""
    if any(SUBPROCESS_EXIT.search(line) for line in after):
        return True
    return not any(line.lstrip().startswith(CLI_ERROR_MARKS) for line in after)


def _context_args(context: Mapping[str, Any]) -> list[str]:
    args: list[str] = []
    for key, value in context.items():
        text = json.dumps(value) if isinstance(value, (dict, list)) else str(value)
        if isinstance(value, bool):
            text = text.lower()
        args += ["--context", f"{key}={text}"]
    return args


def ensure_assets_bucket(endpoint_url: str) -> None:
    """The bucket a bootstrap stack would own, and its version parameter (`ensure_bootstrap`);
    creating them directly is much faster in moto."""
    env = aws_env(endpoint_url)
    s3 = boto3.client(
        "s3",
        endpoint_url=endpoint_url,
        region_name=REGION,
        aws_access_key_id=env["AWS_ACCESS_KEY_ID"],
        aws_secret_access_key=env["AWS_SECRET_ACCESS_KEY"],
    )
    existing = {b["Name"] for b in s3.list_buckets().get("Buckets", [])}
    if ASSETS_BUCKET not in existing:
        s3.create_bucket(Bucket=ASSETS_BUCKET)
    ensure_bootstrap(endpoint_url)


# What a bootstrap stack records; the CDK CLI (and the template's BootstrapVersion parameter) read
# it for a stack with the default synthesizer. The pinned CLI's bootstrap template's version.
BOOTSTRAP_VERSION_PARAMETER = f"/cdk-bootstrap/{QUALIFIER}/version"
BOOTSTRAP_VERSION = "33"


def ensure_bootstrap(endpoint_url: str) -> None:
    """The bootstrap version parameter, so that a user's app with the default synthesizer
    deploys as this app (CliCredentialsStackSynthesizer) does: without it the CLI refuses
    ("SSM parameter /cdk-bootstrap/hnb659fds/version not found"). moto's STS lets the CLI
    assume the bootstrap roles, which it never checks exist."""
    env = aws_env(endpoint_url)
    boto3.client(
        "ssm",
        endpoint_url=endpoint_url,
        region_name=REGION,
        aws_access_key_id=env["AWS_ACCESS_KEY_ID"],
        aws_secret_access_key=env["AWS_SECRET_ACCESS_KEY"],
    ).put_parameter(
        Name=BOOTSTRAP_VERSION_PARAMETER, Value=BOOTSTRAP_VERSION, Type="String", Overwrite=True
    )


@dataclass
class Deployment:
    """A deployed stack: its name, its outputs, and the cloud assembly it was deployed from.

    The assembly holds the staged code of every function (what the local stack runs), so it
    lives as long as the deployment is used; `remove` deletes the temporary folder `deploy`
    made for it (an `outdir` the caller gave is the caller's to keep).
    """

    stack_name: str
    outputs: dict[str, str]
    assembly_dir: Path
    temporary: Path | None = None

    def remove(self) -> None:
        if self.temporary is not None:
            shutil.rmtree(self.temporary, ignore_errors=True)
            self.temporary = None


def default_app() -> AppSource:
    """The app a caller names none for: this checkout's own (its cdk.json), else the working
    folder's, as the CDK CLI would find it."""
    if (ROOT / "cdk.json").is_file():
        return AppSource(ROOT)
    return AppSource.resolve(None)


def deploy(
    endpoint_url: str,
    context: Mapping[str, Any] | None = None,
    *,
    app: AppSource | None = None,
    outdir: Path | None = None,
    work_dir: Path | None = None,
    timeout_s: float = 600,
) -> Deployment:
    """Deploy (or update) the app's stack at `endpoint_url`; its name, outputs and assembly.

    `context` adds to cdk.json's context (for example `{"stackName": "Test"}`, which also
    picks the stack to deploy); without a `stackName` the app must have one stack, and its
    name is learnt from the deployment. `localStack` is always true here, `layerBytecode` false
    unless `context` sets it (`LOCAL_DEFAULTS`). `work_dir` is where the temporary folder is
    made (default build/ in the app's folder): a served stack's state folder, so that `eonce
    down` can remove it even when the serving process was killed. `app` is the CDK app
    (`default_app()` when None); the CLI runs in its folder with this interpreter's scripts
    first on PATH, so a cdk.json's `python app.py` runs with the Python that runs this.
    """
    app = app or default_app()
    try:
        cdk = find_cdk(app.folder)
    except ToolMissing as exc:
        raise DeployError(str(exc)) from None
    ensure_assets_bucket(endpoint_url)
    merged = {**LOCAL_DEFAULTS, **(context or {}), "localStack": True}
    wanted = merged.get("stackName")
    env = {
        # The shell's named profile goes: with the config files hidden, botocore in the app's
        # synth would refuse it (ProfileNotFound), as in the functions (store_environment).
        **{k: v for k, v in os.environ.items() if k not in PROFILE_VARIABLES},
        **aws_env(endpoint_url),
        "JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION": "20",
        "JSII_SILENCE_WARNING_UNTESTED_NODE_VERSION": "1",
        "CDK_DISABLE_VERSION_CHECK": "1",
        "CDK_DISABLE_CLI_TELEMETRY": "true",
        "PATH": os.pathsep.join(
            [str(Path(sys.executable).parent), os.environ.get("PATH", os.defpath)]
        ),
    }
    parent = work_dir or app.folder / BUILD_DIR
    parent.mkdir(parents=True, exist_ok=True)
    # A cloud assembly folder of its own, so concurrent local deploys (tests, `make run`) never
    # meet the CLI's lock on a shared output folder.
    tmp = Path(tempfile.mkdtemp(prefix="cdk.out.local-", dir=parent))
    try:
        outputs_file = tmp / "outputs.json"
        assembly = outdir or tmp / "assembly"
        cmd = [
            str(cdk),
            "deploy",
            *app.cli_args(),
            *([str(wanted)] if wanted else ["--all"]),
            "--require-approval=never",
            "--method=direct",
            "--progress=errors-only",
            "--no-notices",
            "--no-color",
            "--ci",
            f"--output={assembly}",
            f"--outputs-file={outputs_file}",
            *_context_args(merged),
        ]
        try:
            result = run_in_own_group(cmd, env=env, timeout_s=timeout_s, cwd=app.folder)
        except subprocess.TimeoutExpired as exc:  # one line, as a failure is, not a traceback
            printed = "\n".join(_text(part) for part in (exc.stdout, exc.stderr))
            raise DeployError(
                f"cdk deploy did not finish within {timeout_s:g}s (stopped)",
                output="\n".join(printed.splitlines()[-40:]),
            ) from None
        if result.returncode != 0:
            printed = "\n".join((result.stdout, result.stderr))
            raise DeployError(
                f"cdk deploy failed ({result.returncode}): {failure_reason(printed)}",
                output="\n".join(printed.splitlines()[-40:]),
            )
        outputs: dict[str, dict[str, str]] = json.loads(outputs_file.read_text())
        names = [str(wanted)] if wanted in outputs else sorted(outputs)
        if len(names) != 1:
            raise DeployError(
                f"the app deployed {len(names)} stacks ({', '.join(names)}): the local stack "
                "runs one; pick it with `eonce up --stack NAME` (the stackName context)"
            )
        deployment = Deployment(
            stack_name=names[0],
            outputs=dict(outputs.get(names[0], {})),
            assembly_dir=assembly,
            temporary=tmp,
        )
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    if outdir is not None:  # the caller's folder holds the assembly: nothing here is needed
        deployment.remove()
    return deployment


def _text(output: str | bytes | None) -> str:
    """A timed-out process's partial output (bytes, whatever the text mode), as text."""
    if isinstance(output, bytes):
        return output.decode(errors="replace")
    return output or ""


def run_in_own_group(
    cmd: Sequence[str], *, env: Mapping[str, str], timeout_s: float, cwd: Path = ROOT
) -> subprocess.CompletedProcess[str]:
    """Run a command in a process group of its own; if this process is interrupted (Ctrl-C,
    SIGTERM, a timeout), end the whole group: the CDK CLI runs the app as a child of its own."""
    proc = subprocess.Popen(
        list(cmd),
        cwd=cwd,
        env=dict(env),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        process_group=0,
    )
    try:
        out, err = proc.communicate(timeout=timeout_s)
    except BaseException:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate()
        raise
    return subprocess.CompletedProcess(proc.args, proc.returncode, out, err)


def main() -> None:
    """`python -m local_aws.local_deploy http://localhost:PORT [key=value ...]`: print outputs."""
    import sys

    if len(sys.argv) < 2:
        raise SystemExit("usage: python -m local_aws.local_deploy ENDPOINT_URL [key=value ...]")
    context = dict(arg.split("=", 1) for arg in sys.argv[2:])
    deployment = deploy(sys.argv[1], context)
    deployment.remove()
    print(json.dumps(deployment.outputs, indent=2))


if __name__ == "__main__":
    main()
