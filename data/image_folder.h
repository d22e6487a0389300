// data/image_folder.h: the ImageNet folder layout (SPLIT/<class>/*.JPEG), scanned as torchvision's ImageFolder does.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace rn50::data {

struct ImageFolder {
  std::vector<std::string> classes;  // class folder names, sorted as torchvision sorts them (byte order)
  std::vector<std::string> files;    // full paths; classes in order, files sorted within a class
  std::vector<int64_t> labels;       // class index of each file
};

// Scans one split folder (e.g. ROOT/train). Files ending in .jpg/.jpeg (any case) count as images.
// Throws rn50::DataError, naming the path, when the folder is missing, has no class folders, a class
// folder holds no images, or no images were found at all.
ImageFolder scan_image_folder(const std::string& split_dir);

}  // namespace rn50::data
