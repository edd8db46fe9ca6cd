#include <string.h>
#include <tss2/tss2_esys.h>
#include <tss2/tss2_mu.h>

#include "la_tpm.h"
#include "la_tpm_internal.h"

// Secure Enclave keys held by the TPM: P-256 keys it generates under the storage primary, which
// leave it only as a blob its own seed encrypts (fixedTPM, fixedParent); signing and key agreement
// run inside it. Each key has a random auth value of the daemon's, presented through an HMAC
// session, so a copy of the blob (read on the bus or from the disk) signs nothing.

TSS2_RC la_tpm_load_primary(la_tpm *tpm, la_tpm_context *ctx, ESYS_TR *primary) {
    if (ctx->size > 0) {
        TPMS_CONTEXT saved = {0};
        size_t offset = 0;
        if (Tss2_MU_TPMS_CONTEXT_Unmarshal(ctx->bytes, ctx->size, &offset, &saved) == TSS2_RC_SUCCESS &&
            Esys_ContextLoad(tpm->esys, &saved, primary) == TSS2_RC_SUCCESS)
            return TSS2_RC_SUCCESS;
        ctx->size = 0;
    }
    TSS2_RC rc = la_tpm_create_primary(tpm, primary);
    if (rc != TSS2_RC_SUCCESS) return rc;
    TPMS_CONTEXT *saved = NULL;
    if (Esys_ContextSave(tpm->esys, *primary, &saved) == TSS2_RC_SUCCESS) {
        size_t offset = 0;
        if (Tss2_MU_TPMS_CONTEXT_Marshal(saved, ctx->bytes, ctx->capacity, &offset) == TSS2_RC_SUCCESS)
            ctx->size = offset;
    }
    Esys_Free(saved);
    return TSS2_RC_SUCCESS;
}

TSS2_RC la_tpm_copy_padded(const TPM2B_ECC_PARAMETER *from, uint8_t out[32]) {
    if (from->size > 32) return TSS2_ESYS_RC_MALFORMED_RESPONSE;
    memset(out, 0, 32);
    memcpy(out + (32 - from->size), from->buffer, from->size);
    return TSS2_RC_SUCCESS;
}

TSS2_RC la_tpm_create_p256(la_tpm *tpm, la_tpm_context *primary_ctx, TPMA_OBJECT uses, TPMT_ECC_SCHEME scheme,
                           const uint8_t *auth, size_t auth_size, uint8_t *blob, size_t *blob_size,
                           TPMS_ECC_POINT *point) {
    if (auth_size == 0 || auth_size > 32) return TSS2_ESYS_RC_BAD_VALUE;
    ESYS_TR primary = ESYS_TR_NONE;
    TSS2_RC rc = la_tpm_load_primary(tpm, primary_ctx, &primary);
    if (rc != TSS2_RC_SUCCESS) return rc;
    TPM2B_SENSITIVE_CREATE sensitive = {0};
    sensitive.sensitive.userAuth.size = (UINT16)auth_size;
    memcpy(sensitive.sensitive.userAuth.buffer, auth, auth_size);
    TPM2B_PUBLIC template = {
        .publicArea = {
            .type = TPM2_ALG_ECC,
            .nameAlg = TPM2_ALG_SHA256,
            .objectAttributes = TPMA_OBJECT_USERWITHAUTH | TPMA_OBJECT_FIXEDTPM | TPMA_OBJECT_FIXEDPARENT |
                                TPMA_OBJECT_SENSITIVEDATAORIGIN | TPMA_OBJECT_NODA | uses,
            .parameters.eccDetail = {
                .symmetric = {.algorithm = TPM2_ALG_NULL},
                .scheme = scheme,
                .curveID = TPM2_ECC_NIST_P256,
                .kdf = {.scheme = TPM2_ALG_NULL},
            },
        },
    };
    return la_tpm_create_object(tpm, primary, &sensitive, &template, blob, blob_size, point);
}

uint32_t la_tpm_key_create(la_tpm *tpm, la_tpm_context *primary_ctx, int sign, int agree, const uint8_t *auth,
                           size_t auth_size, uint8_t *blob, size_t *blob_size, uint8_t x[32], uint8_t y[32]) {
    if (!sign && !agree) return TSS2_ESYS_RC_BAD_VALUE;
    TPMA_OBJECT uses = (sign ? TPMA_OBJECT_SIGN_ENCRYPT : 0) | (agree ? TPMA_OBJECT_DECRYPT : 0);
    TPMT_ECC_SCHEME any = {.scheme = TPM2_ALG_NULL};
    TPMS_ECC_POINT point = {0};
    TSS2_RC rc = la_tpm_create_p256(tpm, primary_ctx, uses, any, auth, auth_size, blob, blob_size, &point);
    if (rc == TSS2_RC_SUCCESS) rc = la_tpm_copy_padded(&point.x, x);
    if (rc == TSS2_RC_SUCCESS) rc = la_tpm_copy_padded(&point.y, y);
    return rc;
}

TSS2_RC la_tpm_load_key(la_tpm *tpm, la_tpm_context *primary_ctx, const uint8_t *blob, size_t blob_size,
                        const uint8_t *auth, size_t auth_size, int keep_primary, ESYS_TR *primary, ESYS_TR *key) {
    TPM2B_PUBLIC public = {0};
    TPM2B_PRIVATE private = {0};
    TSS2_RC rc = la_tpm_unmarshal_blob(blob, blob_size, &public, &private);
    if (rc != TSS2_RC_SUCCESS) return rc;
    rc = la_tpm_load_primary(tpm, primary_ctx, primary);
    if (rc != TSS2_RC_SUCCESS) return rc;
    rc = Esys_Load(tpm->esys, *primary, ESYS_TR_PASSWORD, ESYS_TR_NONE, ESYS_TR_NONE, &private, &public, key);
    if (rc == TSS2_RC_SUCCESS) {
        rc = la_tpm_set_auth(tpm, *key, auth, auth_size);
        if (rc != TSS2_RC_SUCCESS) Esys_FlushContext(tpm->esys, *key);
    }
    if (rc != TSS2_RC_SUCCESS || !keep_primary) {
        Esys_FlushContext(tpm->esys, *primary);
        *primary = ESYS_TR_NONE;
    }
    return rc;
}

TSS2_RC la_tpm_one_command(la_tpm *tpm, ESYS_TR session, TPMA_SESSION attributes) {
    return Esys_TRSess_SetAttributes(tpm->esys, session, attributes,
                                     TPMA_SESSION_CONTINUESESSION | TPMA_SESSION_ENCRYPT | TPMA_SESSION_DECRYPT);
}

void la_tpm_session_ended(la_tpm *tpm, TSS2_RC rc, ESYS_TR *session) {
    if (rc == TSS2_RC_SUCCESS) {
        Esys_TR_Close(tpm->esys, session);
    } else {
        Esys_FlushContext(tpm->esys, *session);
    }
}

uint32_t la_tpm_key_sign(la_tpm *tpm, la_tpm_context *primary_ctx, const uint8_t *blob, size_t blob_size,
                         const uint8_t *auth, size_t auth_size, const uint8_t digest[32], uint8_t r[32],
                         uint8_t s[32]) {
    ESYS_TR primary = ESYS_TR_NONE, key = ESYS_TR_NONE, session = ESYS_TR_NONE;
    TSS2_RC rc = la_tpm_load_key(tpm, primary_ctx, blob, blob_size, auth, auth_size, 0, &primary, &key);
    if (rc != TSS2_RC_SUCCESS) return rc;
    rc = la_tpm_start_hmac_session(tpm, &session);
    if (rc == TSS2_RC_SUCCESS) {
        rc = la_tpm_one_command(tpm, session, 0);
        if (rc != TSS2_RC_SUCCESS) Esys_FlushContext(tpm->esys, session);
    }
    TPMT_SIGNATURE *signature = NULL;
    if (rc == TSS2_RC_SUCCESS) {
        TPM2B_DIGEST hashed = {.size = 32};
        memcpy(hashed.buffer, digest, 32);
        TPMT_SIG_SCHEME scheme = {.scheme = TPM2_ALG_ECDSA, .details.ecdsa.hashAlg = TPM2_ALG_SHA256};
        // An unrestricted key signs any digest: no ticket from the TPM's own hashing is needed.
        TPMT_TK_HASHCHECK validation = {.tag = TPM2_ST_HASHCHECK, .hierarchy = TPM2_RH_NULL};
        rc = Esys_Sign(tpm->esys, key, session, ESYS_TR_NONE, ESYS_TR_NONE, &hashed, &scheme, &validation,
                       &signature);
        la_tpm_session_ended(tpm, rc, &session);
    }
    Esys_FlushContext(tpm->esys, key);
    if (rc == TSS2_RC_SUCCESS && signature->sigAlg != TPM2_ALG_ECDSA) rc = TSS2_ESYS_RC_MALFORMED_RESPONSE;
    if (rc == TSS2_RC_SUCCESS) rc = la_tpm_copy_padded(&signature->signature.ecdsa.signatureR, r);
    if (rc == TSS2_RC_SUCCESS) rc = la_tpm_copy_padded(&signature->signature.ecdsa.signatureS, s);
    Esys_Free(signature);
    return rc;
}

uint32_t la_tpm_key_agree(la_tpm *tpm, la_tpm_context *primary_ctx, const uint8_t *blob, size_t blob_size,
                          const uint8_t *auth, size_t auth_size, const uint8_t peer_x[32], const uint8_t peer_y[32],
                          uint8_t shared[32]) {
    ESYS_TR primary = ESYS_TR_NONE, key = ESYS_TR_NONE, session = ESYS_TR_NONE;
    TSS2_RC rc = la_tpm_load_key(tpm, primary_ctx, blob, blob_size, auth, auth_size, 1, &primary, &key);
    if (rc != TSS2_RC_SUCCESS) return rc;
    // The shared point comes back as the response's first parameter: encrypted under a session
    // salted with the primary, so the bus never carries it in clear.
    rc = la_tpm_start_encrypting_session(tpm, primary, &session);
    Esys_FlushContext(tpm->esys, primary);
    if (rc == TSS2_RC_SUCCESS) {
        rc = la_tpm_one_command(tpm, session, TPMA_SESSION_ENCRYPT);
        if (rc != TSS2_RC_SUCCESS) Esys_FlushContext(tpm->esys, session);
    }
    TPM2B_ECC_POINT *point = NULL;
    if (rc == TSS2_RC_SUCCESS) {
        TPM2B_ECC_POINT peer = {.point = {.x = {.size = 32}, .y = {.size = 32}}};
        memcpy(peer.point.x.buffer, peer_x, 32);
        memcpy(peer.point.y.buffer, peer_y, 32);
        rc = Esys_ECDH_ZGen(tpm->esys, key, session, ESYS_TR_NONE, ESYS_TR_NONE, &peer, &point);
        la_tpm_session_ended(tpm, rc, &session);
    }
    Esys_FlushContext(tpm->esys, key);
    if (rc == TSS2_RC_SUCCESS) rc = la_tpm_copy_padded(&point->point.x, shared);
    if (point != NULL) explicit_bzero(point, sizeof *point);
    Esys_Free(point);
    return rc;
}
