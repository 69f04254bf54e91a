import hashlib
import hmac
import json
import unittest

import inspect_modal_core as core


def token(secret, ms):
    return f"Bearer {ms}." + hmac.new(secret.encode(), str(ms).encode(), hashlib.sha256).hexdigest()


def body(**extra):
    b = {
        "session_id": "s1",
        "sandbox_id": "sb_1",
        "control_plane_url": "https://inspect.example.com",
        "sandbox_auth_token": "tok",
        "spawn": json.dumps({"sessionId": "s1"}),
        "user_env_vars": {"NPM_TOKEN": "npm", "INSPECT_SANDBOX_TOKEN": "forged"},
        "tunnel_ports": [3000],
        "timeout_seconds": 3600,
    }
    b.update(extra)
    return b


class Tokens(unittest.TestCase):
    def test_a_fresh_token_passes(self):
        core.verify_token(token("s", 1_000_000), "s", 1_000_000 + 1000)

    def test_the_rust_client_token_passes(self):
        # The value the Rust client's test pins for ("key", 1700000000000).
        header = "Bearer 1700000000000.bc219f90295265e57b56e30d1325850a6965bfe4e087c07f1bf5701ecc56bbf6"
        core.verify_token(header, "key", 1_700_000_000_000)

    def test_refusals(self):
        cases = [
            (None, "s", 401),
            ("Basic x", "s", 401),
            ("Bearer nope", "s", 401),
            (token("other", 1_000_000), "s", 401),
            (token("s", 1_000_000), "s", 401),  # checked at a later time below
            (token("s", 1_000_000), "", 503),
        ]
        for header, secret, status in cases:
            with self.assertRaises(core.Refused) as e:
                core.verify_token(header, secret, 1_000_000 + core.TOKEN_WINDOW_MS + 1)
            self.assertEqual(e.exception.status, status, header)


class Requests(unittest.TestCase):
    def test_hosts_must_be_allowed(self):
        core.check_host("https://inspect.example.com/x", ["inspect.example.com"])
        for allowed in ([], ["other.example.com"]):
            with self.assertRaises(core.Refused) as e:
                core.check_host("https://inspect.example.com", allowed)
            self.assertEqual(e.exception.status, 400)

    def test_creates_are_checked(self):
        self.assertEqual(core.check_create(body()), 3600)
        for bad in (
            {"sandbox_id": ""},
            {"spawn": "{not json"},
            {"user_env_vars": {"A": 1}},
            {"tunnel_ports": [70000]},
            {"timeout_seconds": 999999},
        ):
            with self.assertRaises(core.Refused):
                core.check_create(body(**bad))

    def test_the_environment_puts_system_variables_last(self):
        env = core.sandbox_env(body())
        self.assertEqual(env["NPM_TOKEN"], "npm")
        self.assertEqual(env["INSPECT_SANDBOX_TOKEN"], "tok")
        self.assertEqual(env["INSPECT_WORKSPACE"], "/sandbox/workspace")

    def test_the_tunnels_file_sorts_ports(self):
        text = core.tunnels_file("sb_1", {"8080": "https://b", "3000": "https://a"})
        self.assertEqual(text, "TUNNEL_SANDBOX_ID=sb_1\nTUNNEL_3000=https://a\nTUNNEL_8080=https://b\n")


class Builds(unittest.TestCase):
    def build(self, **extra):
        b = {
            "build_id": "bld_1",
            "spawn": json.dumps({"bootMode": "build"}),
            "user_env_vars": {"NPM_TOKEN": "npm", "HOME": "/root"},
            "git_token": "ghs_x",
            "callback_url": "https://inspect.example.com/images/builds/bld_1/complete",
            "callback_token": "cb",
            "timeout_seconds": 600,
        }
        b.update(extra)
        return b

    def test_builds_are_checked(self):
        self.assertEqual(core.check_build(self.build()), 600)
        for bad in ({"callback_token": ""}, {"callback_url": "ftp://x"}, {"spawn": "{"}):
            with self.assertRaises(core.Refused):
                core.check_build(self.build(**bad))

    def test_the_build_environment(self):
        env = core.build_env(self.build())
        self.assertEqual(env["HOME"], "/sandbox/home")
        self.assertEqual(env["INSPECT_GIT_TOKEN"], "ghs_x")
        self.assertEqual(env["INSPECT_BUILD_REPORT"], core.BUILD_REPORT)
        self.assertNotIn("callback_token", json.dumps(env))

    def test_the_report_carries_the_image_only_when_it_was_made(self):
        ok = core.finished_report({"success": True, "repositories": []}, "im-1", "r1", 5)
        self.assertEqual((ok["success"], ok["imageId"], ok["runtimeVersion"]), (True, "im-1", "r1"))
        lost = core.finished_report({"success": True}, None, "r1", 5)
        self.assertFalse(lost["success"])
        none = core.finished_report(None, None, "r1", 5)
        self.assertFalse(none["success"])


if __name__ == "__main__":
    unittest.main()
