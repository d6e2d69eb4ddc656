/* wake-cost: what one wake-up of another process costs on this machine, in
 * the waker's CPU time, when both run on the same CPU and when the wakee is
 * on the other one (an IPI, which in a virtual machine exits to the
 * hypervisor). Two processes pinned to CPUs A and B pass a byte back and
 * forth over pipes; with GAP_US, the first sleeps that long before each
 * round, so that its CPU goes idle in between, as at a trickle.
 *
 *   gcc -O2 -o wake-cost scripts/wake-cost.c
 *   ./wake-cost 0 0; ./wake-cost 0 1; ./wake-cost 0 0 200; ./wake-cost 0 1 200
 *
 * Issue 36: the cost per check at a trickle follows the cross-CPU wakes.
 */
#define _GNU_SOURCE
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static double seconds(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec + t.tv_nsec * 1e-9;
}

static double cpu_seconds(void) {
  struct rusage r;
  getrusage(RUSAGE_SELF, &r);
  return r.ru_utime.tv_sec + r.ru_stime.tv_sec + (r.ru_utime.tv_usec + r.ru_stime.tv_usec) * 1e-6;
}

static void pin(int cpu) {
  cpu_set_t s;
  CPU_ZERO(&s);
  CPU_SET(cpu, &s);
  if (sched_setaffinity(0, sizeof s, &s) != 0) { perror("sched_setaffinity"); exit(1); }
}

int main(int argc, char **argv) {
  if (argc < 3) { fprintf(stderr, "usage: wake-cost CPU_A CPU_B [GAP_US]\n"); return 2; }
  int a = atoi(argv[1]), b = atoi(argv[2]), gap = argc > 3 ? atoi(argv[3]) : 0, rounds = 20000;
  int there[2], back[2];
  char c = 0;
  if (pipe(there) || pipe(back)) { perror("pipe"); return 1; }
  pid_t child = fork();
  if (child == 0) {
    pin(b);
    for (int i = 0; i < rounds; i++)
      if (read(there[0], &c, 1) != 1 || write(back[1], &c, 1) != 1) _exit(1);
    _exit(0);
  }
  pin(a);
  double c0 = cpu_seconds(), t0 = seconds();
  for (int i = 0; i < rounds; i++) {
    if (gap) usleep(gap);
    if (write(there[1], &c, 1) != 1 || read(back[0], &c, 1) != 1) { perror("round"); return 1; }
  }
  double t1 = seconds(), c1 = cpu_seconds();
  waitpid(child, NULL, 0);
  printf("cpus %d,%d, %d us apart: %.2f us a round trip (wall, less the gap), %.2f us of the waker's CPU\n", a, b, gap,
         (t1 - t0) / rounds * 1e6 - gap, (c1 - c0) / rounds * 1e6);
  return 0;
}
