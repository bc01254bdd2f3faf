/* Benchmark driver for igraph's HRG fitting (Clauset's fitHRG code inside igraph), used by
 * bench/test_hrg.py when Debian's libigraph-dev is installed. Never built by the package build.
 *
 *   cc -O2 igraph_hrg_driver.c $(pkg-config --cflags --libs igraph) -o igraph_hrg_driver
 *   ./igraph_hrg_driver EDGES N STEPS REPEATS SEED
 *
 * EDGES: text file, two 0-based vertex ids per line. Builds the undirected graph once, then times
 * REPEATS calls of igraph_hrg_fit(graph, hrg, start=false, steps=STEPS): a random start dendrogram
 * and exactly STEPS Metropolis moves at temperature 1, keeping the best dendrogram (what
 * dpcore.graph.fit_hrg does). Prints one line per call: wall seconds (CLOCK_MONOTONIC).
 */
#include <igraph.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + 1e-9 * ts.tv_nsec;
}

int main(int argc, char **argv) {
    if (argc != 6) {
        fprintf(stderr, "usage: %s EDGES N STEPS REPEATS SEED\n", argv[0]);
        return 2;
    }
    igraph_integer_t n = atoll(argv[2]), steps = atoll(argv[3]);
    int repeats = atoi(argv[4]);
    unsigned long seed = strtoul(argv[5], NULL, 10);
    FILE *f = fopen(argv[1], "r");
    if (!f) {
        perror(argv[1]);
        return 1;
    }
    igraph_vector_int_t edges;
    igraph_vector_int_init(&edges, 0);
    long long a, b;
    while (fscanf(f, "%lld %lld", &a, &b) == 2) {
        igraph_vector_int_push_back(&edges, a);
        igraph_vector_int_push_back(&edges, b);
    }
    fclose(f);
    igraph_t g;
    if (igraph_create(&g, &edges, n, IGRAPH_UNDIRECTED) != IGRAPH_SUCCESS) return 1;
    for (int r = 0; r < repeats; r++) {
        igraph_rng_seed(igraph_rng_default(), seed + r);
        igraph_hrg_t hrg;
        igraph_hrg_init(&hrg, n);
        double t0 = now();
        if (igraph_hrg_fit(&g, &hrg, 0, steps) != IGRAPH_SUCCESS) return 1;
        double t1 = now();
        printf("%.9f\n", t1 - t0);
        igraph_hrg_destroy(&hrg);
    }
    igraph_destroy(&g);
    igraph_vector_int_destroy(&edges);
    return 0;
}
