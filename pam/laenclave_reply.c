/* See laenclave_reply.h. A strict JSON reader of our own: the module runs inside sudo and lock
 * screens, so it links nothing but libc and libpam. */
#include "laenclave_reply.h"

#include <string.h>

struct cursor {
    const char *p;
    const char *end;
};

static void skip_space(struct cursor *c) {
    while (c->p < c->end && (*c->p == ' ' || *c->p == '\t' || *c->p == '\n' || *c->p == '\r')) c->p++;
}

static int hex(char ch) {
    if (ch >= '0' && ch <= '9') return ch - '0';
    if (ch >= 'a' && ch <= 'f') return ch - 'a' + 10;
    if (ch >= 'A' && ch <= 'F') return ch - 'A' + 10;
    return -1;
}

/* Reads a string at the cursor into `out` (NUL-terminated, UTF-8) when `out` is given. */
static int read_string(struct cursor *c, char *out, size_t cap) {
    size_t n = 0;
    if (c->p >= c->end || *c->p != '"') return -1;
    c->p++;
    while (c->p < c->end) {
        unsigned char ch = (unsigned char)*c->p++;
        unsigned long code;
        if (ch == '"') {
            if (out) {
                if (n >= cap) return -1;
                out[n] = '\0';
            }
            return 0;
        }
        if (ch < 0x20) return -1;
        if (ch != '\\') {
            code = ch;
            if (out) {
                if (n + 1 >= cap) return -1;
                out[n++] = (char)ch;
            }
            continue;
        }
        if (c->p >= c->end) return -1;
        ch = (unsigned char)*c->p++;
        switch (ch) {
        case '"': code = '"'; break;
        case '\\': code = '\\'; break;
        case '/': code = '/'; break;
        case 'b': code = '\b'; break;
        case 'f': code = '\f'; break;
        case 'n': code = '\n'; break;
        case 'r': code = '\r'; break;
        case 't': code = '\t'; break;
        case 'u': {
            int i;
            code = 0;
            if (c->end - c->p < 4) return -1;
            for (i = 0; i < 4; i++) {
                int h = hex(c->p[i]);
                if (h < 0) return -1;
                code = code << 4 | (unsigned long)h;
            }
            c->p += 4;
            /* A surrogate pair's halves, or a NUL, are shown as '?': the module only shows text. */
            if (code == 0 || (code >= 0xD800 && code <= 0xDFFF)) code = '?';
            break;
        }
        default: return -1;
        }
        if (out) {
            char utf8[4];
            size_t len;
            if (code < 0x80) {
                utf8[0] = (char)code;
                len = 1;
            } else if (code < 0x800) {
                utf8[0] = (char)(0xC0 | code >> 6);
                utf8[1] = (char)(0x80 | (code & 0x3F));
                len = 2;
            } else {
                utf8[0] = (char)(0xE0 | code >> 12);
                utf8[1] = (char)(0x80 | ((code >> 6) & 0x3F));
                utf8[2] = (char)(0x80 | (code & 0x3F));
                len = 3;
            }
            if (n + len >= cap) return -1;
            memcpy(out + n, utf8, len);
            n += len;
        }
    }
    return -1;
}

static int read_number(struct cursor *c, uint64_t *value, int *integral) {
    const char *start = c->p;
    uint64_t v = 0;
    int overflow = 0;
    *integral = 1;
    if (c->p < c->end && *c->p == '-') {
        c->p++;
        *integral = 0;
    }
    if (c->p >= c->end || *c->p < '0' || *c->p > '9') return -1;
    while (c->p < c->end && *c->p >= '0' && *c->p <= '9') {
        uint64_t digit = (uint64_t)(*c->p - '0');
        if (v > (UINT64_MAX - digit) / 10) overflow = 1;
        v = v * 10 + digit;
        c->p++;
    }
    if (c->p < c->end && *c->p == '.') {
        *integral = 0;
        c->p++;
        if (c->p >= c->end || *c->p < '0' || *c->p > '9') return -1;
        while (c->p < c->end && *c->p >= '0' && *c->p <= '9') c->p++;
    }
    if (c->p < c->end && (*c->p == 'e' || *c->p == 'E')) {
        *integral = 0;
        c->p++;
        if (c->p < c->end && (*c->p == '+' || *c->p == '-')) c->p++;
        if (c->p >= c->end || *c->p < '0' || *c->p > '9') return -1;
        while (c->p < c->end && *c->p >= '0' && *c->p <= '9') c->p++;
    }
    if (overflow) *integral = 0;
    if (value) *value = v;
    return c->p > start ? 0 : -1;
}

static int literal(struct cursor *c, const char *word) {
    size_t n = strlen(word);
    if ((size_t)(c->end - c->p) < n || memcmp(c->p, word, n) != 0) return -1;
    c->p += n;
    return 0;
}

/* What to take out of the object being read: for each key, where its string goes, or which
 * object reader to run on it. */
struct field {
    const char *key;
    char *string;
    size_t cap;
    uint64_t *number;
    int (*object)(struct cursor *, struct lae_reply *, int);
};

static int skip_value(struct cursor *c, int depth);

static int read_object(struct cursor *c, int depth, const struct field *fields, size_t count, struct lae_reply *r) {
    if (depth > 32) return -1;
    skip_space(c);
    if (c->p >= c->end || *c->p != '{') return -1;
    c->p++;
    skip_space(c);
    if (c->p < c->end && *c->p == '}') {
        c->p++;
        return 0;
    }
    for (;;) {
        char key[32];
        const struct field *field = NULL;
        size_t i;
        skip_space(c);
        /* A key too long for the buffer is one we do not read: skipped, not an error. */
        {
            struct cursor probe = *c;
            if (read_string(&probe, key, sizeof key) != 0) {
                key[0] = '\0';
                if (read_string(c, NULL, 0) != 0) return -1;
            } else {
                *c = probe;
            }
        }
        for (i = 0; i < count && key[0]; i++)
            if (strcmp(fields[i].key, key) == 0) field = &fields[i];
        skip_space(c);
        if (c->p >= c->end || *c->p != ':') return -1;
        c->p++;
        skip_space(c);
        if (field && field->object && c->p < c->end && *c->p == '{') {
            if (field->object(c, r, depth + 1) != 0) return -1;
        } else if (field && field->string && c->p < c->end && *c->p == '"') {
            if (read_string(c, field->string, field->cap) != 0) return -1;
        } else if (field && field->number) {
            int integral;
            if (read_number(c, field->number, &integral) != 0 || !integral) return -1;
        } else if (skip_value(c, depth + 1) != 0) {
            return -1;
        }
        skip_space(c);
        if (c->p >= c->end) return -1;
        if (*c->p == ',') {
            c->p++;
            continue;
        }
        if (*c->p == '}') {
            c->p++;
            return 0;
        }
        return -1;
    }
}

static int skip_value(struct cursor *c, int depth) {
    if (depth > 32) return -1;
    skip_space(c);
    if (c->p >= c->end) return -1;
    switch (*c->p) {
    case '{': return read_object(c, depth, NULL, 0, NULL);
    case '[':
        c->p++;
        skip_space(c);
        if (c->p < c->end && *c->p == ']') {
            c->p++;
            return 0;
        }
        for (;;) {
            if (skip_value(c, depth + 1) != 0) return -1;
            skip_space(c);
            if (c->p >= c->end) return -1;
            if (*c->p == ',') {
                c->p++;
                continue;
            }
            if (*c->p == ']') {
                c->p++;
                return 0;
            }
            return -1;
        }
    case '"': return read_string(c, NULL, 0);
    case 't': return literal(c, "true");
    case 'f': return literal(c, "false");
    case 'n': return literal(c, "null");
    default: {
        uint64_t ignored;
        int integral;
        return read_number(c, &ignored, &integral);
    }
    }
}

static int read_value_object(struct cursor *c, struct lae_reply *r, int depth) {
    const struct field fields[] = {
        {"outcome", r->outcome, sizeof r->outcome, NULL, NULL},
        {"code", r->code, sizeof r->code, NULL, NULL},
        {"message", r->message, sizeof r->message, NULL, NULL},
        {"instruction", r->message, sizeof r->message, NULL, NULL},
    };
    return read_object(c, depth, fields, sizeof fields / sizeof fields[0], r);
}

static int read_reply_object(struct cursor *c, struct lae_reply *r, int depth) {
    /* A value is an object, or a string (a handoff ticket's base64). */
    const struct field fields[] = {
        {"kind", r->kind, sizeof r->kind, NULL, NULL},
        {"value", r->ticket, sizeof r->ticket, NULL, read_value_object},
    };
    return read_object(c, depth, fields, 2, r);
}

int lae_parse_reply(const char *json, size_t len, struct lae_reply *out) {
    struct cursor c = {json, json + len};
    const struct field fields[] = {
        {"id", NULL, 0, &out->id, NULL},
        {"reply", NULL, 0, NULL, read_reply_object},
    };
    memset(out, 0, sizeof *out);
    if (read_object(&c, 0, fields, 2, out) != 0) return -1;
    skip_space(&c);
    if (c.p != c.end || out->kind[0] == '\0') return -1;
    return 0;
}

int lae_base64_decode(const char *text, unsigned char *out, size_t cap) {
    static const char alphabet[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    unsigned long bits = 0;
    int count = 0;
    size_t n = 0;
    const char *p;
    for (p = text; *p && *p != '='; p++) {
        const char *at = strchr(alphabet, *p);
        if (!at || !*p) return -1;
        bits = (bits << 6 | (unsigned long)(at - alphabet)) & 0xFFFFFF;
        if (++count == 4) {
            if (n + 3 > cap) return -1;
            out[n++] = (unsigned char)(bits >> 16);
            out[n++] = (unsigned char)(bits >> 8);
            out[n++] = (unsigned char)bits;
            count = 0;
        }
    }
    for (; *p == '='; p++) {}
    if (*p) return -1;
    if (count == 1) return -1;
    if (count == 2) {
        if (n + 1 > cap) return -1;
        out[n++] = (unsigned char)(bits >> 4);
    } else if (count == 3) {
        if (n + 2 > cap) return -1;
        out[n++] = (unsigned char)(bits >> 10);
        out[n++] = (unsigned char)(bits >> 2);
    }
    return (int)n;
}

int lae_json_string(char *buf, size_t cap, size_t *used, const char *text) {
    size_t n = *used;
    const unsigned char *p;
    if (n + 1 >= cap) return -1;
    buf[n++] = '"';
    for (p = (const unsigned char *)text; *p; p++) {
        if (*p == '"' || *p == '\\') {
            if (n + 2 >= cap) return -1;
            buf[n++] = '\\';
            buf[n++] = (char)*p;
        } else if (*p < 0x20 || *p == 0x7F) {
            static const char digits[] = "0123456789abcdef";
            if (n + 6 >= cap) return -1;
            buf[n++] = '\\';
            buf[n++] = 'u';
            buf[n++] = '0';
            buf[n++] = '0';
            buf[n++] = digits[*p >> 4];
            buf[n++] = digits[*p & 0xF];
        } else {
            if (n + 1 >= cap) return -1;
            buf[n++] = (char)*p;
        }
    }
    if (n + 1 >= cap) return -1;
    buf[n++] = '"';
    *used = n;
    return 0;
}
