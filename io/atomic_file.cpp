#include "io/atomic_file.h"

#include <algorithm>
#include <cerrno>
#include <csignal>
#include <cstring>
#include <filesystem>
#include <mutex>
#include <string_view>
#include <streambuf>
#include <vector>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/error.h"
#include "io/fault_hooks.h"

namespace mixlab {

namespace {

std::string errno_text(int error) { return std::strerror(error); }

// A buffered ostream sink over a raw file descriptor, so that the same descriptor can be
// fsync'ed afterwards (std::ofstream gives no access to its descriptor). The first write error
// is remembered and makes the stream fail.
class FdStreambuf : public std::streambuf {
 public:
  // `enospc_limit` >= 0: a test fault (train/fault_hooks.h), the disk is "full" after so many.
  FdStreambuf(int fd, int64_t enospc_limit) : fd_(fd), buffer_(1 << 16), room_(enospc_limit) {
    setp(buffer_.data(), buffer_.data() + buffer_.size());
  }
  int error() const { return error_; }

 protected:
  int_type overflow(int_type c) override {
    if (!flush_buffer()) return traits_type::eof();
    if (!traits_type::eq_int_type(c, traits_type::eof())) {
      *pptr() = traits_type::to_char_type(c);
      pbump(1);
    }
    return traits_type::not_eof(c);
  }

  std::streamsize xsputn(const char* data, std::streamsize count) override {
    // Large writes bypass the buffer.
    if (count >= static_cast<std::streamsize>(buffer_.size())) {
      if (!flush_buffer() || !write_all(data, static_cast<size_t>(count))) return 0;
      return count;
    }
    return std::streambuf::xsputn(data, count);
  }

  int sync() override { return flush_buffer() ? 0 : -1; }

 private:
  bool flush_buffer() {
    const size_t pending = static_cast<size_t>(pptr() - pbase());
    const bool ok = write_all(pbase(), pending);
    setp(buffer_.data(), buffer_.data() + buffer_.size());
    return ok;
  }

  bool write_all(const char* data, size_t count) {
    if (error_ != 0) return false;
    while (count > 0) {
      size_t allowed = count;
      if (room_ >= 0) {
        if (room_ == 0) {
          error_ = ENOSPC;
          return false;
        }
        allowed = std::min<size_t>(count, static_cast<size_t>(room_));
      }
      const ssize_t written = ::write(fd_, data, allowed);
      if (written < 0) {
        if (errno == EINTR) continue;
        error_ = errno;
        return false;
      }
      data += written;
      count -= static_cast<size_t>(written);
      if (room_ >= 0) room_ -= written;
    }
    return true;
  }

  int fd_;
  std::vector<char> buffer_;
  int64_t room_;
  int error_ = 0;
};

// Owns the temporary file until it is renamed: closes and removes it on every early exit.
class TempFile {
 public:
  explicit TempFile(std::string path) : path_(std::move(path)) {}
  ~TempFile() {
    if (fd_ >= 0) ::close(fd_);
    if (!committed_) ::unlink(path_.c_str());
  }
  TempFile(const TempFile&) = delete;
  TempFile& operator=(const TempFile&) = delete;

  const std::string& path() const { return path_; }
  int fd() const { return fd_; }
  void set_fd(int fd) { fd_ = fd; }
  // Closes the descriptor, reporting an error (close can report a delayed write failure).
  int close() {
    const int result = ::close(fd_);
    fd_ = -1;
    return result == 0 ? 0 : errno;
  }
  void commit() { committed_ = true; }

 private:
  std::string path_;
  int fd_ = -1;
  bool committed_ = false;
};

std::string parent_directory(const std::string& path) {
  const std::filesystem::path parent = std::filesystem::path(path).parent_path();
  return parent.empty() ? std::string(".") : parent.string();
}

constexpr std::string_view kTemporaryPrefix = ".mixlab-tmp.";

// The pid in a name ".mixlab-tmp.<pid>.<file>", or 0 when the name does not have that form.
pid_t temporary_file_pid(const std::string& name) {
  if (!name.starts_with(kTemporaryPrefix)) return 0;
  const size_t begin = kTemporaryPrefix.size(), dot = name.find('.', begin);
  if (dot == std::string::npos || dot + 1 >= name.size()) return 0;
  const std::string digits = name.substr(begin, dot - begin);
  if (digits.empty() || digits.size() > 9 ||
      digits.find_first_not_of("0123456789") != std::string::npos)
    return 0;
  return static_cast<pid_t>(std::stol(digits));
}

struct Observers {
  std::mutex mutex;
  int next_id = 0;
  std::vector<std::pair<int, std::function<void(const std::string&)>>> list;
};

Observers& observers() {
  static Observers o;
  return o;
}

bool process_alive(pid_t pid) { return ::kill(pid, 0) == 0 || errno == EPERM; }

}  // namespace

std::string temporary_path(const std::string& path, long pid) {
  const std::filesystem::path p(path);
  const std::string name =
      std::string(kTemporaryPrefix) + std::to_string(pid) + "." + p.filename().string();
  return (p.parent_path() / name).string();
}

bool is_temporary_name(const std::string& file_name) { return temporary_file_pid(file_name) > 0; }

int add_write_observer(std::function<void(const std::string& path)> observer) {
  Observers& o = observers();
  std::lock_guard<std::mutex> lock(o.mutex);
  o.list.emplace_back(++o.next_id, std::move(observer));
  return o.next_id;
}

void remove_write_observer(int id) {
  Observers& o = observers();
  std::lock_guard<std::mutex> lock(o.mutex);
  std::erase_if(o.list, [id](const auto& entry) { return entry.first == id; });
}

void announce_file_write(const std::string& path) {
  // A copy, so that an observer may itself write a file (a manifest) without deadlocking.
  std::vector<std::function<void(const std::string&)>> list;
  {
    Observers& o = observers();
    std::lock_guard<std::mutex> lock(o.mutex);
    for (const auto& entry : o.list) list.push_back(entry.second);
  }
  for (const auto& observer : list) observer(path);
}

int remove_stale_temporary_files(const std::string& directory) {
  int removed = 0;
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(directory, ec)) {
    const pid_t pid = temporary_file_pid(entry.path().filename().string());
    if (pid <= 0 || pid == ::getpid() || process_alive(pid)) continue;
    std::error_code ignored;
    if (entry.is_regular_file(ignored) && std::filesystem::remove(entry.path(), ignored)) ++removed;
  }
  return removed;
}

void write_file_atomically(const std::string& path,
                           const std::function<void(std::ostream&)>& writer) {
  check(!path.empty(), "write_file_atomically: empty path");
  const std::string where = "write_file_atomically('" + path + "'): ";
  remove_stale_temporary_files(parent_directory(path));
  announce_file_write(path);
  TempFile temp(temporary_path(path, ::getpid()));

  const int fd = ::open(temp.path().c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) fail(where, "cannot create '", temp.path(), "': ", errno_text(errno));
  temp.set_fd(fd);

  {
    FdStreambuf buffer(fd, fault_hooks::enospc_limit(path));
    std::ostream stream(&buffer);
    try {
      writer(stream);
    } catch (const std::exception& e) {
      fail(where, "the writer failed: ", e.what());
    } catch (...) {
      fail(where, "the writer failed with an unknown exception");
    }
    stream.flush();
    if (buffer.error() == ENOSPC)
      fail(where, "write failed: ", errno_text(ENOSPC), ": the disk is full; free space and rerun");
    if (buffer.error() != 0) fail(where, "write failed: ", errno_text(buffer.error()));
    if (!stream) fail(where, "the output stream failed");
  }

  if (::fsync(fd) != 0) fail(where, "fsync failed: ", errno_text(errno));
  if (const int error = temp.close(); error != 0) fail(where, "close failed: ", errno_text(error));
  fault_hooks::pause_before_rename(path);
  if (::rename(temp.path().c_str(), path.c_str()) != 0) {
    fail(where, "cannot rename '", temp.path(), "' over it: ", errno_text(errno));
  }
  temp.commit();

  // Make the rename durable. Some file systems cannot fsync a directory (EINVAL); the file is
  // in place then, just with the durability the file system offers.
  const std::string directory = parent_directory(path);
  const int dir_fd = ::open(directory.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dir_fd < 0) fail(where, "cannot open directory '", directory, "': ", errno_text(errno));
  const int sync_result = ::fsync(dir_fd);
  const int sync_error = errno;
  ::close(dir_fd);
  if (sync_result != 0 && sync_error != EINVAL) {
    fail(where, "fsync of directory '", directory, "' failed: ", errno_text(sync_error));
  }
}

void write_file_atomically(const std::string& path, std::span<const uint8_t> bytes) {
  write_file_atomically(path, [&](std::ostream& out) {
    out.write(reinterpret_cast<const char*>(bytes.data()),
              static_cast<std::streamsize>(bytes.size()));
  });
}

void write_file_atomically(const std::string& path, std::string_view bytes) {
  write_file_atomically(path, [&](std::ostream& out) {
    out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  });
}

}  // namespace mixlab
