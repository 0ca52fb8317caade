"""End-to-end scenarios of `agent-memory mcp --listen` with the official MCP Python SDK.

Run by tests/mcp_http.rs as

    python mcp_http_client.py SCENARIO BINARY STORE APP

Each scenario starts the real server binary on a free loopback port (`--listen 127.0.0.1:0`,
the address is read from its stderr), drives it with the SDK's Streamable HTTP client (and with
plain httpx for what a well-behaved client never sends: forged headers, bad credentials,
bursts), checks what it must, stops the server with SIGTERM and prints
"mcp http scenario SCENARIO passed". Keys for JWTs and TLS are made here, at run time, with the
`cryptography` package; nothing private is committed.
"""

import asyncio
import json
import os
import re
import signal
import ssl
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from contextlib import asynccontextmanager
from datetime import timedelta

import httpx
import jwt
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import McpError

# The checked calls and the checks of the search options are the stdio test's, run over HTTP.
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from mcp_client import KEY_TOOLS, Calls, check, search_options  # noqa: E402

READ_TOOLS = {"memory_get", "memory_list", "memory_search"}
PROTOCOL = "2025-06-18"


def clean_env(home, log="info"):
    env = {k: v for k, v in os.environ.items() if not k.startswith("AGENT_MEMORY_")}
    env.pop("RUST_LOG", None)
    env["HOME"] = home
    env["XDG_DATA_HOME"] = os.path.join(home, "data")
    env["AGENT_MEMORY_LOG"] = log
    return env


class Server:
    """One `agent-memory mcp --listen` process on a free loopback port."""

    def __init__(self, binary, store, app, args, home, log="info"):
        self.cmd = [binary, "--store", store, "--app", app, "mcp", "--listen", "127.0.0.1:0"]
        self.cmd += args
        self.env = clean_env(home, log)
        self.stderr = []
        self.proc = None
        self.url = None

    def start(self):
        self.proc = subprocess.Popen(
            self.cmd, env=self.env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE, text=True)
        listening = threading.Event()

        def drain():
            for line in self.proc.stderr:
                self.stderr.append(line)
                match = re.search(r"listening on (\S+)/mcp", line)
                if match and not listening.is_set():
                    self.base = match.group(1)
                    self.url = self.base + "/mcp"
                    listening.set()
            listening.set()

        threading.Thread(target=drain, daemon=True).start()
        check(listening.wait(30) and self.url, f"server did not start: {self.logs()}")
        return self

    def logs(self):
        return "".join(self.stderr)

    def stop(self, timeout=30):
        """SIGTERM, then the exit code."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        try:
            return self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            raise AssertionError(f"server ignored SIGTERM for {timeout} s: {self.logs()}")

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        code = self.stop()
        if exc[0] is None:
            check(code == 0, f"server exit {code} after SIGTERM: {self.logs()}")


def api_key(binary, home, file, user, namespace=None, read_only=False, label=None):
    cmd = [binary, "api-key", "add", "--file", file, "--user", user]
    if namespace:
        cmd += ["--namespace", namespace]
    if read_only:
        cmd.append("--read-only")
    if label:
        cmd += ["--label", label]
    out = subprocess.run(cmd, env=clean_env(home), capture_output=True, text=True, check=True)
    lines = out.stdout.splitlines()
    check(len(lines) == 1 and lines[0].startswith("amk_"), f"api-key add printed {out.stdout!r}")
    return lines[0]


def key_id(key):
    return key.split("_")[1]


class Client(Calls):
    """An initialized SDK session, with the checks of tests/mcp_client.py."""

    def __init__(self, session, label):
        self.session = session
        self.label = label

    async def tool_names(self):
        return {tool.name for tool in (await self.session.list_tools()).tools}


@asynccontextmanager
async def connect(url, token, label="client", headers=None, verify=True):
    all_headers = {"Authorization": f"Bearer {token}"}
    all_headers.update(headers or {})
    async with httpx.AsyncClient(headers=all_headers, timeout=30, verify=verify) as http:
        async with streamable_http_client(url, http_client=http) as (read, write, _):
            async with ClientSession(read, write) as session:
                await session.initialize()
                yield Client(session, label)


async def rpc(url, token=None, method="tools/list", params=None, headers=None, verify=True,
              body=None):
    """One raw JSON-RPC POST, as a hostile or careless client might send it."""
    all_headers = {"Accept": "application/json, text/event-stream",
                   "Content-Type": "application/json", "MCP-Protocol-Version": PROTOCOL}
    if token is not None:
        all_headers["Authorization"] = f"Bearer {token}"
    if isinstance(headers, list):  # repeated headers, as (name, value) pairs
        all_headers = list(all_headers.items()) + headers
    else:
        all_headers.update(headers or {})
    if body is None:
        body = json.dumps({"jsonrpc": "2.0", "id": 1, "method": method, "params": params or {}})
    async with httpx.AsyncClient(timeout=30, verify=verify) as http:
        return await http.post(url, content=body, headers=all_headers)


async def until_status(url, token, status, what):
    """Waits for a request with `token` to answer `status`: within a second, or `what` failed.
    Returns how long it took."""
    since = time.monotonic()
    while (await rpc(url, token)).status_code != status:
        check(time.monotonic() - since < 1.0, f"{what} after 1 s")
        await asyncio.sleep(0.02)
    return time.monotonic() - since


async def all_keys(client, limit=100):
    keys, cursor = [], None
    while True:
        args = {"limit": limit}
        if cursor:
            args["cursor"] = cursor
        page = await client.ok("memory_list", args)
        keys += [(item["key"], item["content"]) for item in page["items"]]
        cursor = page["next_cursor"]
        if cursor is None:
            return keys


def cli_record(binary, home, store, app, user, key):
    out = subprocess.run([binary, "--store", store, "--app", app, "--user", user, "--json",
                          "get", key], env=clean_env(home), capture_output=True, text=True)
    check(out.returncode == 0, f"get {key}: {out.stderr}")
    return json.loads(out.stdout)


# --- scenarios -------------------------------------------------------------------------------

async def isolation(binary, store, app, home):
    """Two users' keys through one server see only their own memories; nothing in a request
    but the credential can name a user."""
    keys = os.path.join(home, "keys.jsonl")
    alice = api_key(binary, home, keys, "user-alice-51c")
    bob = api_key(binary, home, keys, "user-bob-93d", label="bob's laptop")
    alice_work = api_key(binary, home, keys, "user-alice-51c", namespace="work")
    check(oct(os.stat(keys).st_mode & 0o777) == "0o600", "key file is created 0600")
    check(alice not in open(keys).read(), "the key file holds no key")
    # At debug level too, the log holds no key, user id or content (checked at the end).
    with Server(binary, store, app, ["--api-keys", keys], home, log="debug") as server:
        async with connect(server.url, alice, "alice") as a, connect(server.url, bob, "bob") as b:
            check(await a.tool_names() == KEY_TOOLS, "the five tools over HTTP")
            await a.ok("memory_save", {"key": "plan", "content": "content-alice-secret"})
            await b.ok("memory_save", {"key": "plan", "content": "content-bob-secret"})
            got = await a.ok("memory_get", {"key": "plan"})
            check(got["memory"]["content"] == "content-alice-secret", f"alice reads hers: {got}")
            check(await all_keys(b) == [("plan", "content-bob-secret")], "bob sees only his")
            # Arguments naming another user are refused, exactly as on stdio.
            for tool, args in [("memory_get", {"key": "plan", "user_id": "user-bob-93d"}),
                               ("memory_list", {"user": "user-bob-93d"}),
                               ("memory_save", {"key": "x", "content": "y",
                                                "application_id": "other", "namespace": "n"})]:
                msg = await a.error(tool, args)
                check("does not accept" in msg, f"{tool} smuggle: {msg}")
        # Headers, query strings and session ids naming bob change nothing: alice stays alice.
        smuggle = {"X-User-Id": "user-bob-93d", "X-Agent-Memory-User": "user-bob-93d",
                   "X-Forwarded-User": "user-bob-93d", "Mcp-Session-Id": "bob-session",
                   "X-Namespace": "work"}
        async with connect(server.url + "?user=user-bob-93d&user_id=user-bob-93d", alice,
                           "alice-smuggling", headers=smuggle) as a:
            check(await all_keys(a) == [("plan", "content-alice-secret")], "headers ignored")
        async with connect(server.url, alice_work, "alice-work") as w:
            check(await all_keys(w) == [], "alice's work namespace is empty")
            await w.ok("memory_save", {"key": "plan", "content": "content-alice-work"})
        for path in ["/mcp/user-bob-93d", "/user-bob-93d/mcp"]:
            response = await rpc(server.base + path, alice)
            check(response.status_code == 404, f"{path}: {response.status_code}")
        # Credentials that are missing, forged, doubled or of the wrong kind get 401.
        response = await rpc(server.url)
        check(response.status_code == 401, f"no credential: {response.status_code}")
        check(response.headers.get("www-authenticate", "").startswith("Bearer"), "challenge")
        forged = alice[:-4] + ("0000" if not alice.endswith("0000") else "1111")
        for token in [forged, "amk_" + key_id(bob) + "_" + "0" * 64, "not-a-key", "a.b.c"]:
            response = await rpc(server.url, token)
            check(response.status_code == 401, f"{token[:12]}: {response.status_code}")
            check('error="invalid_token"' in response.headers["www-authenticate"], "invalid")
        response = await rpc(server.url, headers={"Authorization": f"Bearer {alice}, Bearer {bob}"})
        check(response.status_code == 401, f"two credentials: {response.status_code}")
        response = await rpc(server.url, headers=[("Authorization", f"Bearer {alice}"),
                                                  ("Authorization", f"Bearer {bob}")])
        check(response.status_code == 401, f"two headers: {response.status_code}")
        response = await rpc(server.url, headers={"Authorization": f"Basic {alice}"})
        check(response.status_code == 401, f"basic: {response.status_code}")
    # Provenance: the record names the key that wrote it, not the client's claim.
    record = cli_record(binary, home, store, app, "user-bob-93d", "plan")
    check(record["source"]["agent"] == "key:" + key_id(bob), f"bob's source: {record}")
    # The log names credentials by id; it holds no key, user id or content.
    logs = server.logs()
    check("key:" + key_id(alice) in logs and "memory_save" in logs, f"request log: {logs}")
    for secret in [alice, bob, alice_work, "user-alice-51c", "user-bob-93d", "content-alice",
                   "content-bob", "bob's laptop", alice.split("_")[2]]:
        check(secret not in logs, f"the log leaks {secret[:16]}…: {logs}")


async def search(binary, store, app, home):
    """memory_search's match and ignore_case and the metadata filter over HTTP, exactly as over
    stdio."""
    keys = os.path.join(home, "keys.jsonl")
    gina = api_key(binary, home, keys, "user-gina")
    # The checks make dozens of calls back to back: more than the default rate limit allows a
    # user in a second on a fast machine, which is not what this scenario is about.
    args = ["--api-keys", keys, "--rate-limit", "10000/s"]
    with Server(binary, store, app, args, home) as server:
        async with connect(server.url, gina, "gina") as client:
            await search_options(client)


async def revoke(binary, store, app, home):
    """A revoked key is refused within a second, without a restart; a new key works as soon;
    a garbled key file refuses every key until it is fixed."""
    keys = os.path.join(home, "keys.jsonl")
    alice = api_key(binary, home, keys, "user-alice")
    bob = api_key(binary, home, keys, "user-bob")
    with Server(binary, store, app, ["--api-keys", keys], home) as server:
        async with connect(server.url, alice, "alice") as a:
            await a.ok("memory_save", {"key": "k", "content": "before revocation"})
        out = subprocess.run([binary, "api-key", "revoke", "--file", keys, key_id(alice)],
                             env=clean_env(home), capture_output=True, text=True)
        check(out.returncode == 0, f"revoke: {out.stderr}")
        took = await until_status(server.url, alice, 401, "revoked key still accepted")
        check(oct(os.stat(keys).st_mode & 0o777) == "0o600", "revoke keeps the mode")
        response = await rpc(server.url, alice, "tools/call",
                             {"name": "memory_save", "arguments": {"key": "k", "content": "x"}})
        check(response.status_code == 401, "a revoked key cannot write")
        check((await rpc(server.url, bob)).status_code == 200, "other keys keep working")
        # A key added while the server runs works within a second too.
        carol = api_key(binary, home, keys, "user-carol")
        await until_status(server.url, carol, 200, "new key still refused")
        # A garbled file fails closed: every key is refused until it parses again.
        good = open(keys).read()
        with open(keys, "a") as f:
            f.write("{ this is not an entry }\n")
        await until_status(server.url, bob, 503, "garbled key file still trusted")
        with open(keys + ".tmp", "w") as f:
            f.write(good)
        os.chmod(keys + ".tmp", 0o600)
        os.replace(keys + ".tmp", keys)
        await until_status(server.url, bob, 200, "fixed key file not used")
        check((await rpc(server.url, alice)).status_code == 401, "still revoked after the fix")
    record = cli_record(binary, home, store, app, "user-alice", "k")
    check(record["content"] == "before revocation", "the revoked key wrote nothing more")
    print(f"revoked key refused after {took * 1000:.0f} ms")


async def read_only(binary, store, app, home):
    """A read-only key lists only the read tools and cannot write, whatever it sends."""
    keys = os.path.join(home, "keys.jsonl")
    writer = api_key(binary, home, keys, "user-dana")
    reader = api_key(binary, home, keys, "user-dana", read_only=True)
    listing = subprocess.run([binary, "--json", "api-key", "list", "--file", keys],
                             env=clean_env(home), capture_output=True, text=True, check=True)
    entries = [json.loads(line) for line in listing.stdout.splitlines()]
    check([e["read_only"] for e in entries] == [False, True], f"list: {entries}")
    check(all("hash" not in e for e in entries), "list shows no hash")
    with Server(binary, store, app, ["--api-keys", keys], home) as server:
        async with connect(server.url, writer, "writer") as w:
            await w.ok("memory_save", {"key": "k", "content": "written by the writer"})
        async with connect(server.url, reader, "reader") as r:
            check(await r.tool_names() == READ_TOOLS, "read-only key lists the read tools")
            got = await r.ok("memory_get", {"key": "k"})
            check(got["memory"]["content"] == "written by the writer", "reader reads")
            check(len((await r.ok("memory_search", {"query": "writer"}))["items"]) == 1, "search")
            for tool, args in [("memory_save", {"key": "k", "content": "overwritten"}),
                               ("memory_delete", {"key": "k"})]:
                try:
                    await r.session.call_tool(tool, args)
                except McpError as err:
                    check("read-only" in str(err), f"{tool} refusal: {err}")
                else:
                    raise AssertionError(f"read-only key ran {tool}")
        response = await rpc(server.url, reader, "tools/call",
                             {"name": "memory_delete", "arguments": {"key": "k"}})
        check(response.status_code == 200 and "error" in response.json(), f"{response.text}")
    check(cli_record(binary, home, store, app, "user-dana", "k")["content"]
          == "written by the writer", "the read-only key changed nothing")
    # The fact tools: a read-only key sees only recall.
    with Server(binary, store, app, ["--api-keys", keys, "--tools", "facts"], home) as server:
        async with connect(server.url, reader, "fact-reader") as r:
            check(await r.tool_names() == {"recall"}, "read-only fact tools")
        async with connect(server.url, writer, "fact-writer") as w:
            check(await w.tool_names() == {"remember", "forget", "recall"}, "fact tools")


def make_jwt_keys(directory):
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import ec, ed25519, rsa
    keys = {
        "rsa-1": ("RS256", rsa.generate_private_key(public_exponent=65537, key_size=2048)),
        "ec-1": ("ES256", ec.generate_private_key(ec.SECP256R1())),
        "ed-1": ("EdDSA", ed25519.Ed25519PrivateKey.generate()),
    }
    jwks = []
    for kid, (alg, private) in keys.items():
        cls = {"RS256": jwt.algorithms.RSAAlgorithm, "ES256": jwt.algorithms.ECAlgorithm,
               "EdDSA": jwt.algorithms.OKPAlgorithm}[alg]
        jwk = cls.to_jwk(private.public_key(), as_dict=True)
        jwk.update({"kid": kid, "use": "sig", "alg": alg})
        jwks.append(jwk)
    # An encryption key and a key of an unsupported curve are skipped, not fatal.
    skipped = jwt.algorithms.ECAlgorithm.to_jwk(
        ec.generate_private_key(ec.SECP384R1()).public_key(), as_dict=True)
    skipped.update({"kid": "p384"})
    jwks.append(skipped)
    path = os.path.join(directory, "jwks.json")
    with open(path, "w") as f:
        json.dump({"keys": jwks}, f)
    pem_path = os.path.join(directory, "keys.pem")
    with open(pem_path, "wb") as f:
        for kid in ("ec-1", "ed-1"):
            f.write(keys[kid][1].public_key().public_bytes(
                serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo))
    attacker = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    return keys, attacker, path, pem_path


ISSUER = "https://issuer.test"
AUDIENCE = "https://memory.test/mcp"


def token(keys, kid, sub="user-jwt", headers=None, **claims):
    alg, private = keys[kid]
    now = int(time.time())
    body = {"iss": ISSUER, "aud": AUDIENCE, "sub": sub, "iat": now, "exp": now + 300}
    body.update(claims)
    body = {k: v for k, v in body.items() if v is not None}
    return jwt.encode(body, private, algorithm=alg, headers={"kid": kid, **(headers or {})})


async def jwt_tokens(binary, store, app, home):
    """Valid, expired, early, wrong-audience, wrong-issuer, badly signed and unknown-key tokens,
    with a JWKS document and with PEM keys."""
    keys, attacker, jwks_path, pem_path = make_jwt_keys(home)
    args = ["--jwt-issuer", ISSUER, "--jwt-audience", AUDIENCE, "--jwt-keys", jwks_path,
            "--jwt-namespace-claim", "memory_ns", "--public-url", "https://memory.test"]
    with Server(binary, store, app, args, home) as server:
        metadata_url = "https://memory.test/.well-known/oauth-protected-resource"
        for path in ["/.well-known/oauth-protected-resource",
                     "/.well-known/oauth-protected-resource/mcp"]:
            async with httpx.AsyncClient() as http:
                meta = (await http.get(server.base + path)).json()
            check(meta["resource"] == AUDIENCE and meta["authorization_servers"] == [ISSUER],
                  f"metadata: {meta}")
        response = await rpc(server.url)
        check(response.status_code == 401, "no token")
        check(response.headers["www-authenticate"] == f'Bearer resource_metadata="{metadata_url}"',
              f"challenge: {response.headers['www-authenticate']}")

        async with connect(server.url, token(keys, "rsa-1"), "rs256") as c:
            await c.ok("memory_save", {"key": "k", "content": "saved with RS256"})
        for kid in ("ec-1", "ed-1"):
            async with connect(server.url, token(keys, kid), kid) as c:
                got = await c.ok("memory_get", {"key": "k"})
                check(got["memory"]["content"] == "saved with RS256", f"{kid}: same user")
        async with connect(server.url, token(keys, "ec-1", sub="user-jwt-other"), "other") as c:
            check(await all_keys(c) == [], "another subject sees nothing")
        async with connect(server.url, token(keys, "ed-1", memory_ns="work"), "ns") as c:
            check(await all_keys(c) == [], "the namespace claim selects the namespace")
        # Within the 60 s leeway an expired token still passes.
        async with connect(server.url, token(keys, "rsa-1", exp=int(time.time()) - 30), "skew") as c:
            check(len(await all_keys(c)) == 1, "leeway")

        now = int(time.time())
        forged = jwt.encode({"iss": ISSUER, "aud": AUDIENCE, "sub": "user-jwt", "exp": now + 300},
                            attacker, algorithm="RS256", headers={"kid": "rsa-1"})
        refused = {
            "expired": (token(keys, "rsa-1", exp=now - 120), "expired"),
            "not yet valid": (token(keys, "ec-1", nbf=now + 120), "not valid yet"),
            "wrong audience": (token(keys, "rsa-1", aud="https://other.test/mcp"), "aud"),
            "wrong issuer": (token(keys, "ed-1", iss="https://evil.test"), "iss"),
            "bad signature": (forged, "signature"),
            "unknown key id": (token(keys, "rsa-1", headers={"kid": "rsa-2"}), "key id"),
            "no expiry": (token(keys, "rsa-1", exp=None), "claim"),
            "hmac": (jwt.encode({"iss": ISSUER, "aud": AUDIENCE, "sub": "u", "exp": now + 60},
                                "a shared secret of at least 32 bytes", algorithm="HS256"),
                     "algorithm"),
            "none": (jwt.encode({"iss": ISSUER, "aud": AUDIENCE, "sub": "u", "exp": now + 60},
                                None, algorithm="none"), "malformed"),
            "garbage": ("abc.def.ghi", "malformed"),
        }
        for case, (bad, reason) in refused.items():
            response = await rpc(server.url, bad)
            check(response.status_code == 401, f"{case}: {response.status_code}")
            challenge = response.headers["www-authenticate"]
            check(challenge.startswith(f'Bearer resource_metadata="{metadata_url}"')
                  and 'error="invalid_token"' in challenge and reason in challenge,
                  f"{case}: {challenge}")

        # Key rotation: the key file is re-read on change; a key taken out stops working.
        rsa_token, ec_token = token(keys, "rsa-1"), token(keys, "ec-1")
        check((await rpc(server.url, rsa_token)).status_code == 200, "RS256 before rotation")
        with open(jwks_path) as f:
            jwks = json.load(f)
        jwks["keys"] = [k for k in jwks["keys"] if k.get("kid") != "rsa-1"]
        with open(jwks_path + ".new", "w") as f:
            json.dump(jwks, f)
        os.replace(jwks_path + ".new", jwks_path)
        await until_status(server.url, rsa_token, 401, "a removed JWT key still works")
        check((await rpc(server.url, ec_token)).status_code == 200, "the other keys still work")
    logs = server.logs()
    check("user-jwt" not in logs and "saved with RS256" not in logs, f"log leaks: {logs}")
    check("sub:" in logs, "requests are logged by subject hash")

    # API-key users and token users have separate id spaces: a token whose subject is the
    # user of an API key never reads what that key saved.
    key_file = os.path.join(home, "keys-beside-tokens.jsonl")
    same_name = api_key(binary, home, key_file, "user-jwt")
    args = ["--api-keys", key_file, "--jwt-issuer", ISSUER, "--jwt-audience", AUDIENCE,
            "--jwt-keys", jwks_path]
    with Server(binary, store, app, args, home) as server:
        async with connect(server.url, same_name, "key-user") as c:
            await c.ok("memory_save", {"key": "from-key", "content": "saved with the API key"})
        async with connect(server.url, token(keys, "ec-1"), "token-user") as c:
            seen = [key for key, _ in await all_keys(c)]
            check("from-key" not in seen and "k" in seen, f"token user sees {seen}")

    # PEM public keys: no key ids, each key tried for tokens of its algorithm.
    args = ["--jwt-issuer", ISSUER, "--jwt-audience", AUDIENCE, "--jwt-keys", pem_path]
    with Server(binary, store, app, args, home) as server:
        async with connect(server.url, token(keys, "ec-1"), "pem-es256") as c:
            got = await c.ok("memory_get", {"key": "k"})
            check(got["found"] is True, "PEM ES256")
        async with connect(server.url, token(keys, "ed-1", headers={"kid": "whatever"}), "pem") as c:
            check((await c.ok("memory_get", {"key": "k"}))["found"] is True, "PEM EdDSA")
        check((await rpc(server.url, token(keys, "rsa-1"))).status_code == 401, "no RSA key")


def make_tls(directory):
    import datetime
    import ipaddress
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "localhost")])
    now = datetime.datetime.now(datetime.timezone.utc)
    cert = (x509.CertificateBuilder().subject_name(name).issuer_name(name)
            .public_key(key.public_key()).serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(now + datetime.timedelta(days=1))
            .add_extension(x509.SubjectAlternativeName([
                x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]),
                critical=False)
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
            .sign(key, hashes.SHA256()))
    cert_path, key_path = os.path.join(directory, "cert.pem"), os.path.join(directory, "key.pem")
    with open(cert_path, "wb") as f:
        f.write(cert.public_bytes(serialization.Encoding.PEM))
    with open(key_path, "wb") as f:
        f.write(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                  serialization.NoEncryption()))
    return cert_path, key_path


async def hardening(binary, store, app, home):
    """Host and Origin allow-lists, the body cap, the per-user rate limit, /healthz, TLS."""
    keys = os.path.join(home, "keys.jsonl")
    erin = api_key(binary, home, keys, "user-erin")
    frank = api_key(binary, home, keys, "user-frank")
    args = ["--api-keys", keys, "--rate-limit", "5/s", "--allowed-host", "memory.example"]
    with Server(binary, store, app, args, home) as server:
        async with httpx.AsyncClient() as http:
            health = await http.get(server.base + "/healthz")
        check(health.status_code == 200 and health.text == "ok\n", f"healthz: {health.text}")
        await asyncio.sleep(1.1)
        for host, expected in [("evil.example", 403), ("memory.example", 200),
                               ("localhost:1234", 200), ("127.0.0.1.evil.example", 403)]:
            response = await rpc(server.url, erin, headers={"Host": host})
            check(response.status_code == expected, f"Host {host}: {response.status_code}")
        await asyncio.sleep(1.1)
        for origin, expected in [("https://evil.example", 403), ("http://localhost:3000", 200),
                                 ("null", 403)]:
            response = await rpc(server.url, erin, headers={"Origin": origin})
            check(response.status_code == expected, f"Origin {origin}: {response.status_code}")
        big = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {
            "name": "memory_save", "arguments": {"key": "big", "content": "x" * (1024 * 1024)}}})
        response = await rpc(server.url, erin, body=big)
        check(response.status_code == 413, f"1 MiB body: {response.status_code}")
        await asyncio.sleep(1.1)

        # A burst of one user beyond 5/s gets 429 with Retry-After; another user is unaffected.
        burst = await asyncio.gather(*[rpc(server.url, erin) for _ in range(20)])
        codes = [response.status_code for response in burst]
        check(codes.count(429) >= 5 and codes.count(200) >= 1, f"burst: {codes}")
        limited = next(r for r in burst if r.status_code == 429)
        check(int(limited.headers["retry-after"]) >= 1, "Retry-After")
        check((await rpc(server.url, frank)).status_code == 200, "another user's allowance")
        await asyncio.sleep(1.1)
        check((await rpc(server.url, erin)).status_code == 200, "allowance refills")

    cert, key = make_tls(home)
    args = ["--api-keys", keys, "--tls-cert", cert, "--tls-key", key]
    with Server(binary, store, app, args, home) as server:
        check(server.url.startswith("https://"), f"TLS url: {server.url}")
        context = ssl.create_default_context(cafile=cert)
        async with httpx.AsyncClient(verify=context) as http:
            check((await http.get(server.base + "/healthz")).status_code == 200, "TLS healthz")
        async with connect(server.url, erin, "tls", verify=context) as c:
            await c.ok("memory_save", {"key": "over-tls", "content": "encrypted in transit"})
            check((await c.ok("memory_get", {"key": "over-tls"}))["found"], "TLS round trip")


async def memory_call(server, token, arguments):
    """One call of the memory tool over a raw POST: (HTTP status, result or None)."""
    response = await rpc(server.url, token, "tools/call",
                         {"name": "memory", "arguments": arguments})
    result = response.json().get("result") if response.status_code == 200 else None
    return response.status_code, result


async def memory_ok(server, token, arguments, what):
    """One call of the memory tool that must succeed; `what` names it in the failure."""
    status, result = await memory_call(server, token, arguments)
    check(status == 200 and not result.get("isError"), f"{what}: {status} {result}")


async def create_files(server, token, paths, text):
    """Creates each of `paths` holding `text`, one memory tool call each."""
    for path in paths:
        arguments = {"command": "create", "path": path, "file_text": text}
        await memory_ok(server, token, arguments, f"create {path}")


async def work(binary, store, app, home):
    """The rate limit charges work: a directory rename of 150 files (about 450 store
    operations) costs about 450 units, so the user's next call waits; ordinary calls cost one
    unit each; another user is unaffected."""
    keys = os.path.join(home, "keys.jsonl")
    gina = api_key(binary, home, keys, "user-gina")
    hugo = api_key(binary, home, keys, "user-hugo")
    fast = ["--api-keys", keys, "--tools", "memory", "--rate-limit", "10000/s"]
    with Server(binary, store, app, fast, home) as server:
        await create_files(server, gina, [f"/memories/big/f{i:03}.md" for i in range(150)], "x")
    slow = ["--api-keys", keys, "--tools", "memory", "--rate-limit", "5/s"]
    with Server(binary, store, app, slow, home) as server:
        # Ordinary calls cost one unit each: a burst of five is admitted.
        await create_files(server, hugo, [f"/memories/h{i}.md" for i in range(5)], "y")
        await asyncio.sleep(1.1)
        await memory_ok(server, gina, {
            "command": "rename", "old_path": "/memories/big", "new_path": "/memories/moved"},
            "rename")
        response = await rpc(server.url, gina)
        check(response.status_code == 429, f"after the rename: {response.status_code}")
        wait = int(response.headers["retry-after"])
        check(wait >= 30, f"the rename's work is charged: Retry-After {wait}")
        check((await rpc(server.url, hugo)).status_code == 200, "another user's allowance")
        # A view of the moved directory, once the allowance is back, costs one unit.
        await asyncio.sleep(1.1)
        status, result = await memory_call(server, hugo, {"command": "view", "path": "/memories"})
        check(status == 200, f"hugo views: {status}")


async def load(binary, store, app, home):
    """50 concurrent clients of 10 users doing mixed calls: nothing lost, nothing crossed."""
    keys = os.path.join(home, "keys.jsonl")
    users = [f"user-load-{n}" for n in range(10)]
    tokens = {user: api_key(binary, home, keys, user) for user in users}
    args = ["--api-keys", keys, "--rate-limit", "10000/s"]
    with Server(binary, store, app, args, home) as server:
        async def worker(user, n):
            kept = {}
            async with connect(server.url, tokens[user], f"{user}/{n}") as c:
                for i in range(12):
                    key = f"c{n}-{i}"
                    content = f"{user}:{n}:{i}"
                    saved = await c.ok("memory_save", {"key": key, "content": content})
                    check(saved["memory"]["content"] == content, "save result")
                    kept[key] = content
                    got = await c.ok("memory_get", {"key": key})
                    check(got["memory"]["content"] == content, f"{user}/{n} reads its write")
                    if i % 4 == 3:
                        drop = f"c{n}-{i - 1}"
                        check((await c.ok("memory_delete", {"key": drop}))["deleted"], "delete")
                        del kept[drop]
                    if i % 5 == 0:
                        page = await c.ok("memory_search", {"query": user + ":"})
                        check(all(item["content"].startswith(user + ":")
                                  for item in page["items"]), "search stays in the user")
            return user, kept

        started = time.monotonic()
        results = await asyncio.gather(*[worker(user, n) for user in users for n in range(5)])
        took = time.monotonic() - started
        expected = {user: {} for user in users}
        for user, kept in results:
            expected[user].update(kept)
        for user in users:
            async with connect(server.url, tokens[user], user) as c:
                stored = dict(await all_keys(c))
            check(stored == expected[user], f"{user}: {len(stored)} stored, "
                                            f"{len(expected[user])} expected")
    print(f"50 clients, {len(results) * 12 * 2} writes and reads in {took:.1f} s")


async def sigterm_during_load(binary, store, app, home):
    """SIGTERM while 16 clients write: the server stops cleanly, and after a restart every
    write it acknowledged is readable."""
    keys = os.path.join(home, "keys.jsonl")
    users = [f"user-term-{n}" for n in range(4)]
    tokens = {user: api_key(binary, home, keys, user) for user in users}
    args = ["--api-keys", keys, "--rate-limit", "10000/s"]
    server = Server(binary, store, app, args, home).start()
    acknowledged = {user: {} for user in users}
    stop_writing = asyncio.Event()
    signalled = None
    early_failures = []

    async def writer(user, n):
        try:
            async with connect(server.url, tokens[user], f"{user}/{n}") as c:
                i = 0
                while not stop_writing.is_set():
                    key, content = f"w{n}-{i}", f"{user} write {n}-{i}"
                    result = await c.session.call_tool(
                        "memory_save", {"key": key, "content": content},
                        read_timeout_seconds=timedelta(seconds=5))
                    check(not result.isError, f"save failed: {result}")
                    acknowledged[user][key] = content
                    i += 1
        except BaseException as err:  # noqa: BLE001
            # After SIGTERM the server goes away: whatever was acknowledged counts. Before it,
            # a failure is a bug.
            if signalled is None:
                early_failures.append(f"{user}/{n}: {err!r}")

    tasks = [asyncio.create_task(writer(user, n)) for user in users for n in range(4)]
    # Signal once every writer has had writes acknowledged, so the server is under load.
    deadline = time.monotonic() + 60
    while sum(len(w) for w in acknowledged.values()) < 200 or \
            any(len(w) < 8 for w in acknowledged.values()):
        check(not early_failures, f"writers failed before SIGTERM: {early_failures[:3]}")
        check(time.monotonic() < deadline, "the writers did not get going in 60 s")
        await asyncio.sleep(0.05)
    server.proc.send_signal(signal.SIGTERM)
    signalled = time.monotonic()
    code = await asyncio.get_running_loop().run_in_executor(None, server.proc.wait, 30)
    stopped_in = time.monotonic() - signalled
    stop_writing.set()
    await asyncio.wait(tasks, timeout=30)
    check(code == 0, f"exit {code} after SIGTERM: {server.logs()}")
    check(stopped_in < 10, f"took {stopped_in:.1f} s to stop")
    total = sum(len(writes) for writes in acknowledged.values())

    with Server(binary, store, app, args, home) as again:
        for user in users:
            async with connect(again.url, tokens[user], user) as c:
                stored = dict(await all_keys(c))
            missing = [key for key, content in acknowledged[user].items()
                       if stored.get(key) != content]
            check(not missing, f"{user}: acknowledged writes lost after restart: {missing[:5]}")
    print(f"{total} acknowledged writes all readable after SIGTERM and restart "
          f"(stopped in {stopped_in:.2f} s)")


SCENARIOS = {
    "isolation": isolation,
    "revoke": revoke,
    "read-only": read_only,
    "jwt": jwt_tokens,
    "hardening": hardening,
    "search": search,
    "work": work,
    "load": load,
    "sigterm": sigterm_during_load,
}


async def main():
    scenario, binary, store, app = sys.argv[1:5]
    with tempfile.TemporaryDirectory() as home:
        await SCENARIOS[scenario](binary, store, app, home)
    print(f"mcp http scenario {scenario} passed")


if __name__ == "__main__":
    asyncio.run(asyncio.wait_for(main(), timeout=240))
