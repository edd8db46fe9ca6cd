import Foundation

// Linux has no CoreFoundation types visible to Swift. These aliases give Apple-style code the names
// it uses, mapped onto Foundation's bridged classes, so that `query as CFDictionary`,
// `kSecClass as String` and `item as? Data` compile and behave as on Apple platforms.
//
// Our choice: the aliases are plain Foundation types, not distinct CF types; `CFGetTypeID` and the
// CF functions that operate on them are not provided.

/// Any object: Apple's `CFTypeRef`. Results of SecItem calls arrive as one of these.
public typealias CFTypeRef = AnyObject
public typealias CFDictionary = NSDictionary
public typealias CFString = NSString
public typealias CFData = NSData
public typealias CFArray = NSArray
/// `kCFBooleanTrue`/`kCFBooleanFalse` are `NSNumber`s holding a `Bool`.
public typealias CFBoolean = NSNumber
public typealias CFNumber = NSNumber
public typealias CFDate = NSDate
public typealias CFError = NSError
public typealias CFOptionFlags = UInt
public typealias CFIndex = Int
/// Apple's status code type (SecBase.h).
public typealias OSStatus = Int32

/// Apple's `CFAllocator`. Present so that allocator arguments compile; every function here
/// ignores it (pass `nil` or `kCFAllocatorDefault`).
public final class CFAllocator: @unchecked Sendable {
    init() {}
}

/// The default allocator. Our choice: `nil`, which every function here treats as the default.
public let kCFAllocatorDefault: CFAllocator? = nil
