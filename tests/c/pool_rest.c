/* The thread pool's rest (templates/c/helpers/pool.c.j2, ONNXC_POOL_LATE_NS), driven directly:
 * regions whose thread numbers sleep in their share play a thread that lost its core. The test
 * (tests/test_thread_pool.py) renders the pool into the pool.h it includes and builds it with
 * a late threshold of 30 ms (shares here sleep 80 ms), rests of 150 ms and more and a window
 * of 400 ms, far above a loaded machine's scheduling delays, and reads the pool's state
 * directly (one translation unit). Prints "ok" or what failed. */
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#define ONNXC_THREADS 2
#define ONNXC_POOL_OWNER 1
#include "pool.h"

typedef struct { int count[2]; pid_t tid[2]; int delay, wait; int64_t delay_ns; int started; } region;

static pid_t tid_now(void) { return (pid_t)syscall(SYS_gettid); }

static void pause_ns(int64_t ns)
{
    struct timespec t = { (time_t)(ns / 1000000000), (long)(ns % 1000000000) };
    while (nanosleep(&t, &t) != 0) {}
}

static void body(void *data)
{
    region *r = (region *)data;
    const int num = omp_get_thread_num();
    r->count[num] = omp_get_num_threads();
    r->tid[num] = tid_now();
    if (num == 1)
        __atomic_store_n(&r->started, 1, __ATOMIC_SEQ_CST);
    if (num == 0 && r->wait)   /* let a pool thread take number 1 first (not while the pool rests) */
        for (int64_t t0 = onnxc_pool_now_ns(); !__atomic_load_n(&r->started, __ATOMIC_SEQ_CST)
                                                && onnxc_pool_now_ns() - t0 < 1000000000;)
            ONNXC_POOL_RELAX();
    if (num == r->delay)
        pause_ns(r->delay_ns);
}

/* One region; returns 2 if a pool thread ran number 1, 1 if the caller ran both numbers while
 * the pool rests, 0 if it ran both otherwise, -1 if the region did not have its 2 numbers.
 * `delay`: the number that sleeps (-1: none). */
static int region_run(int delay)
{
    onnxc_pool *pool = onnxc_team_now.pool;
    region r;
    memset(&r, 0, sizeof r);
    const int resting = onnxc_pool_now_ns() < __atomic_load_n(&pool->rest_until_ns, __ATOMIC_RELAXED);
    r.delay = delay;
    r.wait = !resting;
    r.delay_ns = 80000000;
    onnxc_pool_region(body, &r, 2, NULL);
    if (r.count[0] != 2 || r.count[1] != 2)
        return -1;   /* (every region has its 2 thread numbers, resting or not) */
    return r.tid[1] != tid_now() ? 2 : resting ? 1 : 0;
}

static char state_of(pid_t tid)
{
    char path[64], buf[512];
    snprintf(path, sizeof path, "/proc/self/task/%d/stat", (int)tid);
    FILE *f = fopen(path, "r");
    if (f == NULL)
        return '?';
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = '\0';
    char *p = strrchr(buf, ')');
    return p != NULL && p[1] == ' ' ? p[2] : '?';
}

#define CHECK(cond, what) do { if (!(cond)) { printf("FAILED: %s\n", what); return 1; } } while (0)

/* Runs regions until one has a pool thread run number 1 with `delay` sleeping (at most 50). */
static int late_region(int delay)
{
    for (int i = 0; i < 50; ++i) {
        const int ran = region_run(delay);
        if (ran == 2)
            return 1;
        if (ran == 1)   /* (resting, after late regions of a busy machine's own: wait it out) */
            pause_ns(__atomic_load_n(&((onnxc_pool *)onnxc_team_now.pool)->rest_until_ns, __ATOMIC_RELAXED)
                     - onnxc_pool_now_ns() + 1000000);
    }
    return 0;
}

int main(void)
{
    onnxc_pool *pool = onnxc_pool_new(2);
    CHECK(pool != NULL && pool->count == 1, "a pool of one thread beside the caller");
    onnxc_pool *outer = onnxc_pool_begin(pool);
    CHECK(late_region(-1), "a pool thread runs a share");
    pool->rest_ns = pool->late_ns = 0;   /* (the thread's start may have been late) */
    __atomic_store_n(&pool->rest_until_ns, 0, __ATOMIC_RELAXED);

    /* A pool thread late with its share once: nothing changes; again within the window: the
       pool rests, and its thread sleeps. */
    CHECK(late_region(1), "a late pool thread");
    CHECK(pool->rest_ns == 0 && pool->late_ns > 0 && region_run(-1) == 2, "one late region alone: no rest");
    CHECK(late_region(1), "a late pool thread again");
    CHECK(pool->rest_ns == ONNXC_POOL_REST_MIN_NS, "a first rest of the shortest length");
    CHECK(region_run(-1) == 1, "a region during the rest runs alone");
    char state = '?';
    for (int i = 0; i < 200 && (state = state_of(__atomic_load_n(&pool->tids[0], __ATOMIC_ACQUIRE))) != 'S'; ++i)
        pause_ns(1000000);
    CHECK(state == 'S', "the pool thread sleeps while the pool rests");

    /* After the rest the threads share regions again; late right away (within the window of
       the rest's end): a rest twice as long. */
    pause_ns(pool->rest_until_ns - onnxc_pool_now_ns() + 10000000);
    CHECK(late_region(1), "the pool shares regions after its rest (a late thread again)");
    CHECK(pool->rest_ns == 2 * ONNXC_POOL_REST_MIN_NS, "the next rest twice as long");
    pause_ns(ONNXC_POOL_REST_MIN_NS + 10000000);
    CHECK(region_run(-1) == 1, "still resting after the shortest rest");
    onnxc_pool_end(pool, outer);

    /* A late region a window after the rest, which has not been halved away (no run since):
       the pool rests again at once, twice as long. */
    pause_ns(pool->rest_until_ns - onnxc_pool_now_ns() + ONNXC_POOL_LATE_WINDOW_NS + 10000000);
    outer = onnxc_pool_begin(pool);
    CHECK(late_region(1), "a late region long after the rest");
    CHECK(pool->rest_ns == 4 * ONNXC_POOL_REST_MIN_NS && region_run(-1) == 1, "the last rest not halved away: a rest");
    onnxc_pool_end(pool, outer);

    /* A run whose pool thread ran shares and kept up halves the last rest (tried until a run
       has no late share: on a busy machine one may). */
    int halved = 0, cleared = 0;
    for (int i = 0; i < 20 && !(halved && cleared); ++i) {
        pool->rest_ns = halved ? ONNXC_POOL_REST_MIN_NS : 2 * ONNXC_POOL_REST_MIN_NS;
        __atomic_store_n(&pool->rest_until_ns, 0, __ATOMIC_RELAXED);
        outer = onnxc_pool_begin(pool);
        const int shared = late_region(-1);
        onnxc_pool_end(pool, outer);
        if (shared && !pool->late) {
            CHECK(pool->rest_ns == (halved ? 0 : ONNXC_POOL_REST_MIN_NS), "a run that kept up halves the last rest, the shortest to none");
            cleared = halved;
            halved = 1;
        }
    }
    CHECK(halved && cleared, "runs that keep up");
    __atomic_store_n(&pool->rest_until_ns, 0, __ATOMIC_RELAXED);

    /* A run late at its start (a neighbour's threads spinning after its run), then keeping up
       once its rest is over (they slept), halves the last rest too: rests doubled run after
       run had grown to whole runs on one thread. (Tried until no other share is late.) */
    int kept_up = 0;
    for (int i = 0; i < 10 && !kept_up; ++i) {
        pool->rest_ns = 2 * ONNXC_POOL_REST_MIN_NS;
        __atomic_store_n(&pool->rest_until_ns, 0, __ATOMIC_RELAXED);
        outer = onnxc_pool_begin(pool);
        CHECK(late_region(1), "a run late at its start");
        CHECK(pool->rest_ns == 4 * ONNXC_POOL_REST_MIN_NS, "a rest twice the last");
        pause_ns(pool->rest_until_ns - onnxc_pool_now_ns() + 10000000);
        const int shared = late_region(-1);
        const int64_t late_ns = pool->late_ns;
        onnxc_pool_end(pool, outer);
        if (shared && pool->kept_up_ns > late_ns) {
            CHECK(pool->rest_ns == 2 * ONNXC_POOL_REST_MIN_NS, "kept up after its rest: the last rest halved");
            kept_up = 1;
        }
    }
    CHECK(kept_up, "a run that keeps up after its rest");
    pool->rest_ns = 0;
    __atomic_store_n(&pool->rest_until_ns, 0, __ATOMIC_RELAXED);

    /* With no rest left, a late region a window after the last one: nothing changes. */
    pause_ns(ONNXC_POOL_LATE_WINDOW_NS + 10000000);
    outer = onnxc_pool_begin(pool);
    CHECK(late_region(1), "a late region a window after the last");
    CHECK(pool->rest_ns == 0 && region_run(-1) == 2, "alone, it starts no rest");
    onnxc_pool_end(pool, outer);

    /* The caller late with its share (its core taken while a pool thread ran the other). */
    outer = onnxc_pool_begin(pool);
    pool->late_ns = 0;
    CHECK(late_region(0) && late_region(0), "a late caller, twice");
    CHECK(pool->rest_ns == ONNXC_POOL_REST_MIN_NS && region_run(-1) == 1, "a late caller rests the pool too");
    onnxc_pool_end(pool, outer);
    onnxc_pool_free(pool);
    printf("ok\n");
    return 0;
}
