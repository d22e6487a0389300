// core/files.h: files read without trusting them (regular files only, opened without blocking, read to the byte)
// and files written atomically (a temporary flushed to disk and renamed over the target).
#pragma once

#include <cstddef>
#include <cstdint>
#include <limits>
#include <stdexcept>
#include <string>
#include <vector>

namespace rn50::files {

// A file that cannot be read: the message is "cannot read PATH: reason"; `kind` lets a caller word its own.
struct ReadError : std::runtime_error {
  enum class Kind { kCannotOpen, kNotRegular, kTooLarge, kShrank, kFailed };
  ReadError(Kind kind, const std::string& message, uint64_t size)
      : std::runtime_error(message), kind(kind), size(size) {}
  Kind kind;
  uint64_t size;  // the file's size, for kTooLarge
};

// An open regular file of at most max_bytes. Checked before it is opened (a FIFO would block the open, a device never
// end) and again on the open file; O_NONBLOCK keeps a FIFO swapped in between from blocking the open.
class RegularFile {
 public:
  RegularFile(const std::string& path, uint64_t max_bytes = std::numeric_limits<uint64_t>::max());
  ~RegularFile();
  RegularFile(const RegularFile&) = delete;
  RegularFile& operator=(const RegularFile&) = delete;

  uint64_t size() const { return size_; }
  // Exactly `count` bytes from `offset`; throws ReadError (kShrank where the file ends first).
  void read_at(void* out, size_t count, uint64_t offset) const;

 private:
  std::string path_;
  int fd_ = -1;
  uint64_t size_ = 0;
};

// The whole of a regular file of at most max_bytes into `bytes`, reusing its capacity.
void read_whole(const std::string& path, uint64_t max_bytes, std::vector<uint8_t>& bytes);

// A regular file of at most max_bytes read line by line in bounded memory: a line of at most max_line bytes comes out
// whole, without its '\n'; a longer one is skipped as it is read, never held, and counted. A last line without a '\n'
// is a line; an empty file has none. The file is read up to the size it had when it was opened (a log being appended
// to ends where it was).
class LineReader {
 public:
  LineReader(const std::string& path, uint64_t max_bytes, size_t max_line);
  LineReader(const LineReader&) = delete;
  LineReader& operator=(const LineReader&) = delete;

  // The next line that fits into `line`; false at the end. Throws ReadError.
  bool next(std::string& line);
  int64_t long_lines() const { return long_lines_; }  // lines over max_line, skipped

 private:
  bool fill();  // more of the file into the buffer; false at its end

  RegularFile file_;
  size_t max_line_;
  uint64_t offset_ = 0;  // of the file, read so far
  std::vector<char> buffer_;
  size_t begin_ = 0, end_ = 0;  // the buffer's unread bytes
  int64_t long_lines_ = 0;
};

// Where write_atomically stages `path`: a leftover there is a write that never finished.
std::string temporary_path(const std::string& path);

// Writes temporary_path(path), flushes it to disk, renames it over `path` and flushes the folder; on failure
// removes the temporary and throws std::runtime_error, `path` untouched.
void write_atomically(const std::string& path, const void* data, size_t size);
// The same through a temporary named `staging` (in path's folder): for a file that several processes may write at
// once, each with a staging name of its own, so that one's partial file is never renamed by another.
void write_atomically(const std::string& path, const void* data, size_t size, const std::string& staging);
inline void write_atomically(const std::string& path, const std::vector<uint8_t>& bytes) {
  write_atomically(path, bytes.data(), bytes.size());
}

// Whether two paths name one existing file (through links, "..", or another spelling): an output that is also an
// input would be destroyed by the write. False where either does not exist.
bool same_file(const std::string& a, const std::string& b);

// errno's text, thread-safe (unlike strerror).
std::string errno_text(int err);

}  // namespace rn50::files
