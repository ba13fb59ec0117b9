#include "offload/offload_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>

#include "offload/io_engine.h"

namespace zeropp {
namespace offload {

void OffloadFile::CheckDirectory(const std::string& dir) {
  struct stat st;
  if (stat(dir.c_str(), &st) != 0) {
    throw IoError("offload dir '" + dir + "': " + std::strerror(errno) + " (expected an existing, writable directory)");
  }
  if (!S_ISDIR(st.st_mode)) throw IoError("offload dir '" + dir + "': not a directory");
  // A probe file: access() says nothing about read-only mounts for root.
  std::string probe = dir + "/.zeropp-probe-" + std::to_string(getpid());
  int fd = open(probe.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
  if (fd < 0) throw IoError("offload dir '" + dir + "' is not writable: " + std::strerror(errno));
  close(fd);
  unlink(probe.c_str());
}

OffloadFile::OffloadFile(const std::string& dir, const std::string& name) : path_(dir + "/" + name) {
  CheckDirectory(dir);
  fd_ = open(path_.c_str(), O_RDWR | O_CREAT | O_TRUNC | O_DIRECT, 0600);
  direct_ = fd_ >= 0;
  if (fd_ < 0 && errno == EINVAL) fd_ = open(path_.c_str(), O_RDWR | O_CREAT | O_TRUNC, 0600);  // no O_DIRECT here
  if (fd_ < 0) throw IoError("cannot create offload file " + path_ + ": " + std::strerror(errno));
  // Unlinked at once: the open descriptor keeps the data, and the space is returned however the
  // process ends (normal exit, exception, SIGKILL), so no later run can find partial state.
  unlink(path_.c_str());
}

void OffloadFile::Reserve(int64_t bytes) {
  int rc = posix_fallocate(fd_, 0, bytes);
  if (rc != 0) {
    throw IoError("cannot reserve " + std::to_string(bytes) + " bytes for offload file " + path_ + ": " +
                  std::strerror(rc));
  }
}

OffloadFile::~OffloadFile() {
  if (fd_ >= 0) close(fd_);
}

}  // namespace offload
}  // namespace zeropp
