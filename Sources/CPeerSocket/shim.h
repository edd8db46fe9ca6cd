// What the kernel knows about the other end of a Unix socket, beyond SO_PEERCRED: the peer's
// pidfd (SO_PEERPIDFD) and, through sock_diag, which socket the peer holds. Headers only (Debian:
// linux-libc-dev); no library.
#include <errno.h>
#include <stdint.h>
#include <string.h>
#include <unistd.h>
#include <sys/socket.h>
#include <linux/netlink.h>
#include <linux/rtnetlink.h>
#include <linux/sock_diag.h>
#include <linux/unix_diag.h>

// Linux 6.5 added SO_PEERPIDFD; Debian 12's headers (6.1) lack it. The value is the generic one,
// which x86-64 and arm64 use (alpha, mips, parisc and sparc number it differently).
#ifndef SO_PEERPIDFD
#define SO_PEERPIDFD 77
#endif

// O_PATH is behind _GNU_SOURCE, which Swift's Glibc module is built without.
#include <fcntl.h>
#ifndef O_PATH
#define O_PATH 010000000
#endif

static const int la_so_peerpidfd = SO_PEERPIDFD;
static const int la_o_path = O_PATH;
static const int la_so_cookie = SO_COOKIE;

/// The inode of the socket connected to the AF_UNIX socket whose SO_COOKIE is `cookie`, in the
/// caller's network namespace: > 0 found, 0 the socket has no peer any more (its other end was
/// closed), -ENOENT no such connected socket here, other < 0 -errno.
static inline int64_t la_unix_peer_inode(uint64_t cookie) {
    int nl = socket(AF_NETLINK, SOCK_DGRAM | SOCK_CLOEXEC, NETLINK_SOCK_DIAG);
    if (nl < 0) return -errno;
    struct {
        struct nlmsghdr header;
        struct unix_diag_req request;
    } message;
    memset(&message, 0, sizeof message);
    message.header.nlmsg_len = sizeof message;
    message.header.nlmsg_type = SOCK_DIAG_BY_FAMILY;
    message.header.nlmsg_flags = NLM_F_REQUEST | NLM_F_DUMP;
    message.request.sdiag_family = AF_UNIX;
    message.request.udiag_states = 1 << 1;  // TCP_ESTABLISHED: connected stream sockets only
    message.request.udiag_show = UDIAG_SHOW_PEER;
    struct sockaddr_nl kernel;
    memset(&kernel, 0, sizeof kernel);
    kernel.nl_family = AF_NETLINK;
    if (sendto(nl, &message, sizeof message, 0, (struct sockaddr *)&kernel, sizeof kernel) < 0) {
        int e = errno;
        close(nl);
        return -e;
    }
    static _Thread_local char buffer[32768] __attribute__((aligned(NLMSG_ALIGNTO)));
    int64_t found = -ENOENT;
    for (;;) {
        ssize_t n = recv(nl, buffer, sizeof buffer, 0);
        if (n < 0) {
            if (errno == EINTR) continue;
            int e = errno;
            close(nl);
            return -e;
        }
        if (n == 0) break;
        int length = (int)n;
        for (struct nlmsghdr *h = (struct nlmsghdr *)buffer; NLMSG_OK(h, length); h = NLMSG_NEXT(h, length)) {
            if (h->nlmsg_type == NLMSG_DONE) {
                close(nl);
                return found;
            }
            if (h->nlmsg_type == NLMSG_ERROR) {
                struct nlmsgerr *error = (struct nlmsgerr *)NLMSG_DATA(h);
                close(nl);
                return error->error < 0 ? error->error : -EIO;
            }
            if (h->nlmsg_type != SOCK_DIAG_BY_FAMILY || h->nlmsg_len < NLMSG_LENGTH(sizeof(struct unix_diag_msg))) continue;
            struct unix_diag_msg *entry = (struct unix_diag_msg *)NLMSG_DATA(h);
            uint64_t entryCookie = (uint64_t)entry->udiag_cookie[0] | ((uint64_t)entry->udiag_cookie[1] << 32);
            if (entryCookie != cookie) continue;
            found = 0;
            int attributes = (int)(h->nlmsg_len - NLMSG_LENGTH(sizeof *entry));
            for (struct rtattr *a = (struct rtattr *)(entry + 1); RTA_OK(a, attributes); a = RTA_NEXT(a, attributes)) {
                if (a->rta_type == UNIX_DIAG_PEER && RTA_PAYLOAD(a) >= sizeof(uint32_t)) {
                    uint32_t peer;
                    memcpy(&peer, RTA_DATA(a), sizeof peer);
                    found = peer;
                }
            }
        }
    }
    close(nl);
    return found;
}
