// data/image_folder.cpp: scan_image_folder, the class and file order of torchvision's ImageFolder.
#include "data/image_folder.h"

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <string>
#include <system_error>
#include <utility>

#include "core/errors.h"

namespace rn50::data {
namespace {

namespace fs = std::filesystem;

bool has_image_extension(const std::string& name) {
  std::string lower = name;
  std::transform(lower.begin(), lower.end(), lower.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  auto ends_with = [&](const std::string& suffix) {
    return lower.size() >= suffix.size() && lower.compare(lower.size() - suffix.size(), suffix.size(), suffix) == 0;
  };
  return ends_with(".jpg") || ends_with(".jpeg");
}

// Appends the images under one class folder in the order of torchvision's sorted(os.walk(...)): folders sorted
// by their path string, files sorted by name within each folder. Symlinked sub-folders are not followed, so a
// link cycle cannot make the scan endless. An entry whose type cannot be read (a dangling or self-looping link) is
// listed like a file when its name is an image's: loading it fails, and it counts as a bad sample, not a fatal error.
void collect_class_images(const fs::path& class_dir, std::vector<std::string>& files) {
  std::vector<std::pair<std::string, std::vector<std::string>>> folders;  // (folder path, image names)
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
        if (!entry.is_symlink(ec) && !ec) pending.push_back(entry.path());
      } else if (has_image_extension(name)) {
        names.push_back(name);
      }
    }
    std::sort(names.begin(), names.end());
    folders.emplace_back(dir.string(), std::move(names));
  }
  std::sort(folders.begin(), folders.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
  for (const auto& [dir, names] : folders) {
    for (const std::string& name : names) files.push_back((fs::path(dir) / name).string());
  }
}

}  // namespace

ImageFolder scan_image_folder(const std::string& split_dir) {
  const fs::path root(split_dir);
  std::error_code ec;
  if (!fs::exists(root, ec)) throw DataError("dataset folder not found: " + split_dir);
  if (!fs::is_directory(root, ec)) throw DataError("dataset path is not a folder: " + split_dir);

  ImageFolder folder;
  try {
    for (const fs::directory_entry& entry : fs::directory_iterator(root)) {
      std::error_code entry_ec;  // a link whose target cannot be read is no class folder
      if (entry.is_directory(entry_ec) && !entry_ec) folder.classes.push_back(entry.path().filename().string());
    }
    if (folder.classes.empty()) throw DataError("no class folders in " + split_dir);
    std::sort(folder.classes.begin(), folder.classes.end());  // byte order, as Python sorts str

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
