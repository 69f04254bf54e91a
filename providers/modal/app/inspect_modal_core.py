"""The Modal app's pure part: authorisation, checks, the sandbox's environment and its
.tunnels.env. Nothing here imports modal, so it is tested with the standard library alone
(python3 -m unittest discover -s providers/modal/app)."""

import hashlib
import hmac
import json
from urllib.parse import urlparse

# A token is accepted this long either side of its time.
TOKEN_WINDOW_MS = 300_000
# Where the supervisor keeps the workspace, its home and the agent's state.
ROOT = "/sandbox"
# Variables the app sets; a session secret of the same name does not replace them.
SYSTEM_VARS = (
    "INSPECT_SPAWN",
    "INSPECT_SANDBOX_TOKEN",
    "INSPECT_SESSION_ID",
    "INSPECT_SANDBOX_ID",
    "INSPECT_CONTROL_PLANE_URL",
    "INSPECT_SANDBOX_ROOT",
    "INSPECT_WORKSPACE",
    "HOME",
)
# Modal's own limit on a sandbox's life.
MAX_TIMEOUT_SECONDS = 24 * 3600


class Refused(Exception):
    """A request the app will not serve; `status` is the HTTP status to answer."""

    def __init__(self, status, message):
        super().__init__(message)
        self.status = status
        self.message = message


def verify_token(header, secret, now_ms):
    """`Authorization: Bearer {ms}.{hex(HMAC-SHA256(secret, ms))}`, within the window."""
    if not secret:
        raise Refused(503, "MODAL_API_SECRET is not set")
    if not header or not header.startswith("Bearer "):
        raise Refused(401, "missing bearer token")
    token = header[len("Bearer "):].strip()
    ms, _, mac = token.partition(".")
    if not ms.isdigit() or not mac:
        raise Refused(401, "malformed token")
    if abs(now_ms - int(ms)) > TOKEN_WINDOW_MS:
        raise Refused(401, "token outside its five minutes")
    want = hmac.new(secret.encode(), ms.encode(), hashlib.sha256).hexdigest()
    if not hmac.compare_digest(want, mac.lower()):
        raise Refused(401, "bad token")


def check_host(url, allowed_hosts):
    """The control plane a sandbox is sent to must be one this app was told of."""
    host = urlparse(url).hostname or ""
    allowed = [h.strip().lower() for h in allowed_hosts if h.strip()]
    if not allowed or host.lower() not in allowed:
        raise Refused(400, f"control_plane_url host {host!r} is not in ALLOWED_CONTROL_PLANE_HOSTS")


def check_create(body):
    """The fields a create or restore needs, with their types; returns the timeout."""
    for field in ("session_id", "sandbox_id", "control_plane_url", "sandbox_auth_token", "spawn"):
        if not isinstance(body.get(field), str) or not body[field]:
            raise Refused(400, f"{field} is required")
    try:
        json.loads(body["spawn"])
    except ValueError:
        raise Refused(400, "spawn is not JSON")
    env = body.get("user_env_vars") or {}
    if not isinstance(env, dict) or not all(isinstance(v, str) for v in env.values()):
        raise Refused(400, "user_env_vars must map names to strings")
    ports = body.get("tunnel_ports") or []
    if not isinstance(ports, list) or not all(isinstance(p, int) and 0 < p < 65536 for p in ports):
        raise Refused(400, "tunnel_ports must be port numbers")
    timeout = body.get("timeout_seconds", 7200)
    if not isinstance(timeout, int) or not 0 < timeout <= MAX_TIMEOUT_SECONDS:
        raise Refused(400, f"timeout_seconds must be 1..{MAX_TIMEOUT_SECONDS}")
    return timeout


def sandbox_env(body):
    """The supervisor's environment: the session's secrets, then the system variables."""
    env = {k: v for k, v in (body.get("user_env_vars") or {}).items() if k not in SYSTEM_VARS}
    env.update(
        {
            "INSPECT_SPAWN": body["spawn"],
            "INSPECT_SANDBOX_TOKEN": body["sandbox_auth_token"],
            "INSPECT_SESSION_ID": body["session_id"],
            "INSPECT_SANDBOX_ID": body["sandbox_id"],
            "INSPECT_CONTROL_PLANE_URL": body["control_plane_url"],
            "INSPECT_SANDBOX_ROOT": ROOT,
            "INSPECT_WORKSPACE": f"{ROOT}/workspace",
            "HOME": f"{ROOT}/home",
        }
    )
    return env


def tunnels_file(sandbox_id, urls):
    """`.tunnels.env`: our sandbox id first, then one `TUNNEL_<port>=<url>` per port."""
    lines = [f"TUNNEL_SANDBOX_ID={sandbox_id}"]
    lines += [f"TUNNEL_{port}={urls[port]}" for port in sorted(urls, key=int)]
    return "\n".join(lines) + "\n"


def ok(data=None):
    return {"success": True, "data": data}


def failed(message):
    return {"success": False, "error": message}


def check_build(body):
    """The fields a build needs; returns its time limit in seconds."""
    for field in ("build_id", "spawn", "callback_url", "callback_token"):
        if not isinstance(body.get(field), str) or not body[field]:
            raise Refused(400, f"{field} is required")
    try:
        json.loads(body["spawn"])
    except ValueError:
        raise Refused(400, "spawn is not JSON")
    if not body["callback_url"].startswith(("https://", "http://")):
        raise Refused(400, "callback_url must be http(s)")
    timeout = body.get("timeout_seconds", 1800)
    if not isinstance(timeout, int) or not 0 < timeout <= MAX_TIMEOUT_SECONDS:
        raise Refused(400, f"timeout_seconds must be 1..{MAX_TIMEOUT_SECONDS}")
    return timeout


# Where `inspect-supervisor build` writes how the build went.
BUILD_REPORT = f"{ROOT}/build-report.json"


def build_env(body):
    """`inspect-supervisor build`'s environment: the scope's secrets, then the system's."""
    env = {k: v for k, v in (body.get("user_env_vars") or {}).items() if k not in SYSTEM_VARS}
    env.update(
        {
            "INSPECT_SPAWN": body["spawn"],
            "INSPECT_SESSION_ID": body["build_id"],
            "INSPECT_SANDBOX_ID": body["build_id"],
            "INSPECT_SANDBOX_ROOT": ROOT,
            "INSPECT_WORKSPACE": f"{ROOT}/workspace",
            "HOME": f"{ROOT}/home",
            "INSPECT_BUILD_REPORT": BUILD_REPORT,
        }
    )
    if body.get("git_token"):
        env["INSPECT_GIT_TOKEN"] = body["git_token"]
    return env


def finished_report(written, image_id, runtime_version, duration_ms):
    """The report the control plane gets: what the build wrote, with the image it made."""
    # The control plane's BuildReport, as the supervisor writes it (camelCase).
    report = dict(written or {"success": False, "error": "the build wrote no report"})
    report["runtimeVersion"] = runtime_version
    report["durationMs"] = duration_ms
    if report.get("success") and image_id:
        report["imageId"] = image_id
    elif report.get("success"):
        report["success"] = False
        report.setdefault("error", "the build's filesystem could not be saved")
    return report
