#ifndef LA_TPM_INTERNAL_H
#define LA_TPM_INTERNAL_H

// What la_tpm.c and la_tpm_keys.c share: the connection and the steps every command set begins with.

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

#endif
