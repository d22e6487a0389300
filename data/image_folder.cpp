// data/image_folder.cpp: scan_image_folder, the class and file order of torchvision's ImageFolder.
#include "data/image_folder.h"

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <string>
#include <system_error>
#include <utility>

#include <sys/stat.h>

#include <map>
#include <set>

#include "core/errors.h"
#include "core/utf8.h"

namespace rn50::data {
namespace {

namespace fs = std::filesystem;

// The code point Python gives the character at text[at] (a byte that starts no UTF-8 sequence: U+DC00 plus the byte,
// as os.fsdecode's surrogateescape does), and its length in bytes.
std::pair<uint32_t, size_t> python_code_point(const std::string& text, size_t at) {
  const size_t n = utf8::sequence_length(text, at);
  const auto byte = [&](size_t i) { return static_cast<uint32_t>(static_cast<unsigned char>(text[at + i])); };
  if (n == 0) return {0xDC00 + byte(0), 1};
  if (n == 1) return {byte(0), 1};
  uint32_t cp = byte(0) & (0xFFu >> (n + 1));
  for (size_t i = 1; i < n; ++i) cp = (cp << 6) | (byte(i) & 0x3F);
  return {cp, n};
}

// Whether Python's sorted() puts `a` before `b`: by code point, which for well-formed UTF-8 is byte order, and which
// puts a byte that is not UTF-8 (U+DCxx) between U+D7FF and U+E000.
bool python_less(const std::string& a, const std::string& b) {
  size_t i = 0, j = 0;
  while (i < a.size() && j < b.size()) {
    const auto [x, m] = python_code_point(a, i);
    const auto [y, n] = python_code_point(b, j);
    if (x != y) return x < y;
    i += m;
    j += n;
  }
  return i == a.size() && j < b.size();
}

// A folder's device and inode: what a link cycle comes back to ({0, 0} when stat fails: no folder's).
std::pair<uint64_t, uint64_t> identity_of(const fs::path& dir) {
  struct stat st {};
  if (::stat(dir.c_str(), &st) != 0) return {0, 0};
  return {static_cast<uint64_t>(st.st_dev), static_cast<uint64_t>(st.st_ino)};
}

bool has_image_extension(const std::string& name) {
  std::string lower = name;
  std::transform(lower.begin(), lower.end(), lower.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  auto ends_with = [&](const std::string& suffix) {
    return lower.size() >= suffix.size() && lower.compare(lower.size() - suffix.size(), suffix.size(), suffix) == 0;
  };
  return ends_with(".jpg") || ends_with(".jpeg");
}

// Appends the images under one class folder in the order of torchvision's sorted(os.walk(..., followlinks=True)):
// folders sorted by their path string, files sorted by name within each folder, as Python sorts str. Symlinked
// sub-folders are followed, as torchvision follows them (they were once dropped without a word), each folder once: a
// link back to a folder already walked is skipped, so a cycle cannot make the scan endless. An entry whose type cannot
// be read (a dangling or self-looping link) is listed like a file when its name is an image's: loading it fails, and
// it counts as a bad sample, not a fatal error.
void collect_class_images(const fs::path& class_dir, std::vector<std::string>& files) {
  std::vector<std::pair<std::string, std::vector<std::string>>> folders;  // (folder path, image names)
  std::set<std::pair<uint64_t, uint64_t>> walked{identity_of(class_dir)};
  std::vector<fs::path> pending{class_dir};
  while (!pending.empty()) {
    const fs::path dir = pending.back();
    pending.pop_back();
    std::vector<std::string> names;
    for (const fs::directory_entry& entry : fs::directory_iterator(dir)) {
      const std::string name = entry.path().filename().string();
      std::error_code ec;
      const bool is_dir = entry.is_directory(ec);
      if (!ec && is_dir) {
        // One that cannot be stat'ed is walked, to fail with its reason, not skipped as one seen already.
        const auto id = identity_of(entry.path());
        if (id == std::pair<uint64_t, uint64_t>{0, 0} || walked.insert(id).second) pending.push_back(entry.path());
      } else if (has_image_extension(name)) {
        names.push_back(name);
      }
    }
    std::sort(names.begin(), names.end(), python_less);
    folders.emplace_back(dir.string(), std::move(names));
  }
  std::sort(folders.begin(), folders.end(), [](const auto& a, const auto& b) { return python_less(a.first, b.first); });
  for (const auto& [dir, names] : folders) {
    for (const std::string& name : names) files.push_back((fs::path(dir) / name).string());
  }
}

// A class folder that is the split folder itself or holds it (a link to "." or ".."), or the same folder as another
// class: its images would be trained on under a second label (a link to the data root once made val/ training data).
void check_class_folders(const fs::path& root, const std::vector<std::string>& classes) {
  std::error_code ec;
  const fs::path split = fs::canonical(root, ec);
  if (ec) return;
  std::map<std::pair<uint64_t, uint64_t>, std::string> seen;  // a lookup each: make-sample allows 100,000 classes
  for (const std::string& name : classes) {
    const fs::path real = fs::canonical(root / name, ec);
    if (ec) continue;
    const auto [mismatch, unused] = std::mismatch(real.begin(), real.end(), split.begin(), split.end());
    if (mismatch == real.end()) {
      throw DataError("class folder " + utf8::printable((root / name).string()) + " is " +
                      utf8::printable(real.string()) +
                      ", which holds the split folder itself: its images would count under a class of their own");
    }
    const auto id = identity_of(real);
    if (id == std::pair<uint64_t, uint64_t>{0, 0}) continue;
    const auto [other, added] = seen.emplace(id, name);
    if (!added) {
      throw DataError("class folders " + utf8::printable(other->second) + " and " + utf8::printable(name) + " of " +
                      utf8::printable(root.string()) + " are one folder (" + utf8::printable(real.string()) +
                      "): its images would count under two classes");
    }
  }
}

}  // namespace

std::string class_difference(const std::vector<std::string>& a, const std::vector<std::string>& b,
                             const std::string& a_name, const std::string& b_name) {
  const std::set<std::string> in_a(a.begin(), a.end()), in_b(b.begin(), b.end());
  auto listed = [](const std::vector<std::string>& names) {
    std::string out;
    for (size_t i = 0; i < names.size() && i < 5; ++i) out += (i ? ", '" : "'") + utf8::printable(names[i], 64) + "'";
    if (names.size() > 5) out += " and " + std::to_string(names.size() - 5) + " more";
    return out;
  };
  std::vector<std::string> only_a, only_b;
  for (const auto& x : a)
    if (!in_b.count(x)) only_a.push_back(x);
  for (const auto& x : b)
    if (!in_a.count(x)) only_b.push_back(x);
  std::string out;
  if (!only_a.empty()) out += b_name + " lacks " + listed(only_a);
  if (!only_b.empty())
    out += (out.empty() ? "" : "; ") + b_name + " has " + listed(only_b) + ", which " + a_name + " lacks";
  if (out.empty()) out = "the same names in another order, or one name twice";
  return out + " (" + std::to_string(a.size()) + " in " + a_name + ", " + std::to_string(b.size()) + " in " + b_name +
         ")";
}

ImageFolder scan_image_folder(const std::string& split_dir) {
  const fs::path root(split_dir);
  std::error_code ec;
  if (!fs::exists(root, ec)) {
    const fs::path parent = root.parent_path();
    if (!parent.empty() && fs::exists(parent, ec) && !fs::is_directory(parent, ec))
      throw DataError("data_root " + parent.string() + " is a file, not a folder");
    throw DataError("dataset folder not found: " + split_dir);
  }
  if (!fs::is_directory(root, ec)) throw DataError("dataset path is not a folder: " + split_dir);

  ImageFolder folder;
  try {
    for (const fs::directory_entry& entry : fs::directory_iterator(root)) {
      std::error_code entry_ec;  // a link whose target cannot be read is no class folder
      if (entry.is_directory(entry_ec) && !entry_ec) folder.classes.push_back(entry.path().filename().string());
    }
    if (folder.classes.empty()) throw DataError("no class folders in " + split_dir);
    std::sort(folder.classes.begin(), folder.classes.end(), python_less);
    check_class_folders(root, folder.classes);

    for (size_t label = 0; label < folder.classes.size(); ++label) {
      const fs::path class_dir = root / folder.classes[label];
      const size_t before = folder.files.size();
      collect_class_images(class_dir, folder.files);
      if (folder.files.size() == before) throw DataError("class folder has no images: " + class_dir.string());
      folder.labels.resize(folder.files.size(), static_cast<int64_t>(label));
    }
  } catch (const fs::filesystem_error& e) {
    const std::string where = e.path1().empty() ? split_dir : e.path1().string();
    throw DataError("cannot read dataset folder " + where + ": " + e.code().message());
  }
  if (folder.files.empty()) throw DataError("no images found in " + split_dir);
  return folder;
}

}  // namespace rn50::data
