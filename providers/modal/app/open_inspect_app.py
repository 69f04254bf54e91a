"""The Modal app the control plane calls for sandboxes (SANDBOX_PROVIDER=modal).

Modal has no REST API for sandboxes, so this app exposes one: each endpoint is a POST of
JSON at https://{workspace}--open-inspect-{endpoint}.modal.run, authorised by a bearer
token {ms}.{hex(HMAC-SHA256(MODAL_API_SECRET, ms))} valid for five minutes, answered with
{success, data?, error?}. A sandbox runs the same supervisor as everywhere else
(`inspect-supervisor run`, from providers/image/Dockerfile); an idle one is snapshotted
(Modal's filesystem snapshot is an image) and terminated; it comes back restored from that
image. Deploy: `modal deploy open_inspect_app.py` (see README.md)."""

import json
import os
import time
import urllib.request

import modal
from fastapi import Header
from fastapi.responses import JSONResponse

import inspect_modal_core as core

HERE = os.path.dirname(os.path.abspath(__file__))

app = modal.App("open-inspect")

# The sandboxes' image: the project's one sandbox image. Modal runs an image's ENTRYPOINT
# ahead of a sandbox's command, so it is cleared: each sandbox names its own command.
sandbox_image = modal.Image.from_dockerfile(
    os.path.join(HERE, "..", "..", "image", "Dockerfile"),
    context_dir=os.path.join(HERE, "..", "..", ".."),
).entrypoint([])
# The endpoints' own image: FastAPI and the pure core.
api_image = (
    modal.Image.debian_slim(python_version="3.12")
    .pip_install("fastapi[standard]")
    .add_local_python_source("inspect_modal_core")
)
# MODAL_API_SECRET, ALLOWED_CONTROL_PLANE_HOSTS (comma-separated), INSPECT_RUNTIME_VERSION.
api_secret = modal.Secret.from_name("open-inspect-api")
# The model's keys every sandbox gets (ANTHROPIC_API_KEY, or INSPECT_MODEL_BASE_URL/_API_KEY).
llm_secret = modal.Secret.from_name("llm-api-keys")

SESSION_TAG = "open_inspect_session"
SANDBOX_TAG = "open_inspect_sandbox"


def _runtime_version():
    return os.environ.get("INSPECT_RUNTIME_VERSION", "0.1.0")


def _refused(e: core.Refused):
    return JSONResponse({"detail": e.message}, status_code=e.status)


def _serve(authorization, body, handler):
    """Authorises the call, runs `handler(body)`, and answers as the contract says: a
    refusal is a 4xx/503 with `{detail}`; Modal's own failures are said, not raised.
    Endpoints are plain functions (FastAPI runs them in threads), so Modal's blocking
    calls are where they belong."""
    try:
        core.verify_token(authorization, os.environ.get("MODAL_API_SECRET", ""), int(time.time() * 1000))
        if not isinstance(body, dict):
            raise core.Refused(400, "the body is not a JSON object")
        return handler(body)
    except core.Refused as e:
        return _refused(e)
    except Exception as e:
        return core.failed(f"{type(e).__name__}: {e}")


def _find(sandbox_id):
    """The running Modal sandbox that is our sandbox `sandbox_id`, if any."""
    for sb in modal.Sandbox.list(app_id=app.app_id, tags={SANDBOX_TAG: sandbox_id}):
        return sb
    return None


def _start(body, image):
    timeout = core.check_create(body)
    core.check_host(body["control_plane_url"], os.environ.get("ALLOWED_CONTROL_PLANE_HOSTS", "").split(","))
    env = core.sandbox_env(body)
    ports = body.get("tunnel_ports") or []
    sb = modal.Sandbox.create(
        "inspect-supervisor",
        "run",
        app=app,
        image=image,
        secrets=[modal.Secret.from_dict(env), llm_secret],
        timeout=timeout,
        workdir=core.ROOT,
        encrypted_ports=ports,
    )
    sb.set_tags({SESSION_TAG: body["session_id"], SANDBOX_TAG: body["sandbox_id"]})
    urls = {}
    if ports:
        urls = {str(port): tunnel.url for port, tunnel in sb.tunnels().items()}
        sb.mkdir(f"{core.ROOT}/workspace", parents=True)
        with sb.open(f"{core.ROOT}/workspace/.tunnels.env", "w") as f:
            f.write(core.tunnels_file(body["sandbox_id"], urls))
    return core.ok(
        {
            "sandbox_id": body["sandbox_id"],
            "modal_object_id": sb.object_id,
            "status": "running",
            "runtime_version": _runtime_version(),
            "tunnel_urls": urls,
        }
    )


@app.function(image=api_image, secrets=[api_secret])
@modal.fastapi_endpoint(method="GET", label="open-inspect-api-health")
def api_health():
    return core.ok({"runtime_version": _runtime_version()})


def _create(body):
    return _start(body, sandbox_image)


def _restore(body):
    image_id = body.get("snapshot_image_id")
    if not isinstance(image_id, str) or not image_id:
        raise core.Refused(400, "snapshot_image_id is required")
    return _start(body, modal.Image.from_id(image_id))


def _snapshot(body):
    sb = _find(body.get("sandbox_id", ""))
    if sb is None:
        raise core.Refused(404, "no such sandbox")
    started = time.time()
    image = sb.snapshot_filesystem(timeout=300)
    return core.ok(
        {
            "image_id": image.object_id,
            "runtime_version": _runtime_version(),
            "duration_ms": int((time.time() - started) * 1000),
        }
    )


def _terminate(body):
    sb = _find(body.get("sandbox_id", ""))
    if sb is not None:
        sb.terminate()
    return core.ok({"terminated": sb is not None})


def _status(body):
    sb = _find(body.get("sandbox_id", ""))
    if sb is None:
        return core.ok({"status": "stopped", "detail": "no such sandbox"})
    code = sb.poll()
    if code is None:
        return core.ok({"status": "running"})
    return core.ok({"status": "exited", "detail": f"exited with {code}"})


def _delete_session(body):
    session_id = body.get("session_id", "")
    if not session_id:
        raise core.Refused(400, "session_id is required")
    n = 0
    for sb in modal.Sandbox.list(app_id=app.app_id, tags={SESSION_TAG: session_id}):
        sb.terminate()
        n += 1
    # Modal cannot delete images: a session's snapshots stay until Modal expires them.
    return core.ok({"terminated": n})


def _build_image(body):
    core.check_build(body)
    core.check_host(body["callback_url"], os.environ.get("ALLOWED_CONTROL_PLANE_HOSTS", "").split(","))
    run_build.spawn(body)
    return core.ok({"build_id": body["build_id"]})


@app.function(image=api_image, secrets=[api_secret], timeout=24 * 3600)
def run_build(body):
    """A build from start to report: a sandbox of its own, `inspect-supervisor build` in
    it, its filesystem saved as an image when the build succeeded, the report delivered."""
    started = time.time()
    timeout = core.check_build(body)
    sb = modal.Sandbox.create(
        "sleep",
        "infinity",
        app=app,
        image=sandbox_image,
        secrets=[modal.Secret.from_dict(core.build_env(body))],
        timeout=timeout + 600,
        workdir=core.ROOT,
    )
    image_id, written = None, None
    try:
        process = sb.exec("inspect-supervisor", "build", timeout=timeout)
        process.wait()
        try:
            with sb.open(core.BUILD_REPORT, "r") as f:
                written = json.loads(f.read())
        except Exception as e:
            written = {"success": False, "error": f"no build report: {e}"}
        if written.get("success"):
            image_id = sb.snapshot_filesystem(timeout=300).object_id
    finally:
        sb.terminate()
    report = core.finished_report(written, image_id, _runtime_version(), int((time.time() - started) * 1000))
    request = urllib.request.Request(
        body["callback_url"],
        data=json.dumps(report).encode(),
        headers={"Authorization": f"Bearer {body['callback_token']}", "Content-Type": "application/json"},
        method="POST",
    )
    for attempt in range(5):
        try:
            urllib.request.urlopen(request, timeout=30)
            return
        except Exception:
            time.sleep(2 ** attempt)


# The endpoints.


@app.function(image=api_image, secrets=[api_secret], timeout=90)
@modal.fastapi_endpoint(method="POST", label="open-inspect-api-create-sandbox")
def api_create_sandbox(body: dict, authorization: str | None = Header(default=None)):
    return _serve(authorization, body, _create)


@app.function(image=api_image, secrets=[api_secret], timeout=90)
@modal.fastapi_endpoint(method="POST", label="open-inspect-api-restore-sandbox")
def api_restore_sandbox(body: dict, authorization: str | None = Header(default=None)):
    return _serve(authorization, body, _restore)


@app.function(image=api_image, secrets=[api_secret], timeout=330)
@modal.fastapi_endpoint(method="POST", label="open-inspect-api-snapshot-sandbox")
def api_snapshot_sandbox(body: dict, authorization: str | None = Header(default=None)):
    return _serve(authorization, body, _snapshot)


@app.function(image=api_image, secrets=[api_secret], timeout=90)
@modal.fastapi_endpoint(method="POST", label="open-inspect-api-terminate-sandbox")
def api_terminate_sandbox(body: dict, authorization: str | None = Header(default=None)):
    return _serve(authorization, body, _terminate)


@app.function(image=api_image, secrets=[api_secret], timeout=60)
@modal.fastapi_endpoint(method="POST", label="open-inspect-api-sandbox-status")
def api_sandbox_status(body: dict, authorization: str | None = Header(default=None)):
    return _serve(authorization, body, _status)


@app.function(image=api_image, secrets=[api_secret], timeout=120)
@modal.fastapi_endpoint(method="POST", label="open-inspect-api-delete-session")
def api_delete_session(body: dict, authorization: str | None = Header(default=None)):
    return _serve(authorization, body, _delete_session)


@app.function(image=api_image, secrets=[api_secret], timeout=60)
@modal.fastapi_endpoint(method="POST", label="open-inspect-api-build-image")
def api_build_image(body: dict, authorization: str | None = Header(default=None)):
    return _serve(authorization, body, _build_image)
