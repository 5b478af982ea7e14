/* A tiny native build step, as ninja runs one at a server's start-up (flashinfer-ai/flashinfer#2338).

     native_build BUILD [--retry]

   It opens BUILD/.ninja_log for append, as ninja does before it builds anything, writes its
   log line, then writes its output (BUILD/kernel.o) under a temporary name and moves it into
   place. A shared build folder that another build removed or moved aside for a moment makes the
   open fail: "ninja: error: opening build log: No such file or directory", exit status 1.

   --retry: a bounded retry of the log's open (4 more tries, 0.1 s doubling), so a folder that
   comes back is used, and one that never does still fails the build. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static FILE *open_log(const char *build, int tries) {
  char path[4096];
  snprintf(path, sizeof(path), "%s/.ninja_log", build);
  long delay_ms = 100;
  for (int attempt = 1;; attempt++) {
    FILE *log = fopen(path, "a");
    if (log || attempt >= tries) return log;
    fprintf(stderr, "ninja: warning: opening build log: %s; retrying in %ld ms\n",
            strerror(errno), delay_ms);
    struct timespec pause = {delay_ms / 1000, (delay_ms % 1000) * 1000000L};
    nanosleep(&pause, NULL);
    delay_ms *= 2;
  }
}

int main(int argc, char **argv) {
  if (argc < 2) {
    fprintf(stderr, "usage: native_build BUILD [--retry]\n");
    return 2;
  }
  const char *build = argv[1];
  int tries = argc > 2 && strcmp(argv[2], "--retry") == 0 ? 5 : 1;
  FILE *log = open_log(build, tries);
  if (!log) {
    fprintf(stderr, "ninja: error: opening build log: %s\n", strerror(errno));
    return 1;
  }
  fprintf(log, "0\t12\t0\tkernel.o\t%lx\n", (unsigned long)getpid());
  fclose(log);
  char partial[4096], output[4096];
  snprintf(partial, sizeof(partial), "%s/kernel.o.%d.tmp", build, (int)getpid());
  snprintf(output, sizeof(output), "%s/kernel.o", build);
  int fd = open(partial, O_WRONLY | O_CREAT | O_TRUNC, 0644);
  if (fd < 0 || write(fd, "\177ELF", 4) != 4 || close(fd) != 0 || rename(partial, output) != 0) {
    fprintf(stderr, "ninja: error: writing %s: %s\n", output, strerror(errno));
    return 1;
  }
  return 0;
}
