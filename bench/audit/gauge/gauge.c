// Machine-speed gauge: every 50 ms, time two fixed work units on this thread's CPU clock.
#include <stdio.h>
#include <stdint.h>
#include <stdlib.h>
#include <time.h>
#include <signal.h>
static volatile int stop = 0;
static void on_term(int s) { (void)s; stop = 1; }
static uint64_t ns(clockid_t c) { struct timespec t; clock_gettime(c, &t); return t.tv_sec * 1000000000ull + t.tv_nsec; }
int main(void) {
  signal(SIGTERM, on_term); signal(SIGINT, on_term);
  setvbuf(stdout, NULL, _IOLBF, 0);
  size_t n = (8u << 20) / sizeof(uint32_t); // 8 MB ring, random order
  uint32_t *next = malloc(n * sizeof(uint32_t));
  for (size_t i = 0; i < n; i++) next[i] = i;
  uint64_t s = 88172645463325252ull;
  for (size_t i = n - 1; i > 0; i--) { s ^= s << 13; s ^= s >> 7; s ^= s << 17; size_t j = s % i; uint32_t t = next[i]; next[i] = next[j]; next[j] = t; }
  uint64_t sink = 0; uint32_t p = 0;
  while (!stop) {
    uint64_t w0 = ns(CLOCK_MONOTONIC), c0 = ns(CLOCK_THREAD_CPUTIME_ID);
    uint64_t x = w0;
    for (int i = 0; i < 300000; i++) { x ^= x << 13; x ^= x >> 7; x ^= x << 17; x += i; }
    uint64_t c1 = ns(CLOCK_THREAD_CPUTIME_ID);
    for (int i = 0; i < 8000; i++) p = next[p];
    uint64_t c2 = ns(CLOCK_THREAD_CPUTIME_ID);
    sink += x + p;
    printf("%llu %llu %llu\n", (unsigned long long)w0, (unsigned long long)(c1 - c0), (unsigned long long)(c2 - c1));
    struct timespec d = {0, 50000000}; nanosleep(&d, NULL);
  }
  fprintf(stderr, "%llu\n", (unsigned long long)sink);
  return 0;
}
