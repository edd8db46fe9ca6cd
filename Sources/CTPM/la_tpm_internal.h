#ifndef LA_TPM_INTERNAL_H
#define LA_TPM_INTERNAL_H

// What la_tpm.c, la_tpm_keys.c and la_tpm_attest.c share: the connection and the steps every
// command set begins with.

#include <tss2/tss2_esys.h>

#include "la_tpm.h"

struct la_tpm {
    TSS2_TCTI_CONTEXT *tcti;
    ESYS_CONTEXT *esys;
};

/// The owner hierarchy's storage primary (the TCG's ECC P-256 SRK template, noDA), created anew.
TSS2_RC la_tpm_create_primary(la_tpm *tpm, ESYS_TR *primary);

/// An HMAC session salted with `primary`, encrypting the first command and response parameters.
TSS2_RC la_tpm_start_encrypting_session(la_tpm *tpm, ESYS_TR primary, ESYS_TR *session);

/// An HMAC session, neither bound nor salted: an auth value crosses the bus only as an HMAC key.
TSS2_RC la_tpm_start_hmac_session(la_tpm *tpm, ESYS_TR *session);

/// Creates an object from `sensitive` (zeroed after) and `template` under `primary` in an encrypting
/// session; flushes the session and the primary. `blob` gets its marshalled public and private
/// parts (`*blob_size`: capacity, then length); `point`, when not NULL, its public ECC point.
TSS2_RC la_tpm_create_object(la_tpm *tpm, ESYS_TR primary, TPM2B_SENSITIVE_CREATE *sensitive,
                             const TPM2B_PUBLIC *template, uint8_t *blob, size_t *blob_size, TPMS_ECC_POINT *point);

/// The public and private parts of a blob `la_tpm_create_object` wrote, whole or an error.
TSS2_RC la_tpm_unmarshal_blob(const uint8_t *blob, size_t blob_size, TPM2B_PUBLIC *public, TPM2B_PRIVATE *private);

/// Sets the auth value (at most 32 bytes) ESYS authorizes `object` with.
TSS2_RC la_tpm_set_auth(la_tpm *tpm, ESYS_TR object, const uint8_t *auth, size_t auth_size);

/// The storage primary, from `ctx` (a context saved by an earlier call on this TPM) or created anew
/// and saved into `ctx`: re-creating it is an ECC key derivation, the costliest command of a
/// signature. A context the TPM no longer accepts (it was reset or cleared) is replaced.
TSS2_RC la_tpm_load_primary(la_tpm *tpm, la_tpm_context *ctx, ESYS_TR *primary);

/// Loads the key in `blob` under the primary and sets its auth value; the primary stays loaded
/// (`*primary`) for a session salted with it, else is flushed.
TSS2_RC la_tpm_load_key(la_tpm *tpm, la_tpm_context *primary_ctx, const uint8_t *blob, size_t blob_size,
                        const uint8_t *auth, size_t auth_size, int keep_primary, ESYS_TR *primary, ESYS_TR *key);

/// A session used for one command only: the TPM ends it with a command that succeeds (no flush to
/// send); ESYS keeps its record of it, closed by `la_tpm_session_ended`. A command that fails
/// leaves it loaded.
TSS2_RC la_tpm_one_command(la_tpm *tpm, ESYS_TR session, TPMA_SESSION attributes);
void la_tpm_session_ended(la_tpm *tpm, TSS2_RC rc, ESYS_TR *session);

/// A P-256 key made by the TPM under the storage primary (fixedTPM, fixedParent, noDA, usable with
/// `auth`, 1…32 bytes), for `uses` (sign, decrypt, restricted) with `scheme`.
TSS2_RC la_tpm_create_p256(la_tpm *tpm, la_tpm_context *primary_ctx, TPMA_OBJECT uses, TPMT_ECC_SCHEME scheme,
                           const uint8_t *auth, size_t auth_size, uint8_t *blob, size_t *blob_size,
                           TPMS_ECC_POINT *point);

/// A P-256 coordinate or signature half, left-padded to 32 bytes; longer is not P-256's.
TSS2_RC la_tpm_copy_padded(const TPM2B_ECC_PARAMETER *from, uint8_t out[32]);

#endif
