// data/image_folder.h: the ImageNet folder layout (SPLIT/<class>/*.JPEG), scanned as torchvision's ImageFolder does.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace rn50::data {

struct ImageFolder {
  std::vector<std::string> classes;  // class folder names, sorted as torchvision sorts them (Python's str order)
  std::vector<std::string> files;    // full paths; classes in order, files sorted within a class
  std::vector<int64_t> labels;       // class index of each file
};

// Scans one split folder (e.g. ROOT/train). Files ending in .jpg/.jpeg (any case) count as images.
// Throws rn50::DataError, naming the path, when the folder is missing, has no class folders, a class
// folder holds no images or is the split folder or another class folder over a link, or no images were found at all.
ImageFolder scan_image_folder(const std::string& split_dir);

// What differs between two class lists, for a one-line error: the names one lacks (at most five of each, then a
// count), and the list sizes. "train", "val" name the lists.
std::string class_difference(const std::vector<std::string>& a, const std::vector<std::string>& b,
                             const std::string& a_name, const std::string& b_name);

}  // namespace rn50::data
