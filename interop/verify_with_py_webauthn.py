"""Verifies a registration and an assertion made by touchlogin's enclave-backed client with
py_webauthn (an independent relying-party implementation).

usage: verify_with_py_webauthn.py RECORD.json
RECORD: {"rpId", "origin", "registration": {"challenge", "credential"}, "assertion": {"challenge", "credential"},
"attestationRoot": PEM (optional: then a packed or tpm attestation's chain must lead to it)}
(challenges base64url). Exit 0 when both verify, 1 otherwise.
"""
import json
import sys

from webauthn import verify_authentication_response, verify_registration_response
from webauthn.helpers import base64url_to_bytes
from webauthn.helpers.structs import AttestationFormat

record = json.load(open(sys.argv[1]))
try:
    registration = verify_registration_response(
        credential=record["registration"]["credential"],
        expected_challenge=base64url_to_bytes(record["registration"]["challenge"]),
        expected_rp_id=record["rpId"], expected_origin=record["origin"], require_user_verification=True,
        pem_root_certs_bytes_by_fmt={fmt: [record["attestationRoot"].encode()] for fmt in (AttestationFormat.PACKED, AttestationFormat.TPM)} if "attestationRoot" in record else None)
    print("registration verified: fmt=%s sign_count=%d uv=%s aaguid=%s" % (registration.fmt, registration.sign_count, registration.user_verified, registration.aaguid))
    authentication = verify_authentication_response(
        credential=record["assertion"]["credential"],
        expected_challenge=base64url_to_bytes(record["assertion"]["challenge"]),
        expected_rp_id=record["rpId"], expected_origin=record["origin"],
        credential_public_key=registration.credential_public_key,
        credential_current_sign_count=registration.sign_count, require_user_verification=True)
    print("assertion verified: new_sign_count=%d uv=%s" % (authentication.new_sign_count, authentication.user_verified))
except Exception as error:  # py_webauthn raises its own InvalidRegistrationResponse etc.
    print("REJECTED: %s: %s" % (type(error).__name__, error))
    sys.exit(1)
