/* stackbuild-init: PID 1 of a sandbox.
 *
 * stackbuild's cloned child sets the sandbox up (namespaces, mounts, the
 * seccomp filter, no_new_privs) and then execs this program, so that PID 1
 * holds nothing of stackbuild: not its memory, not its environment or
 * arguments (this runs with an empty environment and argv {"stackbuild-init"}),
 * not its open files. It is linked statically (the sandbox's root is the image's,
 * with the image's libc or none) and embedded in stackbuild, which execs it
 * from a sealed memfd: nothing on the host's disk is reachable through
 * /proc/1/exe.
 *
 * At exec it has three files, and keeps none of them once the command runs:
 *   0  the command, in sandbox/init_spec.hpp's format (read to its end)
 *   1  where the command's output goes (its stdout and stderr)
 *   2  the report pipe: 8 bytes {op, errno} when the command could not start
 * It forks the command (stdin /dev/null, a new session, umask 022, the user
 * and groups asked for), waits until the exec succeeded or failed, then
 * reaps every process until the command exits, and exits with its status
 * (128 + signal when killed). When PID 1 exits, the kernel kills the rest of
 * the PID namespace.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <signal.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

/* Must match linux_sandbox.cpp. */
enum { kOpExec = -1, kOpIdentity = -2, kOpFork = -3, kOpSpec = -5 };

struct report {
  int32_t op, err;
};

static void send_report(int fd, int op, int err) {
  struct report r = {op, err};
  (void)!write(fd, &r, sizeof r);
}

static char* spec_buf;
static size_t spec_len, spec_at;

/* The next NUL-terminated field of the spec, or NULL past its end. */
static char* field(void) {
  if (spec_at >= spec_len) return NULL;
  char* s = spec_buf + spec_at;
  char* end = memchr(s, '\0', spec_len - spec_at);
  if (!end) return NULL;
  spec_at = (size_t)(end - spec_buf) + 1;
  return s;
}

static int number(unsigned long* out) {
  char* s = field();
  if (!s || !*s) return -1;
  char* end;
  errno = 0;
  *out = strtoul(s, &end, 10);
  return errno || *end ? -1 : 0;
}

/* A list: its count, then that many fields; NULL-terminated. */
static char** list(void) {
  unsigned long n;
  if (number(&n) != 0 || n > spec_len) return NULL;
  char** v = calloc(n + 1, sizeof *v);
  if (!v) return NULL;
  for (unsigned long i = 0; i < n; ++i)
    if (!(v[i] = field())) return NULL;
  return v;
}

static int read_spec(void) {
  size_t cap = 1 << 16;
  spec_buf = malloc(cap);
  if (!spec_buf) return -1;
  for (;;) {
    if (spec_len == cap) {
      char* b = realloc(spec_buf, cap *= 2);
      if (!b) return -1;
      spec_buf = b;
    }
    ssize_t n = read(0, spec_buf + spec_len, cap - spec_len);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return -1;
    if (n == 0) break;
    spec_len += (size_t)n;
  }
  close(0);
  return 0;
}

int main(void) {
  if (read_spec() != 0) {
    send_report(2, kOpSpec, errno ? errno : ENOMEM);
    return 127;
  }
  char* magic = field();
  unsigned long uid, gid, drop_groups;
  if (!magic || strcmp(magic, "stackbuild-init-1") != 0 || number(&uid) || number(&gid) ||
      number(&drop_groups)) {
    send_report(2, kOpSpec, EINVAL);
    return 127;
  }
  char** argv = list();
  char** envp = list();
  char** exe = list();
  if (!argv || !argv[0] || !envp || !exe) {
    send_report(2, kOpSpec, EINVAL);
    return 127;
  }

  int started[2];
  if (pipe2(started, O_CLOEXEC) != 0) {
    send_report(2, kOpFork, errno);
    return 127;
  }
  int null_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
  pid_t cmd = fork();
  if (cmd < 0) {
    send_report(2, kOpFork, errno);
    return 127;
  }
  if (cmd == 0) {
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    setsid();
    if (null_fd >= 0) dup2(null_fd, 0);
    dup2(1, 2);
    umask(022); /* what a step's new files get does not depend on the caller's umask */
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, NULL);
    if (drop_groups && setgroups(0, NULL) != 0) {
      send_report(started[1], kOpIdentity, errno);
      _exit(127);
    }
    if (setgid((gid_t)gid) != 0 || setuid((uid_t)uid) != 0) {
      send_report(started[1], kOpIdentity, errno);
      _exit(127);
    }
    int err = ENOENT;
    for (char** e = exe; *e; ++e) {
      execve(*e, argv, envp);
      if (errno != ENOENT && errno != ENOTDIR) err = errno;
    }
    send_report(started[1], kOpExec, err);
    _exit(127);
  }
  /* The command has its copies: PID 1 keeps no file of the sandbox's. */
  close(started[1]);
  if (null_fd >= 0) close(null_fd);
  close(1);
  struct report r;
  ssize_t n;
  while ((n = read(started[0], &r, sizeof r)) < 0 && errno == EINTR) {
  }
  close(started[0]);
  int failed = n == (ssize_t)sizeof r;
  if (failed) send_report(2, r.op, r.err);
  close(2);

  for (;;) {
    int status = 0;
    pid_t w = waitpid(-1, &status, 0);
    if (w < 0 && errno == EINTR) continue;
    if (w < 0) return 127;
    if (w != cmd) continue;
    if (failed) return 127;
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  }
}
