// libFuzzer target for the wire: arbitrary bytes through FrameDecoder (split at an input-chosen
// point, as a stream arrives) and every complete frame through RequestEnvelope.decode, in both
// codings (JSON and BinaryWire).
// Built and run by scripts/fuzz-frame-decoder; not part of the package build.

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzFrameDecoder(_ data: UnsafePointer<UInt8>, _ count: Int) -> Int32 {
    let bytes = Array(UnsafeBufferPointer(start: data, count: count))
    let split = bytes.isEmpty ? 0 : Int(bytes[0]) % (bytes.count + 1)
    var decoder = FrameDecoder()
    for chunk in [bytes[..<split], bytes[split...]] {
        decoder.append(chunk)
        while true {
            do {
                guard let frame = try decoder.nextFrame() else { break }
                precondition(frame.count <= WireLimits.maxPayloadBytes)
                for encoding in WireEncoding.allCases { _ = try? RequestEnvelope.decode(frame, encoding) }
            } catch {
                return 0
            }
        }
    }
    _ = try? decoder.finish()
    for encoding in WireEncoding.allCases { _ = try? RequestEnvelope.decode(bytes, encoding) }
    return 0
}
