/* The daemon's replies as pam_laenclave reads them: one JSON object per frame
 * ({"id": N, "reply": {"kind": "...", "value": ...}}), checked whole, with only the few fields
 * the module needs taken out. Kept apart from the module so that a fuzz driver can call it. */
#ifndef LAENCLAVE_REPLY_H
#define LAENCLAVE_REPLY_H

#include <stddef.h>
#include <stdint.h>

#define LAE_FIELD_MAX 512

struct lae_reply {
    uint64_t id;
    char kind[32];
    /* pamAuthenticated: value.outcome and value.message; failure: value.code and value.message;
     * prompt: value.instruction; handoffTicket: value (base64). */
    char outcome[32];
    char code[32];
    char message[LAE_FIELD_MAX];
    char ticket[64];
};

/* 0 when `json` (len bytes) is one well-formed reply object; -1 otherwise (nothing in `out` may
 * then be used). Nesting deeper than 32 levels, or a field longer than its buffer, is an error. */
int lae_parse_reply(const char *json, size_t len, struct lae_reply *out);

/* Decodes standard base64 `text` into `out` (at most `cap` bytes); the length, or -1. */
int lae_base64_decode(const char *text, unsigned char *out, size_t cap);

/* Appends `text` to `buf` (capacity `cap`, `*used` bytes used) as a JSON string, control
 * characters escaped; -1 when it does not fit. (Bytes that are not UTF-8 make the daemon refuse
 * the request, which the module answers as unavailable.) */
int lae_json_string(char *buf, size_t cap, size_t *used, const char *text);

#endif
