/* Lower bound on the cost of one Clauset-Moore-Newman move, for the "100x a pure-Python twin"
 * target of bench/test_hrg.py. Never built by the package build; `python bench/test_hrg.py floor`
 * compiles and runs it next to the Python twin.
 *
 *   cc -O3 -march=native hrg_move_floor.c -o hrg_move_floor && ./hrg_move_floor N STEPS REPEATS
 *
 * The chain runs on a graph with no edges, so every proposal has delta = 0 and is accepted, and
 * no move needs a subtree walk or a logarithm: the same case as the twin on an empty graph. Each
 * step keeps only what any implementation of the move must do: a uniform internal node (multiply
 * and shift of a 64-bit word), the root check, the loads of r, its parent s, its children and its
 * sibling, and the rewiring of the pointers with the new leaf count of the inner node. It leaves
 * out everything else the kernel does per step: the secure generator (xoshiro256** here), edge
 * counts, volumes, cached likelihood terms, slot ranges, the Metropolis uniform, best-state
 * logging. Prints the time per step in nanoseconds.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

typedef struct {
    int32_t parent, ch0, ch1, nleaves;
} node_t;

static uint64_t state[4] = {0x9e3779b97f4a7c15u, 0xbf58476d1ce4e5b9u, 0x94d049bb133111ebu, 1u};

static inline uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

static inline uint64_t next_word(void) /* xoshiro256** */
{
    uint64_t out = rotl(state[1] * 5, 7) * 9, t = state[1] << 17;
    state[2] ^= state[0];
    state[3] ^= state[1];
    state[1] ^= state[2];
    state[0] ^= state[3];
    state[2] ^= t;
    state[3] = rotl(state[3], 45);
    return out;
}

static inline int below(uint32_t n) { return (int)(((next_word() >> 32) * (uint64_t)n) >> 32); }

int main(int argc, char **argv)
{
    if (argc != 4) {
        fprintf(stderr, "usage: %s N STEPS REPEATS\n", argv[0]);
        return 2;
    }
    int n = atoi(argv[1]);
    long steps = atol(argv[2]), repeats = atol(argv[3]);
    if (n < 3 || steps < 1 || repeats < 1) {
        fprintf(stderr, "need N >= 3, STEPS >= 1, REPEATS >= 1\n");
        return 2;
    }
    node_t *nd = malloc(sizeof(node_t) * (size_t)(2 * n - 1));
    int *active = malloc(sizeof(int) * (size_t)n);
    for (int i = 0; i < 2 * n - 1; i++) {
        nd[i].parent = nd[i].ch0 = nd[i].ch1 = -1;
        nd[i].nleaves = 1;
    }
    for (int i = 0; i < n; i++) active[i] = i;
    for (int i = 0; i < n - 1; i++) { /* random merges, as the kernel's random start */
        int left = n - i, a = below((uint32_t)left), x = active[a];
        active[a] = active[left - 1];
        int b = below((uint32_t)(left - 1)), y = active[b];
        nd[n + i].ch0 = x;
        nd[n + i].ch1 = y;
        nd[x].parent = nd[y].parent = n + i;
        nd[n + i].nleaves = nd[x].nleaves + nd[y].nleaves;
        active[b] = n + i;
    }
    int root = 2 * n - 2;
    long moved = 0;
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (long rep = 0; rep < repeats; rep++) {
        for (long step = 0; step < steps; step++) {
            uint64_t w = next_word();
            int r = n + (int)(((w >> 32) * (uint64_t)(n - 1)) >> 32);
            if (r == root) continue;
            int s = nd[r].parent, a = nd[r].ch0, b = nd[r].ch1;
            int c = nd[s].ch0 + nd[s].ch1 - r;
            int k = (w & 1) ? a : b, m = a + b - k;
            int g = nd[s].parent, top_leaves = nd[s].nleaves;
            /* s becomes the inner node (k, c); r takes s's place as (s, m). */
            nd[s].ch0 = k;
            nd[s].ch1 = c;
            nd[k].parent = s;
            nd[s].parent = r;
            nd[r].ch0 = s;
            nd[r].ch1 = m;
            nd[r].parent = g;
            if (g < 0)
                root = r;
            else if (nd[g].ch0 == s)
                nd[g].ch0 = r;
            else
                nd[g].ch1 = r;
            nd[r].nleaves = top_leaves;
            nd[s].nleaves = nd[k].nleaves + nd[c].nleaves;
            moved++;
        }
    }
    clock_gettime(CLOCK_MONOTONIC, &t1);
    double ns = (double)(t1.tv_sec - t0.tv_sec) * 1e9 + (double)(t1.tv_nsec - t0.tv_nsec);
    printf("%.3f %ld\n", ns / (double)(steps * repeats), moved);
    free(nd);
    free(active);
    return 0;
}
