// core/files.cpp: RegularFile, read_whole, LineReader and write_atomically over POSIX calls.
#include "core/files.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <system_error>

#include "core/stop.h"

namespace rn50::files {
namespace {

[[noreturn]] void fail(ReadError::Kind kind, const std::string& path, const std::string& reason, uint64_t size = 0) {
  throw ReadError(kind, "cannot read " + path + ": " + reason, size);
}

// What a file that is not regular is, for a message.
std::string kind_of(mode_t mode) {
  if (S_ISLNK(mode)) return "a symbolic link";
  if (S_ISDIR(mode)) return "a folder";
  if (S_ISFIFO(mode)) return "a FIFO";
  if (S_ISCHR(mode) || S_ISBLK(mode)) return "a device";
  if (S_ISSOCK(mode)) return "a socket";
  return "a special file";
}

void check(const struct stat& status, const std::string& path, uint64_t max_bytes) {
  if (!S_ISREG(status.st_mode)) fail(ReadError::Kind::kNotRegular, path, "not a regular file");
  const uint64_t size = static_cast<uint64_t>(status.st_size);
  if (size > max_bytes) {
    fail(ReadError::Kind::kTooLarge, path,
         std::to_string(size) + " bytes, above the limit of " + std::to_string(max_bytes), size);
  }
}

}  // namespace

std::string errno_text(int err) { return std::error_code(err, std::generic_category()).message(); }

bool same_file(const std::string& a, const std::string& b) {
  struct stat sa {
  }, sb{};
  return ::stat(a.c_str(), &sa) == 0 && ::stat(b.c_str(), &sb) == 0 && sa.st_dev == sb.st_dev && sa.st_ino == sb.st_ino;
}

RegularFile::RegularFile(const std::string& path, uint64_t max_bytes) : path_(path) {
  struct stat status {};
  if (::stat(path.c_str(), &status) != 0) fail(ReadError::Kind::kCannotOpen, path, errno_text(errno));
  check(status, path, max_bytes);
  const int fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) fail(ReadError::Kind::kCannotOpen, path, errno_text(errno));
  try {
    if (::fstat(fd, &status) != 0) fail(ReadError::Kind::kFailed, path, errno_text(errno));
    check(status, path, max_bytes);
  } catch (...) {
    ::close(fd);
    throw;
  }
  fd_ = fd;
  size_ = static_cast<uint64_t>(status.st_size);
}

RegularFile::~RegularFile() { ::close(fd_); }

void RegularFile::read_at(void* out, size_t count, uint64_t offset) const {
  auto* bytes = static_cast<uint8_t*>(out);
  size_t done = 0;
  while (done < count) {
    const ssize_t got = ::pread(fd_, bytes + done, count - done, static_cast<off_t>(offset + done));
    if (got < 0 && errno == EINTR) continue;
    if (got < 0) fail(ReadError::Kind::kFailed, path_, errno_text(errno));
    if (got == 0) fail(ReadError::Kind::kShrank, path_, "the file shrank while being read");
    done += static_cast<size_t>(got);
  }
}

void read_whole(const std::string& path, uint64_t max_bytes, std::vector<uint8_t>& bytes) {
  const RegularFile file(path, max_bytes);
  bytes.resize(static_cast<size_t>(file.size()));
  file.read_at(bytes.data(), bytes.size(), 0);
}

LineReader::LineReader(const std::string& path, uint64_t max_bytes, size_t max_line)
    : file_(path, max_bytes), max_line_(max_line), buffer_(64 << 10) {}

bool LineReader::fill() {
  if (offset_ >= file_.size()) return false;
  const size_t count = static_cast<size_t>(std::min<uint64_t>(buffer_.size(), file_.size() - offset_));
  file_.read_at(buffer_.data(), count, offset_);
  offset_ += count;
  begin_ = 0;
  end_ = count;
  return true;
}

bool LineReader::next(std::string& line) {
  line.clear();
  bool started = false, too_long = false;
  for (;;) {
    if (begin_ == end_ && !fill()) break;
    started = true;
    const char* from = buffer_.data() + begin_;
    const auto* newline = static_cast<const char*>(std::memchr(from, '\n', end_ - begin_));
    const size_t take = newline ? static_cast<size_t>(newline - from) : end_ - begin_;
    if (!too_long && line.size() + take > max_line_) {
      too_long = true;
      line.clear();
      line.shrink_to_fit();  // what was held of it goes too
    }
    if (!too_long) line.append(from, take);
    begin_ += take;
    if (newline) {
      ++begin_;
      if (!too_long) return true;
      ++long_lines_;
      too_long = false;
      started = false;
      continue;
    }
  }
  if (too_long) ++long_lines_;
  return started && !too_long;
}

std::string temporary_path(const std::string& path) { return path + ".tmp"; }

void write_atomically(const std::string& path, const void* data, size_t size) {
  write_atomically(path, data, size, temporary_path(path));
}

void write_atomically(const std::string& path, const void* data, size_t size, const std::string& tmp) {
  // A second stop signal during the write removes the temporary before the process exits (core/stop.h).
  stop::set_pending_temporary(tmp);
  struct Clear {
    ~Clear() { stop::set_pending_temporary(""); }
  } clear_on_exit;
  auto fail = [&](const std::string& what, int err) {
    ::unlink(tmp.c_str());  // never leave a partial file behind
    throw std::runtime_error(what + " " + tmp + ": " + errno_text(err));
  };
  // Renaming over a device, FIFO, link or folder would replace it (as root, /dev/null with a page).
  struct stat target {};
  if (::lstat(path.c_str(), &target) == 0 && !S_ISREG(target.st_mode)) {
    throw std::runtime_error("not writing " + path + ": it is " + kind_of(target.st_mode) +
                             ", not a regular file, and would be replaced");
  }
  // A leftover temporary (a write that never finished) goes; a link planted there is removed, never followed.
  ::unlink(tmp.c_str());
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
  if (fd < 0) fail("cannot create", errno);
  const auto* bytes = static_cast<const uint8_t*>(data);
  size_t done = 0;
  while (done < size) {
    const ssize_t n = ::write(fd, bytes + done, size - done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      const int err = errno;
      ::close(fd);
      fail("cannot write", err);
    }
    done += static_cast<size_t>(n);
  }
  // The data must be on disk before the rename makes it the file.
  const int synced = ::fsync(fd) == 0 ? 0 : errno;
  const int closed = ::close(fd) == 0 ? 0 : errno;
  if (synced || closed) fail("cannot flush", synced ? synced : closed);
  if (std::rename(tmp.c_str(), path.c_str()) != 0) fail("cannot rename to " + path + ":", errno);
  // And the rename itself, which lives in the folder.
  const auto slash = path.find_last_of('/');
  const std::string folder = slash == std::string::npos ? "." : (slash == 0 ? "/" : path.substr(0, slash));
  const int dir = ::open(folder.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dir >= 0) {
    ::fsync(dir);
    ::close(dir);
  }
}

}  // namespace rn50::files
