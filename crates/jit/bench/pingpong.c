// Measures the round trip of a cache line between two threads: one atomic flag bounced
// 200,000 times. On the benchmark VM it tells whether the host has placed the two virtual
// CPUs near each other (~100 ns) or apart (~400 ns); see docs/benchmarks_history.md, "Forks
// and joins without wake-ups; products side by side". Build and run: cc -O2 -pthread pingpong.c -o pingpong && ./pingpong
#include <pthread.h>
#include <stdio.h>
#include <stdatomic.h>
#include <time.h>
static _Atomic long flag = 0;
#define N 200000
void* th(void* a){ for(long i=0;i<N;i++){ while(atomic_load(&flag)!=2*i+1); atomic_store(&flag,2*i+2);} return 0;}
int main(){ pthread_t t; pthread_create(&t,0,th,0); struct timespec s,e; clock_gettime(CLOCK_MONOTONIC,&s);
 for(long i=0;i<N;i++){ atomic_store(&flag,2*i+1); while(atomic_load(&flag)!=2*i+2); }
 clock_gettime(CLOCK_MONOTONIC,&e); pthread_join(t,0);
 printf("round trip %.1f ns\n", ((e.tv_sec-s.tv_sec)*1e9+(e.tv_nsec-s.tv_nsec))/N); }
