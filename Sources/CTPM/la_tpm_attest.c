#include <string.h>
#include <tss2/tss2_esys.h>
#include <tss2/tss2_mu.h>

#include "la_tpm.h"
#include "la_tpm_internal.h"

// What a server needs to believe a key lives in this TPM (issue 31, item 6): the endorsement key
// and its certificate (the TPM maker's word for this TPM), an attestation key that only this TPM
// can use (a credential encrypted to the endorsement key opens only through it), and the TPM's own
// statement about a key (TPM2_Certify, signed by the attestation key).

uint32_t la_tpm_nv_read(la_tpm *tpm, uint32_t index, uint8_t *out, size_t *out_size) {
    ESYS_TR nv = ESYS_TR_NONE;
    TSS2_RC rc = Esys_TR_FromTPMPublic(tpm->esys, index, ESYS_TR_NONE, ESYS_TR_NONE, ESYS_TR_NONE, &nv);
    if (rc != TSS2_RC_SUCCESS) return rc;
    TPM2B_NV_PUBLIC *public = NULL;
    rc = Esys_NV_ReadPublic(tpm->esys, nv, ESYS_TR_NONE, ESYS_TR_NONE, ESYS_TR_NONE, &public, NULL);
    size_t total = rc == TSS2_RC_SUCCESS ? public->nvPublic.dataSize : 0;
    Esys_Free(public);
    if (rc == TSS2_RC_SUCCESS && total > *out_size) rc = TSS2_ESYS_RC_INSUFFICIENT_BUFFER;
    size_t done = 0;
    // In pieces no TPM refuses (TPM_PT_NV_BUFFER_MAX is at least 512 on every TPM we know).
    while (rc == TSS2_RC_SUCCESS && done < total) {
        UINT16 piece = (UINT16)(total - done > 512 ? 512 : total - done);
        TPM2B_MAX_NV_BUFFER *data = NULL;
        rc = Esys_NV_Read(tpm->esys, nv, nv, ESYS_TR_PASSWORD, ESYS_TR_NONE, ESYS_TR_NONE, piece, (UINT16)done,
                          &data);
        if (rc == TSS2_RC_SUCCESS) {
            if (data->size != piece) {
                rc = TSS2_ESYS_RC_MALFORMED_RESPONSE;
            } else {
                memcpy(out + done, data->buffer, piece);
                done += piece;
            }
        }
        Esys_Free(data);
    }
    Esys_TR_Close(tpm->esys, &nv);
    *out_size = rc == TSS2_RC_SUCCESS ? done : 0;
    return rc;
}

// The TCG EK Credential Profile's templates: L-2 (ECC NIST P-256; its policy is
// PolicySecret(TPM_RH_ENDORSEMENT), no userWithAuth) and H-3 (ECC NIST P-384; userWithAuth with an
// empty auth value, the high range's). A TPM derives the same key from the same template each
// time, the one its maker certified.
static void ek_template(int p384, TPM2B_PUBLIC *template) {
    static const uint8_t policy_l2[32] = {0x83, 0x71, 0x97, 0x67, 0x44, 0x84, 0xb3, 0xf8, 0x1a, 0x90, 0xcc,
                                          0x8d, 0x46, 0xa5, 0xd7, 0x24, 0xfd, 0x52, 0xd7, 0x6e, 0x06, 0x52,
                                          0x0b, 0x64, 0xf2, 0xa1, 0xda, 0x1b, 0x33, 0x14, 0x69, 0xaa};
    static const uint8_t policy_h3[48] = {0xb2, 0x6e, 0x7d, 0x28, 0xd1, 0x1a, 0x50, 0xbc, 0x53, 0xd8, 0x82, 0xbc,
                                          0xf5, 0xfd, 0x3a, 0x1a, 0x07, 0x41, 0x48, 0xbb, 0x35, 0xd3, 0xb4, 0xe4,
                                          0xcb, 0x1c, 0x0a, 0xd9, 0xbd, 0xe4, 0x19, 0xca, 0xcb, 0x47, 0xba, 0x09,
                                          0x69, 0x96, 0x46, 0x15, 0x0f, 0x9f, 0xc0, 0x00, 0xf3, 0xf8, 0x0e, 0x12};
    memset(template, 0, sizeof *template);
    TPMT_PUBLIC *area = &template->publicArea;
    area->type = TPM2_ALG_ECC;
    area->objectAttributes = TPMA_OBJECT_FIXEDTPM | TPMA_OBJECT_FIXEDPARENT | TPMA_OBJECT_SENSITIVEDATAORIGIN |
                             TPMA_OBJECT_ADMINWITHPOLICY | TPMA_OBJECT_RESTRICTED | TPMA_OBJECT_DECRYPT;
    area->parameters.eccDetail.symmetric.algorithm = TPM2_ALG_AES;
    area->parameters.eccDetail.symmetric.mode.aes = TPM2_ALG_CFB;
    area->parameters.eccDetail.scheme.scheme = TPM2_ALG_NULL;
    area->parameters.eccDetail.kdf.scheme = TPM2_ALG_NULL;
    if (p384) {
        area->nameAlg = TPM2_ALG_SHA384;
        area->objectAttributes |= TPMA_OBJECT_USERWITHAUTH;
        area->authPolicy.size = sizeof policy_h3;
        memcpy(area->authPolicy.buffer, policy_h3, sizeof policy_h3);
        area->parameters.eccDetail.symmetric.keyBits.aes = 256;
        area->parameters.eccDetail.curveID = TPM2_ECC_NIST_P384;
    } else {
        area->nameAlg = TPM2_ALG_SHA256;
        area->authPolicy.size = sizeof policy_l2;
        memcpy(area->authPolicy.buffer, policy_l2, sizeof policy_l2);
        area->parameters.eccDetail.symmetric.keyBits.aes = 128;
        area->parameters.eccDetail.curveID = TPM2_ECC_NIST_P256;
        area->unique.ecc.x.size = 32;
        area->unique.ecc.y.size = 32;
    }
}

static TSS2_RC create_ek(la_tpm *tpm, int p384, ESYS_TR *ek, TPM2B_PUBLIC **public) {
    TPM2B_PUBLIC template;
    ek_template(p384, &template);
    TPM2B_SENSITIVE_CREATE sensitive = {0};
    TPM2B_DATA outside = {0};
    TPML_PCR_SELECTION pcrs = {0};
    return Esys_CreatePrimary(tpm->esys, ESYS_TR_RH_ENDORSEMENT, ESYS_TR_PASSWORD, ESYS_TR_NONE, ESYS_TR_NONE,
                              &sensitive, &template, &outside, &pcrs, ek, public, NULL, NULL, NULL);
}

uint32_t la_tpm_ek_public(la_tpm *tpm, int p384, uint8_t *public, size_t *public_size) {
    ESYS_TR ek = ESYS_TR_NONE;
    TPM2B_PUBLIC *made = NULL;
    TSS2_RC rc = create_ek(tpm, p384, &ek, &made);
    if (rc != TSS2_RC_SUCCESS) return rc;
    Esys_FlushContext(tpm->esys, ek);
    size_t offset = 0;
    rc = Tss2_MU_TPMT_PUBLIC_Marshal(&made->publicArea, public, *public_size, &offset);
    *public_size = rc == TSS2_RC_SUCCESS ? offset : 0;
    Esys_Free(made);
    return rc;
}

uint32_t la_tpm_ak_create(la_tpm *tpm, la_tpm_context *primary_ctx, const uint8_t *auth, size_t auth_size,
                          uint8_t *blob, size_t *blob_size) {
    // Restricted: it signs only what the TPM itself states (TPMS_ATTEST), never a digest it is handed
    // that could pass for one.
    TPMT_ECC_SCHEME ecdsa = {.scheme = TPM2_ALG_ECDSA, .details.ecdsa.hashAlg = TPM2_ALG_SHA256};
    return la_tpm_create_p256(tpm, primary_ctx, TPMA_OBJECT_RESTRICTED | TPMA_OBJECT_SIGN_ENCRYPT, ecdsa, auth,
                              auth_size, blob, blob_size, NULL);
}

// The endorsement key's authorization for ActivateCredential: L-2's policy (PolicySecret with the
// endorsement hierarchy's empty auth), H-3's empty auth value.
static TSS2_RC ek_session(la_tpm *tpm, int p384, ESYS_TR *session) {
    if (p384) {
        *session = ESYS_TR_PASSWORD;
        return TSS2_RC_SUCCESS;
    }
    TPMT_SYM_DEF symmetric = {.algorithm = TPM2_ALG_AES, .keyBits.aes = 128, .mode.aes = TPM2_ALG_CFB};
    TSS2_RC rc = Esys_StartAuthSession(tpm->esys, ESYS_TR_NONE, ESYS_TR_NONE, ESYS_TR_NONE, ESYS_TR_NONE,
                                       ESYS_TR_NONE, NULL, TPM2_SE_POLICY, &symmetric, TPM2_ALG_SHA256, session);
    if (rc != TSS2_RC_SUCCESS) return rc;
    rc = Esys_PolicySecret(tpm->esys, ESYS_TR_RH_ENDORSEMENT, *session, ESYS_TR_PASSWORD, ESYS_TR_NONE,
                           ESYS_TR_NONE, NULL, NULL, NULL, 0, NULL, NULL);
    if (rc != TSS2_RC_SUCCESS) {
        Esys_FlushContext(tpm->esys, *session);
        *session = ESYS_TR_NONE;
    }
    return rc;
}

uint32_t la_tpm_activate_credential(la_tpm *tpm, la_tpm_context *primary_ctx, int ek_p384, const uint8_t *ak_blob,
                                    size_t ak_blob_size, const uint8_t *ak_auth, size_t ak_auth_size,
                                    const uint8_t *credential_blob, size_t credential_blob_size,
                                    const uint8_t *secret, size_t secret_size, uint8_t *out, size_t *out_size) {
    TPM2B_ID_OBJECT id_object = {0};
    TPM2B_ENCRYPTED_SECRET encrypted = {0};
    size_t offset = 0;
    TSS2_RC rc = Tss2_MU_TPM2B_ID_OBJECT_Unmarshal(credential_blob, credential_blob_size, &offset, &id_object);
    if (rc == TSS2_RC_SUCCESS && offset != credential_blob_size) rc = TSS2_ESYS_RC_BAD_VALUE;
    offset = 0;
    if (rc == TSS2_RC_SUCCESS) rc = Tss2_MU_TPM2B_ENCRYPTED_SECRET_Unmarshal(secret, secret_size, &offset, &encrypted);
    if (rc == TSS2_RC_SUCCESS && offset != secret_size) rc = TSS2_ESYS_RC_BAD_VALUE;
    if (rc != TSS2_RC_SUCCESS) return rc;
    ESYS_TR primary = ESYS_TR_NONE, ak = ESYS_TR_NONE, ek = ESYS_TR_NONE;
    ESYS_TR ak_session = ESYS_TR_NONE, endorsement = ESYS_TR_NONE;
    rc = la_tpm_load_key(tpm, primary_ctx, ak_blob, ak_blob_size, ak_auth, ak_auth_size, 1, &primary, &ak);
    if (rc != TSS2_RC_SUCCESS) return rc;
    // The credential comes back as the response's first parameter: encrypted under a session salted
    // with the primary, so the bus never carries it in clear.
    rc = la_tpm_start_encrypting_session(tpm, primary, &ak_session);
    Esys_FlushContext(tpm->esys, primary);
    if (rc != TSS2_RC_SUCCESS) ak_session = ESYS_TR_NONE;
    if (rc == TSS2_RC_SUCCESS) rc = la_tpm_one_command(tpm, ak_session, TPMA_SESSION_ENCRYPT);
    if (rc == TSS2_RC_SUCCESS) rc = create_ek(tpm, ek_p384, &ek, NULL);
    if (rc == TSS2_RC_SUCCESS) rc = ek_session(tpm, ek_p384, &endorsement);
    if (rc == TSS2_RC_SUCCESS && endorsement != ESYS_TR_PASSWORD) rc = la_tpm_one_command(tpm, endorsement, 0);
    TPM2B_DIGEST *credential = NULL;
    TSS2_RC activated = TSS2_ESYS_RC_BAD_SEQUENCE;
    if (rc == TSS2_RC_SUCCESS) {
        rc = activated = Esys_ActivateCredential(tpm->esys, ak, ek, ak_session, endorsement, ESYS_TR_NONE,
                                                 &id_object, &encrypted, &credential);
    }
    if (ak_session != ESYS_TR_NONE) la_tpm_session_ended(tpm, activated, &ak_session);
    if (endorsement != ESYS_TR_NONE && endorsement != ESYS_TR_PASSWORD)
        la_tpm_session_ended(tpm, activated, &endorsement);
    if (ek != ESYS_TR_NONE) Esys_FlushContext(tpm->esys, ek);
    Esys_FlushContext(tpm->esys, ak);
    if (rc == TSS2_RC_SUCCESS) {
        if (credential->size > *out_size) {
            rc = TSS2_ESYS_RC_INSUFFICIENT_BUFFER;
        } else {
            memcpy(out, credential->buffer, credential->size);
            *out_size = credential->size;
        }
        explicit_bzero(credential, sizeof *credential);
    }
    Esys_Free(credential);
    return rc;
}

uint32_t la_tpm_certify(la_tpm *tpm, la_tpm_context *primary_ctx, const uint8_t *key_blob, size_t key_blob_size,
                        const uint8_t *key_auth, size_t key_auth_size, const uint8_t *ak_blob, size_t ak_blob_size,
                        const uint8_t *ak_auth, size_t ak_auth_size, const uint8_t *qualifying,
                        size_t qualifying_size, uint8_t *attest, size_t *attest_size, uint8_t r[32], uint8_t s[32]) {
    if (qualifying_size > sizeof(((TPM2B_DATA *)0)->buffer)) return TSS2_ESYS_RC_BAD_VALUE;
    ESYS_TR primary = ESYS_TR_NONE, key = ESYS_TR_NONE, ak = ESYS_TR_NONE;
    ESYS_TR key_session = ESYS_TR_NONE, ak_session = ESYS_TR_NONE;
    TSS2_RC rc = la_tpm_load_key(tpm, primary_ctx, key_blob, key_blob_size, key_auth, key_auth_size, 0, &primary,
                                 &key);
    if (rc != TSS2_RC_SUCCESS) return rc;
    rc = la_tpm_load_key(tpm, primary_ctx, ak_blob, ak_blob_size, ak_auth, ak_auth_size, 0, &primary, &ak);
    if (rc != TSS2_RC_SUCCESS) {
        Esys_FlushContext(tpm->esys, key);
        return rc;
    }
    rc = la_tpm_start_hmac_session(tpm, &key_session);
    if (rc == TSS2_RC_SUCCESS) rc = la_tpm_one_command(tpm, key_session, 0);
    if (rc == TSS2_RC_SUCCESS) rc = la_tpm_start_hmac_session(tpm, &ak_session);
    if (rc == TSS2_RC_SUCCESS) rc = la_tpm_one_command(tpm, ak_session, 0);
    TPM2B_ATTEST *info = NULL;
    TPMT_SIGNATURE *signature = NULL;
    TSS2_RC certified = TSS2_ESYS_RC_BAD_SEQUENCE;
    if (rc == TSS2_RC_SUCCESS) {
        TPM2B_DATA extra = {.size = (UINT16)qualifying_size};
        memcpy(extra.buffer, qualifying, qualifying_size);
        TPMT_SIG_SCHEME scheme = {.scheme = TPM2_ALG_NULL};  // the attestation key's own: ECDSA, SHA-256
        rc = certified = Esys_Certify(tpm->esys, key, ak, key_session, ak_session, ESYS_TR_NONE, &extra, &scheme,
                                      &info, &signature);
    }
    if (key_session != ESYS_TR_NONE) la_tpm_session_ended(tpm, certified, &key_session);
    if (ak_session != ESYS_TR_NONE) la_tpm_session_ended(tpm, certified, &ak_session);
    Esys_FlushContext(tpm->esys, key);
    Esys_FlushContext(tpm->esys, ak);
    if (rc == TSS2_RC_SUCCESS && (signature->sigAlg != TPM2_ALG_ECDSA || info->size > *attest_size))
        rc = TSS2_ESYS_RC_MALFORMED_RESPONSE;
    if (rc == TSS2_RC_SUCCESS) {
        memcpy(attest, info->attestationData, info->size);
        *attest_size = info->size;
        rc = la_tpm_copy_padded(&signature->signature.ecdsa.signatureR, r);
    }
    if (rc == TSS2_RC_SUCCESS) rc = la_tpm_copy_padded(&signature->signature.ecdsa.signatureS, s);
    Esys_Free(info);
    Esys_Free(signature);
    return rc;
}
