// offload_file.h: a scratch file for offloaded state, opened with O_DIRECT where the filesystem
// allows it (reported by direct()), and unlinked as soon as it is open: its space lives only as
// long as the descriptor, so it is returned on normal exit, on error and on SIGKILL alike, and no
// partial state survives for a later run to read.
#pragma once

#include <cstdint>
#include <string>

namespace zeropp {
namespace offload {

class OffloadFile {
 public:
  // Creates `dir`/`name` (truncating). Throws IoError naming the directory and the reason when the
  // directory is missing or not writable, before anything is written.
  OffloadFile(const std::string& dir, const std::string& name);
  ~OffloadFile();
  OffloadFile(const OffloadFile&) = delete;
  OffloadFile& operator=(const OffloadFile&) = delete;

  // Allocates `bytes` on disk now (fallocate), so a full device fails here, before training, and
  // writes do not pay for extent allocation. Throws IoError naming the file and the size.
  void Reserve(int64_t bytes);

  int fd() const { return fd_; }
  const std::string& path() const { return path_; }
  bool direct() const { return direct_; }

  // Refuses a directory that cannot hold offload files: missing, not a directory, or not writable.
  static void CheckDirectory(const std::string& dir);

 private:
  std::string path_;
  int fd_ = -1;
  bool direct_ = false;
};

}  // namespace offload
}  // namespace zeropp
