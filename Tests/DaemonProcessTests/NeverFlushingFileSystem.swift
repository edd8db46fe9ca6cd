import Foundation
import IntegrationSupport
import XCTest

#if canImport(Glibc)
import Glibc
#endif

/// A FUSE file system (root mounts it: the tests run as root) holding one file, `file`, whose
/// server answers what opening it takes and, once it is open, nothing about it: no FLUSH, READ,
/// POLL, IOCTL, nor GETATTR (its attributes are never valid for long: an `fstat` asks, a `statx`
/// that must not sync does not) — except the FLUSH of the process that opened it, so that the
/// test's own close ends. A close of the file in any other process (the daemon, or a child the
/// test spawns: its exec closes the copy it inherited) waits until the server ends — and no
/// signal ends that wait, not even SIGKILL (the kernel's FLUSH is a forced request). What an attacker's own FUSE mount (fusermount3, or a user namespace) can hand the
/// daemon. `end()` kills the server, which lets every waiting close go, and unmounts.
///
/// With `writeBack`, the mount caches writes (FUSE_WRITEBACK_CACHE): the opener may read and
/// write the file, and no page written is ever taken back (WRITE is never answered). The last
/// release of any open file of it writes the file's dirty pages back, and waits: whoever drops
/// that last reference while a page is dirty — a close, or the release of a message nobody
/// received that carried the file — waits until the server ends.
final class NeverFlushingFileSystem {
    static let serverSource = #"""
        #define _GNU_SOURCE
        #include <errno.h>
        #include <fcntl.h>
        #include <linux/fuse.h>
        #include <stdio.h>
        #include <string.h>
        #include <sys/mount.h>
        #include <sys/prctl.h>
        #include <signal.h>
        #include <unistd.h>

        /* The process a thread (a request's pid) belongs to. */
        static int thread_group(uint32_t thread) {
            char path[64];
            snprintf(path, sizeof path, "/proc/%u/status", thread);
            FILE *status = fopen(path, "r");
            if (!status) return -1;
            char line[256];
            int group = -1;
            while (fgets(line, sizeof line, status))
                if (sscanf(line, "Tgid: %d", &group) == 1) break;
            fclose(status);
            return group;
        }

        static void attributes(struct fuse_attr *attr, uint64_t node) {
            attr->ino = node;
            attr->mode = node == 1 ? 040755 : 0100644;
            attr->nlink = node == 1 ? 2 : 1;
            attr->size = node == 1 ? 0 : 5;
        }

        int main(int argc, char **argv) {
            if (argc != 2 && argc != 3) return 2;
            int writeback = argc == 3 && strcmp(argv[2], "writeback") == 0;
            prctl(PR_SET_PDEATHSIG, SIGKILL); /* a test process that dies takes it along */
            int opened = 0, opener = -1;
            int fuse = open("/dev/fuse", O_RDWR | O_CLOEXEC);
            char options[160];
            snprintf(options, sizeof options, "fd=%d,rootmode=40000,user_id=0,group_id=0,allow_other", fuse);
            if (fuse < 0 || mount("la-never-flushes", argv[1], "fuse", 0, options) != 0) { perror("mount"); return 3; }
            printf("ready\n");
            fflush(stdout);
            static unsigned char request[1 << 17];
            for (;;) {
                ssize_t n = read(fuse, request, sizeof request);
                if (n < (ssize_t)sizeof(struct fuse_in_header)) {
                    if (n < 0 && (errno == EINTR || errno == ENOENT)) continue;
                    return 0;
                }
                struct fuse_in_header *in = (struct fuse_in_header *)request;
                struct {
                    struct fuse_out_header header;
                    union {
                        struct fuse_init_out init;
                        struct fuse_attr_out attr;
                        struct fuse_entry_out entry;
                        struct fuse_open_out open;
                        char data[5];
                    } body;
                } out;
                memset(&out, 0, sizeof out);
                out.header.unique = in->unique;
                size_t size = sizeof out.header;
                switch (in->opcode) {
                case FUSE_INIT:
                    out.body.init.major = FUSE_KERNEL_VERSION;
                    out.body.init.minor = FUSE_KERNEL_MINOR_VERSION;
                    out.body.init.max_write = 4096;
                    if (writeback) out.body.init.flags = FUSE_WRITEBACK_CACHE;
                    size += sizeof out.body.init;
                    break;
                case FUSE_SETATTR:
                    if (!writeback || thread_group(in->pid) != opener) continue;
                    /* fall through: the opener's own changes are answered with the attributes */
                case FUSE_GETATTR:
                    if (in->nodeid != 1 && opened && !(writeback && thread_group(in->pid) == opener)) continue;
                    out.body.attr.attr_valid = in->nodeid == 1 ? 3600 : 0;
                    attributes(&out.body.attr.attr, in->nodeid);
                    size += sizeof out.body.attr;
                    break;
                case FUSE_LOOKUP:
                    if (in->nodeid != 1 || strcmp((char *)(in + 1), "file") != 0) {
                        out.header.error = -ENOENT;
                        break;
                    }
                    out.body.entry.nodeid = 2;
                    out.body.entry.entry_valid = 3600;
                    out.body.entry.attr_valid = 0;
                    attributes(&out.body.entry.attr, 2);
                    size += sizeof out.body.entry;
                    break;
                case FUSE_FLUSH:
                    if (opener < 0 || thread_group(in->pid) != opener) continue;
                    break;
                case FUSE_OPEN:
                    opened = 1;
                    opener = thread_group(in->pid);
                    out.body.open.fh = 1;
                    size += sizeof out.body.open;
                    break;
                case FUSE_READ:
                    if (!writeback || thread_group(in->pid) != opener) continue;
                    memcpy(out.body.data, "hello", 5);
                    size += 5;
                    break;
                case FUSE_GETXATTR:
                    out.header.error = -EOPNOTSUPP; /* no extended attributes: the kernel stops asking */
                    break;
                case FUSE_ACCESS:
                case FUSE_RELEASE:
                    break;
                default:
                    continue; /* WRITE, POLL, IOCTL, INTERRUPT, FORGET…: never answered */
                }
                out.header.len = (uint32_t)size;
                write(fuse, &out, size);
            }
        }
        """#

    let directory: String
    let mountPoint: String
    private let server: Process
    private var ended = false

    /// Throws XCTSkip where FUSE cannot be mounted here (not root, no /dev/fuse).
    init(writeBack: Bool = false) throws {
        guard getuid() == 0 else { throw XCTSkip("mounting FUSE takes root (the tests run as root)") }
        guard access("/dev/fuse", R_OK | W_OK) == 0 else { throw XCTSkip("needs /dev/fuse") }
        directory = NSTemporaryDirectory() + "la-fuse-\(UUID().uuidString.prefix(8))"
        mountPoint = directory + "/mount"
        try FileManager.default.createDirectory(atPath: mountPoint, withIntermediateDirectories: true)
        try Self.serverSource.write(toFile: directory + "/server.c", atomically: true, encoding: .utf8)
        let built = try runProcess(
            FlatpakInstallation.compiler(),
            ["-O2", "-o", directory + "/server", directory + "/server.c"]
        )
        guard built.status == 0 else {
            try? FileManager.default.removeItem(atPath: directory)
            throw NSError(domain: "cc", code: Int(built.status), userInfo: [NSLocalizedDescriptionKey: built.stderr])
        }
        server = Process()
        server.executableURL = URL(fileURLWithPath: directory + "/server")
        server.arguments = [mountPoint] + (writeBack ? ["writeback"] : [])
        let output = Pipe()
        server.standardOutput = output
        try server.run()
        let ready = output.fileHandleForReading.readData(ofLength: 6)
        guard String(decoding: ready, as: UTF8.self) == "ready\n" else {
            end()
            throw XCTSkip("the FUSE server could not mount (\(server.terminationStatus))")
        }
    }

    /// `file`, opened for reading (or reading and writing) by this process: close it only after
    /// `end()` (with `writeBack`, a close while a page is dirty waits too).
    func openFile(writing: Bool = false) throws -> Int32 {
        let fd = open(mountPoint + "/file", (writing ? O_RDWR : O_RDONLY) | O_CLOEXEC)
        guard fd >= 0 else { throw POSIXError(POSIXErrorCode(rawValue: errno) ?? .EIO) }
        return fd
    }

    /// Kills the server (every close waiting on it goes on), unmounts, removes the directory.
    func end() {
        guard !ended else { return }
        ended = true
        if server.isRunning {
            kill(server.processIdentifier, SIGKILL)
            server.waitUntilExit()
        }
        umount2(mountPoint, Int32(MNT_DETACH))
        try? FileManager.default.removeItem(atPath: directory)
    }

    deinit { end() }
}
