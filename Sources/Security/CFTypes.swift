import Foundation

// Linux has no CoreFoundation types visible to Swift. These aliases give Apple-style code the names
// it uses, mapped onto Foundation's bridged classes, so that `query as CFDictionary`,
// `kSecClass as String` and `item as? Data` compile and behave as on Apple platforms.
//
// Our choice: the aliases are plain Foundation types, not distinct CF types; `CFGetTypeID` answers
// from the object's Foundation class (below).

/// Any object: Apple's `CFTypeRef`. Results of SecItem calls arrive as one of these.
public typealias CFTypeRef = AnyObject
public typealias CFDictionary = NSDictionary
public typealias CFString = NSString
public typealias CFData = NSData
public typealias CFArray = NSArray
/// `kCFBooleanTrue`/`kCFBooleanFalse` are `NSNumber`s holding a `Bool`.
public typealias CFBoolean = NSNumber

/// Apple's `kCFBooleanTrue` / `kCFBooleanFalse` (`CFBoolean!`), as the keychain's value rules read
/// them: a boolean `NSNumber`.
public let kCFBooleanTrue: CFBoolean! = NSNumber(value: true)
public let kCFBooleanFalse: CFBoolean! = NSNumber(value: false)
public typealias CFNumber = NSNumber
public typealias CFDate = NSDate
public typealias CFError = NSError
public typealias CFOptionFlags = UInt
public typealias CFIndex = Int
/// Apple's status code type (SecBase.h).
public typealias OSStatus = Int32

/// Apple's `CFAllocator`. Present so that allocator arguments compile; every function here
/// ignores it (pass `nil` or `kCFAllocatorDefault`).
public final class CFAllocator: Sendable {
    init() {}
}

/// The default allocator. Our choice: `nil`, which every function here treats as the default.
public let kCFAllocatorDefault: CFAllocator? = nil

/// Apple's `CFTypeID`: which CoreFoundation type an object is.
public typealias CFTypeID = UInt

/// Our type IDs (Apple's values are not a contract and differ between releases): one per type
/// the keychain and key calls hand out, stable within a process.
public func CFGetTypeID(_ cf: CFTypeRef!) -> CFTypeID {
    switch cf {
    case is SecKey: return SecKeyGetTypeID()
    case is SecAccessControl: return SecAccessControlGetTypeID()
    case let n as NSNumber:
        return String(cString: n.objCType) == "c" || String(cString: n.objCType) == "B"
            ? CFBooleanGetTypeID() : CFNumberGetTypeID()
    case is NSString: return CFStringGetTypeID()
    case is NSData: return CFDataGetTypeID()
    case is NSDictionary: return CFDictionaryGetTypeID()
    case is NSArray: return CFArrayGetTypeID()
    case is NSDate: return CFDateGetTypeID()
    case is NSError: return CFErrorGetTypeID()
    default: return 0
    }
}

public func CFStringGetTypeID() -> CFTypeID { 7 }
public func CFDictionaryGetTypeID() -> CFTypeID { 18 }
public func CFArrayGetTypeID() -> CFTypeID { 19 }
public func CFDataGetTypeID() -> CFTypeID { 20 }
public func CFBooleanGetTypeID() -> CFTypeID { 21 }
public func CFNumberGetTypeID() -> CFTypeID { 22 }
public func CFDateGetTypeID() -> CFTypeID { 42 }
public func CFErrorGetTypeID() -> CFTypeID { 30 }
public func SecKeyGetTypeID() -> CFTypeID { 301 }
public func SecAccessControlGetTypeID() -> CFTypeID { 302 }

public typealias CFHashCode = UInt

public func CFBooleanGetValue(_ boolean: CFBoolean!) -> Bool { boolean.boolValue }
/// Our reading of CoreFoundation's equality: Foundation's `isEqual`.
public func CFEqual(_ cf1: CFTypeRef!, _ cf2: CFTypeRef!) -> Bool {
    guard let a = cf1 as? NSObject else { return cf1 === cf2 }
    return a.isEqual(cf2)
}
public func CFHash(_ cf: CFTypeRef!) -> CFHashCode {
    UInt(bitPattern: (cf as? NSObject)?.hash ?? ObjectIdentifier(cf).hashValue)
}
public func CFCopyDescription(_ cf: CFTypeRef!) -> CFString! { NSString(string: String(describing: cf!)) }

/// On Apple platforms an `NSString` in an `AnyHashable` is the `String` it holds, so a result
/// dictionary bridged to `[AnyHashable: Any]` (keys `String`) answers `dict[kSecAttrAccount]`.
/// swift-corelibs-foundation's `NSString` has no such representation, and our CFStrings are
/// NSStrings: this gives them Apple's, for every NSString of a process that links Security.
extension NSString: @retroactive _HasCustomAnyHashableRepresentation {
    public func _toCustomAnyHashable() -> AnyHashable? { AnyHashable(String(self)) }
}
