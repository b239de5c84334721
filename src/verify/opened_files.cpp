#include "verify/opened_files.hpp"

#include <fcntl.h>
#include <sys/fanotify.h>
#include <sys/statfs.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <map>
#include <unordered_set>

#include "util/error.hpp"
#include "util/file.hpp"

namespace sb::verify {

namespace {

// A file's identity in fanotify's and name_to_handle_at's terms: the handle
// type and bytes (the filesystem is checked apart, by its fsid).
std::string handle_key(int type, const unsigned char* bytes, size_t size) {
  std::string k(reinterpret_cast<const char*>(&type), sizeof type);
  k.append(reinterpret_cast<const char*>(bytes), size);
  return k;
}

}  // namespace

struct OpenedFiles::Watch {
  fs::path root;
  UniqueFd fan;
  int fsid[2] = {0, 0};
  std::vector<std::string> order;  // handle keys, first open first
  std::unordered_set<std::string> seen;
  bool lost = false;
  bool finished = false;

  // Reads what the queue holds; false when it is empty.
  bool drain() {
    alignas(fanotify_event_metadata) static thread_local char buf[64 << 10];
    ssize_t len = ::read(fan.get(), buf, sizeof buf);
    if (len < 0) {
      if (errno == EAGAIN) return false;
      if (errno == EINTR) return true;
      throw_errno("reading fanotify events");
    }
    auto* m = reinterpret_cast<fanotify_event_metadata*>(buf);
    for (; FAN_EVENT_OK(m, len); m = FAN_EVENT_NEXT(m, len)) {
      if (m->vers != FANOTIFY_METADATA_VERSION) throw Error("fanotify: an event of an unknown version");
      if (m->mask & FAN_Q_OVERFLOW) lost = true;
      const char* p = reinterpret_cast<const char*>(m) + m->metadata_len;
      const char* end = reinterpret_cast<const char*>(m) + m->event_len;
      while (p + sizeof(fanotify_event_info_header) <= end) {
        const auto* h = reinterpret_cast<const fanotify_event_info_header*>(p);
        if (h->len < sizeof *h || p + h->len > end) break;
        if (h->info_type == FAN_EVENT_INFO_TYPE_FID && h->len >= sizeof(fanotify_event_info_fid) + sizeof(file_handle)) {
          const auto* fid = reinterpret_cast<const fanotify_event_info_fid*>(p);
          const auto* fh = reinterpret_cast<const file_handle*>(fid->handle);
          const size_t room = h->len - sizeof(fanotify_event_info_fid) - sizeof(file_handle);
          if (fid->fsid.val[0] == fsid[0] && fid->fsid.val[1] == fsid[1] && fh->handle_bytes <= room) {
            std::string k = handle_key(fh->handle_type, fh->f_handle, fh->handle_bytes);
            if (seen.insert(k).second) order.push_back(std::move(k));
          }
        }
        p += h->len;
      }
    }
    return true;
  }
};

// No thread reads the events while the tests run: the sandbox starts its
// processes with clone(), which, unlike fork(), takes no care of locks
// another thread holds (a reader in malloc left a sandbox child waiting on
// malloc's lock forever, seen in CI). The kernel keeps them, in a queue
// without a limit (FAN_UNLIMITED_QUEUE), until finish() reads them.
OpenedFiles::OpenedFiles(fs::path root) : watch_(std::make_unique<Watch>()) {
  Watch& w = *watch_;
  w.root = std::move(root);
  int fan = ::fanotify_init(FAN_CLASS_NOTIF | FAN_REPORT_FID | FAN_CLOEXEC | FAN_NONBLOCK | FAN_UNLIMITED_QUEUE,
                            O_RDONLY | O_CLOEXEC);
  if (fan < 0) {
    int err = errno;
    if (err == EPERM)
      throw Error("recording the files tests open needs fanotify, which needs root (CAP_SYS_ADMIN); run as root");
    throw_errno("fanotify_init (recording the files tests open; Linux 5.1 or later)", err);
  }
  w.fan.reset(fan);
  if (::fanotify_mark(fan, FAN_MARK_ADD | FAN_MARK_FILESYSTEM, FAN_OPEN | FAN_OPEN_EXEC, AT_FDCWD,
                      w.root.c_str()) != 0)
    throw_errno("fanotify_mark on the filesystem of " + w.root.string());
  struct statfs st {};
  if (::statfs(w.root.c_str(), &st) != 0) throw_errno("statfs " + w.root.string());
  std::memcpy(w.fsid, &st.f_fsid, sizeof w.fsid);
}

OpenedFiles::~OpenedFiles() = default;

std::vector<std::string> OpenedFiles::finish() {
  Watch& w = *watch_;
  if (w.finished) throw Error("internal: OpenedFiles::finish called twice");
  w.finished = true;
  while (w.drain()) {
  }
  w.fan.reset();

  // The root's regular files, by handle: those seen get their path (the
  // first in byte order where a file has several names).
  std::map<std::string, std::string> path_of;
  alignas(file_handle) unsigned char buf[sizeof(file_handle) + MAX_HANDLE_SZ];
  auto* fh = reinterpret_cast<file_handle*>(buf);
  std::error_code ec;
  for (fs::recursive_directory_iterator it(w.root, fs::directory_options::skip_permission_denied, ec), end;
       !ec && it != end; it.increment(ec)) {
    if (!it->is_regular_file(ec) || it->is_symlink(ec)) continue;
    fh->handle_bytes = MAX_HANDLE_SZ;
    int mount_id = 0;
    if (::name_to_handle_at(AT_FDCWD, it->path().c_str(), fh, &mount_id, 0) != 0) continue;
    std::string k = handle_key(fh->handle_type, fh->f_handle, fh->handle_bytes);
    if (!w.seen.count(k)) continue;
    std::string rel = it->path().lexically_relative(w.root).string();
    auto [at, added] = path_of.emplace(k, rel);
    if (!added && rel < at->second) at->second = rel;
  }
  if (ec) throw Error("reading " + w.root.string() + ": " + ec.message());
  std::vector<std::string> out;
  for (const auto& k : w.order)
    if (auto it = path_of.find(k); it != path_of.end()) out.push_back(it->second);
  return out;
}

bool OpenedFiles::lost_events() const { return watch_->lost; }

}  // namespace sb::verify
