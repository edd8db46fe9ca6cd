#include "la_tpm.h"

#include "la_tpm_internal.h"

#include <stdlib.h>
#include <string.h>
#include <tss2/tss2_esys.h>
#include <tss2/tss2_mu.h>
#include <tss2/tss2_rc.h>
#include <tss2/tss2_sys.h>
#include <tss2/tss2_tctildr.h>

// Without a resource manager (a simulator over TCP, /dev/tpm0) a client killed in the middle of
// its commands leaves its sessions and objects loaded, and the TPM's few slots fill until every
// session start fails (TPM_RC_SESSION_MEMORY): the caller asks for them to be flushed at open.
// Never through a resource manager (/dev/tpmrm0): it flushes a closed connection's own, and it
// lists and lets flush the sessions of every other client too.
static void flush_stale(la_tpm *tpm) {
    TSS2_SYS_CONTEXT *sys = NULL;
    if (Esys_GetSysContext(tpm->esys, &sys) != TSS2_RC_SUCCESS || sys == NULL) return;
    const TPM2_HC firsts[] = {TPM2_LOADED_SESSION_FIRST, TPM2_ACTIVE_SESSION_FIRST, TPM2_TRANSIENT_FIRST};
    for (size_t f = 0; f < sizeof firsts / sizeof firsts[0]; f++) {
        TPMI_YES_NO more = 0;
        TPMS_CAPABILITY_DATA data = {0};
        if (Tss2_Sys_GetCapability(sys, NULL, TPM2_CAP_HANDLES, firsts[f], TPM2_MAX_CAP_HANDLES, &more, &data,
                                   NULL) != TSS2_RC_SUCCESS)
            continue;
        for (UINT32 i = 0; i < data.data.handles.count && i < TPM2_MAX_CAP_HANDLES; i++) {
            (void)Tss2_Sys_FlushContext(sys, data.data.handles.handle[i]);
        }
    }
}

uint32_t la_tpm_open(const char *tcti, int flush, la_tpm **out) {
    *out = NULL;
    if (tcti == NULL) return TSS2_ESYS_RC_BAD_REFERENCE;
    la_tpm *tpm = calloc(1, sizeof *tpm);
    if (tpm == NULL) return TSS2_ESYS_RC_MEMORY;
    TSS2_RC rc = Tss2_TctiLdr_Initialize(tcti, &tpm->tcti);
    if (rc != TSS2_RC_SUCCESS) {
        free(tpm);
        return rc;
    }
    rc = Esys_Initialize(&tpm->esys, tpm->tcti, NULL);
    if (rc != TSS2_RC_SUCCESS) {
        Tss2_TctiLdr_Finalize(&tpm->tcti);
        free(tpm);
        return rc;
    }
    // A simulator may need its start-up; a started TPM answers TPM2_RC_INITIALIZE, and the kernel's
    // resource manager may refuse the command: the next command says whether the TPM serves.
    (void)Esys_Startup(tpm->esys, TPM2_SU_CLEAR);
    // A TPM that takes the connection and never answers (a wedged firmware TPM, a stopped
    // simulator) must not hold the daemon's one TPM thread for ever: every command has a minute
    // (an ECC key generation takes seconds at most on the slowest TPMs).
    (void)Esys_SetTimeout(tpm->esys, LA_TPM_TIMEOUT_MS);
    if (flush) flush_stale(tpm);
    *out = tpm;
    return TSS2_RC_SUCCESS;
}

void la_tpm_close(la_tpm *tpm) {
    if (tpm == NULL) return;
    Esys_Finalize(&tpm->esys);
    Tss2_TctiLdr_Finalize(&tpm->tcti);
    free(tpm);
}

// The TCG's storage root key template (ECC P-256, AES-128-CFB), with noDA: derived from the owner
// seed, the same key every time on one TPM, a different one on any other.
TSS2_RC la_tpm_create_primary(la_tpm *tpm, ESYS_TR *primary) {
    TPM2B_SENSITIVE_CREATE sensitive = {0};
    TPM2B_PUBLIC template = {
        .publicArea = {
            .type = TPM2_ALG_ECC,
            .nameAlg = TPM2_ALG_SHA256,
            .objectAttributes = TPMA_OBJECT_USERWITHAUTH | TPMA_OBJECT_RESTRICTED | TPMA_OBJECT_DECRYPT |
                                TPMA_OBJECT_FIXEDTPM | TPMA_OBJECT_FIXEDPARENT | TPMA_OBJECT_SENSITIVEDATAORIGIN |
                                TPMA_OBJECT_NODA,
            .parameters.eccDetail = {
                .symmetric = {.algorithm = TPM2_ALG_AES, .keyBits.aes = 128, .mode.aes = TPM2_ALG_CFB},
                .scheme = {.scheme = TPM2_ALG_NULL},
                .curveID = TPM2_ECC_NIST_P256,
                .kdf = {.scheme = TPM2_ALG_NULL},
            },
        },
    };
    TPM2B_DATA outside = {0};
    TPML_PCR_SELECTION pcrs = {0};
    TPM2B_PUBLIC *public = NULL;
    TPM2B_CREATION_DATA *creation = NULL;
    TPM2B_DIGEST *hash = NULL;
    TPMT_TK_CREATION *ticket = NULL;
    TSS2_RC rc = Esys_CreatePrimary(tpm->esys, ESYS_TR_RH_OWNER, ESYS_TR_PASSWORD, ESYS_TR_NONE, ESYS_TR_NONE,
                                    &sensitive, &template, &outside, &pcrs, primary, &public, &creation, &hash,
                                    &ticket);
    Esys_Free(public);
    Esys_Free(creation);
    Esys_Free(hash);
    Esys_Free(ticket);
    return rc;
}

// A session salted with the primary (ECDH to its key): with it a command's first parameter
// (decrypt) and a response's first parameter (encrypt) cross the bus under AES-128-CFB, so someone
// listening on the bus between the CPU and the TPM reads no secret.
TSS2_RC la_tpm_start_encrypting_session(la_tpm *tpm, ESYS_TR primary, ESYS_TR *session) {
    TPMT_SYM_DEF symmetric = {.algorithm = TPM2_ALG_AES, .keyBits.aes = 128, .mode.aes = TPM2_ALG_CFB};
    TSS2_RC rc = Esys_StartAuthSession(tpm->esys, primary, ESYS_TR_NONE, ESYS_TR_NONE, ESYS_TR_NONE, ESYS_TR_NONE,
                                       NULL, TPM2_SE_HMAC, &symmetric, TPM2_ALG_SHA256, session);
    if (rc != TSS2_RC_SUCCESS) return rc;
    rc = Esys_TRSess_SetAttributes(tpm->esys, *session,
                                   TPMA_SESSION_DECRYPT | TPMA_SESSION_ENCRYPT | TPMA_SESSION_CONTINUESESSION, 0xff);
    if (rc != TSS2_RC_SUCCESS) {
        Esys_FlushContext(tpm->esys, *session);
        *session = ESYS_TR_NONE;
    }
    return rc;
}

TSS2_RC la_tpm_create_object(la_tpm *tpm, ESYS_TR primary, TPM2B_SENSITIVE_CREATE *sensitive,
                             const TPM2B_PUBLIC *template, uint8_t *blob, size_t *blob_size, TPMS_ECC_POINT *point) {
    ESYS_TR session = ESYS_TR_NONE;
    TSS2_RC rc = la_tpm_start_encrypting_session(tpm, primary, &session);
    if (rc != TSS2_RC_SUCCESS) {
        explicit_bzero(sensitive, sizeof *sensitive);
        Esys_FlushContext(tpm->esys, primary);
        return rc;
    }
    TPM2B_DATA outside = {0};
    TPML_PCR_SELECTION pcrs = {0};
    TPM2B_PRIVATE *private = NULL;
    TPM2B_PUBLIC *public = NULL;
    TPM2B_CREATION_DATA *creation = NULL;
    TPM2B_DIGEST *hash = NULL;
    TPMT_TK_CREATION *ticket = NULL;
    // The sensitive part travels as the command's first parameter, under the session's encryption.
    rc = Esys_Create(tpm->esys, primary, ESYS_TR_PASSWORD, session, ESYS_TR_NONE, sensitive, template, &outside,
                     &pcrs, &private, &public, &creation, &hash, &ticket);
    explicit_bzero(sensitive, sizeof *sensitive);
    Esys_FlushContext(tpm->esys, session);
    Esys_FlushContext(tpm->esys, primary);
    if (rc == TSS2_RC_SUCCESS) {
        size_t offset = 0;
        rc = Tss2_MU_TPM2B_PUBLIC_Marshal(public, blob, *blob_size, &offset);
        if (rc == TSS2_RC_SUCCESS) rc = Tss2_MU_TPM2B_PRIVATE_Marshal(private, blob, *blob_size, &offset);
        *blob_size = rc == TSS2_RC_SUCCESS ? offset : 0;
        if (point != NULL) *point = public->publicArea.unique.ecc;
    }
    Esys_Free(private);
    Esys_Free(public);
    Esys_Free(creation);
    Esys_Free(hash);
    Esys_Free(ticket);
    return rc;
}

TSS2_RC la_tpm_unmarshal_blob(const uint8_t *blob, size_t blob_size, TPM2B_PUBLIC *public, TPM2B_PRIVATE *private) {
    size_t offset = 0;
    TSS2_RC rc = Tss2_MU_TPM2B_PUBLIC_Unmarshal(blob, blob_size, &offset, public);
    if (rc == TSS2_RC_SUCCESS) rc = Tss2_MU_TPM2B_PRIVATE_Unmarshal(blob, blob_size, &offset, private);
    if (rc == TSS2_RC_SUCCESS && offset != blob_size) rc = TSS2_MU_RC_BAD_SIZE;
    return rc;
}

uint32_t la_tpm_seal(la_tpm *tpm, const uint8_t *secret, size_t secret_size, uint8_t *blob, size_t *blob_size) {
    if (secret_size == 0 || secret_size > 128) return TSS2_ESYS_RC_BAD_VALUE;
    ESYS_TR primary = ESYS_TR_NONE;
    TSS2_RC rc = la_tpm_create_primary(tpm, &primary);
    if (rc != TSS2_RC_SUCCESS) return rc;
    TPM2B_SENSITIVE_CREATE sensitive = {0};
    sensitive.sensitive.data.size = (UINT16)secret_size;
    memcpy(sensitive.sensitive.data.buffer, secret, secret_size);
    TPM2B_PUBLIC template = {
        .publicArea = {
            .type = TPM2_ALG_KEYEDHASH,
            .nameAlg = TPM2_ALG_SHA256,
            .objectAttributes = TPMA_OBJECT_USERWITHAUTH | TPMA_OBJECT_FIXEDTPM | TPMA_OBJECT_FIXEDPARENT |
                                TPMA_OBJECT_NODA,
            .parameters.keyedHashDetail.scheme.scheme = TPM2_ALG_NULL,
        },
    };
    return la_tpm_create_object(tpm, primary, &sensitive, &template, blob, blob_size, NULL);
}

uint32_t la_tpm_unseal(la_tpm *tpm, const uint8_t *blob, size_t blob_size, uint8_t *secret, size_t *secret_size) {
    TPM2B_PUBLIC public = {0};
    TPM2B_PRIVATE private = {0};
    TSS2_RC rc = la_tpm_unmarshal_blob(blob, blob_size, &public, &private);
    if (rc != TSS2_RC_SUCCESS) return rc;
    ESYS_TR primary = ESYS_TR_NONE, sealed = ESYS_TR_NONE, session = ESYS_TR_NONE;
    rc = la_tpm_create_primary(tpm, &primary);
    if (rc != TSS2_RC_SUCCESS) return rc;
    rc = la_tpm_start_encrypting_session(tpm, primary, &session);
    if (rc == TSS2_RC_SUCCESS) {
        rc = Esys_Load(tpm->esys, primary, ESYS_TR_PASSWORD, ESYS_TR_NONE, ESYS_TR_NONE, &private, &public, &sealed);
    }
    Esys_FlushContext(tpm->esys, primary);
    if (rc != TSS2_RC_SUCCESS) {
        if (session != ESYS_TR_NONE) Esys_FlushContext(tpm->esys, session);
        return rc;
    }
    // The secret comes back as the response's first parameter, under the session's encryption.
    TPM2B_SENSITIVE_DATA *data = NULL;
    rc = Esys_Unseal(tpm->esys, sealed, ESYS_TR_PASSWORD, session, ESYS_TR_NONE, &data);
    Esys_FlushContext(tpm->esys, session);
    Esys_FlushContext(tpm->esys, sealed);
    if (rc == TSS2_RC_SUCCESS) {
        if (data->size > *secret_size) {
            rc = TSS2_ESYS_RC_INSUFFICIENT_BUFFER;
        } else {
            memcpy(secret, data->buffer, data->size);
            *secret_size = data->size;
        }
        explicit_bzero(data, sizeof *data);
    }
    Esys_Free(data);
    return rc;
}

uint32_t la_tpm_random(la_tpm *tpm, uint8_t *out, size_t size) {
    if (size > 32) return TSS2_ESYS_RC_BAD_VALUE;
    TPM2B_DIGEST *bytes = NULL;
    TSS2_RC rc = Esys_GetRandom(tpm->esys, ESYS_TR_NONE, ESYS_TR_NONE, ESYS_TR_NONE, (UINT16)size, &bytes);
    if (rc == TSS2_RC_SUCCESS) {
        if (bytes->size != size) {
            rc = TSS2_ESYS_RC_MALFORMED_RESPONSE;
        } else {
            memcpy(out, bytes->buffer, size);
        }
    }
    Esys_Free(bytes);
    return rc;
}

// The rollback counter: an ordinary counter (not orderly: each increment is durable), read and moved
// with its auth value only, read by the owner too (tpm2_nvread, to look from outside), noDA (the
// value is random: nothing to guess).
#define COUNTER_ATTRIBUTES                                                                                        \
    ((TPM2_NT_COUNTER << TPMA_NV_TPM2_NT_SHIFT) | TPMA_NV_AUTHWRITE | TPMA_NV_AUTHREAD | TPMA_NV_OWNERREAD |      \
     TPMA_NV_NO_DA)

// An HMAC session, neither bound nor salted: the authorization crosses the bus as an HMAC keyed
// with the auth value, never as the value itself.
TSS2_RC la_tpm_start_hmac_session(la_tpm *tpm, ESYS_TR *session) {
    TPMT_SYM_DEF symmetric = {.algorithm = TPM2_ALG_NULL};
    return Esys_StartAuthSession(tpm->esys, ESYS_TR_NONE, ESYS_TR_NONE, ESYS_TR_NONE, ESYS_TR_NONE, ESYS_TR_NONE, NULL,
                                 TPM2_SE_HMAC, &symmetric, TPM2_ALG_SHA256, session);
}

TSS2_RC la_tpm_set_auth(la_tpm *tpm, ESYS_TR object, const uint8_t *auth, size_t auth_size) {
    if (auth_size > 32) return TSS2_ESYS_RC_BAD_VALUE;
    TPM2B_AUTH value = {.size = (UINT16)auth_size};
    memcpy(value.buffer, auth, auth_size);
    TSS2_RC rc = Esys_TR_SetAuth(tpm->esys, object, &value);
    explicit_bzero(&value, sizeof value);
    return rc;
}

static uint64_t big_endian_64(const uint8_t *bytes) {
    uint64_t value = 0;
    for (int i = 0; i < 8; i++) value = (value << 8) | bytes[i];
    return value;
}

// Runs NV_Increment (when `increment`) and NV_Read on `nv`, authorized with its auth value through
// one HMAC session.
static TSS2_RC counter_step(la_tpm *tpm, ESYS_TR nv, int increment, uint64_t *value) {
    ESYS_TR session = ESYS_TR_NONE;
    TSS2_RC rc = la_tpm_start_hmac_session(tpm, &session);
    if (rc != TSS2_RC_SUCCESS) return rc;
    if (increment) rc = Esys_NV_Increment(tpm->esys, nv, nv, session, ESYS_TR_NONE, ESYS_TR_NONE);
    if (rc == TSS2_RC_SUCCESS) {
        TPM2B_MAX_NV_BUFFER *data = NULL;
        rc = Esys_NV_Read(tpm->esys, nv, nv, session, ESYS_TR_NONE, ESYS_TR_NONE, 8, 0, &data);
        if (rc == TSS2_RC_SUCCESS) {
            if (data->size == 8) {
                *value = big_endian_64(data->buffer);
            } else {
                rc = TSS2_ESYS_RC_MALFORMED_RESPONSE;
            }
        }
        Esys_Free(data);
    }
    Esys_FlushContext(tpm->esys, session);
    return rc;
}

uint32_t la_tpm_counter_define(la_tpm *tpm, uint32_t index, const uint8_t *auth, size_t auth_size, uint64_t *value) {
    if (auth_size == 0 || auth_size > 32) return TSS2_ESYS_RC_BAD_VALUE;
    TPM2B_AUTH value_auth = {.size = (UINT16)auth_size};
    memcpy(value_auth.buffer, auth, auth_size);
    TPM2B_NV_PUBLIC public = {
        .nvPublic = {
            .nvIndex = index,
            .nameAlg = TPM2_ALG_SHA256,
            .attributes = COUNTER_ATTRIBUTES,
            .dataSize = 8,
        },
    };
    // The auth value is the command's first parameter: it crosses the bus under a session salted
    // with the storage primary.
    ESYS_TR primary = ESYS_TR_NONE, session = ESYS_TR_NONE, nv = ESYS_TR_NONE;
    TSS2_RC rc = la_tpm_create_primary(tpm, &primary);
    if (rc == TSS2_RC_SUCCESS) rc = la_tpm_start_encrypting_session(tpm, primary, &session);
    if (rc == TSS2_RC_SUCCESS) {
        rc = Esys_NV_DefineSpace(tpm->esys, ESYS_TR_RH_OWNER, ESYS_TR_PASSWORD, session, ESYS_TR_NONE, &value_auth,
                                 &public, &nv);
    }
    explicit_bzero(&value_auth, sizeof value_auth);
    if (session != ESYS_TR_NONE) Esys_FlushContext(tpm->esys, session);
    if (primary != ESYS_TR_NONE) Esys_FlushContext(tpm->esys, primary);
    if (rc != TSS2_RC_SUCCESS) return rc;
    rc = la_tpm_set_auth(tpm, nv, auth, auth_size);
    if (rc == TSS2_RC_SUCCESS) rc = counter_step(tpm, nv, 1, value);
    if (rc != TSS2_RC_SUCCESS) {
        // A counter never moved is of no use: it goes rather than hold an NV index.
        if (Esys_NV_UndefineSpace(tpm->esys, ESYS_TR_RH_OWNER, nv, ESYS_TR_PASSWORD, ESYS_TR_NONE, ESYS_TR_NONE) ==
            TSS2_RC_SUCCESS)
            return rc;
    }
    Esys_TR_Close(tpm->esys, &nv);
    return rc;
}

// The counter at `index`, its auth value set; TPM2_RC_HANDLE when there is none. An index of
// another kind or other attributes (an ordinary index put in its place, writable at will) is not
// taken for it.
static TSS2_RC open_counter(la_tpm *tpm, uint32_t index, const uint8_t *auth, size_t auth_size, ESYS_TR *nv) {
    TSS2_RC rc = Esys_TR_FromTPMPublic(tpm->esys, index, ESYS_TR_NONE, ESYS_TR_NONE, ESYS_TR_NONE, nv);
    if (rc != TSS2_RC_SUCCESS) return rc;
    TPM2B_NV_PUBLIC *public = NULL;
    TPM2B_NAME *name = NULL;
    rc = Esys_NV_ReadPublic(tpm->esys, *nv, ESYS_TR_NONE, ESYS_TR_NONE, ESYS_TR_NONE, &public, &name);
    if (rc == TSS2_RC_SUCCESS &&
        ((public->nvPublic.attributes & ~TPMA_NV_WRITTEN) != COUNTER_ATTRIBUTES || public->nvPublic.dataSize != 8 ||
         public->nvPublic.authPolicy.size != 0))
        rc = TPM2_RC_HANDLE + TPM2_RC_1;  // not our counter: ours is gone
    Esys_Free(public);
    Esys_Free(name);
    if (rc != TSS2_RC_SUCCESS) {
        Esys_TR_Close(tpm->esys, nv);
        return rc;
    }
    rc = la_tpm_set_auth(tpm, *nv, auth, auth_size);
    if (rc != TSS2_RC_SUCCESS) Esys_TR_Close(tpm->esys, nv);
    return rc;
}

uint32_t la_tpm_counter(la_tpm *tpm, uint32_t index, const uint8_t *auth, size_t auth_size, int increment,
                        uint64_t *value) {
    ESYS_TR nv = ESYS_TR_NONE;
    TSS2_RC rc = open_counter(tpm, index, auth, auth_size, &nv);
    if (rc != TSS2_RC_SUCCESS) return rc;
    rc = counter_step(tpm, nv, increment, value);
    Esys_TR_Close(tpm->esys, &nv);
    return rc;
}

uint32_t la_tpm_counter_undefine(la_tpm *tpm, uint32_t index) {
    ESYS_TR nv = ESYS_TR_NONE;
    TSS2_RC rc = Esys_TR_FromTPMPublic(tpm->esys, index, ESYS_TR_NONE, ESYS_TR_NONE, ESYS_TR_NONE, &nv);
    if (rc != TSS2_RC_SUCCESS) return rc;
    rc = Esys_NV_UndefineSpace(tpm->esys, ESYS_TR_RH_OWNER, nv, ESYS_TR_PASSWORD, ESYS_TR_NONE, ESYS_TR_NONE);
    if (rc != TSS2_RC_SUCCESS) Esys_TR_Close(tpm->esys, &nv);
    return rc;
}

// A TPM format-1 code names the handle, session or parameter it concerns in its upper bits; the
// TSS's layer is in the top byte.
static uint32_t tpm_base_code(uint32_t rc) {
    uint32_t layer = rc & TSS2_RC_LAYER_MASK;
    if (layer != TSS2_TPM_RC_LAYER && layer != TSS2_RESMGR_TPM_RC_LAYER) return rc;
    uint32_t code = rc & 0xFFFF;
    return (code & TPM2_RC_FMT1) ? (code & (TPM2_RC_FMT1 | 0x3F)) : code;
}

int la_tpm_rc_is_missing(uint32_t rc) { return tpm_base_code(rc) == TPM2_RC_HANDLE; }

int la_tpm_rc_is_defined(uint32_t rc) { return tpm_base_code(rc) == TPM2_RC_NV_DEFINED; }

int la_tpm_rc_is_auth_fail(uint32_t rc) {
    uint32_t code = tpm_base_code(rc);
    return code == TPM2_RC_AUTH_FAIL || code == TPM2_RC_BAD_AUTH;  // BAD_AUTH: an object with noDA
}

const char *la_tpm_error(uint32_t rc) { return Tss2_RC_Decode(rc); }
