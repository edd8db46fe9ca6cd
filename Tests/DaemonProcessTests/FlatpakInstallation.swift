import Foundation
import IntegrationSupport
import XCTest

#if canImport(Glibc)
import Glibc
#endif

/// A Flatpak installation of its own (`FLATPAK_USER_DIR`), with the real `flatpak` and bubblewrap:
/// a tiny runtime whose `/usr/bin/la-sandbox-client` every app runs — as two Python apps on one
/// runtime both run its `python3` — and the apps the tests name.
///
/// The client (static, so the runtime needs no libraries) connects to a socket, sends the frames
/// given in hex, and prints the replies' payloads one per line; with `wait` instead of frames it
/// keeps its sandbox alive (until the test kills it, or two minutes); `stacked` first, it mounts a
/// tmpfs over its own root before connecting; `fuseroot DIR` first, it makes a FUSE file system
/// that never answers its root (and gives up after 10 s); `lease` first, it holds write leases on
/// its own `/proc/self/mountinfo` and `cgroup` (and gives up after 10 s).
struct FlatpakInstallation {
    static let runtime = "org.laenclaved.TestPlatform"
    let directory: String
    let repository: String
    let environment: [String: String]

    static let clientSource = #"""
        #define _GNU_SOURCE
        #include <errno.h>
        #include <fcntl.h>
        #include <linux/fuse.h>
        #include <pthread.h>
        #include <signal.h>
        #include <stdio.h>
        #include <stdlib.h>
        #include <string.h>
        #include <sys/mount.h>
        #include <sys/socket.h>
        #include <sys/un.h>
        #include <unistd.h>

        static void timed_out(int signal) {
            (void)signal;
            static const char message[] = "timeout: no answer within 10 s\n";
            write(2, message, sizeof message - 1);
            _exit(4);
        }

        /* Answers INIT, GETATTR and ACCESS; leaves every LOOKUP (and anything else) unanswered. */
        static void *serve_fuse(void *argument) {
            int fuse = (int)(long)argument;
            static unsigned char request[1 << 17];
            for (;;) {
                ssize_t n = read(fuse, request, sizeof request);
                if (n < (ssize_t)sizeof(struct fuse_in_header)) { if (n < 0 && errno == EINTR) continue; return NULL; }
                struct fuse_in_header *in = (struct fuse_in_header *)request;
                struct { struct fuse_out_header header; union { struct fuse_init_out init; struct fuse_attr_out attr; } body; } out;
                memset(&out, 0, sizeof out);
                out.header.unique = in->unique;
                size_t size = sizeof out.header;
                if (in->opcode == FUSE_INIT) {
                    out.body.init.major = FUSE_KERNEL_VERSION;
                    out.body.init.minor = FUSE_KERNEL_MINOR_VERSION;
                    out.body.init.max_write = 4096;
                    size += sizeof out.body.init;
                } else if (in->opcode == FUSE_GETATTR) {
                    out.body.attr.attr_valid = 3600;
                    out.body.attr.attr.ino = 1;
                    out.body.attr.attr.mode = 040755;
                    out.body.attr.attr.nlink = 2;
                    size += sizeof out.body.attr;
                } else if (in->opcode == FUSE_ACCESS) {
                } else {
                    continue;
                }
                out.header.len = (uint32_t)size;
                write(fuse, &out, size);
            }
        }

        static int full(int fd, unsigned char *bytes, size_t n) {
            for (size_t done = 0; done < n; ) {
                ssize_t r = read(fd, bytes + done, n - done);
                if (r <= 0) return -1;
                done += (size_t)r;
            }
            return 0;
        }

        int main(int argc, char **argv) {
            if (argc == 2 && strcmp(argv[1], "wait") == 0) { sleep(120); return 0; }
            const char *path = NULL;
            if (argc > 3 && strcmp(argv[1], "fuseroot") == 0) {
                /* A FUSE file system as its own root that answers what entering it takes, and
                   never a name looked up in it: such a lookup waits until this process ends. The
                   socket is reached from the working directory, never through the root. */
                alarm(10);
                signal(SIGALRM, timed_out);
                int fuse = open("/dev/fuse", O_RDWR | O_CLOEXEC);
                char options[160];
                snprintf(options, sizeof options, "fd=%d,rootmode=40000,user_id=0,group_id=0,allow_other", fuse);
                if (fuse < 0 || mount("none", argv[2], "fuse", 0, options) != 0) { perror("mount fuse"); return 3; }
                pthread_t server;
                pthread_create(&server, NULL, serve_fuse, (void *)(long)fuse);
                static char directory[4096];
                strncpy(directory, argv[3], sizeof directory - 1);
                directory[sizeof directory - 1] = 0;
                char *slash = strrchr(directory, '/');
                if (!slash) return 2;
                *slash = 0;
                path = slash + 1;
                if (chdir(directory) != 0 || chroot(argv[2]) != 0) { perror("chroot"); return 3; }
                argv += 2;
                argc -= 2;
            }
            if (argc > 2 && strcmp(argv[1], "lease") == 0) {
                /* Write leases on its own mount table and cgroup record: any blocking open of them
                   by another process waits for the lease break time (45 s). */
                signal(SIGIO, SIG_IGN);  /* the break notice, which would end it */
                int table = open("/proc/self/mountinfo", O_RDONLY | O_CLOEXEC);
                if (table < 0 || fcntl(table, F_SETLEASE, F_WRLCK) != 0) { perror("lease"); return 3; }
                int cgroup = open("/proc/self/cgroup", O_RDONLY | O_CLOEXEC);
                if (cgroup < 0 || fcntl(cgroup, F_SETLEASE, F_WRLCK) != 0) { perror("lease"); return 3; }
                alarm(10);
                signal(SIGALRM, timed_out);
                argv++;
                argc--;
            }
            if (argc > 1 && strcmp(argv[1], "stacked") == 0) {
                /* A tmpfs over its own root: its mount table then shows tmpfs at /, while its
                   root, where /.flatpak-info is looked up, is still the file system below. */
                if (mount("none", "/", "tmpfs", 0, "") != 0) { perror("mount"); return 3; }
                argv++;
                argc--;
            }
            if (argc != 4) { fprintf(stderr, "usage: SOCKET HEX REPLIES | wait\n"); return 2; }
            int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
            struct sockaddr_un address = { .sun_family = AF_UNIX };
            strncpy(address.sun_path, path ? path : argv[1], sizeof address.sun_path - 1);
            if (connect(fd, (struct sockaddr *)&address, sizeof address) != 0) { perror("connect"); return 1; }
            size_t length = strlen(argv[2]) / 2;
            unsigned char *frames = malloc(length);
            for (size_t i = 0; i < length; i++) sscanf(argv[2] + 2 * i, "%2hhx", &frames[i]);
            /* A refused client may find the connection closed already: its refusal is still there to read. */
            if (send(fd, frames, length, MSG_NOSIGNAL) != (ssize_t)length) perror("send");
            for (int i = 0; i < atoi(argv[3]); i++) {
                unsigned char header[4];
                if (full(fd, header, 4) != 0) { fprintf(stderr, "connection closed\n"); return 1; }
                size_t n = (size_t)header[0] << 24 | (size_t)header[1] << 16 | (size_t)header[2] << 8 | header[3];
                unsigned char *payload = malloc(n + 1);
                if (full(fd, payload, n) != 0) { fprintf(stderr, "connection closed\n"); return 1; }
                payload[n] = 0;
                printf("%s\n", payload);
                free(payload);
            }
            return 0;
        }
        """#

    /// Builds the runtime and installs `apps`; throws XCTSkip where flatpak is not installed
    /// (scripts/setup-debian installs it).
    init(apps: [String]) throws {
        guard FileManager.default.isExecutableFile(atPath: "/usr/bin/flatpak") else {
            throw XCTSkip("needs flatpak (scripts/setup-debian)")
        }
        directory = NSTemporaryDirectory() + "la-flatpak-\(UUID().uuidString.prefix(8))"
        repository = directory + "/repo"
        // Flatpak keeps its instance records where logind puts the user's runtime directory.
        let runtimeDirectory = "/run/user/\(getuid())"
        if !FileManager.default.fileExists(atPath: runtimeDirectory) {
            // Where logind is not running (a container), root makes it as logind would.
            do {
                try FileManager.default.createDirectory(
                    atPath: runtimeDirectory,
                    withIntermediateDirectories: true,
                    attributes: [.posixPermissions: 0o700]
                )
            } catch {
                throw XCTSkip("needs \(runtimeDirectory), which logind makes for a logged-in user")
            }
        }
        var environment = ProcessInfo.processInfo.environment
        environment["FLATPAK_USER_DIR"] = directory + "/installation"
        environment["XDG_RUNTIME_DIR"] = runtimeDirectory
        environment["DBUS_SESSION_BUS_ADDRESS"] = nil
        self.environment = environment

        let runtimeTree = directory + "/runtime"
        for sub in ["usr/bin", "files", "var"] {
            try FileManager.default.createDirectory(atPath: "\(runtimeTree)/\(sub)", withIntermediateDirectories: true)
        }
        try "[Runtime]\nname=\(Self.runtime)\nruntime=\(Self.runtime)/x86_64/1\nsdk=\(Self.runtime)/x86_64/1\n"
            .write(toFile: runtimeTree + "/metadata", atomically: true, encoding: .utf8)
        try Self.clientSource.write(toFile: directory + "/client.c", atomically: true, encoding: .utf8)
        try check(
            runProcess(
                Self.compiler(),
                ["-static", "-O2", "-o", runtimeTree + "/usr/bin/la-sandbox-client", directory + "/client.c"]
            )
        )
        try flatpak(["build-export", "--runtime", repository, runtimeTree, "1"])
        try flatpak(["--user", "remote-add", "--no-gpg-verify", "tests", "file://" + repository])
        try flatpak(["--user", "install", "-y", "--noninteractive", "tests", "\(Self.runtime)//1"])
        for app in apps {
            let tree = "\(directory)/\(app)"
            try flatpak(["build-init", tree, app, Self.runtime, Self.runtime, "1"])
            // With network access, as most desktop apps have: the same network namespace as the daemon's.
            try flatpak(["build-finish", tree, "--command=la-sandbox-client", "--share=network"])
            try flatpak(["build-export", repository, tree, "1"])
            try flatpak(["--user", "install", "-y", "--noninteractive", "tests", "\(app)//1"])
        }
    }

    /// Runs `app`'s client against `socket` (made reachable in the sandbox); `network: false` takes
    /// the app's network access away (a network namespace of its own).
    func run(_ app: String, socket: String, frames: String, replies: Int, network: Bool = true) throws -> ProcessOutput
    {
        try runProcess(
            "/usr/bin/flatpak",
            ["run", "--filesystem=" + (socket as NSString).deletingLastPathComponent]
                + (network ? [] : ["--unshare=network"])
                + ["\(app)//1", socket, frames, String(replies)],
            environment: environment
        )
    }

    /// `app` waiting in its sandbox until `end()`.
    struct Running {
        let process: Process
        let installation: FlatpakInstallation
        let app: String
        let earlier: Set<String>
        /// Ends this sandbox (its first process, and with it every process in its pid namespace),
        /// then `flatpak run`, waiting five seconds at most.
        func end() {
            for record in installation.instances(of: app) where !earlier.contains(record) {
                if let pid = FlatpakInstallation.sandboxProcess(record) { kill(pid, SIGKILL) }
            }
            kill(process.processIdentifier, SIGKILL)
            for _ in 0..<100 where process.isRunning { usleep(50_000) }
        }
    }

    /// Starts `app` waiting in its sandbox (ended with `flatpak run` if the test dies).
    func start(_ app: String) throws -> Running {
        let earlier = Set(instances(of: app, live: false))
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/flatpak")
        process.arguments = ["run", "--die-with-parent", "\(app)//1", "wait"]
        process.environment = environment
        process.standardOutput = FileHandle.nullDevice
        process.standardError = FileHandle.nullDevice
        try process.run()
        return Running(process: process, installation: self, app: app, earlier: earlier)
    }

    /// The runtime's program as flatpak installed it: the very file the apps run.
    var installedClient: String {
        "\(environment["FLATPAK_USER_DIR"]!)/runtime/\(Self.runtime)/x86_64/1/active/files/bin/la-sandbox-client"
    }

    /// The instance record directories of `app`'s instances; `live`: only those whose sandbox runs.
    func instances(of app: String, live: Bool = true) -> [String] {
        let records = "\(environment["XDG_RUNTIME_DIR"]!)/.flatpak"
        return ((try? FileManager.default.contentsOfDirectory(atPath: records)) ?? []).filter {
            $0.allSatisfy(\.isNumber)
        }.map { "\(records)/\($0)" }
            .filter { (try? String(contentsOfFile: $0 + "/info", encoding: .utf8))?.contains("name=\(app)\n") == true }
            .filter { !live || Self.sandboxRuns($0) }
    }

    private static func sandboxRuns(_ record: String) -> Bool {
        sandboxProcess(record).map { kill($0, 0) == 0 } ?? false
    }

    static func sandboxProcess(_ record: String) -> Int32? {
        guard let data = FileManager.default.contents(atPath: record + "/bwrapinfo.json"),
            let info = try? JSONSerialization.jsonObject(with: data) as? [String: Any],
            let pid = info["child-pid"] as? Int
        else { return nil }
        return Int32(pid)
    }

    /// Removes the installation and the records its apps' ended instances left (flatpak clears
    /// them only when it lists instances).
    func remove(apps: [String]) {
        for app in apps {
            for record in instances(of: app, live: false) where !Self.sandboxRuns(record) {
                try? FileManager.default.removeItem(atPath: record)
            }
        }
        try? FileManager.default.removeItem(atPath: directory)
    }

    private func flatpak(_ arguments: [String]) throws {
        try check(runProcess("/usr/bin/flatpak", arguments, environment: environment))
    }

    private func check(_ output: ProcessOutput) throws {
        guard output.status == 0 else {
            throw NSError(
                domain: "flatpak",
                code: Int(output.status),
                userInfo: [NSLocalizedDescriptionKey: output.stderr]
            )
        }
    }

    /// The C compiler beside the Swift toolchain's `swift` (a Debian machine with Swift need not
    /// have gcc).
    static func compiler() -> String {
        for directory in (ProcessInfo.processInfo.environment["PATH"] ?? "").split(separator: ":") {
            let swift = "\(directory)/swift"
            guard FileManager.default.isExecutableFile(atPath: swift) else { continue }
            let resolved = URL(fileURLWithPath: swift).resolvingSymlinksInPath().deletingLastPathComponent().path
            if FileManager.default.isExecutableFile(atPath: resolved + "/clang") { return resolved + "/clang" }
        }
        return "/usr/bin/cc"
    }
}
