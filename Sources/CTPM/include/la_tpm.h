#ifndef LA_TPM_H
#define LA_TPM_H

#include <stddef.h>
#include <stdint.h>

// The few TPM 2.0 commands the daemon's hardware root needs, over tpm2-tss's ESAPI (libtss2-esys)
// and its TCTI loader (libtss2-tctildr). Each call returns a TSS2_RC (0: success); `la_tpm_error`
// names one. Blobs travel marshalled (TPM2B_PUBLIC then TPM2B_PRIVATE, each as the TPM writes it).

typedef struct la_tpm la_tpm;

/// Opens the TPM named by `tcti` in tpm2-tss's syntax ("device:/dev/tpmrm0",
/// "swtpm:host=127.0.0.1,port=2321"); never NULL (the loader's default would try a TCP simulator).
/// `flush`: flush the sessions and objects left loaded (a TPM without a resource manager, whose
/// slots a killed client fills); never with one, where they are other clients'.
uint32_t la_tpm_open(const char *tcti, int flush, la_tpm **out);
void la_tpm_close(la_tpm *tpm);

/// Seals `secret` (at most 128 bytes) under the owner hierarchy's ECC P-256 storage primary as a
/// keyedHash object that is fixedTPM, fixedParent and noDA. `blob` gets the marshalled public and
/// private parts; `*blob_size` is its capacity on entry, what was written on return.
uint32_t la_tpm_seal(la_tpm *tpm, const uint8_t *secret, size_t secret_size, uint8_t *blob, size_t *blob_size);

/// Loads a blob from `la_tpm_seal` under the same primary and unseals it into `secret`
/// (`*secret_size`: capacity on entry, length on return). Fails on any other TPM.
uint32_t la_tpm_unseal(la_tpm *tpm, const uint8_t *blob, size_t blob_size, uint8_t *secret, size_t *secret_size);

/// `size` (at most 32) random bytes from the TPM: one command, the floor of any TPM operation.
uint32_t la_tpm_random(la_tpm *tpm, uint8_t *out, size_t size);

/// Defines the rollback counter: an ordinary (not orderly) NV counter at `index` (in the owner's
/// range) that only `auth` (at most 32 bytes, never on the bus in the clear) may read or move,
/// moves it once (a counter reads only once written) and returns its first value, which is the
/// highest any counter of this TPM ever had. TPM2_RC_NV_DEFINED: `index` is taken.
uint32_t la_tpm_counter_define(la_tpm *tpm, uint32_t index, const uint8_t *auth, size_t auth_size, uint64_t *value);

/// The counter at `index`, moved by one first when `increment` (durably: the counter is not orderly).
uint32_t la_tpm_counter(la_tpm *tpm, uint32_t index, const uint8_t *auth, size_t auth_size, int increment,
                        uint64_t *value);

/// Removes the NV index `index` with the owner's (empty) authorization.
uint32_t la_tpm_counter_undefine(la_tpm *tpm, uint32_t index);

/// A saved context of the storage primary, kept by the caller between connections to one TPM
/// (`bytes` of `capacity`, `size` used; 0: none yet): with it a key's use loads the primary instead
/// of deriving it again. A context the TPM refuses (after a reset or a clear) is replaced.
typedef struct {
    uint8_t *bytes;
    size_t capacity;
    size_t size;
} la_tpm_context;

/// Room for a saved primary's context (marshalling checks the bound; without room the primary is
/// derived each time).
#define LA_TPM_MAX_CONTEXT 4096

/// Creates a P-256 key in the TPM under the storage primary: fixedTPM, fixedParent, noDA, made
/// by the TPM (sensitiveDataOrigin), for signing (`sign`: ECDSA with SHA-256) and/or key agreement
/// (`agree`: ECDH), usable only with `auth` (1…32 bytes, sent under an encrypting session). `blob`
/// gets its marshalled public and private parts (`*blob_size`: capacity, then length); `x`, `y`
/// its public point, as the TPM's TPM2B_PUBLIC states it.
uint32_t la_tpm_key_create(la_tpm *tpm, la_tpm_context *primary_ctx, int sign, int agree, const uint8_t *auth,
                           size_t auth_size, uint8_t *blob, size_t *blob_size, uint8_t x[32], uint8_t y[32]);

/// Signs the SHA-256 `digest` with the key in `blob` (ECDSA, inside the TPM): `r` and `s`.
uint32_t la_tpm_key_sign(la_tpm *tpm, la_tpm_context *primary_ctx, const uint8_t *blob, size_t blob_size,
                         const uint8_t *auth, size_t auth_size, const uint8_t digest[32], uint8_t r[32],
                         uint8_t s[32]);

/// ECDH inside the TPM between the key in `blob` and the peer's point: the shared point's x
/// coordinate (`shared`), returned under the session's encryption.
uint32_t la_tpm_key_agree(la_tpm *tpm, la_tpm_context *primary_ctx, const uint8_t *blob, size_t blob_size,
                          const uint8_t *auth, size_t auth_size, const uint8_t peer_x[32], const uint8_t peer_y[32],
                          uint8_t shared[32]);

/// The contents of NV index `index` (an endorsement key certificate: written by the TPM's maker,
/// read with the index's empty auth) into `out` (`*out_size`: capacity, then length).
uint32_t la_tpm_nv_read(la_tpm *tpm, uint32_t index, uint8_t *out, size_t *out_size);

/// The endorsement key the TPM derives from the TCG EK Credential Profile's template L-2 (ECC
/// P-256) or, with `p384`, H-3 (ECC P-384): its marshalled TPMT_PUBLIC into `public`.
uint32_t la_tpm_ek_public(la_tpm *tpm, int p384, uint8_t *public, size_t *public_size);

/// Creates an attestation key under the storage primary: restricted (it signs only what the TPM
/// itself states), ECDSA P-256 with SHA-256, fixedTPM, made by the TPM, usable only with `auth`.
uint32_t la_tpm_ak_create(la_tpm *tpm, la_tpm_context *primary_ctx, const uint8_t *auth, size_t auth_size,
                          uint8_t *blob, size_t *blob_size);

/// TPM2_ActivateCredential: the credential in `credential_blob` (marshalled TPM2B_ID_OBJECT) and
/// `secret` (TPM2B_ENCRYPTED_SECRET), wrapped for this TPM's endorsement key (template L-2, or H-3
/// with `ek_p384`) and the attestation key in `ak_blob`'s name, into `out`.
uint32_t la_tpm_activate_credential(la_tpm *tpm, la_tpm_context *primary_ctx, int ek_p384, const uint8_t *ak_blob,
                                    size_t ak_blob_size, const uint8_t *ak_auth, size_t ak_auth_size,
                                    const uint8_t *credential_blob, size_t credential_blob_size,
                                    const uint8_t *secret, size_t secret_size, uint8_t *out, size_t *out_size);

/// TPM2_Certify of the key in `key_blob` by the attestation key in `ak_blob`, with
/// `qualifying` (at most 64 bytes) as its extra data: the TPMS_ATTEST the TPM wrote into `attest`
/// and the attestation key's ECDSA signature of it (`r`, `s`).
uint32_t la_tpm_certify(la_tpm *tpm, la_tpm_context *primary_ctx, const uint8_t *key_blob, size_t key_blob_size,
                        const uint8_t *key_auth, size_t key_auth_size, const uint8_t *ak_blob, size_t ak_blob_size,
                        const uint8_t *ak_auth, size_t ak_auth_size, const uint8_t *qualifying,
                        size_t qualifying_size, uint8_t *attest, size_t *attest_size, uint8_t r[32], uint8_t s[32]);

/// Whether `rc` says the handle names nothing (an NV index that does not exist).
int la_tpm_rc_is_missing(uint32_t rc);

/// Whether `rc` says the NV index is already defined.
int la_tpm_rc_is_defined(uint32_t rc);

/// Whether `rc` says an authorization failed (a wrong auth value, with or without DA).
int la_tpm_rc_is_auth_fail(uint32_t rc);

/// How long one command may take before the TSS gives up on the TPM.
#define LA_TPM_TIMEOUT_MS 60000

/// The TSS's own words for `rc`.
const char *la_tpm_error(uint32_t rc);

/// Room for a blob of `la_tpm_seal`'s (its public and private parts come to a few hundred bytes;
/// marshalling checks the bound).
#define LA_TPM_MAX_BLOB 2048

#endif
