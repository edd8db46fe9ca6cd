/* The reply reader's rules, row by row (PAMReplyReaderTests builds and runs it): what it takes,
 * what it refuses, what it reads out. Prints each failing row and exits 1 if any. */
#include <stdio.h>
#include <string.h>

#include "../laenclave_reply.h"

static int failures = 0;

static void row(const char *json, int accepted, const char *kind, const char *outcome, const char *message) {
    struct lae_reply r;
    int ok = lae_parse_reply(json, strlen(json), &r) == 0;
    if (ok != accepted || (ok && (strcmp(r.kind, kind) != 0 || strcmp(r.outcome, outcome) != 0
                                  || strcmp(r.message, message) != 0))) {
        printf("row failed: %s (accepted %d, kind \"%s\", outcome \"%s\", message \"%s\")\n", json, ok,
               ok ? r.kind : "", ok ? r.outcome : "", ok ? r.message : "");
        failures++;
    }
}

int main(void) {
    char deep[200];
    unsigned char ticket[20];
    int i;
    row("{\"id\":3,\"reply\":{\"kind\":\"pamAuthenticated\",\"value\":{\"outcome\":\"success\",\"message\":\"ok\"}}}", 1,
        "pamAuthenticated", "success", "ok");
    /* Keys in any order, unknown ones skipped whatever their value. */
    row("{\"reply\":{\"value\":{\"x\":[1,{\"y\":null}],\"outcome\":\"wrong\"},\"kind\":\"pamAuthenticated\"},\"id\":3,\"z\":true}",
        1, "pamAuthenticated", "wrong", "");
    row(" {\"id\":1,\"reply\":{\"kind\":\"hello\",\"value\":{\"version\":1,\"mode\":\"system\",\"uid\":0,\"app\":\"x\"}}} \n",
        1, "hello", "", "");
    row("{\"id\":2,\"reply\":{\"kind\":\"handoffTicket\",\"value\":\"AAECAwQFBgcICQoLDA0ODw==\"}}", 1, "handoffTicket", "",
        "");
    row("{\"id\":3,\"reply\":{\"kind\":\"prompt\",\"value\":{\"instruction\":\"Touch ID \\u2014 \\\"now\\\"\\n\"}}}", 1,
        "prompt", "", "Touch ID \xe2\x80\x94 \"now\"\n");
    row("{\"id\":3,\"reply\":{\"kind\":\"failure\",\"value\":{\"code\":\"busy\",\"message\":\"\\u0000\"}}}", 1, "failure",
        "", "?");
    /* Refused: anything but one whole object with a kind. */
    row("", 0, "", "", "");
    row("{\"id\":3,\"reply\":{\"kind\":\"pamAuthenticated\",\"value\":{\"outcome\":\"success\"}}} x", 0, "", "", "");
    row("{\"id\":3,\"reply\":{\"kind\":\"pamAuthenticated\",\"value\":{\"outcome\":\"success\"}}", 0, "", "", "");
    row("{\"id\":3,\"reply\":{\"value\":{\"outcome\":\"success\"}}}", 0, "", "", "");
    row("{\"id\":-3,\"reply\":{\"kind\":\"hello\"}}", 0, "", "", "");
    row("{\"id\":3.5,\"reply\":{\"kind\":\"hello\"}}", 0, "", "", "");
    row("{\"id\":99999999999999999999,\"reply\":{\"kind\":\"hello\"}}", 0, "", "", "");
    row("{\"id\":3,\"reply\":{\"kind\":\"pamAuthenticated\",\"value\":{\"outcome\":\"succ\x01ess\"}}}", 0, "", "", "");
    row("{\"id\":3,\"reply\":{\"kind\":\"hello\",\"value\":{\"outcome\":\"\\uZZZZ\"}}}", 0, "", "", "");
    row("{\"id\":3,\"reply\":{\"kind\":\"hello\",}}", 0, "", "", "");
    row("{\"id\":3 \"reply\":{\"kind\":\"hello\"}}", 0, "", "", "");
    row("[{\"id\":3,\"reply\":{\"kind\":\"hello\"}}]", 0, "", "", "");
    /* An outcome longer than its buffer is refused, never cut to "success". */
    row("{\"id\":3,\"reply\":{\"kind\":\"pamAuthenticated\",\"value\":{\"outcome\":\"successsuccesssuccesssuccesssuccess\"}}}",
        0, "", "", "");
    /* Nesting deeper than 32 levels. */
    strcpy(deep, "{\"id\":3,\"x\":");
    for (i = 0; i < 40; i++) strcat(deep, "[");
    for (i = 0; i < 40; i++) strcat(deep, "]");
    strcat(deep, ",\"reply\":{\"kind\":\"hello\"}}");
    row(deep, 0, "", "", "");
    /* base64: the ticket's 16 bytes, and nothing that is not base64. */
    if (lae_base64_decode("AAECAwQFBgcICQoLDA0ODw==", ticket, sizeof ticket) != 16 || ticket[15] != 15) {
        printf("base64 of a ticket\n");
        failures++;
    }
    if (lae_base64_decode("AAEC*wQF", ticket, sizeof ticket) != -1 || lae_base64_decode("A", ticket, 1) != -1
        || lae_base64_decode("AAECAwQFBgcICQoLDA0ODw==", ticket, 8) != -1) {
        printf("base64 refusals\n");
        failures++;
    }
    return failures ? 1 : 0;
}
