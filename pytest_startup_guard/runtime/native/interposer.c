/* The native side of the child runtime: file accesses made in C, C++ or any other native code.
 *
 * Loaded with LD_PRELOAD into every process of a fleet launched with native_accesses=True
 * (pytest_startup_guard/runtime/native/build.py builds it with the system C compiler). It wraps
 * the libc calls that open, rename, create, remove, link, truncate, chmod or lock a file and,
 * for a path under a folder the test watches, sends the controller the same "access" message
 * a Python child sends from its audit hook (runtime/protocol.py: a 4-byte big-endian length and
 * the marshal of a dict), with "native": 1. It waits for the reply, then fails the call with
 * the replied errno, or sleeps and asks again on "wait", or lets the call proceed.
 *
 * On first use in a process it says hello (pid, ppid, member, argv, "native": 1) and keeps the
 * "watch" prefixes of the reply. It never breaks the program: a plan it cannot read, a
 * controller that does not answer or a reply it cannot parse leave the process unobserved (like
 * a stale plan). The connection is guarded by a mutex (threads), a forked child says hello again
 * on a connection of its own, and the wrapper's own calls go straight to libc (no recursion).
 * It stays quiet in a setuid or setgid program.
 *
 * In a Python process the child runtime already reports the calls Python makes (its audit
 * hook): the interposer says hello only once the runtime has (STARTUP_GUARD_ANCESTRY ends with
 * this pid), and the controller drops the libc call that follows an access the hook reported
 * (runtime/native/doubles.py). What it reports there is what native code of the process does
 * (a C++ runtime loading a kernel).
 *
 * A native process also tells how it ends: "bye" with main's return value or exit()'s status,
 * and "reaped" for each child its waitpid(), wait() or wait4() reaps.
 *
 * Built-in to glibc and POSIX only: -ldl -lpthread.
 */
#undef _FORTIFY_SOURCE /* the wrappers define open() and friends themselves */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/auxv.h>
#include <sys/file.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <sys/types.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#if !defined(__BYTE_ORDER__) || __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "the marshal encoder assumes a little-endian machine"
#endif

#define PLAN_ENV "STARTUP_GUARD_PLAN"
#define MEMBER_ENV "STARTUP_GUARD_MEMBER"
#define ANCESTRY_ENV "STARTUP_GUARD_ANCESTRY"
#define MAX_PATH_TEXT 4096
#define MAX_MESSAGE (4 * MAX_PATH_TEXT + 1024)
#define MAX_REPLY 65536
#define MAX_PREFIXES 64
#define MAX_REFS 256
#define MAX_WAIT 0.05 /* seconds: the longest one "wait" answer makes a call sleep */
#define HIGH_FD 800   /* the connection's descriptor goes this high: shells use the low ones */

/* -- state ----------------------------------------------------------------------------------- */

enum { UNTRIED = 0, ACTIVE = 1, QUIET = -1 };

static pthread_mutex_t guard = PTHREAD_MUTEX_INITIALIZER;
static volatile int state = UNTRIED;
static volatile pid_t state_pid = 0; /* the process the state belongs to */
static int forked_child = 0;        /* reset by a fork: its hello says "forked" */
static int in_python = -1;          /* -1: not known yet */
static int sock_fd = -1;
static dev_t sock_dev;
static ino_t sock_ino;
static double reply_timeout = 30.0;
static char *prefixes[MAX_PREFIXES];
static int prefix_count = 0;
static int exit_code = -1; /* main's return value or exit()'s status; -1: not known */
static __thread int busy __attribute__((tls_model("initial-exec")));

/* -- the real functions ---------------------------------------------------------------------- */

#define REAL(name) real_##name
#define DECLARE_REAL(ret, name, ...)                                                           \
  static ret (*real_##name)(__VA_ARGS__);                                                      \
  static ret (*resolve_##name(void))(__VA_ARGS__) {                                            \
    if (!real_##name) real_##name = (ret(*)(__VA_ARGS__))dlsym(RTLD_NEXT, #name);              \
    return real_##name;                                                                        \
  }

DECLARE_REAL(int, open, const char *, int, ...)
DECLARE_REAL(int, open64, const char *, int, ...)
DECLARE_REAL(int, openat, int, const char *, int, ...)
DECLARE_REAL(int, openat64, int, const char *, int, ...)
DECLARE_REAL(int, __open_2, const char *, int)
DECLARE_REAL(int, __open64_2, const char *, int)
DECLARE_REAL(int, __openat_2, int, const char *, int)
DECLARE_REAL(int, __openat64_2, int, const char *, int)
DECLARE_REAL(FILE *, fopen, const char *, const char *)
DECLARE_REAL(FILE *, fopen64, const char *, const char *)
DECLARE_REAL(int, rename, const char *, const char *)
DECLARE_REAL(int, renameat, int, const char *, int, const char *)
DECLARE_REAL(int, renameat2, int, const char *, int, const char *, unsigned int)
DECLARE_REAL(int, mkdir, const char *, mode_t)
DECLARE_REAL(int, rmdir, const char *)
DECLARE_REAL(int, unlink, const char *)
DECLARE_REAL(int, unlinkat, int, const char *, int)
DECLARE_REAL(int, symlink, const char *, const char *)
DECLARE_REAL(int, link, const char *, const char *)
DECLARE_REAL(int, truncate, const char *, off_t)
DECLARE_REAL(int, truncate64, const char *, off64_t)
DECLARE_REAL(int, chmod, const char *, mode_t)
DECLARE_REAL(int, flock, int, int)
DECLARE_REAL(int, lockf, int, int, off_t)
DECLARE_REAL(int, lockf64, int, int, off64_t)
DECLARE_REAL(pid_t, waitpid, pid_t, int *, int)
DECLARE_REAL(pid_t, wait, int *)
DECLARE_REAL(pid_t, wait4, pid_t, int *, int, struct rusage *)
DECLARE_REAL(void, exit, int)
DECLARE_REAL(void, _exit, int)
DECLARE_REAL(void, _Exit, int)

/* -- marshal: what the child runtime's protocol needs of it ---------------------------------- */

typedef struct {
  unsigned char *data;
  size_t len, cap;
  int overflow;
} out_t;

static void w_bytes(out_t *out, const void *bytes, size_t n) {
  if (out->overflow || out->len + n > out->cap) {
    out->overflow = 1;
    return;
  }
  memcpy(out->data + out->len, bytes, n);
  out->len += n;
}

static void w_byte(out_t *out, unsigned char byte) { w_bytes(out, &byte, 1); }

static void w_int32(out_t *out, int32_t value) { w_bytes(out, &value, 4); }

static void w_none(out_t *out) { w_byte(out, 'N'); }

static void w_int(out_t *out, long long value) {
  if (value >= INT32_MIN && value <= INT32_MAX) {
    w_byte(out, 'i');
    w_int32(out, (int32_t)value);
    return;
  }
  /* TYPE_LONG: the digit count (negative for a negative number), then 15-bit digits */
  unsigned long long magnitude = value < 0 ? 0ULL - (unsigned long long)value : (unsigned long long)value;
  uint16_t digits[5];
  int count = 0;
  while (magnitude) {
    digits[count++] = (uint16_t)(magnitude & 0x7fff);
    magnitude >>= 15;
  }
  w_byte(out, 'l');
  w_int32(out, value < 0 ? -count : count);
  w_bytes(out, digits, (size_t)count * 2);
}

static void w_float(out_t *out, double value) {
  w_byte(out, 'g');
  w_bytes(out, &value, 8);
}

/* The length of a valid UTF-8 sequence at text[0..n), or 0. */
static size_t utf8_sequence(const unsigned char *text, size_t n) {
  unsigned char c = text[0];
  size_t length;
  if (c < 0x80) return 1;
  if (c >= 0xc2 && c <= 0xdf) length = 2;
  else if (c >= 0xe0 && c <= 0xef) length = 3;
  else if (c >= 0xf0 && c <= 0xf4) length = 4;
  else return 0;
  if (length > n) return 0;
  for (size_t i = 1; i < length; i++)
    if ((text[i] & 0xc0) != 0x80) return 0;
  if (c == 0xe0 && text[1] < 0xa0) return 0;                     /* overlong */
  if (c == 0xed && text[1] >= 0xa0) return 0;                    /* a surrogate */
  if (c == 0xf0 && text[1] < 0x90) return 0;                     /* overlong */
  if (c == 0xf4 && text[1] >= 0x90) return 0;                    /* past U+10FFFF */
  return length;
}

/* A str as Python's os.fsdecode makes it of these bytes: a byte that is not UTF-8 becomes the
 * surrogate U+DC80..U+DCFF (written as its UTF-8 form, which marshal reads with surrogatepass). */
static void w_str(out_t *out, const char *text) {
  const unsigned char *bytes = (const unsigned char *)text;
  size_t n = strlen(text), encoded = 0, i;
  int ascii = 1;
  for (i = 0; i < n;) {
    size_t step = utf8_sequence(bytes + i, n - i);
    if (bytes[i] >= 0x80) ascii = 0;
    encoded += step ? step : 3;
    i += step ? step : 1;
  }
  if (ascii && n < 256) {
    w_byte(out, 'z');
    w_byte(out, (unsigned char)n);
    w_bytes(out, text, n);
    return;
  }
  w_byte(out, 'u');
  w_int32(out, (int32_t)encoded);
  for (i = 0; i < n;) {
    size_t step = utf8_sequence(bytes + i, n - i);
    if (step) {
      w_bytes(out, bytes + i, step);
      i += step;
    } else {
      unsigned int code = 0xdc00u + bytes[i];
      unsigned char escape[3] = {(unsigned char)(0xe0 | (code >> 12)),
                                 (unsigned char)(0x80 | ((code >> 6) & 0x3f)),
                                 (unsigned char)(0x80 | (code & 0x3f))};
      w_bytes(out, escape, 3);
      i += 1;
    }
  }
}

static void w_key(out_t *out, const char *key) { w_str(out, key); }

static void w_str_or_none(out_t *out, const char *text) {
  if (text) w_str(out, text);
  else w_none(out);
}

/* Reading: the reply's dict, its strs, ints and floats; anything else is skipped. Objects
 * marked with FLAG_REF are numbered in the order they start, as marshal.c numbers them, so a
 * back reference ('r') can be read again from where its object starts. */
typedef struct {
  const unsigned char *data;
  size_t len, pos;
  size_t refs[MAX_REFS];
  int ref_count;
  int replaying; /* reading an object again for a back reference: number nothing */
} in_t;

typedef struct {
  char kind; /* 's' str, 'i' int, 'f' float, 'n' None or a bool, 'o' anything else */
  const char *text;
  size_t text_len;
  long long integer;
  double number;
} value_t;

static int r_need(in_t *in, size_t n) { return in->pos + n <= in->len; }

static int32_t r_int32(in_t *in) {
  int32_t value;
  memcpy(&value, in->data + in->pos, 4);
  in->pos += 4;
  return value;
}

static int r_value(in_t *in, value_t *value, int depth);

static int r_skip(in_t *in, int depth) {
  value_t ignored;
  return r_value(in, &ignored, depth);
}

static int r_value(in_t *in, value_t *value, int depth) {
  if (depth > 16 || !r_need(in, 1)) return -1;
  size_t start = in->pos;
  unsigned char code = in->data[in->pos++];
  int flagged = code & 0x80;
  code &= 0x7f;
  if (flagged && !in->replaying) {
    if (in->ref_count >= MAX_REFS) return -1;
    in->refs[in->ref_count++] = start;
  }
  value->kind = 'o';
  switch (code) {
    case 'N': case 'T': case 'F': case '.': case 'S':
      value->kind = 'n';
      value->integer = code == 'T';
      return 0;
    case 'i':
      if (!r_need(in, 4)) return -1;
      value->kind = 'i';
      value->integer = r_int32(in);
      return 0;
    case 'l': {
      if (!r_need(in, 4)) return -1;
      int32_t count = r_int32(in);
      size_t digits = (size_t)(count < 0 ? -(long long)count : count);
      if (digits > 100000 || !r_need(in, digits * 2)) return -1;
      unsigned long long magnitude = 0;
      for (size_t i = digits; i > 0; i--) {
        uint16_t digit;
        memcpy(&digit, in->data + in->pos + (i - 1) * 2, 2);
        magnitude = (magnitude << 15) | digit;
      }
      in->pos += digits * 2;
      value->kind = 'i';
      value->integer = count < 0 ? -(long long)magnitude : (long long)magnitude;
      return 0;
    }
    case 'g':
      if (!r_need(in, 8)) return -1;
      value->kind = 'f';
      memcpy(&value->number, in->data + in->pos, 8);
      in->pos += 8;
      return 0;
    case 'y':
      if (!r_need(in, 16)) return -1;
      in->pos += 16;
      return 0;
    case 'z': case 'Z': {
      if (!r_need(in, 1)) return -1;
      size_t n = in->data[in->pos++];
      if (!r_need(in, n)) return -1;
      value->kind = 's';
      value->text = (const char *)in->data + in->pos;
      value->text_len = n;
      in->pos += n;
      return 0;
    }
    case 'u': case 't': case 'a': case 'A': case 's': {
      if (!r_need(in, 4)) return -1;
      int32_t n = r_int32(in);
      if (n < 0 || !r_need(in, (size_t)n)) return -1;
      value->kind = code == 's' ? 'o' : 's';
      value->text = (const char *)in->data + in->pos;
      value->text_len = (size_t)n;
      in->pos += (size_t)n;
      return 0;
    }
    case '(': case '[': case '<': case '>': case ')': {
      int32_t n;
      if (code == ')') {
        if (!r_need(in, 1)) return -1;
        n = in->data[in->pos++];
      } else {
        if (!r_need(in, 4)) return -1;
        n = r_int32(in);
      }
      if (n < 0) return -1;
      for (int32_t i = 0; i < n; i++)
        if (r_skip(in, depth + 1) < 0) return -1;
      return 0;
    }
    case '{':
      for (;;) {
        if (!r_need(in, 1)) return -1;
        if (in->data[in->pos] == '0') {
          in->pos++;
          return 0;
        }
        if (r_skip(in, depth + 1) < 0 || r_skip(in, depth + 1) < 0) return -1;
      }
    case 'r': {
      if (!r_need(in, 4)) return -1;
      int32_t index = r_int32(in);
      if (index < 0 || index >= in->ref_count) return -1;
      size_t resume = in->pos;
      unsigned char target = in->data[in->refs[index]] & 0x7f;
      if (target == '(' || target == '[' || target == '{' || target == '<' || target == '>' ||
          target == ')')
        return 0; /* a container again: nothing of it is read twice */
      in->pos = in->refs[index];
      in->replaying++;
      int result = r_value(in, value, depth + 1);
      in->replaying--;
      in->pos = resume;
      return result;
    }
    default:
      return -1; /* code objects and the like: not in a message */
  }
}

static int text_is(const value_t *value, const char *text) {
  return value->kind == 's' && value->text_len == strlen(text) &&
         memcmp(value->text, text, value->text_len) == 0;
}

static char *text_copy(const value_t *value) {
  char *copy = malloc(value->text_len + 1);
  if (!copy) return NULL;
  memcpy(copy, value->text, value->text_len);
  copy[value->text_len] = '\0';
  return copy;
}

/* -- talking to the controller --------------------------------------------------------------- */

static double monotonic(void) {
  struct timespec now;
  clock_gettime(CLOCK_MONOTONIC, &now);
  return (double)now.tv_sec + (double)now.tv_nsec / 1e9;
}

static void pause_for(double seconds) {
  struct timespec delay = {(time_t)seconds, (long)((seconds - (double)(time_t)seconds) * 1e9)};
  while (nanosleep(&delay, &delay) < 0 && errno == EINTR) {
  }
}

static void drop_connection(void) {
  if (sock_fd >= 0) close(sock_fd);
  sock_fd = -1;
  state = QUIET;
}

/* Whether sock_fd is still our connection: a program that closed every descriptor and opened
 * a file since may have been given its number. */
static int connection_is_ours(void) {
  struct stat info;
  return sock_fd >= 0 && fstat(sock_fd, &info) == 0 && S_ISSOCK(info.st_mode) &&
         info.st_dev == sock_dev && info.st_ino == sock_ino;
}

static int send_all(const unsigned char *data, size_t n) {
  while (n) {
    ssize_t sent = send(sock_fd, data, n, MSG_NOSIGNAL);
    if (sent < 0) {
      if (errno == EINTR) continue;
      return -1;
    }
    data += sent;
    n -= (size_t)sent;
  }
  return 0;
}

static int receive_all(unsigned char *data, size_t n) {
  while (n) {
    ssize_t got = recv(sock_fd, data, n, 0);
    if (got < 0 && errno == EINTR) continue;
    if (got <= 0) return -1;
    data += got;
    n -= (size_t)got;
  }
  return 0;
}

/* Send one framed message; with reply, read the reply's payload into reply (its length, or -1:
 * the connection is dropped and the process goes on unobserved). Under the guard. */
static long exchange(out_t *message, unsigned char *reply, size_t reply_cap) {
  if (message->overflow || !connection_is_ours()) {
    if (!message->overflow) drop_connection();
    return -1;
  }
  unsigned char header[4] = {(unsigned char)(message->len >> 24), (unsigned char)(message->len >> 16),
                             (unsigned char)(message->len >> 8), (unsigned char)message->len};
  if (send_all(header, 4) < 0 || send_all(message->data, message->len) < 0) {
    drop_connection();
    return -1;
  }
  if (!reply) return 0;
  if (receive_all(header, 4) < 0) {
    drop_connection();
    return -1;
  }
  size_t size = ((size_t)header[0] << 24) | ((size_t)header[1] << 16) | ((size_t)header[2] << 8) |
                header[3];
  if (size > reply_cap || receive_all(reply, size) < 0) {
    drop_connection();
    return -1;
  }
  return (long)size;
}

static int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

/* The plan's socket path (and reply time-out) from STARTUP_GUARD_PLAN, or -1. */
static int read_plan(char *socket_path, size_t cap) {
  const char *hex = getenv(PLAN_ENV);
  if (!hex) return -1;
  size_t n = strlen(hex);
  if (n % 2 || n / 2 > 8192) return -1;
  unsigned char plan[8192];
  for (size_t i = 0; i < n / 2; i++) {
    int high = hex_value(hex[2 * i]), low = hex_value(hex[2 * i + 1]);
    if (high < 0 || low < 0) return -1;
    plan[i] = (unsigned char)(high * 16 + low);
  }
  in_t in = {.data = plan, .len = n / 2};
  if (!r_need(&in, 1) || (in.data[0] & 0x7f) != '{') return -1;
  in.pos = 1;
  int found = -1;
  for (;;) {
    if (!r_need(&in, 1)) return -1;
    if (in.data[in.pos] == '0') break;
    value_t key, value;
    if (r_value(&in, &key, 1) < 0 || r_value(&in, &value, 1) < 0) return -1;
    if (text_is(&key, "socket") && value.kind == 's' && value.text_len < cap &&
        value.text_len > 0 && value.text[0] == '/') {
      memcpy(socket_path, value.text, value.text_len);
      socket_path[value.text_len] = '\0';
      found = 0;
    } else if (text_is(&key, "reply_timeout") && (value.kind == 'f' || value.kind == 'i')) {
      reply_timeout = value.kind == 'f' ? value.number : (double)value.integer;
    }
  }
  return found;
}

/* The plan's folder must be ours and private, as runtime/child.py's plan_refusal wants it. */
static int plan_is_ours(const char *socket_path) {
  char folder[sizeof(((struct sockaddr_un *)0)->sun_path)];
  const char *slash = strrchr(socket_path, '/');
  size_t n = slash ? (size_t)(slash - socket_path) : 0;
  if (n == 0 || n >= sizeof(folder)) return 0;
  memcpy(folder, socket_path, n);
  folder[n] = '\0';
  struct stat info;
  if (lstat(folder, &info) < 0 || !S_ISDIR(info.st_mode) || info.st_uid != geteuid() ||
      (info.st_mode & 077))
    return 0;
  if (lstat(socket_path, &info) < 0 || !S_ISSOCK(info.st_mode) || info.st_uid != geteuid())
    return 0;
  return 1;
}

static int connect_to(const char *socket_path) {
  struct sockaddr_un address;
  memset(&address, 0, sizeof(address));
  address.sun_family = AF_UNIX;
  if (strlen(socket_path) >= sizeof(address.sun_path)) return -1;
  strcpy(address.sun_path, socket_path);
  int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  struct timeval timeout = {(time_t)reply_timeout,
                            (suseconds_t)((reply_timeout - (double)(time_t)reply_timeout) * 1e6)};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof(timeout));
  setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &timeout, sizeof(timeout));
  if (connect(fd, (struct sockaddr *)&address, sizeof(address)) < 0) {
    close(fd);
    return -1;
  }
  int high = fcntl(fd, F_DUPFD_CLOEXEC, HIGH_FD);
  if (high >= 0) {
    close(fd);
    fd = high;
  }
  struct stat info;
  if (fstat(fd, &info) < 0) {
    close(fd);
    return -1;
  }
  sock_dev = info.st_dev;
  sock_ino = info.st_ino;
  return fd;
}

/* Whether this process runs CPython (its symbols are in the program, or in a libpython). */
static int runs_python(void) {
  if (in_python < 0) in_python = dlsym(RTLD_DEFAULT, "Py_IsInitialized") != NULL;
  return in_python;
}

/* In a Python process: whether its child runtime has said hello (it puts this pid last in
 * STARTUP_GUARD_ANCESTRY then). Before that the interposer waits; its hello would come first. */
static int python_runtime_joined(void) {
  const char *ancestry = getenv(ANCESTRY_ENV);
  if (!ancestry) return 0;
  char own[24];
  snprintf(own, sizeof(own), "%d", (int)getpid());
  size_t n = strlen(ancestry), m = strlen(own);
  if (n < m || strcmp(ancestry + n - m, own) != 0) return 0;
  return n == m || ancestry[n - m - 1] == ',';
}

static void w_argv(out_t *out) {
  char buffer[8192];
  int fd = REAL(open) ? REAL(open)("/proc/self/cmdline", O_RDONLY | O_CLOEXEC) : -1;
  ssize_t n = fd >= 0 ? read(fd, buffer, sizeof(buffer) - 1) : -1;
  if (fd >= 0) close(fd);
  if (n < 0) n = 0;
  buffer[n] = '\0';
  int count = 0;
  for (ssize_t i = 0; i < n; i++)
    if (buffer[i] == '\0') count++;
  w_byte(out, '[');
  w_int32(out, count);
  for (ssize_t i = 0; i < n; i += (ssize_t)strlen(buffer + i) + 1) w_str(out, buffer + i);
}

static void keep_prefixes(in_t *in) {
  /* in->pos is at the "watch" value: a list of str */
  if (!r_need(in, 5)) return;
  unsigned char code = in->data[in->pos] & 0x7f;
  if (code != '[' && code != '(') {
    r_skip(in, 1);
    return;
  }
  if (in->data[in->pos] & 0x80) in->refs[in->ref_count++] = in->pos;
  in->pos++;
  int32_t n = r_int32(in);
  for (int32_t i = 0; i < n; i++) {
    value_t item;
    if (r_value(in, &item, 2) < 0) return;
    if (item.kind == 's' && prefix_count < MAX_PREFIXES) {
      char *copy = text_copy(&item);
      if (copy) prefixes[prefix_count++] = copy;
    }
  }
}

/* Say hello under the plan and keep the watched prefixes. Under the guard. */
static void join(void) {
  static unsigned char message_data[16384];
  static unsigned char reply[MAX_REPLY];
  char socket_path[sizeof(((struct sockaddr_un *)0)->sun_path)];
  state_pid = getpid();
  state = QUIET;
  if (getauxval(AT_SECURE)) return; /* setuid or setgid: never */
  if (read_plan(socket_path, sizeof(socket_path)) < 0 || !plan_is_ours(socket_path)) return;
  resolve_open();
  sock_fd = connect_to(socket_path);
  if (sock_fd < 0) return;
  const char *member = getenv(MEMBER_ENV);
  out_t out = {message_data, 0, sizeof(message_data), 0};
  w_byte(&out, '{');
  w_key(&out, "op"), w_str(&out, "hello");
  w_key(&out, "pid"), w_int(&out, getpid());
  w_key(&out, "ppid"), w_int(&out, getppid());
  w_key(&out, "member"), w_str_or_none(&out, member);
  w_key(&out, "ancestry"), w_byte(&out, '['), w_int32(&out, 0);
  w_key(&out, "argv"), w_argv(&out);
  w_key(&out, "forked"), w_int(&out, forked_child);
  w_key(&out, "native"), w_int(&out, 1);
  w_key(&out, "python"), w_int(&out, runs_python());
  w_key(&out, "t"), w_float(&out, monotonic());
  w_byte(&out, '0');
  /* QUIET until the reply is read: other threads report nothing before the prefixes are in */
  long size = exchange(&out, reply, sizeof(reply));
  if (size < 0) return;
  in_t in = {.data = reply, .len = (size_t)size};
  int ok = 0;
  if (!r_need(&in, 1) || (in.data[0] & 0x7f) != '{') goto refused;
  if (in.data[0] & 0x80) in.refs[in.ref_count++] = 0;
  in.pos = 1;
  for (;;) {
    if (!r_need(&in, 1)) goto refused;
    if (in.data[in.pos] == '0') break;
    value_t key;
    if (r_value(&in, &key, 1) < 0) goto refused;
    if (text_is(&key, "watch")) {
      keep_prefixes(&in);
      continue;
    }
    value_t value;
    if (r_value(&in, &value, 1) < 0) goto refused;
    if (text_is(&key, "ok")) ok = 1;
  }
  if (ok) {
    state = ACTIVE;
    return;
  }
refused:
  drop_connection();
}

/* Whether calls of this process are reported: says hello on first use. */
static int active(void) {
  pid_t pid = getpid();
  if (state_pid == pid) return state == ACTIVE;
  if (state_pid != 0) return 0; /* a vfork child or a clone: leave the parent's state alone */
  if (runs_python() && !python_runtime_joined()) return 0;
  pthread_mutex_lock(&guard);
  if (state_pid == 0) join();
  pthread_mutex_unlock(&guard);
  return state_pid == pid && state == ACTIVE;
}

static void after_fork_in_child(void) {
  /* The parent's connection stays the parent's: this process says hello on its own. */
  pthread_mutex_t fresh = PTHREAD_MUTEX_INITIALIZER;
  memcpy(&guard, &fresh, sizeof(guard));
  if (sock_fd >= 0) close(sock_fd);
  sock_fd = -1;
  for (int i = 0; i < prefix_count; i++) free(prefixes[i]);
  prefix_count = 0;
  exit_code = -1;
  forked_child = 1;
  state = UNTRIED;
  state_pid = 0;
}

__attribute__((constructor)) static void install(void) {
  pthread_atfork(NULL, NULL, after_fork_in_child);
}

/* -- which calls are reported ---------------------------------------------------------------- */

/* path as an absolute path in buffer (relative to dirfd, else to the working folder). */
static int absolute(int dirfd, const char *path, char *buffer, size_t cap) {
  if (!path) return -1;
  if (path[0] == '/') {
    if (strlen(path) >= cap) return -1;
    strcpy(buffer, path);
    return 0;
  }
  char base[MAX_PATH_TEXT];
  if (dirfd == AT_FDCWD) {
    if (!getcwd(base, sizeof(base))) return -1;
  } else {
    char link[64];
    snprintf(link, sizeof(link), "/proc/self/fd/%d", dirfd);
    ssize_t n = readlink(link, base, sizeof(base) - 1);
    if (n < 0) return -1;
    base[n] = '\0';
  }
  int written = snprintf(buffer, cap, "%s%s%s", base, strcmp(base, "/") == 0 ? "" : "/", path);
  return written < 0 || (size_t)written >= cap ? -1 : 0;
}

static int descriptor_path(int fd, char *buffer, size_t cap) {
  char link[64];
  snprintf(link, sizeof(link), "/proc/self/fd/%d", fd);
  ssize_t n = readlink(link, buffer, cap - 1);
  if (n < 0) return -1;
  buffer[n] = '\0';
  return buffer[0] == '/' ? 0 : -1;
}

static int is_watched(const char *path) {
  size_t n = strlen(path);
  for (int i = 0; i < prefix_count; i++) {
    size_t m = strlen(prefixes[i]);
    if (strncmp(path, prefixes[i], m) == 0) return 1;
    /* the folder itself: a prefix ends in "/" */
    if (m == n + 1 && strncmp(path, prefixes[i], n) == 0) return 1;
  }
  return 0;
}

/* Report one access and wait for the answer: the errno the call must fail with, or 0. */
static int report(const char *event, const char *path, const char *other) {
  static unsigned char reply[MAX_REPLY];
  unsigned char message_data[MAX_MESSAGE];
  int again = 0;
  double t = monotonic();
  for (;;) {
    out_t out = {message_data, 0, sizeof(message_data), 0};
    w_byte(&out, '{');
    w_key(&out, "op"), w_str(&out, "access");
    w_key(&out, "ev"), w_str(&out, event);
    w_key(&out, "path"), w_str(&out, path);
    w_key(&out, "other"), w_str_or_none(&out, other);
    w_key(&out, "t"), w_float(&out, t);
    w_key(&out, "pid"), w_int(&out, getpid());
    w_key(&out, "tid"), w_int(&out, (long long)(unsigned long)pthread_self());
    w_key(&out, "native"), w_int(&out, 1);
    if (again) w_key(&out, "again"), w_int(&out, 1);
    w_byte(&out, '0');
    pthread_mutex_lock(&guard);
    long size = state == ACTIVE ? exchange(&out, reply, sizeof(reply)) : -1;
    int failure = 0;
    double wait = 0.0;
    if (size > 0) {
      in_t in = {.data = reply, .len = (size_t)size};
      if ((in.data[0] & 0x7f) == '{') {
        if (in.data[0] & 0x80) in.refs[in.ref_count++] = 0;
        in.pos = 1;
        while (r_need(&in, 1) && in.data[in.pos] != '0') {
          value_t key, value;
          if (r_value(&in, &key, 1) < 0 || r_value(&in, &value, 1) < 0) break;
          if (text_is(&key, "errno") && value.kind == 'i') failure = (int)value.integer;
          if (text_is(&key, "wait"))
            wait = value.kind == 'f' ? value.number : value.kind == 'i' ? (double)value.integer : 0;
        }
      }
    }
    pthread_mutex_unlock(&guard);
    if (size <= 0 || failure > 0) return failure > 0 ? failure : 0;
    if (wait <= 0) return 0;
    pause_for(wait < MAX_WAIT ? wait : MAX_WAIT);
    again = 1;
    t = monotonic();
  }
}

/* The errno a call on (dirfd, path) [and (other_dirfd, other)] must fail with, or 0 to go on.
 * other_is_text: a symlink's target, sent as written. */
static int check(const char *event, int dirfd, const char *path, int other_dirfd,
                 const char *other, int other_is_text) {
  if (busy || !path) return 0;
  busy = 1;
  int saved = errno, failure = 0;
  if (active()) {
    char where[MAX_PATH_TEXT], other_where[MAX_PATH_TEXT];
    const char *second = NULL;
    if (absolute(dirfd, path, where, sizeof(where)) == 0) {
      if (other) {
        if (other_is_text) second = other;
        else if (absolute(other_dirfd, other, other_where, sizeof(other_where)) == 0)
          second = other_where;
      }
      if (is_watched(where) || (second && !other_is_text && is_watched(second)))
        failure = report(event, where, second);
    }
  }
  busy = 0;
  errno = saved;
  return failure;
}

static int check_descriptor(const char *event, int fd) {
  if (busy) return 0;
  busy = 1;
  int saved = errno, failure = 0;
  char where[MAX_PATH_TEXT];
  if (active() && descriptor_path(fd, where, sizeof(where)) == 0 && is_watched(where))
    failure = report(event, where, NULL);
  busy = 0;
  errno = saved;
  return failure;
}

#define FAIL_WITH(failure, value) \
  do {                            \
    errno = (failure);            \
    return (value);               \
  } while (0)

/* -- the wrappers ------------------------------------------------------------------------------ */

static int needs_mode(int flags) {
#ifdef O_TMPFILE
  if ((flags & O_TMPFILE) == O_TMPFILE) return 1;
#endif
  return (flags & O_CREAT) != 0;
}

#define OPEN_WRAPPER(name)                                              \
  int name(const char *path, int flags, ...) {                          \
    mode_t mode = 0;                                                    \
    if (needs_mode(flags)) {                                            \
      va_list arguments;                                                \
      va_start(arguments, flags);                                       \
      mode = (mode_t)va_arg(arguments, int);                            \
      va_end(arguments);                                                \
    }                                                                   \
    int failure = check("open", AT_FDCWD, path, AT_FDCWD, NULL, 0);    \
    if (failure) FAIL_WITH(failure, -1);                                \
    return resolve_##name()(path, flags, mode);                         \
  }

#define OPENAT_WRAPPER(name)                                            \
  int name(int dirfd, const char *path, int flags, ...) {               \
    mode_t mode = 0;                                                    \
    if (needs_mode(flags)) {                                            \
      va_list arguments;                                                \
      va_start(arguments, flags);                                       \
      mode = (mode_t)va_arg(arguments, int);                            \
      va_end(arguments);                                                \
    }                                                                   \
    int failure = check("open", dirfd, path, AT_FDCWD, NULL, 0);       \
    if (failure) FAIL_WITH(failure, -1);                                \
    return resolve_##name()(dirfd, path, flags, mode);                  \
  }

OPEN_WRAPPER(open)
OPEN_WRAPPER(open64)
OPENAT_WRAPPER(openat)
OPENAT_WRAPPER(openat64)

/* What programs built with _FORTIFY_SOURCE call where the flags are not known when compiled. */
int __open_2(const char *path, int flags) {
  int failure = check("open", AT_FDCWD, path, AT_FDCWD, NULL, 0);
  if (failure) FAIL_WITH(failure, -1);
  return resolve___open_2()(path, flags);
}

int __open64_2(const char *path, int flags) {
  int failure = check("open", AT_FDCWD, path, AT_FDCWD, NULL, 0);
  if (failure) FAIL_WITH(failure, -1);
  return resolve___open64_2()(path, flags);
}

int __openat_2(int dirfd, const char *path, int flags) {
  int failure = check("open", dirfd, path, AT_FDCWD, NULL, 0);
  if (failure) FAIL_WITH(failure, -1);
  return resolve___openat_2()(dirfd, path, flags);
}

int __openat64_2(int dirfd, const char *path, int flags) {
  int failure = check("open", dirfd, path, AT_FDCWD, NULL, 0);
  if (failure) FAIL_WITH(failure, -1);
  return resolve___openat64_2()(dirfd, path, flags);
}

FILE *fopen(const char *path, const char *mode) {
  int failure = check("open", AT_FDCWD, path, AT_FDCWD, NULL, 0);
  if (failure) FAIL_WITH(failure, NULL);
  return resolve_fopen()(path, mode);
}

FILE *fopen64(const char *path, const char *mode) {
  int failure = check("open", AT_FDCWD, path, AT_FDCWD, NULL, 0);
  if (failure) FAIL_WITH(failure, NULL);
  return resolve_fopen64()(path, mode);
}

int rename(const char *old, const char *new) {
  int failure = check("os.rename", AT_FDCWD, old, AT_FDCWD, new, 0);
  if (failure) FAIL_WITH(failure, -1);
  return resolve_rename()(old, new);
}

int renameat(int old_dirfd, const char *old, int new_dirfd, const char *new) {
  int failure = check("os.rename", old_dirfd, old, new_dirfd, new, 0);
  if (failure) FAIL_WITH(failure, -1);
  return resolve_renameat()(old_dirfd, old, new_dirfd, new);
}

int renameat2(int old_dirfd, const char *old, int new_dirfd, const char *new, unsigned int flags) {
  int failure = check("os.rename", old_dirfd, old, new_dirfd, new, 0);
  if (failure) FAIL_WITH(failure, -1);
  return resolve_renameat2()(old_dirfd, old, new_dirfd, new, flags);
}

int mkdir(const char *path, mode_t mode) {
  int failure = check("os.mkdir", AT_FDCWD, path, AT_FDCWD, NULL, 0);
  if (failure) FAIL_WITH(failure, -1);
  return resolve_mkdir()(path, mode);
}

int rmdir(const char *path) {
  int failure = check("os.rmdir", AT_FDCWD, path, AT_FDCWD, NULL, 0);
  if (failure) FAIL_WITH(failure, -1);
  return resolve_rmdir()(path);
}

int unlink(const char *path) {
  int failure = check("os.remove", AT_FDCWD, path, AT_FDCWD, NULL, 0);
  if (failure) FAIL_WITH(failure, -1);
  return resolve_unlink()(path);
}

int unlinkat(int dirfd, const char *path, int flags) {
  const char *event = (flags & AT_REMOVEDIR) ? "os.rmdir" : "os.remove";
  int failure = check(event, dirfd, path, AT_FDCWD, NULL, 0);
  if (failure) FAIL_WITH(failure, -1);
  return resolve_unlinkat()(dirfd, path, flags);
}

int symlink(const char *target, const char *link_path) {
  int failure = check("os.symlink", AT_FDCWD, link_path, AT_FDCWD, target, 1);
  if (failure) FAIL_WITH(failure, -1);
  return resolve_symlink()(target, link_path);
}

int link(const char *old, const char *new) {
  int failure = check("os.link", AT_FDCWD, new, AT_FDCWD, old, 0);
  if (failure) FAIL_WITH(failure, -1);
  return resolve_link()(old, new);
}

int truncate(const char *path, off_t length) {
  int failure = check("os.truncate", AT_FDCWD, path, AT_FDCWD, NULL, 0);
  if (failure) FAIL_WITH(failure, -1);
  return resolve_truncate()(path, length);
}

int truncate64(const char *path, off64_t length) {
  int failure = check("os.truncate", AT_FDCWD, path, AT_FDCWD, NULL, 0);
  if (failure) FAIL_WITH(failure, -1);
  return resolve_truncate64()(path, length);
}

int chmod(const char *path, mode_t mode) {
  int failure = check("os.chmod", AT_FDCWD, path, AT_FDCWD, NULL, 0);
  if (failure) FAIL_WITH(failure, -1);
  return resolve_chmod()(path, mode);
}

int flock(int fd, int operation) {
  int failure = check_descriptor("fcntl.flock", fd);
  if (failure) FAIL_WITH(failure, -1);
  return resolve_flock()(fd, operation);
}

int lockf(int fd, int command, off_t length) {
  int failure = check_descriptor("fcntl.lockf", fd);
  if (failure) FAIL_WITH(failure, -1);
  return resolve_lockf()(fd, command, length);
}

int lockf64(int fd, int command, off64_t length) {
  int failure = check_descriptor("fcntl.lockf", fd);
  if (failure) FAIL_WITH(failure, -1);
  return resolve_lockf64()(fd, command, length);
}

/* -- how processes end ------------------------------------------------------------------------- */

/* A notice (no reply): "bye" of this process, or "reaped" of a child. Not from the interposer of
 * a Python process: its child runtime tells both. */
static void notify_end(const char *op, pid_t pid, int code, int known) {
  if (busy || state_pid != getpid() || state != ACTIVE || runs_python()) return;
  busy = 1;
  unsigned char message_data[256];
  out_t out = {message_data, 0, sizeof(message_data), 0};
  w_byte(&out, '{');
  w_key(&out, "op"), w_str(&out, op);
  w_key(&out, "pid"), w_int(&out, pid);
  w_key(&out, "t"), w_float(&out, monotonic());
  w_key(&out, "code");
  if (known) w_int(&out, code);
  else w_none(&out);
  if (strcmp(op, "bye") == 0) w_key(&out, "cause"), w_none(&out);
  else w_key(&out, "by"), w_int(&out, getpid());
  w_key(&out, "noreply"), w_int(&out, 1);
  w_byte(&out, '0');
  pthread_mutex_lock(&guard);
  if (state == ACTIVE) exchange(&out, NULL, 0);
  pthread_mutex_unlock(&guard);
  busy = 0;
}

static void tell_reaped(pid_t pid, int status) {
  if (pid <= 0) return;
  int saved = errno;
  if (WIFEXITED(status)) notify_end("reaped", pid, WEXITSTATUS(status), 1);
  else if (WIFSIGNALED(status)) notify_end("reaped", pid, -WTERMSIG(status), 1);
  errno = saved;
}

pid_t waitpid(pid_t pid, int *status, int options) {
  int own;
  pid_t reaped = resolve_waitpid()(pid, status ? status : &own, options);
  tell_reaped(reaped, status ? *status : own);
  return reaped;
}

pid_t wait(int *status) {
  int own;
  pid_t reaped = resolve_wait()(status ? status : &own);
  tell_reaped(reaped, status ? *status : own);
  return reaped;
}

pid_t wait4(pid_t pid, int *status, int options, struct rusage *usage) {
  int own;
  pid_t reaped = resolve_wait4()(pid, status ? status : &own, options, usage);
  tell_reaped(reaped, status ? *status : own);
  return reaped;
}

void exit(int status) {
  exit_code = status & 0xff;
  resolve_exit()(status);
  __builtin_unreachable();
}

void _exit(int status) {
  notify_end("bye", getpid(), status & 0xff, 1);
  resolve__exit()(status);
  __builtin_unreachable();
}

void _Exit(int status) {
  notify_end("bye", getpid(), status & 0xff, 1);
  resolve__Exit()(status);
  __builtin_unreachable();
}

/* main's return value: glibc's start-up calls exit() with it from inside libc, where no
 * wrapper sees it, so main itself is wrapped. */
typedef int (*main_function)(int, char **, char **);
static main_function program_main;

static int main_telling_its_status(int argc, char **argv, char **envp) {
  int status = program_main(argc, argv, envp);
  exit_code = status & 0xff;
  return status;
}

typedef int (*start_main_function)(main_function, int, char **, void (*)(void), void (*)(void),
                                   void (*)(void), void *);

int __libc_start_main(main_function main, int argc, char **argv, void (*init)(void),
                      void (*fini)(void), void (*rtld_fini)(void), void *stack_end) {
  start_main_function real = (start_main_function)dlsym(RTLD_NEXT, "__libc_start_main");
  program_main = main;
  return real(main_telling_its_status, argc, argv, init, fini, rtld_fini, stack_end);
}

/* Runs after the program's exit handlers: the status is known by then. */
__attribute__((destructor)) static void say_bye(void) {
  notify_end("bye", getpid(), exit_code, exit_code >= 0);
}
