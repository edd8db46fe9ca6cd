/* pam_laenclave: PAM authentication through laenclaved (docs/architecture.md, "A PAM module").
 *
 * The module asks the system daemon to authenticate PAM_USER for PAM_SERVICE and waits for its
 * one answer; the daemon decides what may be offered (a finger, the login password, both at once,
 * or nothing), draws the prompt on the terminal the module hands it, reads the keys itself and
 * keeps the counters. The module holds no secret and decides nothing but the return code.
 *
 * Small and in C on purpose: PAM loads it into sudo, su, polkit's helper and lock screens, and
 * unloads it again (no runtime of another language may live in those processes). No threads, no
 * signal handlers; every wait is bounded; every error path returns PAM_AUTHINFO_UNAVAIL (the next
 * module asks), never PAM_SUCCESS or PAM_IGNORE.
 *
 * Options: password=login|none, reuse=SECONDS (0-300), timeout=SECONDS (1-3600: how long the
 * daemon keeps its prompt open; by default 60 where it draws one — the handed terminal, or the
 * prompt agent's window on the user's seat — and 10 where only a finger can answer), socket=PATH,
 * debug. An unknown or malformed option is logged and ignored. The daemon ends its prompt itself
 * and gives the terminal back before it answers; the module waits that long and a little more. */
#define _GNU_SOURCE
#define PAM_SM_AUTH

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pwd.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <syslog.h>
#include <termios.h>
#include <time.h>
#include <unistd.h>

#include <security/pam_ext.h>
#include <security/pam_modules.h>

#include "laenclave_reply.h"

#define SYSTEM_SOCKET "/run/laenclaved/socket"
#define HANDOFF_SUFFIX ".handoff"
/* The handoff socket's first byte when the daemon will take the ticket (Handoff.ready). */
#define HANDOFF_READY 0x80
#define PROTOCOL_VERSION 1
#define MAX_FRAME (64 * 1024)
#define TICKET_BYTES 16
/* How long the daemon may take to accept and greet: a daemon that does not answer in this time
 * is unavailable, and the next module asks. */
#define CONNECT_MS 2000
/* Beyond the prompt's own time: the daemon's answer after it closed the prompt. */
#define ANSWER_GRACE_MS 5000
/* How long the daemon may take to let go of the terminal once the module stops waiting. */
#define LET_GO_MS 2000

struct options {
    int password_none;
    int reuse;
    int timeout;
    int debug;
    const char *socket;
};

static void parse_options(pam_handle_t *pamh, int argc, const char **argv, struct options *o) {
    int i;
    o->password_none = 0;
    o->reuse = 0;
    o->timeout = 0;
    o->debug = 0;
    o->socket = SYSTEM_SOCKET;
    for (i = 0; i < argc; i++) {
        const char *a = argv[i];
        char *end;
        long v;
        if (strcmp(a, "debug") == 0) {
            o->debug = 1;
        } else if (strcmp(a, "password=login") == 0) {
            o->password_none = 0;
        } else if (strcmp(a, "password=none") == 0) {
            o->password_none = 1;
        } else if (strncmp(a, "reuse=", 6) == 0 && (v = strtol(a + 6, &end, 10), *end == '\0' && end != a + 6)
                   && v >= 0 && v <= 300) {
            o->reuse = (int)v;
        } else if (strncmp(a, "timeout=", 8) == 0 && (v = strtol(a + 8, &end, 10), *end == '\0' && end != a + 8)
                   && v >= 1 && v <= 3600) {
            o->timeout = (int)v;
        } else if (strncmp(a, "socket=", 7) == 0 && a[7] == '/' && strlen(a + 7) + sizeof HANDOFF_SUFFIX <= 108) {
            o->socket = a + 7;
        } else {
            pam_syslog(pamh, LOG_WARNING, "ignoring the unknown or malformed option \"%.64s\"", a);
        }
    }
}

static long long now_ms(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (long long)t.tv_sec * 1000 + t.tv_nsec / 1000000;
}

/* Waits until `fd` has `events` or the deadline passes: 1 ready, 0 timed out, -1 error. */
static int wait_for(int fd, short events, long long deadline) {
    for (;;) {
        struct pollfd p = {fd, events, 0};
        long long left = deadline - now_ms();
        int r;
        if (left <= 0) return 0;
        r = poll(&p, 1, left > 60000 ? 60000 : (int)left);
        if (r < 0 && errno == EINTR) continue;
        if (r < 0) return -1;
        if (r == 0) continue;
        return 1;
    }
}

static int connect_unix(const char *path, long long deadline) {
    struct sockaddr_un address;
    int fd;
    memset(&address, 0, sizeof address);
    address.sun_family = AF_UNIX;
    if (strlen(path) >= sizeof address.sun_path) return -1;
    strcpy(address.sun_path, path);
    fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (fd < 0) return -1;
    if (connect(fd, (struct sockaddr *)&address, sizeof address) != 0) {
        int ok = 0;
        /* A full backlog answers EAGAIN on a Unix socket: a daemon too busy to accept is not answering. */
        if (errno == EINPROGRESS && wait_for(fd, POLLOUT, deadline) == 1) {
            int error = 0;
            socklen_t size = sizeof error;
            ok = getsockopt(fd, SOL_SOCKET, SO_ERROR, &error, &size) == 0 && error == 0;
        }
        if (!ok) {
            close(fd);
            return -1;
        }
    }
    return fd;
}

/* The daemon is root or the packaged daemon's own user, as the kernel says; anyone else who
 * listens at the path is not asked anything. */
static int trusted_daemon(int fd) {
    struct ucred peer;
    socklen_t size = sizeof peer;
    struct passwd entry, *found = NULL;
    char buffer[1024];
    if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &peer, &size) != 0) return 0;
    if (peer.uid == 0) return 1;
    return getpwnam_r("laenclaved", &entry, buffer, sizeof buffer, &found) == 0 && found && found->pw_uid == peer.uid;
}

static int send_all(int fd, const char *data, size_t len, long long deadline) {
    while (len > 0) {
        ssize_t n = send(fd, data, len, MSG_NOSIGNAL);
        if (n < 0 && (errno == EAGAIN || errno == EINTR)) {
            if (errno == EAGAIN && wait_for(fd, POLLOUT, deadline) != 1) return -1;
            continue;
        }
        if (n <= 0) return -1;
        data += n;
        len -= (size_t)n;
    }
    return 0;
}

static int send_frame(int fd, const char *payload, size_t len, long long deadline) {
    unsigned char header[4] = {(unsigned char)(len >> 24), (unsigned char)(len >> 16), (unsigned char)(len >> 8),
                               (unsigned char)len};
    if (send_all(fd, (const char *)header, 4, deadline) != 0) return -1;
    return send_all(fd, payload, len, deadline);
}

static int read_all(int fd, char *data, size_t len, long long deadline) {
    while (len > 0) {
        ssize_t n = recv(fd, data, len, 0);
        if (n < 0 && (errno == EAGAIN || errno == EINTR)) {
            if (errno == EAGAIN && wait_for(fd, POLLIN, deadline) != 1) return -1;
            continue;
        }
        if (n <= 0) return -1;
        data += n;
        len -= (size_t)n;
    }
    return 0;
}

/* Reads one reply frame into `out`: 0, or -1 (closed, timed out, oversized, malformed). */
static int read_reply(int fd, long long deadline, struct lae_reply *out) {
    unsigned char header[4];
    size_t len;
    char *payload;
    int r;
    if (read_all(fd, (char *)header, 4, deadline) != 0) return -1;
    len = (size_t)header[0] << 24 | (size_t)header[1] << 16 | (size_t)header[2] << 8 | header[3];
    if (len == 0 || len > MAX_FRAME) return -1;
    payload = malloc(len);
    if (!payload) return -1;
    r = read_all(fd, payload, len, deadline) == 0 ? lae_parse_reply(payload, len, out) : -1;
    free(payload);
    return r;
}

/* The controlling terminal, opened afresh, when this process is its foreground (as the client
 * library hands it: by its own name when it is a pseudo-terminal); -1 otherwise. */
static int foreground_terminal(void) {
    unsigned int device = 0;
    int fd = open("/dev/tty", O_RDWR | O_NOCTTY | O_CLOEXEC);
    if (fd < 0) return -1;
    if (!isatty(fd) || tcgetpgrp(fd) != getpgrp() || ioctl(fd, TIOCGDEV, &device) != 0 || device == 0) {
        close(fd);
        return -1;
    }
    {
        unsigned int major = (device >> 8) & 0xfff, minor = (device & 0xff) | ((device >> 12) & 0xfff00);
        if (major >= 136 && major <= 143) {
            char name[32];
            int named;
            unsigned int again = 0;
            snprintf(name, sizeof name, "/dev/pts/%u", (major - 136) << 8 | minor);
            named = open(name, O_RDWR | O_NOCTTY | O_CLOEXEC);
            if (named >= 0 && ioctl(named, TIOCGDEV, &again) == 0 && again == device && tcgetpgrp(named) == getpgrp()) {
                close(fd);
                return named;
            }
            if (named >= 0) close(named);
        }
    }
    return fd;
}

/* Hands `terminal` to the daemon with the ticket it gave (the handoff socket, SCM_RIGHTS). */
static int hand_over(const char *socket_path, const unsigned char *ticket, int terminal, long long deadline) {
    char path[128];
    int fd;
    struct msghdr message;
    struct iovec part;
    union {
        char bytes[CMSG_SPACE(sizeof(int))];
        struct cmsghdr align;
    } control;
    struct cmsghdr *header;
    unsigned char status = 255;
    snprintf(path, sizeof path, "%s%s", socket_path, HANDOFF_SUFFIX);
    fd = connect_unix(path, deadline);
    if (fd < 0) return -1;
    if (!trusted_daemon(fd)) {
        close(fd);
        return -1;
    }
    memset(&message, 0, sizeof message);
    memset(&control, 0, sizeof control);
    part.iov_base = (void *)ticket;
    part.iov_len = TICKET_BYTES;
    message.msg_iov = &part;
    message.msg_iovlen = 1;
    message.msg_control = control.bytes;
    message.msg_controllen = sizeof control.bytes;
    header = CMSG_FIRSTHDR(&message);
    header->cmsg_level = SOL_SOCKET;
    header->cmsg_type = SCM_RIGHTS;
    header->cmsg_len = CMSG_LEN(sizeof(int));
    memcpy(CMSG_DATA(header), &terminal, sizeof(int));
    /* The daemon says it is ready before it takes a descriptor (HANDOFF_READY), or why not. */
    if (read_all(fd, (char *)&status, 1, deadline) != 0 || status != HANDOFF_READY
        || wait_for(fd, POLLOUT, deadline) != 1 || sendmsg(fd, &message, MSG_NOSIGNAL) != TICKET_BYTES
        || read_all(fd, (char *)&status, 1, deadline) != 0) {
        close(fd);
        return -1;
    }
    close(fd);
    return status == 0 ? 0 : -1;
}

static const char *item(pam_handle_t *pamh, int type) {
    const void *value = NULL;
    if (pam_get_item(pamh, type, &value) != PAM_SUCCESS || !value) return NULL;
    return (const char *)value;
}

/* The daemon's outcome as a return code: docs/architecture.md's table. Anything else is
 * unavailable: the next module asks. */
static int return_code(const char *outcome) {
    if (strcmp(outcome, "success") == 0) return PAM_SUCCESS;
    if (strcmp(outcome, "wrong") == 0) return PAM_AUTH_ERR;
    if (strcmp(outcome, "cancelled") == 0) return PAM_AUTH_ERR;
    if (strcmp(outcome, "locked") == 0) return PAM_MAXTRIES;
    if (strcmp(outcome, "refused") == 0) return PAM_PERM_DENIED;
    return PAM_AUTHINFO_UNAVAIL;
}

static int authenticate(pam_handle_t *pamh, int flags, const struct options *o) {
    const char *user = NULL, *service, *tty, *rhost;
    char request[4096];
    size_t used = 0;
    long long deadline = now_ms() + CONNECT_MS;
    struct lae_reply reply;
    int fd, terminal = -1, on_terminal = 0, result = PAM_AUTHINFO_UNAVAIL, shown = 0, answered = 0;
    struct termios saved;
    int restore = 0;

    if (pam_get_user(pamh, &user, NULL) != PAM_SUCCESS || !user || !*user) return PAM_AUTHINFO_UNAVAIL;
    service = item(pamh, PAM_SERVICE);
    tty = item(pamh, PAM_TTY);
    rhost = item(pamh, PAM_RHOST);
    if (!service || !*service) return PAM_AUTHINFO_UNAVAIL;

    fd = connect_unix(o->socket, deadline);
    if (fd < 0) {
        if (o->debug) pam_syslog(pamh, LOG_DEBUG, "no daemon answers at %s", o->socket);
        return PAM_AUTHINFO_UNAVAIL;
    }
    if (!trusted_daemon(fd)) {
        pam_syslog(pamh, LOG_ERR, "the process at %s is not laenclaved (not root or laenclaved)", o->socket);
        goto done;
    }
    {
        static const char hello[] = "{\"id\":1,\"op\":\"hello\",\"args\":{\"version\":1}}";
        if (send_frame(fd, hello, sizeof hello - 1, deadline) != 0 || read_reply(fd, deadline, &reply) != 0
            || reply.id != 1 || strcmp(reply.kind, "hello") != 0) {
            if (o->debug) pam_syslog(pamh, LOG_DEBUG, "the daemon did not greet");
            goto done;
        }
    }
    terminal = foreground_terminal();
    if (terminal >= 0) {
        static const char handoff[] = "{\"id\":2,\"op\":\"handoff\",\"args\":{\"kind\":\"terminal\"}}";
        unsigned char ticket[TICKET_BYTES + 2];
        restore = tcgetattr(terminal, &saved) == 0;
        if (send_frame(fd, handoff, sizeof handoff - 1, deadline) == 0 && read_reply(fd, deadline, &reply) == 0
            && reply.id == 2 && strcmp(reply.kind, "handoffTicket") == 0
            && lae_base64_decode(reply.ticket, ticket, sizeof ticket) == TICKET_BYTES
            && hand_over(o->socket, ticket, terminal, deadline) == 0)
            on_terminal = 1;
        else if (o->debug)
            pam_syslog(pamh, LOG_DEBUG, "the terminal was not handed over: the prompt is headless");
    }
    used = (size_t)snprintf(request, sizeof request, "{\"id\":3,\"op\":\"pamAuthenticate\",\"args\":{\"user\":");
    if (lae_json_string(request, sizeof request, &used, user) != 0) goto done;
    used += (size_t)snprintf(request + used, sizeof request - used, ",\"service\":");
    if (used >= sizeof request || lae_json_string(request, sizeof request, &used, service) != 0) goto done;
    if (tty && *tty) {
        used += (size_t)snprintf(request + used, sizeof request - used, ",\"tty\":");
        if (used >= sizeof request || lae_json_string(request, sizeof request, &used, tty) != 0) goto done;
    }
    if (rhost && *rhost) {
        used += (size_t)snprintf(request + used, sizeof request - used, ",\"remoteHost\":");
        if (used >= sizeof request || lae_json_string(request, sizeof request, &used, rhost) != 0) goto done;
    }
    used += (size_t)snprintf(request + used, sizeof request - used,
                             ",\"password\":\"%s\",\"reuse\":%d,\"onTerminal\":%s",
                             o->password_none ? "none" : "login", o->reuse, on_terminal ? "true" : "false");
    if (o->timeout && used < sizeof request)
        used += (size_t)snprintf(request + used, sizeof request - used, ",\"timeout\":%d", o->timeout);
    if (used < sizeof request) used += (size_t)snprintf(request + used, sizeof request - used, "}}");
    if (used >= sizeof request) goto done;
    deadline = now_ms() + (long long)(o->timeout ? o->timeout : 60) * 1000 + ANSWER_GRACE_MS;
    if (send_frame(fd, request, used, deadline) != 0) goto done;
    for (;;) {
        if (read_reply(fd, deadline, &reply) != 0 || reply.id != 3) {
            if (o->debug) pam_syslog(pamh, LOG_DEBUG, "no answer in time, or a malformed one");
            break;
        }
        if (strcmp(reply.kind, "prompt") == 0) {
            /* The daemon sends screens only where it draws them nowhere: the person is told once. */
            if (!shown && !(flags & PAM_SILENT) && reply.message[0]) {
                pam_info(pamh, "%s", reply.message);
                shown = 1;
            }
            continue;
        }
        if (strcmp(reply.kind, "pamAuthenticated") == 0) {
            result = return_code(reply.outcome);
            answered = 1;
            if (result == PAM_MAXTRIES && reply.message[0] && !(flags & PAM_SILENT)) pam_error(pamh, "%s", reply.message);
            if (o->debug) pam_syslog(pamh, LOG_DEBUG, "the daemon answered %s", reply.outcome);
        } else if (o->debug) {
            pam_syslog(pamh, LOG_DEBUG, "the daemon answered %s %s", reply.kind, reply.code);
        }
        break;
    }
done:
    if (on_terminal && !answered) {
        /* The daemon may still hold the terminal (its prompt open, its closing line unwritten): it
         * sees the module go and lets go; wait for that, briefly, before the next module's prompt. */
        char sink[256];
        long long until = now_ms() + LET_GO_MS;
        shutdown(fd, SHUT_WR);
        while (wait_for(fd, POLLIN, until) == 1 && recv(fd, sink, sizeof sink, 0) > 0) {}
    }
    close(fd);
    if (terminal >= 0) {
        /* Whatever became of the daemon, the terminal is left as it was found (from the
         * foreground only: a background process would be stopped by SIGTTOU). */
        if (restore && tcgetpgrp(terminal) == getpgrp()) tcsetattr(terminal, TCSANOW, &saved);
        close(terminal);
    }
    return result;
}

PAM_EXTERN int pam_sm_authenticate(pam_handle_t *pamh, int flags, int argc, const char **argv) {
    struct options o;
    parse_options(pamh, argc, argv, &o);
    return authenticate(pamh, flags, &o);
}

PAM_EXTERN int pam_sm_setcred(pam_handle_t *pamh, int flags, int argc, const char **argv) {
    (void)pamh;
    (void)flags;
    (void)argc;
    (void)argv;
    return PAM_SUCCESS;
}
