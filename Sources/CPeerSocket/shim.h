// What the kernel knows about the other end of a Unix socket, beyond SO_PEERCRED: the peer's
// pidfd (SO_PEERPIDFD) and, through sock_diag, which socket the peer holds. Headers only (Debian:
// linux-libc-dev); no library.
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
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

#include <linux/stat.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
// Behind _GNU_SOURCE in glibc's headers (the values are the kernel's).
#ifndef AT_STATX_DONT_SYNC
#define AT_STATX_DONT_SYNC 0x4000
#endif
#ifndef AT_NO_AUTOMOUNT
#define AT_NO_AUTOMOUNT 0x800
#endif

/// The device and inode `path` (under `directory`) names, from what the kernel has cached
/// (statx with AT_STATX_DONT_SYNC: a FUSE or network file system, overlayfs over one included,
/// is not asked to refresh them; device and inode never change) and never mounting an automount
/// point on the way. 0, or -1 with errno.
static inline int la_file_id(int directory, const char *path, uint64_t *device, uint64_t *inode) {
    struct statx info;
    if (syscall(SYS_statx, directory, path, AT_STATX_DONT_SYNC | AT_NO_AUTOMOUNT, STATX_INO, &info) != 0) return -1;
    *device = (uint64_t)makedev(info.stx_dev_major, info.stx_dev_minor);
    *inode = info.stx_ino;
    return 0;
}

/// Whether `path` under `directory` is the character device `major`:`minor`, read as `la_file_id`
/// reads (statx with AT_STATX_DONT_SYNC: a file on a network or FUSE mount that never answers is
/// not asked). 1 yes, 0 no, -1 with errno.
static inline int la_is_char_device(int directory, const char *path, unsigned major, unsigned minor) {
    struct statx info;
    if (syscall(SYS_statx, directory, path, AT_STATX_DONT_SYNC | AT_NO_AUTOMOUNT, STATX_TYPE, &info) != 0) return -1;
    return (info.stx_mode & 0170000) == 0020000 && info.stx_rdev_major == major && info.stx_rdev_minor == minor;
}

#ifndef AT_EMPTY_PATH
#define AT_EMPTY_PATH 0x1000
#endif

/// The type (the S_IFMT bits) of the open file `fd`, read as `la_file_id` reads: a descriptor a
/// client hands over may be a file on a FUSE mount whose server never answers, which fstat would
/// ask (FUSE answers a process other than the mount's owner EACCES without asking). -1 with errno.
static inline int la_descriptor_type(int fd) {
    struct statx info;
    if (syscall(SYS_statx, fd, "", AT_EMPTY_PATH | AT_STATX_DONT_SYNC, STATX_TYPE, &info) != 0) return -1;
    return info.stx_mode & 0170000;
}

#include <linux/openat2.h>

/// Opens `path` under `directory` without leaving its mount or following any link (openat2 with
/// RESOLVE_BENEATH, NO_XDEV, NO_SYMLINKS, NO_MAGICLINKS): a path a user can mount over fails
/// (EXDEV) instead of reaching into the mount. -1 with errno.
static inline int la_open_beneath(int directory, const char *path, int flags) {
    struct open_how how;
    memset(&how, 0, sizeof how);
    how.flags = (uint64_t)(unsigned)flags;
    how.resolve = RESOLVE_BENEATH | RESOLVE_NO_XDEV | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS;
    return (int)syscall(SYS_openat2, directory, path, &how, sizeof how);
}

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

// Descriptor passing (SCM_RIGHTS), for the handoff socket: the CMSG_* macros do not reach Swift.

/// One buffer and a zeroed control buffer of `size` bytes, as a message for sendmsg/recvmsg.
static inline struct msghdr la_message(struct iovec *io, char *control, size_t size) {
    memset(control, 0, size);
    struct msghdr message;
    memset(&message, 0, sizeof message);
    message.msg_iov = io;
    message.msg_iovlen = 1;
    message.msg_control = control;
    message.msg_controllen = size;
    return message;
}

/// Sends `length` bytes with descriptor `fd` attached, in one sendmsg with `flags` (MSG_OOB:
/// urgent data) besides MSG_NOSIGNAL. Returns what sendmsg returns.
static inline ssize_t la_send_with_descriptor_flags(int socket, const void *bytes, size_t length, int fd, int flags);

/// Sends `length` bytes with descriptor `fd` attached, in one sendmsg. Returns what sendmsg returns.
static inline ssize_t la_send_with_descriptor(int socket, const void *bytes, size_t length, int fd) {
    return la_send_with_descriptor_flags(socket, bytes, length, fd, 0);
}

static inline ssize_t la_send_with_descriptor_flags(int socket, const void *bytes, size_t length, int fd, int flags) {
    struct iovec io = { .iov_base = (void *)bytes, .iov_len = length };
    union {
        char buffer[CMSG_SPACE(sizeof(int))];
        struct cmsghdr align;
    } control;
    struct msghdr message = la_message(&io, control.buffer, sizeof control.buffer);
    struct cmsghdr *header = CMSG_FIRSTHDR(&message);
    header->cmsg_level = SOL_SOCKET;
    header->cmsg_type = SCM_RIGHTS;
    header->cmsg_len = CMSG_LEN(sizeof(int));
    memcpy(CMSG_DATA(header), &fd, sizeof(int));
    ssize_t n;
    do { n = sendmsg(socket, &message, MSG_NOSIGNAL | flags); } while (n < 0 && errno == EINTR);
    return n;
}

/// The most descriptors one message carries (the kernel's SCM_MAX_FD).
#define LA_MOST_DESCRIPTORS 253
static const int la_most_descriptors = LA_MOST_DESCRIPTORS;

/// Receives up to `length` bytes and the descriptors that came with them (close-on-exec), at most
/// `capacity` of them into `fds`, their count into `*count`; descriptors beyond that are closed and
/// counted too, so the caller can refuse the message (a caller whose closes must not wait here —
/// a file on FUSE waits for its server — gives room for `la_most_descriptors`, all one message
/// can carry). Non-blocking. Returns what recvmsg returns.
static inline ssize_t la_receive_with_descriptors(int socket, void *bytes, size_t length, int *fds, int capacity, int *count) {
    struct iovec io = { .iov_base = bytes, .iov_len = length };
    union {
        char buffer[CMSG_SPACE(sizeof(int) * LA_MOST_DESCRIPTORS)];
        struct cmsghdr align;
    } control;
    struct msghdr message = la_message(&io, control.buffer, sizeof control.buffer);
    *count = 0;
    ssize_t n;
    do { n = recvmsg(socket, &message, MSG_DONTWAIT | MSG_CMSG_CLOEXEC); } while (n < 0 && errno == EINTR);
    if (n < 0) return n;
    for (struct cmsghdr *h = CMSG_FIRSTHDR(&message); h != NULL; h = CMSG_NXTHDR(&message, h)) {
        if (h->cmsg_level != SOL_SOCKET || h->cmsg_type != SCM_RIGHTS) continue;
        int received = (int)((h->cmsg_len - CMSG_LEN(0)) / sizeof(int));
        for (int i = 0; i < received; i++) {
            int fd;
            memcpy(&fd, CMSG_DATA(h) + i * sizeof(int), sizeof(int));
            if (*count < capacity) fds[*count] = fd; else close(fd);
            *count += 1;
        }
    }
    // Truncated control data: descriptors were lost; report one more than fit, so it is refused.
    if (message.msg_flags & MSG_CTRUNC) *count += capacity + 1;
    return n;
}

#include <sys/ioctl.h>

#ifndef SO_PASSRIGHTS
#define SO_PASSRIGHTS 83
#endif

/// Whether the socket takes descriptors (SCM_RIGHTS) sent to it: with `take` 0, a sender's
/// sendmsg carrying any fails with EPERM and nothing enters the socket's queue. Set on a
/// listening socket, the connections it accepts start that way, also for what is sent before
/// the accept. Linux 6.16 (SO_PASSRIGHTS); -1 with ENOPROTOOPT before.
static inline int la_take_descriptors(int socket, int take) {
    return setsockopt(socket, SOL_SOCKET, SO_PASSRIGHTS, &take, sizeof take);
}

/// Whether this kernel can refuse descriptors sent on a connection before they are asked for
/// (SO_PASSRIGHTS, Linux 6.16): asked of a socket of our own. 1 or 0.
static inline int la_kernel_refuses_unasked_descriptors(void) {
    int probe = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (probe < 0) return 0;
    int refuses = la_take_descriptors(probe, 0) == 0;
    close(probe);
    return refuses;
}

/// Whether a connection takes descriptors now: 1 or 0, -1 (ENOPROTOOPT) before Linux 6.16. A
/// connection made before its listener was told to refuse them takes them.
static inline int la_takes_descriptors(int socket) {
    int take = 1;
    socklen_t size = sizeof take;
    if (getsockopt(socket, SOL_SOCKET, SO_PASSRIGHTS, &take, &size) != 0) return -1;
    return take != 0;
}

/// Reads urgent data (MSG_OOB) in line with the rest (SO_OOBINLINE), descriptors and all. Else,
/// depending on the kernel, a plain read frees an urgent byte it meets (a descriptor that rode
/// with it is released there, by the reader), or leaves it where FIONREAD does not count it. Set
/// it before anything is read.
static inline int la_read_urgent_in_line(int socket) {
    int one = 1;
    return setsockopt(socket, SOL_SOCKET, SO_OOBINLINE, &one, sizeof one);
}

/// Ends a connection's reading so that nothing more can enter its queue (a sender's sendmsg then
/// fails with EPIPE: the kernel checks under the lock that queues), and says what is still
/// queued: 0 nothing; 1 bytes, and with `look` 0 the descriptors that may ride with them; with
/// `look` 1, 1 only when descriptors ride there (peeks without room for them say so, and take
/// none: MSG_CTRUNC) or not every byte could be seen, 2 bytes without any; -1 with errno.
static inline int la_end_reading(int socket, int look) {
    if (shutdown(socket, SHUT_RD) != 0 && errno != ENOTCONN) return -1;
    int queued = 0;
    if (ioctl(socket, FIONREAD, &queued) != 0) return -1;
    if (queued <= 0) return 0;
    if (!look) return 1;
    // A peek stops early (at urgent data's mark, at a change of sender): it goes on from where the
    // last one stopped (SO_PEEK_OFF) until every queued byte was seen; anything short of that is
    // taken for descriptors.
    int offset = 0;
    if (setsockopt(socket, SOL_SOCKET, SO_PEEK_OFF, &offset, sizeof offset) != 0) return 1;
    char *bytes = malloc((size_t)queued);
    if (bytes == NULL) return 1;
    int seen = 0, found = 0;
    for (int looks = 0; seen < queued && !found && looks < 64; looks++) {
        struct iovec io = { .iov_base = bytes, .iov_len = (size_t)(queued - seen) };
        struct msghdr message;
        memset(&message, 0, sizeof message);
        message.msg_iov = &io;
        message.msg_iovlen = 1;
        ssize_t n;
        do { n = recvmsg(socket, &message, MSG_PEEK | MSG_DONTWAIT); } while (n < 0 && errno == EINTR);
        if (n <= 0) break;
        seen += (int)n;
        found = (message.msg_flags & MSG_CTRUNC) != 0;
    }
    free(bytes);
    return found || seen < queued ? 1 : 2;
}

// accept4 and pipe2 are behind _GNU_SOURCE, which Swift's Glibc module is built without: through
// syscall(2), so that no descriptor is ever without close-on-exec (PAM may run helpers).
#include <sys/syscall.h>

/// accept4(fd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK).
static inline int la_accept_cloexec_nonblocking(int fd) {
    return (int)syscall(SYS_accept4, fd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);
}

#ifndef CLONE_FILES
#define CLONE_FILES 0x00000400
#endif

/// Gives the calling thread a descriptor table of its own, holding only the process's `keep`
/// (`count` of them, ascending): what it opens or receives from then on, and what threads it
/// starts (pthread_create shares the caller's table), stays out of the process's own table. The
/// copies it closes are not the last (the process's table keeps its own): nothing waits. 0, or -1
/// with errno.
static inline int la_private_descriptor_table(const int *keep, int count) {
    if (syscall(SYS_unshare, CLONE_FILES) != 0) return -1;
    unsigned int next = 0;
    for (int i = 0; i < count; i++) {
        unsigned int kept = (unsigned int)keep[i];
        if (kept > next && syscall(SYS_close_range, next, kept - 1, 0) != 0) return -1;
        if (kept + 1 > next) next = kept + 1;
    }
    return syscall(SYS_close_range, next, ~0U, 0) == 0 ? 0 : -1;
}

/// pipe2(fds, O_CLOEXEC | O_NONBLOCK).
static inline int la_pipe_cloexec_nonblocking(int fds[2]) {
    return (int)syscall(SYS_pipe2, fds, O_CLOEXEC | O_NONBLOCK);
}

#include <sys/ioctl.h>

/// The device of the terminal behind `fd` in the kernel's numbering (what /proc/PID/stat calls
/// tty_nr), also for a descriptor opened through /dev/tty, whose own st_rdev is /dev/tty's (5:0).
/// 0 when `fd` is not a terminal. TIOCGDEV: Linux 3.8.
static inline uint32_t la_terminal_device(int fd) {
    unsigned int device = 0;
    if (ioctl(fd, TIOCGDEV, &device) != 0) return 0;
    return device;
}

// The privileged helper (`PeerHelper`): the daemon that parses clients' input keeps no capability
// over other processes; a helper that reads only fixed-size messages from it does.
#include <sys/prctl.h>
#ifndef PR_CAP_AMBIENT
#define PR_CAP_AMBIENT 47
#define PR_CAP_AMBIENT_CLEAR_ALL 4
#endif

/// Clears the calling thread's ambient capabilities: a program it then executes (not set-user-ID,
/// without file capabilities, run by a user other than root) starts with none.
static inline int la_clear_ambient_capabilities(void) {
    return prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0);
}

/// socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC): message boundaries kept, both ends close-on-exec.
static inline int la_socketpair_seqpacket(int fds[2]) {
    return socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, fds);
}

/// prctl(PR_SET_NO_NEW_PRIVS, 1): no program run from here on gains privileges (set-user-ID bits,
/// file capabilities), so capabilities left in the inheritable and bounding sets stay unusable.
static inline int la_set_no_new_privileges(void) {
    return prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0);
}

/// pidfd_open(pid, 0) (Linux 5.3).
static inline int la_pidfd_open(int pid) {
    return (int)syscall(SYS_pidfd_open, pid, 0);
}

#include <signal.h>
static void la_interrupting_nothing(int signal) { (void)signal; }
// A handler that does nothing, installed without SA_RESTART: the signal, sent to one thread, makes
// that thread's blocking system call return (EINTR, or what it had done). Swift cannot write a
// sigaction's handler union.
static inline int la_install_interrupting_handler(int signal) {
    struct sigaction action;
    memset(&action, 0, sizeof action);
    action.sa_handler = la_interrupting_nothing;
    sigemptyset(&action.sa_mask);
    return sigaction(signal, &action, NULL);
}

#include <sys/prctl.h>
// The calling thread's name as the kernel keeps it (15 bytes; longer is cut): pthread_setname_np
// is behind _GNU_SOURCE.
static inline int la_set_thread_name(const char *name) { return prctl(PR_SET_NAME, name, 0, 0, 0); }
static inline int la_thread_name(char name[16]) { return prctl(PR_GET_NAME, name, 0, 0, 0); }
