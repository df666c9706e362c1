// Crash-safe file replacement for checkpoints and manifests: a reader (or a resumed run) sees
// either the complete old file or the complete new one, never a torn mix.
//
// How: the content goes to `.mixlab-tmp.<pid>.<name>` in the same directory (rename is only
// atomic within one file system; the prefix is one only mixlab makes), which is flushed and
// fsync'ed, then renamed over `path`, and the directory is fsync'ed so that the rename itself
// survives a power cut. On any failure before the rename (the writer throws, the disk is full, ...)
// the temporary file is removed, `path` is left untouched, and Error is thrown naming the path.
//
// A process killed between creating the temporary file and the rename leaves it behind; every
// write into a directory first removes the `.mixlab-tmp.<pid>.*` files there whose process is
// gone (remove_stale_temporary_files), so the next run in a folder cleans up after a killed one.
// Files of live processes (a concurrent writer) and of this process are kept, and so is every
// file of another form: a user's `notes.tmp.999999` is never touched.
//
// Observers (add_write_observer) are told of every file before it is written, atomically or by
// appending (announce_file_write): a run folder lists each file its run writes in its manifest
// first, so that no kill leaves a run's file the manifest does not name.
//
// Test hooks in the environment can make a write fail as on a full disk or pause before the
// rename (train/fault_hooks.h).
//
// Not safe for two threads of one process writing the same path at once (they would share the
// temporary name); different paths are fine.
#pragma once
#include <cstdint>
#include <functional>
#include <ostream>
#include <span>
#include <string>
#include <string_view>

namespace mixlab {

// The temporary file of a write of `path` by process `pid`: `<dir>/.mixlab-tmp.<pid>.<name>`.
std::string temporary_path(const std::string& path, long pid);

// True for a name of that form (what remove_stale_temporary_files and a run folder may sweep).
bool is_temporary_name(const std::string& file_name);

// Removes the `.mixlab-tmp.<pid>.<name>` regular files in `directory` whose pid is neither this
// process nor a live one; returns how many. Unreadable directories are skipped silently.
int remove_stale_temporary_files(const std::string& directory);

// Called with the path of every file about to be written (before its temporary file is made),
// and of every file a writer is about to open for appending (announce_file_write). An exception
// from an observer stops the write. Returns an id for remove_write_observer.
int add_write_observer(std::function<void(const std::string& path)> observer);
void remove_write_observer(int id);
// For writers that append rather than replace (metrics logs): tells the observers.
void announce_file_write(const std::string& path);

// `writer` streams the content; an exception from it aborts the write (rethrown as Error).
void write_file_atomically(const std::string& path,
                           const std::function<void(std::ostream&)>& writer);

// The whole content at once.
void write_file_atomically(const std::string& path, std::span<const uint8_t> bytes);
void write_file_atomically(const std::string& path, std::string_view bytes);

}  // namespace mixlab
