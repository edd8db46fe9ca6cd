"""An independent software authenticator for touchlogin-server's interoperability test.

Builds registrations (packed self-attestation and none) and assertions with python-fido2's own
WebAuthn structures and pyca/cryptography's ECDSA, then drives the server's HTTP API: sign up,
register two credentials, log in with each, and check that a replay is refused.

usage: fido2_authenticator.py SERVER_URL USERNAME
"""
import json
import os
import sys
import urllib.error
import urllib.request
from hashlib import sha256

from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import ec
from fido2 import cbor
from fido2.cose import ES256
from fido2.utils import websafe_decode, websafe_encode
from fido2.webauthn import (AttestationObject, AttestedCredentialData, AuthenticatorData,
                            CollectedClientData)

SERVER, USERNAME = sys.argv[1], sys.argv[2]
ORIGIN = SERVER.rstrip("/")
FLAGS = AuthenticatorData.FLAG.UP | AuthenticatorData.FLAG.UV


def call(method, path, body=None, token=None):
    request = urllib.request.Request(ORIGIN + path, method=method, data=None if body is None else json.dumps(body).encode())
    request.add_header("Content-Type", "application/json")
    if token:
        request.add_header("Authorization", "Bearer " + token)
    try:
        with urllib.request.urlopen(request, timeout=20) as response:
            text = response.read()
            return response.status, (json.loads(text) if text else None)
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read() or b"null")


class Credential:
    def __init__(self, fmt):
        self.fmt = fmt
        self.key = ec.generate_private_key(ec.SECP256R1())
        self.id = os.urandom(32)
        self.counter = 0

    def register(self, options):
        rp_id = options["rp"]["id"]
        client_data = CollectedClientData.create("webauthn.create", websafe_decode(options["challenge"]), ORIGIN)
        credential_data = AttestedCredentialData.create(b"\0" * 16, self.id, ES256.from_cryptography_key(self.key.public_key()))
        auth_data = AuthenticatorData.create(sha256(rp_id.encode()).digest(), FLAGS | AuthenticatorData.FLAG.AT, 0, credential_data)
        statement = {}
        if self.fmt == "packed":
            signature = self.key.sign(bytes(auth_data) + client_data.hash, ec.ECDSA(hashes.SHA256()))
            statement = {"alg": ES256.ALGORITHM, "sig": signature}
        attestation = AttestationObject.create(self.fmt, auth_data, statement)
        return {"id": websafe_encode(self.id), "rawId": websafe_encode(self.id), "type": "public-key", "clientExtensionResults": {},
                "response": {"clientDataJSON": websafe_encode(bytes(client_data)), "attestationObject": websafe_encode(bytes(attestation))}}

    def assert_(self, options):
        self.counter += 1
        client_data = CollectedClientData.create("webauthn.get", websafe_decode(options["challenge"]), ORIGIN)
        auth_data = AuthenticatorData.create(sha256(options["rpId"].encode()).digest(), FLAGS, self.counter)
        signature = self.key.sign(bytes(auth_data) + client_data.hash, ec.ECDSA(hashes.SHA256()))
        return {"id": websafe_encode(self.id), "rawId": websafe_encode(self.id), "type": "public-key", "clientExtensionResults": {},
                "response": {"clientDataJSON": websafe_encode(bytes(client_data)), "authenticatorData": websafe_encode(bytes(auth_data)),
                             "signature": websafe_encode(signature)}}


def expect(condition, what):
    if not condition:
        print("FAILED:", what)
        sys.exit(1)
    print("ok:", what)


status, session = call("POST", "/api/accounts", {"username": USERNAME, "password": "correct horse battery"})
expect(status == 201, "account created")
token = session["token"]
for fmt in ("packed", "none"):
    credential = Credential(fmt)
    status, options = call("POST", "/api/devices/options", {"deviceName": "python-fido2 " + fmt}, token)
    expect(status == 200, "registration options")
    status, device = call("POST", "/api/devices", {"credential": credential.register(options["publicKey"])}, token)
    expect(status == 201 and device["attestationFormat"] == fmt, "%s registration accepted: %s" % (fmt, device))
    status, options = call("POST", "/api/passkey/options", {"username": USERNAME})
    assertion = credential.assert_(options["publicKey"])
    status, login = call("POST", "/api/passkey/login", {"credential": assertion})
    expect(status == 200 and login["method"] == "passkey", "%s credential logs in: %s" % (fmt, login))
    status, replay = call("POST", "/api/passkey/login", {"credential": assertion})
    expect(status == 400 and replay["error"]["code"] == "challenge_unknown", "replay refused: %s" % replay)
print("interop: python-fido2 registrations and assertions accepted")
