import EnclaveProtocol
import Foundation

#if canImport(Glibc)
import Glibc
#endif

/// The reader role: whoever holds it reads frames and hands each reply to its request (a
/// blocking request's waiter, a callback, or nothing for a discarded one).
extension EnclaveConnection {
    /// The connection's own reader, for callback requests: reads while any is pending (see the
    /// type's comment), then ends; started again by the next one. Nothing of it outlives its work,
    /// so a connection dropped without `close()` is released once no request is running.
    func startReaderThreadLocked() {
        guard !readerThreadStarted else { return }
        readerThreadStarted = true
        let thread = Thread { [self] in readerThreadLoop() }
        thread.name = "laenclaved-reader"
        thread.start()
    }

    func readerThreadLoop() {
        state.lock()
        defer { state.unlock() }
        while !isClosed {
            if readerBusy {
                state.wait()
                continue
            }
            if callbacksPending == 0 {
                // Nothing left for it: the next callback request starts another.
                readerThreadStarted = false
                return
            }
            readerBusy = true
            state.unlock()
            read(until: { self.callbacksPending == 0 && self.lastFinalWasBlocking }, lingering: true)
            state.lock()
        }
        readerThreadStarted = false
    }

    /// Holds the reader role (taken by the caller) until `done` holds — checked under the lock
    /// after every frame — or the connection ends, then gives the role back and wakes one sleeping
    /// thread still without its reply, and the connection's own thread (either may read next).
    /// `lingering`: for the connection's thread — while no callback request waits, it waits for
    /// the socket at most `lingerMilliseconds` before each read, then gives up the role (so an idle
    /// connection dropped without `close()` keeps no thread, and is released).
    func read(until done: () -> Bool, lingering: Bool = false) {
        var ended = false
        reading: while true {
            do {
                while let frame = try readerState.decoder.nextFrame() {
                    dispatch(try ReplyEnvelope.decode(frame, encoding))
                    state.lock()
                    let finished = done() || isClosed
                    state.unlock()
                    if finished { break reading }
                }
            } catch {
                ended = true
                break reading
            }
            if lingering && state.withLock({ callbacksPending == 0 }) {
                var p = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
                let ready = poll(&p, 1, Self.lingerMilliseconds)
                if ready < 0 && errno == EINTR { continue }
                // Nothing came in time, or the wait failed: the role goes to whoever reads next.
                if ready <= 0 { break reading }
            }
            // Nothing to read yet: wait in `poll` for input, not in `recv`. A thread asleep in a Unix
            // socket's `recv` is woken also when the daemon takes the request just sent (the
            // socket has room again), to find nothing and sleep again — two sleeps a request
            // where `poll`, which wakes only for the events asked for, has one (la-bench can).
            let n = readerState.buffer.withUnsafeMutableBytes {
                recv(fd, $0.baseAddress, $0.count, Int32(MSG_DONTWAIT))
            }
            if n < 0 && errno == EINTR { continue }
            if n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK) {
                var p = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
                if poll(&p, 1, -1) < 0 && errno != EINTR {
                    // Not a wait that can be tried again (no memory for it): the connection ends,
                    // rather than turn between recv and poll without sleeping.
                    ended = true
                    break
                }
                continue
            }
            guard n > 0 else {
                ended = true
                break
            }
            readerState.decoder.append(readerState.buffer[0..<n])
        }
        state.lock()
        readerBusy = false
        if ended { shutDownLocked() }
        releaseDescriptorIfIdleLocked()
        wakeNextReaderLocked()
        state.unlock()
    }

    func dispatch(_ envelope: ReplyEnvelope) {
        state.lock()
        guard let entry = pending[envelope.id] else {
            if envelope.id == 0, case .failure(let f) = envelope.reply { refusal = f }
            state.unlock()
            return
        }
        let final = envelope.reply.isFinal
        if final {
            _ = removeLocked(envelope.id)
            switch entry {
            case .blocking: lastFinalWasBlocking = true
            case .callback: lastFinalWasBlocking = false
            case .discarded: break
            }
        }
        switch entry {
        case .discarded:
            state.unlock()
        case .blocking(let waiter):
            // Events of a blocking request have nobody to show them to; only the final reply counts.
            if final {
                waiter.result = .success(envelope.reply)
                wakeLocked(waiter)
            }
            state.unlock()
        case .callback(let onEvent, let completion):
            state.unlock()
            if final { completion(.success(envelope.reply)) } else { onEvent?(envelope.reply) }
        }
    }
}
