//! macOS: the open-document events of Finder (a double-click, *Open With*,
//! a file dropped on the Dock icon, `open -a Tensorscope FILE`), received
//! as the *open documents* Apple Event and queued in
//! [`super::open_files`].
//!
//! # Why an Apple Event handler, and why then
//!
//! macOS starts an app once and sends it the files to open as an Apple
//! Event (`kCoreEventClass`/`kAEOpenDocuments`, "aevt"/"odoc"), not as
//! arguments. AppKit installs a handler for it that calls the application
//! delegate's `application:openURLs:` (or `application:openFiles:`). The
//! delegate is winit's: winit 0.30 sets its own `WinitApplicationDelegate`
//! when the event loop is created, implements neither method, and panics
//! ("tried to get a delegate that was not the one Winit has registered") if
//! the delegate is replaced (<https://github.com/rust-windowing/winit/issues/4015>;
//! upstream support for opening files was declined:
//! <https://github.com/rust-windowing/winit/issues/1751>,
//! <https://github.com/rust-windowing/winit/pull/4262>). Adding a method to
//! winit's delegate class with `class_addMethod` would depend on a private
//! class name and on AppKit asking the delegate afresh for each event.
//!
//! So Tensorscope replaces AppKit's handler of that one event instead, as
//! Apple documents it: "A good place to install event handlers is in the
//! `applicationWillFinishLaunching:` method of the application delegate. At
//! that point, the Application Kit has installed its default event
//! handlers, so if you install a handler for one of the same events, it
//! will replace the Application Kit version" (*How Cocoa Applications
//! Handle Apple Events*, "Installing an Apple Event Handler":
//! <https://developer.apple.com/library/archive/documentation/Cocoa/Conceptual/ScriptableCocoaApplications/SApps_handle_AEs/SAppsHandleAEs.html>).
//! The delegate method is only the delegate's view of
//! `NSApplicationWillFinishLaunchingNotification`, which `finishLaunching`
//! posts to the default notification center as it begins
//! (<https://developer.apple.com/documentation/appkit/nsapplication/finishlaunching()>)
//! and which any object can observe without being the delegate:
//! [`install_open_documents`] adds such an observer before the event loop
//! exists, and when AppKit posts the notification the observer installs
//! the handler. The event that launched the app is handled after that and
//! before `applicationDidFinishLaunching:` ("If the application was
//! launched by the user opening a file, the delegate's
//! `application(_:openFile:)` method is called before this method",
//! <https://developer.apple.com/documentation/appkit/nsapplicationdelegate/applicationdidfinishlaunching(_:)>),
//! so the first file is caught too; later ones reach the same handler.
//! Since the handler answers the event, AppKit no longer shows its "cannot
//! open files of this type" alert. Nothing here depends on winit's
//! delegate, so winit versions that drop their delegate change nothing.
//!
//! The paths go to [`super::open_files::push`], which wakes the frame loop
//! if the explorer set a waker, or keeps them until it takes them.
//!
//! # What was not run
//!
//! This module is type-checked for `aarch64-apple-darwin` and
//! `x86_64-apple-darwin` from Linux (`scripts/check-macos`); it has never
//! been linked or run, since that needs a Mac and its SDK. The first run on
//! a Mac should try a double-click on a `.safetensors` file with the app
//! closed and with it open, *Open With*, a drop on the Dock icon, and
//! `open -a Tensorscope.app a.npy b.gguf`.
//!
//! Without the `gui` feature there is no event loop to dispatch the event,
//! so nothing is installed and AppKit is not linked.

#[cfg(feature = "gui")]
mod open_documents;

/// Starts receiving Finder's open-document events: call once, on the main
/// thread, before the event loop is created (later calls do nothing).
/// Without the `gui` feature, a no-op.
pub(super) fn install_open_documents() {
    #[cfg(feature = "gui")]
    open_documents::install();
}
