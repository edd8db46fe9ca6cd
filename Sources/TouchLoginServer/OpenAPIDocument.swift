/// The HTTP API, described for people and tools (served at /openapi.yaml).
enum OpenAPIDocument {
    static let yaml = #"""
        openapi: 3.1.0
        info:
          title: touchlogin
          version: "1"
          description: |
            Password accounts, sessions, device binding and fingerprint (passkey) login in WebAuthn's shapes.
            Binary WebAuthn fields are base64url without padding. Every error is
            `{"error": {"code": "...", "message": "..."}}`; codes are stable.
        servers:
          - url: http://localhost:8080
        components:
          securitySchemes:
            bearer: { type: http, scheme: bearer }
          schemas:
            Error:
              type: object
              required: [error]
              properties:
                error:
                  type: object
                  required: [code, message]
                  properties:
                    code:
                      type: string
                      enum: [malformed_request, invalid_username, weak_password, account_exists, invalid_credentials, rate_limited,
                             unauthorized, challenge_unknown, challenge_expired, unknown_credential, credential_exists, not_found,
                             payload_too_large, internal_error, unavailable, step_up_required, password_locked, attestation_required, attestation_untrusted, malformed_cbor, malformed_client_data,
                             malformed_authenticator_data, malformed_attestation, unsupported_attestation_format,
                             attestation_signature_invalid, unsupported_algorithm, malformed_public_key, wrong_type,
                             challenge_mismatch, origin_mismatch, cross_origin_not_allowed, rp_id_mismatch, user_not_present,
                             user_not_verified, credential_id_mismatch, signature_invalid, counter_regression, too_large]
                    message: { type: string }
            Credentials:
              type: object
              required: [username, password]
              properties:
                username: { type: string, pattern: "^[a-z0-9._@-]{1,64}$" }
                password: { type: string, minLength: 8 }
                clientToken: { type: string, description: "at a password login: the clientToken this client was given at its last one, judged on its own budget" }
            Session:
              type: object
              required: [token, username, expiresAt, method]
              properties:
                token: { type: string }
                username: { type: string }
                expiresAt: { type: number, description: seconds since 1970 }
                method: { type: string, enum: [password, passkey] }
                newDevices: { type: array, description: "at a passkey login, devices added since this one last logged in", items: { $ref: "#/components/schemas/Device" } }
                clientToken: { type: string, description: "at a password login or sign-up: keep it and send it with later password logins" }
            Device:
              type: object
              required: [id, name, createdAt, signCount, attestationFormat]
              properties:
                id: { type: string, description: credential ID, base64url }
                name: { type: string }
                createdAt: { type: number }
                lastUsedAt: { type: number }
                signCount: { type: integer }
                attestationFormat: { type: string, enum: [none, packed, tpm] }
                aaguid: { type: string, description: the authenticator model (all zeros when it does not say) }
                transports: { type: array, items: { type: string } }
                backupEligible: { type: boolean, description: "BE: may be synced to other devices" }
                backedUp: { type: boolean, description: "BS: backed up as of the last login" }
                userVerified: { type: boolean, description: the authenticator verified the user at registration (uvInitialized) }
                attestedKey: { type: string, description: "what a trusted laenclaved attestation stated of the key (daemon mode, sensor, access control) and the first 16 hex digits of the SHA-256 of its root's key, then (after '; ') the TPM a tpm attestation vouched for ('TPM id:49424D00 swtpm'); absent when none did" }
            Account:
              type: object
              required: [username, createdAt, devices]
              properties:
                username: { type: string }
                createdAt: { type: number }
                devices: { type: array, items: { $ref: "#/components/schemas/Device" } }
                activity: { type: array, description: newest first, kept 90 days, items: { $ref: "#/components/schemas/Activity" } }
            Activity:
              type: object
              required: [at, kind, address]
              properties:
                at: { type: number }
                kind: { type: string, enum: [sign-up, password-login, passkey-login, device-added, device-revoked, password-changed] }
                deviceID: { type: string }
                deviceName: { type: string }
                address: { type: string, description: the client address the server's limits saw }
            CreationOptions:
              type: object
              description: PublicKeyCredentialCreationOptionsJSON (WebAuthn Level 3)
              properties:
                publicKey: { type: object }
            RequestOptions:
              type: object
              description: PublicKeyCredentialRequestOptionsJSON (WebAuthn Level 3)
              properties:
                publicKey: { type: object }
            TPMKey:
              type: object
              required: [endorsementKey, endorsementCertificate, attestationKey]
              properties:
                endorsementKey: { type: string, description: "TPMT_PUBLIC, base64url" }
                endorsementCertificate: { type: string, description: "the maker's certificate, DER, base64url" }
                attestationKey: { type: string, description: "TPMT_PUBLIC of a restricted signing key, base64url" }
            RegistrationResponse:
              type: object
              required: [id, rawId, type, response]
              properties:
                id: { type: string }
                rawId: { type: string }
                type: { type: string, const: public-key }
                response:
                  type: object
                  required: [clientDataJSON, attestationObject]
                  properties:
                    clientDataJSON: { type: string }
                    attestationObject: { type: string }
                    transports: { type: array, items: { type: string } }
            AuthenticationResponse:
              type: object
              required: [id, rawId, type, response]
              properties:
                id: { type: string }
                rawId: { type: string }
                type: { type: string, const: public-key }
                response:
                  type: object
                  required: [clientDataJSON, authenticatorData, signature]
                  properties:
                    clientDataJSON: { type: string }
                    authenticatorData: { type: string }
                    signature: { type: string, description: DER ECDSA signature }
                    userHandle: { type: string }
          responses:
            Error:
              description: An error with a stable code
              content: { application/json: { schema: { $ref: "#/components/schemas/Error" } } }
        paths:
          /health:
            get:
              summary: Liveness and database reachability
              responses:
                "200": { description: ok, content: { application/json: { schema: { type: object, properties: { status: { type: string }, storage: { type: string } } } } } }
                "503": { $ref: "#/components/responses/Error" }
          /metrics:
            get:
              summary: Prometheus text exposition
              responses: { "200": { description: counters, content: { text/plain: { schema: { type: string } } } } }
          /api/accounts:
            post:
              summary: Create an account (and sign in)
              requestBody: { required: true, content: { application/json: { schema: { $ref: "#/components/schemas/Credentials" } } } }
              responses:
                "201": { description: signed in, content: { application/json: { schema: { $ref: "#/components/schemas/Session" } } } }
                "400": { $ref: "#/components/responses/Error" }
                "409": { $ref: "#/components/responses/Error" }
                "429": { $ref: "#/components/responses/Error" }
          /api/session:
            post:
              summary: Sign in with the password
              requestBody: { required: true, content: { application/json: { schema: { $ref: "#/components/schemas/Credentials" } } } }
              responses:
                "200": { description: signed in, content: { application/json: { schema: { $ref: "#/components/schemas/Session" } } } }
                "401": { $ref: "#/components/responses/Error" }
                "423": { $ref: "#/components/responses/Error" }
                "429": { $ref: "#/components/responses/Error" }
            delete:
              summary: Sign out (revokes the session)
              security: [{ bearer: [] }]
              responses:
                "204": { description: signed out }
                "401": { $ref: "#/components/responses/Error" }
          /api/session/password:
            post:
              summary: Type the password again (a step-up); for five minutes the session may then bind and revoke devices
              security: [{ bearer: [] }]
              requestBody: { required: true, content: { application/json: { schema: { type: object, required: [password], properties: { password: { type: string } } } } } }
              responses:
                "204": { description: confirmed }
                "401": { $ref: "#/components/responses/Error" }
                "423": { $ref: "#/components/responses/Error" }
                "429": { $ref: "#/components/responses/Error" }
          /api/account/password:
            post:
              summary: Change the password, with the current one or after a step-up; every other session of the account ends
              security: [{ bearer: [] }]
              requestBody: { required: true, content: { application/json: { schema: { type: object, required: [newPassword], properties: { currentPassword: { type: string }, newPassword: { type: string, minLength: 8 } } } } } }
              responses:
                "204": { description: changed }
                "400": { $ref: "#/components/responses/Error" }
                "401": { $ref: "#/components/responses/Error" }
                "403": { $ref: "#/components/responses/Error" }
                "423": { $ref: "#/components/responses/Error" }
                "429": { $ref: "#/components/responses/Error" }
          /api/account:
            get:
              summary: The signed-in account and its devices
              security: [{ bearer: [] }]
              responses:
                "200": { description: account, content: { application/json: { schema: { $ref: "#/components/schemas/Account" } } } }
                "401": { $ref: "#/components/responses/Error" }
          /api/devices/options:
            post:
              summary: Registration options (a single-use challenge bound to this session); needs the password typed in the last five minutes
              security: [{ bearer: [] }]
              requestBody: { content: { application/json: { schema: { type: object, properties: { deviceName: { type: string }, kind: { type: string, enum: [device-key, passkey], description: "with --require-attestation, attestation \"direct\" is asked of every kind, or of device-key only with --allow-unattested-passkeys" } } } } } }
              responses:
                "200": { description: options, content: { application/json: { schema: { $ref: "#/components/schemas/CreationOptions" } } } }
                "401": { $ref: "#/components/responses/Error" }
                "403": { $ref: "#/components/responses/Error" }
          /api/devices:
            get:
              summary: The account's devices
              security: [{ bearer: [] }]
              responses:
                "200": { description: devices, content: { application/json: { schema: { type: array, items: { $ref: "#/components/schemas/Device" } } } } }
                "401": { $ref: "#/components/responses/Error" }
            post:
              summary: Register a device (attestation none, packed or tpm; with --require-attestation a laenclaved chain to a trusted root, unless --allow-unattested-passkeys and kind passkey; with --require-hardware-root a tpm statement under this server's attestation-key CA)
              security: [{ bearer: [] }]
              requestBody:
                required: true
                content:
                  application/json:
                    schema:
                      type: object
                      required: [credential]
                      properties:
                        deviceName: { type: string }
                        kind: { type: string, enum: [device-key, passkey] }
                        credential: { $ref: "#/components/schemas/RegistrationResponse" }
                        keyCertificates: { type: array, maxItems: 4, items: { type: string }, description: "with a tpm attestation: the key's laenclaved chain (base64url DER, leaf first)" }
              responses:
                "201": { description: registered, content: { application/json: { schema: { $ref: "#/components/schemas/Device" } } } }
                "400": { $ref: "#/components/responses/Error" }
                "401": { $ref: "#/components/responses/Error" }
                "403": { $ref: "#/components/responses/Error" }
                "409": { $ref: "#/components/responses/Error" }
          /api/tpm/attestation-key/challenge:
            post:
              summary: With --tpm-maker-roots, a credential (TPM2_MakeCredential) for a TPM's attestation key, wrapped for its maker-certified endorsement key; needs the password typed in the last five minutes
              security: [{ bearer: [] }]
              requestBody: { required: true, content: { application/json: { schema: { $ref: "#/components/schemas/TPMKey" } } } }
              responses:
                "200": { description: wrapped, content: { application/json: { schema: { type: object, required: [credentialBlob, encryptedSecret, token], properties: { credentialBlob: { type: string }, encryptedSecret: { type: string }, token: { type: string } } } } } }
                "400": { $ref: "#/components/responses/Error" }
                "401": { $ref: "#/components/responses/Error" }
                "403": { $ref: "#/components/responses/Error" }
                "404": { $ref: "#/components/responses/Error" }
          /api/tpm/attestation-key/certificate:
            post:
              summary: The attestation key's certificate (WebAuthn's aikCert) for the secret the TPM activated
              security: [{ bearer: [] }]
              requestBody: { required: true, content: { application/json: { schema: { type: object, required: [key, token, secret], properties: { key: { $ref: "#/components/schemas/TPMKey" }, token: { type: string }, secret: { type: string } } } } } }
              responses:
                "200": { description: certified, content: { application/json: { schema: { type: object, required: [certificate, root], properties: { certificate: { type: string, description: "DER, base64url" }, root: { type: string, description: PEM } } } } } }
                "400": { $ref: "#/components/responses/Error" }
                "401": { $ref: "#/components/responses/Error" }
                "403": { $ref: "#/components/responses/Error" }
                "404": { $ref: "#/components/responses/Error" }
          /api/tpm/root:
            get:
              summary: With --tpm-maker-roots, this server's TPM attestation-key CA (PEM), which tpm statements chain to
              responses:
                "200": { description: root, content: { application/x-pem-file: { schema: { type: string } } } }
                "404": { $ref: "#/components/responses/Error" }
          /api/devices/{id}:
            patch:
              summary: Rename a device (with the password typed in the last five minutes)
              security: [{ bearer: [] }]
              parameters: [{ name: id, in: path, required: true, schema: { type: string } }]
              requestBody: { required: true, content: { application/json: { schema: { type: object, required: [name], properties: { name: { type: string, maxLength: 64 } } } } } }
              responses:
                "200": { description: renamed, content: { application/json: { schema: { $ref: "#/components/schemas/Device" } } } }
                "401": { $ref: "#/components/responses/Error" }
                "403": { $ref: "#/components/responses/Error" }
                "404": { $ref: "#/components/responses/Error" }
            delete:
              summary: Revoke a device (the session's own passkey, or any with the password typed in the last five minutes)
              security: [{ bearer: [] }]
              parameters: [{ name: id, in: path, required: true, schema: { type: string } }]
              responses:
                "204": { description: revoked }
                "401": { $ref: "#/components/responses/Error" }
                "403": { $ref: "#/components/responses/Error" }
                "404": { $ref: "#/components/responses/Error" }
          /api/passkey/options:
            post:
              summary: Authentication options (a single-use challenge); a name without a passkey gets a stable decoy credential ID
              requestBody: { content: { application/json: { schema: { type: object, properties: { username: { type: string } } } } } }
              responses:
                "200": { description: options, content: { application/json: { schema: { $ref: "#/components/schemas/RequestOptions" } } } }
                "429": { $ref: "#/components/responses/Error" }
          /api/passkey/login:
            post:
              summary: Sign in with a device's assertion
              requestBody:
                required: true
                content:
                  application/json:
                    schema:
                      type: object
                      required: [credential]
                      properties:
                        credential: { $ref: "#/components/schemas/AuthenticationResponse" }
              responses:
                "200": { description: signed in, content: { application/json: { schema: { $ref: "#/components/schemas/Session" } } } }
                "400": { $ref: "#/components/responses/Error" }
                "401": { $ref: "#/components/responses/Error" }
                "429": { $ref: "#/components/responses/Error" }
        """#
}
