/* libFuzzer driver for the module's reply reader (PAMReplyReaderTests builds and runs it): no input
 * may crash it or make it read or write outside its buffers (ASan, UBSan), a reply it accepts has
 * every field terminated within its buffer, and any text the module writes as a JSON string reads
 * back unchanged. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "../laenclave_reply.h"

static void terminated(const char *field, size_t size) {
    if (memchr(field, 0, size) == NULL) abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    struct lae_reply r;
    unsigned char decoded[64];
    char text[401];
    if (lae_parse_reply((const char *)data, size, &r) == 0) {
        if (r.kind[0] == '\0') abort();
        terminated(r.kind, sizeof r.kind);
        terminated(r.outcome, sizeof r.outcome);
        terminated(r.code, sizeof r.code);
        terminated(r.message, sizeof r.message);
        terminated(r.ticket, sizeof r.ticket);
        if (lae_base64_decode(r.ticket, decoded, sizeof decoded) > (int)sizeof decoded) abort();
    }
    if (size < sizeof text && memchr(data, 0, size) == NULL) {
        static const char head[] = "{\"id\":7,\"reply\":{\"kind\":\"prompt\",\"value\":{\"instruction\":";
        char json[3000];
        size_t used = sizeof head - 1;
        memcpy(text, data, size);
        text[size] = '\0';
        memcpy(json, head, used);
        if (lae_json_string(json, sizeof json, &used, text) == 0) {
            memcpy(json + used, "}}}", 3);
            used += 3;
            if (lae_parse_reply(json, used, &r) != 0 || r.id != 7 || strcmp(r.message, text) != 0) abort();
        }
    }
    return 0;
}
