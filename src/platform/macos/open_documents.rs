//! The *open documents* Apple Event handler and the launch observer that
//! installs it (why this way: the parent module's docs). Owns the one
//! Objective-C class Tensorscope defines.

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};

use objc2::rc::{Retained, autoreleasepool};
use objc2::runtime::{NSObject, NSObjectProtocol};
use objc2::{MainThreadMarker, MainThreadOnly, define_class, msg_send, sel};
use objc2_app_kit::NSApplicationWillFinishLaunchingNotification;
use objc2_foundation::{
    NSAppleEventDescriptor, NSAppleEventManager, NSNotification, NSNotificationCenter,
};

/// A four-character code as the Apple Event Manager spells it (big-endian).
const fn four_char_code(code: [u8; 4]) -> u32 {
    u32::from_be_bytes(code)
}

/// `kCoreEventClass`.
const CORE_EVENT_CLASS: u32 = four_char_code(*b"aevt");
/// `kAEOpenDocuments`.
const OPEN_DOCUMENTS: u32 = four_char_code(*b"odoc");
/// `keyDirectObject`: the event's list of documents.
const DIRECT_OBJECT: u32 = four_char_code(*b"----");

/// Set by the first [`install`], so a second call adds no second observer.
static INSTALLED: AtomicBool = AtomicBool::new(false);

/// Observes `NSApplicationWillFinishLaunchingNotification` and installs the
/// handler then (and at once, which holds if the app already launched).
/// Does nothing off the main thread, where AppKit cannot be used.
pub(super) fn install() {
    let Some(mtm) = MainThreadMarker::new() else {
        return;
    };
    if INSTALLED.swap(true, Ordering::SeqCst) {
        return;
    }
    autoreleasepool(|_| {
        let handler = Handler::new(mtm);
        observe_launch(&handler);
        // Before launch AppKit's defaults replace this registration when it
        // installs them; the observer installs it again after that. After
        // launch (an `install` called late) this is the one that holds.
        handler.register();
        // The handler must outlive every event: neither the notification
        // centre nor the Apple Event Manager retains it.
        std::mem::forget(handler);
    });
}

/// Makes `handler` an observer of `NSApplicationWillFinishLaunchingNotification`.
#[allow(unsafe_code)]
fn observe_launch(handler: &Handler) {
    // SAFETY: `Handler` implements `applicationWillFinishLaunching:` with
    // the signature an observer's selector must have (one NSNotification,
    // no result). The notification centre keeps the observer unretained:
    // `install` leaks the handler, so it lives as long as the process. The
    // name is an AppKit constant (a static NSString), linked with AppKit.
    unsafe {
        NSNotificationCenter::defaultCenter().addObserver_selector_name_object(
            handler,
            sel!(applicationWillFinishLaunching:),
            Some(NSApplicationWillFinishLaunchingNotification),
            None,
        );
    }
}

// The class's methods are called by AppKit through the Objective-C runtime;
// `define_class!` checks their signatures against the selectors' arities.
#[allow(unsafe_code)]
mod class {
    use super::{
        MainThreadOnly, NSAppleEventDescriptor, NSNotification, NSObject, NSObjectProtocol,
        define_class,
    };

    define_class!(
        // SAFETY: NSObject has no subclassing requirements, the class adds
        // no instance variables and no `dealloc`, and it is only used on
        // the main thread (`MainThreadOnly`), where AppKit calls it.
        #[unsafe(super(NSObject))]
        #[thread_kind = MainThreadOnly]
        #[name = "TensorscopeOpenDocuments"]
        pub(super) struct Handler;

        // SAFETY: NSObjectProtocol has no requirements beyond NSObject's.
        unsafe impl NSObjectProtocol for Handler {}

        impl Handler {
            /// The launch observer: AppKit has installed its Apple Event
            /// handlers by now, so ours replaces its *open documents* one.
            // SAFETY: the selector takes one object and returns nothing,
            // as the signature says.
            #[unsafe(method(applicationWillFinishLaunching:))]
            fn will_finish_launching(&self, _notification: Option<&NSNotification>) {
                self.register();
            }

            /// The *open documents* event: its file URLs, as paths, go to
            /// the queue the explorer takes.
            // SAFETY: NSAppleEventManager calls a handler with two
            // NSAppleEventDescriptor pointers and ignores its result;
            // both are taken as optional, so a nil one is not a reference.
            #[unsafe(method(handleOpenDocuments:withReplyEvent:))]
            fn open_documents(
                &self,
                event: Option<&NSAppleEventDescriptor>,
                _reply: Option<&NSAppleEventDescriptor>,
            ) {
                if let Some(event) = event {
                    crate::platform::open_files::push(super::file_paths(event));
                }
            }
        }
    );
}

use class::Handler;

impl Handler {
    /// A new handler (one per process: see [`install`]).
    #[allow(unsafe_code)]
    fn new(mtm: MainThreadMarker) -> Retained<Self> {
        // SAFETY: `init` is NSObject's, which the class inherits and does
        // not override; it takes no argument and returns the initialised
        // object, retained.
        unsafe { msg_send![Self::alloc(mtm), init] }
    }

    /// Makes this object the handler of the *open documents* event,
    /// replacing the one installed before.
    #[allow(unsafe_code)]
    fn register(&self) {
        let manager = NSAppleEventManager::sharedAppleEventManager();
        // SAFETY: the method's arguments are an object, a selector and two
        // FourCharCodes (UInt32), as passed; the selector names a method of
        // `Handler` with the signature the Apple Event Manager calls (two
        // descriptors, no result); the handler is never deallocated
        // (`install` leaks it), so the manager's unretained reference stays
        // valid.
        unsafe {
            let () = msg_send![
                &manager,
                setEventHandler: self,
                andSelector: sel!(handleOpenDocuments:withReplyEvent:),
                forEventClass: CORE_EVENT_CLASS,
                andEventID: OPEN_DOCUMENTS,
            ];
        }
    }
}

/// The local paths an *open documents* event names, in its order. Its
/// direct object is a list of file URLs (aliases on old systems, which the
/// coercion to a file URL turns into URLs); an item that is not a file URL
/// is skipped.
fn file_paths(event: &NSAppleEventDescriptor) -> Vec<PathBuf> {
    let Some(list) = direct_object(event) else {
        return Vec::new();
    };
    let count = list.numberOfItems();
    if count < 1 {
        // One document sent bare, not in a list.
        return file_path(&list).into_iter().collect();
    }
    // Apple Event lists count from 1.
    (1..=count)
        .filter_map(|i| list.descriptorAtIndex(i))
        .filter_map(|item| file_path(&item))
        .collect()
}

/// The event's direct object (`keyDirectObject`), if it has one.
#[allow(unsafe_code)]
fn direct_object(event: &NSAppleEventDescriptor) -> Option<Retained<NSAppleEventDescriptor>> {
    // SAFETY: `paramDescriptorForKeyword:` takes an AEKeyword (UInt32) and
    // returns a descriptor or nil, which `Option` holds.
    unsafe { msg_send![event, paramDescriptorForKeyword: DIRECT_OBJECT] }
}

/// The path of a descriptor that is, or coerces to, a `file:` URL.
fn file_path(item: &NSAppleEventDescriptor) -> Option<PathBuf> {
    let url = item.fileURLValue()?;
    if !url.isFileURL() {
        return None;
    }
    url.to_file_path()
}
